//! The "M_b…D" replica type of Flex-KV (seed 003 §6.2, RAMCloud-style buffered logging): every read is served
//! from memory, and the log behind it is fsynced a batch at a time rather than at every `sync`.
//!
//! Design: each append goes to a [`MemStore`] (the copy reads use) and to a [`LogStore`], whose user-space
//! write buffer is the queue of records not yet on disk. `sync` fsyncs the log only once the records appended
//! since the last fsync pass `batch_bytes` or `batch_records`, so acknowledgements rarely wait for the disk;
//! `flush` hands the log's buffer to the OS without an fsync. Keeping the log complete in the process (rather
//! than holding records back from it) lets `replay`, `end_pos` and `read_log` simply be the log's.
//!
//! The loss window: a power loss takes back at most the unsynced batch, the records appended since the last
//! fsync, which is under `batch_bytes` and `batch_records` plus what one caller appended between two `sync`
//! calls. What survives is always a prefix of what was appended, since the log recovers to one.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use meridian_core::SyncJob;

use crate::datastore::{Datastore, Durability, LogPos, StoreError, StoreStats};
use crate::log::{LogOptions, LogStore, RecoveryReport};
use crate::mem::MemStore;
use crate::record::{Entry, Record};
use crate::vfs::Vfs;

/// When a [`BufferedStore`] fsyncs its log: at the first `sync` after either limit is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchOptions {
    pub batch_bytes: u64,
    pub batch_records: u64,
}

impl Default for BatchOptions {
    fn default() -> BatchOptions {
        BatchOptions { batch_bytes: 1 << 20, batch_records: 4096 }
    }
}

pub struct BufferedStore {
    mem: MemStore,
    log: LogStore,
    batch: BatchOptions,
    /// Encoded bytes and records appended since the log's last fsync: the batch a power loss can take.
    unsynced_bytes: u64,
    unsynced_records: u64,
    /// Whether the last `begin_sync` took the log's fsync, whose maintenance `end_sync` then does.
    log_sync_begun: bool,
}

impl BufferedStore {
    /// Opens (creating if needed) the log in `dir`, recovers it, and loads memory from it.
    pub fn open(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        log: LogOptions,
        batch: BatchOptions,
    ) -> Result<(BufferedStore, RecoveryReport), StoreError> {
        let (log, report) = LogStore::open_with(vfs, dir, log)?;
        let mut mem = MemStore::new();
        let mut loaded = Ok(());
        log.replay(&mut |rec| {
            if loaded.is_ok() {
                loaded = mem.append(&rec);
            }
        })?;
        loaded?;
        Ok((BufferedStore { mem, log, batch, unsynced_bytes: 0, unsynced_records: 0, log_sync_begun: false }, report))
    }

    fn batch_full(&self) -> bool {
        self.unsynced_bytes >= self.batch.batch_bytes || self.unsynced_records >= self.batch.batch_records
    }
}

impl Datastore for BufferedStore {
    /// Appends to the log first, so a record the log refuses (a full disk) never shows in memory.
    fn append(&mut self, rec: &Record) -> Result<(), StoreError> {
        self.append_existed(rec).map(drop)
    }

    fn append_group(&mut self, recs: &[Record]) -> Result<(), StoreError> {
        self.log.append_group(recs)?;
        for rec in recs {
            self.mem.append(rec)?;
            self.unsynced_bytes += rec.encoded_len() as u64;
            self.unsynced_records += 1;
        }
        Ok(())
    }

    /// Learns from the memory copy, as `has_value` does, so the log is not asked.
    fn append_existed(&mut self, rec: &Record) -> Result<bool, StoreError> {
        self.log.append(rec)?;
        let existed = self.mem.append_existed(rec)?;
        self.unsynced_bytes += rec.encoded_len() as u64;
        self.unsynced_records += 1;
        Ok(existed)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Entry>, StoreError> {
        self.mem.get(key)
    }

    fn has_value(&self, key: &[u8]) -> Result<bool, StoreError> {
        self.mem.has_value(key)
    }

    /// Fsyncs the log (and lets it compact) only when the unsynced batch is full; see the module docs.
    fn sync(&mut self) -> Result<(), StoreError> {
        if !self.batch_full() {
            return Ok(());
        }
        self.log.sync()?;
        (self.unsynced_bytes, self.unsynced_records) = (0, 0);
        Ok(())
    }

    fn begin_sync(&mut self) -> Result<Option<SyncJob>, StoreError> {
        if !self.batch_full() {
            return Ok(None);
        }
        let job = self.log.begin_sync()?;
        (self.unsynced_bytes, self.unsynced_records, self.log_sync_begun) = (0, 0, true);
        Ok(job)
    }

    /// The log's compaction follows its fsyncs only, as with `sync`.
    fn end_sync(&mut self) {
        if std::mem::take(&mut self.log_sync_begun) {
            self.log.end_sync();
        }
    }

    fn maintain_if_idle(&mut self) {
        self.log.maintain_if_idle()
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        self.log.flush()
    }

    fn replay(&self, f: &mut dyn FnMut(Record)) -> Result<(), StoreError> {
        self.log.replay(f)
    }

    fn stats(&self) -> StoreStats {
        let (mem, log) = (self.mem.stats(), self.log.stats());
        StoreStats { index_bytes: mem.index_bytes + log.index_bytes, ..log }
    }

    fn durability(&self) -> Durability {
        Durability::WindowLoss
    }

    fn scan_range(&self, start: u64, end: u64, f: &mut dyn FnMut(Bytes, Entry)) -> Result<(), StoreError> {
        self.mem.scan_range(start, end, f)
    }

    fn end_pos(&self) -> LogPos {
        self.log.end_pos()
    }

    fn read_log(&self, from: LogPos, max_bytes: usize) -> Result<(Vec<Record>, LogPos), StoreError> {
        self.log.read_log(from, max_bytes)
    }
}

#[cfg(test)]
mod tests;
