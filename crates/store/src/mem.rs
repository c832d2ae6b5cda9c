//! The volatile "M" replica type of Flex-KV (seed 003 §8): an index with no log behind it.
//!
//! M keeps no history, so there is nothing to replay after a restart and nothing to compact. To stream its
//! contents (pre-copy from an M replica, or merging an M temporary store), it stamps every update with a
//! counter and keeps each key's and each chain watermark's latest update ordered by stamp: `read_log` from a
//! position yields the latest record of everything updated after it, in update order. That is the log with
//! every superseded record compacted away, so a reader applying it ends in M's current state. Range drops are
//! kept in that order for good, like a log store's markers, so a reader that applied a dropped key before the
//! drop still learns that it is gone.
//!
//! Memory per key is what this store is judged on, so its index holds no key twice: each key, with its entry,
//! lives in one slot of a vector, and both the hash table and the stamp order refer to slots by number (4 bytes)
//! instead of holding the 88-byte key-and-entry pairs a `HashMap<Bytes, _>` would, in a table kept up to half
//! empty. The stamp order is a vector in stamp order too, appended to as updates happen: an entry a later update
//! of the same key or watermark superseded is skipped by readers, and squeezed out once such entries are half
//! of it, which costs no more per update than a tree would and a third of the memory.
//!
//! A ring range (a SCAN page, a range drop) is read through a third order, every slot by its key's ring token in
//! a B-tree: a page then costs its own keys, not a pass over the whole store, at about 30 bytes per key (measured
//! with a million keys, `docs/performance-history.md` section 26). Only a new key or a range drop changes it;
//! an overwrite, the common write, does not touch it.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::BuildHasher;
use std::mem::size_of;
use std::ops::Bound;

use bytes::Bytes;
use hashbrown::HashTable;
use meridian_core::ring::key_token;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::datastore::{Datastore, Durability, LogPos, StoreError, StoreStats};
use crate::record::{Body, Entry, Record};

#[derive(Debug)]
pub struct MemStore {
    /// Slot numbers, found by key.
    index: HashTable<u32>,
    /// Each key with its latest entry; a slot whose key was dropped is on `free` until reused.
    slots: Vec<Slot>,
    /// Every indexed slot by its key's ring token.
    by_token: BTreeSet<(u64, u32)>,
    free: Vec<u32>,
    /// Seeds the index's hash, so that clients cannot choose keys that all land in one bucket.
    seed: u64,
    /// Latest ack watermark per chain.
    acks: BTreeMap<u32, Ack>,
    /// Every key and chain above by the stamp of its latest update, and every range drop by its stamp, in stamp
    /// order; among them `stale` entries since superseded.
    by_stamp: Vec<(u64, Latest)>,
    stale: usize,
    /// Every range drop, for good (`Latest::Drop` holds a place here).
    drops: Vec<DropMark>,
    live_keys: u64,
    /// Records appended; the last one's stamp.
    records: u64,
    /// Key and value bytes held.
    payload_bytes: u64,
}

/// Values up to this long are kept in the key's allocation and copied out on reads; longer ones are shared with
/// readers, since copying them would cost more than the allocation saved.
const INLINE_VALUE_MAX: usize = 512;
/// Superseded entries the stamp order may always hold, so a small store is not squeezed at every update.
const SQUEEZE_MIN: usize = 1024;

#[derive(Debug)]
struct Slot {
    /// The key, followed by the value when it is inline: one allocation for both.
    bytes: Box<[u8]>,
    key_len: u32,
    chain: u32,
    seq: u64,
    stamp: u64,
    value: Value,
}

#[derive(Debug)]
enum Value {
    Tombstone,
    Inline,
    Shared(Bytes),
}

impl Slot {
    fn new(key: &[u8], entry: Set, stamp: u64) -> Slot {
        let key_len = u32::try_from(key.len()).expect("keys are bounded by KEY_MAX");
        let (bytes, value) = pack(key, entry.value);
        Slot { bytes, key_len, chain: entry.chain, seq: entry.seq, stamp, value }
    }

    /// Makes `entry` the key's latest, stamped `stamp`.
    fn set(&mut self, key: &[u8], entry: Set, stamp: u64) {
        (self.chain, self.seq, self.stamp) = (entry.chain, entry.seq, stamp);
        match entry.value {
            // An inline value replacing one of the same length (the common overwrite) takes its place in the
            // key's allocation: no allocation, no free, no copy of the key.
            Some(v) if matches!(self.value, Value::Inline) && self.bytes.len() == key.len() + v.len() => {
                self.bytes[key.len()..].copy_from_slice(v);
            }
            value => (self.bytes, self.value) = pack(key, value),
        }
    }

    fn key(&self) -> &[u8] {
        &self.bytes[..self.key_len as usize]
    }

    fn value(&self) -> Option<Bytes> {
        match &self.value {
            Value::Tombstone => None,
            Value::Inline => Some(Bytes::copy_from_slice(&self.bytes[self.key_len as usize..])),
            Value::Shared(value) => Some(value.clone()),
        }
    }

    fn entry(&self) -> Entry {
        Entry { chain: self.chain, seq: self.seq, value: self.value() }
    }

    fn has_value(&self) -> bool {
        !matches!(self.value, Value::Tombstone)
    }

    /// Bytes the key's entry holds: the key and its value.
    fn payload(&self) -> u64 {
        match &self.value {
            Value::Shared(value) => (self.bytes.len() + value.len()) as u64,
            Value::Tombstone | Value::Inline => self.bytes.len() as u64,
        }
    }

    /// Frees the key and value; the slot itself waits on the free list, with a stamp no update has, so the
    /// stamp order's entry for it reads as superseded.
    fn clear(&mut self) {
        (self.bytes, self.value, self.key_len, self.stamp) = (Box::default(), Value::Tombstone, 0, u64::MAX);
    }
}

/// The key's allocation (the key, then the value if it is small enough to live there) and where the value is.
fn pack(key: &[u8], value: Option<&Bytes>) -> (Box<[u8]>, Value) {
    match value {
        None => (Box::from(key), Value::Tombstone),
        Some(v) if v.len() <= INLINE_VALUE_MAX => ([key, &v[..]].concat().into_boxed_slice(), Value::Inline),
        Some(v) => (Box::from(key), Value::Shared(v.clone())),
    }
}

/// What an appended value or tombstone makes its key's latest entry, borrowed from the record: an inline value
/// is only copied, so it is never shared (sharing a `Vec`-backed value allocates its shared count).
#[derive(Clone, Copy)]
struct Set<'a> {
    chain: u32,
    seq: u64,
    value: Option<&'a Bytes>,
}

/// A chain's latest ack watermark, and the stamp of the update that set it.
#[derive(Debug)]
struct Ack {
    seq: u64,
    stamp: u64,
}

#[derive(Debug, Clone, Copy)]
enum Latest {
    Key(u32),
    Ack(u32),
    Drop(u32),
}

#[derive(Debug)]
struct DropMark {
    chain: u32,
    seq: u64,
    start_exclusive: u64,
    end_inclusive: u64,
}

impl Default for MemStore {
    fn default() -> Self {
        MemStore {
            index: HashTable::new(),
            slots: Vec::new(),
            by_token: BTreeSet::new(),
            free: Vec::new(),
            seed: RandomState::new().hash_one(0u8),
            acks: BTreeMap::new(),
            by_stamp: Vec::new(),
            stale: 0,
            drops: Vec::new(),
            live_keys: 0,
            records: 0,
            payload_bytes: 0,
        }
    }
}

impl MemStore {
    pub fn new() -> MemStore {
        MemStore::default()
    }

    fn hash(&self, key: &[u8]) -> u64 {
        xxh3_64_with_seed(key, self.seed)
    }

    fn slot_of(&self, key: &[u8]) -> Option<u32> {
        let slots = &self.slots;
        self.index.find(self.hash(key), |&i| slots[i as usize].key() == key).copied()
    }

    /// Applies an appended record; for a value or tombstone, says whether its key had a value before.
    fn apply(&mut self, rec: &Record) -> Result<Option<bool>, StoreError> {
        rec.check_limits()?;
        self.records += 1;
        let mut existed = None;
        let (chain, seq) = (rec.chain, rec.seq);
        match &rec.body {
            Body::Value(v) => existed = Some(self.set_key(&rec.key, Set { chain, seq, value: Some(v) })),
            Body::Tombstone => existed = Some(self.set_key(&rec.key, Set { chain, seq, value: None })),
            Body::AckMark => self.set_ack(chain, seq),
            Body::Skip => {}
            &Body::DropRange { start_exclusive, end_inclusive } => {
                self.drop_range(chain, seq, start_exclusive, end_inclusive)
            }
        }
        Ok(existed)
    }

    /// Indexes `key`'s new entry and says whether the key had a value before.
    fn set_key(&mut self, key: &Bytes, entry: Set) -> bool {
        let stamp = self.records;
        let mut existed = false;
        let i = match self.slot_of(key) {
            Some(i) => {
                let slot = &mut self.slots[i as usize];
                existed = slot.has_value();
                self.live_keys -= u64::from(existed);
                self.payload_bytes -= slot.payload();
                slot.set(key, entry, stamp);
                self.stale += 1;
                i
            }
            None => self.new_slot(Slot::new(key, entry, stamp)),
        };
        let slot = &self.slots[i as usize];
        self.live_keys += u64::from(slot.has_value());
        self.payload_bytes += slot.payload();
        self.by_stamp.push((stamp, Latest::Key(i)));
        self.squeeze_if_stale();
        existed
    }

    /// Places a key not yet in the store, reusing a dropped key's slot if there is one.
    fn new_slot(&mut self, slot: Slot) -> u32 {
        let (hash, token) = (self.hash(slot.key()), key_token(slot.key()));
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                u32::try_from(self.slots.len() - 1).expect("a memory store holds fewer than 2^32 keys")
            }
        };
        let (slots, seed) = (&self.slots, self.seed);
        self.index.insert_unique(hash, i, |&j| xxh3_64_with_seed(slots[j as usize].key(), seed));
        self.by_token.insert((token, i));
        i
    }

    fn set_ack(&mut self, chain: u32, seq: u64) {
        self.stale += usize::from(self.acks.insert(chain, Ack { seq, stamp: self.records }).is_some());
        self.by_stamp.push((self.records, Latest::Ack(chain)));
        self.squeeze_if_stale();
    }

    /// Forgets every key in the ring range and the chain's watermark, and keeps the drop for streaming.
    fn drop_range(&mut self, chain: u32, seq: u64, start_exclusive: u64, end_inclusive: u64) {
        for (token, i) in self.in_range(start_exclusive, end_inclusive) {
            let hash = self.hash(self.slots[i as usize].key());
            self.index.find_entry(hash, |&j| j == i).expect("every slot in the token order is indexed").remove();
            self.by_token.remove(&(token, i));
            let slot = &mut self.slots[i as usize];
            self.stale += 1;
            self.live_keys -= u64::from(slot.has_value());
            self.payload_bytes -= slot.payload();
            slot.clear();
            self.free.push(i);
        }
        self.stale += usize::from(self.acks.remove(&chain).is_some());
        let drop = u32::try_from(self.drops.len()).expect("fewer than 2^32 range drops");
        self.drops.push(DropMark { chain, seq, start_exclusive, end_inclusive });
        self.by_stamp.push((self.records, Latest::Drop(drop)));
        self.squeeze_if_stale();
    }

    /// The (token, slot) of every key whose ring token lies in `(start_exclusive, end_inclusive]`, a range that
    /// wraps past `u64::MAX` and is the whole ring if its ends are equal ([`crate::datastore::ring_range_contains`]).
    fn in_range(&self, start_exclusive: u64, end_inclusive: u64) -> Vec<(u64, u32)> {
        let after = Bound::Excluded((start_exclusive, u32::MAX));
        let through = Bound::Included((end_inclusive, u32::MAX));
        if start_exclusive < end_inclusive {
            return self.by_token.range((after, through)).copied().collect();
        }
        let high = self.by_token.range((after, Bound::Unbounded));
        high.chain(self.by_token.range((Bound::Unbounded, through))).copied().collect()
    }

    /// Whether the stamp order's entry is still its key's or watermark's latest update.
    fn is_latest(&self, stamp: u64, latest: Latest) -> bool {
        match latest {
            Latest::Key(i) => self.slots[i as usize].stamp == stamp,
            Latest::Ack(chain) => self.acks.get(&chain).is_some_and(|a| a.stamp == stamp),
            Latest::Drop(_) => true,
        }
    }

    /// Drops the superseded entries from the stamp order once they are half of it, so it stays within twice the
    /// live entries at a constant cost per update.
    fn squeeze_if_stale(&mut self) {
        if self.stale < SQUEEZE_MIN || self.stale * 2 < self.by_stamp.len() {
            return;
        }
        let mut order = std::mem::take(&mut self.by_stamp);
        order.retain(|&(stamp, latest)| self.is_latest(stamp, latest));
        order.shrink_to(order.len() * 2);
        self.by_stamp = order;
        self.stale = 0;
    }

    fn record_at(&self, latest: Latest) -> Record {
        match latest {
            Latest::Key(i) => {
                let slot = &self.slots[i as usize];
                let body = slot.value().map_or(Body::Tombstone, Body::Value);
                Record { chain: slot.chain, seq: slot.seq, key: Bytes::copy_from_slice(slot.key()), body }
            }
            Latest::Ack(chain) => {
                let seq = self.acks[&chain].seq;
                Record { chain, seq, key: Bytes::new(), body: Body::AckMark }
            }
            Latest::Drop(i) => {
                let DropMark { chain, seq, start_exclusive, end_inclusive } = self.drops[i as usize];
                Record { chain, seq, key: Bytes::new(), body: Body::DropRange { start_exclusive, end_inclusive } }
            }
        }
    }

    fn pos(stamp: u64) -> LogPos {
        LogPos { offset: stamp, ..LogPos::START }
    }
}

impl Datastore for MemStore {
    fn append(&mut self, rec: &Record) -> Result<(), StoreError> {
        self.apply(rec).map(drop)
    }

    fn append_existed(&mut self, rec: &Record) -> Result<bool, StoreError> {
        match self.apply(rec)? {
            Some(existed) => Ok(existed),
            None => self.has_value(&rec.key),
        }
    }

    fn get(&self, key: &[u8]) -> Result<Option<Entry>, StoreError> {
        Ok(self.slot_of(key).map(|i| self.slots[i as usize].entry()))
    }

    fn has_value(&self, key: &[u8]) -> Result<bool, StoreError> {
        Ok(self.slot_of(key).is_some_and(|i| self.slots[i as usize].has_value()))
    }

    fn sync(&mut self) -> Result<(), StoreError> {
        Ok(())
    }

    fn replay(&self, _f: &mut dyn FnMut(Record)) -> Result<(), StoreError> {
        Ok(())
    }

    /// `index_bytes` approximates the memory held: hash table, slots, the two orders (the token order's B-tree
    /// taken as twice its entries, which section 26 of `docs/performance-history.md` measured), and key and value
    /// bytes.
    fn stats(&self) -> StoreStats {
        let slots = self.index.allocation_size() + self.slots.capacity() * size_of::<Slot>();
        let order =
            self.by_stamp.capacity() * size_of::<(u64, Latest)>() + self.by_token.len() * size_of::<(u64, u32)>() * 2;
        StoreStats {
            live_keys: self.live_keys,
            records: self.records,
            index_bytes: (slots + order) as u64 + self.payload_bytes,
            ..StoreStats::default()
        }
    }

    fn durability(&self) -> Durability {
        Durability::Volatile
    }

    fn scan_range(&self, start: u64, end: u64, f: &mut dyn FnMut(Bytes, Entry)) -> Result<(), StoreError> {
        for (_, i) in self.in_range(start, end) {
            let slot = &self.slots[i as usize];
            f(Bytes::copy_from_slice(slot.key()), slot.entry());
        }
        Ok(())
    }

    fn end_pos(&self) -> LogPos {
        MemStore::pos(self.records)
    }

    fn read_log(&self, from: LogPos, max_bytes: usize) -> Result<(Vec<Record>, LogPos), StoreError> {
        if from.segment != 0 || from.generation != 0 || from.offset > self.records {
            return Err(StoreError::Compacted(from));
        }
        let (mut out, mut bytes) = (Vec::new(), 0);
        let first = self.by_stamp.partition_point(|&(stamp, _)| stamp <= from.offset);
        for &(stamp, latest) in &self.by_stamp[first..] {
            if !self.is_latest(stamp, latest) {
                continue;
            }
            let rec = self.record_at(latest);
            bytes += rec.encoded_len();
            out.push(rec);
            if bytes >= max_bytes {
                return Ok((out, MemStore::pos(stamp)));
            }
        }
        Ok((out, self.end_pos()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::KEY_MAX;

    fn rec(seq: u64, key: &'static str, body: Body) -> Record {
        Record { chain: 1, seq, key: Bytes::from_static(key.as_bytes()), body }
    }

    fn val(v: &'static str) -> Body {
        Body::Value(Bytes::from_static(v.as_bytes()))
    }

    #[test]
    fn append_tells_whether_the_key_had_a_value() {
        crate::datastore::check_append_existed(&mut MemStore::new());
    }

    #[test]
    fn values_tombstones_and_metadata() {
        let mut s = MemStore::new();
        s.append(&rec(1, "a", val("x"))).unwrap();
        s.append(&rec(2, "b", val("y"))).unwrap();
        s.append(&rec(3, "a", Body::Tombstone)).unwrap();
        s.append(&rec(4, "b", Body::Skip)).unwrap();
        s.append(&rec(5, "", Body::AckMark)).unwrap();
        s.sync().unwrap();

        assert_eq!(s.get(b"a").unwrap(), Some(Entry { chain: 1, seq: 3, value: None }));
        assert_eq!(s.get(b"b").unwrap(), Some(Entry { chain: 1, seq: 2, value: Some(Bytes::from_static(b"y")) }));
        assert_eq!(s.get(b"").unwrap(), None);
        let stats = s.stats();
        assert_eq!((stats.live_keys, stats.records, stats.log_bytes, stats.segments), (1, 5, 0, 0));
        assert!(stats.index_bytes > 0);
        let mut replayed = 0;
        s.replay(&mut |_| replayed += 1).unwrap();
        assert_eq!(replayed, 0);
        assert_eq!(s.durability(), Durability::Volatile);
    }

    #[test]
    fn overwrites_of_every_length_and_kind_read_back() {
        let long: &'static str = Box::leak("L".repeat(INLINE_VALUE_MAX + 1).into_boxed_str());
        let bodies = [val("abc"), val("xyz"), val("de"), Body::Tombstone, val(""), val("q"), val(long), val("rst")];
        let mut s = MemStore::new();
        for (seq, body) in (1..).zip(bodies) {
            s.append(&rec(seq, "k", body.clone())).unwrap();
            let value = match body {
                Body::Value(v) => Some(v),
                _ => None,
            };
            assert_eq!(s.has_value(b"k").unwrap(), value.is_some(), "after update {seq}");
            assert_eq!(s.get(b"k").unwrap(), Some(Entry { chain: 1, seq, value }), "after update {seq}");
        }
        assert_eq!(s.payload_bytes, 1 + 3, "the key and its last value are counted once");
        assert!(!s.has_value(b"other").unwrap());
    }

    #[test]
    fn read_log_streams_latest_updates_in_update_order() {
        let mut s = MemStore::new();
        s.append(&rec(1, "a", val("1"))).unwrap();
        s.append(&rec(2, "b", val("2"))).unwrap();
        let mid = s.end_pos();
        s.append(&rec(3, "a", val("3"))).unwrap();
        s.append(&rec(2, "", Body::AckMark)).unwrap();
        s.append(&rec(4, "", Body::Skip)).unwrap();

        let (all, end) = s.read_log(LogPos::START, usize::MAX).unwrap();
        assert_eq!(all, [rec(2, "b", val("2")), rec(3, "a", val("3")), rec(2, "", Body::AckMark)]);
        assert_eq!(end, s.end_pos());
        assert_eq!(s.read_log(end, 10).unwrap(), (vec![], end));
        let (since, _) = s.read_log(mid, usize::MAX).unwrap();
        assert_eq!(since, all[1..]);

        let (first, next) = s.read_log(LogPos::START, 1).unwrap();
        assert_eq!(first, all[..1]);
        let (rest, _) = s.read_log(next, usize::MAX).unwrap();
        assert_eq!(rest, all[1..]);
        let foreign = LogPos { segment: 1, ..LogPos::START };
        assert!(matches!(s.read_log(foreign, 1), Err(StoreError::Compacted(_))));
    }

    #[test]
    fn scan_range_selects_by_ring_token() {
        let mut s = MemStore::new();
        for (i, key) in ["a", "b", "c", "d", "e"].into_iter().enumerate() {
            s.append(&rec(i as u64 + 1, key, val("v"))).unwrap();
        }
        s.append(&rec(9, "e", Body::Tombstone)).unwrap();
        let mut tokens: Vec<(u64, Bytes)> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|k| (key_token(k.as_bytes()), Bytes::from_static(k.as_bytes())))
            .collect();
        tokens.sort();
        let (lo, hi) = (tokens[0].0, tokens[2].0);
        let mut got = Vec::new();
        s.scan_range(lo, hi, &mut |k, _| got.push(k)).unwrap();
        got.sort_by_key(|k| key_token(k));
        assert_eq!(got, [tokens[1].1.clone(), tokens[2].1.clone()]);
        let mut wrapped = 0;
        s.scan_range(hi, lo, &mut |_, _| wrapped += 1).unwrap();
        assert_eq!(wrapped, 3);
        let mut all = 0;
        s.scan_range(7, 7, &mut |_, _| all += 1).unwrap();
        assert_eq!(all, 5);
    }

    /// The token order follows the index through new keys, overwrites, deletes, range drops and reused slots:
    /// every ring range reads exactly the keys a pass over the whole index would.
    #[test]
    fn ring_ranges_read_what_a_pass_over_every_key_would() {
        use crate::datastore::ring_range_contains;
        let mut s = MemStore::new();
        let mut indexed: BTreeMap<Bytes, u64> = BTreeMap::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for seq in 1..3000 {
            let (r, key) = (next(), Bytes::from(format!("k{}", next() % 300)));
            let token = key_token(&key);
            let (start, end) = (next(), next());
            let body = match r % 10 {
                0..=5 => Body::Value(Bytes::from_static(b"v")),
                6..=8 => Body::Tombstone,
                _ => Body::DropRange { start_exclusive: start, end_inclusive: end },
            };
            let key = match body {
                Body::DropRange { .. } => {
                    indexed.retain(|_, t| !ring_range_contains(start, end, *t));
                    Bytes::new()
                }
                _ => {
                    indexed.insert(key.clone(), token);
                    key
                }
            };
            s.append(&Record { chain: 1, seq, key, body }).unwrap();
            let mut got = Vec::new();
            s.scan_range(start, end, &mut |k, _| got.push(k)).unwrap();
            got.sort();
            let want: Vec<Bytes> =
                indexed.iter().filter(|(_, t)| ring_range_contains(start, end, **t)).map(|(k, _)| k.clone()).collect();
            assert_eq!(got, want, "after record {seq}");
        }
        let mut all = 0;
        s.scan_range(3, 3, &mut |_, _| all += 1).unwrap();
        assert_eq!(all, indexed.len());
    }

    fn drop_all(chain: u32) -> Record {
        Record { chain, seq: 0, key: Bytes::new(), body: Body::DropRange { start_exclusive: 5, end_inclusive: 5 } }
    }

    /// The two keys of `keys` with the lowest tokens, and a ring range holding exactly the lower one.
    fn first_of(keys: &[&'static str]) -> ((u64, u64), &'static str, &'static str) {
        let mut by_token: Vec<&'static str> = keys.to_vec();
        by_token.sort_by_key(|k| key_token(k.as_bytes()));
        let lo = key_token(by_token[0].as_bytes());
        ((lo.wrapping_sub(1), lo), by_token[0], by_token[1])
    }

    #[test]
    fn a_range_drop_forgets_its_keys_and_its_chains_watermark() {
        let mut s = MemStore::new();
        for (i, key) in ["a", "b", "c"].into_iter().enumerate() {
            s.append(&rec(i as u64 + 1, key, val("v"))).unwrap();
        }
        s.append(&rec(4, "", Body::AckMark)).unwrap();
        let ((start, end), gone, kept) = first_of(&["a", "b", "c"]);
        let marker = Record { body: Body::DropRange { start_exclusive: start, end_inclusive: end }, ..drop_all(1) };
        s.append(&marker).unwrap();
        assert_eq!(s.get(gone.as_bytes()).unwrap(), None);
        assert!(s.get(kept.as_bytes()).unwrap().is_some());
        let mut scanned = 0;
        s.scan_range(0, 0, &mut |_, _| scanned += 1).unwrap();
        assert_eq!((scanned, s.stats().live_keys, s.stats().records), (2, 2, 5));
        // The stream no longer holds the dropped key or the watermark, but does hold the drop.
        let (all, _) = s.read_log(LogPos::START, usize::MAX).unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all.last(), Some(&marker));

        s.append(&rec(5, gone, val("again"))).unwrap();
        assert_eq!(s.get(gone.as_bytes()).unwrap().and_then(|e| e.value), Some(Bytes::from_static(b"again")));
        assert_eq!(s.stats().live_keys, 3);
    }

    #[test]
    fn a_reader_streaming_past_a_drop_learns_of_it() {
        let mut s = MemStore::new();
        s.append(&rec(1, "a", val("x"))).unwrap();
        let mid = s.end_pos();
        s.append(&drop_all(2)).unwrap();
        s.append(&rec(2, "b", val("y"))).unwrap();
        let (since, _) = s.read_log(mid, usize::MAX).unwrap();
        assert_eq!(since, [drop_all(2), rec(2, "b", val("y"))]);
        assert_eq!((s.get(b"a").unwrap(), s.stats().live_keys), (None, 1));
    }

    #[test]
    fn small_values_live_with_their_key_and_large_ones_are_shared() {
        let mut s = MemStore::new();
        let small = Bytes::from(vec![b's'; INLINE_VALUE_MAX]);
        let large = Bytes::from(vec![b'l'; INLINE_VALUE_MAX + 1]);
        s.append(&Record { chain: 1, seq: 1, key: "k".into(), body: Body::Value(small.clone()) }).unwrap();
        assert_eq!(s.get(b"k").unwrap().and_then(|e| e.value), Some(small.clone()));
        s.append(&Record { chain: 1, seq: 2, key: "k".into(), body: Body::Value(large.clone()) }).unwrap();
        let read = s.get(b"k").unwrap().and_then(|e| e.value).unwrap();
        assert_eq!((read.as_ptr(), read.len()), (large.as_ptr(), large.len()), "a large value is not copied");
        s.append(&Record { chain: 1, seq: 3, key: "k".into(), body: Body::Tombstone }).unwrap();
        assert_eq!(s.get(b"k").unwrap(), Some(Entry { chain: 1, seq: 3, value: None }));
        assert_eq!((s.stats().live_keys, s.payload_bytes), (0, 1), "the tombstone holds only its key");
        let (log, _) = s.read_log(LogPos::START, usize::MAX).unwrap();
        assert_eq!(log, [rec(3, "k", Body::Tombstone)]);
    }

    #[test]
    fn superseded_updates_are_squeezed_out_of_the_stamp_order() {
        let mut s = MemStore::new();
        s.append(&rec(1, "first", val("1"))).unwrap();
        for seq in 2..10_000 {
            s.append(&rec(seq, "hot", val("v"))).unwrap();
            s.append(&rec(seq, "", Body::AckMark)).unwrap();
        }
        assert!(s.by_stamp.len() <= 2 * SQUEEZE_MIN + 3, "{} entries for 3 live ones", s.by_stamp.len());
        let (all, _) = s.read_log(LogPos::START, usize::MAX).unwrap();
        assert_eq!(all, [rec(1, "first", val("1")), rec(9_999, "hot", val("v")), rec(9_999, "", Body::AckMark)]);
    }

    #[test]
    fn enforces_the_log_limits() {
        let mut s = MemStore::new();
        let big = Record { chain: 0, seq: 0, key: vec![0; KEY_MAX + 1].into(), body: Body::Tombstone };
        assert!(matches!(s.append(&big), Err(StoreError::TooLarge(_))));
        assert_eq!(s.stats().records, 0);
    }
}
