//! Chain replication on fixed partitions with Ouroboros membership changes (seed 003 §2.2–2.6, Listing 1).
//!
//! Guarantee: per-key linearizability of get/put/delete/conditional put, and no acknowledged write is lost,
//! under crash-restart of any node with a durable datastore (unsynced writes lost, last write torn), message
//! loss on broken connections, partitions, pauses, clock drift, joins, leaves, failures (real or suspected)
//! and manager failover. Availability is not promised while a chain is being repaired: its requests are
//! retried by the front-end and time out with "outcome unknown" if the repair takes longer than the request
//! timeout. A replica kept in a datastore that does not survive a restart (`mem`, `buffered`: seed 003 §5.3),
//! and the `log` replica of a head that passed updates on before its fsync, is lost when its node restarts:
//! the node takes no part in the chain until the manager repairs it, and a chain whose every replica was lost
//! is restored from the best of them, without the writes it lacked (docs/keyspaces.md, "Replica types"). A
//! keyspace may trade these guarantees for speed: `au` acknowledges a write once the head has it, and reads may
//! be answered by the head or the middle member (docs/keyspaces.md, "Update modes and query nodes").
//!
//! The cluster map (`crate::map`) says who is in each chain and in which order, and the chain's view
//! number; this node acts on the newest map it has seen ([`ChainNode::adopt`]). How it holds (see
//! docs/protocols/chain.md and docs/protocols/ouroboros.md for the full argument):
//! - The head orders writes: it assigns the next sequence number of the chain, evaluates the write's
//!   condition against its own state, logs it and forwards it; sequence numbers continue from the head's LU,
//!   also when the head changes. Nothing is ever rolled back, so the head's order is the order the tail
//!   commits in.
//! - Every member after the head logs an update and makes it durable before forwarding it (`send_after_sync`),
//!   so `LU(successor) ≤ durable LU(predecessor)` survives any crash between them. The head of an `su` chain
//!   with a `log` member after it forwards at once (`ClusterMap::head_forwards_early`), so its fsync overlaps
//!   its successor's; after a restart its replica is lost and repaired from the others (the node runs
//!   [`crate::host::Host::sync_now`] before it stores a map, which keeps the stored map, what that is judged
//!   by, in step with it).
//! - Messages between members carry the chain's view; a member drops messages of any other view, so a
//!   member removed from the chain (and unaware of it) can never feed the new chain.
//! - The tail answers clients only while it holds a lease for its view (`lease.rs`), and only from durable
//!   state, so no client sees a value a crash could take back or a removed tail could miss.
//! - Lost messages are recovered by Sync, as in static chains; a member that joins copies the chain's data
//!   from the tail (pre-copy) and, once inserted, from its successor (flush) before it takes part (`copy.rs`).
//!
//! What a command does to its key is not the chain's but [`crate::ops`]': the head decides a write there as it
//! orders it (`ops/decide.rs`; the `Change` and `Outcome` its update carries are `ops/outcome.rs`'s, re-exported
//! by [`msg`]), and reads and SCAN pages are answered there from this member's store (`ops/read.rs`,
//! `ops/scan.rs`). Nor are the datastores replicas are kept in, which are [`crate::stores`]' (one per keyspace and
//! replica type, each with its ledger of expiring keys), nor the front-end's table of the requests this node
//! waits on ([`crate::requests`]: `RequestTable`, and `Origin`, re-exported by [`msg`]). The node owns both and
//! lends them with its tick and wall clock for each step ([`Host`]): the chain's code is written on
//! `ChainStep`, this core's state (`self.s`) beside the host (`self.host`).

mod answers;
mod at_once;
mod copy;
mod evict;
mod expiry;
mod invalidate;
mod lease;
mod membership;
pub mod msg;
mod planted;
mod recovery;
mod replica;
mod scan;
mod serve;

use crate::host::{timed_out, Host, Syncs};
use crate::map::ClusterMap;
pub use crate::protocol::PreviousRun;
use crate::protocol::{Capabilities, Claim, KeyspaceProtocol};
use crate::stores::{ledger, Stores};
use copy::Copier;
use lease::{Held, Lease};
use meridian_core::{
    ChainId, ChainMap, Effects, KeyspaceConfig, KeyspaceId, NodeId, Protocol, Reply, Request, Time, UpdateMode,
    Violation,
};
use meridian_store::{Datastore, StoreError};
use replica::{Answered, Replica, Role};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use crate::reports::{ReplicaReports, StepReport};
pub use msg::{ChainMsg, Change, Origin, Outcome, Update};
use planted::planted_in;
pub use planted::PlantedBug;

pub type Fx = Effects<ChainMsg, ChainTimer>;

#[derive(Clone, Debug)]
pub struct ChainConfig {
    /// Bound on a chain's unacknowledged history at the head; beyond it new writes get BUSY.
    pub unacked_max: usize,
    /// Bound on the updates resent in answer to one Sync.
    pub resend_max: usize,
    /// Pre-copy pace in bytes per second (0: unlimited): a join takes at most this much of the source's
    /// disk and network per chain it copies.
    pub migration_bandwidth: u64,
    #[cfg(feature = "planted-bugs")]
    pub planted_bug: Option<PlantedBug>,
}

impl Default for ChainConfig {
    fn default() -> Self {
        ChainConfig {
            unacked_max: 65_536,
            resend_max: 1024,
            migration_bandwidth: 64_000_000,
            #[cfg(feature = "planted-bugs")]
            planted_bug: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ChainTimer {
    /// A paced copy may send its next request.
    Copy(ChainId),
}

/// One chain as this node holds it, for status pages and failure reports.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ReplicaStatus {
    pub chain: u32,
    /// head, mid, tail, only (head and tail), joiner (pre-copying), outside (data left from an earlier role).
    pub role: &'static str,
    pub view: Option<u64>,
    pub lu: u64,
    pub la: u64,
    /// A valid replica (not pre-copying or flushing, not lost).
    pub active: bool,
    /// Lost to a restart: it may miss acknowledged writes, and waits for the manager to repair or restore it.
    pub lost: bool,
    /// Holds a lease on its view now: the right to answer clients as its tail, query node or `au`/`ausi` head.
    pub lease: bool,
    /// In a cache keyspace: the memory the replica holds, as the keyspace's cap counts it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// Answers waiting for a lease.
    pub held: usize,
    pub copy: Option<CopyStatus>,
}

impl ReplicaStatus {
    /// The status of a replica that keeps each key's newest version (quorum and lease partitions): no
    /// acknowledged-update counters, no loss to restarts, no cache, no held answers, no chain copy.
    pub fn of_cells(chain: ChainId, role: &'static str, view: u64, active: bool, lease: bool) -> ReplicaStatus {
        let (lu, la, lost, memory, held, copy) = (0, 0, false, None, 0, None);
        ReplicaStatus { chain: chain.0, role, view: Some(view), lu, la, active, lost, lease, memory, held, copy }
    }
}

/// A pre-copy or flush in progress.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CopyStatus {
    pub kind: &'static str,
    pub source: u32,
    /// Pre-copy rounds completed.
    pub rounds: u32,
    /// Bytes of keys and values copied so far.
    pub bytes: u64,
}

impl std::fmt::Display for ReplicaStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "c{} {}", self.chain, self.role)?;
        if let Some(v) = self.view {
            write!(f, " v{v}")?;
        }
        write!(f, " lu {} la {}", self.lu, self.la)?;
        if self.lost {
            f.write_str(" lost")?;
        } else if !self.active {
            f.write_str(" inactive")?;
        }
        if self.lease {
            f.write_str(" lease")?;
        }
        if let Some(c) = &self.copy {
            write!(f, " {} from n{} ({} rounds, {} bytes)", c.kind, c.source, c.rounds, c.bytes)?;
        }
        write!(f, " held {}", self.held)
    }
}

/// What this node's chain layer did over its lifetime, for the simulator's counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct ChainStats {
    /// Pre-copies that settled (§2.5 phase 1).
    pub precopies: u64,
    /// Of those, the ones from a member nearer than the tail (`ClusterMap::precopy_source`).
    pub precopies_near: u64,
    /// Flushes that completed (phase 2).
    pub flushes: u64,
    /// Chains this node left, dropping their data.
    pub drops: u64,
    /// Reads this node answered as a tail.
    pub reads: u64,
    /// Writes this node committed as a tail.
    pub writes: u64,
    /// Of those, the writes it logged and answered within their step, as its chain's only member (`at_once.rs`).
    pub writes_at_once: u64,
    /// Replicas this node found lost when it started (kept in a kind that does not survive a restart, or of a
    /// chain it headed passing updates on before its fsync).
    pub lost: u64,
    /// Keys this node deleted as a head because their deadline had passed.
    pub expired: u64,
    /// Reads that found their key past its deadline here and waited for its delete (`expiry.rs`).
    pub overdue_reads: u64,
    /// Keys this node evicted as the head of a cache keyspace's chain.
    pub evicted: u64,
}

pub struct ChainNode {
    me: NodeId,
    /// This run of the node (see `KeyspaceProtocol::open`).
    incarnation: u64,
    stats: ChainStats,
    cfg: ChainConfig,
    /// The newest cluster map seen; None until the first arrives.
    map: Option<Arc<ClusterMap>>,
    /// Every chain this node holds data for or takes part in.
    replicas: ChainMap<Replica>,
    /// The pre-copy or flush in progress per chain.
    copies: BTreeMap<ChainId, Copier>,
    /// The seed's temporary store: updates a flushing member's predecessor sent meanwhile, played forward in
    /// sequence once the flush completes. In memory, since none of them is acknowledged and the predecessor
    /// keeps them all until it is; bounded by `unacked_max`.
    temp: BTreeMap<ChainId, BTreeMap<u64, Update>>,
    leases: ChainMap<Lease>,
    held: BTreeMap<ChainId, VecDeque<Held>>,
    /// Reads of keys past their deadline on this node's clock, waiting for the delete the chain's head orders.
    overdue: BTreeMap<ChainId, VecDeque<Held>>,
    /// Finished steps, each with the number of syncs begun before it: the next one to begin covers it (a step
    /// is durable once more syncs have completed than had begun when it finished: [`Syncs`]).
    finished: BTreeMap<ChainId, (StepReport, u64)>,
    /// Every chain of a cache keyspace in the map, with its share of the keyspace's cap (`evict.rs`).
    budgets: BTreeMap<ChainId, u64>,
}

/// One step of [`ChainNode`]: its state, and the node's [`Host`] lent for the step (the datastores, the request
/// table, the tick and the wall clock). What the chain does is written on this view, so the chain reads and
/// writes the node's stores as `self.host.stores` and its own state as `self.s`.
pub(crate) struct ChainStep<'a> {
    s: &'a mut ChainNode,
    host: &'a mut Host,
}

impl ChainNode {
    /// This node's chains for one step, with `host` lent for it.
    #[inline]
    pub(crate) fn step<'a>(&'a mut self, host: &'a mut Host) -> ChainStep<'a> {
        ChainStep { s: self, host }
    }

    /// The ledger of the store `chain`'s replica lives in.
    fn ledger<'a>(&self, stores: &'a Stores, chain: ChainId) -> Option<&'a ledger::Ledger> {
        stores.ledger((chain.keyspace(), self.replicas.get(&chain)?.kind))
    }

    /// The configuration of `chain`'s keyspace in this node's map, if the map has it.
    fn keyspace_config(&self, chain: ChainId) -> Option<&KeyspaceConfig> {
        self.map.as_ref().and_then(|m| Some(&m.keyspaces.get(&chain.keyspace())?.config))
    }

    /// Whether every key `write` changes falls in `chain`, so its head may decide them in one update.
    fn holds_all(&self, chain: ChainId, write: &meridian_core::Write) -> bool {
        let map = self.map.as_ref();
        write.keys().all(|key| map.and_then(|m| m.chain_of_key(write.keyspace, key)).is_some_and(|c| c.id == chain))
    }

    /// When writes to `chain` are acknowledged, as its keyspace says (`su` without one).
    fn update_mode(&self, chain: ChainId) -> UpdateMode {
        self.keyspace_config(chain).map_or(UpdateMode::Su, |k| k.update)
    }

    /// Whether this node, as `chain`'s head, passes updates on before its own fsync
    /// ([`ClusterMap::head_forwards_early`]).
    fn forwards_early(&self, chain: ChainId) -> bool {
        self.map.as_ref().is_some_and(|m| m.chains.get(&chain).is_some_and(|c| m.head_forwards_early(c, self.me)))
    }

    /// Records a write to `chain`'s store: the runner owes it a sync in its keyspace's durability mode, or in
    /// its own default if the keyspace has none.
    fn mark_written(&self, chain: ChainId, out: &mut Fx) {
        out.mark_dirty_as(self.keyspace_config(chain).and_then(|k| k.durability));
    }

    pub fn stats(&self) -> ChainStats {
        self.stats
    }

    /// (chain, LU, LA, view) for every chain this node is an active member of.
    pub fn positions(&self) -> impl Iterator<Item = (ChainId, u64, u64, u64)> + '_ {
        self.replicas.iter().filter(|(_, r)| r.is_active()).filter_map(|(&id, r)| Some((id, r.lu, r.la, r.view()?)))
    }

    /// The chains this node may answer reads for at `now` (as their tail or their query node), with their
    /// views and whether it is the tail.
    pub fn serving(&self, now: Time) -> Vec<(ChainId, u64, bool)> {
        self.replicas
            .iter()
            .filter(|(&id, r)| self.lease_ok(id, r, now))
            .filter_map(|(&id, r)| Some((id, r.view()?, r.is_tail())))
            .collect()
    }

    /// The chains this node answered a read of from its own store at `now`, each with the view it answered at
    /// and whether it did as the tail: what [`Self::serving`] claims, as the answers show it.
    pub fn answered(&self, now: Time) -> impl Iterator<Item = (ChainId, u64, bool)> + '_ {
        let at_now = move |a: &Answered| a.at == now;
        self.replicas.iter().filter_map(move |(&id, r)| r.answered.filter(at_now).map(|a| (id, a.view, a.tail)))
    }

    fn replica_status(&self, stores: &Stores, chain: ChainId, r: &Replica, now: Time) -> ReplicaStatus {
        let (role, view) = match r.role {
            Role::Outside => ("outside", None),
            Role::Joiner { view, .. } => ("joiner", Some(view)),
            Role::Member { view, pred, succ, .. } => match (pred, succ) {
                (None, None) => ("only", Some(view)),
                (None, Some(_)) => ("head", Some(view)),
                (Some(_), Some(_)) => ("mid", Some(view)),
                (Some(_), None) => ("tail", Some(view)),
            },
        };
        let copy = self.copies.get(&chain).map(|c| CopyStatus {
            kind: match c.kind {
                msg::CopyKind::PreCopy { .. } => "pre-copy",
                msg::CopyKind::Flush => "flush",
            },
            source: c.source.0,
            rounds: c.rounds,
            bytes: c.copied,
        });
        ReplicaStatus {
            chain: chain.0,
            role,
            view,
            lu: r.lu,
            la: r.la,
            active: r.is_active(),
            lost: r.lost,
            lease: r.is_active() && self.lease_valid(chain, r, now),
            memory: self.cache_bytes(stores, chain),
            held: self.held.get(&chain).map_or(0, VecDeque::len),
            copy,
        }
    }

    /// Asserts, in debug builds, that `chain`'s replica here has its shape ([`Replica::shape`]) after a step that
    /// changed it, naming the chain, its view and its members in the map.
    #[track_caller]
    pub(super) fn debug_check(&self, chain: ChainId) {
        if !cfg!(debug_assertions) {
            return;
        }
        let Some(Err(why)) = self.replicas.get(&chain).map(Replica::shape) else { return };
        let members = self.map.as_ref().and_then(|m| m.chains.get(&chain)).map(|c| c.members.clone());
        let view = self.replicas[&chain].view();
        panic!("{} chain {chain} view {view:?} members {members:?}: {why}", self.me);
    }
}

impl KeyspaceProtocol for ChainNode {
    const PROTOCOL: Protocol = Protocol::Chain;
    type Msg = ChainMsg;
    type Timer = ChainTimer;
    type Config = ChainConfig;

    /// Builds the node's state from its datastores' logs. `incarnation` must differ between runs of the
    /// same node (the driver draws it at random) so answers addressed to a previous run are dropped.
    /// `previous` says what the node knows of its run before this start ([`PreviousRun`]): the replicas the map
    /// it stored last gave it in kinds that do not survive a restart are lost, so are those it gave it as a head
    /// passing updates on before its fsync, unless that run made every write durable as it stopped, and so are
    /// those that run had counted lost.
    fn open(
        me: NodeId,
        cfg: ChainConfig,
        stores: &mut Stores,
        incarnation: u64,
        previous: PreviousRun,
    ) -> Result<ChainNode, StoreError> {
        let kind_in = |chain: ChainId| previous.map.and_then(|m| m.chains.get(&chain)).and_then(|c| c.kind_of(me));
        // A keyspace the stored map does not name (none, before the first map) can only be the default's chain.
        let mine = |k: KeyspaceId| previous.map.and_then(|m| m.protocol_of(k)).is_none_or(|p| p == Protocol::Chain);
        let (mut replicas, stale) = recovery::recover_all(stores, &mine, &kind_in)?;
        if let Some(map) = previous.map {
            for (chain, key) in stale {
                let store = stores.get_mut(key).expect("a store that holds a chain is open");
                store.append(&membership::drop_record(chain, map.partitions))?;
            }
            let trusting = planted_in(&cfg, PlantedBug::TrustsLostReplicas);
            let trusting_heads = planted_in(&cfg, PlantedBug::TrustsEarlyHead);
            if !trusting {
                let heads_synced = trusting_heads || previous.clean_stop;
                recovery::mark_lost(me, map, &mut replicas, heads_synced, previous.lost);
            }
        }
        let lost = replicas.values().filter(|r| r.lost).count() as u64;
        // Records that survived a process crash may still sit in the page cache only; they are about to
        // be forwarded as durable, so make them so.
        stores.sync()?;
        Ok(ChainNode {
            me,
            incarnation,
            stats: ChainStats { lost, ..ChainStats::default() },
            cfg,
            map: None,
            replicas,
            copies: BTreeMap::new(),
            temp: BTreeMap::new(),
            leases: ChainMap::new(),
            held: BTreeMap::new(),
            overdue: BTreeMap::new(),
            finished: BTreeMap::new(),
            budgets: BTreeMap::new(),
        })
    }

    fn adopt(&mut self, host: &mut Host, map: &Arc<ClusterMap>, now: Time, out: &mut Fx) {
        self.step(host).adopt(map.clone(), now, out)
    }

    /// Sends the request to the head (writes) or query node (reads, scans) of the chain its key or scan
    /// position falls in, in this node's map.
    #[inline]
    fn on_request(&mut self, host: &mut Host, now: Time, origin: Origin, req: Request, out: &mut Fx) {
        self.step(host).route(now, origin, req, out)
    }

    fn on_message(&mut self, host: &mut Host, now: Time, from: NodeId, msg: ChainMsg, out: &mut Fx) {
        self.step(host).on_message(now, from, msg, out)
    }

    fn on_timer(&mut self, host: &mut Host, now: Time, timer: ChainTimer, out: &mut Fx) {
        match timer {
            ChainTimer::Copy(chain) => self.step(host).copy_request(now, chain, out),
        }
    }

    fn on_tick(&mut self, host: &mut Host, now: Time, out: &mut Fx) {
        self.step(host).on_tick(now, out)
    }

    /// Leases for tails, query nodes and `au`/`ausi` heads (`lease.rs`).
    fn on_leases(&mut self, host: &mut Host, chains: &[(ChainId, u64)], until: Time, now: Time, out: &mut Fx) {
        self.step(host).grant(chains, until, now, out)
    }

    /// Reads of a chain whose query node is here (`at_once.rs`).
    #[inline]
    fn read_at_once(&mut self, host: &mut Host, now: Time, req: &Request) -> Option<Reply> {
        self.step(host).read_at_once(now, req)
    }

    /// A lone memory replica's writes (`at_once.rs`).
    #[inline]
    fn write_at_once(&mut self, host: &mut Host, now: Time, req: &mut Option<Request>) -> Option<Reply> {
        self.step(host).write_at_once(now, req)
    }

    /// What the agent tells the manager's leader about this node's replicas in every heartbeat: the steps it
    /// finished its part of, durably (`syncs`: the node's), and the chains it is a member of without a whole
    /// replica.
    fn reports(&self, syncs: Syncs, into: &mut ReplicaReports) {
        into.steps.extend(self.finished.values().filter(|(_, at)| syncs.done > *at).map(|(r, _)| *r));
        let lost = self.replicas.iter().filter(|(_, r)| r.lost && matches!(r.role, Role::Member { .. }));
        into.lost.extend(lost.map(|(&c, r)| (c, r.lu)));
    }

    /// The chains whose replicas here are lost: what a restart must count lost again.
    fn lost_chains(&self) -> BTreeSet<ChainId> {
        self.replicas.iter().filter(|(_, r)| r.lost).map(|(&id, _)| id).collect()
    }

    /// Where this node stands in every chain it holds data for or takes part in (`stores`: the node's, where
    /// a cache keyspace's memory is counted).
    fn status(&self, stores: &Stores, now: Time) -> Vec<ReplicaStatus> {
        self.replicas.iter().map(|(&id, r)| self.replica_status(stores, id, r, now)).collect()
    }

    /// Local invariants of seed 003 Ch. 3: LA ≤ LU, an active tail has no unacknowledged history, and the
    /// unacknowledged history is exactly LA+1 ..= LU.
    fn check_invariants(&self) -> Result<(), Violation> {
        let named = |id: &ChainId, e: Violation| Violation(format!("{} chain {id}: {e}", self.me));
        self.replicas.iter().try_for_each(|(id, r)| r.check().map_err(|e| named(id, e)))
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let s = self.stats;
        vec![
            ("pre-copies", s.precopies),
            ("pre-copies from a member before the tail", s.precopies_near),
            ("flushes", s.flushes),
            ("chains left", s.drops),
            ("reads served", s.reads),
            ("writes committed", s.writes),
            ("writes answered at once", s.writes_at_once),
            ("replicas lost", s.lost),
            ("keys expired", s.expired),
            ("reads that waited for an expiry", s.overdue_reads),
            ("keys evicted", s.evicted),
        ]
    }

    fn label(msg: &ChainMsg) -> &'static str {
        match msg {
            ChainMsg::CopyReq(_) | ChainMsg::CopyData(_) => "copy",
            _ => "chain",
        }
    }

    /// docs/keyspaces.md, "Update modes and query nodes": writes acknowledged once every replica has them
    /// (`su`) are linearizable wherever reads are answered; `ausi` and `au` may lose acknowledged writes with
    /// their head.
    fn claim(config: &KeyspaceConfig) -> Claim {
        match config.update {
            UpdateMode::Su => Claim::Linearizable,
            UpdateMode::Ausi | UpdateMode::Au => Claim::Staleness,
        }
    }

    fn capabilities(_config: &KeyspaceConfig) -> Capabilities {
        Capabilities { conditional: true, expiry: true, scan: true }
    }
}

impl ChainStep<'_> {
    /// The store `chain`'s replica lives in, which is open while this node holds the replica.
    fn store(&self, chain: ChainId) -> &dyn Datastore {
        let key = (chain.keyspace(), self.s.replicas[&chain].kind);
        self.host.stores.get(key).expect("a node holding a replica has its store open")
    }

    fn store_mut(&mut self, chain: ChainId) -> &mut dyn Datastore {
        let key = (chain.keyspace(), self.s.replicas[&chain].kind);
        self.host.stores.get_mut(key).expect("a node holding a replica has its store open")
    }

    /// The ledger of the store `chain`'s replica lives in.
    fn ledger(&self, chain: ChainId) -> Option<&ledger::Ledger> {
        self.s.ledger(&self.host.stores, chain)
    }

    /// Notes this node's part of a step as done; it is reported once durable (`reports`).
    fn step_finished(&mut self, report: StepReport) {
        self.s.finished.insert(report.chain(), (report, self.host.syncs.begun));
    }

    pub fn on_message(&mut self, now: Time, from: NodeId, msg: ChainMsg, out: &mut Fx) {
        match msg {
            ChainMsg::Get { origin, chain, key, read, .. } => self.on_get(now, origin, chain, key, read, out),
            ChainMsg::Scan { origin, chain, scan, .. } => self.on_scan(now, origin, chain, scan, out),
            ChainMsg::Write { origin, chain, write, .. } => self.on_write(now, origin, chain, write, out),
            ChainMsg::Update { view, update } => self.on_update(now, from, view, update, out),
            ChainMsg::Ack { chain, view, seq } => self.on_ack(now, from, chain, view, seq, out),
            // The successor's LA acknowledges, its LU asks for what it lacks after it.
            ChainMsg::Sync { chain, view, lu, la } if self.takes_sync(from, chain, view) => {
                self.on_ack(now, from, chain, view, la, out);
                self.resend(from, chain, view, lu, out);
            }
            ChainMsg::Sync { .. } => {}
            ChainMsg::Probe { chain, view } => self.on_probe(from, chain, view, out),
            ChainMsg::Reply { origin, reply, confirm } => {
                if let Some(id) = self.host.requests.complete(&origin) {
                    out.reply(id, reply);
                }
                // Confirmed even when no longer waited for, so the tail stops resending.
                if let Some((chain, seq)) = confirm.filter(|_| origin.node == self.s.me) {
                    out.send(from, ChainMsg::Confirm { chain, seq });
                }
            }
            ChainMsg::Confirm { chain, seq } => self.on_confirm(from, chain, seq, out),
            ChainMsg::Bounce { origin, .. } => {
                if let Some((id, write)) = self.host.requests.bounced(&origin) {
                    out.reply(id, timed_out(write, "bounced, and no copy of it was kept to send again"));
                }
            }
            ChainMsg::Invalidate { chain, view, seq, key, also } => {
                self.on_invalidate(from, chain, view, invalidate::Invalidation { seq, key, also }, out)
            }
            ChainMsg::Invalidated { chain, view, seq } => self.on_invalidated(now, chain, view, seq, out),
            ChainMsg::CopyReq(req) => self.on_copy_req(from, req, out),
            ChainMsg::CopyData(data) => self.on_copy_data(now, from, *data, out),
        }
    }

    /// Sends a request to the head (writes) or query node (reads, scans) of the chain its key or scan position
    /// falls in, in this node's map.
    pub(crate) fn route(&mut self, now: Time, origin: Origin, req: Request, out: &mut Fx) {
        let map = self.s.map.clone().expect("requests are accepted only once a map is known");
        let (Some(token), Some(keyspace)) = (req.token(), req.keyspace()) else { return };
        let Some(chain) = map.chain_of(keyspace, token) else {
            return self.refuse_unknown(origin, keyspace, out);
        };
        let target = match req {
            Request::Get { .. } | Request::Scan(_) => map.query_node(chain),
            Request::Write(_) => chain.members.first().copied(),
            Request::Admin(_) => return,
        };
        let Some(target) = target else { return self.host.requests.bounce_here(&origin, req) };
        if target != self.s.me {
            self.host.requests.keep(&origin, req.clone());
        }
        let (id, view) = (chain.id, chain.view);
        let msg = match req {
            Request::Get { key, read, .. } => ChainMsg::Get { origin, view, chain: id, key, read },
            Request::Scan(scan) => ChainMsg::Scan { origin, view, chain: id, scan },
            Request::Write(write) => ChainMsg::Write { origin, view, chain: id, write },
            Request::Admin(_) => return,
        };
        if target == self.s.me {
            self.on_message(now, self.s.me, msg, out)
        } else {
            out.send(target, msg)
        }
    }

    /// Delivers an answer to the front-end waiting for it, local or remote.
    fn answer(&mut self, origin: Origin, reply: Reply, after_sync: bool, out: &mut Fx) {
        if origin.node != self.s.me {
            let msg = ChainMsg::Reply { origin, reply, confirm: None };
            if after_sync {
                out.send_after_sync(origin.node, msg)
            } else {
                out.send(origin.node, msg)
            }
        } else if let Some(id) = self.host.requests.complete(&origin) {
            if after_sync {
                out.reply_after_sync(id, reply)
            } else {
                out.reply(id, reply)
            }
        }
    }

    /// Turns a request away: certainly not applied, and the front-end tries again with its newest map. `req` is
    /// the request, for a front-end on this node to send again.
    fn bounce(&mut self, origin: Origin, chain: ChainId, req: Request, out: &mut Fx) {
        let view = self.s.replicas.get(&chain).and_then(Replica::view).unwrap_or(0);
        if origin.node == self.s.me {
            self.host.requests.bounce_here(&origin, req);
        } else {
            out.send(origin.node, ChainMsg::Bounce { origin, chain, view });
        }
    }

    /// Answers a request for a keyspace the map does not have (dropped since the client chose it).
    fn refuse_unknown(&mut self, origin: Origin, keyspace: KeyspaceId, out: &mut Fx) {
        if let Some((id, refusal)) = self.host.unknown_keyspace(&origin, keyspace) {
            out.reply(id, refusal);
        }
    }

    fn on_tick(&mut self, now: Time, out: &mut Fx) {
        self.probe_and_mark(out);
        self.prune_invalid();
        self.answer_acknowledged(now, out);
        let chains: Vec<ChainId> = self.s.copies.keys().copied().collect();
        chains.into_iter().for_each(|c| self.copy_request(now, c, out));
        self.release_held(now, out);
        self.retry_overdue(now, out);
        self.tend_answers(now, out);
        self.reap_expired(now, out);
        self.evict_all(now, out);
        self.host.stores.maintain_if_idle();
    }

    /// Probes successors whose acknowledgements stalled and logs ack watermarks.
    fn probe_and_mark(&mut self, out: &mut Fx) {
        for (&chain, r) in self.s.replicas.iter_mut().filter(|(_, r)| r.is_active()) {
            let view = r.view().expect("active replicas are members");
            if let Some(succ) = r.succ().filter(|_| !r.unacked.is_empty() && r.la == r.la_at_tick) {
                out.send(succ, ChainMsg::Probe { chain, view });
            }
            r.la_at_tick = r.la;
            // Every member logs the watermark, the tail included: it is what lets compaction drop
            // superseded records (docs/protocols/chain.md, "The log and compaction").
            if r.la > r.la_logged {
                // Lazily durable: it rides on the next sync. Losing it only means resending more.
                let store = self.host.stores.get_mut((chain.keyspace(), r.kind)).expect("a replica's store is open");
                match store.append(&serve::ack_mark(chain, r.la)) {
                    Ok(()) => r.la_logged = r.la,
                    Err(e) => tracing::warn!(%chain, "cannot log ack watermark: {e}"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
