//! Compaction: FAWN-DS's Rewrite (seed 003 §2.5), done incrementally so no call blocks for long, with no
//! background thread (the deterministic simulator drives the same code).
//!
//! **When.** After each `sync`, if at least `min_segments` segments are sealed and dead bytes exceed
//! `dead_ratio` of the sealed bytes, a pass starts; each `sync` then reads at most `slice_bytes` of its input,
//! and stops once it has freed `pace` times what was appended since the previous slice (having read a few KiB at
//! least): compaction frees space faster than the writes take it, without taking the core from them. A store
//! that took no writes since the last timer tick instead compacts a whole slice on it
//! (`Datastore::maintain_if_idle`), so old garbage goes while no one writes.
//!
//! **What.** A run of consecutive sealed segments: the oldest one whose own dead ratio passes the threshold,
//! widened over its neighbours while the run's live bytes fit in one segment and its total bytes in two. So
//! outputs come out about one segment long, small outputs get merged with their neighbours, and a pass's
//! output always fits the index's 32-bit offsets.
//!
//! **How.** The output is written as `{name}.seg.tmp`, beginning with one ack mark per chain carrying the
//! watermark (its latest ack mark) when the pass started; then the inputs' records follow in log order, minus
//! those the retention contract or a later range drop lets go (see `Pass::take`), so replay meets each
//! watermark before the sparse records it covers. A chain with a range drop in the inputs has its watermark
//! restated right after its last one instead, since replaying the drop forgets the watermark. Range drops are
//! always copied. When the last input is copied: sync the output, rename it into place (the commit point), move
//! the index entries of copied records to it, write its hint, and delete the inputs. A crash before the rename
//! leaves `.tmp` files that recovery removes; after it, inputs that recovery recognises as replaced by their
//! name, and perhaps no hint for the output, which recovery then scans. Failures (a full disk, a damaged input)
//! abandon the pass without touching the log.
//!
//! **Only on durable grounds.** A slice runs when a sync lands, and records appended while that fsync ran are not
//! durable yet. A record that only such a record supersedes, or only such a range drop takes, may be its key's
//! latest after a power loss, so the pass keeps it and lists it in the output's hint ([`LogStore::frontier`],
//! `pass::stands`); the next pass over the output lets it go.
//!
//! **Off the core where it can be.** Slices run on a node's core, so the pass keeps them short: output records
//! are written 64 KiB at a time and handed to the device at the end of each slice (`VfsFile::start_writeback`),
//! so the commit's fsync has little left to wait for; the output's hint is written after the commit point, and
//! it and the unlinking of the replaced inputs run where they do not hold the core up (`Vfs::in_background`: a
//! thread of the real file system's own), since a hint only spares the next open a scan and the next open
//! removes what a crash left. On the T2 set-up a commit held the core for 75–120 ms before, and slices of 1 MiB
//! for 7–15 ms (`docs/performance-history.md`, section 28).
//!
//! **When not.** A pass that reclaims nothing (everything superseded was above its watermark) or fails leaves
//! a fingerprint of the state it ran in; no new pass starts until dead bytes or watermarks change, so an
//! unacknowledged tail cannot make compaction rewrite the same segments forever.

mod pass;

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use pass::{stands, Inputs, Pass};

use super::index::{IndexEntry, Loc};
use super::scan::CHUNK;
use super::segment::{ReadEnd, SegName, Segment};
use super::{AckLoc, LogStore};
use crate::datastore::StoreError;
use crate::hint::Hint;

/// Smallest read a slice issues, however small `slice_bytes` is.
const SLICE_CHUNK_MIN: usize = 4 << 10;

/// Least input a paced slice reads, however little was appended since the previous one, so a pass still ends
/// on a store that syncs with few writes.
const PACED_SLICE_MIN: u64 = 4 << 10;

/// The largest index `install` checks whole after every pass for entries left pointing into the segments it
/// replaced. The check walks every key on the core, a stall with millions of keys and paced passes; the tests and
/// the simulator's stores are far smaller, so they still check every pass.
const CHECKED_INDEX_MAX: usize = 1 << 16;

/// How far one slice goes: until it has freed `free` bytes (input read less output written) and read at least
/// `floor`, and never past `input` bytes read.
#[derive(Clone, Copy, Debug)]
struct SliceBudget {
    free: u64,
    floor: u64,
    input: u64,
}

impl SliceBudget {
    /// An unpaced slice: `input` bytes read, whatever they free.
    fn whole(input: u64) -> SliceBudget {
        SliceBudget { free: u64::MAX, floor: 0, input }
    }

    fn spent(&self, read: u64, written: u64) -> bool {
        read >= self.input || (read >= self.floor && read.saturating_sub(written) >= self.free)
    }

    /// How much of a segment to read at a time: about what the slice expects to read (a paced slice often needs
    /// a few KiB, and a read of the whole `slice_bytes` would copy the rest out of the page cache for nothing).
    fn chunk(&self) -> usize {
        let expected = self.free.max(self.floor).min(self.input);
        usize::try_from(expected).unwrap_or(CHUNK).clamp(SLICE_CHUNK_MIN, CHUNK)
    }
}

#[derive(Default)]
pub(super) struct Compactor {
    pass: Option<Pass>,
    completed: u64,
    abandoned: u64,
    last_error: Option<String>,
    /// Where the last pass that reclaimed nothing, or failed, left off.
    idle_at: Option<Fingerprint>,
    /// Bytes appended to the log since the last slice, which pace the next one (`CompactionOptions::pace`).
    appended: u64,
    /// Whether anything was appended since the last `maintain_if_idle`.
    busy: bool,
}

impl Compactor {
    pub(super) fn completed(&self) -> u64 {
        self.completed
    }

    pub(super) fn note_appended(&mut self, bytes: u64) {
        self.appended = self.appended.saturating_add(bytes);
        self.busy = true;
    }
}

/// What a new pass could do differently: the sealed segments' dead bytes and the chains' watermarks.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fingerprint {
    sealed_dead: u64,
    sealed: usize,
    watermarks: Vec<(u32, u64)>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactionProgress {
    pub passes_completed: u64,
    /// Passes given up on (full disk, damaged input); the log is unchanged by them.
    pub passes_abandoned: u64,
    pub last_error: Option<String>,
    /// The pass under way, if any.
    pub pass: Option<PassProgress>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassProgress {
    pub input_segments: usize,
    pub input_bytes: u64,
    pub read_bytes: u64,
    pub written_bytes: u64,
}

impl LogStore {
    pub fn compaction_progress(&self) -> CompactionProgress {
        let c = &self.compactor;
        CompactionProgress {
            passes_completed: c.completed,
            passes_abandoned: c.abandoned,
            last_error: c.last_error.clone(),
            pass: c.pass.as_ref().map(|p| PassProgress {
                input_segments: p.inputs.len(),
                input_bytes: p.input_bytes,
                read_bytes: p.read_bytes,
                written_bytes: p.out_len,
            }),
        }
    }

    /// One slice of compaction work: starts a pass if one is due, copies as far as [`Self::slice_budget`] says,
    /// commits the pass if its input is done.
    pub(super) fn compact_slice(&mut self) {
        // Taken whether or not a pass runs, so a store that compacts nothing for a while does not then make up
        // for it in one long slice.
        let budget = self.slice_budget();
        self.compact_within(budget);
    }

    /// An unpaced slice of `slice_bytes`, if nothing was appended since the last call and no sync is under way
    /// (compaction never runs while one is: [`Frontier`](super::Frontier)).
    pub(super) fn compact_if_idle(&mut self) {
        if !std::mem::take(&mut self.compactor.busy) && self.syncing.is_none() {
            self.compact_within(SliceBudget::whole(self.opts.compaction.slice_bytes));
        }
    }

    fn compact_within(&mut self, budget: SliceBudget) {
        // Compaction moves entries and frees segment slots for reuse: an existence check's find from before it
        // could name a location that now holds another record.
        self.found.get_mut().at = None;
        let Some(mut pass) = self.compactor.pass.take().or_else(|| self.begin_pass()) else {
            return;
        };
        let output = pass.output;
        let result = match self.advance(&mut pass, budget) {
            Ok(true) => self.commit(pass).map(|()| None),
            Ok(false) => Ok(Some(pass)),
            Err(e) => Err(e),
        };
        match result {
            Ok(unfinished) => self.compactor.pass = unfinished,
            Err(e) => self.abandon(output, e),
        }
    }

    fn begin_pass(&mut self) -> Option<Pass> {
        let window = self.due_window()?;
        let slots = self.segs.sealed()[window.clone()].to_vec();
        let names: Vec<SegName> = slots.iter().map(|&s| self.segs.get(s).name).collect();
        let bytes = slots.iter().map(|&s| self.segs.get(s).len).sum();
        let before = &self.segs.sealed()[..window.start];
        // `drops` is in log order: the markers of segments before the window come first.
        let first_drop = self.drops.iter().take_while(|d| before.contains(&d.loc.seg)).count();
        let inputs = Inputs { slots, bytes, includes_oldest: window.start == 0, first_drop };
        let output = SegName::replacing(&names);
        let started = self
            .create_empty(&self.path(&SegName::temp(&output.file())))
            .map_err(StoreError::from)
            .and_then(|out| Pass::begin(inputs, &self.acks, &self.drops, output, out));
        started.map_err(|e| self.abandon(output, e)).ok()
    }

    /// The run of sealed segments (positions in log order) the next pass should compact, if one is due.
    fn due_window(&mut self) -> Option<Range<usize>> {
        let c = self.opts.compaction;
        let sealed: Vec<(u64, u64)> =
            self.segs.sealed().iter().map(|&s| (self.segs.get(s).len, self.segs.get(s).live)).collect();
        let (bytes, dead) = sealed.iter().fold((0, 0), |(b, d), &(len, live)| (b + len, d + len - live));
        if sealed.len() < c.min_segments.max(1) || dead == 0 || dead as f64 <= c.dead_ratio * bytes as f64 {
            return None;
        }
        let fingerprint = self.fingerprint();
        if self.compactor.idle_at.as_ref() == Some(&fingerprint) {
            return None;
        }
        self.compactor.idle_at = None;
        choose_window(&sealed, c.dead_ratio, self.opts.segment_bytes)
    }

    fn fingerprint(&self) -> Fingerprint {
        let sealed = self.segs.sealed();
        Fingerprint {
            sealed_dead: sealed.iter().map(|&s| self.segs.get(s).dead()).sum(),
            sealed: sealed.len(),
            watermarks: self.acks.iter().map(|(&chain, a)| (chain, a.seq)).collect(),
        }
    }

    /// How far this slice goes: `slice_bytes` of input, or as far as frees `pace` times the bytes appended since
    /// the last one.
    fn slice_budget(&mut self) -> SliceBudget {
        let c = self.opts.compaction;
        let appended = std::mem::take(&mut self.compactor.appended);
        if c.pace == 0 {
            return SliceBudget::whole(c.slice_bytes);
        }
        SliceBudget { free: appended.saturating_mul(c.pace.into()), floor: PACED_SLICE_MIN, input: c.slice_bytes }
    }

    /// Copies input until `budget` is spent; returns whether the input is done.
    fn advance(&mut self, pass: &mut Pass, budget: SliceBudget) -> Result<bool, StoreError> {
        let chunk = budget.chunk();
        let frontier = self.frontier();
        let (read, written) = (pass.read_bytes, pass.out_len);
        let mut spent = false;
        while !spent && pass.next < pass.inputs.len() {
            let slot = pass.inputs[pass.next];
            let (seg, index, drops) = (self.segs.get(slot), &self.index, &self.drops);
            let end = seg.read_records(pass.offset, chunk, |rec, offset, len| {
                pass.read_bytes += len;
                let loc = Loc { seg: slot, offset: offset as u32, len: len as u32 };
                pass.take(rec, loc, index, drops, frontier)?;
                spent = budget.spent(pass.read_bytes - read, pass.out_len - written);
                Ok(!spent)
            })?;
            match end {
                ReadEnd::Stopped(next) => pass.offset = next,
                ReadEnd::End => (pass.next, pass.offset) = (pass.next + 1, 0),
                ReadEnd::Damaged { problem, .. } => return Err(problem),
            }
        }
        pass.end_slice()?;
        Ok(pass.next == pass.inputs.len())
    }

    fn commit(&mut self, mut pass: Pass) -> Result<(), StoreError> {
        pass.out.sync()?;
        if !self.segs.has_free_slot() {
            return Err(std::io::Error::other("segment table full").into());
        }
        let output = pass.output;
        self.vfs.rename(&self.path(&SegName::temp(&output.file())), &self.path(&output.file()))?;
        // The rename committed the pass; nothing below may fail.
        let reclaimed = pass.out_len < pass.input_bytes;
        let (replaced, hint) = self.install(pass);
        self.write_hint_later(output, &hint);
        let replaced: Vec<PathBuf> =
            replaced.iter().flat_map(|seg| [seg.name.file(), seg.name.hint_file()]).map(|f| self.path(&f)).collect();
        let vfs = Arc::clone(&self.vfs);
        // Recovery removes inputs a committed output replaced, so nothing waits for them to go.
        self.background.start(
            &*self.vfs,
            Box::new(move || {
                for path in replaced.iter().filter(|p| vfs.exists(p)) {
                    let _ = vfs.remove_file(path);
                }
            }),
        );
        self.compactor.completed += 1;
        self.compactor.idle_at = (!reclaimed).then(|| self.fingerprint());
        Ok(())
    }

    /// Puts the output in the inputs' place and moves the index there; returns the replaced segments and the
    /// output's hint: its copies that are still their key's latest (or may be after a power loss, `stands`),
    /// its restated ack marks and its range drops.
    fn install(&mut self, pass: Pass) -> (Vec<Segment>, Hint) {
        let frontier = self.frontier();
        let pending = frontier.durable_drops(&self.drops);
        let at = self.segs.order().iter().position(|&s| s == pass.inputs[0]).expect("inputs are in the log");
        let output = Segment { records: pass.out_records, ..Segment::new(pass.output, pass.out, pass.out_len, 0, 0) };
        let slot = self.segs.add(output).expect("commit checked for a free slot");
        let replaced = self.segs.replace_run(at, pass.inputs.len(), slot);
        let mut live = 0;
        let mut hinted = Vec::with_capacity(pass.moved.len());
        for m in &pass.moved {
            let loc = Loc { seg: slot, offset: m.offset, len: m.old.len };
            if let Some(i) = self.index.position_of(m.prefix, m.old) {
                self.index.replace(i, IndexEntry { loc, ..self.index.entry(i) });
                live += u64::from(loc.len);
                hinted.push((m.prefix, loc, m.tombstone));
            } else if stands(&self.index, frontier, &self.drops[pending..], m.token) {
                hinted.push((m.prefix, loc, m.tombstone));
            }
        }
        for &(prefix, loc) in &pass.dropped_tombstones {
            if let Some(i) = self.index.position_of(prefix, loc) {
                self.index.remove(i);
            }
        }
        for mark in &pass.restated {
            if self.acks.get(&mark.chain).is_some_and(|a| pass.inputs.contains(&a.loc.seg)) {
                let loc = Loc { seg: slot, offset: mark.offset, len: mark.len };
                self.acks.insert(mark.chain, AckLoc { seq: mark.seq, loc });
                live += u64::from(mark.len);
            }
        }
        // The pass copied every marker of the inputs, in order.
        for (mark, copy) in self.drops[pass.first_drop..].iter_mut().zip(&pass.markers) {
            mark.loc = Loc { seg: slot, offset: copy.offset, len: copy.len };
            live += u64::from(copy.len);
        }
        self.segs.get_mut(slot).live = live;
        let stale = |seg: u16| pass.inputs.contains(&seg);
        let keys_stale = self.index.len() <= CHECKED_INDEX_MAX && self.index.iter().any(|e| stale(e.loc.seg));
        assert!(
            !keys_stale
                && !self.acks.values().any(|a| stale(a.loc.seg))
                && !self.drops.iter().any(|d| stale(d.loc.seg)),
            "compaction left index entries pointing into replaced segments"
        );
        let entries =
            hinted.into_iter().map(|(prefix, loc, tombstone)| self.hint_entry(prefix, loc, tombstone)).collect();
        let (acks, drops) = (pass.restated, pass.markers);
        (replaced, Hint { segment_len: pass.out_len, records: pass.out_records, acks, drops, entries })
    }

    /// Gives up on a pass: removes its temporary files and remembers why.
    fn abandon(&mut self, output: SegName, e: StoreError) {
        self.remove_quietly(&SegName::temp(&output.file()));
        self.compactor.abandoned += 1;
        self.compactor.last_error = Some(e.to_string());
        self.compactor.idle_at = Some(self.fingerprint());
    }
}

/// The run of sealed segments (`(len, live)` each, in log order) to compact: around the oldest segment whose
/// dead ratio reaches `ratio`, widened right then left while the run's live bytes fit in `target` and its
/// bytes in twice that.
fn choose_window(segs: &[(u64, u64)], ratio: f64, target: u64) -> Option<Range<usize>> {
    let first = segs.iter().position(|&(len, live)| len > live && (len - live) as f64 >= ratio * len as f64)?;
    let (mut run, mut live, mut bytes) = (first..first + 1, segs[first].1, segs[first].0);
    let mut fits = |(len, l): (u64, u64)| {
        let ok = live + l <= target && bytes + len <= 2 * target;
        if ok {
            (live, bytes) = (live + l, bytes + len);
        }
        ok
    };
    while run.end < segs.len() && fits(segs[run.end]) {
        run.end += 1;
    }
    while run.start > 0 && fits(segs[run.start - 1]) {
        run.start -= 1;
    }
    Some(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_grows_around_the_first_dead_segment() {
        // (len, live): 0 and 1 are small compaction outputs, 2 is mostly dead, 3 is dead, 4 is full and live.
        let segs = [(20, 20), (30, 30), (60, 10), (60, 0), (100, 100)];
        assert_eq!(choose_window(&segs, 0.5, 100), Some(0..4));
        assert_eq!(choose_window(&segs, 0.5, 40), Some(2..3));
        assert_eq!(choose_window(&segs, 0.95, 100), Some(3..5));
        assert_eq!(choose_window(&[(100, 60), (100, 100)], 0.5, 100), None);
        // A segment bigger than twice the target still gets compacted alone.
        assert_eq!(choose_window(&[(500, 0)], 0.5, 100), Some(0..1));
    }
}
