//! The in-memory hash index of FAWN-DS: each key's latest record, located by its place in the log.

use std::collections::HashMap;

use bytes::Bytes;

use crate::record::{Body, Entry, Record};

/// Where a key's latest record sits and what it says; the value itself stays on disk.
#[derive(Clone, Copy, Debug)]
pub(super) struct Slot {
    pub(super) offset: u64,
    pub(super) len: u32,
    pub(super) chain: u32,
    pub(super) seq: u64,
    pub(super) tombstone: bool,
}

impl Slot {
    /// The entry for a tombstone, which needs no disk read.
    pub(super) fn deleted(&self) -> Entry {
        Entry { chain: self.chain, seq: self.seq, value: None }
    }

    /// The entry for a value record read back from the log, or `None` if `rec` is not the value record this
    /// slot was made from.
    pub(super) fn entry_from(&self, key: &[u8], rec: Record) -> Option<Entry> {
        let Body::Value(value) = rec.body else {
            return None;
        };
        let same = !self.tombstone && rec.key == key && rec.chain == self.chain && rec.seq == self.seq;
        same.then_some(Entry { chain: self.chain, seq: self.seq, value: Some(value) })
    }
}

#[derive(Debug, Default)]
pub(super) struct Index {
    slots: HashMap<Bytes, Slot>,
    live_keys: u64,
}

impl Index {
    /// Points `rec`'s key at it, if it is a value or tombstone; replication metadata is not indexed.
    pub(super) fn apply(&mut self, rec: &Record, offset: u64, len: u64) {
        let tombstone = match rec.body {
            Body::Value(_) => false,
            Body::Tombstone => true,
            Body::Skip | Body::AckMark => return,
        };
        let len = u32::try_from(len).expect("record lengths are bounded by the key and value limits");
        let slot = Slot { offset, len, chain: rec.chain, seq: rec.seq, tombstone };
        // Copied so the index never pins a larger buffer the caller's key was sliced from (a replication frame).
        let key = Bytes::copy_from_slice(&rec.key);
        let was_live = self.slots.insert(key, slot).is_some_and(|old| !old.tombstone);
        self.live_keys = self.live_keys + u64::from(!tombstone) - u64::from(was_live);
    }

    pub(super) fn get(&self, key: &[u8]) -> Option<&Slot> {
        self.slots.get(key)
    }

    pub(super) fn live_keys(&self) -> u64 {
        self.live_keys
    }
}
