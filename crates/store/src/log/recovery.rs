//! Opening a log store: tidying its directory after a crash, then rebuilding the index.
//!
//! 0. A `data.log` from before logs had segments is renamed to be the first segment.
//! 1. Files ending in `.tmp` (an unfinished compaction output or hint) are removed, as are segments a
//!    compaction output replaced (its rename committed the pass, but the crash came before the inputs were
//!    deleted), hints without a segment, and the active segment's hint (the active segment is always scanned).
//! 2. Sealed segments, in log order, load their index entries from their hint; a missing hint, or one that
//!    fails its checks, falls back to scanning the segment. Either way range drops are applied in log order,
//!    taking out what precedes them. Sealed segments were synced before the next one was created, so a record
//!    in one that does not checksum is corruption outside the fault model: the open fails, naming the file and
//!    offset, instead of silently dropping what follows.
//! 3. The active segment is scanned up to its first torn or damaged record (re-read before it is believed, so a
//!    flipped read does not cost good records) and truncated there.
//! 4. Sealed segments that had no usable hint get one (after syncing the active segment, whose records the
//!    hint may rely on), so the next open is fast.

use std::collections::BTreeSet;
use std::io;

use super::index::{IndexEntry, Loc};
use super::scan::CHUNK;
use super::segment::{FileKind, ReadEnd, SegName};
use super::{AckLoc, DropMark, LogStore};
use crate::datastore::StoreError;
use crate::hint::{Hint, HintAck, HintEntry};
use crate::vfs::VfsFile;

/// The single log file of stores written before logs had segments.
const LEGACY_LOG: &str = "data.log";

/// What recovery found when a [`LogStore`] was opened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Records kept, replication metadata included.
    pub records: u64,
    pub kept_bytes: u64,
    /// Bytes cut off the end of the active segment (a torn tail).
    pub dropped_bytes: u64,
    /// Why the active segment was cut; `None` if it was whole.
    pub reason: Option<String>,
    /// Every segment, in log order.
    pub segments: Vec<SegmentReport>,
    /// Files removed: unfinished compaction outputs and hints, replaced segments, stray hints.
    pub removed_files: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentReport {
    pub file: String,
    /// Bytes kept.
    pub bytes: u64,
    pub records: u64,
    /// Whether the index entries came from the hint file rather than a scan.
    pub from_hint: bool,
    pub dropped_bytes: u64,
    /// Why the hint was not used, or why the segment was cut.
    pub note: Option<String>,
}

impl RecoveryReport {
    fn new(segments: Vec<SegmentReport>, removed_files: Vec<String>) -> RecoveryReport {
        let active = segments.last().filter(|s| s.dropped_bytes > 0);
        RecoveryReport {
            records: segments.iter().map(|s| s.records).sum(),
            kept_bytes: segments.iter().map(|s| s.bytes).sum(),
            dropped_bytes: segments.iter().map(|s| s.dropped_bytes).sum(),
            reason: active.and_then(|s| s.note.clone()),
            segments,
            removed_files,
        }
    }
}

/// The end of the last non-zero byte of `file` in `from..to`, or `from` if there is none.
fn nonzero_end(file: &dyn VfsFile, from: u64, to: u64) -> io::Result<u64> {
    let mut buf = vec![0; (to.saturating_sub(from)).min(CHUNK as u64) as usize];
    let (mut at, mut end) = (from, from);
    while at < to {
        let n = (to - at).min(CHUNK as u64) as usize;
        file.read_exact_at(at, &mut buf[..n])?;
        if let Some(last) = buf[..n].iter().rposition(|&b| b != 0) {
            end = at + last as u64 + 1;
        }
        at += n as u64;
    }
    Ok(end)
}

/// What the directory listing says to do.
#[derive(Debug, Default, PartialEq, Eq)]
struct Plan {
    remove: Vec<String>,
    /// Segments to open, in log order, and whether each has a hint to load.
    segments: Vec<(SegName, bool)>,
    next_id: u64,
}

fn plan(files: &[String]) -> Plan {
    let (mut segments, mut hints, mut remove) = (Vec::new(), BTreeSet::new(), Vec::new());
    for file in files {
        match SegName::classify(file) {
            Some(FileKind::Temp) => remove.push(file.clone()),
            Some(FileKind::Segment(name)) => segments.push(name),
            Some(FileKind::Hint(name)) => {
                hints.insert(name);
            }
            None => {}
        }
    }
    let next_id = segments.iter().map(|n| n.hi + 1).max().unwrap_or(1);
    let all = segments.clone();
    segments.retain(|n| !all.iter().any(|newer| newer.supersedes(n)));
    segments.sort();
    remove.extend(all.iter().filter(|n| !segments.contains(n)).map(SegName::file));
    let active = segments.last().copied();
    remove.extend(hints.iter().filter(|&h| Some(*h) == active || !segments.contains(h)).map(SegName::hint_file));
    let segments = segments.into_iter().map(|n| (n, Some(n) != active && hints.contains(&n))).collect();
    Plan { remove, segments, next_id }
}

impl LogStore {
    pub(super) fn recover(&mut self) -> Result<RecoveryReport, StoreError> {
        self.vfs.create_dir_all(&self.dir)?;
        let mut files = self.vfs.list_files(&self.dir)?;
        self.adopt_legacy_log(&mut files)?;
        let plan = plan(&files);
        for file in &plan.remove {
            self.vfs.remove_file(&self.path(file))?;
        }
        self.next_id = plan.next_id;
        let segments = self.load_segments(&plan.segments)?;
        Ok(RecoveryReport::new(segments, plan.remove))
    }

    /// A store written before logs had segments kept everything in one file of the same record format: it
    /// becomes the first segment.
    fn adopt_legacy_log(&self, files: &mut Vec<String>) -> Result<(), StoreError> {
        if !files.iter().any(|f| f == LEGACY_LOG) {
            return Ok(());
        }
        if files.iter().any(|f| matches!(SegName::classify(f), Some(FileKind::Segment(_)))) {
            let msg = format!("{} holds both {LEGACY_LOG} and log segments", self.dir.display());
            return Err(io::Error::new(io::ErrorKind::InvalidData, msg).into());
        }
        let first = SegName::fresh(1).file();
        self.vfs.rename(&self.path(LEGACY_LOG), &self.path(&first))?;
        files.retain(|f| f != LEGACY_LOG);
        files.push(first);
        Ok(())
    }

    /// Opens and indexes `segments` (all but the last sealed), starting a fresh segment if there are none.
    fn load_segments(&mut self, segments: &[(SegName, bool)]) -> Result<Vec<SegmentReport>, StoreError> {
        let (mut reports, mut scanned) = (Vec::new(), Vec::new());
        for (i, &(name, has_hint)) in segments.iter().enumerate() {
            let file = self.vfs.open(&self.path(&name.file()))?;
            let len = file.len()?;
            let slot = self.segs.add(self.opts.segment(name, file, len))?;
            self.segs.push_back(slot);
            let sealed = i + 1 < segments.len();
            let report = if sealed { self.recover_sealed(slot, has_hint)? } else { self.recover_active(slot)? };
            if sealed && !report.from_hint {
                scanned.push(slot);
            }
            reports.push(report);
        }
        if segments.is_empty() {
            self.start_segment()?;
        }
        if !scanned.is_empty() {
            // A hint leaves out records superseded by later ones, which after a process crash may sit in the
            // page cache only: make them durable first, or losing them would also lose what they superseded.
            self.segs.active_mut().file.sync()?;
            for slot in scanned {
                self.write_hint(slot);
            }
        }
        Ok(reports)
    }

    fn recover_sealed(&mut self, slot: u16, has_hint: bool) -> Result<SegmentReport, StoreError> {
        let (name, len) = (self.segs.get(slot).name, self.segs.get(slot).len);
        let mut note = None;
        if has_hint {
            match self.read_hint(&name) {
                Ok(hint) if hint.segment_len == len => {
                    self.apply_hint(slot, &hint)?;
                    return Ok(self.segment_report(slot, true, 0, None));
                }
                // A sealed segment never changes after its hint is written, so it has lost or gained bytes.
                Ok(hint) => {
                    let reason = format!("the segment has {len} bytes but its hint says {}", hint.segment_len);
                    return Err(StoreError::corrupt(len.min(hint.segment_len), reason).in_file(&name.file()));
                }
                Err(e) => note = Some(format!("hint not used: {e}")),
            }
        }
        if let Some((_, problem)) = self.scan_into_index(slot)? {
            return Err(problem);
        }
        Ok(self.segment_report(slot, false, 0, note))
    }

    /// Cuts the active segment after its last good record. Zeros there are the space reserved ahead of the
    /// data (`LogOptions::preallocate_bytes`), not damage: only what precedes them counts as dropped.
    fn recover_active(&mut self, slot: u16) -> Result<SegmentReport, StoreError> {
        let Some((kept, problem)) = self.scan_into_index(slot)? else {
            return Ok(self.segment_report(slot, false, 0, None));
        };
        let seg = self.segs.get_mut(slot);
        let dropped = nonzero_end(&seg.file, kept, seg.len)? - kept;
        seg.file.truncate(kept)?;
        seg.len = kept;
        let note = (dropped > 0).then(|| problem.to_string());
        Ok(self.segment_report(slot, false, dropped, note))
    }

    fn segment_report(&self, slot: u16, from_hint: bool, dropped_bytes: u64, note: Option<String>) -> SegmentReport {
        let seg = self.segs.get(slot);
        SegmentReport { file: seg.name.file(), bytes: seg.len, records: seg.records, from_hint, dropped_bytes, note }
    }

    /// Indexes segment `slot`'s records in order; returns where and why it stopped if a record was damaged or
    /// the segment ends inside a group. A group's records are indexed only once its last one is read, so a
    /// group cut off by a crash leaves no trace in the index and is cut off the segment with the rest.
    fn scan_into_index(&mut self, slot: u16) -> Result<Option<(u64, StoreError)>, StoreError> {
        let (mut from, mut group) = (0, Vec::new());
        loop {
            let (mut batch, mut bytes) = (Vec::new(), 0);
            // Records are read a batch at a time because indexing them needs the store mutably.
            let end = self.segs.get(slot).read_framed(from, CHUNK, |framed, offset| {
                bytes += framed.len as u64;
                let loc = Loc { seg: slot, offset: offset as u32, len: framed.len as u32 };
                batch.push((framed.rec, loc, framed.more));
                Ok(bytes < CHUNK as u64)
            })?;
            for (rec, loc, more) in batch {
                group.push((rec, loc));
                if !more {
                    group.drain(..).try_for_each(|(rec, loc)| self.index_scanned(&rec, loc))?;
                }
            }
            let start = group.first().map(|(_, loc): &(_, Loc)| u64::from(loc.offset));
            match (end, start) {
                (ReadEnd::Stopped(next), _) => from = next,
                (ReadEnd::End, None) => return Ok(None),
                (ReadEnd::End, Some(start)) => {
                    let problem = StoreError::corrupt(start, "the segment ends inside a group of records");
                    return Ok(Some((start, problem.in_file(&self.segs.get(slot).name.file()))));
                }
                (ReadEnd::Damaged { at, problem }, start) => return Ok(Some((start.unwrap_or(at), problem))),
            }
        }
    }

    /// Loads segment `slot`'s index entries, ack marks and range drops from its hint, in offset order, so each
    /// drop takes out what precedes it and nothing that follows.
    fn apply_hint(&mut self, slot: u16, hint: &Hint) -> Result<(), StoreError> {
        self.segs.get_mut(slot).records = hint.records;
        let (mut acks, mut entries) = (hint.acks.iter().peekable(), hint.entries.iter().peekable());
        for d in &hint.drops {
            let before = |offset: u32| offset < d.offset;
            while let Some(a) = acks.next_if(|a| before(a.offset)) {
                self.apply_hinted_ack(slot, a);
            }
            while let Some(h) = entries.next_if(|h| before(h.offset)) {
                self.apply_hinted_entry(slot, h)?;
            }
            let victims = self.drop_victims(d.start_exclusive, d.end_inclusive)?;
            self.apply_drop(DropMark::from_hint(slot, d), &victims);
        }
        acks.for_each(|a| self.apply_hinted_ack(slot, a));
        entries.try_for_each(|h| self.apply_hinted_entry(slot, h))
    }

    fn apply_hinted_ack(&mut self, slot: u16, a: &HintAck) {
        self.set_ack(a.chain, AckLoc { seq: a.seq, loc: Loc { seg: slot, offset: a.offset, len: a.len } });
    }

    /// Indexes a hint entry. It replaces the entry with the same prefix without reading either key when the
    /// hint says no other key shared that prefix; otherwise the keys are read and compared.
    ///
    /// That shortcut is sound because every key with a record before this entry that survives in the log was
    /// in the index when the hint was written, unless a range drop after this entry took it out (keys leave the
    /// index only when compaction drops every record of theirs, or a drop takes them out, and a drop before
    /// this entry has been applied already). So a prefix unshared then is unshared among the entries loaded so
    /// far, but for keys such a later drop will take out. Mistaking one of those for this entry's key takes it
    /// out early, with the same dead bytes, and leaves this entry to the drop, whose range misses its key (this
    /// entry was in the index after the drop).
    fn apply_hinted_entry(&mut self, slot: u16, h: &HintEntry) -> Result<(), StoreError> {
        let loc = Loc { seg: slot, offset: h.offset, len: h.len };
        let entry = IndexEntry { prefix: h.token_prefix, loc, tombstone: h.tombstone };
        let same: Vec<(usize, IndexEntry)> = self.index.candidates(h.token_prefix).take(2).collect();
        let previous = match (h.shared_prefix, &same[..]) {
            (false, []) => None,
            (false, [only]) => Some(*only),
            _ => {
                let key = self.read_indexed(entry)?.key;
                self.locate(&key, h.token_prefix)?.map(|(i, e, _)| (i, e))
            }
        };
        self.set_entry(previous, entry);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(names: &[SegName], hints: &[SegName], extra: &[&str]) -> Vec<String> {
        let mut out: Vec<String> = names.iter().map(SegName::file).collect();
        out.extend(hints.iter().map(SegName::hint_file));
        out.extend(extra.iter().map(|s| s.to_string()));
        out
    }

    #[test]
    fn an_empty_directory_starts_at_id_one() {
        assert_eq!(plan(&[]), Plan { remove: vec![], segments: vec![], next_id: 1 });
    }

    #[test]
    fn replaced_segments_temporaries_and_stray_hints_are_removed() {
        let (a, b, c) = (SegName::fresh(1), SegName::fresh(2), SegName::fresh(3));
        let out = SegName::replacing(&[a, b]);
        let stray = SegName::fresh(9);
        let listing = files(&[c, a, out, b], &[a, out, c, stray], &["x.seg.tmp", "data.log"]);
        let p = plan(&listing);
        assert_eq!(p.segments, [(out, true), (c, false)]);
        assert_eq!(p.next_id, 4);
        let mut removed = p.remove.clone();
        removed.sort();
        let mut want =
            vec!["x.seg.tmp".to_owned(), a.file(), b.file(), a.hint_file(), c.hint_file(), stray.hint_file()];
        want.sort();
        assert_eq!(removed, want);
    }
}
