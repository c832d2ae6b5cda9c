//! The Flex-KV storage interface (seed 003 §5.3): one trait over memory and disk replicas, so a chain can
//! mix replica types (M-D, D-D, M-M) without the protocol knowing which it talks to.

use std::io;

use crate::record::{Entry, Record};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("storage I/O failed: {0}")]
    Io(#[from] io::Error),
    #[error("corrupt record at offset {offset}: {reason}")]
    Corrupt { offset: u64, reason: String },
    #[error("record too large: {0}")]
    TooLarge(String),
}

impl StoreError {
    pub(crate) fn corrupt(offset: u64, reason: impl Into<String>) -> StoreError {
        StoreError::Corrupt { offset, reason: reason.into() }
    }

    /// Moves a `Corrupt` offset from "relative to a buffer" to "relative to the log", given where the buffer
    /// starts in the log.
    pub(crate) fn shifted(self, base: u64) -> StoreError {
        match self {
            StoreError::Corrupt { offset, reason } => StoreError::Corrupt { offset: base + offset, reason },
            other => other,
        }
    }
}

/// Whether a store's contents survive a crash once `sync` has returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    Volatile,
    Durable,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Keys whose latest record is a value (not a tombstone).
    pub live_keys: u64,
    /// Records held, replication metadata included.
    pub records: u64,
    /// Encoded bytes in the log, synced or not; 0 for a store without a log.
    pub log_bytes: u64,
}

/// The Flex-KV storage interface (seed 003 §5.3): one trait over memory and disk stores.
///
/// Records are applied in the order they are appended: the latest `Value` or `Tombstone` for a key wins.
/// Ordering by sequence number is the replication protocol's job, not the store's.
pub trait Datastore: Send {
    /// Adds a record. Not durable until sync() returns.
    fn append(&mut self, rec: &Record) -> Result<(), StoreError>;
    fn get(&self, key: &[u8]) -> Result<Option<Entry>, StoreError>;
    fn sync(&mut self) -> Result<(), StoreError>;
    /// Calls f with every record the store holds in log order (for a log store: every record that survived
    /// recovery plus those appended since; a mem store keeps no log and replays nothing).
    fn replay(&self, f: &mut dyn FnMut(Record)) -> Result<(), StoreError>;
    fn stats(&self) -> StoreStats;
    fn durability(&self) -> Durability;
}
