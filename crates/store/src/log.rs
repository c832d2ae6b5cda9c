//! The durable "D" replica type: FAWN-DS's append-only data log with an in-memory hash index (seed 003 §2).
//!
//! - **Segments** (`segment.rs`): the log is a sequence of append-only segment files in one directory; appends
//!   go to the last (active) one, which is synced and sealed when it reaches `LogOptions::segment_bytes`. Log
//!   order is segment order, then offset.
//! - **Index** (`index.rs`): each key's latest value or tombstone, 16 bytes per slot, keys left on disk and
//!   compared on every lookup.
//! - **Hints** ([`crate::hint`]): sealing a segment, or finishing a compaction output, writes a checksummed
//!   hint file listing its index entries, so a restart rebuilds the index from hints and scans only the active
//!   segment (and any segment whose hint is missing or damaged).
//! - **Recovery** (`recovery.rs`): sealed segments are trusted only through their checksums, so a bad record in
//!   one fails the open, naming the file and offset; the active segment is cut back to its last good record,
//!   since a crash can tear it.
//! - **Write buffer** (`write_buffer.rs`): appends to the active segment collect in a user-space buffer of
//!   `LogOptions::write_buffer_bytes` and reach the OS in one write when it fills, on [`Datastore::flush`] and
//!   on `sync`. The buffer sits under the segment's file handle and serves reads of the unflushed tail, so
//!   every reader sees buffered records as if written. It also reserves the active segment's space ahead of
//!   the data, `LogOptions::preallocate_bytes` (1 MiB) at a time, as zeros, so a sync's fdatasync finds the
//!   file's size unchanged and writes no metadata; sealing cuts the zeros off, and recovery takes zeros after
//!   the active segment's last record for the end of the log, not for damage.
//! - **Compaction** (`compaction.rs`): FAWN's Rewrite, done a slice at a time after each `sync`, under the
//!   retention contract of `docs/protocols/chain.md`.
//! - **Range drops** (`dropping.rs`): a [`crate::Body::DropRange`] marker takes its ring range out of the index
//!   at once (reading only the records whose index prefix straddles a boundary of the range) and makes what
//!   it covers dead, so compaction reclaims it without waiting for a watermark. Markers are kept for good, so
//!   recovery, from scans or hints, replays them in log order.
//!
//! A failed write or sync fences the store (it refuses writes until reopened, since the file's tail is then
//! unknown), except a full disk: an append that hits `ENOSPC` is cut back off the file and reported as
//! [`StoreError::Full`], and the store keeps going.

mod append;
mod compaction;
mod dropping;
mod hints;
mod index;
mod indexing;
mod options;
mod reading;
mod recovery;
mod scan;
mod segment;
mod write_buffer;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use compaction::Compactor;
use index::{prefix_of, Index, IndexEntry, Loc};
use meridian_core::ring::key_token;
use meridian_core::SyncJob;
use segment::Segments;

pub use compaction::{CompactionProgress, PassProgress};
pub use options::{CompactionOptions, LogOptions};
pub use recovery::{RecoveryReport, SegmentReport};

use crate::datastore::{Datastore, Durability, LogPos, StoreError, StoreStats};
use crate::record::{Entry, Record};
use crate::vfs::{Background, Vfs, VfsFile};

/// Appends are buffered in this process until a flush, so a process crash loses what was appended since the
/// last `flush` or `sync`. Dropping the store does not flush: a drop is how tests and the simulator model a
/// killed process, and a store dropped after a simulated power cut must not write to the recovered disk.
pub struct LogStore {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    opts: LogOptions,
    segs: Segments,
    index: Index,
    /// The latest ack mark of each chain: the watermark compaction retains by.
    acks: BTreeMap<u32, AckLoc>,
    /// Every range-drop marker in the log, in log order.
    drops: Vec<DropMark>,
    /// The id the next fresh segment gets.
    next_id: u64,
    /// Set when a write or sync fails. The file's tail is unknown from then on (a partial write, or dirty pages
    /// the kernel dropped after a failed fsync), so only reopening, which re-runs recovery, can go on safely.
    failed: bool,
    compactor: Compactor,
    /// How much of the log a completed sync covers ([`Frontier`]), and what the sync under way will.
    synced: Frontier,
    syncing: Option<Frontier>,
    /// Where the last existence check found its key (`Datastore::has_value`), for the append that usually follows
    /// it: a chain head checks a key, then writes it.
    found: RefCell<Found>,
    /// Hint writes and unlinks still running off the core, waited for when the store goes.
    background: Background,
}

/// The durable part of the log: every sealed segment (sealing syncs it) and the first `len` bytes of segment
/// `slot` if it is the active one. Compaction asks it before it lets a record go: with group commit pipelined,
/// its slices run when a sync ends, while records appended since that sync began are not yet durable, and a
/// record that only those supersede (or a range drop among them takes) must outlive a power loss.
#[derive(Clone, Copy, Debug, Default)]
struct Frontier {
    slot: u16,
    len: u64,
    /// The active segment's slot, whatever the frontier is: anything elsewhere is durable.
    active: u16,
}

impl Frontier {
    /// Whether the record at `loc` is durable.
    fn covers(&self, loc: Loc) -> bool {
        loc.seg != self.active || (loc.seg == self.slot && u64::from(loc.offset) + u64::from(loc.len) <= self.len)
    }

    /// How many of `drops`, the store's markers in log order, are durable: the durable part of the log is a
    /// prefix of it.
    fn durable_drops(&self, drops: &[DropMark]) -> usize {
        drops.partition_point(|d| self.covers(d.loc))
    }
}

/// A key, and the slot and entry it was found at.
#[derive(Debug, Default)]
struct Found {
    key: Vec<u8>,
    at: Option<(usize, IndexEntry)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AckLoc {
    seq: u64,
    loc: Loc,
}

/// A range-drop marker: what it takes out of the index, and where it sits in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DropMark {
    chain: u32,
    start_exclusive: u64,
    end_inclusive: u64,
    loc: Loc,
}

impl LogStore {
    /// Opens (creating if needed) the log in `dir` with default options and recovers it; see the module docs.
    pub fn open(vfs: Arc<dyn Vfs>, dir: &Path) -> Result<(LogStore, RecoveryReport), StoreError> {
        LogStore::open_with(vfs, dir, LogOptions::default())
    }

    pub fn open_with(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        opts: LogOptions,
    ) -> Result<(LogStore, RecoveryReport), StoreError> {
        opts.validate()?;
        let mut store = LogStore {
            vfs,
            dir: dir.to_path_buf(),
            opts,
            segs: Segments::default(),
            index: Index::default(),
            acks: BTreeMap::new(),
            drops: Vec::new(),
            next_id: 1,
            failed: false,
            compactor: Compactor::default(),
            synced: Frontier::default(),
            syncing: None,
            found: RefCell::default(),
            background: Background::default(),
        };
        let report = store.recover()?;
        // Recovery leaves the log durable to its end.
        store.synced = store.frontier_now();
        Ok((store, report))
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
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

    /// Hands the active segment's buffered appends to the OS. A full disk leaves them buffered and the file
    /// on a record boundary, so it does not fence the store; any other failure does.
    fn flush_active(&mut self) -> Result<(), StoreError> {
        self.check_healthy()?;
        match self.segs.active_mut().file.flush() {
            Err(e) if e.kind() == io::ErrorKind::StorageFull => Err(StoreError::Full(e)),
            result => self.note_failure(result),
        }
    }

    /// Flushes, then fsyncs, the active segment.
    fn sync_active(&mut self) -> Result<(), StoreError> {
        self.flush_active()?;
        let result = self.segs.active_mut().file.sync();
        self.note_failure(result)?;
        self.synced = self.frontier_now();
        Ok(())
    }

    /// The frontier once everything appended so far is durable.
    fn frontier_now(&self) -> Frontier {
        let active = self.segs.active_slot();
        Frontier { slot: active, len: self.segs.active().len, active }
    }

    /// The durable part of the log as of now: [`LogStore::synced`], with the active segment as it is now.
    fn frontier(&self) -> Frontier {
        Frontier { active: self.segs.active_slot(), ..self.synced }
    }
}

impl Datastore for LogStore {
    /// Writes the record to the active segment (not yet durably), sealing it first if the record would take it
    /// past `segment_bytes`. A value or tombstone first looks its key up, which reads the key's previous record;
    /// a range drop first finds the keys it takes out, which reads the records whose prefix straddles its ends.
    fn append(&mut self, rec: &Record) -> Result<(), StoreError> {
        self.append_record(rec)
    }

    fn append_group(&mut self, recs: &[Record]) -> Result<(), StoreError> {
        debug_assert!(crate::datastore::distinct_keys(recs), "a group names each key once: {recs:?}");
        match recs {
            [] => Ok(()),
            [rec] => self.append_record(rec),
            _ => self.append_group_records(recs),
        }
    }

    /// Reads the key's latest record back from the log, checking its checksum and that it holds this key.
    fn get(&self, key: &[u8]) -> Result<Option<Entry>, StoreError> {
        self.lookup(key)
    }

    /// Reads the key's latest record, as `get` does, and remembers where it found it: the append of the same key
    /// that comes next then does not read the record again.
    fn has_value(&self, key: &[u8]) -> Result<bool, StoreError> {
        let found = self.locate(key, prefix_of(key_token(key)))?;
        let mut last = self.found.borrow_mut();
        last.key.clear();
        last.key.extend_from_slice(key);
        last.at = found.as_ref().map(|&(i, entry, _)| (i, entry));
        Ok(found.is_some_and(|(_, entry, _)| !entry.tombstone))
    }

    /// Flushes and syncs the active segment, then does up to `slice_bytes` of compaction. Compaction failures do
    /// not fail the sync (the log is intact and durable either way); they abandon the pass and show in
    /// [`LogStore::compaction_progress`].
    fn sync(&mut self) -> Result<(), StoreError> {
        self.sync_active()?;
        self.compact_slice();
        Ok(())
    }

    /// The active segment's fsync, taken after its buffered appends reach the OS; a sealed segment was synced
    /// when it was sealed. The compaction that `sync` does after its fsync waits for [`Datastore::end_sync`].
    fn begin_sync(&mut self) -> Result<Option<SyncJob>, StoreError> {
        self.flush_active()?;
        let job = self.segs.active_mut().file.begin_sync();
        self.failed |= job.is_err();
        self.syncing = Some(self.frontier_now());
        Ok(job?)
    }

    fn end_sync(&mut self) {
        if let Some(synced) = self.syncing.take() {
            if synced.active == self.segs.active_slot() {
                self.segs.active_mut().file.job_done();
            }
            self.synced = synced;
        }
        self.compact_slice();
    }

    fn sync_now(&mut self) -> Result<(), StoreError> {
        self.sync_active()?;
        // A job begun before covers less than this fsync did: its end must not move the frontier back.
        if self.syncing.is_some() {
            self.syncing = Some(self.synced);
        }
        Ok(())
    }

    fn maintain_if_idle(&mut self) {
        self.compact_if_idle();
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        self.flush_active()
    }

    fn replay(&self, f: &mut dyn FnMut(Record)) -> Result<(), StoreError> {
        self.replay_segments(f)
    }

    fn stats(&self) -> StoreStats {
        let segs = || self.segs.iter();
        StoreStats {
            live_keys: self.index.live_keys(),
            records: segs().map(|s| s.records).sum(),
            log_bytes: segs().map(|s| s.len).sum(),
            dead_bytes: segs().map(|s| s.dead()).sum(),
            index_bytes: self.index.bytes(),
            segments: self.segs.order().len() as u64,
            compactions: self.compactor.completed(),
        }
    }

    fn durability(&self) -> Durability {
        Durability::Durable
    }

    fn scan_range(&self, start: u64, end: u64, f: &mut dyn FnMut(Bytes, Entry)) -> Result<(), StoreError> {
        self.scan_index(start, end, f)
    }

    fn end_pos(&self) -> LogPos {
        let active = self.segs.active();
        LogPos { segment: active.name.lo, generation: active.name.gen, offset: active.len }
    }

    /// Positions name a segment file, so they stay valid until compaction replaces that segment; then reading
    /// from one fails with [`StoreError::Compacted`] rather than skipping or repeating records.
    fn read_log(&self, from: LogPos, max_bytes: usize) -> Result<(Vec<Record>, LogPos), StoreError> {
        self.read_from(from, max_bytes)
    }
}

impl fmt::Debug for LogStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogStore")
            .field("dir", &self.dir)
            .field("segments", &self.segs)
            .field("keys", &self.index.len())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
