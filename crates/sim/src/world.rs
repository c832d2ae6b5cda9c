//! The simulated cluster: virtual time, one event queue, the nodes running real protocol cores over
//! simulated disks, the network and the clocks. It carries out effects exactly as the tokio driver
//! does (immediate ones at once, `after_sync` ones once a simulated fsync covering them completes), so
//! a protocol that is correct here relies on nothing the real driver does not give it. Its fsyncs are taken as
//! the driver takes them, in two halves (`Process::begin_sync`, then the job and `Process::end_sync` when the
//! simulated fsync completes), with the node taking inputs in between.

use crate::clock::Clock;
use crate::net::Network;
use crate::rng::SimRng;
use meridian_core::{
    wire, write_taken, DurabilityMode, Effect, Effects, KeyspaceId, NodeId, Process, Reply, Request, RequestId,
    SyncJob, Time, Violation,
};
use meridian_store::SimVfs;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::time::Duration;
use xxhash_rust::xxh3::Xxh3;

/// How soon after an async write its node syncs (the node's default `--async-interval-ms`).
pub const ASYNC_INTERVAL: Duration = Duration::from_millis(100);

type SimEffect<P> = Effect<<P as Process>::Msg, <P as Process>::Timer>;

/// Builds a node's core over its disk: at first boot and after every crash. The `u64` is the run's
/// incarnation number.
pub type Factory<P> = Box<dyn FnMut(NodeId, SimVfs, u64) -> Result<P, Box<dyn std::error::Error>>>;
/// Checked after every step over the cores that are up, each with its clock's current reading.
pub type Invariants<P> = Box<dyn Fn(&BTreeMap<NodeId, (&P, Time)>) -> Result<(), Violation>>;
/// Named counts a core keeps for its lifetime (e.g. compaction passes), read before every crash and at
/// the end of the run and summed, so a run can show which code paths it exercised.
pub type Counters<P> = Box<dyn Fn(&P) -> Vec<(&'static str, u64)>>;

/// The value bytes of a write request.
fn write_bytes(req: &Request) -> usize {
    match req {
        Request::Write(w) => w.value().map_or(0, |v| v.len()),
        _ => 0,
    }
}

/// Whether a node's view of the cluster says the chain holding a key (keyspace, key bytes) was restored from a
/// replica that lost writes: the run's history of that key holds no guarantee.
pub type Restored<P> = Box<dyn Fn(&P, KeyspaceId, &[u8]) -> bool>;

/// A node's state in a few lines, given its clock's reading, for the report of a run that failed.
pub type Describe<P> = Box<dyn Fn(&P, Time) -> String>;

/// What kind of work a message is, for the cost model's accounts and the traffic counts (e.g. "copy", "chain",
/// "heartbeat").
pub type Label<P> = Box<dyn Fn(&<P as Process>::Msg) -> &'static str>;

/// How a protocol is put into the simulator (see `protocols.rs`).
pub struct Hooks<P: Process> {
    pub factory: Factory<P>,
    pub invariants: Invariants<P>,
    pub counters: Counters<P>,
    pub restored: Restored<P>,
    /// Whether a node currently leads the cluster manager (the `manager` nemesis crashes it).
    pub leads: Box<dyn Fn(&P) -> bool>,
    pub describe: Describe<P>,
    pub label: Label<P>,
}

#[derive(Debug, Clone)]
pub enum Event<T> {
    Deliver { from: NodeId, to: NodeId, epoch: u64, frame: Vec<u8> },
    Request { to: NodeId, client: usize, op: usize, req: Request },
    Response { client: usize, op: usize, reply: Reply },
    Timer { node: NodeId, life: u64, timer: T, gen: u64 },
    SyncBegin { node: NodeId, life: u64 },
    SyncDone { node: NodeId, life: u64 },
    Client(crate::workload::ClientEvent),
    Fault(crate::nemesis::Fault),
}

impl<T> Event<T> {
    /// The node whose pause holds this event back, if any.
    fn target(&self) -> Option<NodeId> {
        match self {
            Event::Deliver { to, .. } | Event::Request { to, .. } => Some(*to),
            Event::Timer { node, .. } | Event::SyncBegin { node, .. } | Event::SyncDone { node, .. } => Some(*node),
            _ => None,
        }
    }
}

struct Scheduled<T> {
    at: u64,
    seq: u64,
    event: Event<T>,
}

impl<T> PartialEq for Scheduled<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<T> Eq for Scheduled<T> {}
impl<T> PartialOrd for Scheduled<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Scheduled<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// How much a node's processor spends on what it does, for experiments that measure throughput: each input
/// (message, request, timer) costs `per_input`, and every byte a node receives or sends costs `per_byte`
/// (encoding, copying, checksums, store reads and writes). A node works on one input at a time: what arrives
/// while it is busy waits, unless `queued` names the kinds of message that wait (with client requests), and the
/// others, and timers, are taken at once: a real node's peer and housekeeping tasks do not queue behind its
/// clients' backlog. Correctness runs leave it off, so nodes are infinitely fast there.
#[derive(Clone, Copy, Debug)]
pub struct CostModel {
    pub per_input: Duration,
    pub per_byte: Duration,
    pub queued: Option<&'static [&'static str]>,
}

impl CostModel {
    fn of(&self, bytes: usize) -> u64 {
        self.per_byte.as_nanos() as u64 * bytes as u64
    }
}

#[derive(Clone, Debug)]
pub struct DiskParams {
    pub fsync_min: Duration,
    pub fsync_max: Duration,
}

impl DiskParams {
    pub fn random(rng: &mut SimRng) -> DiskParams {
        let min = rng.duration(Duration::from_micros(10), Duration::from_micros(200));
        DiskParams { fsync_min: min, fsync_max: min + rng.duration(Duration::ZERO, Duration::from_millis(8)) }
    }
}

struct Node<P: Process> {
    proc: Option<P>,
    /// With a cost model: until when the node's processor is busy.
    busy_until: u64,
    /// Booted at least once (spare nodes wait for the nemesis to start them).
    started: bool,
    /// This node's own stream (incarnations, crash damage), derived from the run's seed.
    rng: SimRng,
    /// Bumped at every crash, so timers and syncs of a previous life are ignored.
    life: u64,
    disk: SimVfs,
    clock: Clock,
    paused: bool,
    backlog: VecDeque<Event<P::Timer>>,
    timers: BTreeMap<P::Timer, u64>,
    /// Count of dirty steps, how many of them the last completed sync covers, and the count at the last
    /// step that wrote in `sync` or `group` mode (whose `after_sync` effects wait for a sync; async writes'
    /// wait only for a flush).
    written: u64,
    synced: u64,
    strict: u64,
    /// When the next sync begins, if one is scheduled.
    sync_at: Option<u64>,
    /// The sync under way: its fsync job, run when it completes, and the count of dirty steps it covers.
    in_flight: Option<(SyncJob, u64)>,
    /// Held `after_sync` effects, each with the count of dirty steps before it: it goes once a sync covers them.
    held: VecDeque<(u64, SimEffect<P>)>,
    requests: BTreeMap<RequestId, (usize, usize)>,
    next_request: u64,
}

#[derive(Debug, Default, Clone)]
pub struct WorldStats {
    pub events: u64,
    pub messages: u64,
    pub dropped: u64,
    pub crashes: u64,
    pub syncs: u64,
    /// Messages sent, by kind ([`Hooks::label`]).
    pub traffic: BTreeMap<&'static str, Traffic>,
}

/// Messages of one kind sent over a run, and their bytes on the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    pub messages: u64,
    pub bytes: u64,
}

pub struct World<P: Process> {
    now: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<Scheduled<P::Timer>>>,
    nodes: BTreeMap<NodeId, Node<P>>,
    pub net: Network,
    disk: DiskParams,
    rng: SimRng,
    hooks: Hooks<P>,
    cost: Option<CostModel>,
    /// With a cost model: processor time each node spent, by kind of work, in nanoseconds.
    work: BTreeMap<(NodeId, &'static str), u64>,
    /// The cost of the input being handled, booked once its kind is known.
    charge: Option<u64>,
    /// Sums of the counters of every node life that has ended.
    pub totals: BTreeMap<&'static str, u64>,
    hash: Xxh3,
    pub stats: WorldStats,
    /// Set when an invariant breaks or a node cannot recover; the run stops there.
    pub failure: Option<String>,
    /// Print every input a node handles to stderr (`meridian sim --trace`).
    pub tracing: bool,
}

/// A process's answer to a request within its step, asked as the driver asks (`Process::read_at_once`,
/// `Process::write_at_once`); otherwise the request back, to step. A write is the process's exactly when it answers.
fn at_once<P: Process>(p: &mut P, now: Time, req: Request) -> Result<Reply, Request> {
    if req.is_read() {
        return p.read_at_once(now, &req).ok_or(req);
    }
    let mut write = Some(req);
    let answer = p.write_at_once(now, &mut write);
    write_taken(answer, write)
}

/// One line per input for `meridian sim --trace`: the virtual time in microseconds, the node and what it got.
fn trace_input<P: Process>(now: u64, id: NodeId, input: &Input<P>) {
    let us = now / 1_000;
    match input {
        Input::Start => eprintln!("{us} {id} start"),
        Input::Message(from, msg) => eprintln!("{us} {id} <- {from} {msg:?}"),
        Input::Timer(timer) => eprintln!("{us} {id} timer {timer:?}"),
        Input::Request(rid, req) => eprintln!("{us} {id} request {} {req:?}", rid.0),
    }
}

enum Input<P: Process> {
    Start,
    Message(NodeId, P::Msg),
    Timer(P::Timer),
    Request(RequestId, Request),
}

impl<P: Process> World<P> {
    pub fn new(ids: &[NodeId], net: Network, disk: DiskParams, rng: SimRng, hooks: Hooks<P>) -> World<P> {
        let nodes = ids
            .iter()
            .map(|&id| {
                let node = Node {
                    proc: None,
                    busy_until: 0,
                    started: false,
                    rng: rng.derive(&format!("node-{}", id.0)),
                    life: 0,
                    disk: SimVfs::new(),
                    clock: Clock::default(),
                    paused: false,
                    backlog: VecDeque::new(),
                    timers: BTreeMap::new(),
                    written: 0,
                    synced: 0,
                    strict: 0,
                    sync_at: None,
                    in_flight: None,
                    held: VecDeque::new(),
                    requests: BTreeMap::new(),
                    next_request: 0,
                };
                (id, node)
            })
            .collect();
        World {
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            nodes,
            net,
            disk,
            rng,
            hooks,
            cost: None,
            work: BTreeMap::new(),
            charge: None,
            totals: BTreeMap::new(),
            hash: Xxh3::new(),
            stats: WorldStats::default(),
            failure: None,
            tracing: false,
        }
    }

    pub fn now(&self) -> u64 {
        self.now
    }

    /// Gives nodes a finite processor from now on (see [`CostModel`]).
    pub fn set_cost(&mut self, cost: CostModel) {
        self.cost = Some(cost);
    }

    /// Processor time `node` has spent on work of kind `label` so far (with a cost model).
    pub fn work(&self, node: NodeId, label: &str) -> Duration {
        let ns = self.work.iter().filter(|((n, l), _)| *n == node && *l == label).map(|(_, w)| *w).sum();
        Duration::from_nanos(ns)
    }

    /// The cores that are up.
    pub fn procs(&self) -> impl Iterator<Item = (NodeId, &P)> {
        self.nodes.iter().filter_map(|(&id, n)| n.proc.as_ref().map(|p| (id, p)))
    }

    pub fn node_ids(&self) -> Vec<NodeId> {
        self.nodes.keys().copied().collect()
    }

    pub fn schedule(&mut self, at: u64, event: Event<P::Timer>) {
        self.seq += 1;
        self.queue.push(Reverse(Scheduled { at: at.max(self.now), seq: self.seq, event }));
    }

    /// The next event, advancing virtual time; None when the queue is empty or `until` is reached.
    pub fn pop(&mut self, until: u64) -> Option<Event<P::Timer>> {
        let Reverse(s) = self.queue.pop()?;
        if s.at > until {
            self.queue.push(Reverse(s));
            return None;
        }
        self.now = s.at;
        self.stats.events += 1;
        self.hash.update(&s.at.to_le_bytes());
        Some(s.event)
    }

    /// Folds run-specific facts into the trace hash (what the caller observed of an event).
    pub fn trace(&mut self, bytes: &[u8]) {
        self.hash.update(bytes);
    }

    /// Ends the run's bookkeeping: adds the counters of the nodes still up to the totals.
    pub fn finish_counters(&mut self) {
        for proc in self.nodes.values().filter_map(|n| n.proc.as_ref()) {
            for (name, n) in (self.hooks.counters)(proc) {
                *self.totals.entry(name).or_default() += n;
            }
        }
    }

    /// Whether any node that is up says `f`.
    pub fn any_up(&self, f: impl Fn(&P) -> bool) -> bool {
        self.nodes.values().filter_map(|n| n.proc.as_ref()).any(f)
    }

    /// Whether any node that is up says the chain holding a key was restored ([`Hooks::restored`]).
    pub fn restored(&self, keyspace: KeyspaceId, key: &[u8]) -> bool {
        self.any_up(|p| (self.hooks.restored)(p, keyspace, key))
    }

    /// Every node's state as [`Hooks::describe`] tells it.
    pub fn describe(&self) -> String {
        let now = self.now;
        let line = |(id, n): (&NodeId, &Node<P>)| match &n.proc {
            Some(p) => format!("{id}: {}", (self.hooks.describe)(p, n.clock.local(now))),
            None if n.started => format!("{id}: down"),
            None => format!("{id}: never started"),
        };
        self.nodes.iter().map(line).collect::<Vec<_>>().join("\n")
    }

    pub fn trace_hash(&self) -> u64 {
        self.hash.digest()
    }

    pub fn clock_mut(&mut self, node: NodeId) -> &mut Clock {
        &mut self.nodes.get_mut(&node).expect("known node").clock
    }

    pub fn is_up(&self, node: NodeId) -> bool {
        self.nodes[&node].proc.is_some()
    }

    pub fn is_paused(&self, node: NodeId) -> bool {
        self.nodes[&node].paused
    }

    pub fn was_started(&self, node: NodeId) -> bool {
        self.nodes[&node].started
    }

    /// The nodes that are up and lead the cluster manager, as far as they know.
    pub fn leaders(&self) -> Vec<NodeId> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.proc.as_ref().is_some_and(|p| (self.hooks.leads)(p)))
            .map(|(&id, _)| id)
            .collect()
    }

    /// Boots (or reboots) a node from its disk.
    pub fn boot(&mut self, id: NodeId) {
        let node = self.nodes.get_mut(&id).expect("known node");
        node.started = true;
        let incarnation = node.rng.u64();
        match (self.hooks.factory)(id, node.disk.clone(), incarnation) {
            Ok(p) => {
                node.proc = Some(p);
                self.step(id, Input::Start);
            }
            Err(e) => self.fail(format!("{id} cannot recover from its disk: {e}")),
        }
    }

    /// Power loss: the core and its volatile state vanish, unsynced writes are lost or torn.
    pub fn crash(&mut self, id: NodeId) {
        self.stop(id, true);
    }

    /// Process crash (SIGKILL, OOM kill): the core and its user-space buffers vanish, but what it handed to
    /// the OS survives in the page cache, synced or not.
    pub fn kill(&mut self, id: NodeId) {
        self.stop(id, false);
    }

    /// Clean shutdown (SIGTERM), then a power loss while the node is down: its writes are made durable and
    /// the effects waiting for that carried out (as the driver's `settle`), the core is told
    /// ([`Process::stopped`]), and only then does the node stop.
    pub fn stop_cleanly(&mut self, id: NodeId) {
        // The fsync under way, if any, completes now; then one more covers what came since.
        self.sync_done(id, self.nodes[&id].life);
        let node = self.nodes.get_mut(&id).expect("known node");
        let Some(p) = node.proc.as_mut() else { return };
        let covers = node.written;
        if let Err(e) = p.sync() {
            return self.fail(format!("{id}: sync failed: {e}"));
        }
        self.end_sync(id, covers);
        let node = self.nodes.get_mut(&id).expect("known node");
        if let Some(Err(e)) = node.proc.as_mut().map(|p| p.stopped()) {
            return self.fail(format!("{id}: recording its clean stop failed: {e}"));
        }
        self.stop(id, true);
    }

    fn stop(&mut self, id: NodeId, power_loss: bool) {
        let node = self.nodes.get_mut(&id).expect("known node");
        let Some(proc) = node.proc.take() else { return };
        for (name, n) in (self.hooks.counters)(&proc) {
            *self.totals.entry(name).or_default() += n;
        }
        let entropy = node.rng.u64();
        node.life += 1;
        if power_loss {
            node.disk.crash(entropy);
        }
        node.paused = false;
        node.backlog.clear();
        node.timers.clear();
        node.held.clear();
        node.in_flight = None;
        node.requests.clear();
        (node.written, node.synced, node.strict, node.sync_at) = (0, 0, 0, None);
        self.net.break_node(id);
        self.stats.crashes += 1;
    }

    pub fn pause(&mut self, id: NodeId) {
        let node = self.nodes.get_mut(&id).expect("known node");
        if node.proc.is_some() {
            node.paused = true;
        }
    }

    /// Ends a pause: what arrived meanwhile is handled now, in arrival order.
    pub fn resume(&mut self, id: NodeId) {
        let node = self.nodes.get_mut(&id).expect("known node");
        node.paused = false;
        let backlog = std::mem::take(&mut node.backlog);
        let now = self.now;
        backlog.into_iter().for_each(|e| self.schedule(now, e));
    }

    /// A client's request travels to a node (client links are short and never partitioned).
    pub fn client_send(&mut self, client: usize, op: usize, to: NodeId, req: Request) {
        let at = self.now + self.client_latency();
        self.schedule(at, Event::Request { to, client, op, req });
    }

    fn client_latency(&mut self) -> u64 {
        self.rng.range(10_000, 200_000)
    }

    /// Handles a node-bound event; returns it untouched if it is not one.
    pub fn handle(&mut self, event: Event<P::Timer>) -> Option<Event<P::Timer>> {
        if let Some(node) = event.target() {
            if self.nodes[&node].paused {
                self.nodes.get_mut(&node).expect("known node").backlog.push_back(event);
                return None;
            }
            let disk_event = matches!(event, Event::SyncBegin { .. } | Event::SyncDone { .. });
            if let Some(cost) = self.cost.filter(|_| !disk_event) {
                let busy = self.nodes[&node].busy_until;
                if busy > self.now && self.waits(&event, cost) {
                    self.schedule(busy, event);
                    return None;
                }
                let bytes = match &event {
                    Event::Deliver { frame, .. } => frame.len(),
                    Event::Request { req, .. } => req.key().map_or(0, |k| k.len()) + write_bytes(req),
                    _ => 0,
                };
                let work = cost.per_input.as_nanos() as u64 + cost.of(bytes);
                self.nodes.get_mut(&node).expect("known node").busy_until = busy.max(self.now) + work;
                self.charge = Some(work);
            }
        }
        match event {
            Event::Deliver { from, to, epoch, frame } => self.deliver(from, to, epoch, frame),
            Event::Request { to, client, op, req } => self.request(to, client, op, req),
            Event::Timer { node, life, timer, gen } => self.timer(node, life, timer, gen),
            Event::SyncBegin { node, life } => self.sync_begin(node, life),
            Event::SyncDone { node, life } => self.sync_done(node, life),
            other => return Some(other),
        }
        None
    }

    /// Whether `event` waits for its node's processor to be free (`CostModel::queued`).
    fn waits(&self, event: &Event<P::Timer>, cost: CostModel) -> bool {
        let Some(queued) = cost.queued else { return true };
        match event {
            Event::Request { .. } => true,
            Event::Deliver { frame, .. } => match wire::decode::<P::Msg>(frame) {
                Ok(Some((msg, _))) => queued.contains(&(self.hooks.label)(&msg)),
                _ => true,
            },
            _ => false,
        }
    }

    fn deliver(&mut self, from: NodeId, to: NodeId, epoch: u64, frame: Vec<u8>) {
        if !self.net.delivers(from, to, epoch) || !self.is_up(to) {
            self.stats.dropped += 1;
            return;
        }
        self.hash.update(&frame);
        match wire::decode::<P::Msg>(&frame) {
            Ok(Some((msg, _))) => self.step(to, Input::Message(from, msg)),
            other => self.fail(format!("frame from {from} to {to} does not decode: {other:?}")),
        }
    }

    fn request(&mut self, to: NodeId, client: usize, op: usize, req: Request) {
        let Some(node) = self.nodes.get_mut(&to).filter(|n| n.proc.is_some()) else { return };
        node.next_request += 1;
        let id = RequestId(node.next_request);
        node.requests.insert(id, (client, op));
        self.hash.update(&(client as u64).to_le_bytes());
        self.step(to, Input::Request(id, req));
    }

    fn timer(&mut self, id: NodeId, life: u64, timer: P::Timer, gen: u64) {
        let node = self.nodes.get_mut(&id).expect("known node");
        if node.life != life || node.timers.get(&timer) != Some(&gen) {
            return;
        }
        node.timers.remove(&timer);
        self.step(id, Input::Timer(timer));
    }

    /// Begins a sync of every write so far unless one is under way (whose completion begins the next): the
    /// core hands its writes to the OS and its fsync job runs when the simulated fsync completes.
    fn sync_begin(&mut self, id: NodeId, life: u64) {
        let now = self.now;
        let node = self.nodes.get_mut(&id).expect("known node");
        if node.life != life {
            return;
        }
        if node.sync_at.is_some_and(|at| at <= now) {
            node.sync_at = None;
        }
        // An earlier sync, scheduled for a stricter write, may have covered this one's writes already.
        if node.in_flight.is_some() || node.synced == node.written {
            return;
        }
        let Some(p) = node.proc.as_mut() else { return };
        let covers = node.written;
        match p.begin_sync() {
            Err(e) => self.fail(format!("{id}: sync failed: {e}")),
            Ok(None) => self.end_sync(id, covers),
            Ok(Some(job)) => {
                node.in_flight = Some((job, covers));
                let at =
                    now + self.rng.range(self.disk.fsync_min.as_nanos() as u64, self.disk.fsync_max.as_nanos() as u64);
                self.schedule(at, Event::SyncDone { node: id, life });
            }
        }
    }

    fn sync_done(&mut self, id: NodeId, life: u64) {
        let node = self.nodes.get_mut(&id).expect("known node");
        if node.life != life {
            return;
        }
        let Some((job, covers)) = node.in_flight.take() else { return };
        if let Err(e) = job() {
            return self.fail(format!("{id}: sync failed: {e}"));
        }
        self.end_sync(id, covers);
    }

    /// A sync that covers the first `covers` dirty steps has succeeded: the core finishes it, the effects
    /// waiting for those steps go, and the next sync is scheduled if more is unsynced.
    fn end_sync(&mut self, id: NodeId, covers: u64) {
        let node = self.nodes.get_mut(&id).expect("known node");
        let Some(p) = node.proc.as_mut() else { return };
        p.end_sync();
        self.stats.syncs += 1;
        node.synced = covers;
        let mut released = Vec::new();
        while node.held.front().is_some_and(|&(before, _)| before <= covers) {
            released.extend(node.held.pop_front().map(|(_, e)| e));
        }
        released.into_iter().for_each(|e| self.execute(id, e));
        self.schedule_sync(id);
    }

    fn step(&mut self, id: NodeId, input: Input<P>) {
        let node = self.nodes.get_mut(&id).expect("known node");
        // As the driver asks for an answer at once (`at_once`): only while a reply would leave at once too (`apply`).
        let answers_at_once = node.synced >= node.strict && node.held.is_empty();
        let Some(p) = node.proc.as_mut() else { return };
        let now: Time = node.clock.local(self.now);
        p.set_wall_clock(node.clock.wall_ms(self.now));
        let mut fx = Effects::new();
        if self.tracing {
            trace_input(self.now, id, &input);
        }
        if let Some(work) = self.charge.take() {
            let label = match &input {
                Input::Message(_, msg) => (self.hooks.label)(msg),
                Input::Request(..) => "client",
                Input::Start | Input::Timer(_) => "timer",
            };
            *self.work.entry((id, label)).or_default() += work;
        }
        match input {
            Input::Start => p.start(now, &mut fx),
            Input::Message(from, msg) => p.on_message(now, from, msg, &mut fx),
            Input::Timer(t) => p.on_timer(now, t, &mut fx),
            Input::Request(rid, req) if answers_at_once => match at_once(p, now, req) {
                // Marked to follow the writes before it, so `apply` hands them to the OS first, as the driver does.
                Ok(reply) => fx.reply_after_sync(rid, reply),
                Err(req) => p.on_request(now, rid, req, &mut fx),
            },
            Input::Request(rid, req) => p.on_request(now, rid, req, &mut fx),
        }
        self.apply(id, fx);
        self.check_invariants();
    }

    /// Carries out a step's effects as the node driver would (`crates/node/src/driver.rs`), with every node's
    /// default mode `group`: `after_sync` effects wait for the sync that covers this step if it or an unsynced
    /// step before it wrote in `sync` or `group` mode, and never overtake earlier ones; otherwise they follow a
    /// flush. Async writes are synced [`ASYNC_INTERVAL`] after they are made.
    fn apply(&mut self, id: NodeId, mut fx: Effects<P::Msg, P::Timer>) {
        let (items, dirt) = fx.drain();
        let node = self.nodes.get_mut(&id).expect("known node");
        let owed = dirt.owed(DurabilityMode::Group);
        if owed.is_some() {
            node.written += 1;
        }
        if owed > Some(DurabilityMode::Async) {
            node.strict = node.written;
        }
        let mut now_items = Vec::new();
        for e in items {
            if e.after_sync() && (node.synced < node.strict || !node.held.is_empty()) {
                node.held.push_back((node.written, e));
            } else {
                now_items.push(e);
            }
        }
        // Released before a sync: what they speak for must reach the OS first, to survive a process crash.
        if node.synced < node.written && now_items.iter().any(|e| e.after_sync()) {
            if let Err(e) = node.proc.as_mut().expect("a stepping node runs").flush() {
                return self.fail(format!("{id}: flush failed: {e}"));
            }
        }
        self.schedule_sync(id);
        now_items.into_iter().for_each(|e| self.execute(id, e));
    }

    /// Schedules the beginning of a sync of `id`'s unsynced writes unless one comes soon enough (or is under
    /// way, and begins the next when it completes): at once for `sync` and `group` writes, within
    /// [`ASYNC_INTERVAL`] for async ones.
    fn schedule_sync(&mut self, id: NodeId) {
        let node = &self.nodes[&id];
        if node.synced == node.written || node.in_flight.is_some() {
            return;
        }
        let strict = node.synced < node.strict;
        let at = self.now + if strict { 0 } else { ASYNC_INTERVAL.as_nanos() as u64 };
        if node.sync_at.is_some_and(|scheduled| scheduled <= at) {
            return;
        }
        let node = self.nodes.get_mut(&id).expect("known node");
        node.sync_at = Some(at);
        let life = node.life;
        self.schedule(at, Event::SyncBegin { node: id, life });
    }

    fn execute(&mut self, id: NodeId, effect: Effect<P::Msg, P::Timer>) {
        match effect {
            Effect::Send { to, msg, .. } => self.send(id, to, &msg),
            Effect::Reply { id: rid, reply, .. } => {
                let Some((client, op)) = self.nodes.get_mut(&id).and_then(|n| n.requests.remove(&rid)) else { return };
                let at = self.now + self.client_latency();
                self.schedule(at, Event::Response { client, op, reply });
            }
            Effect::SetTimer { timer, after } => {
                let node = self.nodes.get_mut(&id).expect("known node");
                self.seq += 1;
                let gen = self.seq;
                node.timers.insert(timer.clone(), gen);
                let (life, at) = (node.life, self.now + node.clock.virtual_span(after));
                self.schedule(at, Event::Timer { node: id, life, timer, gen });
            }
            Effect::CancelTimer { timer } => {
                self.nodes.get_mut(&id).expect("known node").timers.remove(&timer);
            }
            // The simulated network reaches every node by id.
            Effect::Address { .. } => {}
        }
    }

    fn send(&mut self, from: NodeId, to: NodeId, msg: &P::Msg) {
        let mut frame = Vec::new();
        if let Err(e) = wire::encode(msg, &mut frame) {
            return self.fail(format!("{from} cannot encode a message: {e}"));
        }
        if let Some(cost) = self.cost {
            let node = self.nodes.get_mut(&from).expect("known node");
            node.busy_until = node.busy_until.max(self.now) + cost.of(frame.len());
            *self.work.entry((from, (self.hooks.label)(msg))).or_default() += cost.of(frame.len());
        }
        self.stats.messages += 1;
        let kind = self.stats.traffic.entry((self.hooks.label)(msg)).or_default();
        kind.messages += 1;
        kind.bytes += frame.len() as u64;
        match self.net.send(self.now, from, to, frame.len()) {
            Some((at, epoch)) => self.schedule(at, Event::Deliver { from, to, epoch, frame }),
            None => self.stats.dropped += 1,
        }
    }

    fn check_invariants(&mut self) {
        let now = self.now;
        let live: BTreeMap<NodeId, (&P, Time)> =
            self.nodes.iter().filter_map(|(&id, n)| n.proc.as_ref().map(|p| (id, (p, n.clock.local(now))))).collect();
        if let Err(e) = (self.hooks.invariants)(&live) {
            self.fail(format!("invariant broken at {} ms: {e}", self.now / 1_000_000));
        }
    }

    fn fail(&mut self, why: String) {
        self.failure.get_or_insert(why);
    }
}
