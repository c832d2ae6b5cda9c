//! The in-memory hash index of FAWN-DS: for every key, where its latest value or tombstone sits in the log.
//! Keys themselves stay on disk.
//!
//! An open-addressing table with linear probing, 16 bytes per slot, no pointers:
//!
//! ```text
//! word 0: token_prefix:48 | segment:15 | tombstone:1
//! word 1: offset:32 | len:32
//! ```
//!
//! - `token_prefix` is the top 48 bits of the key's ring token (`meridian_core::ring::key_token`, xxh3). Its top
//!   bits pick the home slot, so the table can double without reading a key from disk; the rest filters
//!   probes, so a lookup reads a record only when 48 bits match. A match is still only a candidate: the
//!   caller reads the record and compares the key, so two keys sharing a prefix are told apart by their
//!   bytes, never by assumption. The prefix also bounds each entry's ring token to a 2^16-wide interval,
//!   which is what lets `scan_range` skip entries outside a ring range without reading them.
//! - `segment` is a slot in the store's segment table (up to 32,767 files), `offset` the record's place in
//!   that file (segments stay under 4 GiB).
//! - `len` lets a lookup read the record in one exact read, and keeps dead-byte accounting exact (replacing an
//!   entry tells how many bytes died) even after a restart from hint files, which never read records.
//! - `tombstone` lets the live-key count and a restart from hints go without reading records.
//!
//! FAWN-DS's entries were 6 bytes (14-bit key fragment, valid and deleted bits, 32-bit offset) because it had
//! one log file, a table that never grew, no range scans and no byte accounting; each of those is a field
//! here. The table grows past 3/4 full, so a key costs 16 / load = 21 to 43 bytes of memory, independent of
//! key and value size; `StoreStats::index_bytes` reports the exact figure.

use crate::hint::TOKEN_PREFIX_BITS;

/// Segment number reserved to mark an empty slot.
const EMPTY_SEGMENT: u16 = 0x7fff;
/// Segment table slots an index entry can name.
pub(super) const MAX_SEGMENTS: usize = EMPTY_SEGMENT as usize;
const MIN_BITS: u32 = 4;

/// Where a record sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Loc {
    pub(super) seg: u16,
    pub(super) offset: u32,
    pub(super) len: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct IndexEntry {
    pub(super) prefix: u64,
    pub(super) loc: Loc,
    pub(super) tombstone: bool,
}

/// The index's view of a ring token.
pub(super) fn prefix_of(token: u64) -> u64 {
    token >> (64 - TOKEN_PREFIX_BITS)
}

#[derive(Clone, Copy)]
struct Slot([u64; 2]);

const EMPTY: Slot = Slot([(EMPTY_SEGMENT as u64) << 1, 0]);

impl Slot {
    fn pack(e: IndexEntry) -> Slot {
        assert!(usize::from(e.loc.seg) < MAX_SEGMENTS && e.prefix >> TOKEN_PREFIX_BITS == 0, "{e:?}");
        let word0 = (e.prefix << 16) | (u64::from(e.loc.seg) << 1) | u64::from(e.tombstone);
        Slot([word0, (u64::from(e.loc.offset) << 32) | u64::from(e.loc.len)])
    }

    fn is_empty(self) -> bool {
        (self.0[0] >> 1) as u16 & EMPTY_SEGMENT == EMPTY_SEGMENT
    }

    fn prefix(self) -> u64 {
        self.0[0] >> 16
    }

    fn unpack(self) -> IndexEntry {
        let [word0, word1] = self.0;
        let loc = Loc { seg: (word0 >> 1) as u16 & EMPTY_SEGMENT, offset: (word1 >> 32) as u32, len: word1 as u32 };
        IndexEntry { prefix: word0 >> 16, loc, tombstone: word0 & 1 == 1 }
    }
}

pub(super) struct Index {
    slots: Vec<Slot>,
    /// log2 of the slot count.
    bits: u32,
    len: usize,
    live: u64,
}

impl Default for Index {
    fn default() -> Index {
        Index { slots: vec![EMPTY; 1 << MIN_BITS], bits: MIN_BITS, len: 0, live: 0 }
    }
}

impl Index {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Entries that are not tombstones.
    pub(super) fn live_keys(&self) -> u64 {
        self.live
    }

    pub(super) fn bytes(&self) -> u64 {
        (self.slots.capacity() * size_of::<Slot>()) as u64
    }

    pub(super) fn entry(&self, i: usize) -> IndexEntry {
        self.slots[i].unpack()
    }

    /// The entry in slot `i`, if it holds one.
    pub(super) fn entry_at(&self, i: usize) -> Option<IndexEntry> {
        self.slots.get(i).filter(|s| !s.is_empty()).map(|s| s.unpack())
    }

    /// Every entry, in table order.
    pub(super) fn iter(&self) -> impl Iterator<Item = IndexEntry> + '_ {
        self.slots.iter().filter(|s| !s.is_empty()).map(|s| s.unpack())
    }

    /// Every entry whose prefix may lie in the ring range `(start, end]`, among others near it for the caller to
    /// filter out. Homes follow tokens and an entry sits in the probe run from its home, so only the slots from
    /// the range's first home through the end of the run at its last home are read: a range of the ring costs
    /// its share of the table, not all of it.
    pub(super) fn near_range(&self, start: u64, end: u64) -> impl Iterator<Item = IndexEntry> + '_ {
        let (size, mask) = (self.slots.len(), self.slots.len() - 1);
        let first = start.wrapping_add(1);
        let (lo, hi) = (self.home(prefix_of(first)), self.home(prefix_of(end)));
        // A range that wraps past the ring's end with both ends in one home covers nearly all of the ring.
        let homes = if first > end && lo == hi { size } else { (hi.wrapping_sub(lo) & mask) + 1 };
        let run = (homes..size).take_while(|&n| !self.slots[(lo + n) & mask].is_empty()).count();
        (0..homes + run).map(move |n| self.slots[(lo + n) & mask]).filter(|s| !s.is_empty()).map(Slot::unpack)
    }

    /// The slots and entries whose prefix is `prefix`: the only ones that can belong to a key with that prefix.
    pub(super) fn candidates(&self, prefix: u64) -> impl Iterator<Item = (usize, IndexEntry)> + '_ {
        self.probe(prefix).filter(move |&(_, s)| s.prefix() == prefix).map(|(i, s)| (i, s.unpack()))
    }

    /// The slot of the entry pointing at `loc`, if any: exact, so it needs no key.
    pub(super) fn position_of(&self, prefix: u64, loc: Loc) -> Option<usize> {
        self.candidates(prefix).find(|(_, e)| e.loc == loc).map(|(i, _)| i)
    }

    /// Adds an entry for a key the caller has checked is not in the index.
    pub(super) fn insert(&mut self, e: IndexEntry) {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        self.place(Slot::pack(e));
        self.len += 1;
        self.live += u64::from(!e.tombstone);
    }

    /// Points slot `i`, which holds the same key's previous entry, at `e`; returns the previous entry.
    pub(super) fn replace(&mut self, i: usize, e: IndexEntry) -> IndexEntry {
        let old = self.slots[i].unpack();
        assert_eq!(old.prefix, e.prefix, "an entry keeps its key");
        self.slots[i] = Slot::pack(e);
        self.live = self.live + u64::from(!e.tombstone) - u64::from(!old.tombstone);
        old
    }

    /// Removes slot `i`'s entry, shifting later members of its probe run back so lookups need no markers.
    pub(super) fn remove(&mut self, i: usize) -> IndexEntry {
        let old = self.slots[i].unpack();
        let mask = self.slots.len() - 1;
        let (mut hole, mut j) = (i, i);
        loop {
            j = (j + 1) & mask;
            if self.slots[j].is_empty() {
                break;
            }
            let home = self.home(self.slots[j].prefix());
            // Slot j may move into the hole only if its home is not cyclically within (hole, j].
            let stays = if hole <= j { hole < home && home <= j } else { hole < home || home <= j };
            if !stays {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
        }
        self.slots[hole] = EMPTY;
        self.len -= 1;
        self.live -= u64::from(!old.tombstone);
        old
    }

    /// How many entries share `prefix`.
    pub(super) fn count_prefix(&self, prefix: u64) -> usize {
        self.candidates(prefix).count()
    }

    fn home(&self, prefix: u64) -> usize {
        (prefix >> (TOKEN_PREFIX_BITS - self.bits)) as usize
    }

    /// Slots from `prefix`'s home to the first empty one: where an entry with that prefix can be.
    fn probe(&self, prefix: u64) -> impl Iterator<Item = (usize, Slot)> + '_ {
        let mask = self.slots.len() - 1;
        let home = self.home(prefix);
        (0..self.slots.len())
            .map(move |n| (home + n) & mask)
            .map(|i| (i, self.slots[i]))
            .take_while(|(_, s)| !s.is_empty())
    }

    fn place(&mut self, slot: Slot) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(slot.prefix());
        while !self.slots[i].is_empty() {
            i = (i + 1) & mask;
        }
        self.slots[i] = slot;
    }

    fn grow(&mut self) {
        assert!(self.bits < TOKEN_PREFIX_BITS, "index full");
        self.bits += 1;
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; 1 << self.bits]);
        for slot in old.into_iter().filter(|s| !s.is_empty()) {
            self.place(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use meridian_core::splitmix::SplitMix64;

    fn entry(prefix: u64, n: u32) -> IndexEntry {
        IndexEntry { prefix, loc: Loc { seg: (n % 7) as u16, offset: n, len: 30 + n }, tombstone: n.is_multiple_of(3) }
    }

    /// Checks the index against a model keyed by (prefix, offset), offsets standing in for keys.
    fn assert_matches(index: &Index, model: &BTreeMap<u32, IndexEntry>) {
        assert_eq!(index.len(), model.len());
        assert_eq!(index.live_keys(), model.values().filter(|e| !e.tombstone).count() as u64);
        for e in model.values() {
            let hits: Vec<IndexEntry> = index.candidates(e.prefix).map(|(_, c)| c).collect();
            assert!(hits.contains(e), "{e:?} missing");
            assert!(index.position_of(e.prefix, e.loc).is_some());
        }
    }

    #[test]
    fn slots_round_trip_every_field() {
        let e = IndexEntry {
            prefix: (1 << 48) - 1,
            loc: Loc { seg: (MAX_SEGMENTS - 1) as u16, offset: u32::MAX, len: u32::MAX },
            tombstone: true,
        };
        let slot = Slot::pack(e);
        assert!(!slot.is_empty() && EMPTY.is_empty());
        assert_eq!(slot.unpack(), e);
        assert!(!Slot::pack(IndexEntry { tombstone: false, ..e }).unpack().tombstone);
    }

    #[test]
    fn random_inserts_replaces_and_removes_match_a_model() {
        let mut rng = SplitMix64::new(1);
        let mut index = Index::default();
        let mut model: BTreeMap<u32, IndexEntry> = BTreeMap::new();
        let mut ids: Vec<u32> = Vec::new();
        for n in 0..20_000u32 {
            // Few distinct prefixes, and prefixes crowded at the top of the range, force long shared probe runs.
            let prefix = match rng.below(3) {
                0 => rng.below(16) as u64,
                1 => (1 << 48) - 1 - rng.below(64) as u64,
                _ => rng.next_u64() >> 16,
            };
            let pick = rng.below(ids.len().max(1));
            match (rng.below(4), ids.get(pick).copied()) {
                (0, Some(k)) => {
                    ids.swap_remove(pick);
                    let old = model.remove(&k).unwrap();
                    let i = index.position_of(old.prefix, old.loc).unwrap();
                    assert_eq!(index.remove(i), old);
                }
                (1, Some(k)) => {
                    let old = model[&k];
                    let new = IndexEntry { loc: Loc { seg: 3, offset: k, len: n }, tombstone: n % 2 == 0, ..old };
                    let i = index.position_of(old.prefix, old.loc).unwrap();
                    assert_eq!(index.replace(i, new), old);
                    model.insert(k, new);
                }
                _ => {
                    let e = entry(prefix, n);
                    index.insert(e);
                    model.insert(n, e);
                    ids.push(n);
                }
            }
            if n % 1000 == 0 {
                assert_ranges_read_what_a_pass_would(&index, &mut rng);
            }
        }
        assert_matches(&index, &model);
        assert_eq!(index.iter().count(), model.len());
        assert!(index.bytes() >= model.len() as u64 * 16 * 4 / 3);
    }

    /// `near_range` misses no entry a pass over the whole table would keep, for ranges that wrap, cover the
    /// whole ring, or end at its ends.
    fn assert_ranges_read_what_a_pass_would(index: &Index, rng: &mut SplitMix64) {
        use super::super::reading::prefix_may_be_in_range;
        let keys = |it: &mut dyn Iterator<Item = IndexEntry>| {
            let mut v: Vec<(u64, u16, u32)> = it.map(|e| (e.prefix, e.loc.seg, e.loc.offset)).collect();
            v.sort_unstable();
            v
        };
        for _ in 0..50 {
            let (a, b) = (rng.next_u64(), rng.next_u64());
            for (start, end) in [(a, b), (a, a), (u64::MAX, b), (a, u64::MAX), (b, 7), (a, a.wrapping_add(1 << 20))] {
                let within = |e: &IndexEntry| prefix_may_be_in_range(e.prefix, start, end);
                let near = keys(&mut index.near_range(start, end).filter(within));
                assert_eq!(near, keys(&mut index.iter().filter(within)), "({start}, {end}]");
            }
        }
    }

    #[test]
    fn shared_prefixes_are_all_candidates() {
        let mut index = Index::default();
        for n in 0..5 {
            index.insert(entry(42, n));
        }
        index.insert(entry(43, 9));
        assert_eq!(index.count_prefix(42), 5);
        assert_eq!(index.candidates(43).map(|(_, e)| e.loc.offset).collect::<Vec<_>>(), [9]);
        assert_eq!(index.count_prefix(44), 0);
    }
}
