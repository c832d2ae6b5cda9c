//! Golden tests of chain replication and its membership changes, named after the seed sections they
//! exercise. A small synchronous harness plays the manager by hand (it applies map commands and grants
//! leases), delivers messages in FIFO order and syncs after every step; the simulator covers timing and
//! faults.

use super::*;
use crate::host::RequestConfig;
use crate::map::{ChainChange, MapCommand, NodeAddrs};
use crate::stores::StoreSpec;
use bytes::Bytes;
use meridian_core::{Condition, Effect, ErrorKind, Location, ReplicaKind, RequestId, Stored, Write};
use meridian_store::{LogOptions, SimVfs};
use std::ops::{Deref, DerefMut};
use std::time::Duration;

mod at_once;
mod cache;
mod expiry;
mod multi_key;
mod scan;

const LEASE: Duration = Duration::from_secs(3600);

struct Harness {
    nodes: BTreeMap<NodeId, TestNode>,
    disks: BTreeMap<NodeId, SimVfs>,
    map: ClusterMap,
    wire: VecDeque<(NodeId, NodeId, ChainMsg)>,
    replies: BTreeMap<RequestId, Reply>,
    /// Messages to these destinations are dropped (a broken connection).
    drop_to: Vec<NodeId>,
    /// These nodes take no fsync after their steps, and what waits for one is not carried out.
    unsynced: Vec<NodeId>,
    next_id: u64,
}

fn addrs(id: u32) -> NodeAddrs {
    NodeAddrs { peer_addr: format!("h:{id}"), resp_addr: String::new(), http_addr: None }
}

/// A node's chains with the host the node lends them, stepped as `ClusterNode` steps them.
struct TestNode {
    chain: ChainNode,
    host: Host,
}

impl Deref for TestNode {
    type Target = ChainNode;
    fn deref(&self) -> &ChainNode {
        &self.chain
    }
}

impl DerefMut for TestNode {
    fn deref_mut(&mut self) -> &mut ChainNode {
        &mut self.chain
    }
}

impl TestNode {
    /// Node `id` on `disk`, in its `run`-th start; `previous` says what it knew of the run before.
    fn open(id: NodeId, disk: &SimVfs, run: u64, previous: PreviousRun) -> TestNode {
        let spec = StoreSpec { vfs: Arc::new(disk.clone()), dir: "/d".into(), log: LogOptions::default() };
        let mut stores = Stores::open(spec, [(KeyspaceId::DEFAULT, previous.map.is_some_and(cache))], []).unwrap();
        // The harness's clock stands still, so pre-copies must not wait for their pace.
        let cfg = ChainConfig { migration_bandwidth: 0, ..ChainConfig::default() };
        let incarnation = u64::from(id.0) * 1000 + run;
        let chain = ChainNode::open(id, cfg, &mut stores, incarnation, previous).unwrap();
        TestNode { chain, host: Host::new(id, incarnation, RequestConfig::default(), stores) }
    }

    /// What `ClusterNode::on_request` does with a client request.
    fn on_request(&mut self, now: Time, id: RequestId, req: Request, out: &mut Fx) {
        match self.host.accept(id, req, self.chain.map.is_some()) {
            Ok((origin, req)) => {
                self.chain.on_request(&mut self.host, now, origin, req, out);
                self.host.requests.settle();
            }
            Err(refusal) => out.reply(id, refusal),
        }
    }

    /// What the node's housekeeping tick does.
    fn on_tick(&mut self, now: Time, out: &mut Fx) {
        for (origin, req) in self.host.tick(|id, reply| out.reply(id, reply)) {
            self.chain.on_request(&mut self.host, now, origin, req, out);
        }
        self.chain.on_tick(&mut self.host, now, out);
    }

    fn on_message(&mut self, now: Time, from: NodeId, msg: ChainMsg, out: &mut Fx) {
        self.chain.on_message(&mut self.host, now, from, msg, out)
    }

    fn adopt(&mut self, map: Arc<ClusterMap>, now: Time, out: &mut Fx) {
        self.chain.adopt(&mut self.host, &map, now, out)
    }

    fn grant(&mut self, chains: &[(ChainId, u64)], until: Time, now: Time, out: &mut Fx) {
        self.chain.on_leases(&mut self.host, chains, until, now, out)
    }

    fn read_at_once(&mut self, now: Time, req: &Request) -> Option<Reply> {
        self.chain.step(&mut self.host).read_at_once(now, req)
    }

    /// The chain's answer at once, or the request it left with the caller; it takes a write only when answering.
    fn write_at_once(&mut self, now: Time, req: Request) -> Result<Reply, Request> {
        let mut req = Some(req);
        let answer = self.chain.step(&mut self.host).write_at_once(now, &mut req);
        meridian_core::write_taken(answer, req)
    }

    fn set_wall_clock(&mut self, unix_ms: u64) {
        self.host.wall_ms = unix_ms;
    }

    fn reports(&self) -> crate::reports::ReplicaReports {
        let mut reports = crate::reports::ReplicaReports { incarnation: self.incarnation, ..Default::default() };
        self.chain.reports(self.host.syncs, &mut reports);
        reports
    }

    fn ledger(&self, chain: ChainId) -> Option<&ledger::Ledger> {
        self.chain.ledger(&self.host.stores, chain)
    }

    fn cache_bytes(&self, chain: ChainId) -> Option<u64> {
        self.chain.cache_bytes(&self.host.stores, chain)
    }
}

/// Whether the map makes `default` a cache keyspace.
fn cache(map: &ClusterMap) -> bool {
    map.keyspaces.get(&KeyspaceId::DEFAULT).is_some_and(|k| k.config.maxmemory.is_some())
}

fn put(key: &str, value: &str) -> Request {
    put_if(key, value, Condition::Always)
}

fn put_if(key: &str, value: &str, cond: Condition) -> Request {
    let put = Write::put(KeyspaceId::DEFAULT, Bytes::from(key.to_string()), Bytes::from(value.to_string()));
    Request::Write(Write { cond, ..put })
}

fn del(key: &str) -> Request {
    Request::Write(Write::delete(KeyspaceId::DEFAULT, Bytes::from(key.to_string())))
}

const OK_NEW: Reply = Reply::Written { applied: true, existed: false };

fn get(key: &str) -> Request {
    Request::Get { keyspace: KeyspaceId::DEFAULT, key: Bytes::from(key.to_string()), read: meridian_core::Read::Value }
}

fn value(v: &str) -> Reply {
    Reply::Value(Some(Bytes::from(v.to_string())))
}

impl Harness {
    /// `n` nodes, one chain (partition) of replication `r`, every member granted its lease.
    fn new(n: u32, r: usize) -> Harness {
        Harness::with_kinds(n, &vec![ReplicaKind::Log; r])
    }

    /// `n` nodes, one chain of the given replica kinds (head first), every member granted its lease.
    fn with_kinds(n: u32, kinds: &[ReplicaKind]) -> Harness {
        Harness::with_config(n, meridian_core::KeyspaceConfig::with_replicas(kinds.to_vec()))
    }

    /// `n` nodes, one chain of the `default` keyspace configured so.
    fn with_config(n: u32, default: meridian_core::KeyspaceConfig) -> Harness {
        let mut h = Harness {
            nodes: BTreeMap::new(),
            disks: BTreeMap::new(),
            map: ClusterMap::default(),
            wire: VecDeque::new(),
            replies: BTreeMap::new(),
            drop_to: Vec::new(),
            unsynced: Vec::new(),
            next_id: 0,
        };
        let nodes = (1..=n).map(|i| (NodeId(i), addrs(i), Location::default())).collect();
        let voters = vec![NodeId(1)];
        h.apply(MapCommand::Bootstrap { nodes, default, partitions: 1, vnodes: 4, voters });
        for i in 1..=n {
            h.boot(NodeId(i));
        }
        h.publish();
        h
    }

    fn boot(&mut self, id: NodeId) {
        self.boot_after(id, false)
    }

    fn boot_after(&mut self, id: NodeId, clean_stop: bool) {
        let disk = self.disks.entry(id).or_default().clone();
        // The lost chains stand for the node's lost-replica file, which it keeps across restarts.
        let (run, map, lost) = match self.nodes.get(&id) {
            Some(old) => (old.incarnation % 1000 + 1, old.map.clone(), old.lost_chains()),
            None => (0, None, BTreeSet::new()),
        };
        let previous = PreviousRun { map: map.as_deref(), clean_stop, lost: &lost };
        self.nodes.insert(id, TestNode::open(id, &disk, run, previous));
    }

    fn chain(&self) -> &crate::map::ChainView {
        &self.map.chains[&ChainId(0)]
    }

    fn apply(&mut self, cmd: MapCommand) {
        self.map.apply(&cmd).unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    }

    /// Every node adopts the map and the tail gets its lease.
    fn publish(&mut self) {
        let map = Arc::new(self.map.clone());
        for id in self.nodes.keys().copied().collect::<Vec<_>>() {
            let m = map.clone();
            self.feed(id, |n, fx| n.adopt(m, Time::ZERO, fx));
        }
        self.grant_tail();
        self.settle();
    }

    /// Grants the chain's lease to every member the manager's leader would (tail, query node, and the head of an
    /// `au` or `ausi` keyspace).
    fn grant_tail(&mut self) {
        let view = self.chain().view;
        let c = self.chain();
        let readers = c.members.iter().copied().filter(|&m| self.map.leased_at(c, m));
        let holders: Vec<NodeId> = readers.filter(|n| self.nodes.contains_key(n)).collect();
        for holder in holders {
            self.feed(holder, |n, fx| n.grant(&[(ChainId(0), view)], Time::ZERO.plus(LEASE), Time::ZERO, fx));
        }
    }

    fn feed(&mut self, id: NodeId, f: impl FnOnce(&mut TestNode, &mut Fx)) {
        let node = self.nodes.get_mut(&id).unwrap();
        let mut fx = Fx::new();
        f(node, &mut fx);
        let synced = !self.unsynced.contains(&id);
        if synced {
            node.host.sync().unwrap();
        }
        node.check_invariants().unwrap();
        for e in fx.drain().0.filter(|e| synced || !e.after_sync()) {
            match e {
                Effect::Send { to, msg, .. } if !self.drop_to.contains(&to) => self.wire.push_back((id, to, msg)),
                Effect::Reply { id, reply, .. } => {
                    self.replies.insert(id, reply);
                }
                _ => {}
            }
        }
    }

    fn settle(&mut self) {
        while let Some((from, to, msg)) = self.wire.pop_front() {
            if self.nodes.contains_key(&to) {
                self.feed(to, |n, fx| n.on_message(Time::ZERO, from, msg, fx));
            }
        }
    }

    /// Sets every node's wall clock.
    fn set_wall(&mut self, unix_ms: u64) {
        self.nodes.values_mut().for_each(|n| n.set_wall_clock(unix_ms));
    }

    fn tick_all(&mut self) {
        for id in self.nodes.keys().copied().collect::<Vec<_>>() {
            self.feed(id, |n, fx| n.on_tick(Time::ZERO, fx));
        }
        self.settle();
    }

    fn request(&mut self, via: u32, req: Request) -> Option<Reply> {
        self.next_id += 1;
        let id = RequestId(self.next_id);
        self.feed(NodeId(via), |n, fx| n.on_request(Time::ZERO, id, req, fx));
        self.settle();
        self.replies.remove(&id)
    }

    /// `id`'s answer to `req` within the step, if it gives one ([`ChainNode::read_at_once`]).
    fn at_once(&mut self, id: NodeId, req: &Request) -> Option<Reply> {
        self.nodes.get_mut(&id).unwrap().read_at_once(Time::ZERO, req)
    }

    fn written(&mut self, via: u32, key: &str, v: &str) {
        assert_eq!(self.request(via, put(key, v)), Some(OK_NEW));
    }

    fn lu(&self, id: u32) -> u64 {
        self.nodes[&NodeId(id)].replicas.get(&ChainId(0)).map_or(0, |r| r.lu)
    }

    /// Runs an Add of `node` to completion the way the manager would: start, pre-copy, insert, flush, done.
    fn add(&mut self, node: u32, position: usize) {
        self.add_kind(node, position, ReplicaKind::Log)
    }

    fn add_kind(&mut self, node: u32, position: usize, kind: ReplicaKind) {
        let (view, step) = (self.chain().view, self.map.next_step);
        let change = ChainChange::Add { node: NodeId(node), position, step, inserted: false, kind };
        self.apply(MapCommand::StepStarted { chain: ChainId(0), expected_view: view, change });
        self.publish();
        self.tick_all();
        assert_eq!(self.reports(node), vec![StepReport::PreCopied { chain: ChainId(0), step }]);
        self.apply(MapCommand::AddInserted { chain: ChainId(0), step });
        self.publish();
        self.tick_all();
        assert_eq!(self.reports(node), vec![StepReport::Flushed { chain: ChainId(0), step }]);
        self.apply(MapCommand::StepDone { chain: ChainId(0), step });
        self.publish();
    }

    fn remove(&mut self, node: u32) {
        let (view, step) = (self.chain().view, self.map.next_step);
        let change = ChainChange::Remove { node: NodeId(node), step };
        self.apply(MapCommand::StepStarted { chain: ChainId(0), expected_view: view, change });
        self.apply(MapCommand::StepDone { chain: ChainId(0), step });
        self.publish();
    }

    /// Power loss on `id` and a restart from what its disk kept; it adopts the current map again.
    fn restart(&mut self, id: NodeId) {
        self.restart_after(id, false)
    }

    /// `restart`, after a clean stop (every write durable, as the harness keeps them, and the node told) if
    /// `clean_stop`.
    fn restart_after(&mut self, id: NodeId, clean_stop: bool) {
        self.disks[&id].crash(7);
        self.boot_after(id, clean_stop);
        let map = Arc::new(self.map.clone());
        self.feed(id, |n, fx| n.adopt(map, Time::ZERO, fx));
        self.grant_tail();
        self.settle();
    }

    fn members(&self) -> (NodeId, NodeId, NodeId) {
        let m = &self.chain().members;
        (m[0], m[1], m[2])
    }

    fn reports(&self, node: u32) -> Vec<StepReport> {
        self.nodes[&NodeId(node)].reports().steps
    }

    /// What `node` reports lost, and applies `ReplicaLost` for it as the manager's leader would.
    fn lost(&mut self, node: NodeId) -> Vec<(ChainId, u64)> {
        let reports = self.nodes[&node].reports();
        for &(chain, _) in &reports.lost {
            self.apply(MapCommand::ReplicaLost { chain, node, incarnation: reports.incarnation });
        }
        reports.lost
    }
}

/// Seed 003 §2.3: writes enter at the head and are answered by the tail; reads are served by the tail.
#[test]
fn writes_flow_head_to_tail_and_any_node_reads_them() {
    let mut h = Harness::new(3, 3);
    h.written(1, "k", "v1");
    for via in 1..=3 {
        assert_eq!(h.request(via, get("k")), Some(value("v1")));
    }
    assert_eq!((h.lu(1), h.lu(2), h.lu(3)), (1, 1, 1));
}

/// The query node answers a read within the step, as `on_request` would; any other node, a write, a request
/// `on_request` refuses, a TTL (reckoned on the wall clock) and a read waiting for a lease are left to
/// `on_request`.
#[test]
fn only_reads_the_query_node_may_serve_now_are_answered_at_once() {
    let mut h = Harness::new(3, 3);
    h.written(1, "k", "v1");
    let (head, mid, tail) = h.members();
    let reads = h.nodes[&tail].stats().reads;
    assert_eq!(h.at_once(tail, &get("k")), Some(value("v1")));
    assert_eq!(h.at_once(tail, &get("absent")), Some(Reply::Value(None)));
    assert_eq!(h.nodes[&tail].stats().reads, reads + 2, "counted as reads");
    // What the simulator's invariant holds the tail to: it answered as the tail at this view, now and not later.
    let view = h.chain().view;
    assert_eq!(h.nodes[&tail].answered(Time::ZERO).collect::<Vec<_>>(), vec![(ChainId(0), view, true)]);
    assert_eq!(h.nodes[&tail].answered(Time::from_nanos(1)).count(), 0);
    for other in [head, mid] {
        assert_eq!(h.at_once(other, &get("k")), None, "{other} is not the query node");
        assert_eq!(h.nodes[&other].answered(Time::ZERO).count(), 0, "{other} answered nothing");
    }
    assert_eq!(h.at_once(tail, &put("k", "v2")), None, "a write");
    let read = |key: &'static [u8], read| Request::Get { keyspace: KeyspaceId::DEFAULT, key: Bytes::from(key), read };
    assert_eq!(h.at_once(tail, &read(b"", meridian_core::Read::Value)), None, "an empty key is refused");
    assert_eq!(h.at_once(tail, &read(b"k", meridian_core::Read::Expiry)), None, "a TTL");
    h.nodes.get_mut(&tail).unwrap().leases.retain(|_, _| false);
    assert_eq!(h.at_once(tail, &get("k")), None, "no lease");
}

/// A tail answers only while it holds a lease; what arrives before waits for one.
#[test]
fn a_tail_without_a_lease_holds_its_answers_until_it_gets_one() {
    let mut h = Harness::new(3, 3);
    let view = h.chain().view;
    let tail = h.chain().tail().unwrap();
    h.feed(tail, |n, fx| n.grant(&[(ChainId(0), view)], Time::ZERO, Time::ZERO, fx));
    h.nodes.get_mut(&tail).unwrap().leases.retain(|_, _| false);
    assert_eq!(h.request(1, put("k", "v")), None, "held for the lease");
    assert_eq!(h.request(2, get("k")), None, "held for the lease");
    h.grant_tail();
    h.settle();
    assert_eq!(h.replies.len(), 2);
    assert!(h.replies.values().any(|r| *r == Reply::Written { applied: true, existed: false }));
    assert!(h.replies.values().any(|r| *r == value("v")));
}

/// §2.5: a node joins by pre-copying from the tail, being inserted, flushing from its successor; the chain
/// keeps serving meanwhile and the joiner ends with the same data as everyone.
#[test]
fn a_joiner_copies_then_flushes_then_takes_part() {
    let mut h = Harness::new(4, 3);
    let outsider = (1..=4).find(|&i| !h.chain().contains(NodeId(i))).unwrap();
    for i in 0..50 {
        h.written(1, &format!("k{i}"), &format!("v{i}"));
    }
    h.add(outsider, 1);
    assert_eq!(h.chain().members.len(), 4);
    assert_eq!(h.chain().position(NodeId(outsider)), Some(1));
    h.written(2, "after", "join");
    let lus: Vec<u64> = h.chain().members.iter().map(|m| h.lu(m.0)).collect();
    assert!(lus.iter().all(|&lu| lu == 51), "every member holds the whole history: {lus:?}");
    for i in 0..50 {
        let key = format!("k{i}");
        let e = h.nodes[&NodeId(outsider)]
            .host
            .stores
            .get((KeyspaceId::DEFAULT, ReplicaKind::Log))
            .unwrap()
            .get(key.as_bytes())
            .unwrap()
            .unwrap();
        assert_eq!(e.value, Some(Stored::wrap(format!("v{i}").as_bytes(), None)));
    }
}

/// §2.5 phase 2: writes that arrive while the joiner flushes wait in its temporary store and are played
/// forward in order; the joiner never forwards a gap.
#[test]
fn writes_during_a_flush_are_played_forward() {
    let mut h = Harness::new(4, 3);
    let outsider = (1..=4).find(|&i| !h.chain().contains(NodeId(i))).unwrap();
    h.written(1, "a", "1");
    let (view, step) = (h.chain().view, h.map.next_step);
    let change =
        ChainChange::Add { node: NodeId(outsider), position: 1, step, inserted: false, kind: ReplicaKind::Log };
    h.apply(MapCommand::StepStarted { chain: ChainId(0), expected_view: view, change });
    h.publish();
    h.tick_all();
    h.apply(MapCommand::AddInserted { chain: ChainId(0), step });
    // The head learns of the insertion and sends to the joiner before the joiner has flushed.
    let map = Arc::new(h.map.clone());
    let head = h.chain().members[0];
    h.feed(head, |n, fx| n.adopt(map.clone(), Time::ZERO, fx));
    h.next_id += 1;
    let id = RequestId(h.next_id);
    h.feed(head, |n, fx| n.on_request(Time::ZERO, id, put("b", "2"), fx));
    h.publish();
    h.tick_all();
    assert_eq!(h.replies.remove(&id), Some(OK_NEW));
    assert_eq!(h.lu(outsider), 2);
    assert_eq!(h.request(3, get("b")), Some(value("2")));
}

/// Listing 1, TRUNCATE and CR_TAIL: when the tail goes, its predecessor becomes tail, holds everything and
/// answers (with a lease); the old tail drops the chain's data.
#[test]
fn removing_the_tail_makes_its_predecessor_answer() {
    let mut h = Harness::new(3, 3);
    h.written(1, "k", "v");
    let tail = h.chain().tail().unwrap();
    h.remove(tail.0);
    let new_tail = h.chain().tail().unwrap();
    assert_ne!(new_tail, tail);
    assert_eq!(h.request(1, get("k")), Some(value("v")));
    h.written(1, "k2", "v2");
    assert!(h.nodes[&tail].replicas.is_empty(), "the old tail left the chain");
    assert_eq!(
        h.nodes[&tail].host.stores.get((KeyspaceId::DEFAULT, ReplicaKind::Log)).unwrap().get(b"k").unwrap(),
        None,
        "and dropped its data"
    );
    h.boot(tail);
    assert_eq!(
        h.nodes[&tail].host.stores.get((KeyspaceId::DEFAULT, ReplicaKind::Log)).unwrap().get(b"k").unwrap(),
        None,
        "for good"
    );
}

/// Listing 1, CR_MID: the removed member's predecessor resends what the new successor lacks.
#[test]
fn removing_a_middle_member_reconnects_its_neighbours() {
    let mut h = Harness::new(3, 3);
    let mid = h.chain().members[1];
    h.written(1, "k", "v");
    h.remove(mid.0);
    h.written(1, "k2", "v2");
    let (head, tail) = (h.chain().members[0], h.chain().tail().unwrap());
    assert_eq!((h.lu(head.0), h.lu(tail.0)), (2, 2));
    assert_eq!(h.request(head.0, get("k2")), Some(value("v2")));
}

/// Messages stamped with another view are dropped: a removed head's writes never reach the new chain.
#[test]
fn a_removed_head_cannot_feed_the_chain() {
    let mut h = Harness::new(3, 3);
    let old_head = h.chain().members[0];
    h.remove(old_head.0);
    let stale = Update {
        chain: ChainId(0),
        seq: 1,
        key: Bytes::from_static(b"x"),
        change: Change::Put(Bytes::from_static(b"stale")),
        outcome: Outcome::default(),
        origin: None,
        also: Vec::new(),
    };
    let next = h.chain().members[0];
    h.wire.push_back((old_head, next, ChainMsg::Update { view: 1, update: stale }));
    h.settle();
    assert_eq!(h.lu(next.0), 0);
    assert_eq!(h.request(next.0, get("x")), Some(Reply::Value(None)));
}

/// A request sent by a front-end whose map is stale is bounced and sent again with the newer map.
#[test]
fn a_bounced_request_is_retried_with_a_fresher_map() {
    let mut h = Harness::new(3, 3);
    let head = h.chain().members[0];
    let via = h.chain().members[2];
    h.remove(head.0);
    // The front-end still has the old map: it sends the write to the removed head.
    let stale = Arc::new({
        let mut m = h.map.clone();
        m.epoch = 0;
        m
    });
    h.nodes.get_mut(&via).unwrap().map = Some(stale);
    let old_map = h.nodes[&via].map.clone().unwrap();
    assert!(old_map.epoch < h.map.epoch);
    h.next_id += 1;
    let id = RequestId(h.next_id);
    h.feed(via, |n, fx| n.on_request(Time::ZERO, id, put("k", "v"), fx));
    h.settle();
    h.publish();
    h.tick_all();
    assert_eq!(h.replies.remove(&id), Some(OK_NEW));
}

/// A joiner that restarts in the middle of its pre-copy resumes from the watermark it logged.
#[test]
fn a_joiner_resumes_its_pre_copy_after_a_restart() {
    let mut h = Harness::new(4, 3);
    let outsider = (1..=4).find(|&i| !h.chain().contains(NodeId(i))).unwrap();
    for i in 0..20 {
        h.written(1, &format!("k{i}"), "v");
    }
    let (view, step) = (h.chain().view, h.map.next_step);
    let change =
        ChainChange::Add { node: NodeId(outsider), position: 1, step, inserted: false, kind: ReplicaKind::Log };
    h.apply(MapCommand::StepStarted { chain: ChainId(0), expected_view: view, change });
    h.publish();
    h.tick_all();
    assert_eq!(h.lu(outsider), 20);
    h.disks[&NodeId(outsider)].crash(7);
    h.boot(NodeId(outsider));
    assert_eq!(h.lu(outsider), 20, "the copy's watermark was durable");
    h.publish();
    h.tick_all();
    assert_eq!(h.reports(outsider), vec![StepReport::PreCopied { chain: ChainId(0), step }]);
}

#[test]
fn deletes_are_tombstones_and_report_existence() {
    let mut h = Harness::new(3, 3);
    h.request(2, put("k", "v"));
    assert_eq!(h.request(3, del("k")), Some(Reply::Written { applied: true, existed: true }));
    assert_eq!(h.request(1, get("k")), Some(Reply::Value(None)));
    assert_eq!(h.request(1, del("k")), Some(OK_NEW));
}

#[test]
fn nx_and_xx_are_decided_by_the_head_and_answered_by_the_tail() {
    let mut h = Harness::new(3, 3);
    assert_eq!(
        h.request(1, put_if("k", "x", Condition::IfPresent)),
        Some(Reply::Written { applied: false, existed: false })
    );
    assert_eq!(h.request(2, put_if("k", "1", Condition::IfAbsent)), Some(OK_NEW));
    assert_eq!(
        h.request(3, put_if("k", "2", Condition::IfAbsent)),
        Some(Reply::Written { applied: false, existed: true })
    );
    assert_eq!(
        h.request(1, put_if("k", "3", Condition::IfPresent)),
        Some(Reply::Written { applied: true, existed: true })
    );
    assert_eq!(h.request(2, get("k")), Some(value("3")));
}

#[test]
fn oversized_requests_are_refused_before_anything_is_logged() {
    let mut h = Harness::new(3, 3);
    let big = "x".repeat(meridian_core::Limits::default().max_value_bytes + 1);
    let reply = h.request(1, put("k", &big));
    assert!(matches!(reply, Some(Reply::Error(ErrorKind::Invalid, _))), "{reply:?}");
    assert!((1..=3).all(|i| h.lu(i) == 0));
}

/// Listing 1's resend path: a successor that missed updates (broken connection) asks for them again when
/// the predecessor's stalled acknowledgements make it probe.
#[test]
fn lost_updates_are_resent_after_a_probe() {
    let mut h = Harness::new(3, 3);
    let (head, mid, tail) = h.members();
    h.drop_to = vec![mid];
    assert_eq!(h.request(head.0, put("a", "1")), None, "stuck: the update to the middle was lost");
    h.drop_to.clear();
    h.tick_all();
    h.tick_all();
    assert_eq!(h.request(tail.0, get("a")), Some(value("1")));
}

/// §2.6 read in crash-restart terms: a tail that crashes keeps what it synced, and catches up on the rest
/// from its predecessor when it comes back.
#[test]
fn restarted_tail_catches_up_and_never_serves_stale() {
    let mut h = Harness::new(3, 3);
    let (head, _, tail) = h.members();
    h.request(1, put("a", "1"));
    h.nodes.remove(&tail);
    assert_eq!(h.request(head.0, put("a", "2")), None, "no answer without the tail");
    h.restart(tail);
    assert_eq!(h.request(tail.0, get("a")), Some(value("2")));
}

/// A head taken out of its chain while it alone held an update, and added back in the first map it hears of
/// either change, must not trust that update: the chain went on without it and gave its sequence number to
/// another write. A pre-copy based on the head's LU would skip that write; it copies afresh instead.
#[test]
fn a_member_added_back_unheard_copies_afresh_past_what_its_chain_never_acknowledged() {
    let mut h = Harness::new(3, 3);
    h.written(1, "a", "1");
    let (head, mid, _) = h.members();
    h.drop_to = vec![mid];
    assert_eq!(h.request(head.0, put("x", "1")), None, "only the head holds it");
    h.drop_to.clear();
    let away = h.nodes.remove(&head).unwrap();
    h.remove(head.0);
    h.written(mid.0, "b", "2");
    h.nodes.insert(head, away);
    assert_eq!((h.lu(head.0), h.lu(mid.0)), (2, 2), "one sequence number, two writes");
    h.add(head.0, 0);
    let stored = |h: &Harness, key: &[u8]| {
        let store = h.nodes[&head].host.stores.get((KeyspaceId::DEFAULT, ReplicaKind::Log)).unwrap();
        store.get(key).unwrap().and_then(|e| e.value)
    };
    assert_eq!(stored(&h, b"b"), Some(Stored::wrap(b"2", None)), "the acknowledged write was copied");
}

#[test]
fn recovery_rebuilds_positions_and_unacked_history() {
    let mut h = Harness::new(3, 3);
    for i in 0..5 {
        h.request(1, put("a", &i.to_string()));
    }
    let before = h.lu(2);
    h.restart(NodeId(2));
    assert_eq!(h.lu(2), before);
    h.nodes[&NodeId(2)].check_invariants().unwrap();
}

#[test]
fn a_full_backlog_answers_busy() {
    let mut h = Harness::new(3, 3);
    let (head, mid, _) = h.members();
    h.nodes.get_mut(&head).unwrap().cfg.unacked_max = 1;
    h.drop_to = vec![mid];
    assert_eq!(h.request(head.0, put("a", "1")), None);
    let reply = h.request(head.0, put("a", "2"));
    assert!(matches!(reply, Some(Reply::Error(ErrorKind::Busy, _))), "{reply:?}");
}

#[test]
fn front_end_times_out_with_an_unknown_outcome() {
    let mut h = Harness::new(3, 3);
    let (head, fe, _) = h.members();
    h.drop_to = vec![head];
    assert_eq!(h.request(fe.0, put("a", "1")), None);
    for _ in 0..=RequestConfig::default().timeout_ticks() {
        h.feed(fe, |n, fx| n.on_tick(Time::ZERO, fx));
    }
    let timeouts = h.replies.values().filter(|r| matches!(r, Reply::Error(ErrorKind::Timeout, _))).count();
    assert_eq!(timeouts, 1);
}

/// §2.4: a put answer lost between the tail and the front-end is sent again until the front-end confirms it,
/// and the tail acknowledges the update upstream only then, so its predecessor keeps it meanwhile.
#[test]
fn a_lost_put_answer_is_resent_and_confirmed_before_the_ack() {
    let mut h = Harness::new(3, 3);
    let (head, mid, tail) = h.members();
    h.drop_to = vec![head];
    assert_eq!(h.request(head.0, put("a", "1")), None, "the tail's answer to the front-end was lost");
    let pred = &h.nodes[&mid].replicas[&ChainId(0)];
    assert_eq!((pred.lu, pred.la), (1, 0), "unconfirmed, so not acknowledged upstream");
    assert_eq!(h.nodes[&tail].replicas[&ChainId(0)].unconfirmed.len(), 1);
    h.drop_to.clear();
    h.tick_all();
    assert_eq!(h.replies.values().next(), Some(&OK_NEW), "resent and delivered");
    assert!(h.nodes[&tail].replicas[&ChainId(0)].unconfirmed.is_empty(), "confirmed");
    assert_eq!(h.nodes[&mid].replicas[&ChainId(0)].la, 1, "then acknowledged upstream");
}

/// Seed 003 §5.3, replica types: a member kept in memory loses its replica when its node restarts. It says so
/// and takes no part (the chain waits, as for a failure) until the manager repairs it out and adds it back;
/// the fresh copy holds every acknowledged write again.
#[test]
fn a_memory_replica_lost_to_a_restart_comes_back_by_a_fresh_copy() {
    use ReplicaKind::{Log, Mem};
    let mut h = Harness::with_kinds(3, &[Mem, Log, Log]);
    h.written(1, "a", "1");
    let head = h.chain().members[0];
    h.restart(head);
    assert_eq!(h.lost(head), vec![(ChainId(0), 0)], "a memory replica starts empty");
    assert!(!h.nodes[&head].replicas[&ChainId(0)].is_active());
    assert_eq!(h.request(2, put("b", "2")), None, "the chain waits for its repair");
    h.remove(head.0);
    h.add_kind(head.0, 0, Mem);
    h.tick_all();
    assert_eq!(h.request(3, get("b")), Some(value("2")), "the write that waited went through");
    let e = h.nodes[&head].host.stores.get((KeyspaceId::DEFAULT, Mem)).unwrap().get(b"a").unwrap().unwrap();
    assert_eq!(e.value, Some(Stored::wrap(b"1", None)), "the copy is whole again");
    assert!(h.nodes[&head].reports().lost.is_empty());
}

/// Under `su`, with a log after it, the head passes an update on before its own fsync, so a power loss can take
/// from it an update its successors hold and the tail acknowledged. After a restart it counts its replica lost,
/// rather than order new writes from a history shorter than theirs, and the chain is repaired by a fresh copy.
#[test]
fn a_head_that_passed_an_update_on_before_its_fsync_is_repaired_after_a_restart() {
    let mut h = Harness::new(3, 3);
    h.written(1, "a", "1");
    let (head, mid, tail) = h.members();
    h.unsynced = vec![head];
    assert_eq!(h.request(mid.0, put("b", "2")), Some(OK_NEW), "acknowledged without the head's fsync");
    h.unsynced.clear();
    h.restart(head);
    assert_eq!((h.lu(head.0), h.lu(mid.0)), (1, 2), "the power loss took the update from the head alone");
    assert_eq!(h.lost(head), vec![(ChainId(0), 1)]);
    assert_eq!(h.request(mid.0, put("c", "3")), None, "the chain waits for its repair");
    h.remove(head.0);
    h.add(head.0, 0);
    h.tick_all();
    assert_eq!(h.request(tail.0, get("c")), Some(value("3")), "the write that waited went through");
    let e =
        h.nodes[&head].host.stores.get((KeyspaceId::DEFAULT, ReplicaKind::Log)).unwrap().get(b"b").unwrap().unwrap();
    assert_eq!(e.value, Some(Stored::wrap(b"2", None)), "the copy is whole again");
    assert!(h.nodes[&head].reports().lost.is_empty());
}

/// A node that stores a map in which it no longer heads a chain first makes durable what it passed on early:
/// after a restart it judges its replica by that map alone.
#[test]
fn updates_passed_on_early_are_durable_before_a_map_is_stored() {
    let mut h = Harness::new(3, 3);
    let (head, mid, _) = h.members();
    h.unsynced = vec![head];
    assert_eq!(h.request(mid.0, put("b", "2")), Some(OK_NEW));
    h.nodes.get_mut(&head).unwrap().host.sync_now().unwrap();
    h.unsynced.clear();
    h.restart(head);
    assert_eq!(h.lu(head.0), 1, "synced before the map, so a power loss kept it");
}

/// A head that stopped cleanly made every write durable first, so it keeps its log replica and goes on ordering.
#[test]
fn a_head_that_stopped_cleanly_keeps_its_replica() {
    let mut h = Harness::new(3, 3);
    h.written(1, "a", "1");
    let head = h.members().0;
    h.restart_after(head, true);
    assert!(h.lost(head).is_empty());
    h.written(head.0, "b", "2");
    assert_eq!(h.lu(head.0), 2);
}

/// A replica counted lost stays lost across later restarts until the map deals with it, even when the restart
/// follows a clean stop (which spares a head that forwarded early its verdict) or a map in which the node no
/// longer heads the chain: neither makes its log whole. Sim seed 500018 (a power loss, then a clean stop before
/// the manager had recorded the loss) restarted such a head trusting a log shorter than its successor's.
#[test]
fn a_lost_replica_stays_lost_after_a_clean_stop() {
    let mut h = Harness::new(3, 3);
    h.written(1, "a", "1");
    let (head, mid, _) = h.members();
    h.unsynced = vec![head];
    assert_eq!(h.request(mid.0, put("b", "2")), Some(OK_NEW));
    h.unsynced.clear();
    h.restart(head);
    // Before the manager records the loss, the node stops cleanly and starts again.
    assert_eq!(h.nodes[&head].reports().lost, vec![(ChainId(0), 1)]);
    h.restart_after(head, true);
    assert_eq!(h.nodes[&head].reports().lost, vec![(ChainId(0), 1)], "the clean stop made nothing whole");
    assert_eq!(h.request(mid.0, put("c", "3")), None, "the chain still waits for its repair");
}

/// Only the head of an `su` chain passes updates on early, so only it is lost after a restart: under `au` the
/// head answers writes itself, from its own fsynced log.
#[test]
fn only_an_su_head_counts_its_log_replica_lost_after_a_restart() {
    let mut h = Harness::new(3, 3);
    h.written(1, "a", "1");
    let (_, mid, tail) = h.members();
    h.restart(mid);
    h.restart(tail);
    assert!(h.lost(mid).is_empty() && h.lost(tail).is_empty());
    let mut h = Harness::with_config(3, keyspace(meridian_core::UpdateMode::Au, meridian_core::QueryNode::Tail));
    h.written(1, "a", "1");
    let head = h.members().0;
    h.restart(head);
    assert!(h.lost(head).is_empty());
}

/// When every replica of a chain was in memory and every node restarted, nothing whole is left: the manager
/// restores the chain from the lost replica holding the most, which becomes its only member and serves again
/// without the writes it lost.
#[test]
fn a_chain_with_no_whole_replica_is_restored_from_a_lost_one() {
    use ReplicaKind::Mem;
    let mut h = Harness::with_kinds(2, &[Mem, Mem]);
    h.written(1, "a", "1");
    let (first, second) = (h.chain().members[0], h.chain().members[1]);
    h.restart(first);
    h.restart(second);
    h.lost(first);
    h.lost(second);
    let incarnation = h.nodes[&second].reports().incarnation;
    h.apply(MapCommand::ReplicaRestored { chain: ChainId(0), node: second, incarnation });
    assert_eq!(h.chain().members, vec![second]);
    h.publish();
    assert_eq!(h.request(1, get("a")), Some(Reply::Value(None)), "the restored replica lost it");
    h.written(1, "b", "2");
    assert_eq!(h.request(1, get("b")), Some(value("2")));
    assert!(!h.nodes[&first].replicas.contains_key(&ChainId(0)), "the other member left the chain");
}

/// A replica restored from may hold copied states above its history (a flush whose history a crash cut short):
/// it continues from the highest sequence number it holds, and serves. Sim seed 931742 (a `buffered` keyspace
/// of one replica) restored such a replica and left it inactive for good, the chain stuck.
#[test]
fn a_restored_replica_with_copied_states_above_its_history_serves() {
    let mut h = Harness::with_kinds(1, &[ReplicaKind::Buffered]);
    h.written(1, "a", "1");
    let only = h.chain().members[0];
    let record = serve::record_of(&Update {
        chain: ChainId(0),
        seq: 5,
        key: Bytes::from_static(b"b"),
        change: Change::Put(Stored::wrap(b"2", None)),
        outcome: Outcome::default(),
        origin: None,
        also: Vec::new(),
    });
    let store =
        h.nodes.get_mut(&only).unwrap().host.stores.get_mut((KeyspaceId::DEFAULT, ReplicaKind::Buffered)).unwrap();
    store.append(&record).unwrap();
    store.flush().unwrap();
    // A buffered store fsyncs a batch at a time; here the whole log is made durable by hand.
    let (disk, dir): (&dyn meridian_store::Vfs, _) = (&h.disks[&only], std::path::Path::new("/d/ks-0-buffered"));
    disk.list_files(dir).unwrap().iter().for_each(|f| disk.open(&dir.join(f)).unwrap().sync().unwrap());
    h.restart(only);
    assert_eq!(h.lost(only).len(), 1);
    assert!(!h.nodes[&only].replicas[&ChainId(0)].complete, "seq 5 is above its history");
    let incarnation = h.nodes[&only].reports().incarnation;
    h.apply(MapCommand::ReplicaRestored { chain: ChainId(0), node: only, incarnation });
    h.publish();
    assert!(h.nodes[&only].replicas[&ChainId(0)].is_active(), "the restored replica is the chain's state");
    assert_eq!(h.request(1, get("b")), Some(value("2")));
    h.written(1, "c", "3");
    assert_eq!(h.lu(only.0), 6, "numbered after every record it holds");
}

/// §2.5 phase 2 across a restart: an inserted member that finished its flush, took an update from its predecessor
/// and restarted before the step ended flushes again, from a successor that has not got that update yet. It keeps
/// the update and passes it on, rather than drop it from memory while its log keeps it: a later restart would
/// bring it back as history the chain had moved past (sim seed 1402885, cache keyspace, full nemesis).
#[test]
fn a_member_that_flushes_again_after_a_restart_keeps_and_passes_on_what_it_took() {
    let mut h = Harness::new(4, 3);
    h.written(1, "a", "1");
    let (head, _, _) = h.members();
    let joiner = (1..=4).map(NodeId).find(|n| !h.chain().contains(*n)).unwrap();
    let (view, step) = (h.chain().view, h.map.next_step);
    let change = ChainChange::Add { node: joiner, position: 1, step, inserted: false, kind: ReplicaKind::Log };
    h.apply(MapCommand::StepStarted { chain: ChainId(0), expected_view: view, change });
    h.publish();
    h.tick_all();
    h.apply(MapCommand::AddInserted { chain: ChainId(0), step });
    h.publish();
    h.tick_all();
    assert_eq!(h.reports(joiner.0), vec![StepReport::Flushed { chain: ChainId(0), step }]);
    let successor = h.chain().members[2];

    h.drop_to = vec![successor];
    assert_eq!(h.request(head.0, put("b", "2")), None, "the update stops at the inserted member");
    assert_eq!((h.lu(joiner.0), h.lu(successor.0)), (2, 1));
    // The head cannot resend it now: what the inserted member holds is all the chain has beyond its successor.
    h.drop_to = vec![head];
    h.restart(joiner);
    (0..4).for_each(|_| h.tick_all());
    assert_eq!(h.lu(joiner.0), 2, "the second flush kept the update");
    assert_eq!(h.lu(successor.0), 2, "and passed it on");
    h.restart(joiner);
    assert_eq!(h.lu(joiner.0), 2, "what a restart replays is what the member held");
}

/// A joiner keeps what it copied across an aborted step, as a base for its next pre-copy, but not across a
/// restoration: the restored replica numbers its writes afresh, so the same sequence numbers name other writes.
/// The joiner here misses the map that restored the chain and sees only the next Add of itself.
#[test]
fn a_joiner_drops_what_it_copied_before_its_chain_was_restored() {
    use ReplicaKind::Mem;
    let mut h = Harness::with_kinds(2, &[Mem]);
    let member = h.chain().members[0];
    let joiner = if member == NodeId(1) { NodeId(2) } else { NodeId(1) };
    h.written(member.0, "a", "1");
    h.written(member.0, "b", "2");
    let (view, step) = (h.chain().view, h.map.next_step);
    let change = ChainChange::Add { node: joiner, position: 0, step, inserted: false, kind: Mem };
    h.apply(MapCommand::StepStarted { chain: ChainId(0), expected_view: view, change });
    h.publish();
    h.tick_all();
    assert_eq!(h.lu(joiner.0), 2, "pre-copied");

    h.restart(member);
    h.lost(member);
    let incarnation = h.nodes[&member].reports().incarnation;
    h.apply(MapCommand::ReplicaRestored { chain: ChainId(0), node: member, incarnation });
    let map = Arc::new(h.map.clone());
    h.feed(member, |n, fx| n.adopt(map, Time::ZERO, fx));
    h.grant_tail();
    h.written(member.0, "c", "3");
    h.add_kind(joiner.0, 0, Mem);
    h.tick_all();

    assert_eq!(h.lu(joiner.0), h.lu(member.0), "one history");
    assert_eq!(h.request(joiner.0, get("a")), Some(Reply::Value(None)), "a write the restoration lost stays lost");
    h.written(joiner.0, "d", "4");
    assert_eq!(h.request(member.0, get("d")), Some(value("4")));
    let joined = h.nodes[&joiner].host.stores.get((KeyspaceId::DEFAULT, Mem)).unwrap();
    assert_eq!(joined.get(b"a").unwrap().and_then(|e| e.value), None, "not in the joiner's copy either");
}

/// Seed 003 §5.3, reads from the head: a key with a write the tail has not acknowledged is read at the tail
/// (CRAQ's dirty read), so a write that may never commit is never seen; other keys are read at the head.
#[test]
fn a_head_that_answers_reads_sends_keys_with_tentative_writes_to_the_tail() {
    let mut h = Harness::with_config(3, keyspace(meridian_core::UpdateMode::Su, meridian_core::QueryNode::Head));
    h.written(1, "k", "v1");
    h.written(1, "other", "o1");
    let (head, mid, _) = h.members();
    h.drop_to = vec![mid];
    assert_eq!(h.request(head.0, put("k", "v2")), None, "stuck at the head");
    assert_eq!(h.at_once(head, &get("k")), None, "not at once either");
    assert_eq!(h.at_once(head, &get("other")), Some(value("o1")));
    let reads_before = h.nodes[&head].stats().reads;
    assert_eq!(h.request(head.0, get("k")), Some(value("v1")), "the tail's committed value, not the tentative one");
    assert_eq!(h.nodes[&head].stats().reads, reads_before, "the head did not answer it");
    assert_eq!(h.request(head.0, get("other")), Some(value("o1")));
    assert_eq!(h.nodes[&head].stats().reads, reads_before + 1, "a clean key is read at the head");
    h.drop_to.clear();
    h.tick_all();
    h.tick_all();
    assert_eq!(h.request(head.0, get("k")), Some(value("v2")));
}

/// Three `log` replicas, `update` and `read_from` as given.
fn keyspace(update: meridian_core::UpdateMode, read_from: meridian_core::QueryNode) -> meridian_core::KeyspaceConfig {
    meridian_core::KeyspaceConfig { update, read_from, ..meridian_core::KeyspaceConfig::durable(3) }
}

fn ausi(read_from: meridian_core::QueryNode) -> meridian_core::KeyspaceConfig {
    keyspace(meridian_core::UpdateMode::Ausi, read_from)
}

/// Seed 003 §5.3, AUSI: a write is answered once every member holds an invalidation of its key (or, if those
/// were lost, once the chain acknowledges the update itself); until then the head holds reads of the key back,
/// so no read shows the write before a member after the head stops answering the older value.
#[test]
fn ausi_answers_once_the_chain_holds_the_invalidation_and_holds_reads_of_the_key_until_then() {
    let mut h = Harness::with_config(3, ausi(meridian_core::QueryNode::Head));
    h.written(1, "k", "v1");
    let (head, _, tail) = h.members();
    h.drop_to = vec![tail];
    assert_eq!(h.request(head.0, put("k", "v2")), None, "the tail has no invalidation yet");
    assert_eq!(h.request(head.0, get("k")), None, "held back at the head");
    assert_eq!(h.at_once(head, &get("other")), None, "an `ausi` head's reads are never answered at once");
    h.drop_to.clear();
    h.tick_all();
    h.tick_all();
    let replies: Vec<&Reply> = h.replies.values().collect();
    assert!(replies.contains(&&Reply::Written { applied: true, existed: true }), "{replies:?}");
    assert!(replies.contains(&&value("v2")), "{replies:?}");
}

/// An `ausi` head answers a write only while it holds a lease on its view, as a tail does: in a new view, the last
/// view's tail may still answer reads under its own lease until the manager's fence passes, and it has neither
/// the write nor its invalidation.
#[test]
fn an_ausi_head_without_a_lease_answers_a_write_only_once_it_has_one() {
    let mut h = Harness::with_config(3, ausi(meridian_core::QueryNode::Tail));
    h.written(1, "k", "v1");
    let (head, _, _) = h.members();
    h.nodes.get_mut(&head).unwrap().leases.retain(|_, _| false);
    assert_eq!(h.request(head.0, put("k", "v2")), None, "invalidated everywhere, but the head has no lease");
    h.tick_all();
    assert!(h.replies.is_empty(), "{:?}", h.replies);
    h.grant_tail();
    h.tick_all();
    let replies: Vec<&Reply> = h.replies.values().collect();
    assert_eq!(replies, vec![&Reply::Written { applied: true, existed: true }]);
}

/// An `au` head answers a write at once only while it holds a lease on its view: a head removed without hearing
/// of it would otherwise go on answering writes the chain never gets, for as long as clients reach it (found by
/// the simulator's `isolate` fault). Without a lease the write goes on down the chain, answered by the tail.
#[test]
fn an_au_head_without_a_lease_leaves_the_answer_to_the_tail() {
    let mut h = Harness::with_config(3, keyspace(meridian_core::UpdateMode::Au, meridian_core::QueryNode::Tail));
    h.written(1, "k", "v1");
    let (head, mid, _) = h.members();
    h.drop_to = vec![mid];
    let existed = Reply::Written { applied: true, existed: true };
    assert_eq!(h.request(head.0, put("k", "v2")), Some(existed.clone()), "answered at the head, with its lease");
    h.nodes.get_mut(&head).unwrap().leases.retain(|_, _| false);
    assert_eq!(h.request(head.0, put("k", "v3")), None, "without a lease, not at the head");
    h.drop_to.clear();
    h.tick_all();
    h.tick_all();
    let replies: Vec<&Reply> = h.replies.values().collect();
    assert_eq!(replies, vec![&existed], "by the tail, once the chain has it");
    assert_eq!(h.request(head.0, get("k")), Some(value("v3")));
}

/// The tail's report that a write's invalidation reached it covers that write alone: an earlier write whose
/// invalidation was lost on the way (a broken connection, or sent in an earlier view) is answered once the chain
/// acknowledges its update, not with the later one, or a member without its invalidation would go on answering
/// its key's older value after the answer (found by the simulator's `isolate` fault).
#[test]
fn an_ausi_head_answers_only_the_write_whose_invalidation_came_back() {
    let mut h = Harness::with_config(3, ausi(meridian_core::QueryNode::Tail));
    h.written(1, "a", "a1");
    let (head, mid, tail) = h.members();
    h.drop_to = vec![mid];
    assert_eq!(h.request(head.0, put("a", "a2")), None, "its invalidation and update were lost");
    assert_eq!(h.request(head.0, put("b", "b1")), None, "so were these");
    let (view, seq) = (h.chain().view, h.lu(head.0));
    let reported = ChainMsg::Invalidated { chain: ChainId(0), view, seq };
    h.feed(head, |n, fx| n.on_message(Time::ZERO, tail, reported, fx));
    let replies: Vec<&Reply> = h.replies.values().collect();
    assert_eq!(replies, vec![&OK_NEW], "only the write of b is answered");
    h.replies.clear();
    h.drop_to.clear();
    h.tick_all();
    h.tick_all();
    let replies: Vec<&Reply> = h.replies.values().collect();
    assert_eq!(replies, vec![&Reply::Written { applied: true, existed: true }], "a's, once acknowledged");
    assert_eq!(h.request(tail.0, get("a")), Some(value("a2")));
}

/// A member after the head reads a key it holds an invalidation for at the head, which has the write.
#[test]
fn ausi_secondaries_read_invalidated_keys_at_the_head() {
    let mut h = Harness::with_config(3, ausi(meridian_core::QueryNode::Tail));
    h.written(1, "k", "v1");
    let (head, _, tail) = h.members();
    let r = h.nodes.get_mut(&tail).unwrap().replicas.get_mut(&ChainId(0)).unwrap();
    r.invalid.insert(Bytes::from_static(b"k"), r.lu + 1);
    let head_reads = h.nodes[&head].stats().reads;
    assert_eq!(h.at_once(tail, &get("k")), None, "the head answers it");
    assert_eq!(h.request(tail.0, get("k")), Some(value("v1")));
    assert_eq!(h.nodes[&head].stats().reads, head_reads + 1, "the head answered it");
    assert_eq!(h.request(1, put("k", "v2")), Some(Reply::Written { applied: true, existed: true }));
    assert!(h.nodes[&tail].replicas[&ChainId(0)].invalid.get(&b"k"[..]).is_none_or(|&s| s <= h.lu(tail.0)));
    assert_eq!(h.request(tail.0, get("k")), Some(value("v2")));
}

/// A finished step is reported once a sync that began after it has completed, not by the one under way when it
/// finished: the runner's group commit begins a sync and goes on taking inputs while it runs
/// (`Process::begin_sync`).
#[test]
fn a_step_is_reported_only_after_a_sync_that_began_after_it() {
    let mut h = Harness::new(3, 3);
    let node = h.nodes.get_mut(&NodeId(1)).unwrap();
    let under_way = node.host.begin_sync(false).unwrap();
    let step = StepReport::Flushed { chain: ChainId(0), step: 9 };
    let TestNode { chain, host } = node;
    chain.step(host).step_finished(step);
    under_way.map_or(Ok(()), |job| job()).unwrap();
    node.host.end_sync();
    assert!(node.reports().steps.is_empty(), "the sync under way did not cover the step");
    let covering = node.host.begin_sync(false).unwrap();
    assert!(node.reports().steps.is_empty(), "begun is not done");
    covering.map_or(Ok(()), |job| job()).unwrap();
    node.host.end_sync();
    assert_eq!(node.reports().steps, vec![step]);
}
