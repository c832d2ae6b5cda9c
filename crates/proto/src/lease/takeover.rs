//! A new master's first step on a domain (`domains.rs`). Every write the partition acknowledged is on a majority of its holders (counted
//! in the configuration it was written in; one configuration change at a time keeps each such majority meeting
//! every majority of the next), and a holder in the new configuration refuses the old one's writes. So the new
//! master copies every key's newest version from a majority of holders, itself included, through pages asked
//! in its own configuration and table of who masters what (`versioned/copy.rs`), and then holds every
//! acknowledged write of its domain's keys. A holder answers only from that table or a newer one, in which it
//! takes pushes of those keys from no other master.
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
use super::msg::CopyFor;
use super::writes::WriteOp;
use super::{Domain, Fx, Group, LeaseMsg, LeaseNode};
use crate::host::Host;
use crate::versioned::cells;
use crate::versioned::copy::{Copy, CopyData};
use bytes::Bytes;
use meridian_core::{NodeId, Time};
use std::collections::{BTreeMap, BTreeSet};

/// A takeover's copy, and for each key its newest version so far.
#[derive(Debug)]
pub(super) struct Takeover {
    copy: Copy,
    seen: BTreeMap<Bytes, Seen>,
    /// The domain and table it copies for.
    to: CopyFor,
}

/// A key's newest version in a takeover: how many holders had it, and whether this node took it from another.
#[derive(Clone, Copy, Debug)]
pub(super) struct Seen {
    version: u64,
    count: usize,
    copied: bool,
}

impl Seen {
    /// This node's own version.
    pub fn own(version: u64) -> Seen {
        Seen { version, count: 1, copied: false }
    }

    /// Counts another holder's `version` of a key; says whether it is newer than any so far, which this node
    /// then takes.
    pub fn count(seen: &mut BTreeMap<Bytes, Seen>, key: &Bytes, version: u64) -> bool {
        let s = seen.entry(key.clone()).or_insert(Seen { version: 0, count: 0, copied: false });
        if version > s.version {
            // This node takes it: it and the source hold it.
            *s = Seen { version, count: 2, copied: true };
            return true;
        }
        if version == s.version {
            s.count += 1;
        }
        false
    }
}

impl LeaseNode {
    /// Begins this node's mastery of `domain` of `g`: its own keys count once, and the other holders are asked
    /// for theirs.
    pub(super) fn start_takeover(
        &mut self,
        host: &mut Host,
        now: Time,
        g: &Group,
        domain: &str,
        out: &mut Fx,
    ) -> Mastery {
        let partitions = self.map.as_ref().map_or(1, |m| m.partitions);
        let own = self.store(host, g.chain).and_then(|s| cells::page(s, g.chain, partitions, None, usize::MAX));
        let seen = match own {
            Ok((entries, _)) => entries.into_iter().map(|(k, v)| (k, Seen::own(v.version))).collect(),
            Err(e) => {
                tracing::warn!(chain = %g.chain, "lease master cannot read its keys: {e}");
                BTreeMap::new()
            }
        };
        let others: Vec<NodeId> = g.holders.iter().copied().filter(|&n| n != self.me).collect();
        let (copy, asks) = Copy::start(g.chain, g.fence, &others, g.majority() - 1);
        let to = CopyFor::Takeover { domain: domain.to_string(), epoch: g.domains.epoch };
        asks.into_iter().for_each(|(n, req)| out.send(n, LeaseMsg::CopyReq { req, to: to.clone() }));
        let mut m = Mastery::new(g.fence, Phase::Takeover(Takeover { copy, seen, to }), g.domains.epoch);
        if matches!(&m.phase, Phase::Takeover(t) if t.copy.finished()) {
            m.phase = self.repairs(host, now, g, domain, m.take_seen(), out);
        }
        m
    }

    pub(super) fn on_takeover_page(
        &mut self,
        host: &mut Host,
        now: Time,
        from: NodeId,
        data: CopyData,
        d: Domain,
        out: &mut Fx,
    ) {
        let chain = data.chain;
        let Some(Phase::Takeover(t)) = self.masteries.get_mut(&d).map(|m| &mut m.phase) else { return };
        let Some(next) = t.copy.on_page(from, &data) else { return };
        if let Some(req) = next {
            out.send(from, LeaseMsg::CopyReq { req, to: t.to.clone() });
        }
        let mut newer = Vec::new();
        for (key, v) in data.entries {
            if Seen::count(&mut t.seen, &key, v.version) {
                newer.push((key, v));
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
            let seen = self.masteries.get_mut(&d).expect("taking over").take_seen();
            let phase = self.repairs(host, now, &g, &d.1, seen, out);
            self.masteries.get_mut(&d).expect("taking over").phase = phase;
        }
    }

    /// The copy is whole: writes back the domain's keys that need it (`write_back`).
    fn repairs(
        &mut self,
        host: &mut Host,
        now: Time,
        g: &Group,
        domain: &str,
        seen: BTreeMap<Bytes, Seen>,
        out: &mut Fx,
    ) -> Phase {
        self.stats.takeovers += 1;
        let seen = seen.into_iter().filter(|(key, _)| g.domain_of(key) == domain).collect();
        let writes: BTreeSet<u64> = self.write_back(host, now, g, seen, out).into_values().collect();
        match writes.is_empty() {
            true => Phase::Ready,
            false => Phase::Repair(writes),
        }
    }

    /// Writes back every key fewer than a majority held the newest version of, and every key this node took a
    /// newer version of while its own leases on it may still be answered; returns the writes by key. Its own
    /// versions number past every version it saw.
    pub(super) fn write_back(
        &mut self,
        host: &mut Host,
        now: Time,
        g: &Group,
        seen: BTreeMap<Bytes, Seen>,
        out: &mut Fx,
    ) -> BTreeMap<Bytes, u64> {
        let newest = seen.values().map(|s| s.version).max().unwrap_or(0);
        self.numbering.raise(newest);
        let lagging: Vec<Bytes> = seen
            .into_iter()
            .filter(|(key, s)| s.count < g.majority() || (s.copied && !self.holders_of(g, key, now, None).is_empty()))
            .map(|(key, _)| key)
            .collect();
        let mut writes = BTreeMap::new();
        for key in lagging {
            let versioned = match self.cell(host, g.chain, &key) {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(chain = %g.chain, "lease master cannot read a key to write back: {e}");
                    continue;
                }
            };
            self.stats.repairs += 1;
            let op = WriteOp::new(None, None, g, key.clone(), versioned, None);
            writes.insert(key, self.start_write(now, op, g, &[], out));
        }
        writes
    }

    /// On a tick: asks again every takeover source that sent nothing since the last one.
    pub(super) fn prod_takeovers(&mut self, out: &mut Fx) {
        for m in self.masteries.values_mut() {
            if let Phase::Takeover(t) = &mut m.phase {
                let to = t.to.clone();
                t.copy.prod().into_iter().for_each(|(n, req)| out.send(n, LeaseMsg::CopyReq { req, to: to.clone() }));
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
