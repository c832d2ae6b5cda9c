//! The read paths: point lookups, replay, ring-range scans and streaming the log from a position.

use bytes::Bytes;
use meridian_core::ring::key_token;

use super::index::prefix_of;
use super::scan::CHUNK;
use super::segment::ReadEnd;
use super::LogStore;
use crate::datastore::{ring_range_contains, LogPos, StoreError};
use crate::hint::TOKEN_PREFIX_BITS;
use crate::record::{Entry, Record};

/// Smallest read `read_log` issues, however few bytes it was asked for.
const STREAM_CHUNK_MIN: usize = 4 << 10;

impl LogStore {
    pub(super) fn lookup(&self, key: &[u8]) -> Result<Option<Entry>, StoreError> {
        let found = self.locate(key, prefix_of(key_token(key)))?;
        Ok(found.and_then(|(_, _, rec)| rec.entry()))
    }

    pub(super) fn replay_segments(&self, f: &mut dyn FnMut(Record)) -> Result<(), StoreError> {
        for seg in self.segs.iter() {
            let end = seg.read_records(0, CHUNK, |rec, _, _| {
                f(rec);
                Ok(true)
            })?;
            if let ReadEnd::Damaged { problem, .. } = end {
                return Err(problem);
            }
        }
        Ok(())
    }

    /// Reads only the records whose index prefix can fall in the range, then checks each key's exact token.
    pub(super) fn scan_index(&self, start: u64, end: u64, f: &mut dyn FnMut(Bytes, Entry)) -> Result<(), StoreError> {
        for entry in self.index.near_range(start, end).filter(|e| prefix_may_be_in_range(e.prefix, start, end)) {
            let rec = self.read_indexed(entry)?;
            if ring_range_contains(start, end, key_token(&rec.key)) {
                let value = rec.entry().expect("read_indexed returns values and tombstones");
                f(rec.key, value);
            }
        }
        Ok(())
    }

    pub(super) fn read_from(&self, from: LogPos, max_bytes: usize) -> Result<(Vec<Record>, LogPos), StoreError> {
        let order = self.segs.order();
        let (mut at, mut offset) = (self.position_in_order(from)?, from.offset);
        let (mut out, mut bytes) = (Vec::new(), 0);
        let chunk = max_bytes.clamp(STREAM_CHUNK_MIN, CHUNK);
        loop {
            let seg = self.segs.get(order[at]);
            let end = seg.read_records(offset, chunk, |rec, _, len| {
                out.push(rec);
                bytes += len as usize;
                Ok(bytes < max_bytes)
            })?;
            offset = match end {
                ReadEnd::Stopped(next) => next,
                ReadEnd::End => seg.len,
                ReadEnd::Damaged { problem, .. } => return Err(problem),
            };
            // A position at the end of a segment is given as the start of the next one, so it stays usable
            // when the segment it would name is compacted away.
            if offset == seg.len && at + 1 < order.len() {
                (at, offset) = (at + 1, 0);
                if bytes < max_bytes {
                    continue;
                }
            }
            let name = self.segs.get(order[at]).name;
            return Ok((out, LogPos { segment: name.lo, generation: name.gen, offset }));
        }
    }

    /// Where in log order the segment `pos` names is, if it still exists and `pos` lies within it.
    fn position_in_order(&self, pos: LogPos) -> Result<usize, StoreError> {
        if pos == LogPos::START {
            return Ok(0);
        }
        let names = |&slot: &u16| {
            let seg = self.segs.get(slot);
            (seg.name.lo, seg.name.gen) == (pos.segment, pos.generation) && pos.offset <= seg.len
        };
        self.segs.order().iter().position(names).ok_or(StoreError::Compacted(pos))
    }
}

/// Whether a key whose token has this index prefix can lie in the ring range `(start, end]`.
pub(super) fn prefix_may_be_in_range(prefix: u64, start: u64, end: u64) -> bool {
    let lo = prefix << (64 - TOKEN_PREFIX_BITS);
    let hi = lo | (u64::MAX >> TOKEN_PREFIX_BITS);
    // Two intervals meet iff one contains the other's first point; the range's first point is start + 1.
    ring_range_contains(start, end, lo) || (lo..=hi).contains(&start.wrapping_add(1))
}

/// Whether every key whose token has this index prefix lies in the ring range `(start, end]`: the whole ring,
/// or a range whose complement `(end, start]` the prefix's tokens miss.
pub(super) fn prefix_inside_range(prefix: u64, start: u64, end: u64) -> bool {
    start == end || !prefix_may_be_in_range(prefix, end, start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::splitmix::SplitMix64;

    #[test]
    fn prefix_filter_never_excludes_a_token_in_range() {
        let mut rng = SplitMix64::new(2);
        for _ in 0..100_000 {
            let token = rng.next_u64();
            let (start, end) = match rng.below(3) {
                0 => (rng.next_u64(), rng.next_u64()),
                1 => (token.wrapping_sub(1 + rng.below(70_000) as u64), token.wrapping_add(rng.below(70_000) as u64)),
                _ => (token.wrapping_add(rng.below(70_000) as u64), token.wrapping_sub(rng.below(70_000) as u64)),
            };
            if ring_range_contains(start, end, token) {
                assert!(prefix_may_be_in_range(prefix_of(token), start, end), "{token} in ({start}, {end}]");
            }
        }
        assert!(!prefix_may_be_in_range(0, 1 << 20, 1 << 21));
        assert!(prefix_may_be_in_range(0, u64::MAX, 0));
    }

    #[test]
    fn a_prefix_is_inside_a_range_exactly_when_all_its_tokens_are() {
        let mut rng = SplitMix64::new(6);
        let width = u64::MAX >> TOKEN_PREFIX_BITS;
        for _ in 0..2000 {
            let lo = rng.next_u64() & !width;
            // Ends near the prefix's interval, so both answers and every boundary come up.
            let mut near = || lo.wrapping_add(rng.below(3 * width as usize) as u64).wrapping_sub(width);
            let (start, end) = (near(), near());
            let all = (lo..=lo | width).all(|t| ring_range_contains(start, end, t));
            assert_eq!(prefix_inside_range(prefix_of(lo), start, end), all, "{lo} in ({start}, {end}]");
        }
        assert!(prefix_inside_range(0, 7, 7));
        assert!(prefix_inside_range(1, 0, u64::MAX));
        assert!(!prefix_inside_range(0, 0, u64::MAX));
    }
}
