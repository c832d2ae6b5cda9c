//! One Meridian node as a single sans-IO core: the chain replication data plane, the manager's agent that
//! every node runs, and, on the manager's voters, the manager's Raft replica. The tokio driver and the
//! simulator run this core; its parts talk to each other directly, and to other nodes through [`NodeMsg`].
//!
//! A failure of the manager's own storage (its Raft log, the node's map file) stops the node (fail-stop, by
//! panicking: both runners stop the node on a core panic): the node can then no longer tell which chains it
//! belongs to, and recovery from what is durable is the safe way on.

mod admin;
mod clean_stop;
mod lost_replicas;
mod manager_seat;
mod metrics;
mod protocols;
#[cfg(test)]
mod schema_lock;
mod status;

use crate::chain::PlantedBug;
use crate::host::{Host, RequestConfig};
use crate::manager::agent::{Agent, JoinRequest, Learned};
use crate::manager::core::{ManagerConfig, ManagerCore};
use crate::manager::mapfile::MapFile;
use crate::manager::msg::{ManagerMsg, MgrFx, MgrMsg};
use crate::manager::raft::RaftError;
use crate::map::placement::{self, DEFAULT_PARTITIONS};
use crate::map::{ClusterMap, MapCommand, NodeAddrs, NodeState};
use crate::protocol::PreviousRun;
use crate::stores::{StoreSpec, Stores};
use meridian_core::acl::Access;
use meridian_core::{
    ChainId, ClusterConfig, Effect, Effects, KeyspaceId, NodeId, Placement, Process, Reply, Request, RequestId,
    SyncJob, Time,
};
use meridian_store::{LogOptions, StoreError, StoreStats, Vfs};
pub use protocols::{NodeMsg, NodeTimer, ProtocolConfigs, Protocols};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

/// Voters of the manager's Raft group: nodes of the initial cluster, at most this many ([`voters`]).
pub const VOTERS_MAX: usize = crate::map::voters::VOTERS_AUTO;

/// Where a node keeps its replica of the manager's log, under its directory.
const RAFT_DIR: &str = "raft";

pub type NodeFx = Effects<NodeMsg, NodeTimer>;

#[derive(Clone, Debug, Default)]
pub struct NodeConfig {
    pub requests: RequestConfig,
    pub protocols: ProtocolConfigs,
    pub manager: ManagerConfig,
    /// Partitions (= chains) of a cluster this node bootstraps; 0 for the default.
    pub partitions: u32,
}

/// What a node starts from besides its datastore.
pub struct NodeSetup {
    pub me: NodeId,
    pub vfs: Arc<dyn Vfs>,
    /// The manager's state lives here: the Raft log (voters) in `raft/`, the node's map in `map/`.
    pub dir: PathBuf,
    /// The cluster the first manager leader bootstraps; [`voters`] of it are the manager's first voters.
    pub initial: ClusterConfig,
    /// Set for a node that is not in `initial` and asks to be added.
    pub join: Option<JoinRequest>,
    /// Differs between runs of the node (answers addressed to an earlier run are dropped).
    pub incarnation: u64,
    /// Seeds the manager's election timeouts; differs between nodes.
    pub jitter: u64,
}

/// The voters of a cluster that starts from `initial`: at most [`VOTERS_MAX`] of its nodes, spread over as many
/// regions, then zones, then racks as it has, lowest ids first (as placement spreads a chain,
/// [`crate::map::placement::choose`]), so that losing one region leaves a majority of them where the cluster
/// spans three. A cluster of one region gets its first nodes.
pub fn voters(initial: &ClusterConfig) -> Vec<NodeId> {
    let ids: Vec<NodeId> = initial.node_ids().collect();
    let at = |id: NodeId| &initial.node(id).expect("a node of the config").location;
    let mut voters = placement::choose(&ids, at, &Placement::default(), VOTERS_MAX);
    voters.sort_unstable();
    voters
}

/// The command that creates the map of a cluster that starts from `initial`.
pub fn bootstrap(initial: &ClusterConfig, partitions: u32) -> MapCommand {
    let nodes = initial
        .nodes
        .iter()
        .map(|n| {
            let addrs = NodeAddrs { peer_addr: n.peer_addr.clone(), resp_addr: String::new(), http_addr: None };
            (n.id, addrs, n.location.clone())
        })
        .collect();
    let partitions = if partitions == 0 { DEFAULT_PARTITIONS } else { partitions };
    let vnodes = initial.vnodes as u32;
    let default = initial.default.clone();
    MapCommand::Bootstrap { nodes, default, partitions, vnodes, voters: voters(initial) }
}

/// Why a node could not open its data directory: which of its parts failed, and how.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cluster map: {0}")]
    Map(#[source] std::io::Error),
    #[error("datastores: {0}")]
    Stores(#[source] StoreError),
    #[error("clean-stop marker: {0}")]
    CleanStop(#[source] std::io::Error),
    #[error("lost replicas: {0}")]
    LostReplicas(#[source] std::io::Error),
    /// A protocol could not rebuild its replicas from the datastores' logs.
    #[error("replicas: {0}")]
    Replicas(#[source] StoreError),
    #[error("manager log: {0}")]
    ManagerLog(#[source] RaftError),
}

pub struct ClusterNode {
    me: NodeId,
    cfg: NodeConfig,
    agent: Agent,
    manager: Option<ManagerCore>,
    /// What the node lends its protocol cores for a step: its datastores, the requests it waits on, its clock.
    host: Host,
    protocols: Protocols,
    incarnation: u64,
    /// Where the node keeps its files, for the marker of a clean stop ([`clean_stop`]).
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    /// What the manager said while opening, sent at start.
    opened: MgrFx,
    /// The peer address last announced to the runner for each node.
    addressed: BTreeMap<NodeId, String>,
    /// Keyspace commands waiting for the map to show them.
    pending_admin: Vec<admin::PendingAdmin>,
    /// What the first leader proposes, should this node's replica lead an unbootstrapped group.
    bootstrap: MapCommand,
    /// Seeds the manager's election timeouts.
    jitter: u64,
    /// What the replicas of the manager this node closed had done.
    retired_manager: crate::manager::core::ManagerStats,
    /// Client requests accepted per keyspace, for [`ClusterNode::metrics`].
    requests: metrics::RequestCounts,
    /// The lost replicas as `lost_replicas` last stored them.
    lost_stored: BTreeSet<ChainId>,
    /// The map's ACL users and keyspace names, as client connections check commands against them.
    access: Option<Arc<Access>>,
}

impl ClusterNode {
    /// Opens the node in `setup.dir`: its map in `map/`, the marker of a clean stop, the manager's log in `raft/`
    /// (voters), each keyspace's datastore in `keyspaces/ks-<id>/`, log stores with options `log`.
    pub fn open(setup: NodeSetup, cfg: NodeConfig, log: LogOptions) -> Result<ClusterNode, OpenError> {
        let me = setup.me;
        let file = MapFile::new(setup.vfs.clone(), &setup.dir.join("map")).map_err(OpenError::Map)?;
        let initial_voters = voters(&setup.initial);
        let agent = Agent::open(me, file, initial_voters.clone(), setup.join).map_err(OpenError::Map)?;
        let (keyspaces, dropped) = match agent.map() {
            Some(m) => {
                let dropped = (0..m.next_keyspace).map(KeyspaceId).filter(|k| !m.keyspaces.contains_key(k));
                let caches = m.keyspaces.iter().map(|(&id, k)| (id, k.config.maxmemory.is_some()));
                (caches.collect(), dropped.collect())
            }
            None => (vec![(KeyspaceId::DEFAULT, false)], Vec::new()),
        };
        let spec = StoreSpec { vfs: setup.vfs.clone(), dir: setup.dir.join("keyspaces"), log };
        let stores = Stores::open(spec, keyspaces, dropped).map_err(OpenError::Stores)?;
        let mut host = Host::new(me, setup.incarnation, cfg.requests.clone(), stores);
        let clean_stop = clean_stop::take(&*setup.vfs, &setup.dir).map_err(OpenError::CleanStop)?;
        let lost = lost_replicas::load(&*setup.vfs, &setup.dir).map_err(OpenError::LostReplicas)?;
        let previous = PreviousRun { map: agent.map().map(|m| m.as_ref()), clean_stop, lost: &lost };
        let protocols = Protocols::open(me, cfg.protocols.clone(), &mut host.stores, setup.incarnation, previous)
            .map_err(OpenError::Replicas)?;
        let lost_stored = protocols.lost_chains();
        if lost_stored != lost {
            lost_replicas::store(&*setup.vfs, &setup.dir, &lost_stored).map_err(OpenError::LostReplicas)?;
        }
        let boot = bootstrap(&setup.initial, cfg.partitions);
        let raft_dir = setup.dir.join(RAFT_DIR);
        let stored = agent.map().map(|m| m.as_ref());
        let (manager, opened) = if manager_seat::runs_manager(stored, me, &initial_voters) {
            // Only the cluster's first start bootstraps a log; a node seated later goes on from the log it kept,
            // or starts empty, as a learner.
            let first_start = !stored.is_some_and(ClusterMap::is_bootstrapped);
            let voters = if first_start { initial_voters.as_slice() } else { &[] };
            let (core, out) = ManagerCore::open(
                me,
                setup.vfs.clone(),
                &raft_dir,
                voters,
                boot.clone(),
                cfg.manager.clone(),
                setup.jitter,
            )
            .map_err(OpenError::ManagerLog)?;
            (Some(core), out)
        } else {
            (None, MgrFx::new())
        };
        let addressed = setup.initial.nodes.iter().map(|n| (n.id, n.peer_addr.clone())).collect();
        Ok(ClusterNode {
            me,
            cfg,
            agent,
            manager,
            host,
            protocols,
            incarnation: setup.incarnation,
            vfs: setup.vfs,
            dir: setup.dir,
            opened,
            addressed,
            bootstrap: boot,
            jitter: setup.jitter,
            retired_manager: Default::default(),
            pending_admin: Vec::new(),
            requests: metrics::RequestCounts::default(),
            lost_stored,
            access: None,
        })
    }

    pub fn chain(&self) -> &crate::chain::ChainNode {
        &self.protocols.chain.core
    }

    pub fn protocols(&self) -> &Protocols {
        &self.protocols
    }

    pub fn manager(&self) -> Option<&ManagerCore> {
        self.manager.as_ref()
    }

    /// The newest map this node has adopted.
    pub fn map(&self) -> Option<&Arc<ClusterMap>> {
        self.agent.map()
    }

    /// The node's state in a few lines: map epoch, manager role, chains.
    pub fn describe(&self, now: Time) -> String {
        let manager = match &self.manager {
            Some(_) if self.agent.map().is_some_and(|m| m.manager_learners.contains(&self.me)) => {
                "manager learner".into()
            }
            Some(m) => m.describe_leadership(now).map_or("manager voter".into(), |l| format!("manager leader, {l}")),
            None => "not a voter".into(),
        };
        let chains: Vec<String> =
            self.protocols.status(&self.host.stores, now).iter().map(ToString::to_string).collect();
        let guess = self.agent.leader_guess().map_or("none".into(), |l| l.to_string());
        format!("epoch {} {manager}, leader guess {guess}\n    {}", self.agent.epoch(), chains.join("; "))
    }

    pub fn store_stats(&self) -> StoreStats {
        self.host.stores.stats()
    }

    /// Takes a client request as the node's front-end and hands it to its keyspace's protocol.
    fn accept(&mut self, now: Time, id: RequestId, req: Request, out: &mut NodeFx) {
        match self.host.accept(id, req, self.agent.map().is_some()) {
            Ok((origin, req)) => {
                self.protocols.on_request(&mut self.host, now, origin, req, out);
                self.host.requests.settle();
            }
            Err(refusal) => out.reply(id, refusal),
        }
    }

    /// The node's housekeeping tick: requests that waited too long are answered, bounced ones sent again, and
    /// then the protocols tend their own state.
    fn on_tick(&mut self, now: Time, out: &mut NodeFx) {
        out.set_timer(NodeTimer::Tick, self.cfg.requests.tick);
        for (origin, req) in self.host.tick(|id, reply| out.reply(id, reply)) {
            self.protocols.on_request(&mut self.host, now, origin, req, out);
        }
        self.protocols.on_tick(&mut self.host, now, out);
    }

    /// Sends what the manager or the agent sent: Raft's messages first, then the manager's, those to this node
    /// handled at once; then adopts the map the manager's own replica applied, if newer.
    fn send_mgr(&mut self, now: Time, mut mgr: MgrFx, out: &mut NodeFx) {
        let (effects, dirt) = mgr.drain();
        out.add_dirt(dirt);
        let mut sends = Vec::new();
        for effect in effects {
            let Effect::Send { to, msg, .. } = effect else { unreachable!("the manager and the agent only send") };
            match msg {
                ManagerMsg::Raft(msg) => out.send(to, NodeMsg::Raft(msg)),
                ManagerMsg::Mgr(msg) => sends.push((to, msg)),
            }
        }
        for (to, msg) in sends {
            self.deliver_mgr(now, to, msg, out);
        }
        self.follow_manager_map(now, out);
    }

    /// A voter adopts what its own replica of the log applied, without waiting for the leader to say so.
    fn follow_manager_map(&mut self, now: Time, out: &mut NodeFx) {
        let Some(map) = self.manager.as_ref().map(|m| m.map()).filter(|m| m.epoch > self.agent.epoch()) else {
            return;
        };
        self.adopt_map(now, map.clone(), out);
    }

    /// Adopts `map` if it is newer than the agent's: the datastores are synced first, since a restart judges
    /// what they hold by the map it stored.
    fn adopt_map(&mut self, now: Time, map: ClusterMap, out: &mut NodeFx) {
        if map.epoch <= self.agent.epoch() {
            return;
        }
        let fail_stop = "the node's map file and datastores must be writable (fail-stop)";
        self.host.sync_now().expect(fail_stop);
        if let Some(map) = self.agent.adopt(map).expect(fail_stop) {
            self.learn_access(&map);
            self.announce_addresses(&map, out);
            self.protocols.adopt(&mut self.host, &map, now, out);
            self.store_lost();
            self.settle_admin(out);
            self.follow_seat(now, out);
        }
    }

    fn deliver_mgr(&mut self, now: Time, to: NodeId, msg: MgrMsg, out: &mut NodeFx) {
        if to == self.me {
            self.on_mgr(now, self.me, msg, out);
        } else {
            out.send(to, NodeMsg::Mgr(msg));
        }
    }

    fn on_mgr(&mut self, now: Time, from: NodeId, msg: MgrMsg, out: &mut NodeFx) {
        match msg {
            MgrMsg::Heartbeat(_)
            | MgrMsg::Join { .. }
            | MgrMsg::Leave { .. }
            | MgrMsg::Admin { .. }
            | MgrMsg::Reported(_) => {
                let mut mgr = MgrFx::new();
                match self.manager.as_mut() {
                    Some(m) => m.on_mgr(now, from, msg, &mut mgr).expect("the manager's log must work (fail-stop)"),
                    None if matches!(msg, MgrMsg::Reported(_)) => {}
                    None => mgr.send(from, ManagerMsg::Mgr(MgrMsg::NotLeader { leader: None })),
                }
                self.send_mgr(now, mgr, out);
            }
            MgrMsg::HeartbeatReply(_) | MgrMsg::NotLeader { .. } | MgrMsg::Map(_) | MgrMsg::Refused { .. } => {
                let learned = self.agent.on_msg(from, msg);
                learned.into_iter().for_each(|l| self.act_on(now, l, out));
            }
        }
    }

    fn act_on(&mut self, now: Time, learned: Learned, out: &mut NodeFx) {
        match learned {
            Learned::Map(map) => self.adopt_map(now, *map, out),
            Learned::Leases { chains, until } => self.protocols.on_leases(&mut self.host, &chains, until, now, out),
            Learned::Refused { ask, reason } => self.admin_refused(ask, reason, out),
        }
    }

    /// Takes the users and keyspace names of `map`, keeping the `Arc` clients hold if they did not change.
    fn learn_access(&mut self, map: &ClusterMap) {
        let keyspaces = map.keyspaces.iter().map(|(&id, k)| (id, k.name.clone())).collect();
        let access = Access { users: map.users.clone(), keyspaces };
        if self.access.as_deref() != Some(&access) {
            self.access = Some(Arc::new(access));
        }
    }

    /// Stores the lost replicas again if a map took some out of that state (the node left their chains, or the
    /// map restored from them) or marked more: a restart must count lost what is lost now, and only that.
    fn store_lost(&mut self) {
        let lost = self.protocols.lost_chains();
        if lost != self.lost_stored {
            if !self.lost_stored.is_subset(&lost) {
                // A replica leaves the lost state when the node drops its data; were the file to forget it
                // before that drop is durable, a crash in between would bring the data back trusted.
                self.host.sync_now().expect("the node's datastores must be writable (fail-stop)");
            }
            let stored = lost_replicas::store(&*self.vfs, &self.dir, &lost);
            stored.expect("the node's lost-replica file must be writable (fail-stop)");
            self.lost_stored = lost;
        }
    }

    /// Tells the runner where the map's nodes listen, for those whose address is new or moved.
    fn announce_addresses(&mut self, map: &ClusterMap, out: &mut NodeFx) {
        for (&id, info) in &map.nodes {
            let addr = &info.addrs.peer_addr;
            if id != self.me && !addr.is_empty() && self.addressed.get(&id) != Some(addr) {
                self.addressed.insert(id, addr.clone());
                out.address(id, addr.clone());
            }
        }
    }

    fn manager_tick(&mut self, now: Time, out: &mut NodeFx) {
        out.set_timer(NodeTimer::Manager, self.cfg.manager.tick);
        if let Some(m) = self.manager.as_mut() {
            let mut mgr = MgrFx::new();
            m.tick(now, &mut mgr).expect("the manager's log must work (fail-stop)");
            self.send_mgr(now, mgr, out);
        }
        let mut beats = MgrFx::new();
        self.agent.tick(now, self.protocols.reports(self.host.syncs, self.incarnation), &mut beats);
        self.send_mgr(now, beats, out);
        self.tend_admin(now, out);
    }
}

impl Process for ClusterNode {
    type Msg = NodeMsg;
    type Timer = NodeTimer;

    fn start(&mut self, now: Time, out: &mut NodeFx) {
        out.set_timer(NodeTimer::Tick, self.cfg.requests.tick);
        out.set_timer(NodeTimer::Manager, self.cfg.manager.tick);
        if let Some(map) = self.agent.map().cloned() {
            self.learn_access(&map);
            self.announce_addresses(&map, out);
            self.protocols.adopt(&mut self.host, &map, now, out);
        }
        self.follow_seat(now, out);
        let opened = std::mem::take(&mut self.opened);
        self.send_mgr(now, opened, out);
    }

    fn on_message(&mut self, now: Time, from: NodeId, msg: NodeMsg, out: &mut NodeFx) {
        match msg {
            NodeMsg::Raft(m) => {
                let Some(manager) = self.manager.as_mut() else { return };
                let mut mgr = MgrFx::new();
                manager.on_raft(now, from, &m, &mut mgr).expect("the manager's log must work (fail-stop)");
                self.send_mgr(now, mgr, out);
            }
            NodeMsg::Mgr(m) => self.on_mgr(now, from, m, out),
            msg => self.protocols.on_message(&mut self.host, now, from, msg, out),
        }
    }

    fn on_timer(&mut self, now: Time, timer: NodeTimer, out: &mut NodeFx) {
        match timer {
            NodeTimer::Tick => self.on_tick(now, out),
            NodeTimer::Manager => self.manager_tick(now, out),
            timer => self.protocols.on_timer(&mut self.host, now, timer, out),
        }
    }

    fn on_request(&mut self, now: Time, id: RequestId, req: Request, out: &mut NodeFx) {
        match req {
            Request::Admin(admin) => self.admin(now, id, admin, out),
            req => {
                self.requests.request(&req);
                self.accept(now, id, req, out)
            }
        }
    }

    fn read_at_once(&mut self, now: Time, req: &Request) -> Option<Reply> {
        let answer = self.protocols.read_at_once(&mut self.host, now, req)?;
        self.requests.request(req);
        Some(answer)
    }

    fn write_at_once(&mut self, now: Time, req: &mut Option<Request>) -> Option<Reply> {
        let counted = metrics::counted_as(req.as_ref()?);
        let answer = self.protocols.write_at_once(&mut self.host, now, req)?;
        self.requests.count(counted);
        Some(answer)
    }

    /// Keys' deadlines are fixed and judged by the wall clock (Unix milliseconds), which the runner gives before
    /// every input. It may step; a wrong one makes keys expire early or late, nothing worse.
    fn set_wall_clock(&mut self, unix_ms: u64) {
        self.host.wall_ms = unix_ms;
    }

    fn sync(&mut self) -> std::io::Result<()> {
        self.host.sync()
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.host.flush()
    }

    fn begin_sync(&mut self) -> std::io::Result<Option<SyncJob>> {
        self.host.begin_sync(self.protocols.chain.core.planted(PlantedBug::SkipsFsync))
    }

    fn end_sync(&mut self) {
        self.host.end_sync()
    }

    fn stopped(&mut self) -> std::io::Result<()> {
        clean_stop::leave(&*self.vfs, &self.dir)
    }

    /// Once the node holds a map that places it in the cluster: before that every request would be turned away
    /// (`-TRYAGAIN`), and after an operator removed it, it routes nothing of its own.
    fn serving(&self) -> bool {
        self.agent.map().and_then(|m| m.nodes.get(&self.me)).is_some_and(|n| n.state != NodeState::Removed)
    }

    fn access(&self) -> Option<&Arc<Access>> {
        self.access.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::ChainChange;
    use bytes::Bytes;
    use meridian_core::{NodeSpec, ReplicaKind, Write};
    use meridian_store::SimVfs;

    fn cluster(locations: &[&str]) -> ClusterConfig {
        let spec = |(i, l): (usize, &&str)| NodeSpec {
            location: l.parse().unwrap(),
            ..NodeSpec::new(NodeId(i as u32 + 1), format!("h:{i}"))
        };
        ClusterConfig::new(locations.iter().enumerate().map(spec).collect(), 3, 4).unwrap()
    }

    /// Opens node `me` of `initial` on `disk`, its `run`th start.
    fn open(me: NodeId, initial: &ClusterConfig, disk: &SimVfs, run: u64) -> ClusterNode {
        let vfs = Arc::new(disk.clone());
        let setup =
            NodeSetup { me, vfs, dir: "/n".into(), initial: initial.clone(), join: None, incarnation: run, jitter: 0 };
        ClusterNode::open(setup, NodeConfig::default(), LogOptions::default()).unwrap()
    }

    fn deliver(node: &mut ClusterNode, map: &ClusterMap) {
        node.on_message(Time::ZERO, NodeId(1), NodeMsg::Mgr(MgrMsg::Map(Box::new(map.clone()))), &mut NodeFx::new());
    }

    fn step(map: &mut ClusterMap, change: impl FnOnce(u64) -> ChainChange) {
        let (chain, expected_view) = (ChainId(0), map.chains[&ChainId(0)].view);
        let change = change(map.next_step);
        map.apply(&MapCommand::StepStarted { chain, expected_view, change }).unwrap();
    }

    fn remove(map: &mut ClusterMap, node: NodeId) {
        step(map, |step| ChainChange::Remove { node, step });
        map.apply(&MapCommand::StepDone { chain: ChainId(0), step: map.next_step - 1 }).unwrap();
    }

    fn add_head(map: &mut ClusterMap, node: NodeId) {
        step(map, |step| ChainChange::Add { node, position: 0, step, inserted: false, kind: ReplicaKind::Log });
    }

    /// Sim seed 9402621: a head that counted its replica lost after a power loss was taken out of its chain and
    /// added back in one map. Adopting it, the node dropped its data and its lost-replica file forgot the
    /// chain; a power loss took the drop (never synced) but not the file, and the node came back trusting a
    /// log holding an update the chain never had, as the base of its pre-copy.
    #[test]
    fn a_lost_replica_is_forgotten_only_once_its_drop_is_durable() {
        let initial = cluster(&["default"; 4]);
        let mut map = ClusterMap::default();
        map.apply(&bootstrap(&initial, 1)).unwrap();
        let me = NodeId(4);
        if map.chains[&ChainId(0)].contains(me) {
            remove(&mut map, me);
        }
        add_head(&mut map, me);
        let step = map.next_step - 1;
        map.apply(&MapCommand::AddInserted { chain: ChainId(0), step }).unwrap();
        map.apply(&MapCommand::StepDone { chain: ChainId(0), step }).unwrap();
        let disk = SimVfs::default();
        let mut node = open(me, &initial, &disk, 1);
        deliver(&mut node, &map);
        let write = Write::put(KeyspaceId::DEFAULT, Bytes::from_static(b"k"), Bytes::from_static(b"v"));
        node.on_request(Time::ZERO, RequestId(1), Request::Write(write), &mut NodeFx::new());
        node.sync().unwrap();
        disk.crash(1);
        let mut node = open(me, &initial, &disk, 2);
        assert_eq!(node.protocols().lost_chains(), [ChainId(0)].into(), "an su head that forwards early");
        remove(&mut map, me);
        add_head(&mut map, me);
        deliver(&mut node, &map);
        assert!(node.protocols().lost_chains().is_empty(), "the data is dropped: nothing is lost any more");
        disk.crash(3);
        let node = open(me, &initial, &disk, 3);
        let lu =
            node.protocols().status(&node.host.stores, Time::ZERO).iter().find(|r| r.chain == 0).map_or(0, |r| r.lu);
        assert_eq!(lu, 0, "the update the chain never had came back after a power loss");
    }

    #[test]
    fn voters_spread_over_regions_then_zones_lowest_ids_first() {
        assert_eq!(voters(&cluster(&["default"; 5])), [NodeId(1), NodeId(2), NodeId(3)]);
        let three = cluster(&["mc1", "mc1", "mc2", "mc2", "mc3", "mc3"]);
        assert_eq!(voters(&three), [NodeId(1), NodeId(3), NodeId(5)]);
        let two = cluster(&["eu/a", "eu/a", "eu/b", "us", "us"]);
        assert_eq!(voters(&two), [NodeId(1), NodeId(3), NodeId(4)], "a second zone before a second node");
        assert_eq!(voters(&cluster(&["eu", "us"])), [NodeId(1), NodeId(2)]);
    }
}
