//! One compaction pass's state, and the retention rule that decides each record's fate.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use meridian_core::ring::key_token;

use crate::datastore::StoreError;
use crate::hint::{HintAck, HintDrop};
use crate::log::index::{prefix_of, Index, Loc};
use crate::log::segment::SegName;
use crate::log::{AckLoc, DropMark, Frontier};
use crate::record::{encode, Body, Record};
use crate::vfs::VfsFile;

/// Largest compaction output, so its offsets fit the index.
const OUTPUT_MAX: u64 = u32::MAX as u64;
/// Bytes of output gathered before they are written: one write per record cost a system call each, about a
/// tenth of a slice's time on the node's core.
const OUT_CHUNK: usize = 64 << 10;

/// What a pass reads.
pub(super) struct Inputs {
    /// Segment slots to replace: consecutive in log order.
    pub(super) slots: Vec<u16>,
    pub(super) bytes: u64,
    /// Whether the first input is the oldest segment, so no record of any key precedes the pass.
    pub(super) includes_oldest: bool,
    /// Where the first range drop in or after the inputs is in the store's list of markers.
    pub(super) first_drop: usize,
}

pub(super) struct Pass {
    /// Segment slots being replaced: consecutive in log order.
    pub(super) inputs: Vec<u16>,
    pub(super) input_bytes: u64,
    /// Whether the first input is the oldest segment, so no record of any key precedes the pass.
    includes_oldest: bool,
    /// Each chain's latest ack mark when the pass started.
    watermarks: BTreeMap<u32, u64>,
    pub(super) output: SegName,
    pub(super) out: Box<dyn VfsFile>,
    /// Output records not yet written to `out`; `out_len` counts them.
    unwritten: Vec<u8>,
    pub(super) out_len: u64,
    pub(super) out_records: u64,
    /// The ack marks the output restates watermarks with, by offset: at its head, or after the last marker
    /// of their chain.
    pub(super) restated: Vec<HintAck>,
    /// Watermarks to restate after a marker of their chain in the inputs, by the marker's place in the
    /// store's list of markers.
    deferred: BTreeMap<usize, u64>,
    /// The place in the store's list of markers of the first marker in the inputs, and of the next one the
    /// pass has not copied: every marker from there on comes after the record being copied.
    pub(super) first_drop: usize,
    next_drop: usize,
    /// The markers copied, at their place in the output.
    pub(super) markers: Vec<HintDrop>,
    /// Next input (index into `inputs`) and offset in it to copy from.
    pub(super) next: usize,
    pub(super) offset: u64,
    pub(super) read_bytes: u64,
    /// Copied records that were their key's latest when copied, or may be after a power loss ([`stands`]), in
    /// output order.
    pub(super) moved: Vec<Moved>,
    /// Latest tombstones left out; their keys leave the index when the pass commits.
    pub(super) dropped_tombstones: Vec<(u64, Loc)>,
    /// Prefixes of superseded values and tombstones the pass had to keep.
    retained: HashSet<u64>,
}

/// A copied record that was its key's latest: its index entry moves to the output when the pass commits.
pub(super) struct Moved {
    pub(super) token: u64,
    pub(super) prefix: u64,
    pub(super) old: Loc,
    pub(super) offset: u32,
    pub(super) tombstone: bool,
}

impl Pass {
    /// Starts a pass whose output (already created, empty) restates each chain's watermark: at its head, or,
    /// if the chain has a range drop in the inputs, right after the last one, since a drop forgets its chain's
    /// watermark (recovery must meet the restatement after the drop).
    pub(super) fn begin(
        inputs: Inputs,
        acks: &BTreeMap<u32, AckLoc>,
        drops: &[DropMark],
        output: SegName,
        out: Box<dyn VfsFile>,
    ) -> Result<Pass, StoreError> {
        let watermarks: BTreeMap<u32, u64> = acks.iter().map(|(&chain, a)| (chain, a.seq)).collect();
        let mut head = Vec::new();
        let mut deferred = BTreeMap::new();
        for (&chain, &seq) in &watermarks {
            let last = drops[inputs.first_drop..].iter().rposition(|d| d.chain == chain).map(|i| inputs.first_drop + i);
            match last {
                None => head.push((chain, seq)),
                Some(i) if inputs.slots.contains(&drops[i].loc.seg) => {
                    deferred.insert(i, seq);
                }
                // The watermark follows a drop after the inputs, so it covers nothing in them.
                Some(_) => {}
            }
        }
        let mut pass = Pass {
            inputs: inputs.slots,
            input_bytes: inputs.bytes,
            includes_oldest: inputs.includes_oldest,
            watermarks,
            output,
            out,
            unwritten: Vec::with_capacity(OUT_CHUNK),
            out_len: 0,
            out_records: 0,
            restated: Vec::new(),
            deferred,
            first_drop: inputs.first_drop,
            next_drop: inputs.first_drop,
            markers: Vec::new(),
            next: 0,
            offset: 0,
            read_bytes: 0,
            moved: Vec::new(),
            dropped_tombstones: Vec::new(),
            retained: HashSet::new(),
        };
        for (chain, seq) in head {
            pass.restate(chain, seq)?;
        }
        Ok(pass)
    }

    /// Copies `rec`, found at `loc`, to the output unless the retention contract of `docs/protocols/chain.md`
    /// or a range drop lets it go. Under the contract a record may be dropped only if it is superseded (a later
    /// value or tombstone of its key, a skip, or an ack mark older than its chain's latest) and covered (see
    /// [`Pass::covered`]). A latest tombstone may also go, taking its key out of the index, if the pass starts
    /// at the oldest segment (no older record of the key can resurface) and no superseded record of a key with
    /// its prefix had to be kept. A value or tombstone in the range of a later drop is dead whatever its chain.
    /// Range drops themselves are always kept. `drops` is the store's list of markers.
    ///
    /// Only what is durable (`frontier`) lets a record go: a record that only a record not yet durable
    /// supersedes, or only a range drop not yet durable takes, is kept as if it were its key's latest
    /// ([`stands`]).
    pub(super) fn take(
        &mut self,
        rec: Record,
        loc: Loc,
        index: &Index,
        drops: &[DropMark],
        frontier: Frontier,
    ) -> Result<(), StoreError> {
        let durable = frontier.durable_drops(drops).max(self.next_drop);
        let (later, pending) = (&drops[self.next_drop..durable], &drops[durable..]);
        match rec.body {
            Body::DropRange { .. } => self.copy_marker(&rec, loc, drops),
            Body::Value(_) | Body::Tombstone => self.take_keyed(rec, loc, index, later, (frontier, pending)),
            // A covered ack mark is superseded, or its chain's latest, which the output restates.
            Body::Skip | Body::AckMark if self.covered(&rec, later) => Ok(()),
            Body::Skip | Body::AckMark => self.write(&rec).map(|_| ()),
        }
    }

    /// Whether `rec`'s seq is at or below its chain's watermark, or a later drop of its chain (`later` holds
    /// the drops after `rec`) ended the run of sequence numbers it belongs to: chain replay starts over at the
    /// drop, and the watermark, if any, belongs to the run after it.
    fn covered(&self, rec: &Record, later: &[DropMark]) -> bool {
        later.iter().any(|d| d.chain == rec.chain) || self.watermarks.get(&rec.chain).is_some_and(|&w| rec.seq <= w)
    }

    fn take_keyed(
        &mut self,
        rec: Record,
        loc: Loc,
        index: &Index,
        later: &[DropMark],
        (frontier, pending): (Frontier, &[DropMark]),
    ) -> Result<(), StoreError> {
        let token = key_token(&rec.key);
        let prefix = prefix_of(token);
        let tombstone = rec.body == Body::Tombstone;
        let latest = index.position_of(prefix, loc).is_some();
        if !latest && !later.iter().any(|d| d.takes(token)) && stands(index, frontier, pending, token) {
            self.retained.insert(prefix);
            let (offset, _) = self.write(&rec)?;
            self.moved.push(Moved { token, prefix, old: loc, offset, tombstone });
            return Ok(());
        }
        let covered = self.covered(&rec, later);
        // A latest record is never in a later drop's range: the drop would have taken it out of the index.
        if !latest && (covered || later.iter().any(|d| d.takes(token))) {
            return Ok(());
        }
        if !latest {
            self.retained.insert(prefix);
            return self.write(&rec).map(|_| ());
        }
        if tombstone && covered && self.includes_oldest && !self.retained.contains(&prefix) {
            self.dropped_tombstones.push((prefix, loc));
            return Ok(());
        }
        let (offset, _) = self.write(&rec)?;
        self.moved.push(Moved { token, prefix, old: loc, offset, tombstone });
        Ok(())
    }

    /// Copies the range drop at `loc`, then restates its chain's watermark if this is the chain's last drop in
    /// the inputs.
    fn copy_marker(&mut self, rec: &Record, loc: Loc, drops: &[DropMark]) -> Result<(), StoreError> {
        let at = self.next_drop;
        assert_eq!(drops[at].loc, loc, "a pass meets range drops in log order");
        self.next_drop += 1;
        let (offset, len) = self.write(rec)?;
        self.markers.push(drops[at].hint_at(Loc { offset, len, ..loc }));
        match self.deferred.remove(&at) {
            Some(seq) => self.restate(rec.chain, seq),
            None => Ok(()),
        }
    }

    fn restate(&mut self, chain: u32, seq: u64) -> Result<(), StoreError> {
        let (offset, len) = self.write(&Record { chain, seq, key: Bytes::new(), body: Body::AckMark })?;
        self.restated.push(HintAck { chain, seq, offset, len });
        Ok(())
    }

    /// Appends `rec` to the output; returns its offset and length there.
    fn write(&mut self, rec: &Record) -> Result<(u32, u32), StoreError> {
        let start = self.unwritten.len();
        encode(rec, &mut self.unwritten)?;
        let len = self.unwritten.len() - start;
        if self.out_len + len as u64 > OUTPUT_MAX {
            self.unwritten.truncate(start);
            return Err(std::io::Error::other("compaction output would not fit 32-bit offsets").into());
        }
        let offset = self.out_len as u32;
        self.out_len += len as u64;
        self.out_records += 1;
        if self.unwritten.len() >= OUT_CHUNK {
            self.write_out()?;
        }
        Ok((offset, len as u32))
    }

    /// Writes the gathered output, then asks the OS to start putting it on the device, so the commit's fsync
    /// has little left to wait for: left to the end, it held the node's core for tens of milliseconds a pass.
    pub(super) fn end_slice(&mut self) -> Result<(), StoreError> {
        self.write_out()?;
        self.out.start_writeback();
        Ok(())
    }

    fn write_out(&mut self) -> Result<(), StoreError> {
        self.out.append(&self.unwritten)?;
        self.unwritten.clear();
        Ok(())
    }
}

/// Whether a record of the key with ring token `token`, which the index no longer points at, may be its key's
/// latest after a power loss: a record not yet durable (past `frontier`) may have taken its place in the index,
/// as may one of another key with the same prefix (the index cannot tell them apart without reading), or a range
/// drop not yet durable (`pending`) may have taken it out.
pub(super) fn stands(index: &Index, frontier: Frontier, pending: &[DropMark], token: u64) -> bool {
    let prefix = prefix_of(token);
    index.candidates(prefix).any(|(_, e)| !frontier.covers(e.loc)) || pending.iter().any(|d| d.takes(token))
}
