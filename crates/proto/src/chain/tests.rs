//! Golden tests of chain replication edge cases, named after the seed sections they exercise. A tiny
//! synchronous harness delivers messages in FIFO order and syncs after every step; the simulator
//! covers timing and faults.

use super::*;
use meridian_core::{Condition, Effect, NodeSpec};
use meridian_store::{LogStore, MemStore, SimVfs};
use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;

struct Harness {
    nodes: BTreeMap<NodeId, ChainNode>,
    disks: BTreeMap<NodeId, SimVfs>,
    cluster: ClusterConfig,
    wire: VecDeque<(NodeId, NodeId, ChainMsg)>,
    replies: BTreeMap<RequestId, Reply>,
    /// Messages to these destinations are dropped (a broken connection).
    drop_to: Vec<NodeId>,
    next_id: u64,
}

fn cluster(n: u32) -> ClusterConfig {
    let nodes = (1..=n).map(|i| NodeSpec { id: NodeId(i), peer_addr: format!("h:{i}") }).collect();
    ClusterConfig::new(nodes, 3, 4).unwrap()
}

fn open(id: NodeId, cluster: &ClusterConfig, disk: &SimVfs) -> ChainNode {
    let (store, _) = LogStore::open(Arc::new(disk.clone()), Path::new("/d")).unwrap();
    ChainNode::new(id, cluster, ChainConfig::default(), Box::new(store), u64::from(id.0) * 1000).unwrap()
}

impl Harness {
    fn new(n: u32) -> Harness {
        let cluster = cluster(n);
        let disks: BTreeMap<NodeId, SimVfs> = cluster.node_ids().map(|id| (id, SimVfs::new())).collect();
        let nodes = disks.iter().map(|(&id, d)| (id, open(id, &cluster, d))).collect();
        let mut h = Harness {
            nodes,
            disks,
            cluster,
            wire: VecDeque::new(),
            replies: BTreeMap::new(),
            drop_to: vec![],
            next_id: 0,
        };
        for id in h.cluster.node_ids().collect::<Vec<_>>() {
            h.feed(id, |n, fx| n.start(Time::ZERO, fx));
        }
        h
    }

    fn feed(&mut self, id: NodeId, f: impl FnOnce(&mut ChainNode, &mut Fx)) {
        let node = self.nodes.get_mut(&id).unwrap();
        let mut fx = Fx::new();
        f(node, &mut fx);
        node.sync().unwrap();
        node.check_invariants().unwrap();
        for e in fx.drain().0 {
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

    fn request(&mut self, via: u32, req: Request) -> Option<Reply> {
        self.next_id += 1;
        let id = RequestId(self.next_id);
        self.feed(NodeId(via), |n, fx| n.on_request(Time::ZERO, id, req, fx));
        self.settle();
        self.replies.remove(&id)
    }

    fn tick_all(&mut self) {
        for id in self.cluster.node_ids().collect::<Vec<_>>() {
            if self.nodes.contains_key(&id) {
                self.feed(id, |n, fx| n.on_timer(Time::ZERO, ChainTimer::Tick, fx));
            }
        }
        self.settle();
    }

    fn restart(&mut self, id: NodeId) {
        self.disks[&id].crash(7);
        let node = open(id, &self.cluster, &self.disks[&id]);
        self.nodes.insert(id, node);
        self.feed(id, |n, fx| n.start(Time::ZERO, fx));
        self.settle();
    }
}

fn put(key: &str, value: &str, cond: Condition) -> Request {
    Request::Write(Write { key: Bytes::from(key.to_string()), value: Some(Bytes::from(value.to_string())), cond })
}

fn del(key: &str) -> Request {
    Request::Write(Write { key: Bytes::from(key.to_string()), value: None, cond: Condition::Always })
}

fn get(key: &str) -> Request {
    Request::Get { key: Bytes::from(key.to_string()) }
}

fn value(v: &str) -> Reply {
    Reply::Value(Some(Bytes::from(v.to_string())))
}

const OK_NEW: Reply = Reply::Written { applied: true, existed: false };

#[test]
fn s2_3_put_flows_head_to_tail_and_any_front_end_reads_it() {
    let mut h = Harness::new(3);
    assert_eq!(h.request(1, put("a", "1", Condition::Always)), Some(OK_NEW));
    for via in 1..=3 {
        assert_eq!(h.request(via, get("a")), Some(value("1")));
    }
    let chain = h.nodes[&NodeId(1)].ring().chain_for_key(b"a").id;
    for n in h.nodes.values() {
        let (_, lu, la) = n.positions().find(|p| p.0 == chain).unwrap();
        assert_eq!((lu, la), (1, 1), "every replica logged and saw the ack");
    }
}

#[test]
fn deletes_are_tombstones_and_report_existence() {
    let mut h = Harness::new(3);
    h.request(2, put("k", "v", Condition::Always));
    assert_eq!(h.request(3, del("k")), Some(Reply::Written { applied: true, existed: true }));
    assert_eq!(h.request(1, get("k")), Some(Reply::Value(None)));
    assert_eq!(h.request(1, del("k")), Some(Reply::Written { applied: true, existed: false }));
}

#[test]
fn nx_and_xx_are_decided_by_the_head_and_answered_by_the_tail() {
    let mut h = Harness::new(3);
    assert_eq!(
        h.request(1, put("k", "x", Condition::IfPresent)),
        Some(Reply::Written { applied: false, existed: false })
    );
    assert_eq!(h.request(2, put("k", "1", Condition::IfAbsent)), Some(OK_NEW));
    assert_eq!(
        h.request(3, put("k", "2", Condition::IfAbsent)),
        Some(Reply::Written { applied: false, existed: true })
    );
    assert_eq!(
        h.request(1, put("k", "3", Condition::IfPresent)),
        Some(Reply::Written { applied: true, existed: true })
    );
    assert_eq!(h.request(2, get("k")), Some(value("3")));
}

#[test]
fn oversized_requests_are_refused_before_anything_is_logged() {
    let mut h = Harness::new(3);
    let big = "x".repeat(Limits::default().max_value_bytes + 1);
    let reply = h.request(1, put("k", &big, Condition::Always));
    assert!(matches!(reply, Some(Reply::Error(ErrorKind::Invalid, _))), "{reply:?}");
    assert!(h.nodes.values().all(|n| n.positions().all(|(_, lu, _)| lu == 0)));
}

/// Listing 1's resend path: a successor that missed updates (broken connection) asks for them again
/// when the predecessor's stalled acknowledgements make it probe.
#[test]
fn lost_updates_are_resent_after_a_probe() {
    let mut h = Harness::new(3);
    let chain = h.nodes[&NodeId(1)].ring().chain_for_key(b"a").clone();
    let (head, mid, tail) = (chain.members[0], chain.members[1], chain.members[2]);
    h.drop_to = vec![mid];
    assert_eq!(h.request(head.0, put("a", "1", Condition::Always)), None, "stuck: the update to the middle was lost");
    h.drop_to.clear();
    h.tick_all();
    h.tick_all();
    assert_eq!(h.request(tail.0, get("a")), Some(value("1")));
}

/// §2.6 read in crash-restart terms: a tail that crashes keeps what it synced, and catches up on the
/// rest from its predecessor when it comes back.
#[test]
fn restarted_tail_catches_up_and_never_serves_stale() {
    let mut h = Harness::new(3);
    let chain = h.nodes[&NodeId(1)].ring().chain_for_key(b"a").clone();
    let tail = chain.tail();
    h.request(1, put("a", "1", Condition::Always));
    h.nodes.remove(&tail);
    assert_eq!(h.request(chain.head().0, put("a", "2", Condition::Always)), None, "no answer without the tail");
    h.restart(tail);
    assert_eq!(h.request(tail.0, get("a")), Some(value("2")));
}

#[test]
fn recovery_rebuilds_positions_and_unacked_history() {
    let mut h = Harness::new(3);
    for i in 0..5 {
        h.request(1, put("a", &i.to_string(), Condition::Always));
    }
    let before: Vec<_> = h.nodes[&NodeId(2)].positions().collect();
    h.restart(NodeId(2));
    let after: Vec<_> = h.nodes[&NodeId(2)].positions().collect();
    assert_eq!(before.iter().map(|p| p.1).collect::<Vec<_>>(), after.iter().map(|p| p.1).collect::<Vec<_>>());
    h.nodes[&NodeId(2)].check_invariants().unwrap();
}

#[test]
fn a_full_backlog_answers_busy() {
    let cluster = cluster(3);
    let cfg = ChainConfig { unacked_max: 1, ..ChainConfig::default() };
    let chain = Ring::new(&cluster).chain_for_key(b"a").clone();
    let mut head = ChainNode::new(chain.head(), &cluster, cfg, Box::new(MemStore::new()), 1).unwrap();
    let mut fx = Fx::new();
    head.on_request(Time::ZERO, RequestId(1), put("a", "1", Condition::Always), &mut fx);
    head.on_request(Time::ZERO, RequestId(2), put("a", "2", Condition::Always), &mut fx);
    let busy = fx
        .drain()
        .0
        .into_iter()
        .any(|e| matches!(e, Effect::Reply { id: RequestId(2), reply: Reply::Error(ErrorKind::Busy, _), .. }));
    assert!(busy);
}

#[test]
fn front_end_times_out_with_an_unknown_outcome() {
    let mut h = Harness::new(3);
    let chain = h.nodes[&NodeId(1)].ring().chain_for_key(b"a").clone();
    let fe = chain.members.iter().copied().find(|&n| n != chain.head()).unwrap();
    h.drop_to = vec![chain.head()];
    assert_eq!(h.request(fe.0, put("a", "1", Condition::Always)), None);
    for _ in 0..=ChainConfig::default().request_timeout.as_millis() / ChainConfig::default().tick.as_millis() {
        h.feed(fe, |n, fx| n.on_timer(Time::ZERO, ChainTimer::Tick, fx));
    }
    let timeouts = h.replies.values().filter(|r| matches!(r, Reply::Error(ErrorKind::Timeout, _))).count();
    assert_eq!(timeouts, 1);
}
