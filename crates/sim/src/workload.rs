//! Closed-loop clients that read, write and delete a few hot keys through random front-ends and
//! record every operation in the history format of DESIGN.md §4. Values are unique per write, so a
//! read names exactly the write it observed.
//!
//! After the faults end, a grace period lets the cluster heal; from then on each client walks the keys
//! round-robin, writing then reading each, so the history ends with reads of every key that expose
//! any lost acknowledged write. The run ends once every key has had a successful write and read since
//! the heal; if that has not happened by the liveness deadline, the run reports a stuck chain. Slow
//! networks only make the proof take longer.
//!
//! Some runs give some puts a time to live. A key's expiry is a delete its chain's head orders once the deadline
//! has passed on its wall clock, which may be off by up to [`WALL_ERROR_MS`] either way, as may the clock of the
//! front-end that fixed the deadline; so the history records, beside such a put of value v, a delete of v that
//! any client might have made from `2 × WALL_ERROR_MS` before the deadline on: a cas from v to absent, its
//! outcome unknown. A key that vanishes earlier, or a delete that takes a newer value, is a violation; so is a
//! read that returns a value past its deadline (`deadlines.rs`).
//!
//! In a cache keyspace any value may be evicted at any time after it is written: beside every put there, the
//! history records a delete of its value, its outcome unknown, from the put's invocation on. An eviction that
//! takes a newer value, or a value that comes back after it went, is a violation.
//!
//! Some runs also send SCAN pages (`scans.rs`): a workload key a page covered and left out is recorded as a get
//! that found it absent, and one it listed as a present read.
//!
//! Some runs send some puts as SET NX, recorded as a cas from absent. The head alone decides whether one applies,
//! from its own store, so this is what checks a head's store: one that lost a key the chain holds lets the put
//! apply over a value the history says is there. Reads do not see that loss, since they go to the tail, and a
//! member after the head gets a lost write resent by its predecessor.
//!
//! Some runs also spread the keys over extra keyspaces of their own replication factor, created at the
//! start by a setup client through the manager: key `k{i}` of the history is key `k{i / n}` of keyspace
//! `i mod n` (n keyspaces, `default` included), so the same key bytes live in several keyspaces at once
//! and must never see each other's writes. Operations on a keyspace not created yet fail as "unknown
//! keyspace", which certainly changed nothing.

use crate::clock::WALL_ERROR_MS;
use crate::deadlines::Deadlines;
use crate::rng::SimRng;
use crate::scans::Page;
use crate::world::{Event, World};
use bytes::Bytes;
use meridian_check::{History, OpKind, Recorder};
use meridian_core::topology::Topology;
use meridian_core::{
    Admin, Condition, Deadline, DurabilityMode, KeyspaceConfig, KeyspaceId, NodeId, Process, Read, ReplicaKind, Reply,
    Request, Ttl, Write, WriteOp,
};
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientEvent {
    Next { client: usize },
    Timeout { client: usize, op: usize },
}

/// The client that creates the run's extra keyspaces (the nemesis's admin client is `usize::MAX`).
pub const SETUP_CLIENT: usize = usize::MAX - 1;
/// Operation handles from here on are SCAN pages (this plus the page's index), which the history records only
/// once answered; below it they are the history's operations.
const PAGE_OP: usize = 1 << 48;
/// History processes of the expiry deletes a put with a time to live stands for: this plus the put's index.
/// Every process below it is a client.
pub const EXPIRY_PROCESS: u64 = 1 << 32;
/// History processes of the evictions a put to a cache keyspace stands for: this plus the put's index.
const EVICTION_PROCESS: u64 = 2 << 32;
/// The longest time to live a put gets.
const TTL_MAX_MS: u64 = 3_000;

#[derive(Clone, Debug)]
pub struct WorkloadParams {
    pub clients: usize,
    pub keys: usize,
    /// Keyspaces besides `default`, created in this order (numbers 1, 2, …) by the setup client.
    pub keyspaces: Vec<KeyspaceConfig>,
    pub read_ratio: f64,
    pub delete_ratio: f64,
    /// The fraction of operations before the heal that are SCAN pages.
    pub scan_ratio: f64,
    /// The fraction of puts with a time to live (1 ms to `TTL_MAX_MS`).
    pub ttl_ratio: f64,
    /// The fraction of puts before the heal sent as SET NX (never with a time to live).
    pub nx_ratio: f64,
    /// `default` is a cache keyspace (the extra keyspaces say so in their configurations).
    pub default_evicts: bool,
    /// How long a client waits before recording the outcome as unknown.
    pub timeout: Duration,
    pub think_max: Duration,
}

impl WorkloadParams {
    /// `power_loss`: whether the run's faults include power losses, which keyspaces in `async` durability do
    /// not survive (so none is drawn).
    pub fn random(rng: &mut SimRng, timeout: Duration, power_loss: bool) -> WorkloadParams {
        let keyspaces = (0..rng.range(0, 3)).map(|_| random_keyspace(rng, power_loss)).collect();
        WorkloadParams {
            clients: rng.range(2, 8) as usize,
            keys: rng.range(1, 6) as usize,
            keyspaces,
            read_ratio: 0.2 + rng.unit() * 0.6,
            delete_ratio: rng.unit() * 0.2,
            ttl_ratio: if rng.unit() < 0.5 { 0.0 } else { rng.unit() * 0.6 },
            default_evicts: false,
            timeout,
            think_max: rng.duration(Duration::from_micros(100), Duration::from_millis(20)),
            scan_ratio: if rng.unit() < 0.5 { 0.0 } else { rng.unit() * 0.3 },
            nx_ratio: if rng.unit() < 0.5 { 0.0 } else { rng.unit() * 0.5 },
        }
    }
}

/// A keyspace of 1 to 3 replicas, mostly `log` and often mixing in `mem` and `buffered` ones; one in three is a
/// cache keyspace whose cap (256 B to 64 KiB a node) holds no more than a few of the workload's keys per chain.
/// Its durability mode is the node's, `sync`, `group` or (without power losses) `async`.
fn random_keyspace(rng: &mut SimRng, power_loss: bool) -> KeyspaceConfig {
    let lossy = rng.unit();
    let kind = |rng: &mut SimRng| match rng.unit() {
        u if u < lossy * 0.6 => ReplicaKind::Mem,
        u if u < lossy => ReplicaKind::Buffered,
        _ => ReplicaKind::Log,
    };
    let replicas = (0..rng.range(1, 4)).map(|_| kind(rng)).collect();
    let maxmemory = (rng.unit() < 1.0 / 3.0).then(|| 2f64.powf(8.0 + rng.unit() * 8.0) as u64);
    let modes = [None, Some(DurabilityMode::Sync), Some(DurabilityMode::Group), Some(DurabilityMode::Async)];
    let durability = modes[rng.index(if power_loss { 3 } else { 4 })];
    KeyspaceConfig { maxmemory, durability, ..KeyspaceConfig::with_replicas(replicas) }
}

/// Phases of a run, in virtual nanoseconds.
#[derive(Clone, Copy, Debug)]
pub struct Phases {
    /// Faults stop and everything heals.
    pub faults_end: u64,
    /// From here on clients write and read every key in turn, and each key must see a successful write
    /// and a successful read before `deadline`.
    pub must_progress: u64,
    /// No new operations after this; if progress is not proven by then, the run fails.
    pub deadline: u64,
}

struct Client {
    pending: Option<usize>,
    writes: u64,
    /// Operations issued since progress became required; picks the next key and op round-robin.
    final_ops: usize,
}

/// The setup client's progress: how many extra keyspaces exist, and the attempt it waits for.
#[derive(Default)]
struct Setup {
    created: usize,
    attempt: usize,
    waiting: bool,
}

pub struct Workload {
    params: WorkloadParams,
    setup: Setup,
    phases: Phases,
    rng: SimRng,
    clients: Vec<Client>,
    recorder: Recorder,
    /// Kind, key index and invocation time of every operation, by index.
    ops: Vec<(OpKind, usize, u64)>,
    /// Every SCAN page sent, by index.
    pages: Vec<Page>,
    /// SCAN pages answered, and the absent and present keys they recorded.
    page_counts: (u64, u64, u64),
    /// SET NX answered: applied, and refused (the key was there).
    nx_counts: (u64, u64),
    /// MSETNX of a key and its buddy (`buddy`): the buddy's history operation, by the key's; and how many of
    /// them applied.
    pairs: BTreeMap<usize, usize>,
    pairs_applied: u64,
    nodes: Vec<NodeId>,
    /// On a topology, how many regions it has: client `c` lives in region `c mod regions` and talks to that
    /// region's nodes. 0 on a drawn network, where clients talk to any node.
    regions: u32,
    /// Per region, the other regions nearest first, when a client of a region without started nodes talks to
    /// the nearest region with some (`Workload::staying_near`); empty: to any node.
    nearest: Vec<Vec<u32>>,
    /// Each client writes its region's own key four times in five (`FaultKind::Origins`).
    own_keys: bool,
    /// Per key: (written, read) successfully by an operation invoked after progress became required.
    after_heal: Vec<(bool, bool)>,
    /// The first answer whose shape does not fit its request: a protocol bug.
    wrong_answer: Option<String>,
    /// Puts with a time to live, to hold reads to their deadlines.
    deadlines: Deadlines,
    /// The first read that returned a value past its deadline.
    past_deadline: Option<String>,
    /// Operations that succeeded on keys outside `default`.
    elsewhere: u64,
    /// Keys whose chain was restored from a replica that lost writes: their history promises nothing, so it
    /// is left out of the check (and counted).
    set_aside: Vec<String>,
}

impl Workload {
    pub fn new(params: WorkloadParams, phases: Phases, rng: SimRng, nodes: Vec<NodeId>) -> Workload {
        let clients = (0..params.clients).map(|_| Client { pending: None, writes: 0, final_ops: 0 }).collect();
        let after_heal = vec![(false, false); params.keys];
        Workload {
            params,
            setup: Setup::default(),
            phases,
            rng,
            clients,
            recorder: Recorder::new(),
            ops: Vec::new(),
            pages: Vec::new(),
            page_counts: (0, 0, 0),
            nx_counts: (0, 0),
            pairs: BTreeMap::new(),
            pairs_applied: 0,
            nodes,
            regions: 0,
            nearest: Vec::new(),
            own_keys: false,
            after_heal,
            wrong_answer: None,
            deadlines: Deadlines::default(),
            past_deadline: None,
            elsewhere: 0,
            set_aside: Vec::new(),
        }
    }

    /// Places the clients in `regions` regions, in turn, each talking to its own region's nodes.
    pub fn in_regions(&mut self, regions: u32) {
        self.regions = regions;
    }

    /// Has a client of a region without started nodes talk to the nearest region's nodes (by `topology`'s
    /// round trips) rather than to any node: every client stays in one region, as a client of a geo-distributed
    /// store does, and as MeteorShower's θt > 0 assumes (docs/protocols/meteor.md).
    pub fn staying_near(&mut self, topology: &Topology) {
        let n = topology.regions().len();
        self.nearest = (0..n)
            .map(|home| {
                let mut others: Vec<usize> = (0..n).filter(|&r| r != home).collect();
                others.sort_by(|&a, &b| topology.link(home, a).rtt_ms.total_cmp(&topology.link(home, b).rtt_ms));
                others.into_iter().map(|r| r as u32).collect()
            })
            .collect();
    }

    /// Has each client write its region's own key (the region's number modulo the keys) four times in five.
    pub fn writing_own_keys(&mut self) {
        self.own_keys = true;
    }

    pub fn start<P: Process>(&mut self, world: &mut World<P>) {
        self.next(SETUP_CLIENT, world);
        for client in 0..self.clients.len() {
            let at = world.now() + self.think();
            world.schedule(at, Event::Client(ClientEvent::Next { client }));
        }
    }

    fn think(&mut self) -> u64 {
        self.rng.range(0, self.params.think_max.as_nanos() as u64)
    }

    pub fn handle<P: Process>(&mut self, event: ClientEvent, world: &mut World<P>) {
        match event {
            ClientEvent::Next { client: SETUP_CLIENT } => self.issue_setup(world),
            ClientEvent::Timeout { client: SETUP_CLIENT, op } if op == self.setup.attempt => {
                self.setup.waiting = false;
                self.next(SETUP_CLIENT, world);
            }
            ClientEvent::Timeout { client: SETUP_CLIENT, .. } => {}
            ClientEvent::Next { client } => self.issue(client, world),
            ClientEvent::Timeout { client, op } => {
                if self.clients[client].pending == Some(op) {
                    self.clients[client].pending = None;
                    self.next(client, world);
                }
            }
        }
    }

    fn issue<P: Process>(&mut self, client: usize, world: &mut World<P>) {
        let now = world.now();
        if now >= self.phases.deadline || self.progress_proven() {
            return;
        }
        if now < self.phases.must_progress && self.params.scan_ratio > 0.0 && self.rng.chance(self.params.scan_ratio) {
            return self.issue_page(client, world);
        }
        let (k, kind) = if now >= self.phases.must_progress { self.final_choice(client) } else { self.random_choice() };
        let k = match self.own_keys && kind == OpKind::Put && now < self.phases.must_progress {
            true if self.rng.chance(0.8) => client % self.regions.max(1) as usize % self.params.keys,
            _ => k,
        };
        let nx = self.params.nx_ratio > 0.0 && now < self.phases.must_progress;
        let kind = if kind == OpKind::Put && nx && self.rng.chance(self.params.nx_ratio) { OpKind::Cas } else { kind };
        let key = format!("k{k}");
        let value = matches!(kind, OpKind::Put | OpKind::Cas).then(|| self.next_value(client));
        let (keyspace, key_bytes) = self.placed(k);
        let ttl_ms = (kind == OpKind::Put && self.rng.unit() < self.params.ttl_ratio).then(|| self.ttl());
        let op = match (&value, ttl_ms) {
            (None, _) => WriteOp::Delete,
            (Some(v), None) => WriteOp::Put { value: Bytes::from(v.clone()), ttl: Ttl::Clear },
            (Some(v), Some(ms)) => WriteOp::Put { value: Bytes::from(v.clone()), ttl: Ttl::Expire(Deadline::In(ms)) },
        };
        let req = match kind {
            OpKind::Get => Request::Get { keyspace, key: key_bytes, read: Read::Value },
            OpKind::Cas => Request::Write(Write { cond: Condition::IfAbsent, ..Write::new(keyspace, key_bytes, op) }),
            _ => Request::Write(Write::new(keyspace, key_bytes, op)),
        };
        let op = self.recorder.invoke(client as u64, kind, key.clone(), value.clone(), None, now);
        self.ops.push((kind, k, now));
        let buddy = if kind == OpKind::Cas { self.buddy(k).filter(|_| self.rng.chance(0.5)) } else { None };
        let req = match (buddy, req) {
            (Some(b), Request::Write(w)) => Request::Write(self.with_buddy(client, op, w, b, now)),
            (_, req) => req,
        };
        if let (Some(v), true) = (&value, self.evicts(k)) {
            self.record_delete(EVICTION_PROCESS + op as u64, k, key.clone(), v.clone(), now);
        }
        if let (Some(v), Some(ms)) = (value, ttl_ms) {
            self.deadlines.put(&v, ms);
            let from = now + ms.saturating_sub(2 * WALL_ERROR_MS) * 1_000_000;
            self.record_delete(EXPIRY_PROCESS + op as u64, k, key, v, from);
        }
        self.send(client, op, req, world);
    }

    /// A value `client` has not written before.
    fn next_value(&mut self, client: usize) -> String {
        self.clients[client].writes += 1;
        format!("c{client}-{}", self.clients[client].writes)
    }

    /// SET NX `w` of history key `k` (operation `op`) made an MSETNX of it and its buddy `b`: all or nothing.
    fn with_buddy(&mut self, client: usize, op: usize, w: Write, b: usize, now: u64) -> Write {
        let value = self.next_value(client);
        let buddy_op =
            self.recorder.invoke(client as u64, OpKind::Cas, format!("k{b}"), Some(value.clone()), None, now);
        self.ops.push((OpKind::Cas, b, now));
        self.pairs.insert(op, buddy_op);
        if self.evicts(b) {
            self.record_delete(EVICTION_PROCESS + buddy_op as u64, b, format!("k{b}"), value.clone(), now);
        }
        let WriteOp::Put { value: first, .. } = w.op else { unreachable!("a SET NX is a put") };
        let pairs = vec![(w.key.clone(), first), (self.placed(b).1, Bytes::from(value))];
        Write::new(w.keyspace, w.key, WriteOp::SetAllAbsent(pairs))
    }

    /// Sends a page of a random keyspace's keys.
    fn issue_page<P: Process>(&mut self, client: usize, world: &mut World<P>) {
        let keyspace = KeyspaceId(self.rng.index(1 + self.params.keyspaces.len()) as u32);
        let keys: Vec<Bytes> = self.keys_of(keyspace).into_iter().map(|(_, key)| key).collect();
        let (page, req) = Page::random(&mut self.rng, keyspace, &keys, world.now());
        let op = PAGE_OP + self.pages.len();
        self.pages.push(page);
        self.send(client, op, req, world);
    }

    /// Sends `client`'s operation `op` to a random node (of its region, if it has one with a started node),
    /// and gives up on it after the timeout.
    fn send<P: Process>(&mut self, client: usize, op: usize, req: Request, world: &mut World<P>) {
        self.clients[client].pending = Some(op);
        // Clients know the cluster's nodes, not spares that never started.
        let nodes: Vec<NodeId> = self.nodes.iter().copied().filter(|&n| world.was_started(n)).collect();
        let local = match self.regions {
            0 => Vec::new(),
            n => self.region_nodes(client as u32 % n, &nodes, world),
        };
        let pool = if local.is_empty() { &nodes } else { &local };
        let node = pool[self.rng.index(pool.len())];
        world.client_send(client, op, node, req);
        let deadline = world.now() + self.params.timeout.as_nanos() as u64;
        world.schedule(deadline, Event::Client(ClientEvent::Timeout { client, op }));
    }

    /// The nodes of `nodes` that a client of region `home` talks to: those in it, else (when staying near)
    /// those of the nearest region that has some; empty for any node.
    fn region_nodes<P: Process>(&self, home: u32, nodes: &[NodeId], world: &World<P>) -> Vec<NodeId> {
        let in_region = |r: u32| -> Vec<NodeId> {
            nodes.iter().copied().filter(|&node| world.net.region_of(node) == Some(r)).collect()
        };
        let local = in_region(home);
        let Some(others) = self.nearest.get(home as usize).filter(|_| local.is_empty()) else { return local };
        others.iter().map(|&r| in_region(r)).find(|n| !n.is_empty()).unwrap_or_default()
    }

    /// A time to live from 1 ms to [`TTL_MAX_MS`], spread evenly over its orders of magnitude.
    fn ttl(&mut self) -> u64 {
        (TTL_MAX_MS as f64).powf(self.rng.unit()) as u64
    }

    /// Records, as history process `process`, a delete of `value` from history key `k{k}` that may take effect
    /// from `from` on, or never: an expiry or an eviction.
    fn record_delete(&mut self, process: u64, k: usize, key: String, value: String, from: u64) {
        self.recorder.invoke(process, OpKind::Cas, key, None, Some(value), from);
        self.ops.push((OpKind::Cas, k, from));
    }

    /// Whether history key `k{k}` lives in a cache keyspace.
    fn evicts(&self, k: usize) -> bool {
        match k % (1 + self.params.keyspaces.len()) {
            0 => self.params.default_evicts,
            i => self.params.keyspaces[i - 1].maxmemory.is_some(),
        }
    }

    /// The keyspace and key bytes of history key `k{k}`. With SET NX in the workload, every other key of a
    /// keyspace is the buddy of the one before it: its name holds that one's as a hash tag, which places it in
    /// the same chain, so the two can be set in one MSETNX.
    fn placed(&self, k: usize) -> (KeyspaceId, Bytes) {
        let n = 1 + self.params.keyspaces.len();
        let j = k / n;
        let name = if self.params.nx_ratio > 0.0 && j % 2 == 1 { format!("{{k{}}}+", j - 1) } else { format!("k{j}") };
        (KeyspaceId((k % n) as u32), Bytes::from(name))
    }

    /// History key `k`'s buddy (see [`Self::placed`]), if it has one.
    fn buddy(&self, k: usize) -> Option<usize> {
        let n = 1 + self.params.keyspaces.len();
        let b = k + n;
        (self.params.nx_ratio > 0.0 && (k / n).is_multiple_of(2) && b < self.params.keys).then_some(b)
    }

    /// The history keys (by index) that live in `keyspace`, with their key bytes there.
    fn keys_of(&self, keyspace: KeyspaceId) -> Vec<(usize, Bytes)> {
        let placed = (0..self.params.keys).map(|k| (k, self.placed(k)));
        placed.filter(|(_, (ks, _))| *ks == keyspace).map(|(k, (_, key))| (k, key)).collect()
    }

    /// Asks a random node to create the next extra keyspace, unless all exist.
    fn issue_setup<P: Process>(&mut self, world: &mut World<P>) {
        let Some(config) = self.params.keyspaces.get(self.setup.created).cloned() else { return };
        if self.setup.waiting {
            return;
        }
        let nodes: Vec<NodeId> = self.nodes.iter().copied().filter(|&n| world.was_started(n)).collect();
        let node = nodes[self.rng.index(nodes.len())];
        self.setup.attempt += 1;
        self.setup.waiting = true;
        let name = format!("ks{}", self.setup.created + 1);
        world.client_send(
            SETUP_CLIENT,
            self.setup.attempt,
            node,
            Request::Admin(Admin::CreateKeyspace { name, config: Box::new(config) }),
        );
        let deadline = world.now() + 2 * self.params.timeout.as_nanos() as u64;
        world.schedule(deadline, Event::Client(ClientEvent::Timeout { client: SETUP_CLIENT, op: self.setup.attempt }));
    }

    /// A keyspace exists once a node says it created it, or that it already exists (an earlier attempt
    /// whose answer was lost); anything else is tried again.
    fn on_setup_response<P: Process>(&mut self, op: usize, reply: Reply, world: &mut World<P>) {
        if op != self.setup.attempt || !self.setup.waiting {
            return;
        }
        self.setup.waiting = false;
        match reply {
            Reply::Text(_) => self.setup.created += 1,
            Reply::Error(_, msg) if msg.contains("already exists") => self.setup.created += 1,
            _ => {}
        }
        self.next(SETUP_CLIENT, world);
    }

    fn random_choice(&mut self) -> (usize, OpKind) {
        let k = self.rng.index(self.params.keys);
        let roll = self.rng.unit();
        let kind = match roll {
            r if r < self.params.read_ratio => OpKind::Get,
            r if r < self.params.read_ratio + self.params.delete_ratio => OpKind::Delete,
            _ => OpKind::Put,
        };
        (k, kind)
    }

    /// Once healed: each client writes then reads each key in turn, starting at its own offset.
    /// Once progress is required: each client goes round the keys from its own, a write then a read of each,
    /// skipping those already shown to succeed since, so that a key whose write failed once (say while its
    /// partition changed hands) is tried again at the client's next turn rather than after every other key's.
    fn final_choice(&mut self, client: usize) -> (usize, OpKind) {
        let keys = self.params.keys;
        let choice =
            |step: usize| ((client + step / 2) % keys, if step.is_multiple_of(2) { OpKind::Put } else { OpKind::Get });
        let shown = |(k, kind): (usize, OpKind)| match kind {
            OpKind::Put => self.after_heal[k].0,
            _ => self.after_heal[k].1,
        };
        let from = self.clients[client].final_ops;
        let step = (from..from + 2 * keys).find(|&s| !shown(choice(s))).unwrap_or(from);
        self.clients[client].final_ops = step + 1;
        choice(step)
    }

    fn next<P: Process>(&mut self, client: usize, world: &mut World<P>) {
        let at = world.now() + self.think();
        world.schedule(at, Event::Client(ClientEvent::Next { client }));
    }

    /// A front-end's answer reached the client.
    pub fn on_response<P: Process>(&mut self, client: usize, op: usize, reply: Reply, world: &mut World<P>) {
        if client == SETUP_CLIENT {
            return self.on_setup_response(op, reply, world);
        }
        if self.clients[client].pending != Some(op) {
            return;
        }
        self.clients[client].pending = None;
        let now = world.now();
        if let Some(page) = op.checked_sub(PAGE_OP) {
            self.on_page(client, page, reply, now);
            return self.next(client, world);
        }
        let outside_default = self.placed(self.ops[op].1).0 != KeyspaceId::DEFAULT;
        self.elsewhere += u64::from(outside_default && matches!(reply, Reply::Value(_) | Reply::Written { .. }));
        match (self.ops[op].0, reply) {
            (OpKind::Get, Reply::Value(v)) => {
                let v = v.map(|b| String::from_utf8_lossy(&b).into_owned());
                let (_, key, invoked) = self.ops[op];
                if let Some(late) = v.as_deref().and_then(|v| self.deadlines.check_read(&format!("k{key}"), v, invoked))
                {
                    self.past_deadline.get_or_insert(late);
                }
                self.recorder.complete(op, Some(true), v, now);
                self.after_heal[key].1 |= invoked >= self.phases.must_progress;
            }
            (OpKind::Put | OpKind::Delete, Reply::Written { applied: true, .. }) => {
                if let Some(v) = self.recorder.value_of(op) {
                    self.deadlines.applied(v, now);
                }
                self.recorder.complete(op, Some(true), None, now);
                let (_, key, invoked) = self.ops[op];
                self.after_heal[key].0 |= invoked >= self.phases.must_progress;
            }
            (OpKind::Cas, Reply::Written { applied, .. }) => {
                *if applied { &mut self.nx_counts.0 } else { &mut self.nx_counts.1 } += 1;
                self.recorder.complete(op, Some(applied), None, now);
                if let Some(buddy) = self.pairs.get(&op) {
                    self.recorder.complete(*buddy, Some(applied), None, now);
                    self.pairs_applied += u64::from(applied);
                }
            }
            (_, Reply::Error(kind, _)) => {
                if kind.certainly_not_applied() {
                    self.recorder.complete(op, Some(false), None, now);
                    if let Some(buddy) = self.pairs.get(&op) {
                        self.recorder.complete(*buddy, Some(false), None, now);
                    }
                }
            }
            (kind, other) => {
                self.wrong_answer.get_or_insert(format!("operation {op} ({kind:?}) got the answer {other:?}"));
            }
        }
        self.next(client, world);
    }

    /// Records, as reads by `client`, the keys page `page` covered: a get of nothing for each it left out, a
    /// present read for each it listed (`scans.rs`).
    fn on_page(&mut self, client: usize, page: usize, reply: Reply, now: u64) {
        let page = self.pages[page];
        let covered = match reply {
            Reply::Scanned(scanned) => page.covered(&scanned, &self.keys_of(page.keyspace)).map_err(|e| e.to_string()),
            // A page changes nothing, so a refused or failed one has nothing to record.
            Reply::Error(..) => return,
            other => Err(format!("a scan of keyspace {} got the answer {other:?}", page.keyspace)),
        };
        let covered = match covered {
            Ok(covered) => covered,
            Err(wrong) => {
                self.wrong_answer.get_or_insert(wrong);
                return;
            }
        };
        self.page_counts.0 += 1;
        for (k, present) in covered {
            let kind = if present { OpKind::Present } else { OpKind::Get };
            let op = self.recorder.invoke(client as u64, kind, format!("k{k}"), None, None, page.invoke_ns);
            self.recorder.complete(op, Some(true), None, now);
            self.ops.push((kind, k, page.invoke_ns));
            if present {
                self.page_counts.2 += 1;
            } else {
                self.page_counts.1 += 1;
            }
        }
    }

    fn progress_proven(&self) -> bool {
        self.after_heal.iter().all(|&(written, read)| written && read)
    }

    /// True once progress is proven and no operation is outstanding: the run has nothing left to show.
    pub fn done(&self) -> bool {
        self.progress_proven() && self.clients.iter().all(|c| c.pending.is_none())
    }

    /// A wrong-shaped answer, or keys that no read returned once the cluster had healed (a stuck chain).
    pub fn failure(&self) -> Option<String> {
        if let Some(wrong) = self.wrong_answer.as_ref().or(self.past_deadline.as_ref()) {
            return Some(wrong.clone());
        }
        let stuck: Vec<String> = self
            .after_heal
            .iter()
            .enumerate()
            .filter(|(_, &(written, read))| !(written && read))
            .map(|(k, &(written, _))| format!("k{k} ({})", if written { "read" } else { "write" }))
            .collect();
        (!stuck.is_empty()).then(|| {
            let secs = (self.phases.deadline - self.phases.must_progress) as f64 / 1e9;
            let setup = format!("{} of {} extra keyspaces created", self.setup.created, self.params.keyspaces.len());
            format!(
                "no progress: no {} succeeded in the {secs:.1} s after the cluster healed ({setup})",
                stuck.join(", ")
            )
        })
    }

    /// Leaves out of the history the keys `restored` says live in a chain restored from a lost replica.
    pub fn set_aside(&mut self, restored: impl Fn(KeyspaceId, &[u8]) -> bool) {
        let lost = (0..self.params.keys).filter(|&k| {
            let (keyspace, bytes) = self.placed(k);
            restored(keyspace, &bytes)
        });
        self.set_aside = lost.map(|k| format!("k{k}")).collect();
    }

    /// What the run did with keyspaces, for the run's counters.
    pub fn keyspace_counters(&self) -> [(&'static str, u64); 10] {
        [
            ("keyspaces created", self.setup.created as u64),
            ("operations outside default", self.elsewhere),
            ("keys of restored chains", self.set_aside.len() as u64),
            ("scan pages answered", self.page_counts.0),
            ("keys scans found absent", self.page_counts.1),
            ("keys scans found present", self.page_counts.2),
            ("SET NX applied", self.nx_counts.0),
            ("SET NX refused", self.nx_counts.1),
            ("MSETNX of two keys sent", self.pairs.len() as u64),
            ("MSETNX of two keys applied", self.pairs_applied),
        ]
    }

    pub fn finish(self) -> History {
        let mut history = self.recorder.finish();
        history.ops.retain(|op| !self.set_aside.contains(&op.key));
        history
    }
}
