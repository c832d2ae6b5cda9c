//! One compaction pass's state, and the retention rule that decides each record's fate.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use meridian_core::ring::key_token;

use crate::datastore::StoreError;
use crate::hint::HintAck;
use crate::log::index::{prefix_of, Index, Loc};
use crate::log::segment::SegName;
use crate::log::AckLoc;
use crate::record::{encode, Body, Record};
use crate::vfs::VfsFile;

/// Largest compaction output, so its offsets fit the index.
const OUTPUT_MAX: u64 = u32::MAX as u64;

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
    pub(super) out_len: u64,
    pub(super) out_records: u64,
    /// The ack marks the output begins with.
    pub(super) leading: Vec<HintAck>,
    /// Next input (index into `inputs`) and offset in it to copy from.
    pub(super) next: usize,
    pub(super) offset: u64,
    pub(super) read_bytes: u64,
    /// Copied records that were their key's latest when copied, in output order.
    pub(super) moved: Vec<Moved>,
    /// Latest tombstones left out; their keys leave the index when the pass commits.
    pub(super) dropped_tombstones: Vec<(u64, Loc)>,
    /// Prefixes of superseded values and tombstones the pass had to keep.
    retained: HashSet<u64>,
}

/// A copied record that was its key's latest: its index entry moves to the output when the pass commits.
pub(super) struct Moved {
    pub(super) prefix: u64,
    pub(super) old: Loc,
    pub(super) offset: u32,
    pub(super) tombstone: bool,
}

impl Pass {
    /// Starts a pass whose output (already created, empty) begins with one ack mark per chain.
    pub(super) fn begin(
        inputs: Vec<u16>,
        input_bytes: u64,
        includes_oldest: bool,
        acks: &BTreeMap<u32, AckLoc>,
        output: SegName,
        out: Box<dyn VfsFile>,
    ) -> Result<Pass, StoreError> {
        let watermarks: BTreeMap<u32, u64> = acks.iter().map(|(&chain, a)| (chain, a.seq)).collect();
        let mut pass = Pass {
            inputs,
            input_bytes,
            includes_oldest,
            watermarks,
            output,
            out,
            out_len: 0,
            out_records: 0,
            leading: Vec::new(),
            next: 0,
            offset: 0,
            read_bytes: 0,
            moved: Vec::new(),
            dropped_tombstones: Vec::new(),
            retained: HashSet::new(),
        };
        let marks: Vec<(u32, u64)> = pass.watermarks.iter().map(|(&c, &s)| (c, s)).collect();
        for (chain, seq) in marks {
            let (offset, len) = pass.write(&Record { chain, seq, key: Bytes::new(), body: Body::AckMark })?;
            pass.leading.push(HintAck { chain, seq, offset, len });
        }
        Ok(pass)
    }

    /// Copies `rec`, found at `loc`, to the output unless the retention contract of `docs/protocols/chain.md`
    /// lets it go: a record may be dropped only if it is superseded (a later value or tombstone of its key, a
    /// skip, or an ack mark older than its chain's latest) and its seq is at or below its chain's watermark.
    /// A latest tombstone may also go, taking its key out of the index, if the pass starts at the oldest
    /// segment (no older record of the key can resurface) and no superseded record of a key with its prefix
    /// had to be kept.
    pub(super) fn take(&mut self, rec: Record, loc: Loc, index: &Index) -> Result<(), StoreError> {
        let covered = self.watermarks.get(&rec.chain).is_some_and(|&w| rec.seq <= w);
        match rec.body {
            Body::Value(_) | Body::Tombstone => {
                let prefix = prefix_of(key_token(&rec.key));
                let tombstone = rec.body == Body::Tombstone;
                let latest = index.position_of(prefix, loc).is_some();
                if !latest && covered {
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
                self.moved.push(Moved { prefix, old: loc, offset, tombstone });
                Ok(())
            }
            // A covered ack mark is either superseded or its chain's latest, which the output's head restates.
            Body::Skip | Body::AckMark if covered => Ok(()),
            Body::Skip | Body::AckMark => self.write(&rec).map(|_| ()),
        }
    }

    /// Appends `rec` to the output; returns its offset and length there.
    fn write(&mut self, rec: &Record) -> Result<(u32, u32), StoreError> {
        let mut buf = Vec::with_capacity(rec.encoded_len());
        encode(rec, &mut buf)?;
        if self.out_len + buf.len() as u64 > OUTPUT_MAX {
            return Err(std::io::Error::other("compaction output would not fit 32-bit offsets").into());
        }
        self.out.append(&buf)?;
        let offset = self.out_len as u32;
        self.out_len += buf.len() as u64;
        self.out_records += 1;
        Ok((offset, buf.len() as u32))
    }
}
