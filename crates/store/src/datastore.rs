//! The Flex-KV storage interface (seed 003 §5.3): one trait over memory and disk replicas, so a chain can
//! mix replica types (M-D, D-D, M-M) without the protocol knowing which it talks to.

use std::fmt;
use std::io;

use bytes::Bytes;
use meridian_core::SyncJob;

use crate::record::{Entry, Record};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("storage I/O failed: {0}")]
    Io(io::Error),
    /// The disk is full (`ENOSPC`). Nothing was written; the store stays readable and accepts writes again once
    /// space is available.
    #[error("storage is full: {0}")]
    Full(io::Error),
    /// A checksum or format check failed. For a log store, `reason` names the segment file and `offset` is
    /// within it.
    #[error("corrupt record at offset {offset}: {reason}")]
    Corrupt { offset: u64, reason: String },
    #[error("record too large: {0}")]
    TooLarge(String),
    /// `read_log` was given a position in log that compaction has since rewritten (or that this store never
    /// handed out). Take a fresh [`Datastore::end_pos`], copy the current state with
    /// [`Datastore::scan_range`], then stream from that position.
    #[error("log position {0} is no longer in the log (compacted); restart from a fresh scan")]
    Compacted(LogPos),
}

impl From<io::Error> for StoreError {
    fn from(e: io::Error) -> StoreError {
        match e.kind() {
            io::ErrorKind::StorageFull => StoreError::Full(e),
            _ => StoreError::Io(e),
        }
    }
}

impl StoreError {
    pub(crate) fn corrupt(offset: u64, reason: impl Into<String>) -> StoreError {
        StoreError::Corrupt { offset, reason: reason.into() }
    }

    /// Moves a `Corrupt` offset from "relative to a buffer" to "relative to the file", given where the buffer
    /// starts in the file.
    pub(crate) fn shifted(self, base: u64) -> StoreError {
        match self {
            StoreError::Corrupt { offset, reason } => StoreError::Corrupt { offset: base + offset, reason },
            other => other,
        }
    }

    /// Prefixes a `Corrupt` reason with the file it was found in.
    pub(crate) fn in_file(self, file: &str) -> StoreError {
        match self {
            StoreError::Corrupt { offset, reason } => {
                StoreError::Corrupt { offset, reason: format!("{file}: {reason}") }
            }
            other => other,
        }
    }
}

/// Whether a store's contents survive a crash once `sync` has returned.
///
/// This is the replica-type half of Flex-KV's durability table (seed 003 §6.2, Table 6.2, no backing database);
/// the other half is the update mode the protocol runs:
///
/// | chain            | SU (sync updates) | AUSI (async updates, sync invalidations) | AU (async updates) |
/// |------------------|-------------------|------------------------------------------|--------------------|
/// | M-M              | not durable       | not durable                              | not durable        |
/// | M-(M_b…D)        | window-loss       | window-loss (cognizant of loss)          | window-loss        |
/// | M-D              | durable           | window-loss (cognizant of loss)          | window-loss        |
/// | D-D              | durable           | window-loss (cognizant of loss)          | window-loss        |
///
/// A chain is durable only under SU with at least one `Durable` replica; AUSI is "cognizant of loss" only if
/// the invalidations themselves are written to a `Durable` store synchronously. `M_b…D` is
/// [`crate::BufferedStore`] ([`Durability::WindowLoss`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    Volatile,
    Durable,
    /// A crash loses at most the writes of one window (for [`crate::BufferedStore`], the unsynced batch),
    /// and what survives is a prefix of what was written.
    WindowLoss,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Keys whose latest record is a value (not a tombstone).
    pub live_keys: u64,
    /// Records held, replication metadata included.
    pub records: u64,
    /// Encoded bytes in the log, synced or not; 0 for a store without a log.
    pub log_bytes: u64,
    /// Bytes of `log_bytes` held by superseded records (older versions, skips, older ack marks), which
    /// compaction may reclaim once the chain's ack watermark covers them, and by records a later range drop
    /// took out, which it reclaims at once.
    pub dead_bytes: u64,
    /// Memory held by the in-memory index.
    pub index_bytes: u64,
    /// Log segment files; 0 for a store without a log.
    pub segments: u64,
    /// Compaction passes completed since the store was opened.
    pub compactions: u64,
}

impl StoreStats {
    /// Log bytes that are not dead.
    pub fn live_bytes(&self) -> u64 {
        self.log_bytes - self.dead_bytes
    }
}

/// A place in a store's log, for streaming it from there ([`Datastore::read_log`]). Positions are opaque and
/// only meaningful to the store that handed them out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LogPos {
    pub(crate) segment: u64,
    pub(crate) generation: u32,
    pub(crate) offset: u64,
}

impl LogPos {
    /// The oldest record a store still holds.
    pub const START: LogPos = LogPos { segment: 0, generation: 0, offset: 0 };
}

impl fmt::Display for LogPos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:x}.g{}@{}", self.segment, self.generation, self.offset)
    }
}

/// Whether `token` lies in the ring range `(start_exclusive, end_inclusive]`, which wraps past `u64::MAX`; equal
/// ends mean the whole ring (a single chain owns everything).
pub fn ring_range_contains(start_exclusive: u64, end_inclusive: u64, token: u64) -> bool {
    if start_exclusive < end_inclusive {
        start_exclusive < token && token <= end_inclusive
    } else {
        token > start_exclusive || token <= end_inclusive
    }
}

/// The Flex-KV storage interface (seed 003 §5.3): one trait over memory and disk stores.
///
/// Records are applied in the order they are appended: the latest `Value` or `Tombstone` for a key wins, and a
/// [`Body::DropRange`](crate::Body::DropRange) takes every key of its range out of the index (they read as
/// absent, not deleted) and forgets its chain's ack watermark. Ordering by sequence number is the replication
/// protocol's job, not the store's.
pub trait Datastore: Send {
    /// Adds a record. Not durable until sync() returns.
    fn append(&mut self, rec: &Record) -> Result<(), StoreError>;
    /// Adds `recs`, values, tombstones and skips of distinct keys, as one: a store that comes back from a
    /// crash with what was appended before it ([`Durability::Durable`], [`Durability::WindowLoss`]) comes back
    /// with all of them or none, and a refused group (a record over the limits, a full disk) adds none. Not
    /// durable until sync() returns. A store that keeps nothing across a crash just appends them in turn.
    fn append_group(&mut self, recs: &[Record]) -> Result<(), StoreError> {
        debug_assert!(distinct_keys(recs), "a group names each key once: {recs:?}");
        recs.iter().try_for_each(Record::check_limits)?;
        recs.iter().try_for_each(|rec| self.append(rec))
    }
    fn get(&self, key: &[u8]) -> Result<Option<Entry>, StoreError>;
    /// Whether `key` has a value (is neither absent nor deleted): what `get` would say, without handing the
    /// value over, which a store holding values in memory need not copy.
    fn has_value(&self, key: &[u8]) -> Result<bool, StoreError> {
        Ok(self.get(key)?.is_some_and(|e| e.value.is_some()))
    }
    /// Appends `rec` and says whether its key had a value just before, as `has_value` would have: what a chain
    /// head answers an unconditional SET or DEL with. A store that finds the key's slot as it appends learns
    /// that in the same index lookup.
    fn append_existed(&mut self, rec: &Record) -> Result<bool, StoreError> {
        let existed = self.has_value(&rec.key)?;
        self.append(rec)?;
        Ok(existed)
    }
    /// Makes every append so far durable (for a durable store), then does a bounded amount of maintenance.
    fn sync(&mut self) -> Result<(), StoreError>;
    /// `sync` in two halves ([`meridian_core::Process::begin_sync`]): hands every append so far to the OS and
    /// returns the fsync that makes them durable, to run on any thread while appends go on, or `None` when
    /// none is needed. The caller stops the node if the job fails, so the store may count its appends as
    /// synced once the job is taken. By default the sync runs in place.
    fn begin_sync(&mut self) -> Result<Option<SyncJob>, StoreError> {
        self.sync().map(|()| None)
    }
    /// What `sync` does after its fsync (maintenance), for the caller to call once a job of `begin_sync` has
    /// succeeded.
    fn end_sync(&mut self) {}
    /// Makes every append so far durable at once, without maintenance, even while a job of `begin_sync` is
    /// out: for a caller about to record, elsewhere, something that relies on them (a chain node storing a map
    /// in which it no longer heads a chain it passed updates on early for). Only a store that comes back whole
    /// from a restart ([`Durability::Durable`]) has anything to do; by default it does nothing.
    fn sync_now(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
    /// A bounded amount of maintenance if nothing was appended since the last call and no sync is under way,
    /// for the caller to call on a timer: the log store's compaction, which under writes keeps their pace
    /// (`CompactionOptions::pace`), catches up while the store is idle.
    fn maintain_if_idle(&mut self) {}
    /// Hands everything appended so far to the OS: not durable against power loss, durable against a process
    /// crash (the kernel's page cache survives that). A store that buffers nothing in the process has
    /// nothing to do.
    fn flush(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
    /// Calls f with every record the store holds in log order (for a log store: every record that survived
    /// recovery and compaction plus those appended since, range drops included in their place; a mem store
    /// keeps no log and replays nothing).
    fn replay(&self, f: &mut dyn FnMut(Record)) -> Result<(), StoreError>;
    fn stats(&self) -> StoreStats;
    fn durability(&self) -> Durability;
    /// Calls f with the key and entry of every indexed key whose ring token
    /// (`meridian_core::ring::key_token`) lies in `(start_exclusive, end_inclusive]` (see
    /// [`ring_range_contains`]). Tombstones are included (entry value `None`), so copying a range keeps its
    /// deletes; keys come in no particular order.
    fn scan_range(
        &self,
        start_exclusive: u64,
        end_inclusive: u64,
        f: &mut dyn FnMut(Bytes, Entry),
    ) -> Result<(), StoreError>;
    /// Where the next appended record will go: streaming from here yields exactly what is appended later.
    fn end_pos(&self) -> LogPos;
    /// Records from `from` on, in log order, about `max_bytes` of them (at least one if any), and the position
    /// after the last one returned. An empty batch means `from` is the end. Fails with
    /// [`StoreError::Compacted`] if `from` no longer exists.
    fn read_log(&self, from: LogPos, max_bytes: usize) -> Result<(Vec<Record>, LogPos), StoreError>;
}

/// Whether no two of `recs` name the same key, as a group's records must ([`Datastore::append_group`]).
pub(crate) fn distinct_keys(recs: &[Record]) -> bool {
    let mut keys: Vec<&[u8]> = recs.iter().map(|r| &r.key[..]).collect();
    keys.sort_unstable();
    keys.windows(2).all(|w| w[0] != w[1])
}

/// Checks a store's [`Datastore::append_existed`] against what `has_value` says before each append: absent,
/// put, overwritten, deleted, deleted again, skipped, put back, and out of the index by a range drop.
#[cfg(test)]
pub(crate) fn check_append_existed(store: &mut dyn Datastore) {
    use crate::Body;
    let value = || Body::Value(Bytes::from_static(b"v"));
    let bodies = [value(), value(), Body::Tombstone, Body::Tombstone, Body::Skip, value(), value()];
    for (seq, body) in (1..).zip(bodies) {
        let rec = Record { chain: 1, seq, key: Bytes::from_static(b"k"), body };
        let before = store.has_value(b"k").unwrap();
        assert_eq!(store.append_existed(&rec).unwrap(), before, "{rec:?}");
        assert_eq!(store.has_value(b"k").unwrap(), store.get(b"k").unwrap().is_some_and(|e| e.value.is_some()));
    }
    let everything = Body::DropRange { start_exclusive: 0, end_inclusive: u64::MAX };
    store.append(&Record { chain: 1, seq: 8, key: Bytes::new(), body: everything }).unwrap();
    let put = Record { chain: 1, seq: 9, key: Bytes::from_static(b"k"), body: value() };
    assert!(!store.append_existed(&put).unwrap(), "a dropped key is absent");
    assert!(store.append_existed(&Record { seq: 10, ..put }).unwrap());
}
