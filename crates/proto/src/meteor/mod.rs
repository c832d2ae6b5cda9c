//! MeteorShower (seed 001 §4.2; the full argument is docs/protocols/meteor.md): a partition's replicas form
//! majority quorums, as in a quorum keyspace, but a read asks no replica anything. Every replica pushes each
//! peer a status every interval saying which versions it took (`statuses.rs`), and a read is answered by the
//! replica nearest its client from the statuses it already holds, once a majority agree (`reads.rs`).
//!
//! Writes are quorum writes (the `quorum` engine, serving meteor keyspaces): the coordinator stamps the version
//! with its clock (node id in the low bits) and sends it to every replica; a replica takes it only if it is
//! newer than its own and otherwise rejects it (the seed's writeLocal), and the write succeeds once a majority
//! took it, or fails once so many rejected it that no majority can. Joins copy as a quorum joiner does.
//!
//! The guarantee is sequential consistency, with reads that follow their own process's writes: with θt = 0 (the
//! seed's MeteorShower1) a read counts only statuses sent after it arrived; with θt > 0 (MeteorShower2,
//! `theta.rs`) statuses up to θt older, within the bound measured round trips make safe. What it assumes: wall
//! clocks stay within the keyspace's `clock_bound_ms` (ε) of each other, messages may be lost or delayed, nodes
//! crash and restart with what they synced, and (for θt > 0) one-way trips last at least what probes measured.

pub mod msg;
mod planted;
mod reads;
mod statuses;
mod theta;

use crate::chain::ReplicaStatus;
use crate::host::{timed_out, Host, Syncs};
use crate::map::ClusterMap;
use crate::protocol::{Capabilities, Claim, KeyspaceProtocol, PreviousRun};
use crate::quorum::{QuorumMsg, QuorumNode, QuorumTimer};
use crate::reports::ReplicaReports;
use crate::requests::Origin;
use crate::stores::Stores;
use crate::versioned::cells;
use crate::versioned::{read_reply, Asked, Fence, Versioned};
use bytes::Bytes;
use meridian_core::exposition::Latencies;
use meridian_core::{
    ChainId, Effects, KeyspaceConfig, KeyspaceId, MeteorOptions, NodeId, Protocol, Reply, Request, Time, Violation,
};
use meridian_store::StoreError;
use msg::{LocalRead, MeteorMsg, Page};
use reads::{Next, Parked};
use statuses::Statuses;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use theta::RoundTrips;

pub type Fx = Effects<MeteorMsg, MeteorTimer>;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum MeteorTimer {
    Quorum(QuorumTimer),
    /// Every status interval: a status to every peer, and the pages that views still wait for.
    Status,
}

pub use planted::MeteorPlantedBug;

#[derive(Clone, Debug, Default)]
pub struct MeteorConfig {
    #[cfg(feature = "planted-bugs")]
    pub planted_bug: Option<MeteorPlantedBug>,
}

/// What this node's meteor core did, for the simulator's counters and the node's metrics.
#[derive(Clone, Copy, Debug, Default)]
pub struct MeteorStats {
    /// Reads this node answered as a replica.
    pub reads: u64,
    /// Of the reads that came to this replica, those answered at once and those that waited for statuses.
    pub reads_at_once: u64,
    pub reads_parked: u64,
    /// How long the reads this replica answered waited for statuses (0 for those answered at once).
    pub waits: Latencies,
    /// Values fetched for reads that agreed on a version this replica lacked.
    pub fetches: u64,
    /// Reads that no majority agreed on within `reads::WAIT_MAX`.
    pub waits_timed_out: u64,
    /// Reads handed back to their front-end: this node was not a replica in their configuration.
    pub bounced: u64,
}

pub struct MeteorNode {
    me: NodeId,
    cfg: MeteorConfig,
    map: Option<Arc<ClusterMap>>,
    /// Writes and joins: the quorum engine, serving meteor keyspaces.
    quorum: QuorumNode,
    quorum_fx: Effects<QuorumMsg, QuorumTimer>,
    statuses: Statuses,
    /// How often statuses go out: the shortest interval of the keyspaces this node shares (None: none).
    interval: Option<Duration>,
    /// The status timer is set.
    ticking: bool,
    /// Reads waiting at this replica, by number.
    parked: BTreeMap<u64, Parked>,
    next_read: u64,
    /// Values fetched for waiting reads, by partition and key.
    fetched: BTreeMap<(ChainId, Bytes), Versioned>,
    /// The wall clock as this node has seen it, never going back: statuses are stamped and reads timed by it.
    clock_ms: u64,
    /// Round trips to the peers, for θt's bound.
    trips: RoundTrips,
    stats: MeteorStats,
}

impl MeteorNode {
    pub fn stats(&self) -> MeteorStats {
        self.stats
    }

    /// Runs a step of the quorum engine, wrapping what it does into this core's effects.
    fn engine(&mut self, out: &mut Fx, f: impl FnOnce(&mut QuorumNode, &mut Effects<QuorumMsg, QuorumTimer>)) {
        f(&mut self.quorum, &mut self.quorum_fx);
        out.absorb(&mut self.quorum_fx, MeteorMsg::Quorum, MeteorTimer::Quorum);
    }

    fn see_clock(&mut self, host: &Host) {
        self.clock_ms = self.clock_ms.max(host.wall_ms);
    }

    /// The knobs of `chain`'s keyspace.
    fn options(&self, chain: ChainId) -> MeteorOptions {
        let map = self.map.as_ref();
        let keyspace = map.and_then(|m| m.keyspaces.get(&chain.keyspace()));
        keyspace.and_then(|k| k.config.protocol.meteor()).copied().unwrap_or_default()
    }

    /// What a read of `chain` waiting here counts a peer's status by: sent (on the peer's clock) after this.
    fn fresh_after(&self, p: &Parked, holders: &[NodeId]) -> u64 {
        if planted::planted_in(&self.cfg, MeteorPlantedBug::CountsStaleStatuses) {
            return 0;
        }
        let m = self.options(p.chain);
        let theta = self.theta_ms(&m, holders, self.in_my_region(p.origin.node));
        (p.arrived_ms + u64::from(m.clock_bound_ms)).saturating_sub(theta)
    }

    /// θt in force for a read of a partition of a keyspace with knobs `m`, held by `holders`, from this region or
    /// not.
    fn theta_ms(&self, m: &MeteorOptions, holders: &[NodeId], same_region: bool) -> u64 {
        let floor = self.trips.floor_ms(holders.iter().copied().filter(|&h| h != self.me));
        theta::in_force(m, floor, same_region)
    }

    /// θt in force for reads from this node's region, for each partition it holds that `which` picks.
    fn thetas_ms(&self, which: impl Fn(ChainId) -> bool) -> Vec<u64> {
        let Some(map) = self.map.as_ref() else { return Vec::new() };
        let held = map.chains.keys().filter(|&&c| which(c));
        let held = held.filter_map(|&c| self.quorum.config(c).filter(|cfg| cfg.holders.contains(&self.me)));
        held.map(|cfg| self.theta_ms(&self.options(cfg.chain), &cfg.holders, true)).collect()
    }

    /// Whether `node` is this one or in its region.
    fn in_my_region(&self, node: NodeId) -> bool {
        let region = |n: NodeId| self.map.as_ref().and_then(|m| m.nodes.get(&n)).map(|i| &i.location.region);
        node == self.me || region(node).is_some_and(|r| Some(r) == region(self.me))
    }

    /// Whether this node holds `chain` in configuration `fence`.
    fn holds(&self, chain: ChainId, fence: Fence) -> bool {
        self.quorum.config(chain).is_some_and(|c| c.fence == fence && c.holders.contains(&self.me))
    }

    fn answer(&mut self, host: &mut Host, origin: &Origin, reply: Reply, out: &mut Fx) {
        if origin.node != self.me {
            return out.send(origin.node, MeteorMsg::Answer { origin: *origin, reply });
        }
        if let Some(id) = host.requests.complete(origin) {
            out.reply(id, reply);
        }
    }

    /// Hands a read back to its front-end, which sends it again at its next tick from the copy it kept.
    fn bounce(&mut self, host: &mut Host, origin: Origin, out: &mut Fx) {
        self.stats.bounced += 1;
        if origin.node != self.me {
            return out.send(origin.node, MeteorMsg::Bounce { origin });
        }
        self.on_bounce(host, origin, out);
    }

    fn on_bounce(&mut self, host: &mut Host, origin: Origin, out: &mut Fx) {
        if let Some((id, write)) = host.requests.bounced(&origin) {
            out.reply(id, timed_out(write, "the meteor replica bounced it with no copy to send again"));
        }
    }

    /// A client's read, at its front-end: to the nearest replica of its partition (this node if it is one,
    /// else the first in its region, else the first), which answers from statuses. A client that stays in its
    /// region reads at one replica, whose reads never go back, unless the region holds two; and then their
    /// least trip is within the region, so θt is 0 at both (`theta.rs`).
    fn route_read(
        &mut self,
        host: &mut Host,
        now: Time,
        origin: Origin,
        req: Request,
        read: meridian_core::Read,
        out: &mut Fx,
    ) {
        let (Some(keyspace), Some(token), Some(key)) = (req.keyspace(), req.token(), req.key().cloned()) else {
            return;
        };
        let map = self.map.clone().expect("requests are accepted only once a map is known");
        let Some(cfg) = map.chain_of(keyspace, token).and_then(|c| self.quorum.config(c.id)) else { return };
        let in_region = cfg.holders.iter().find(|&&n| self.in_my_region(n));
        let Some(&nearest) = cfg.holders.iter().find(|&&n| n == self.me).or(in_region).or(cfg.holders.first()) else {
            return;
        };
        host.requests.keep(&origin, req);
        let r = LocalRead { origin, chain: cfg.chain, fence: cfg.fence, key, read };
        match nearest == self.me {
            true => self.serve_read(host, now, r, out),
            false => out.send(nearest, MeteorMsg::Read(r)),
        }
    }

    /// A read at this replica: it waits for a majority to agree.
    fn serve_read(&mut self, host: &mut Host, now: Time, r: LocalRead, out: &mut Fx) {
        if !self.holds(r.chain, r.fence) {
            return self.bounce(host, r.origin, out);
        }
        let id = self.next_read;
        self.next_read += 1;
        let LocalRead { origin, chain, fence, key, read } = r;
        let parked = Parked { origin, chain, fence, key, read, arrived_ms: self.clock_ms, since: now, fetching: None };
        self.parked.insert(id, parked);
        self.evaluate(host, id, out);
        match self.parked.contains_key(&id) {
            true => self.stats.reads_parked += 1,
            false => self.stats.reads_at_once += 1,
        }
    }

    /// Answers waiting read `id` if a majority agree now; asks for a value it lacks.
    fn evaluate(&mut self, host: &mut Host, id: u64, out: &mut Fx) {
        let Some(p) = self.parked.get(&id) else { return };
        if !self.holds(p.chain, p.fence) {
            let origin = self.parked.remove(&id).expect("the read waiting").origin;
            return self.bounce(host, origin, out);
        }
        let (chain, key, fence) = (p.chain, p.key.clone(), p.fence);
        let holders = self.quorum.config(chain).expect("a partition this node holds").holders;
        let fresh_after = self.fresh_after(p, &holders);
        let own = match self.quorum.store(host, chain).and_then(|s| cells::cell(s, &key)) {
            Ok(own) => own,
            Err(e) => return tracing::warn!(%chain, "meteor replica cannot read: {e}"),
        };
        let seen: BTreeMap<NodeId, u64> = (holders.iter())
            .filter(|&&h| h != self.me)
            .filter_map(|&h| Some((h, self.statuses.seen(h, chain, &key)?)))
            .filter(|(_, s)| s.fence == fence && s.sent_ms > fresh_after)
            .map(|(h, s)| (h, s.version))
            .collect();
        match reads::decide(self.me, &holders, &own, &seen, self.fetched.get(&(chain, key.clone()))) {
            Next::Wait => {}
            Next::Answer(v) => {
                let p = self.parked.remove(&id).expect("the read waiting");
                self.stats.reads += 1;
                self.stats.waits.record(Duration::from_millis(self.clock_ms.saturating_sub(p.arrived_ms)));
                self.answer(host, &p.origin, read_reply(p.read, &v, host.wall_ms), out);
            }
            Next::Fetch { version, from } => {
                let p = self.parked.get_mut(&id).expect("the read waiting");
                if p.fetching != Some(version) {
                    p.fetching = Some(version);
                    self.stats.fetches += 1;
                    out.send(from, MeteorMsg::Fetch { chain, key, version });
                }
            }
        }
    }

    /// Looks again at the waiting reads `which` picks.
    fn wake(&mut self, host: &mut Host, which: impl Fn(&Parked) -> bool, out: &mut Fx) {
        let ids: Vec<u64> = self.parked.iter().filter(|(_, p)| which(p)).map(|(&id, _)| id).collect();
        ids.into_iter().for_each(|id| self.evaluate(host, id, out));
    }

    /// The quorum engine may have stored `version` of `key`: if this replica now holds it, it is owed to the
    /// peers, and reads of the key may agree now.
    fn took(&mut self, host: &mut Host, chain: ChainId, key: &Bytes, version: u64, out: &mut Fx) {
        let held = self.quorum.store(host, chain).and_then(|s| cells::cell(s, key)).map(|c| c.version);
        if held.is_ok_and(|held| held == version) {
            self.statuses.changed(chain, key, version);
            self.wake(host, |p| p.chain == chain && p.key == *key, out);
        }
    }

    fn on_quorum(&mut self, host: &mut Host, now: Time, from: NodeId, q: QuorumMsg, out: &mut Fx) {
        let took: Vec<(ChainId, Bytes, u64)> = match &q {
            QuorumMsg::Write(w) => vec![(w.chain, w.key.clone(), w.versioned.version)],
            QuorumMsg::CopyData(d) => d.entries.iter().map(|(k, v)| (d.chain, k.clone(), v.version)).collect(),
            _ => Vec::new(),
        };
        self.engine(out, |e, fx| e.on_message(host, now, from, q, fx));
        took.iter().for_each(|(chain, key, version)| self.took(host, *chain, key, *version, out));
    }

    /// A peer asks for a page of this replica's versions of `chain`, and from now on follows its changes.
    fn on_page_req(&mut self, host: &mut Host, from: NodeId, chain: ChainId, after: Option<Bytes>, out: &mut Fx) {
        let Some(cfg) = self.quorum.config(chain).filter(|c| c.takes_part(from) && c.takes_part(self.me)) else {
            return;
        };
        let Some(partitions) = self.map.as_ref().map(|m| m.partitions) else { return };
        let seq = self.statuses.follow(from, chain);
        let page = self
            .quorum
            .store(host, chain)
            .and_then(|s| cells::page(s, chain, partitions, after.as_ref(), statuses::PAGE_MAX));
        match page {
            Ok((entries, more)) => {
                let versions = entries.into_iter().map(|(k, v)| (k, v.version)).collect();
                let page = Page {
                    incarnation: self.quorum.incarnation(),
                    chain,
                    after,
                    seq,
                    fence: cfg.fence,
                    versions,
                    more,
                };
                out.send_after_sync(from, MeteorMsg::Page(page));
            }
            Err(e) => tracing::warn!(%chain, "meteor replica cannot page its versions: {e}"),
        }
    }

    fn on_fetch(&mut self, host: &mut Host, from: NodeId, chain: ChainId, key: Bytes, version: u64, out: &mut Fx) {
        let held = self.quorum.store(host, chain).and_then(|s| cells::cell(s, &key));
        let found = held.ok().filter(|v| v.version == version);
        out.send_after_sync(from, MeteorMsg::Fetched { chain, key, found });
    }

    fn on_fetched(&mut self, host: &mut Host, chain: ChainId, key: Bytes, found: Option<Versioned>, out: &mut Fx) {
        match found {
            Some(v) => {
                self.fetched.insert((chain, key.clone()), v);
            }
            // It moved on: the next statuses say to what, and the read asks again.
            None => {
                self.parked.values_mut().filter(|p| p.chain == chain && p.key == key).for_each(|p| p.fetching = None)
            }
        }
        self.wake(host, |p| p.chain == chain && p.key == key, out);
    }

    /// The statuses due (`Statuses::next`): every interval to the peers that reads waiting here count, so that
    /// idle peers, which hear from this node only now and then, send theirs every interval too.
    fn send_statuses(&mut self, out: &mut Fx) {
        let chains: BTreeSet<ChainId> = self.parked.values().map(|p| p.chain).collect();
        let wanting: BTreeSet<NodeId> = (chains.into_iter())
            .filter_map(|c| self.quorum.config(c))
            .flat_map(|cfg| cfg.holders)
            .filter(|&n| n != self.me)
            .collect();
        for (to, status) in self.statuses.next(self.clock_ms, &wanting) {
            // A status says what this replica holds: only what is durable.
            out.send_after_sync(to, MeteorMsg::Status(status));
        }
        for (to, chain, after) in self.statuses.page_requests() {
            out.send(to, MeteorMsg::PageReq { chain, after });
        }
    }

    /// Reads that waited too long get a timeout, and values no read waits for go.
    fn expire(&mut self, host: &mut Host, now: Time, out: &mut Fx) {
        let late: Vec<u64> =
            self.parked.iter().filter(|(_, p)| now.since(p.since) > reads::WAIT_MAX).map(|(&id, _)| id).collect();
        for id in late {
            let p = self.parked.remove(&id).expect("the read waiting");
            self.stats.waits_timed_out += 1;
            let why = "no majority of the partition's replicas agreed on a version of the key within 2 s";
            self.answer(host, &p.origin, timed_out(false, why), out);
        }
        let parked = &self.parked;
        self.fetched.retain(|(chain, key), _| parked.values().any(|p| p.chain == *chain && p.key == *key));
    }
}

impl KeyspaceProtocol for MeteorNode {
    const PROTOCOL: Protocol = Protocol::Meteor;
    type Msg = MeteorMsg;
    type Timer = MeteorTimer;
    type Config = MeteorConfig;

    fn open(
        me: NodeId,
        cfg: MeteorConfig,
        _stores: &mut Stores,
        incarnation: u64,
        _previous: PreviousRun,
    ) -> Result<MeteorNode, StoreError> {
        Ok(MeteorNode {
            me,
            cfg,
            map: None,
            quorum: QuorumNode::serving(Protocol::Meteor, me, incarnation),
            quorum_fx: Effects::new(),
            statuses: Statuses::new(incarnation),
            interval: None,
            ticking: false,
            parked: BTreeMap::new(),
            next_read: 0,
            fetched: BTreeMap::new(),
            clock_ms: 0,
            trips: RoundTrips::default(),
            stats: MeteorStats::default(),
        })
    }

    fn adopt(&mut self, host: &mut Host, map: &Arc<ClusterMap>, now: Time, out: &mut Fx) {
        self.see_clock(host);
        self.map = Some(map.clone());
        self.engine(out, |e, fx| e.adopt(host, map, now, fx));
        let mut shared: BTreeMap<NodeId, BTreeMap<ChainId, Fence>> = BTreeMap::new();
        let (mut interval, mut redundancy): (Option<u32>, u32) = (None, 1);
        for c in map.chains.values() {
            let Some(cfg) = self.quorum.config(c.id).filter(|cfg| cfg.takes_part(self.me)) else { continue };
            for peer in cfg.writers().filter(|&p| p != self.me) {
                shared.entry(peer).or_default().insert(c.id, cfg.fence);
            }
            let Some(m) = map.keyspaces.get(&c.id.keyspace()).and_then(|k| k.config.protocol.meteor()) else {
                continue;
            };
            interval = Some(interval.map_or(m.status_interval_ms, |i| i.min(m.status_interval_ms)));
            redundancy = redundancy.max(m.redundancy);
        }
        self.statuses.adopt(&shared, u64::from(redundancy));
        self.interval = interval.map(|ms| Duration::from_millis(u64::from(ms)));
        if let (Some(every), false) = (self.interval, self.ticking) {
            self.ticking = true;
            out.set_timer(MeteorTimer::Status, every);
        }
        self.wake(host, |_| true, out);
    }

    fn on_request(&mut self, host: &mut Host, now: Time, origin: Origin, req: Request, out: &mut Fx) {
        self.see_clock(host);
        match Asked::of(&req, Protocol::Meteor) {
            Ok(Asked::Read(read)) => self.route_read(host, now, origin, req, read, out),
            _ => self.engine(out, |e, fx| e.on_request(host, now, origin, req, fx)),
        }
    }

    fn on_message(&mut self, host: &mut Host, now: Time, from: NodeId, msg: MeteorMsg, out: &mut Fx) {
        self.see_clock(host);
        match msg {
            MeteorMsg::Quorum(q) => self.on_quorum(host, now, from, q, out),
            MeteorMsg::Read(r) => self.serve_read(host, now, r, out),
            MeteorMsg::Answer { origin, reply } => self.answer(host, &origin, reply, out),
            MeteorMsg::Bounce { origin } => self.on_bounce(host, origin, out),
            MeteorMsg::Status(s) => {
                if self.statuses.on_status(from, s) {
                    self.wake(host, |_| true, out);
                }
            }
            MeteorMsg::PageReq { chain, after } => self.on_page_req(host, from, chain, after, out),
            MeteorMsg::Page(p) => self.statuses.on_page(from, p),
            MeteorMsg::Fetch { chain, key, version } => self.on_fetch(host, from, chain, key, version, out),
            MeteorMsg::Fetched { chain, key, found } => self.on_fetched(host, chain, key, found, out),
            MeteorMsg::Probe { sent_ns } => out.send(from, MeteorMsg::ProbeAnswer { sent_ns }),
            MeteorMsg::ProbeAnswer { sent_ns } => {
                if let Some(rtt) = now.0.checked_sub(sent_ns) {
                    self.trips.on_probe_answered(from, Duration::from_nanos(rtt));
                }
            }
        }
    }

    fn on_timer(&mut self, host: &mut Host, now: Time, timer: MeteorTimer, out: &mut Fx) {
        self.see_clock(host);
        match timer {
            MeteorTimer::Quorum(t) => self.engine(out, |e, fx| e.on_timer(host, now, t, fx)),
            MeteorTimer::Status => {
                self.ticking = false;
                let Some(every) = self.interval else { return };
                self.send_statuses(out);
                for peer in self.trips.due(self.statuses.peers()) {
                    out.send(peer, MeteorMsg::Probe { sent_ns: now.0 });
                }
                self.ticking = true;
                out.set_timer(MeteorTimer::Status, every);
            }
        }
    }

    fn on_tick(&mut self, host: &mut Host, now: Time, out: &mut Fx) {
        self.see_clock(host);
        self.engine(out, |e, fx| e.on_tick(host, now, fx));
        self.expire(host, now, out);
    }

    fn reports(&self, syncs: Syncs, into: &mut ReplicaReports) {
        self.quorum.reports(syncs, into);
    }

    fn lost_chains(&self) -> BTreeSet<ChainId> {
        self.quorum.lost_chains()
    }

    fn status(&self, stores: &Stores, now: Time) -> Vec<ReplicaStatus> {
        self.quorum.status(stores, now)
    }

    fn check_invariants(&self) -> Result<(), Violation> {
        self.quorum.check_invariants()?;
        self.statuses.check()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let (m, s) = (self.stats, self.statuses.stats);
        let mut all = self.quorum.counters();
        all.extend([
            ("meteor reads", m.reads),
            ("meteor reads answered at once", m.reads_at_once),
            ("meteor reads parked", m.reads_parked),
            ("meteor parked ms", m.waits.sum_us / 1000),
            ("meteor values fetched", m.fetches),
            ("meteor reads timed out waiting", m.waits_timed_out),
            ("meteor reads bounced", m.bounced),
            ("statuses sent", s.sent),
            ("statuses received", s.received),
            ("status bytes sent", s.bytes_sent),
            ("status bytes received", s.bytes_received),
            ("status entries sent", s.entries_sent),
            ("statuses with gaps", s.gaps),
            ("status views restarted", s.restarts),
            ("status pages", s.pages),
        ]);
        all
    }

    /// θt in force for reads from this replica's region: the least over the partitions it holds (0 before any
    /// is measured, or with θt 0).
    fn gauges(&self) -> Vec<(&'static str, u64)> {
        vec![("meteor theta ms", self.thetas_ms(|_| true).into_iter().min().unwrap_or(0))]
    }

    /// θt in force for reads from this node's region, least and most over the keyspace's partitions it holds.
    fn keyspace_gauges(&self, keyspace: KeyspaceId) -> Vec<(&'static str, u64)> {
        let thetas = self.thetas_ms(|c| c.keyspace() == keyspace);
        match (thetas.iter().min(), thetas.iter().max()) {
            (Some(&least), Some(&most)) => vec![("theta_ms_least", least), ("theta_ms_most", most)],
            _ => Vec::new(),
        }
    }

    fn latencies(&self) -> Vec<(&'static str, Latencies)> {
        vec![("meteor read", self.stats.waits)]
    }

    fn label(msg: &MeteorMsg) -> &'static str {
        msg.label()
    }

    /// Sequentially consistent (seed 001 §4.2.2, Theorem 1), within the clock bound.
    fn claim(_config: &KeyspaceConfig) -> Claim {
        Claim::Sequential
    }

    /// Plain reads, puts and deletes only (`Asked::of`).
    fn capabilities(config: &KeyspaceConfig) -> Capabilities {
        QuorumNode::capabilities(config)
    }
}
