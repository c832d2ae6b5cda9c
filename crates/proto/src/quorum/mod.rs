//! Leaderless quorum replication (Dynamo and Cassandra's consistency levels; ABD's multi-writer register,
//! which LEADS calls MWMR, seed 004 §3): the baseline the geo protocols are measured against. The full argument
//! is docs/protocols/quorum.md.
//!
//! A partition's replicas are its chain's members in the map, taken as a set. Any node coordinates the requests
//! its clients send (`coordinator.rs`): a read asks every replica and waits for R answers, newest version
//! winning; a write sends its version to every replica and waits for W acknowledgements. A replica takes a
//! version only if it is newer than its own, and answers only once what it answers from is durable
//! (`send_after_sync`). Versions are `counter << 16 | node`, so two writes never tie.
//!
//! - `--timestamps clock`: the counter is the coordinator's wall clock (at least one past its last): one round
//!   trip, Cassandra's behaviour. Reads repair stale replicas in the background. With R + W > N and clocks
//!   that agree, a read sees every write acknowledged before it began; a clock ahead makes a write win over
//!   later ones (lost updates), which the simulator measures as staleness.
//! - `--timestamps quorum` (ABD): a write first asks R replicas for the highest version and writes the next;
//!   a read stores what it returns on N − R + 1 replicas (enough to meet every read quorum) before it answers.
//!   With R + W > N, linearizable.
//!
//! Membership follows the map's steps, each fenced: messages carry the partition's configuration ([`Fence`]:
//! view and step in flight) and a replica answers only in its own. A joiner takes writes from the start of its
//! step (which then wait for one acknowledgement more, Cassandra's pending replica), copies every key's newest
//! version from N − W + 1 replicas (`copy.rs`), and counts once the step is done. The planner adds a
//! replacement before it takes a replica out (`rules.rs`), so every acknowledged write stays on W replicas.
//! Conditional and read-modify-write commands, expiry, hashes, SCAN and cache mode are the chain's: a quorum
//! keyspace refuses them.

mod coordinator;
mod copy;
pub mod msg;
pub mod rules;

use crate::chain::ReplicaStatus;
use crate::host::{timed_out, Host, Syncs};
use crate::map::{ChainChange, ChainView, ClusterMap};
use crate::protocol::{Capabilities, Claim, KeyspaceProtocol, PreviousRun};
use crate::reports::{ReplicaReports, StepReport};
use crate::requests::Origin;
use crate::stores::Stores;
use crate::versioned::cells as replica;
use crate::versioned::copy::{still_wanted, JoinCopy};
use crate::versioned::stamp as version;
use crate::versioned::{read_reply, Asked};
use bytes::Bytes;
use coordinator::{newest, op_id, Op, Phase};
use meridian_core::{
    ChainId, Effects, ErrorKind, KeyspaceConfig, NodeId, Protocol, QuorumOptions, ReplicaKind, Reply, Request,
    RequestId, Stamps, Time, Violation,
};
use meridian_store::{Datastore, StoreError};
pub use msg::{Fence, OpId, QuorumMsg, ReadReq, Versioned, WriteReq};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub type Fx = Effects<QuorumMsg, QuorumTimer>;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum QuorumTimer {
    /// A clock-stamped write of this number may be answered once the wall clock has passed its stamp.
    Settle(u64),
}

/// How long a clock-stamped write's answer waits before it looks at the wall clock again.
const SETTLE_PERIOD: std::time::Duration = std::time::Duration::from_millis(1);

#[derive(Clone, Debug, Default)]
pub struct QuorumConfig {}

/// What this node's quorum core did, for the simulator's counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct QuorumStats {
    /// Operations this node coordinated to an answer.
    pub reads: u64,
    pub writes: u64,
    /// Versions sent to stale replicas after a read (clock timestamps) or stored before a read's answer (ABD).
    pub repairs: u64,
    /// Operations handed back to the front-end because the partition's configuration changed under them.
    pub bounced: u64,
    /// Writes that failed because enough replicas held newer versions (meteor keyspaces).
    pub rejected: u64,
    /// Copies this node finished as a joiner.
    pub copies: u64,
}

/// A partition's configuration in a map: who counts, who joins, and the keyspace's levels.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) chain: ChainId,
    pub(crate) fence: Fence,
    /// Members with a whole replica: N, and whom reads ask.
    pub(crate) holders: Vec<NodeId>,
    /// The node an Add in flight brings in: it takes writes, and counts once the step is done.
    joiner: Option<NodeId>,
    /// The member a Remove in flight takes out: it still counts, but what only it holds is gone after the step.
    leaving: Option<NodeId>,
    opts: QuorumOptions,
    /// A replica refuses a write older than what it holds (MeteorShower's writeLocal), rather than taking
    /// nothing and acknowledging it: the write then fails, so no client sees it succeed after a newer one.
    rejects_older: bool,
}

impl Config {
    /// `c`'s configuration, if its keyspace runs `protocol` (quorum, or meteor, whose writes are quorum writes).
    pub(crate) fn of(map: &ClusterMap, c: &ChainView, protocol: Protocol) -> Option<Config> {
        let config = &map.keyspaces.get(&c.id.keyspace())?.config.protocol;
        let opts = *config.quorum().filter(|_| config.protocol() == protocol)?;
        let (joiner, leaving) = match c.change {
            Some(ChainChange::Add { node, .. }) => (Some(node), None),
            Some(ChainChange::Remove { node, .. }) => (None, Some(node)),
            None => (None, None),
        };
        let holders = c.holders();
        let step = c.change.as_ref().map_or(0, ChainChange::step);
        let rejects_older = protocol == Protocol::Meteor;
        Some(Config { chain: c.id, fence: Fence { view: c.view, step }, holders, joiner, leaving, opts, rejects_older })
    }

    /// Replies a read (or a version query) waits for.
    fn read_need(&self) -> usize {
        self.opts.read.of(self.holders.len())
    }

    /// Acknowledgements a write waits for: one more while a joiner takes writes too.
    fn write_need(&self) -> usize {
        self.opts.write.of(self.holders.len()) + usize::from(self.joiner.is_some())
    }

    /// Acknowledgements an ABD read's write-back waits for: one more while a joiner takes writes than
    /// [`Self::write_back_of`] the holders.
    fn write_back_need(&self) -> usize {
        self.write_back_of(self.holders.len()) + usize::from(self.joiner.is_some())
    }

    /// A write-back's acknowledgements among `n` holders: enough to meet every read quorum (N − R + 1), so no
    /// later read returns anything older. A joiner's copy meets every such set too ([`Self::copy_sources`]).
    fn write_back_of(&self, n: usize) -> usize {
        (n + 1).saturating_sub(self.opts.read.of(n)).max(1)
    }

    /// The replicas a joiner copies everything from before it is done: enough to meet every write quorum
    /// (N − W + 1), and with ABD every read's write-back as well (R), so that it holds every acknowledged write
    /// and every value a read returned.
    pub(crate) fn copy_sources(&self) -> usize {
        let n = self.holders.len();
        let writes = n + 1 - self.opts.write.of(n);
        match self.opts.timestamps {
            Stamps::Quorum => writes.max(self.read_need()),
            Stamps::Clock => writes,
        }
    }

    /// With a Remove in flight: the leaving member, and the acknowledgements a store (a write's, or a read's
    /// write-back) needs from the holders that stay, as it would need them in the configuration after the step
    /// (sim seed 78000059 on canopus-7: a read's write-back on 2 of 4, one of them leaving, was gone once the
    /// Remove was done).
    fn staying_need(&self, write_back: bool) -> Option<(NodeId, usize)> {
        let leaving = self.leaving?;
        let n = self.holders.len() - 1;
        Some((leaving, if write_back { self.write_back_of(n) } else { self.opts.write.of(n) }))
    }

    /// Whom a write goes to.
    pub(crate) fn writers(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.holders.iter().copied().chain(self.joiner)
    }

    pub(crate) fn takes_part(&self, node: NodeId) -> bool {
        self.holders.contains(&node) || self.joiner == Some(node)
    }
}

pub struct QuorumNode {
    /// The protocol whose keyspaces this core serves: quorum, or meteor's writes and copies.
    protocol: Protocol,
    me: NodeId,
    incarnation: u64,
    map: Option<Arc<ClusterMap>>,
    /// Operations this node coordinates, by number.
    ops: BTreeMap<u64, Op>,
    next_op: u64,
    /// The counter of the last version this node stamped: its versions only grow within a run.
    last_counter: u64,
    /// Writes handed back to the front-end after they stored their version somewhere, by request, with the tick
    /// they were handed back at: sent again, they keep that version.
    stamped: BTreeMap<RequestId, (u64, u64)>,
    /// Partitions whose store has had its reclaim-all watermark this run (`replica::reclaim_all`).
    marked: BTreeSet<ChainId>,
    /// Copies this node makes as a joiner, by partition.
    copies: BTreeMap<ChainId, JoinCopy>,
    /// Finished steps, each with the number of syncs begun before it: reported once a later sync completed.
    finished: BTreeMap<ChainId, (StepReport, u64)>,
    stats: QuorumStats,
}

impl QuorumNode {
    /// A core for the keyspaces of `protocol`: quorum's own, or meteor's writes and copies.
    pub(crate) fn serving(protocol: Protocol, me: NodeId, incarnation: u64) -> QuorumNode {
        QuorumNode {
            protocol,
            me,
            incarnation,
            map: None,
            ops: BTreeMap::new(),
            next_op: 0,
            last_counter: 0,
            stamped: BTreeMap::new(),
            marked: BTreeSet::new(),
            copies: BTreeMap::new(),
            finished: BTreeMap::new(),
            stats: QuorumStats::default(),
        }
    }

    pub fn stats(&self) -> QuorumStats {
        self.stats
    }

    /// This node's run: what its operation ids and a meteor replica's statuses and pages name.
    pub(crate) fn incarnation(&self) -> u64 {
        self.incarnation
    }

    pub(crate) fn config(&self, chain: ChainId) -> Option<Config> {
        let map = self.map.as_ref()?;
        Config::of(map, map.chains.get(&chain)?, self.protocol)
    }

    /// The store `chain`'s replica lives in, opened if need be, with the watermark that lets compaction reclaim
    /// superseded versions.
    pub(crate) fn store<'h>(
        &mut self,
        host: &'h mut Host,
        chain: ChainId,
    ) -> Result<&'h mut dyn Datastore, StoreError> {
        let store = host.stores.get_or_open((chain.keyspace(), ReplicaKind::Log), false)?;
        if self.marked.insert(chain) {
            store.append(&replica::reclaim_all(chain))?;
        }
        Ok(store)
    }

    /// Records a write to `chain`'s store: the runner owes a sync in its keyspace's durability mode.
    pub(crate) fn mark_written(&self, chain: ChainId, out: &mut Fx) {
        let durability = self.map.as_ref().and_then(|m| m.keyspaces.get(&chain.keyspace())?.config.durability);
        out.mark_dirty_as(durability);
    }

    /// The next version this node stamps: its counter past `at_least` and its last, its id in the low bits.
    fn stamp(&mut self, at_least: u64) -> u64 {
        self.last_counter = at_least.max(self.last_counter + 1);
        version::of(self.last_counter, self.me)
    }

    pub(crate) fn answer(&mut self, host: &mut Host, origin: &Origin, reply: Reply, out: &mut Fx) {
        if let Some(id) = host.requests.complete(origin) {
            out.reply(id, reply);
        }
    }

    /// Starts the operation `req` asks for in its partition's configuration `cfg`.
    fn start(&mut self, host: &mut Host, origin: Origin, req: Request, asked: Asked, cfg: Config, out: &mut Fx) {
        let Some(key) = req.key().cloned() else { return };
        let chain = cfg.chain;
        let seq = self.next_op;
        self.next_op += 1;
        let op = op_id(self.incarnation, seq);
        // A write handed back after it stored its version somewhere keeps that version: sent again with a new
        // one, it could take effect a second time, after a write that came after its first.
        let stamped = self.stamped.remove(&origin.id).map(|(version, _)| version);
        let phase = match (&asked, cfg.opts.timestamps) {
            (Asked::Write(value), timestamps) if stamped.is_some() || timestamps == Stamps::Clock => {
                let clock = version::clock_counter(host.wall_ms);
                let version = stamped.unwrap_or_else(|| self.stamp(clock));
                let versioned = Versioned { version, value: value.clone() };
                self.send_write(&key, &versioned, op, &cfg, out);
                Phase::Store { need: cfg.write_need(), versioned, acks: BTreeSet::new(), existed: false }
            }
            _ => {
                for &to in &cfg.holders {
                    out.send(to, QuorumMsg::Read(ReadReq { op, chain, fence: cfg.fence, key: key.clone() }));
                }
                Phase::Query { need: cfg.read_need(), found: BTreeMap::new() }
            }
        };
        let (refused, rejected, resent) = (BTreeSet::new(), BTreeSet::new(), stamped.is_some());
        let op = Op { origin, req, key, asked, phase, cfg, refused, rejected, resent, started: host.tick };
        self.ops.insert(seq, op);
    }

    fn send_write(&self, key: &Bytes, v: &Versioned, op: OpId, cfg: &Config, out: &mut Fx) {
        for to in cfg.writers() {
            let (chain, fence, key, versioned) = (cfg.chain, cfg.fence, key.clone(), v.clone());
            out.send(to, QuorumMsg::Write(WriteReq { op: Some(op), chain, fence, key, versioned }));
        }
    }

    /// The operation a reply from `from` is for, if it is this run's, still under way and `from` counts in it.
    fn op_for(&mut self, op: OpId, from: NodeId) -> Option<&mut Op> {
        let o = self.ops.get_mut(&op.seq).filter(|_| op.incarnation == self.incarnation)?;
        o.counts(from).then_some(o)
    }

    fn on_found(&mut self, host: &mut Host, from: NodeId, op: OpId, v: Versioned, out: &mut Fx) {
        let Some(o) = self.op_for(op, from) else { return };
        let Phase::Query { need, found } = &mut o.phase else { return };
        found.insert(from, v);
        if found.len() < *need {
            return;
        }
        let o = self.ops.remove(&op.seq).expect("the operation under way");
        self.queried(host, op, o, out);
    }

    /// A read quorum has answered `o`'s query.
    fn queried(&mut self, host: &mut Host, op: OpId, mut o: Op, out: &mut Fx) {
        let Phase::Query { found, .. } = &o.phase else { unreachable!("a query phase") };
        let newest = newest(found);
        let stale: Vec<NodeId> = found.iter().filter(|(_, v)| v.version < newest.version).map(|(&n, _)| n).collect();
        let cfg = &o.cfg;
        let versioned = match (&o.asked, cfg.opts.timestamps) {
            (Asked::Read(read), Stamps::Clock) => {
                self.stats.reads += 1;
                for to in stale.into_iter().filter(|_| newest.version > 0) {
                    self.stats.repairs += 1;
                    let (chain, fence, key) = (o.cfg.chain, cfg.fence, o.key.clone());
                    out.send(to, QuorumMsg::Write(WriteReq { op: None, chain, fence, key, versioned: newest.clone() }));
                }
                let reply = read_reply(*read, &newest, host.wall_ms);
                return self.answer(host, &o.origin, reply, out);
            }
            (Asked::Read(read), Stamps::Quorum) if newest.version == 0 => {
                self.stats.reads += 1;
                let reply = read_reply(*read, &newest, host.wall_ms);
                return self.answer(host, &o.origin, reply, out);
            }
            (Asked::Read(_), Stamps::Quorum) => {
                self.stats.repairs += u64::from(!stale.is_empty());
                newest
            }
            (Asked::Write(value), _) => {
                Versioned { version: self.stamp(version::counter(newest.version) + 1), value: value.clone() }
            }
        };
        self.send_write(&o.key, &versioned, op, cfg, out);
        let need = match o.asked {
            Asked::Read(_) => cfg.write_back_need(),
            Asked::Write(_) => cfg.write_need(),
        };
        o.phase = Phase::Store { need, versioned, acks: BTreeSet::new(), existed: false };
        self.ops.insert(op.seq, o);
    }

    fn on_written(&mut self, host: &mut Host, from: NodeId, op: OpId, was: bool, out: &mut Fx) {
        let Some(o) = self.op_for(op, from) else { return };
        let Phase::Store { need, acks, existed, .. } = &mut o.phase else { return };
        acks.insert(from);
        *existed |= was;
        let staying = o.cfg.staying_need(matches!(o.asked, Asked::Read(_)));
        let carried = staying.is_none_or(|(leaving, k)| acks.iter().filter(|&&a| a != leaving).count() >= k);
        if acks.len() < *need || !carried {
            return;
        }
        let mut o = self.ops.remove(&op.seq).expect("the operation under way");
        let Phase::Store { versioned, existed, .. } = &o.phase else { unreachable!("a store phase") };
        let reply = match o.asked {
            Asked::Read(read) => {
                self.stats.reads += 1;
                read_reply(read, versioned, host.wall_ms)
            }
            Asked::Write(_) => {
                self.stats.writes += 1;
                Reply::Written { applied: true, existed: *existed }
            }
        };
        // A clock stamp is answered only once the wall clock has passed it (Spanner's commit wait, one
        // millisecond deep): a write that begins after the answer, on a clock that agrees, stamps a later time.
        let stamped_ms = version::clock_ms(versioned.version);
        if matches!(o.asked, Asked::Write(_)) && o.cfg.opts.timestamps == Stamps::Clock && stamped_ms >= host.wall_ms {
            o.phase = Phase::Settle { reply, stamped_ms };
            self.ops.insert(op.seq, o);
            return out.set_timer(QuorumTimer::Settle(op.seq), SETTLE_PERIOD);
        }
        self.answer(host, &o.origin, reply, out);
    }

    fn settle(&mut self, host: &mut Host, seq: u64, out: &mut Fx) {
        let Some(Phase::Settle { stamped_ms, .. }) = self.ops.get(&seq).map(|o| &o.phase) else { return };
        if *stamped_ms >= host.wall_ms {
            return out.set_timer(QuorumTimer::Settle(seq), SETTLE_PERIOD);
        }
        let o = self.ops.remove(&seq).expect("the operation under way");
        let Phase::Settle { reply, .. } = o.phase else { unreachable!("a settling phase") };
        self.answer(host, &o.origin, reply, out);
    }

    /// A replica held a newer version than `op`'s write. Once a majority did (`Op::outvoted`), the write fails,
    /// certainly not taking effect in the order of versions (a minority may keep it, but no majority ever agrees
    /// on it), unless it was sent before with the same version: then it may have taken effect, and been
    /// overwritten since. Rejections that leave the write short otherwise (a joiner taking writes) leave its
    /// outcome unknown too. The next write this node stamps is newer than what was held.
    fn on_rejected(&mut self, host: &mut Host, from: NodeId, op: OpId, held: u64, out: &mut Fx) {
        self.last_counter = self.last_counter.max(version::counter(held));
        let Some(o) = self.op_for(op, from) else { return };
        o.rejected.insert(from);
        let (outvoted, short) = (o.outvoted(), o.hopeless() && o.refused.is_empty());
        if !outvoted && !short {
            return self.give_back_if_hopeless(host, op);
        }
        let o = self.ops.remove(&op.seq).expect("the operation under way");
        self.stats.rejected += 1;
        let why = "a newer write of the key came first (writes are ordered by their coordinator's clock)";
        let reply = match outvoted && !o.resent {
            true => Reply::Error(ErrorKind::Unavailable, format!("{why}; retry")),
            false => timed_out(true, why),
        };
        self.answer(host, &o.origin, reply, out);
    }

    fn on_refused(&mut self, host: &mut Host, from: NodeId, op: OpId) {
        let Some(o) = self.op_for(op, from) else { return };
        o.refused.insert(from);
        self.give_back_if_hopeless(host, op);
    }

    /// Hands `op` back to the front-end once the replies still missing cannot make up its phase.
    fn give_back_if_hopeless(&mut self, host: &mut Host, op: OpId) {
        if !self.ops.get(&op.seq).is_some_and(Op::hopeless) {
            return;
        }
        let o = self.ops.remove(&op.seq).expect("the operation under way");
        self.stats.bounced += 1;
        if let (Asked::Write(_), Phase::Store { versioned, .. }) = (&o.asked, &o.phase) {
            self.stamped.insert(o.origin.id, (versioned.version, host.tick));
        }
        host.requests.bounce_here(&o.origin, o.req);
    }

    /// A replica's answer to a read or version query, in the configuration it was sent in only.
    fn on_read(&mut self, host: &mut Host, from: NodeId, r: ReadReq, out: &mut Fx) {
        if !self.serves(r.chain, r.fence) {
            return out.send(from, QuorumMsg::Refused { op: r.op });
        }
        match self.store(host, r.chain).and_then(|s| replica::cell(s, &r.key)) {
            // What it holds may include writes not yet durable: the answer waits for them.
            Ok(found) => out.send_after_sync(from, QuorumMsg::Found { op: r.op, found }),
            Err(e) => tracing::warn!(chain = %r.chain, "quorum replica cannot read: {e}"),
        }
    }

    fn on_write(&mut self, host: &mut Host, from: NodeId, w: WriteReq, out: &mut Fx) {
        if !self.serves(w.chain, w.fence) {
            if let Some(op) = w.op {
                out.send(from, QuorumMsg::Refused { op });
            }
            return;
        }
        let rejects_older = self.config(w.chain).is_some_and(|c| c.rejects_older);
        match self.store(host, w.chain).and_then(|s| replica::offer(s, w.chain, &w.key, &w.versioned)) {
            Ok(offered) => {
                self.mark_written(w.chain, out);
                let Some(op) = w.op else { return };
                // What it holds instead may not be durable yet: the refusal waits for it, as an ack would.
                let reply = match offered.held > w.versioned.version && rejects_older {
                    true => QuorumMsg::Rejected { op, held: offered.held },
                    false => QuorumMsg::Written { op, existed: offered.existed },
                };
                out.send_after_sync(from, reply);
            }
            Err(e) => tracing::warn!(chain = %w.chain, "quorum replica cannot write: {e}"),
        }
    }

    /// Whether this node takes part in `chain` in configuration `fence`, as its own map says.
    fn serves(&self, chain: ChainId, fence: Fence) -> bool {
        self.config(chain).is_some_and(|c| c.fence == fence && c.takes_part(self.me))
    }

    /// Notes this node's part of a step as done; it is reported once a sync begun after it completes, which
    /// this owes the runner even when nothing was written (an idle node reports too).
    fn step_finished(&mut self, host: &Host, report: StepReport, out: &mut Fx) {
        out.mark_dirty();
        self.finished.insert(report.chain(), (report, host.syncs.begun));
    }

    /// Drops operations whose request timed out at the front-end.
    fn expire(&mut self, host: &Host) {
        let timeout = host.cfg.timeout_ticks();
        self.ops.retain(|_, o| host.tick.saturating_sub(o.started) <= timeout);
        self.stamped.retain(|_, &mut (_, at)| host.tick.saturating_sub(at) <= timeout);
    }
}

impl KeyspaceProtocol for QuorumNode {
    const PROTOCOL: Protocol = Protocol::Quorum;
    type Msg = QuorumMsg;
    type Timer = QuorumTimer;
    type Config = QuorumConfig;

    fn open(
        me: NodeId,
        _cfg: QuorumConfig,
        _stores: &mut Stores,
        incarnation: u64,
        _previous: PreviousRun,
    ) -> Result<QuorumNode, StoreError> {
        Ok(QuorumNode::serving(Protocol::Quorum, me, incarnation))
    }

    fn adopt(&mut self, host: &mut Host, map: &Arc<ClusterMap>, _now: Time, out: &mut Fx) {
        self.map = Some(map.clone());
        let configs: Vec<(ChainId, Config, Option<ChainChange>)> = map
            .chains
            .values()
            .filter_map(|c| Some((c.id, Config::of(map, c, self.protocol)?, c.change.clone())))
            .collect();
        self.finished.retain(|chain, (report, _)| {
            configs.iter().any(|(c, _, change)| c == chain && still_wanted(report, change.as_ref()))
        });
        self.copies.retain(|chain, j| configs.iter().any(|(c, cfg, _)| c == chain && cfg.fence == j.copy.fence));
        for (chain, cfg, change) in configs {
            let Some(ChainChange::Add { step, inserted, .. }) = change.filter(|c| c.node() == self.me) else {
                continue;
            };
            if self.finished.contains_key(&chain) || self.copies.contains_key(&chain) {
                continue;
            }
            if inserted {
                // It has taken every write since its step began, so its part is done.
                self.step_finished(host, StepReport::Flushed { chain, step }, out);
            } else {
                self.copies.insert(chain, copy::start(chain, step, &cfg, out));
            }
        }
    }

    fn on_request(&mut self, host: &mut Host, _now: Time, origin: Origin, req: Request, out: &mut Fx) {
        let (Some(keyspace), Some(token)) = (req.keyspace(), req.token()) else { return };
        let map = self.map.clone().expect("requests are accepted only once a map is known");
        let Some(c) = map.chain_of(keyspace, token) else {
            if let Some((id, refusal)) = host.unknown_keyspace(&origin, keyspace) {
                out.reply(id, refusal);
            }
            return;
        };
        let asked = match Asked::of(&req, self.protocol) {
            Ok(asked) => asked,
            Err(why) => return self.answer(host, &origin, Reply::Error(ErrorKind::Invalid, why.to_string()), out),
        };
        let cfg = Config::of(&map, c, self.protocol).expect("a partition of the protocol's keyspace");
        self.start(host, origin, req, asked, cfg, out);
    }

    fn on_message(&mut self, host: &mut Host, _now: Time, from: NodeId, msg: QuorumMsg, out: &mut Fx) {
        match msg {
            QuorumMsg::Read(r) => self.on_read(host, from, r, out),
            QuorumMsg::Found { op, found } => self.on_found(host, from, op, found, out),
            QuorumMsg::Write(w) => self.on_write(host, from, w, out),
            QuorumMsg::Written { op, existed } => self.on_written(host, from, op, existed, out),
            QuorumMsg::Refused { op } => self.on_refused(host, from, op),
            QuorumMsg::Rejected { op, held } => self.on_rejected(host, from, op, held, out),
            QuorumMsg::CopyReq(req) => self.on_copy_req(host, from, req, out),
            QuorumMsg::CopyData(data) => self.on_copy_data(host, from, data, out),
        }
    }

    fn on_timer(&mut self, host: &mut Host, _now: Time, timer: QuorumTimer, out: &mut Fx) {
        match timer {
            QuorumTimer::Settle(seq) => self.settle(host, seq, out),
        }
    }

    fn on_tick(&mut self, host: &mut Host, _now: Time, out: &mut Fx) {
        self.expire(host);
        self.copies.values_mut().for_each(|c| copy::prod(c, out));
    }

    fn reports(&self, syncs: Syncs, into: &mut ReplicaReports) {
        into.steps.extend(self.finished.values().filter(|(_, at)| syncs.done > *at).map(|(r, _)| *r));
    }

    fn lost_chains(&self) -> BTreeSet<ChainId> {
        BTreeSet::new()
    }

    fn status(&self, _stores: &Stores, _now: Time) -> Vec<ReplicaStatus> {
        let Some(map) = self.map.as_ref() else { return Vec::new() };
        let mine = map.chains.values().filter_map(|c| Some((c, Config::of(map, c, self.protocol)?)));
        mine.filter(|(_, cfg)| cfg.takes_part(self.me))
            .map(|(c, cfg)| {
                let holds = cfg.holders.contains(&self.me);
                ReplicaStatus::of_cells(c.id, if holds { "replica" } else { "joiner" }, c.view, holds, false)
            })
            .collect()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let s = self.stats;
        vec![
            ("quorum reads", s.reads),
            ("quorum writes", s.writes),
            ("quorum repairs", s.repairs),
            ("quorum operations bounced", s.bounced),
            ("quorum writes rejected", s.rejected),
            ("quorum copies", s.copies),
        ]
    }

    fn label(msg: &QuorumMsg) -> &'static str {
        msg.label()
    }

    /// Linearizable with ABD stamps and quorums that meet (R + W > N); otherwise reads may be stale.
    fn claim(config: &KeyspaceConfig) -> Claim {
        let abd = |q: &QuorumOptions| q.timestamps == Stamps::Quorum && q.intersecting(config.replication());
        match config.protocol.quorum().is_some_and(abd) {
            true => Claim::Linearizable,
            false => Claim::Staleness,
        }
    }

    /// Plain reads, puts and deletes only (`Asked::of`).
    fn capabilities(_config: &KeyspaceConfig) -> Capabilities {
        Capabilities { conditional: false, expiry: false, scan: false }
    }

    fn check_invariants(&self) -> Result<(), Violation> {
        match self.ops.values().find(|o| o.cfg.holders.is_empty()) {
            Some(o) => Err(format!("{} coordinates an operation on {} with no replicas", self.me, o.cfg.chain).into()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::RequestConfig;
    use crate::map::tests::{addrs, bootstrap_cmd, inserted, joining, start};
    use crate::map::MapCommand;
    use crate::stores::StoreSpec;
    use meridian_core::{KeyspaceConfig, KeyspaceId, Location, ProtocolConfig, Stored};
    use meridian_store::{LogOptions, SimVfs};

    /// Three nodes replicating one quorum partition, and node 4 added to the cluster.
    fn map() -> ClusterMap {
        let MapCommand::Bootstrap { nodes, partitions, vnodes, voters, .. } = bootstrap_cmd(3, 3, 1, 4) else {
            unreachable!("a bootstrap")
        };
        let protocol = ProtocolConfig::default_for(Protocol::Quorum);
        let default = KeyspaceConfig { protocol, ..KeyspaceConfig::durable(3) };
        let mut map = ClusterMap::default();
        map.apply(&MapCommand::Bootstrap { nodes, default, partitions, vnodes, voters }).unwrap();
        map.apply(&MapCommand::AddNode { id: NodeId(4), addrs: addrs(4), vnodes: 4, location: Location::default() })
            .unwrap();
        map
    }

    fn joiner() -> (QuorumNode, Host) {
        let spec = StoreSpec { vfs: Arc::new(SimVfs::new()), dir: "/d".into(), log: LogOptions::default() };
        let mut stores = Stores::open(spec, [], []).unwrap();
        let previous = PreviousRun { map: None, clean_stop: false, lost: &BTreeSet::new() };
        let node = QuorumNode::open(NodeId(4), QuorumConfig::default(), &mut stores, 1, previous).unwrap();
        (node, Host::new(NodeId(4), 1, RequestConfig::default(), stores))
    }

    fn reported(node: &QuorumNode, syncs: Syncs) -> Vec<StepReport> {
        let mut reports = ReplicaReports::default();
        node.reports(syncs, &mut reports);
        reports.steps
    }

    /// A joiner copies from enough replicas to hold every value a read returned, and a Remove in flight counts
    /// only what the staying holders acknowledge towards the configuration after it.
    #[test]
    fn stores_carry_over_to_the_configuration_after_a_remove() {
        use meridian_core::Level;
        let config = |leaving: Option<u32>, read, write| Config {
            chain: ChainId(0),
            fence: Fence { view: 2, step: 2 },
            holders: (1..=4).map(NodeId).collect(),
            joiner: None,
            leaving: leaving.map(NodeId),
            opts: QuorumOptions { read, write, timestamps: Stamps::Quorum },
            rejects_older: false,
        };
        let majority = config(None, Level::Quorum, Level::Quorum);
        assert_eq!(majority.write_back_need(), 2, "N − R + 1 of 4");
        assert_eq!(majority.staying_need(true), None);
        assert_eq!(majority.copy_sources(), 3, "R, to meet every write-back of 2 as well as every write of 3");
        let quorum_all = config(None, Level::Quorum, Level::All);
        assert_eq!((quorum_all.write_back_need(), quorum_all.copy_sources()), (2, 3), "reads need no node more");
        let removing = config(Some(3), Level::Quorum, Level::Quorum);
        assert_eq!(removing.staying_need(false), Some((NodeId(3), 2)), "a majority of the 3 that stay");
        assert_eq!(removing.staying_need(true), Some((NodeId(3), 2)));
        let all_one = config(Some(3), Level::All, Level::One);
        assert_eq!(all_one.write_back_need(), 1);
        assert_eq!(all_one.staying_need(false), Some((NodeId(3), 1)), "the one ack may not be the leaving member's");
        let odd = Config { holders: (1..=3).map(NodeId).collect(), ..config(None, Level::Quorum, Level::Quorum) };
        assert_eq!((odd.write_back_need(), odd.copy_sources()), (2, 2), "unchanged for an odd N");
    }

    /// A joiner asks every replica for its keys, is done once N − W + 1 have sent them all, and reports each part
    /// of its step once a sync begun after it completes, which it owes the runner even with nothing written.
    #[test]
    fn a_joiner_copies_from_enough_replicas_then_reports_each_part_once_durable() {
        let (mut node, mut host) = joiner();
        let mut map = map();
        let step = map.next_step;
        start(&mut map, 0, joining(NodeId(4), 0, step)).unwrap();
        let mut out = Fx::new();
        node.adopt(&mut host, &Arc::new(map.clone()), Time::ZERO, &mut out);
        let asked: Vec<NodeId> = out
            .drain()
            .0
            .filter_map(|e| match e {
                meridian_core::Effect::Send { to, msg: QuorumMsg::CopyReq(_), .. } => Some(to),
                _ => None,
            })
            .collect();
        assert_eq!(asked.iter().copied().collect::<BTreeSet<_>>(), (1..=3).map(NodeId).collect(), "every replica");
        let fence = Config::of(&map, &map.chains[&ChainId(0)], Protocol::Quorum).unwrap().fence;
        let key = Bytes::from_static(b"k");
        let page = |version| msg::CopyData {
            chain: ChainId(0),
            fence,
            entries: vec![(key.clone(), Versioned { version, value: Some(Stored::wrap(b"v", None)) })],
            more: false,
        };
        node.on_copy_data(&mut host, NodeId(1), page(7), &mut out);
        assert!(reported(&node, Syncs { begun: 9, done: 9 }).is_empty(), "one of the two replicas it needs");
        node.on_copy_data(&mut host, NodeId(3), page(9), &mut out);
        let store = host.stores.get((KeyspaceId::DEFAULT, ReplicaKind::Log)).unwrap();
        assert_eq!(replica::cell(store, &key).unwrap().version, 9, "the newest of the copies");
        let syncs = host.syncs;
        assert!(reported(&node, syncs).is_empty(), "not durable yet");
        assert!(out.drain().1.is_dirty(), "a sync is owed");
        let synced = Syncs { begun: syncs.begun + 1, done: syncs.done + 1 };
        assert_eq!(reported(&node, synced), [StepReport::PreCopied { chain: ChainId(0), step }]);

        map.apply(&inserted(ChainId(0), step)).unwrap();
        node.adopt(&mut host, &Arc::new(map), Time::ZERO, &mut out);
        assert!(out.drain().1.is_dirty(), "an idle joiner owes a sync for its report too");
        let later = Syncs { begun: synced.begun + 1, done: synced.done + 1 };
        assert_eq!(reported(&node, later), [StepReport::Flushed { chain: ChainId(0), step }]);
    }
}
