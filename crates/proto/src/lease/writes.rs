//! Writes (seed 001 §4.1.3, Algorithm 2), at the master only. An active write stamps a version, pushes it with
//! a lease to every replica, and succeeds once a majority of the holders has it durably and every replica that
//! may be answering reads of the key under a lease has it or has dropped its lease; non-answering replicas are
//! asked again every heartbeat until their leases or confirmations run out. A replica that sends its own client's
//! write to the master withholds its lease on the key from then and says when (`withhold_to_forward`): the master
//! leaves it out of that write unless it recorded a lease of it begun then or later, so the write need not wait
//! for its push to come back there, and the replica answers no read under its lease until that push arrives
//! (`Member::withhold`). No lease is granted by a renewal while a write of the key is under way (`reads.rs`), so
//! a write waits only for leases that were there when it began or that a commit gave. The master applies the
//! value itself only then, so the master answers reads with acknowledged versions only, and tells the replicas
//! (`Commit`), which answer a pushed version under their lease only once it is committed.
//!
//! A passive write, taken when no replica holds a valid lease on a key the master already has, is applied at
//! the master and answered once durable there; the replicas get it in the background. The first write of a key
//! is always active, so every replica learns the key exists.

use super::mastery::{Lease, Withheld};
use super::msg::{Forwarded, OpId, Push};
use super::versions;
use super::{Fx, Group, LeaseMsg, LeaseNode, LeasePlantedBug, Versioned};
use crate::host::Host;
use crate::requests::Origin;
use crate::versioned::cells;
use bytes::Bytes;
use meridian_core::{ChainId, NodeId, Reply, Request, Time, WriteMode};
use std::collections::{BTreeMap, BTreeSet};

/// A write this node drives as master.
#[derive(Debug)]
pub(super) struct WriteOp {
    /// Who waits for the answer; None for a new master's write-back.
    origin: Option<Origin>,
    /// The client's request, to hand back if the partition's configuration changes under the write.
    req: Option<Request>,
    chain: ChainId,
    /// The domain the key was mastered in when the write began: it is handed back if the key moves.
    domain: String,
    fence: super::Fence,
    /// The master's table of who masters what.
    epoch: u64,
    key: Bytes,
    versioned: Versioned,
    lease_ns: u64,
    /// Replicas that hold the version durably, with when their acknowledgement arrived and when the push
    /// arrived on their clock: the lease offered with it counts between the two.
    stored: BTreeMap<NodeId, (Time, Time)>,
    /// Replicas that have the version or dropped their lease of the key.
    acked: BTreeSet<NodeId>,
    /// Whom the version went to.
    pushed: BTreeSet<NodeId>,
    /// Whom it offers a lease with the version: every replica in active mode; in passive mode only those that
    /// hold one, so that leases last only while replicas read the key and writes turn passive once they stop.
    offered: BTreeSet<NodeId>,
    /// The replica the write came from, if it withholds its lease on the key for it.
    withheld: Option<Withheld>,
    /// The tick it started at (None: a write-back, which lasts as long as the configuration).
    pub started: Option<u64>,
}

impl WriteOp {
    pub fn new(
        origin: Option<Origin>,
        req: Option<Request>,
        g: &Group,
        key: Bytes,
        versioned: Versioned,
        started: Option<u64>,
    ) -> WriteOp {
        let (chain, fence, epoch, lease_ns) = (g.chain, g.fence, g.domains.epoch, g.lease_ns());
        let domain = g.domain_of(&key).to_string();
        let (stored, acked, pushed) = (BTreeMap::new(), BTreeSet::new(), BTreeSet::new());
        let (offered, withheld) = (BTreeSet::new(), None);
        WriteOp {
            origin,
            req,
            chain,
            domain,
            fence,
            epoch,
            key,
            versioned,
            lease_ns,
            stored,
            acked,
            pushed,
            offered,
            withheld,
            started,
        }
    }
}

impl WriteOp {
    /// Whether this writes `key`.
    pub fn writes(&self, key: &super::Key) -> bool {
        self.chain == key.0 && self.key == key.1
    }

    pub fn key_of(&self) -> super::Key {
        (self.chain, self.key.clone())
    }

    /// How many writers of `g` besides `me`, the master, hold it durably.
    fn stored_by_others(&self, g: &Group, me: NodeId) -> usize {
        self.stored.keys().filter(|&&n| n != me && g.takes_part(n)).count()
    }
}

impl LeaseNode {
    /// A client's write: at the master, applied (passive) or pushed (active); elsewhere, sent to the master.
    pub(super) fn write(
        &mut self,
        host: &mut Host,
        now: Time,
        fwd: Forwarded,
        value: Option<Bytes>,
        g: Group,
        out: &mut Fx,
    ) {
        let Some(key) = fwd.req.key().cloned() else { return };
        let master = g.master_of(&key);
        if master != self.me {
            let fwd = self.withhold_to_forward(now, fwd, &g, &key);
            return self.forward(host, master, fwd, out);
        }
        if !self.mastery_of(&g, &key).is_some_and(|m| m.serves_key(&g, &key, now)) {
            return self.bounce(host, fwd.origin, fwd.req, fwd.stamped, out);
        }
        if fwd.stamped.is_none() {
            self.count_origin(g.chain, &key, fwd.origin.node);
        }
        let held = match self.cell(host, g.chain, &key) {
            Ok(held) => held,
            Err(e) => {
                let reply = Reply::Error(meridian_core::ErrorKind::Storage, e.to_string());
                return self.answer(host, &fwd.origin, reply, out);
            }
        };
        let withheld = fwd.withheld.map(|at| Withheld { node: fwd.origin.node, at }).filter(|w| w.node != self.me);
        let holders = self.holders_of(&g, &key, now, withheld);
        let version = match fwd.stamped {
            Some(v) => v,
            None => match self.stamp(host) {
                Some(v) => v,
                None => return self.bounce(host, fwd.origin, fwd.req, None, out),
            },
        };
        let versioned = Versioned { version, value };
        let unleased = holders.is_empty() && self.hosting.clear(&(g.chain, key.clone()), now);
        let passive = g.opts.write_mode == WriteMode::Passive && held.version > 0 && unleased;
        if passive && fwd.stamped.is_none() {
            let existed = held.value.is_some();
            return self.write_passive(host, (fwd.origin, withheld), &g, key, versioned, existed, out);
        }
        let mut op = WriteOp::new(Some(fwd.origin), Some(fwd.req), &g, key, versioned, Some(host.tick));
        op.withheld = withheld;
        let seq = self.start_write(now, op, &g, &holders, out);
        self.try_commit(host, now, seq, out);
    }

    /// A write of this node's client that goes to the master: a replica withholds its lease on the key until the
    /// write's push arrives, and says from when, so that the write need not wait the round trip of its push back
    /// here (from `tk` on globlease-4, 72 ms to the master, then 145 to push and hear back, 72 to answer: just
    /// under 300 ms; without this replica, the master's majority answers within 80). It keeps the lease, which
    /// the master goes on recording: it answers under it again without a renewal, and it counts for the next
    /// writes of other replicas (dropped, on globlease-4's Zipf-4 key, written from every region, it hardly ever
    /// came back: 69% of reads renewed). It does not when its affiliated nodes may still answer the key: the
    /// master then waits for it to revoke them.
    fn withhold_to_forward(&mut self, now: Time, mut fwd: Forwarded, g: &Group, key: &Bytes) -> Forwarded {
        let k = (g.chain, key.clone());
        let mine = fwd.origin.node == self.me && g.holders.contains(&self.me);
        if mine && self.hosting.clear(&k, now) {
            if !self.planted(LeasePlantedBug::IgnoresItsOwnWrite) {
                self.member.withhold(k, now);
            }
            fwd.withheld = Some(now);
        }
        fwd
    }

    /// Whether this node, as master, has a write of `key` under way.
    pub(super) fn writing(&self, key: &super::Key) -> bool {
        self.ops.values().any(|o| o.writes(key))
    }

    /// A new version in this node's map epoch (`versions.rs`).
    fn stamp(&mut self, host: &Host) -> Option<u64> {
        let epoch = self.map.as_ref().map_or(0, |m| m.epoch);
        let save = |bound| host.stores.save_record(versions::RECORD, &versions::encode(bound));
        self.numbering.stamp(epoch, save)
    }

    /// A passive write: the master's own, answered once durable here; the replicas get it in the background, the
    /// origin with the moment it `withheld` its lease from.
    #[allow(clippy::too_many_arguments)]
    fn write_passive(
        &mut self,
        host: &mut Host,
        (origin, withheld): (Origin, Option<Withheld>),
        g: &Group,
        key: Bytes,
        versioned: Versioned,
        existed: bool,
        out: &mut Fx,
    ) {
        if let Err(e) = self.store(host, g.chain).and_then(|s| cells::apply(s, g.chain, &key, &versioned)) {
            let reply = Reply::Error(meridian_core::ErrorKind::Storage, e.to_string());
            return self.answer(host, &origin, reply, out);
        }
        self.applied_here(g.chain, &key, versioned.version);
        self.mark_written(g.chain, out);
        self.stats.passive_writes += 1;
        for to in g.writers().filter(|&n| n != self.me) {
            let (chain, fence, epoch, key, versioned) =
                (g.chain, g.fence, g.domains.epoch, key.clone(), versioned.clone());
            let withheld = told(withheld, to);
            out.send(to, LeaseMsg::Push(Push { op: None, chain, fence, epoch, key, versioned, lease_ns: 0, withheld }));
        }
        self.answer_as(host, &origin, Reply::Written { applied: true, existed }, true, out);
    }

    /// Pushes `op`'s version to every writer of `g` and to the lease holders given, and revokes the key from
    /// this node's affiliated nodes; returns its number.
    pub(super) fn start_write(
        &mut self,
        now: Time,
        mut op: WriteOp,
        g: &Group,
        holders: &[NodeId],
        out: &mut Fx,
    ) -> u64 {
        self.revoke(&op.key_of(), now, out);
        let seq = self.next_op;
        self.next_op += 1;
        let id = OpId { incarnation: self.incarnation, seq };
        let to: BTreeSet<NodeId> = g.writers().chain(holders.iter().copied()).filter(|&n| n != self.me).collect();
        op.offered = match g.opts.write_mode {
            WriteMode::Active => to.clone(),
            WriteMode::Passive => holders.iter().copied().collect(),
        };
        for &n in &to {
            out.send(n, push(id, &op, n));
        }
        op.pushed = to;
        self.ops.insert(seq, op);
        seq
    }

    /// A replica's answer to a push: durably stored (with when the push arrived there), or released (it takes no
    /// part in the configuration).
    pub(super) fn on_ack(
        &mut self,
        host: &mut Host,
        now: Time,
        from: NodeId,
        op: OpId,
        stored: Option<Time>,
        out: &mut Fx,
    ) {
        let Some(o) = self.ops.get_mut(&op.seq).filter(|_| op.incarnation == self.incarnation) else { return };
        if let Some(since) = stored {
            o.stored.insert(from, (now, since));
        }
        o.acked.insert(from);
        self.try_commit(host, now, op.seq, out);
    }

    /// Commits write `seq` if a majority holds it and every replica that may answer under a lease has it.
    fn try_commit(&mut self, host: &mut Host, now: Time, seq: u64, out: &mut Fx) {
        let Some(o) = self.ops.get(&seq) else { return };
        let Some(g) = self.groups.get(&o.chain) else { return };
        let Some(m) = self.masteries.get(&(o.chain, o.domain.clone())) else { return };
        if g.fence != o.fence || m.fence != o.fence {
            return;
        }
        let holders = self.holders_of(g, &o.key, now, o.withheld);
        let ignores = self.planted(LeasePlantedBug::IgnoresLeases);
        if o.stored_by_others(g, self.me) < g.others_needed()
            || !(ignores || holders.iter().all(|n| *n == self.me || o.acked.contains(n)))
        {
            return;
        }
        let revoked = self.planted(LeasePlantedBug::AcksBeforeRevoking) || self.hosting.clear(&o.key_of(), now);
        if !revoked {
            return;
        }
        let o = self.ops.remove(&seq).expect("the write under way");
        self.commit(host, o, seq, out);
    }

    /// Applies a write that succeeded, records the leases it issued, and answers it.
    fn commit(&mut self, host: &mut Host, o: WriteOp, seq: u64, out: &mut Fx) {
        let applied = self.store(host, o.chain).and_then(|s| {
            let held = cells::cell(s, &o.key)?.version;
            Ok((cells::apply(s, o.chain, &o.key, &o.versioned)?, held <= o.versioned.version))
        });
        let (existed, newest) = match applied {
            Ok(applied) => applied,
            Err(e) => return tracing::warn!(chain = %o.chain, "lease master cannot apply a write: {e}"),
        };
        self.applied_here(o.chain, &o.key, o.versioned.version);
        self.mark_written(o.chain, out);
        let g = self.groups.get(&o.chain).cloned().expect("checked by try_commit");
        // A replica a later write of the key went to gets no lease from this one: that write would have to wait
        // for it, and the next for that one's (on globlease-4, 95/5 Zipf 4, the hot key's writes from `tk` then
        // all waited for `tk`: p50 291 ms). The later write offers its own.
        let key = o.key_of();
        let superseded = |n: &NodeId| self.ops.range(seq + 1..).any(|(_, w)| w.writes(&key) && w.pushed.contains(n));
        // Nor does a replica when a newer write of the key committed first, which need not have waited for a replica
        // that withheld its lease to send it (sim seed 94 of `partition` with 12 affiliated nodes: the replica never
        // got the newer write, took a lease on this one's value from its late commit, and answered it).
        let offered =
            |n: &NodeId| g.holders.contains(n) && o.offered.contains(n) && o.lease_ns > 0 && newest && !superseded(n);
        let grants: Vec<_> = o.stored.iter().filter(|(n, _)| offered(n)).map(|(&n, &times)| (n, times)).collect();
        let mut leased = Vec::new();
        for (n, (at, since)) in grants {
            // The record counts from the acknowledgement's arrival: after the lease began at the replica.
            self.record(&g, &o.key, n, since, at.plus(std::time::Duration::from_nanos(o.lease_ns)));
            leased.push((n, since));
            self.stats.granted += 1;
        }
        self.masteries.get_mut(&(o.chain, o.domain.clone())).expect("checked by try_commit").written_back(seq);
        for &n in &o.pushed {
            let (chain, key, version, leased) = (o.chain, o.key.clone(), o.versioned.version, leased.clone());
            out.send(n, LeaseMsg::Commit { chain, key, version, leased });
        }
        if let Some(origin) = o.origin {
            self.stats.writes += 1;
            self.answer_as(host, &origin, Reply::Written { applied: true, existed }, true, out);
        }
    }

    /// This node, as master, applied `version` of `key`: as a replica it holds nothing of the key older than that
    /// awaiting a commit. A master sends itself no commit, so a version it was pushed before the key's mastery
    /// came to it (a write bounced by the key's move, sent again with its version, and committed here) stayed
    /// marked uncommitted: once the key moved away again, every read of it here waited for a commit no one would
    /// send, then renewed (sim, the 5/95 mixes by region on globlease-4: 7 and 2 of 10,000 keys, after the load).
    fn applied_here(&mut self, chain: ChainId, key: &Bytes, version: u64) {
        self.member.committed(chain, key, version, None);
    }

    /// On a tick and when a lease begins: pushes again to replicas that have not answered (every heartbeat), and
    /// commits writes whose waits ran out.
    pub(super) fn drive_writes(&mut self, host: &mut Host, now: Time, out: &mut Fx) {
        let resend = host.tick.is_multiple_of(super::timing::HEARTBEAT_TICKS);
        let seqs: Vec<u64> = self.ops.keys().copied().collect();
        for seq in seqs {
            if resend {
                let o = &self.ops[&seq];
                let id = OpId { incarnation: self.incarnation, seq };
                for n in self.unstored(o) {
                    out.send(n, push(id, o, n));
                }
            }
            self.try_commit(host, now, seq, out);
        }
    }

    /// Whom `o` is pushed to again: those that have not answered, and, while fewer than a majority stored it,
    /// the writers that released it. A replica releases a push it takes no part in by its map, which may lag the
    /// master's: asked once only, a write-back that a majority had released waited for good, and with it the
    /// domain's every request (sim seed 54000108: two of four holders released a new master's first write-back).
    fn unstored(&self, o: &WriteOp) -> Vec<NodeId> {
        let g = self.groups.get(&o.chain).filter(|g| g.fence == o.fence);
        let short = g.filter(|g| o.stored_by_others(g, self.me) < g.others_needed());
        let released = |n: &NodeId| short.is_some_and(|g| g.takes_part(*n)) && !o.stored.contains_key(n);
        o.pushed.iter().copied().filter(|n| !o.acked.contains(n) || released(n)).collect()
    }

    /// Hands back the writes of configurations this node is no longer master in, and of keys that moved since
    /// they began (their pushes name a table older than the move, which every holder refuses: sim seed 36102868
    /// of `region,migrate`, where a key pinned to the domain it was already in held its domain's write-backs up
    /// for good), each keeping its version.
    pub(super) fn bounce_stale_writes(&mut self, host: &mut Host, out: &mut Fx) {
        let current = |o: &WriteOp| {
            let mastered = self.masteries.get(&(o.chain, o.domain.clone())).is_some_and(|m| m.fence == o.fence);
            let unmoved = |g: &Group| g.domain_of(&o.key) == o.domain && g.domains.since(&o.key) <= o.epoch;
            mastered && self.groups.get(&o.chain).is_some_and(unmoved)
        };
        let stale: Vec<u64> = self.ops.iter().filter(|(_, o)| !current(o)).map(|(&s, _)| s).collect();
        for seq in stale {
            let o = self.ops.remove(&seq).expect("listed");
            if let (Some(origin), Some(req)) = (o.origin, o.req) {
                self.bounce(host, origin, req, Some(o.versioned.version), out);
            }
        }
        let ops = &self.ops;
        self.masteries.values_mut().for_each(|m| m.forget_writes(|seq| ops.contains_key(&seq)));
    }

    /// A master's push: stored (and acknowledged once durable) by a writer of the same configuration; any other
    /// node drops its lease on the key and says so.
    pub(super) fn on_push(&mut self, host: &mut Host, now: Time, from: NodeId, p: Push, out: &mut Fx) {
        let key = (p.chain, p.key.clone());
        let current = |g: &&Group| g.fence == p.fence && p.epoch >= g.domains.since(&p.key);
        let g =
            self.groups.get(&p.chain).filter(current).filter(|g| g.master_of(&p.key) == from && g.takes_part(self.me));
        let Some(holder) = g.map(|g| g.holders.contains(&self.me)) else {
            self.member.drop_lease(&key);
            if let Some(op) = p.op {
                self.ack_push(now, key, from, op, None, out);
            }
            return;
        };
        // The store may hold a version newer than the push, which then stays unanswered under a lease until a
        // commit names it.
        let held = match self.take(host, p.chain, &p.key, &p.versioned) {
            Ok(held) => held,
            Err(e) => return tracing::warn!(chain = %p.chain, "lease replica cannot store a write: {e}"),
        };
        self.mark_written(p.chain, out);
        if held > p.versioned.version {
            self.member.uncommitted(key.clone(), held);
        }
        if let Some(at) = p.withheld {
            self.member.unwithhold(&key, at);
            self.own_write_pushed(&key, at, &p.versioned);
        }
        if let Some(op) = p.op {
            let run = self.groups.get(&p.chain).and_then(|g| self.member.run(g, g.domain_of(&p.key), now));
            let run = run.filter(|_| holder);
            let until = super::timing::shrunk_from(now, p.lease_ns);
            let offer = run.filter(|_| p.lease_ns > 0).map(|run| Lease::new(from, run, now, until));
            self.member.pushed(key.clone(), p.versioned.version, offer);
            self.ack_push(now, key, from, op, Some(now), out);
        }
    }
}

/// The push of write `id` to `to`.
fn push(id: OpId, o: &WriteOp, to: NodeId) -> LeaseMsg {
    let (chain, fence, epoch, key, versioned) = (o.chain, o.fence, o.epoch, o.key.clone(), o.versioned.clone());
    let lease_ns = if o.offered.contains(&to) { o.lease_ns } else { 0 };
    let withheld = told(o.withheld, to);
    LeaseMsg::Push(Push { op: Some(id), chain, fence, epoch, key, versioned, lease_ns, withheld })
}

/// What a push to `to` says of the write's origin withholding its lease: when, if `to` is that origin.
fn told(withheld: Option<Withheld>, to: NodeId) -> Option<Time> {
    withheld.filter(|w| w.node == to).map(|w| w.at)
}
