//! Segment files: their names, the table of open segments, and checked reads of single records.
//!
//! A segment is named `{lo:016x}-{hi:016x}-g{gen}.seg`. A fresh segment gets the next unused id as both `lo`
//! and `hi`, generation 0; a compaction output replaces a run of segments and is named after the run's
//! `lo`..`hi` with a generation one above theirs. Sorting segments by `lo` gives log order, and a segment
//! whose id range lies within a newer generation's range has been replaced: recovery removes it, which is
//! what makes the rename of a compaction output its commit point. Files ending in `.tmp` are unfinished and
//! removed on recovery.

use std::fmt;

use super::scan::{Scan, READ_ATTEMPTS};
use super::write_buffer::WriteBuffer;
use crate::datastore::StoreError;
use crate::log::index::{Loc, MAX_SEGMENTS};
use crate::record::{decode, Framed, Record};
use crate::vfs::VfsFile;

const SEGMENT_EXT: &str = ".seg";
const HINT_EXT: &str = ".hint";
const TEMP_EXT: &str = ".tmp";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct SegName {
    pub(super) lo: u64,
    pub(super) hi: u64,
    pub(super) gen: u32,
}

/// What a file in a store's directory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FileKind {
    Segment(SegName),
    Hint(SegName),
    Temp,
}

impl SegName {
    pub(super) fn fresh(id: u64) -> SegName {
        SegName { lo: id, hi: id, gen: 0 }
    }

    /// The name of the segment that replaces `run`, consecutive segments in log order.
    pub(super) fn replacing(run: &[SegName]) -> SegName {
        let gen = run.iter().map(|n| n.gen).max().expect("a run has segments") + 1;
        SegName { lo: run[0].lo, hi: run[run.len() - 1].hi, gen }
    }

    pub(super) fn file(&self) -> String {
        format!("{self}{SEGMENT_EXT}")
    }

    pub(super) fn hint_file(&self) -> String {
        format!("{self}{HINT_EXT}")
    }

    pub(super) fn temp(file: &str) -> String {
        format!("{file}{TEMP_EXT}")
    }

    /// Whether `self` replaced `other`.
    pub(super) fn supersedes(&self, other: &SegName) -> bool {
        self.lo <= other.lo && other.hi <= self.hi && self.gen > other.gen
    }

    pub(super) fn classify(file: &str) -> Option<FileKind> {
        if file.ends_with(TEMP_EXT) {
            return Some(FileKind::Temp);
        }
        if let Some(stem) = file.strip_suffix(SEGMENT_EXT) {
            return SegName::parse(stem).map(FileKind::Segment);
        }
        SegName::parse(file.strip_suffix(HINT_EXT)?).map(FileKind::Hint)
    }

    fn parse(stem: &str) -> Option<SegName> {
        let mut parts = stem.split('-');
        let lo = u64::from_str_radix(parts.next().filter(|p| p.len() == 16)?, 16).ok()?;
        let hi = u64::from_str_radix(parts.next().filter(|p| p.len() == 16)?, 16).ok()?;
        let gen = parts.next()?.strip_prefix('g')?.parse().ok()?;
        let name = SegName { lo, hi, gen };
        (parts.next().is_none() && lo <= hi && name.to_string() == stem).then_some(name)
    }
}

impl fmt::Display for SegName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}-{:016x}-g{}", self.lo, self.hi, self.gen)
    }
}

pub(super) struct Segment {
    pub(super) name: SegName,
    pub(super) file: WriteBuffer,
    pub(super) len: u64,
    /// Bytes of records that are the latest of their key, or their chain's latest ack mark.
    pub(super) live: u64,
    pub(super) records: u64,
}

impl Segment {
    /// A segment over `file`, which holds `len` bytes, buffering up to `buffer_bytes` of appends and reserving
    /// space `reserve_step` bytes at a time (0: none).
    pub(super) fn new(
        name: SegName,
        file: Box<dyn VfsFile>,
        len: u64,
        buffer_bytes: usize,
        reserve_step: u64,
    ) -> Segment {
        Segment { name, file: WriteBuffer::new(file, len, buffer_bytes, reserve_step), len, live: 0, records: 0 }
    }

    pub(super) fn dead(&self) -> u64 {
        self.len - self.live
    }

    /// The record at `loc`, checked against its checksum and its expected length; a failing read is retried
    /// before it is reported as corruption.
    pub(super) fn read_record(&self, loc: Loc) -> Result<Record, StoreError> {
        let mut buf = vec![0; loc.len as usize];
        let mut attempt = 1;
        loop {
            self.file.read_exact_at(u64::from(loc.offset), &mut buf)?;
            let result = match decode(&buf) {
                Ok(Some((rec, used))) if used == buf.len() => return Ok(rec),
                Ok(_) => StoreError::corrupt(0, "record does not match its index entry"),
                Err(e) => e,
            };
            if attempt == READ_ATTEMPTS {
                return Err(result.shifted(u64::from(loc.offset)).in_file(&self.name.file()));
            }
            attempt += 1;
        }
    }
}

/// Why [`Segment::read_records`] stopped.
#[derive(Debug)]
pub(super) enum ReadEnd {
    /// The visitor asked to stop; reading can resume at this offset.
    Stopped(u64),
    /// Every record to the end of the segment was visited.
    End,
    /// The record at `at` is damaged or incomplete (after re-reads); the records before it were visited.
    Damaged { at: u64, problem: StoreError },
}

impl Segment {
    /// Passes each record from offset `from` (a record boundary) on to `visit`, with its offset and length,
    /// until `visit` returns false or a record cannot be read; reads `chunk` bytes at a time.
    pub(super) fn read_records(
        &self,
        from: u64,
        chunk: usize,
        mut visit: impl FnMut(Record, u64, u64) -> Result<bool, StoreError>,
    ) -> Result<ReadEnd, StoreError> {
        self.read_framed(from, chunk, |framed, at| visit(framed.rec, at, framed.len as u64))
    }

    /// [`Self::read_records`], with each record's place in its group.
    pub(super) fn read_framed(
        &self,
        from: u64,
        chunk: usize,
        mut visit: impl FnMut(Framed, u64) -> Result<bool, StoreError>,
    ) -> Result<ReadEnd, StoreError> {
        let mut scan = Scan::new(&self.file, from, self.len, chunk);
        loop {
            let at = scan.offset();
            let problem = match scan.next_record() {
                Ok(Some(framed)) => {
                    if visit(framed, at)? {
                        continue;
                    }
                    return Ok(ReadEnd::Stopped(scan.offset()));
                }
                Ok(None) if at == self.len => return Ok(ReadEnd::End),
                Ok(None) => StoreError::corrupt(at, "incomplete record"),
                Err(e @ StoreError::Corrupt { .. }) => e,
                Err(e) => return Err(e),
            };
            return Ok(ReadEnd::Damaged { at, problem: problem.in_file(&self.name.file()) });
        }
    }
}

impl fmt::Debug for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Segment")
            .field("name", &self.name.to_string())
            .field("len", &self.len)
            .field("live", &self.live)
            .field("records", &self.records)
            .finish()
    }
}

/// The open segments: a slot table (index entries name slots) plus the log order of the slots in use. The last
/// segment in order is the active one, the only one appended to.
#[derive(Debug, Default)]
pub(super) struct Segments {
    slots: Vec<Option<Segment>>,
    order: Vec<u16>,
    free: Vec<u16>,
}

impl Segments {
    pub(super) fn has_free_slot(&self) -> bool {
        !self.free.is_empty() || self.slots.len() < MAX_SEGMENTS
    }

    /// Gives `seg` a slot, not yet placed in log order.
    pub(super) fn add(&mut self, seg: Segment) -> Result<u16, StoreError> {
        if let Some(slot) = self.free.pop() {
            self.slots[usize::from(slot)] = Some(seg);
            return Ok(slot);
        }
        if self.slots.len() >= MAX_SEGMENTS {
            let msg = format!("a log store holds at most {MAX_SEGMENTS} segments; raise segment_bytes");
            return Err(std::io::Error::other(msg).into());
        }
        self.slots.push(Some(seg));
        Ok((self.slots.len() - 1) as u16)
    }

    pub(super) fn push_back(&mut self, slot: u16) {
        self.order.push(slot);
    }

    pub(super) fn get(&self, slot: u16) -> &Segment {
        self.slots[usize::from(slot)].as_ref().expect("slot in use")
    }

    pub(super) fn get_mut(&mut self, slot: u16) -> &mut Segment {
        self.slots[usize::from(slot)].as_mut().expect("slot in use")
    }

    /// Slots in log order.
    pub(super) fn order(&self) -> &[u16] {
        &self.order
    }

    /// Every segment but the active one, in log order.
    pub(super) fn sealed(&self) -> &[u16] {
        &self.order[..self.order.len() - 1]
    }

    pub(super) fn active_slot(&self) -> u16 {
        *self.order.last().expect("a log store always has an active segment")
    }

    pub(super) fn active(&self) -> &Segment {
        self.get(self.active_slot())
    }

    pub(super) fn active_mut(&mut self) -> &mut Segment {
        self.get_mut(self.active_slot())
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Segment> + '_ {
        self.order.iter().map(|&slot| self.get(slot))
    }

    /// Replaces the `n` segments at position `at` in log order with slot `with`, freeing their slots; returns
    /// the segments removed.
    pub(super) fn replace_run(&mut self, at: usize, n: usize, with: u16) -> Vec<Segment> {
        let removed: Vec<u16> = self.order.splice(at..at + n, [with]).collect();
        self.free.extend(&removed);
        removed.iter().map(|&slot| self.slots[usize::from(slot)].take().expect("slot in use")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_sort_in_log_order() {
        let names = [SegName::fresh(1), SegName { lo: 2, hi: 9, gen: 3 }, SegName::fresh(u64::MAX)];
        for n in names {
            assert_eq!(SegName::classify(&n.file()), Some(FileKind::Segment(n)));
            assert_eq!(SegName::classify(&n.hint_file()), Some(FileKind::Hint(n)));
            assert_eq!(SegName::classify(&SegName::temp(&n.file())), Some(FileKind::Temp));
        }
        let mut files: Vec<String> = names.iter().rev().map(SegName::file).collect();
        files.sort();
        assert_eq!(files, names.map(|n| n.file()));
        for bad in ["data.log", "1-2-g0.seg", "0000000000000002-0000000000000001-g0.seg", "x.hint"] {
            assert_eq!(SegName::classify(bad), None, "{bad}");
        }
        assert_eq!(SegName::classify("0000000000000001-0000000000000001-g01.seg"), None);
    }

    #[test]
    fn a_replacement_supersedes_exactly_its_run() {
        let run = [SegName { lo: 1, hi: 3, gen: 1 }, SegName::fresh(4), SegName::fresh(5)];
        let out = SegName::replacing(&run);
        assert_eq!(out, SegName { lo: 1, hi: 5, gen: 2 });
        assert!(run.iter().all(|r| out.supersedes(r)));
        assert!(!out.supersedes(&out) && !out.supersedes(&SegName::fresh(6)));
        assert!(!run[0].supersedes(&out));
    }
}
