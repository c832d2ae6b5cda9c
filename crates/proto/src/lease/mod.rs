//! GlobLease (seed 001 §4.1): a lease keyspace keeps a replica of every partition in each region it names, and
//! each key has a master among them (the replica in the key's master region: the keyspace's home region unless the
//! key is pinned to another). Writes go to the key's master only; a replica holding a valid lease on a key answers
//! reads of it locally, without a round trip; one without asks the master, which answers with the value and a
//! lease (Algorithm 1). The full argument, the
//! clock model and what breaks beyond it are in docs/protocols/lease.md.
//!
//! - `reads.rs`: Algorithm 1: the master and leased replicas answer at once; the others renew.
//! - `parked.rs`: reads of a leased key with a write under way wait for its commit instead of renewing.
//! - `writes.rs`: Algorithm 2: active writes push the value and a lease to every replica and succeed once a
//!   majority that includes every replica still able to answer under a lease has it; passive writes, while no
//!   lease is valid, are the master's alone and reach the others in the background.
//! - `mastery.rs`: the master's own lease: members promise it, a heartbeat at a time, to help no other master
//!   for a while, and a master answers (and confirms its replicas' leases) only within those promises. This is
//!   what makes failover safe: a new master starts once a majority's promises to the old one ran out, when no
//!   replica can still answer under the old master's leases.
//! - `domains.rs`: who masters which keys: a partition's keys split into domains, one per master region.
//! - `takeover.rs`: a new master's first step: it copies every key's newest version from a majority of the
//!   partition and writes back what its domain needs.
//! - `catchup.rs`: keys that move into a domain its master already runs, copied alone.
//! - `origins.rs`: a master asks to move a key's master to the region most of its writes come from.
//! - `versions.rs`: versions number by map epoch first, so a key's next master outranks every earlier one.
//! - `join.rs`: a replica added to the partition copies it (as a quorum joiner does).
//! - `extensions.rs`: leases extended before they end, for keys read under them.
//! - `timing.rs`: the clock arithmetic: who starts counting first, and who counts short.
//! - `affiliates.rs`: affiliated nodes (§4.1.4), which answer a host's hot keys under secondary leases.
//!
//! Masters change only with the map: the manager's Raft log decides who is in a partition, where each key is
//! mastered, and so who its master is (the seed's Paxos election, replaced by the consensus the cluster already
//! runs; `lease.md` says why they are equivalent). Conditional and read-modify-write commands, expiry, SCAN and
//! cache mode are the chain's: a lease keyspace refuses them.

mod affiliates;
mod catchup;
mod domains;
mod extensions;
mod join;
mod mastery;
pub mod msg;
mod origins;
mod parked;
mod planted;
mod reads;
mod takeover;
pub mod timing;
mod versions;
mod writes;

use crate::chain::ReplicaStatus;
use crate::host::{Host, Syncs};
use crate::map::{ChainChange, ChainView, ClusterMap, Pin};
use crate::protocol::{Capabilities, Claim, KeyspaceProtocol, PreviousRun};
use crate::reports::{ReplicaReports, StepReport};
use crate::requests::Origin;
use crate::stores::Stores;
use crate::versioned::{cells, Asked};
pub use affiliates::HotConfig;
use bytes::Bytes;
pub(crate) use domains::{Domain, Domains};
use mastery::{Mastery, Member};
use meridian_core::{
    ChainId, Effects, KeyspaceConfig, LeaseOptions, NodeId, Protocol, ReplicaKind, Reply, Request, Time, Violation,
    WriteMode,
};
use meridian_store::{Datastore, StoreError};
pub use msg::{Fence, LeaseMsg, OpId, Versioned};
pub use origins::OriginsConfig;
pub use planted::LeasePlantedBug;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use writes::WriteOp;

pub type Fx = Effects<LeaseMsg, LeaseTimer>;

/// A lease keyspace sets no timers: its upkeep rides the node's tick.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LeaseTimer {}

#[derive(Clone, Debug, Default)]
pub struct LeaseConfig {
    /// How quickly masters move keys to the region their writes come from.
    pub origins: OriginsConfig,
    /// Which keys a host gives its affiliated nodes.
    pub hot: HotConfig,
    #[cfg(feature = "planted-bugs")]
    pub planted_bug: Option<LeasePlantedBug>,
}

/// What this node's lease core did, for the simulator's counters and the node's metrics.
#[derive(Clone, Copy, Debug, Default)]
pub struct LeaseStats {
    /// Reads answered here without asking another node: as master, or under a lease.
    pub local_reads: u64,
    /// Reads this replica asked the master for (a renewal each).
    pub renewals: u64,
    /// Reads this replica answered under a lease after waiting for a write's commit (`parked.rs`).
    pub parked: u64,
    /// Renewals of a lease this replica held from the same master and that ran its length.
    pub expired: u64,
    /// Leases this node granted as master (renewals and writes' pushes).
    pub granted: u64,
    /// Leases this node extended as master, before they ended (`extensions.rs`).
    pub extended: u64,
    pub writes: u64,
    pub passive_writes: u64,
    /// Keys a new master wrote back because fewer than a majority held their newest version.
    pub repairs: u64,
    pub takeovers: u64,
    /// Keys a master took over as they moved into its domain (`catchup.rs`).
    pub moved_in: u64,
    /// Keys this node, as their master, asked to move to the region their writes come from (`origins.rs`).
    pub moves_asked: u64,
    /// Requests handed back because this node could not serve them (not the master, not ready).
    pub bounced: u64,
    pub copies: u64,
    /// Reads this node answered as an affiliated node, under a secondary lease.
    pub affiliate_reads: u64,
    /// Reads this node, as a host, sent on to its affiliated nodes.
    pub spread: u64,
    /// Secondary leases this node gave its affiliated nodes.
    pub secondaries: u64,
    /// Secondary leases this node revoked for writes.
    pub revocations: u64,
}

/// A partition's configuration in a map: who holds it, who joins, and who masters which of its keys.
#[derive(Clone, Debug)]
pub(crate) struct Group {
    pub chain: ChainId,
    pub fence: Fence,
    /// Members with a whole replica: the replication group.
    pub holders: Vec<NodeId>,
    /// The node an Add in flight brings in: it takes writes, and counts once the step is done.
    pub joiner: Option<NodeId>,
    /// Who masters which keys (`domains.rs`).
    pub domains: Arc<Domains>,
    pub opts: LeaseOptions,
}

impl Group {
    fn of(map: &ClusterMap, c: &ChainView, pins: &BTreeMap<ChainId, BTreeMap<Bytes, Pin>>) -> Option<Group> {
        let keyspace = map.keyspaces.get(&c.id.keyspace())?;
        let opts = *keyspace.config.protocol.lease()?;
        let joiner = match c.change {
            Some(ChainChange::Add { node, .. }) => Some(node),
            _ => None,
        };
        let holders = c.holders();
        let domains = Arc::new(Domains::of(map, c, pins.get(&c.id).cloned().unwrap_or_default())?);
        let step = c.change.as_ref().map_or(0, ChainChange::step);
        Some(Group { chain: c.id, fence: Fence { view: c.view, step }, holders, joiner, domains, opts })
    }

    pub fn majority(&self) -> usize {
        self.holders.len() / 2 + 1
    }

    /// How many writers besides the master must hold a write durably: the rest of a majority of the holders, and
    /// the joiner, which counts once its step is done.
    pub fn others_needed(&self) -> usize {
        self.majority() - 1 + usize::from(self.joiner.is_some())
    }

    /// Whom a write goes to.
    pub fn writers(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.holders.iter().copied().chain(self.joiner)
    }

    pub fn takes_part(&self, node: NodeId) -> bool {
        self.holders.contains(&node) || self.joiner == Some(node)
    }

    /// The domain `key` is mastered in.
    pub fn domain_of(&self, key: &[u8]) -> &str {
        self.domains.of_key(key)
    }

    /// The domain `key` is mastered in, named with this partition: what masteries and grants are kept by.
    pub fn domain_key(&self, key: &[u8]) -> Domain {
        (self.chain, self.domain_of(key).to_string())
    }

    /// The master of `key`.
    pub fn master_of(&self, key: &[u8]) -> NodeId {
        self.domains.master(self.domain_of(key)).expect("every domain has a master")
    }

    /// The master of `domain`, if the partition has that domain.
    pub fn master_in(&self, domain: &str) -> Option<NodeId> {
        self.domains.master(domain)
    }

    fn lease_ns(&self) -> u64 {
        u64::from(self.opts.lease_ms) * 1_000_000
    }
}

pub struct LeaseNode {
    me: NodeId,
    cfg: LeaseConfig,
    incarnation: u64,
    map: Option<Arc<ClusterMap>>,
    /// Whether this node adopted every map epoch up to its current map's: if it missed one, a partition's master
    /// may have changed and changed back unseen, and no mastery it kept can be trusted.
    continuous: bool,
    /// Every lease partition of the map, by partition.
    groups: BTreeMap<ChainId, Group>,
    /// This node as a member: promises, confirmations, leases and keys awaiting a commit.
    member: Member,
    /// The domains this node is master of, with its state as master of each.
    masteries: BTreeMap<Domain, Mastery>,
    /// The leases and confirmations this process granted as master, by domain.
    grants: BTreeMap<Domain, mastery::Grants>,
    /// Heartbeat rounds this node sent as master (`mastery.rs`).
    rounds: mastery::Rounds,
    /// Where the writes this node takes as master come from (`origins.rs`).
    origins: origins::Origins,
    /// This node as a host of affiliated nodes (`affiliates.rs`).
    hosting: affiliates::Hosting,
    /// This node as an affiliated node.
    secondaries: affiliates::Secondaries,
    /// Routes this node learned to affiliated nodes.
    routes: affiliates::Routes,
    /// Reads waiting for a commit of their key (`parked.rs`).
    parked: BTreeMap<Key, Vec<parked::Parked>>,
    /// Keys whose parked reads waited in vain: their reads renew until a commit of the key arrives.
    unawaited: BTreeSet<Key>,
    /// Writes this node drives as master, by number.
    ops: BTreeMap<u64, WriteOp>,
    next_op: u64,
    /// The versions this node stamps (`versions.rs`): they grow across its runs, and a new master stamps past
    /// every version it copied.
    numbering: versions::Numbering,
    /// Versions of writes handed back after they went out, by request, with the tick they were handed back at:
    /// sent again, they keep that version.
    stamped: BTreeMap<meridian_core::RequestId, (u64, u64)>,
    /// Partitions whose store has had its reclaim-all watermark this run.
    marked: BTreeSet<ChainId>,
    /// Copies this node makes as a joiner, by partition.
    joins: BTreeMap<ChainId, crate::versioned::copy::JoinCopy>,
    /// Finished steps, each with the number of syncs begun before it: reported once a later sync completed.
    finished: BTreeMap<ChainId, (StepReport, u64)>,
    stats: LeaseStats,
}

impl LeaseNode {
    pub fn stats(&self) -> LeaseStats {
        self.stats
    }

    /// The store `chain`'s replica lives in, opened if need be, with the watermark that lets compaction reclaim
    /// superseded versions.
    fn store<'h>(&mut self, host: &'h mut Host, chain: ChainId) -> Result<&'h mut dyn Datastore, StoreError> {
        let store = host.stores.get_or_open((chain.keyspace(), ReplicaKind::Log), false)?;
        if self.marked.insert(chain) {
            store.append(&cells::reclaim_all(chain))?;
        }
        Ok(store)
    }

    /// What this node's store holds of `key`.
    fn cell(&mut self, host: &mut Host, chain: ChainId, key: &[u8]) -> Result<Versioned, StoreError> {
        self.store(host, chain).and_then(|s| cells::cell(s, key))
    }

    /// Takes `v` of `key`, a version the partition's master sent, and returns the version the store held before.
    /// Only a newer version is taken: one this store acknowledged may not be taken back. The exception is a
    /// version equal to the store's with another value: two runs of one master numbered two writes alike (a
    /// master that restarts numbers from what a majority holds), and the one held here, which no majority had,
    /// never succeeded; the master's is the partition's.
    fn take(&mut self, host: &mut Host, chain: ChainId, key: &Bytes, v: &Versioned) -> Result<u64, StoreError> {
        let store = self.store(host, chain)?;
        let held = cells::cell(store, key)?;
        if v.version > held.version || (v.version == held.version && v.value != held.value) {
            cells::put(store, chain, key, v)?;
        }
        Ok(held.version)
    }

    /// Records a write to `chain`'s store: the runner owes a sync in its keyspace's durability mode.
    fn mark_written(&self, chain: ChainId, out: &mut Fx) {
        let durability = self.map.as_ref().and_then(|m| m.keyspaces.get(&chain.keyspace())?.config.durability);
        out.mark_dirty_as(durability);
    }

    /// Answers `origin`: here if the request is this node's, otherwise to the node it came from.
    fn answer(&self, host: &mut Host, origin: &Origin, reply: Reply, out: &mut Fx) {
        self.answer_as(host, origin, reply, false, out);
    }

    /// [`Self::answer`], held until a sync if `after_sync`.
    fn answer_as(&self, host: &mut Host, origin: &Origin, reply: Reply, after_sync: bool, out: &mut Fx) {
        if origin.node != self.me {
            let msg = LeaseMsg::Answer { origin: *origin, reply };
            return if after_sync { out.send_after_sync(origin.node, msg) } else { out.send(origin.node, msg) };
        }
        if let Some(id) = host.requests.complete(origin) {
            if after_sync {
                out.reply_after_sync(id, reply);
            } else {
                out.reply(id, reply);
            }
        }
    }

    /// Hands a request back to its origin, which sends it again at its next tick; a write keeps its version.
    fn bounce(&mut self, host: &mut Host, origin: Origin, req: Request, stamped: Option<u64>, out: &mut Fx) {
        self.stats.bounced += 1;
        if origin.node != self.me {
            return out.send(origin.node, LeaseMsg::Bounce { origin, stamped });
        }
        if let Some(version) = stamped {
            self.stamped.insert(origin.id, (version, host.tick));
        }
        host.requests.bounce_here(&origin, req);
    }

    fn on_bounce(&mut self, host: &mut Host, origin: Origin, stamped: Option<u64>, out: &mut Fx) {
        if let Some(version) = stamped.filter(|_| origin.node == self.me) {
            self.stamped.insert(origin.id, (version, host.tick));
        }
        if let Some((id, write)) = host.requests.bounced(&origin) {
            out.reply(id, crate::host::timed_out(write, "the lease master bounced it with no copy to send again"));
        }
    }

    /// A request, from a client of this node or forwarded here, for the partition `group`.
    fn serve(&mut self, host: &mut Host, now: Time, fwd: msg::Forwarded, group: Group, out: &mut Fx) {
        match Asked::of(&fwd.req, Protocol::Lease) {
            Err(why) => {
                let refused = Reply::Error(meridian_core::ErrorKind::Invalid, why.to_string());
                self.answer(host, &fwd.origin, refused, out)
            }
            Ok(Asked::Read(read)) => self.read(host, now, fwd, read, group, out),
            Ok(Asked::Write(value)) => self.write(host, now, fwd, value, group, out),
        }
    }

    /// Sends a request on towards `to`; a request of this node's own is kept, for when it bounces.
    fn forward(&mut self, host: &mut Host, to: NodeId, mut fwd: msg::Forwarded, out: &mut Fx) {
        const HOPS_MAX: u8 = 3;
        if fwd.hops >= HOPS_MAX {
            let (origin, req, stamped) = (fwd.origin, fwd.req, fwd.stamped);
            return self.bounce(host, origin, req, stamped, out);
        }
        if fwd.origin.node == self.me {
            host.requests.keep(&fwd.origin, fwd.req.clone());
        }
        fwd.hops += 1;
        out.send(to, LeaseMsg::Request(fwd));
    }

    /// Notes this node's part of a step as done; it is reported once a sync begun after it completes, which
    /// this owes the runner even when nothing was written.
    fn step_finished(&mut self, host: &Host, report: StepReport, out: &mut Fx) {
        out.mark_dirty();
        self.finished.insert(report.chain(), (report, host.syncs.begun));
    }

    /// Drops the writes whose request timed out at the front-end, and stale stamped versions.
    fn expire(&mut self, host: &Host) {
        let timeout = host.cfg.timeout_ticks();
        self.ops.retain(|_, o| o.started.is_none_or(|t| host.tick.saturating_sub(t) <= timeout));
        self.stamped.retain(|_, &mut (_, at)| host.tick.saturating_sub(at) <= timeout);
    }
}

impl KeyspaceProtocol for LeaseNode {
    const PROTOCOL: Protocol = Protocol::Lease;
    type Msg = LeaseMsg;
    type Timer = LeaseTimer;
    type Config = LeaseConfig;

    fn open(
        me: NodeId,
        cfg: LeaseConfig,
        stores: &mut Stores,
        incarnation: u64,
        previous: PreviousRun,
    ) -> Result<LeaseNode, StoreError> {
        let record = stores.load_record(versions::RECORD)?.map(|b| versions::decode(&b)).transpose()?;
        let numbering = versions::Numbering::open(record, previous.map.map_or(0, |m| m.epoch));
        let origins = origins::Origins::new(cfg.origins);
        let hosting = affiliates::Hosting::new(cfg.hot, incarnation, previous.map.is_some());
        Ok(LeaseNode {
            me,
            cfg,
            incarnation,
            map: None,
            continuous: false,
            groups: BTreeMap::new(),
            member: Member::new(previous.map.is_some()),
            masteries: BTreeMap::new(),
            grants: BTreeMap::new(),
            rounds: mastery::Rounds::default(),
            parked: BTreeMap::new(),
            unawaited: BTreeSet::new(),
            ops: BTreeMap::new(),
            next_op: 0,
            numbering,
            origins,
            hosting,
            secondaries: affiliates::Secondaries::default(),
            routes: affiliates::Routes::default(),
            stamped: BTreeMap::new(),
            marked: BTreeSet::new(),
            joins: BTreeMap::new(),
            finished: BTreeMap::new(),
            stats: LeaseStats::default(),
        })
    }

    fn adopt(&mut self, host: &mut Host, map: &Arc<ClusterMap>, now: Time, out: &mut Fx) {
        self.continuous = self.map.as_ref().is_some_and(|m| map.epoch <= m.epoch + 1);
        self.map = Some(map.clone());
        let pins = Domains::pins_by_chain(map);
        let groups: BTreeMap<ChainId, Group> =
            map.chains.values().filter_map(|c| Some((c.id, Group::of(map, c, &pins)?))).collect();
        let changes: BTreeMap<ChainId, Option<ChainChange>> =
            map.chains.values().map(|c| (c.id, c.change.clone())).collect();
        self.groups = groups;
        self.hosting.affiliates = map.affiliates_of(self.me).collect();
        self.hosting.hosted = map.hosts.values().any(|&h| h == self.me);
        self.secondaries.host = map.hosts.get(&self.me).copied();
        self.member.adopt(self.me, &self.groups);
        self.adopt_masteries(host, now, out);
        self.adopt_joins(host, &changes, out);
    }

    fn on_request(&mut self, host: &mut Host, now: Time, origin: Origin, req: Request, out: &mut Fx) {
        let stamped = self.stamped.remove(&origin.id).map(|(version, _)| version);
        let fwd = msg::Forwarded { origin, req, hops: 0, stamped, withheld: None };
        self.on_forwarded(host, now, fwd, out);
    }

    fn on_message(&mut self, host: &mut Host, now: Time, from: NodeId, msg: LeaseMsg, out: &mut Fx) {
        match msg {
            LeaseMsg::Request(fwd) => self.on_forwarded(host, now, fwd, out),
            LeaseMsg::Answer { origin, reply } => {
                self.learn_route(host, now, from, &origin);
                self.answer(host, &origin, reply, out)
            }
            LeaseMsg::Bounce { origin, stamped } => self.on_bounce(host, origin, stamped, out),
            LeaseMsg::Renew(r) => self.on_renew(host, now, from, r, out),
            LeaseMsg::Granted(g) => self.on_granted(host, from, g, out),
            LeaseMsg::Extend(e) => self.on_extend(now, from, e, out),
            LeaseMsg::Extended(e) => self.on_extended(from, e),
            LeaseMsg::Push(p) => self.on_push(host, now, from, p, out),
            LeaseMsg::Stored { op, since } => self.on_ack(host, now, from, op, Some(since), out),
            LeaseMsg::Released { op } => self.on_ack(host, now, from, op, None, out),
            LeaseMsg::Commit { chain, key, version, leased } => {
                let since = leased.iter().find(|(n, _)| *n == self.me).map(|&(_, since)| since);
                self.member.committed(chain, &key, version, since);
                self.unpark(host, chain, &key, version, out);
            }
            LeaseMsg::Heartbeat(hb) => self.on_heartbeat(now, from, hb, out),
            LeaseMsg::Promised { incarnation, round, domains } => {
                self.on_promised(host, now, from, incarnation, round, domains, out)
            }
            LeaseMsg::CopyReq { req, to } => self.on_copy_req(host, from, req, to, out),
            LeaseMsg::CopyData { data, to } => self.on_copy_data(host, now, from, data, to, out),
            LeaseMsg::Fetch(f) => self.on_fetch(host, from, f, out),
            LeaseMsg::Fetched(f) => self.on_fetched(host, now, from, f, out),
            LeaseMsg::Pull(p) => self.on_pull(host, now, from, p, out),
            LeaseMsg::Hot(hot) => self.on_hot(from, hot),
            LeaseMsg::Revoke { chain, key, at } => self.on_revoke(from, chain, key, at, out),
            LeaseMsg::Revoked { chain, key, at } => self.on_revoked(host, now, from, (chain, key), at, out),
        }
    }

    fn on_timer(&mut self, _host: &mut Host, _now: Time, timer: LeaseTimer, _out: &mut Fx) {
        match timer {}
    }

    /// The manager's leases on the partitions this node is master of (`mastery.rs`).
    fn on_leases(&mut self, host: &mut Host, chains: &[(ChainId, u64)], until: Time, now: Time, out: &mut Fx) {
        let mut began = false;
        for &(chain, view) in chains {
            for m in self.masteries_of(chain) {
                let before = m.serves(now);
                m.granted(view, until);
                began |= !before && m.serves(now);
            }
        }
        if began {
            // A lease that just began may let writes waiting for it go.
            self.drive_writes(host, now, out);
        }
    }

    fn on_tick(&mut self, host: &mut Host, now: Time, out: &mut Fx) {
        self.member.start(now);
        self.expire(host);
        let heartbeat = host.tick.is_multiple_of(timing::HEARTBEAT_TICKS);
        if heartbeat {
            self.heartbeat(now, out);
            self.ask_extensions(now, out);
            let parked = &self.parked;
            self.member.forget_withheld(|k| parked.contains_key(k));
        }
        self.tend_affiliates(host.tick, now, heartbeat, out);
        self.drive_writes(host, now, out);
        self.unpark_late(host, now, out);
        self.prod_joins(out);
        self.prod_takeovers(out);
        self.prod_catchups(host, now, out);
        self.judge_origins(host.tick);
    }

    fn reports(&self, syncs: Syncs, into: &mut ReplicaReports) {
        into.steps.extend(self.finished.values().filter(|(_, at)| syncs.done > *at).map(|(r, _)| *r));
        into.moves.extend(self.origins.asked().cloned());
    }

    fn lost_chains(&self) -> BTreeSet<ChainId> {
        BTreeSet::new()
    }

    fn status(&self, _stores: &Stores, now: Time) -> Vec<ReplicaStatus> {
        let mine = self.groups.values().filter(|g| g.takes_part(self.me));
        mine.map(|g| {
            let masters = g.domains.all().any(|(_, m)| m == self.me);
            let role = match (masters, g.holders.contains(&self.me)) {
                (true, _) => "master",
                (false, true) => "replica",
                (false, false) => "joiner",
            };
            let mastered = g.domains.all().filter_map(|(d, _)| self.masteries.get(&(g.chain, d.to_string())));
            let lease = self.member.confirmed(g, now) || mastered.into_iter().any(|m| m.serves(now));
            ReplicaStatus::of_cells(g.chain, role, g.fence.view, g.holders.contains(&self.me), lease)
        })
        .collect()
    }

    fn gauges(&self) -> Vec<(&'static str, u64)> {
        vec![("lease keys awaiting a commit", self.member.awaiting_commit())]
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let s = self.stats;
        vec![
            ("lease local reads", s.local_reads),
            ("lease renewals", s.renewals),
            ("lease reads parked", s.parked),
            ("lease expired", s.expired),
            ("leases granted", s.granted),
            ("leases extended", s.extended),
            ("lease writes", s.writes),
            ("lease passive writes", s.passive_writes),
            ("lease repairs", s.repairs),
            ("lease takeovers", s.takeovers),
            ("lease keys moved in", s.moved_in),
            ("lease key moves asked", s.moves_asked),
            ("lease requests bounced", s.bounced),
            ("lease copies", s.copies),
            ("lease affiliate reads", s.affiliate_reads),
            ("lease reads spread to affiliates", s.spread),
            ("lease secondary leases granted", s.secondaries),
            ("lease secondary leases revoked", s.revocations),
        ]
    }

    fn label(msg: &LeaseMsg) -> &'static str {
        msg.label()
    }

    /// Linearizable with active writes; passive writes are the master's alone until they spread, so a master
    /// that fails loses them, and reads may then be stale.
    fn claim(config: &KeyspaceConfig) -> Claim {
        match config.protocol.lease().map(|l| l.write_mode) {
            Some(WriteMode::Passive) => Claim::Staleness,
            _ => Claim::Linearizable,
        }
    }

    /// Plain reads, puts and deletes only (`Asked::of`).
    fn capabilities(_config: &KeyspaceConfig) -> Capabilities {
        Capabilities { conditional: false, expiry: false, scan: false }
    }

    fn check_invariants(&self) -> Result<(), Violation> {
        for ((chain, domain), m) in &self.masteries {
            let Some(g) = self.groups.get(chain) else {
                return Err(format!("{} is master of {chain}, which its map lacks", self.me).into());
            };
            if g.master_in(domain) != Some(self.me) {
                let master = g.master_in(domain);
                return Err(
                    format!("{} acts as master of {chain} in {domain:?}, whose master is {master:?}", self.me).into()
                );
            }
            if m.fence != g.fence {
                return Err(
                    format!("{} is master of {chain} in {:?}, its map is at {:?}", self.me, m.fence, g.fence).into()
                );
            }
        }
        Ok(())
    }
}

impl LeaseNode {
    /// A request taken here or forwarded: served if this node can, otherwise sent on towards who can.
    fn on_forwarded(&mut self, host: &mut Host, now: Time, fwd: msg::Forwarded, out: &mut Fx) {
        let (Some(keyspace), Some(token)) = (fwd.req.keyspace(), fwd.req.token()) else { return };
        let Some(map) = self.map.clone() else {
            let (origin, req, stamped) = (fwd.origin, fwd.req, fwd.stamped);
            return self.bounce(host, origin, req, stamped, out);
        };
        let Some(group) = map.chain_of(keyspace, token).and_then(|c| self.groups.get(&c.id)).cloned() else {
            if let Some((id, refusal)) = host.unknown_keyspace(&fwd.origin, keyspace) {
                out.reply(id, refusal);
            }
            return;
        };
        self.serve(host, now, fwd, group, out);
    }
}

impl LeaseNode {
    /// Counts a write this node takes as master by the region of the node its client sent it to.
    fn count_origin(&mut self, chain: ChainId, key: &Bytes, origin: NodeId) {
        let Some(map) = self.map.as_deref() else { return };
        if let Some(info) = map.nodes.get(&origin) {
            self.origins.count(chain, key, &info.location.region);
        }
    }

    /// Ends the write-origin window once it has lasted, asking moves for keys whose writes come from elsewhere.
    fn judge_origins(&mut self, tick: u64) {
        let (groups, map) = (&self.groups, self.map.as_deref());
        let movable = |chain: ChainId, key: &Bytes, region: &str| {
            let Some((g, map)) = groups.get(&chain).zip(map) else { return false };
            let there = |n: &NodeId| map.nodes.get(n).is_some_and(|i| i.location.region == region);
            g.domain_of(key) != region && g.holders.iter().any(there)
        };
        self.stats.moves_asked += self.origins.judge(tick, movable);
    }
}

/// A key of a partition: what a replica's leases and pending commits are kept by.
pub(crate) type Key = (ChainId, Bytes);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stores::StoreSpec;
    use meridian_store::{LogOptions, SimVfs};

    #[test]
    fn a_node_numbers_past_the_bound_its_last_run_stored_even_after_a_power_loss() {
        let disk = SimVfs::new();
        let spec = StoreSpec { vfs: Arc::new(disk.clone()), dir: "/n/keyspaces".into(), log: LogOptions::default() };
        let mut stores = Stores::open(spec.clone(), [], []).unwrap();
        let map = ClusterMap { epoch: 9, ..ClusterMap::default() };
        let lost = BTreeSet::new();
        let previous = || PreviousRun { map: Some(&map), clean_stop: false, lost: &lost };
        let mut node = LeaseNode::open(NodeId(1), LeaseConfig::default(), &mut stores, 1, previous()).unwrap();
        let save = |b| stores.save_record(versions::RECORD, &versions::encode(b));
        let first = node.numbering.stamp(9, save).unwrap();
        disk.crash(3);
        let mut stores = Stores::open(spec, [], []).unwrap();
        let mut node = LeaseNode::open(NodeId(1), LeaseConfig::default(), &mut stores, 2, previous()).unwrap();
        assert!(node.numbering.stamp(9, |_| Ok(())).unwrap() > first);
    }
}
