//! A new master's first step. Every write the partition acknowledged is on a majority of its holders (counted
//! in the configuration it was written in; one configuration change at a time keeps each such majority meeting
//! every majority of the next), and a holder in the new configuration refuses the old one's writes. So the new
//! master copies every key's newest version from a majority of holders, itself included, through pages asked
//! in its own configuration (`versioned/copy.rs`), and then holds every acknowledged write.
//!
//! It may also have taken versions that never were acknowledged, from a holder that stored a write whose master
//! failed before a majority had it. Answering such a version is fine (the write was still under way) only if it
//! then stays: so a key whose newest version fewer than a majority of the copied holders had is written back
//! to the partition, with its version, before the master is ready.
//!
//! A process that takes over a partition it was master of before keeps its lease records (`Grants`), and its
//! members keep answering under those leases within the same run of its confirmations. A version newer than the
//! master's own came from a write that had not committed, so a replica holding a lease on the key may still
//! answer the older one: such a key is written back too, which reaches every such replica before it commits
//! (sim seed 21003606 on globlease-4: the master answered the copied version while a cut-off replica answered
//! the one before).

use super::mastery::{Mastery, Phase};
use super::writes::WriteOp;
use super::{Fx, Group, LeaseMsg, LeaseNode};
use crate::host::Host;
use crate::versioned::cells;
use crate::versioned::copy::{Copy, CopyData};
use crate::versioned::stamp;
use bytes::Bytes;
use meridian_core::{NodeId, Time};
use std::collections::{BTreeMap, BTreeSet};

/// A takeover's copy, and for each key its newest version so far.
#[derive(Debug)]
pub(super) struct Takeover {
    copy: Copy,
    seen: BTreeMap<Bytes, Seen>,
}

/// A key's newest version in a takeover: how many holders had it, and whether this node took it from another.
#[derive(Clone, Copy, Debug)]
pub(super) struct Seen {
    version: u64,
    count: usize,
    copied: bool,
}

impl LeaseNode {
    /// Begins this node's mastery of `g`: its own keys count once, and the other holders are asked for theirs.
    pub(super) fn start_takeover(&mut self, host: &mut Host, now: Time, g: &Group, out: &mut Fx) -> Mastery {
        let partitions = self.map.as_ref().map_or(1, |m| m.partitions);
        let own = self.store(host, g.chain).and_then(|s| cells::page(s, g.chain, partitions, None, usize::MAX));
        let seen = match own {
            Ok((entries, _)) => {
                entries.into_iter().map(|(k, v)| (k, Seen { version: v.version, count: 1, copied: false })).collect()
            }
            Err(e) => {
                tracing::warn!(chain = %g.chain, "lease master cannot read its keys: {e}");
                BTreeMap::new()
            }
        };
        let others: Vec<NodeId> = g.holders.iter().copied().filter(|&n| n != self.me).collect();
        let (copy, asks) = Copy::start(g.chain, g.fence, &others, g.majority() - 1);
        asks.into_iter().for_each(|(to, req)| out.send(to, LeaseMsg::CopyReq(req)));
        let mut m = Mastery::new(g.fence, Phase::Takeover(Takeover { copy, seen }));
        if matches!(&m.phase, Phase::Takeover(t) if t.copy.finished()) {
            m.phase = self.repairs(host, now, g, m.take_seen(), out);
        }
        m
    }

    pub(super) fn on_takeover_page(&mut self, host: &mut Host, now: Time, from: NodeId, data: CopyData, out: &mut Fx) {
        let chain = data.chain;
        let Some(Phase::Takeover(t)) = self.masteries.get_mut(&chain).map(|m| &mut m.phase) else { return };
        let Some(next) = t.copy.on_page(from, &data) else { return };
        if let Some(req) = next {
            out.send(from, LeaseMsg::CopyReq(req));
        }
        let mut newer = Vec::new();
        for (key, v) in data.entries {
            let seen = t.seen.entry(key.clone()).or_insert(Seen { version: 0, count: 0, copied: false });
            if v.version > seen.version {
                // This node takes it: it and the source hold it.
                *seen = Seen { version: v.version, count: 2, copied: true };
                newer.push((key, v));
            } else if v.version == seen.version {
                seen.count += 1;
            }
        }
        let finished = t.copy.finished();
        let stored = self
            .store(host, chain)
            .and_then(|s| newer.iter().try_for_each(|(key, v)| cells::apply(s, chain, key, v).map(|_| ())));
        if let Err(e) = stored {
            return tracing::warn!(%chain, "lease master cannot store its takeover copy: {e}");
        }
        self.mark_written(chain, out);
        if finished {
            let Some(g) = self.groups.get(&chain).cloned() else { return };
            let seen = self.masteries.get_mut(&chain).expect("taking over").take_seen();
            let phase = self.repairs(host, now, &g, seen, out);
            self.masteries.get_mut(&chain).expect("taking over").phase = phase;
        }
    }

    /// The copy is whole: writes back every key fewer than a majority held the newest version of, and every
    /// key this node took a newer version of while its own leases on it may still be answered.
    fn repairs(&mut self, host: &mut Host, now: Time, g: &Group, seen: BTreeMap<Bytes, Seen>, out: &mut Fx) -> Phase {
        self.stats.takeovers += 1;
        let newest = seen.values().map(|s| stamp::counter(s.version)).max().unwrap_or(0);
        self.last_counter = self.last_counter.max(newest);
        let lagging: Vec<Bytes> = seen
            .into_iter()
            .filter(|(key, s)| s.count < g.majority() || (s.copied && !self.holders_of(g.chain, key, now).is_empty()))
            .map(|(key, _)| key)
            .collect();
        let mut writes = BTreeSet::new();
        for key in lagging {
            let versioned = match self.cell(host, g.chain, &key) {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(chain = %g.chain, "lease master cannot read a key to write back: {e}");
                    continue;
                }
            };
            self.stats.repairs += 1;
            let op = WriteOp::new(None, None, g, key, versioned, None);
            writes.insert(self.start_write(op, g, &[], out));
        }
        match writes.is_empty() {
            true => Phase::Ready,
            false => Phase::Repair(writes),
        }
    }

    /// On a tick: asks again every takeover source that sent nothing since the last one.
    pub(super) fn prod_takeovers(&mut self, out: &mut Fx) {
        for m in self.masteries.values_mut() {
            if let Phase::Takeover(t) = &mut m.phase {
                t.copy.prod().into_iter().for_each(|(to, req)| out.send(to, LeaseMsg::CopyReq(req)));
            }
        }
    }
}

impl Mastery {
    /// The takeover's counts, leaving the phase to be replaced.
    fn take_seen(&mut self) -> BTreeMap<Bytes, Seen> {
        match std::mem::replace(&mut self.phase, Phase::Ready) {
            Phase::Takeover(t) => t.seen,
            other => {
                self.phase = other;
                BTreeMap::new()
            }
        }
    }
}
