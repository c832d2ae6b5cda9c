//! Range drops: a [`crate::Body::DropRange`] marker takes every key whose ring token lies in its range out of
//! the index, and forgets its chain's ack watermark, the moment it is appended or recovered. What it took out
//! is then dead, so compaction reclaims it without waiting for a watermark (`compaction/pass.rs`).
//!
//! The marker itself is always live and never compacted away: the records it covers may survive in the log
//! until compaction gets to them, and every recovery, from a scan or from hints, must meet the marker again
//! after them to take them out again.

use meridian_core::ring::key_token;

use super::index::{IndexEntry, Loc};
use super::reading::{prefix_inside_range, prefix_may_be_in_range};
use super::{DropMark, LogStore};
use crate::datastore::{ring_range_contains, StoreError};
use crate::hint::HintDrop;

impl DropMark {
    /// Whether the marker takes out a key with this ring token, if the key's record comes before it.
    pub(super) fn takes(&self, token: u64) -> bool {
        ring_range_contains(self.start_exclusive, self.end_inclusive, token)
    }

    pub(super) fn from_hint(seg: u16, d: &HintDrop) -> DropMark {
        let loc = Loc { seg, offset: d.offset, len: d.len };
        DropMark { chain: d.chain, start_exclusive: d.start_exclusive, end_inclusive: d.end_inclusive, loc }
    }

    /// The marker as a hint lists it, at `loc` (`loc.seg` aside).
    pub(super) fn hint_at(&self, loc: Loc) -> HintDrop {
        let (chain, start_exclusive, end_inclusive) = (self.chain, self.start_exclusive, self.end_inclusive);
        HintDrop { chain, start_exclusive, end_inclusive, offset: loc.offset, len: loc.len }
    }
}

impl LogStore {
    /// The index entries of keys whose ring token lies in `(start, end]`. An entry whose whole prefix interval
    /// lies in the range goes without a read; only one whose interval straddles an end of the range is read,
    /// to check its key's exact token.
    pub(super) fn drop_victims(&self, start: u64, end: u64) -> Result<Vec<IndexEntry>, StoreError> {
        let mut victims = Vec::new();
        for entry in self.index.near_range(start, end).filter(|e| prefix_may_be_in_range(e.prefix, start, end)) {
            if prefix_inside_range(entry.prefix, start, end)
                || ring_range_contains(start, end, key_token(&self.read_indexed(entry)?.key))
            {
                victims.push(entry);
            }
        }
        Ok(victims)
    }

    /// Applies `mark`, which sits at `mark.loc`: takes `victims` (its [`LogStore::drop_victims`]) out of the
    /// index and forgets its chain's watermark, all of which is dead from now on, and counts the marker live.
    pub(super) fn apply_drop(&mut self, mark: DropMark, victims: &[IndexEntry]) {
        for victim in victims {
            let i = self.index.position_of(victim.prefix, victim.loc).expect("a victim is in the index");
            self.index.remove(i);
            self.segs.get_mut(victim.loc.seg).live -= u64::from(victim.loc.len);
        }
        if let Some(old) = self.acks.remove(&mark.chain) {
            self.segs.get_mut(old.loc.seg).live -= u64::from(old.loc.len);
        }
        self.segs.get_mut(mark.loc.seg).live += u64::from(mark.loc.len);
        self.drops.push(mark);
    }
}
