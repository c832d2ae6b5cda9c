//! What a node keeps about a store's keys beside the store itself, chain by chain: which keys expire and when
//! (every keyspace), and for a cache keyspace every key's write order and size (docs/keyspaces.md, "Expiry
//! and cache mode"). A chain's head reads it to order the deletes of expired keys and, in a cache keyspace,
//! of the least recently written keys once the chain holds more than its share of the memory cap.
//!
//! [`Ledgered`] wraps a datastore and keeps its ledger in step with every record appended, whatever appends it
//! (the data path, a copy, a range drop), and rebuilds it from the store's log when opened. Every member of a
//! chain keeps the same figures for it, since they hold the same history, so a member that becomes head needs
//! no scan.

use bytes::Bytes;
use meridian_core::ring::key_token;
use meridian_core::{Stored, SyncJob};
use meridian_store::{Body, Datastore, Durability, Entry, LogPos, Record, StoreError, StoreStats};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::RangeInclusive;

/// Memory a key costs a node beyond its key and value bytes, for a cache keyspace's cap: the store's entry and
/// index slots, the ledger's own entries and the allocator's headers (estimated; `meridian bench keyspaces`
/// compares the cap with resident memory).
pub const KEY_OVERHEAD: u64 = 256;

#[derive(Clone, Debug)]
struct KeyMeta {
    chain: u32,
    seq: u64,
    bytes: u64,
    expires_ms: Option<u64>,
}

/// One chain's part of the ledger.
#[derive(Debug, Default)]
struct ChainLedger {
    /// Keys that expire, by deadline.
    expiring: BTreeSet<(u64, Bytes)>,
    /// Cache keyspaces: every key by the sequence number of its latest write (several keys share one when one
    /// update wrote them all: RENAME, MSETNX).
    by_seq: BTreeSet<(u64, Bytes)>,
    /// Cache keyspaces: key and value bytes of every key, plus [`KEY_OVERHEAD`] each.
    bytes: u64,
}

impl ChainLedger {
    fn is_empty(&self) -> bool {
        self.expiring.is_empty() && self.by_seq.is_empty()
    }
}

#[derive(Debug, Default)]
pub struct Ledger {
    /// A cache keyspace's ledger tracks every key; any other's only those that expire.
    track_all: bool,
    keys: HashMap<Bytes, KeyMeta>,
    chains: BTreeMap<u32, ChainLedger>,
}

impl Ledger {
    pub fn new(track_all: bool) -> Ledger {
        Ledger { track_all, ..Ledger::default() }
    }

    /// Follows a record appended to the store.
    pub fn apply(&mut self, rec: &Record) {
        match &rec.body {
            Body::Value(raw) => {
                let kept = self.forget(&rec.key);
                let expires_ms = Stored::expiry_of(raw);
                if self.track_all || expires_ms.is_some() {
                    let bytes = (rec.key.len() + Stored::data_len(raw)) as u64 + KEY_OVERHEAD;
                    // The ledger keeps a key for as long as it lives, so in a copy of its own rather than in a
                    // share of whatever buffer its write arrived in (a client's whole command, at the head).
                    let key = kept.unwrap_or_else(|| Bytes::copy_from_slice(&rec.key));
                    self.note(key, KeyMeta { chain: rec.chain, seq: rec.seq, bytes, expires_ms });
                }
            }
            Body::Tombstone => _ = self.forget(&rec.key),
            Body::DropRange { .. } => self.forget_chain(rec.chain),
            Body::Skip | Body::AckMark => {}
        }
    }

    fn note(&mut self, key: Bytes, meta: KeyMeta) {
        let chain = self.chains.entry(meta.chain).or_default();
        if let Some(at) = meta.expires_ms {
            chain.expiring.insert((at, key.clone()));
        }
        if self.track_all {
            chain.by_seq.insert((meta.seq, key.clone()));
            chain.bytes += meta.bytes;
        }
        self.keys.insert(key, meta);
    }

    /// Stops tracking `key`; returns the ledger's copy of it, if it was tracked.
    fn forget(&mut self, key: &[u8]) -> Option<Bytes> {
        // Most keyspaces track no key at all: hashing the key to find it absent would cost every write.
        if self.keys.is_empty() {
            return None;
        }
        let (key, meta) = self.keys.remove_entry(key)?;
        let chain = self.chains.get_mut(&meta.chain).expect("a tracked key's chain is tracked");
        if let Some(at) = meta.expires_ms {
            chain.expiring.remove(&(at, key.clone()));
        }
        if self.track_all {
            chain.by_seq.remove(&(meta.seq, key.clone()));
            chain.bytes -= meta.bytes;
        }
        if chain.is_empty() {
            self.chains.remove(&meta.chain);
        }
        Some(key)
    }

    fn forget_chain(&mut self, chain: u32) {
        let Some(gone) = self.chains.remove(&chain) else { return };
        for (_, key) in gone.by_seq.into_iter().chain(gone.expiring) {
            self.keys.remove(&key);
        }
    }

    /// Up to `max` keys of `chain` whose deadline is at or before `now_ms`, soonest first.
    pub fn due(&self, chain: u32, now_ms: u64, max: usize) -> Vec<Bytes> {
        let Some(c) = self.chains.get(&chain) else { return Vec::new() };
        c.expiring.iter().take_while(|(at, _)| *at <= now_ms).take(max).map(|(_, k)| k.clone()).collect()
    }

    /// Whether a key of `chain` whose ring token is within `tokens` expires at or before `now_ms`.
    pub fn due_within(&self, chain: u32, now_ms: u64, tokens: &RangeInclusive<u64>) -> bool {
        let Some(c) = self.chains.get(&chain) else { return false };
        c.expiring.iter().take_while(|(at, _)| *at <= now_ms).any(|(_, k)| tokens.contains(&key_token(k)))
    }

    /// Whether `key` has a deadline at all: its reads depend on the wall clock.
    pub fn expires(&self, key: &[u8]) -> bool {
        !self.keys.is_empty() && self.keys.get(key).is_some_and(|m| m.expires_ms.is_some())
    }

    /// Whether `key` is tracked as expiring at or before `now_ms`.
    pub fn is_due(&self, key: &[u8], now_ms: u64) -> bool {
        !self.keys.is_empty() && self.keys.get(key).and_then(|m| m.expires_ms).is_some_and(|at| at <= now_ms)
    }

    /// Cache keyspaces: up to `max` keys of `chain`, least recently written first.
    pub fn oldest(&self, chain: u32, max: usize) -> Vec<Bytes> {
        self.chains.get(&chain).map_or(Vec::new(), |c| c.by_seq.iter().take(max).map(|(_, k)| k.clone()).collect())
    }

    /// Cache keyspaces: the memory `chain` holds here, as the cap counts it.
    pub fn chain_bytes(&self, chain: u32) -> u64 {
        self.chains.get(&chain).map_or(0, |c| c.bytes)
    }

    /// Keys that expire, in every chain.
    pub fn expiring(&self) -> usize {
        self.chains.values().map(|c| c.expiring.len()).sum()
    }
}

/// A datastore with its ledger.
pub struct Ledgered {
    store: Box<dyn Datastore>,
    ledger: Ledger,
}

impl Ledgered {
    /// Wraps `store`, building the ledger from what its log holds.
    pub fn open(store: Box<dyn Datastore>, track_all: bool) -> Result<Ledgered, StoreError> {
        let mut ledger = Ledger::new(track_all);
        store.replay(&mut |rec| ledger.apply(&rec))?;
        Ok(Ledgered { store, ledger })
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }
}

impl Datastore for Ledgered {
    fn append(&mut self, rec: &Record) -> Result<(), StoreError> {
        self.store.append(rec)?;
        self.ledger.apply(rec);
        Ok(())
    }

    fn append_group(&mut self, recs: &[Record]) -> Result<(), StoreError> {
        self.store.append_group(recs)?;
        recs.iter().for_each(|rec| self.ledger.apply(rec));
        Ok(())
    }

    fn append_existed(&mut self, rec: &Record) -> Result<bool, StoreError> {
        let existed = self.store.append_existed(rec)?;
        self.ledger.apply(rec);
        Ok(existed)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Entry>, StoreError> {
        self.store.get(key)
    }

    fn has_value(&self, key: &[u8]) -> Result<bool, StoreError> {
        self.store.has_value(key)
    }

    fn sync(&mut self) -> Result<(), StoreError> {
        self.store.sync()
    }

    fn begin_sync(&mut self) -> Result<Option<SyncJob>, StoreError> {
        self.store.begin_sync()
    }

    fn end_sync(&mut self) {
        self.store.end_sync()
    }

    fn sync_now(&mut self) -> Result<(), StoreError> {
        self.store.sync_now()
    }

    fn maintain_if_idle(&mut self) {
        self.store.maintain_if_idle()
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        self.store.flush()
    }

    fn replay(&self, f: &mut dyn FnMut(Record)) -> Result<(), StoreError> {
        self.store.replay(f)
    }

    fn stats(&self) -> StoreStats {
        self.store.stats()
    }

    fn durability(&self) -> Durability {
        self.store.durability()
    }

    fn scan_range(&self, start: u64, end: u64, f: &mut dyn FnMut(Bytes, Entry)) -> Result<(), StoreError> {
        self.store.scan_range(start, end, f)
    }

    fn end_pos(&self) -> LogPos {
        self.store.end_pos()
    }

    fn read_log(&self, from: LogPos, max_bytes: usize) -> Result<(Vec<Record>, LogPos), StoreError> {
        self.store.read_log(from, max_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_store::MemStore;

    fn put(chain: u32, seq: u64, key: &'static str, value: &[u8], expires_ms: Option<u64>) -> Record {
        let body = Body::Value(Stored::wrap(value, expires_ms));
        Record { chain, seq, key: Bytes::from_static(key.as_bytes()), body }
    }

    fn keyed(chain: u32, seq: u64, key: &'static str, body: Body) -> Record {
        Record { chain, seq, key: Bytes::from_static(key.as_bytes()), body }
    }

    #[test]
    fn expiring_keys_follow_puts_deletes_and_drops() {
        let mut l = Ledger::new(false);
        l.apply(&put(1, 1, "a", b"x", Some(100)));
        l.apply(&put(1, 2, "b", b"x", Some(50)));
        l.apply(&put(1, 3, "c", b"x", None));
        l.apply(&put(2, 1, "d", b"x", Some(10)));
        assert_eq!(l.due(1, 100, 10), vec![Bytes::from_static(b"b"), Bytes::from_static(b"a")]);
        assert_eq!(l.due(1, 99, 10), vec![Bytes::from_static(b"b")]);
        assert!(l.is_due(b"d", 10) && !l.is_due(b"c", u64::MAX));
        l.apply(&put(1, 4, "b", b"y", None));
        l.apply(&keyed(1, 5, "a", Body::Tombstone));
        assert!(l.due(1, u64::MAX, 10).is_empty(), "a put without expiry and a delete end them");
        l.apply(&keyed(2, 2, "", Body::DropRange { start_exclusive: 0, end_inclusive: 0 }));
        assert_eq!((l.expiring(), l.keys.len()), (0, 0));
        assert_eq!(l.oldest(1, 10), Vec::<Bytes>::new(), "only a cache ledger tracks every key");
    }

    /// A key the ledger keeps does not hold on to the buffer its write came in, and a rewrite keeps the copy.
    #[test]
    fn kept_keys_are_copies_of_their_own() {
        let mut l = Ledger::new(true);
        let command = Bytes::from(b"SET key value".to_vec());
        let in_command = |k: &Bytes| command.as_ptr_range().contains(&k.as_ptr());
        let body = Body::Value(Stored::wrap(b"value", Some(100)));
        l.apply(&Record { chain: 1, seq: 1, key: command.slice(4..7), body: body.clone() });
        let kept = l.oldest(1, 1).pop().expect("tracked");
        assert_eq!((&kept[..], in_command(&kept)), (&b"key"[..], false));
        l.apply(&Record { chain: 1, seq: 2, key: command.slice(4..7), body });
        assert_eq!(l.oldest(1, 1)[0].as_ptr(), kept.as_ptr(), "the rewrite keeps the ledger's copy");
        assert_eq!(l.due(1, 100, 1)[0].as_ptr(), kept.as_ptr());
    }

    /// One update of several keys (RENAME, MSETNX) writes them all with one sequence number.
    #[test]
    fn a_cache_ledger_keeps_every_key_an_update_of_several_wrote() {
        let mut l = Ledger::new(true);
        l.apply(&put(1, 1, "a", &[0; 10], None));
        l.apply(&put(1, 1, "b", &[0; 10], None));
        assert_eq!(l.oldest(1, 10), vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")]);
        l.apply(&keyed(1, 2, "a", Body::Tombstone));
        l.apply(&keyed(1, 3, "b", Body::Tombstone));
        assert_eq!((l.oldest(1, 10), l.chain_bytes(1)), (vec![], 0));
    }

    #[test]
    fn a_cache_ledger_orders_keys_by_their_last_write_and_counts_bytes() {
        let mut l = Ledger::new(true);
        l.apply(&put(1, 1, "a", &[0; 10], None));
        l.apply(&put(1, 2, "b", &[0; 20], Some(5)));
        l.apply(&put(1, 3, "a", &[0; 30], None));
        assert_eq!(l.oldest(1, 10), vec![Bytes::from_static(b"b"), Bytes::from_static(b"a")]);
        assert_eq!(l.chain_bytes(1), 21 + 31 + 2 * KEY_OVERHEAD);
        l.apply(&keyed(1, 4, "b", Body::Tombstone));
        l.apply(&keyed(1, 5, "", Body::Skip));
        assert_eq!((l.oldest(1, 10), l.chain_bytes(1)), (vec![Bytes::from_static(b"a")], 31 + KEY_OVERHEAD));
        l.apply(&keyed(1, 6, "", Body::DropRange { start_exclusive: 0, end_inclusive: 0 }));
        assert_eq!((l.chain_bytes(1), l.keys.len(), l.chains.len()), (0, 0, 0));
    }

    #[test]
    fn a_wrapped_store_keeps_its_ledger_and_rebuilds_it() {
        let mut store = Ledgered::open(Box::new(MemStore::new()), false).unwrap();
        store.append(&put(3, 1, "k", b"v", Some(7))).unwrap();
        assert_eq!(store.ledger().due(3, 7, 1), vec![Bytes::from_static(b"k")]);
        assert_eq!(store.get(b"k").unwrap().map(|e| e.seq), Some(1));
    }
}
