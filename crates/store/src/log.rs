//! The durable "D" replica type: FAWN-DS's append-only data log with an in-memory hash index (seed 003 §2).
//!
//! Everything lives in one file, `data.log`, as a sequence of [`crate::record`] encodings; the index maps each
//! key to the offset of its latest value or tombstone. On open, recovery scans the log from the start and
//! truncates it after the last record that decodes and checksums, so a torn tail from a crash is dropped and
//! new appends never follow garbage.

mod index;
mod scan;

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

use index::Index;
use scan::Scan;

use crate::datastore::{Datastore, Durability, StoreError, StoreStats};
use crate::record::{decode, encode, Entry, Record};
use crate::vfs::{Vfs, VfsFile};

const FILE_NAME: &str = "data.log";

/// Each append is written straight to the file rather than buffered here: the page cache already batches
/// writes, `sync` stays the one durability point, and a simulated crash can then tear the log at any record,
/// which is what recovery has to survive.
pub struct LogStore {
    file: Box<dyn VfsFile>,
    index: Index,
    /// Length of the log: where the next record goes.
    end: u64,
    records: u64,
    /// Set when a write or sync fails. The file's tail is unknown from then on (a partial write, or dirty pages
    /// the kernel dropped after a failed fsync), so only reopening, which re-runs recovery, can go on safely.
    failed: bool,
}

/// What recovery found when a [`LogStore`] was opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Records kept, replication metadata included.
    pub records: u64,
    pub kept_bytes: u64,
    /// Bytes after the last good record, now truncated away.
    pub dropped_bytes: u64,
    /// Why the scan stopped before the end of the file; `None` if the whole file was good.
    pub reason: Option<String>,
}

impl LogStore {
    /// Opens (creating if needed) the log in `dir` and recovers it; see the module docs.
    pub fn open(vfs: Arc<dyn Vfs>, dir: &Path) -> Result<(LogStore, RecoveryReport), StoreError> {
        vfs.create_dir_all(dir)?;
        let file = vfs.open(&dir.join(FILE_NAME))?;
        let mut store = LogStore { file, index: Index::default(), end: 0, records: 0, failed: false };
        let report = store.recover()?;
        Ok((store, report))
    }

    fn recover(&mut self) -> Result<RecoveryReport, StoreError> {
        let len = self.file.len()?;
        let mut scan = Scan::new(&*self.file, len);
        let reason = loop {
            let offset = scan.offset();
            match scan.next_record() {
                Ok(Some((rec, rec_len))) => {
                    self.index.apply(&rec, offset, rec_len);
                    self.records += 1;
                }
                Ok(None) if offset == len => break None,
                Ok(None) => break Some(format!("incomplete record at offset {offset}")),
                Err(e @ StoreError::Corrupt { .. }) => break Some(e.to_string()),
                Err(e) => return Err(e),
            }
        };
        let kept = scan.offset();
        if kept < len {
            self.file.truncate(kept)?;
        }
        self.end = kept;
        Ok(RecoveryReport { records: self.records, kept_bytes: kept, dropped_bytes: len - kept, reason })
    }

    fn check_healthy(&self) -> Result<(), StoreError> {
        if self.failed {
            return Err(io::Error::other("an earlier write or sync of this log failed; reopen it to recover").into());
        }
        Ok(())
    }

    fn note_failure(&mut self, result: io::Result<()>) -> Result<(), StoreError> {
        self.failed |= result.is_err();
        Ok(result?)
    }

    /// The encoded record at `offset`.
    fn read(&self, offset: u64, len: u32) -> Result<Vec<u8>, StoreError> {
        let mut buf = vec![0; len as usize];
        self.file.read_exact_at(offset, &mut buf)?;
        Ok(buf)
    }
}

impl Datastore for LogStore {
    /// Writes the record to the log (not yet durably). After a failed write or sync the store refuses appends
    /// until reopened.
    fn append(&mut self, rec: &Record) -> Result<(), StoreError> {
        self.check_healthy()?;
        let mut encoded = Vec::new();
        encode(rec, &mut encoded)?;
        let result = self.file.append(&encoded);
        self.note_failure(result)?;
        let len = encoded.len() as u64;
        self.index.apply(rec, self.end, len);
        self.end += len;
        self.records += 1;
        Ok(())
    }

    /// Reads a value back from the log, checking its checksum and that it is the record the index expects.
    fn get(&self, key: &[u8]) -> Result<Option<Entry>, StoreError> {
        let Some(slot) = self.index.get(key) else {
            return Ok(None);
        };
        if slot.tombstone {
            return Ok(Some(slot.deleted()));
        }
        let bytes = self.read(slot.offset, slot.len)?;
        let entry = match decode(&bytes).map_err(|e| e.shifted(slot.offset))? {
            Some((rec, len)) if len == bytes.len() => slot.entry_from(key, rec),
            _ => None,
        };
        let mismatch = || StoreError::corrupt(slot.offset, "record does not match its index entry");
        entry.map(Some).ok_or_else(mismatch)
    }

    fn sync(&mut self) -> Result<(), StoreError> {
        self.check_healthy()?;
        let result = self.file.sync();
        self.note_failure(result)
    }

    fn replay(&self, f: &mut dyn FnMut(Record)) -> Result<(), StoreError> {
        let mut scan = Scan::new(&*self.file, self.end);
        while let Some((rec, _)) = scan.next_record()? {
            f(rec);
        }
        if scan.offset() != self.end {
            return Err(StoreError::corrupt(scan.offset(), "incomplete record inside the log"));
        }
        Ok(())
    }

    fn stats(&self) -> StoreStats {
        StoreStats { live_keys: self.index.live_keys(), records: self.records, log_bytes: self.end }
    }

    fn durability(&self) -> Durability {
        Durability::Durable
    }
}

impl fmt::Debug for LogStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogStore")
            .field("file", &self.file)
            .field("end", &self.end)
            .field("records", &self.records)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
