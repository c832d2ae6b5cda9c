//! Writes a chain's only member logs and answers within their step (`at_once.rs`): the same answers and the same
//! store as the long way, and the long way wherever a write would have another effect.

use super::*;
use meridian_core::{Deadline, KeyExpiry, KeyspaceConfig, Read, Ttl, WriteOp};

const T0: u64 = 1_800_000_000_000;

fn lone(kind: ReplicaKind) -> Harness {
    Harness::with_kinds(1, &[kind])
}

impl Harness {
    /// Node 1's answer to `req` within the step, or the request back ([`ChainNode::write_at_once`]).
    fn write_at_once(&mut self, req: Request) -> Result<Reply, Request> {
        let node = self.nodes.get_mut(&NodeId(1)).unwrap();
        let answer = node.write_at_once(Time::ZERO, req);
        node.check_invariants().unwrap();
        answer
    }

    /// `req`'s answer, within the step if `at_once`, else through `on_request`.
    fn answer(&mut self, req: Request, at_once: bool) -> Reply {
        match at_once {
            true => self.write_at_once(req).expect("answered at once"),
            false => self.request(1, req).expect("answered"),
        }
    }
}

fn write(key: &str, op: WriteOp, cond: Condition, get_old: bool) -> Request {
    let w = Write::delete(KeyspaceId::DEFAULT, Bytes::from(key.to_string()));
    Request::Write(Write { op, cond, get_old, ..w })
}

fn put_for(key: &str, value: &str, ms: u64) -> Request {
    let op = WriteOp::Put { value: Bytes::from(value.to_string()), ttl: Ttl::Expire(Deadline::In(ms)) };
    write(key, op, Condition::Always, false)
}

fn read(key: &str, read: Read) -> Request {
    Request::Get { keyspace: KeyspaceId::DEFAULT, key: Bytes::from(key.to_string()), read }
}

/// Every kind of write, at once on one node and the long way on another: the same answers, then the same
/// values and deadlines, sequence numbers and counts.
#[test]
fn a_lone_memory_member_answers_writes_at_once_as_the_long_way_would() {
    let put_op = |v: &str, ttl| WriteOp::Put { value: Bytes::from(v.to_string()), ttl };
    let writes = [
        put("a", "1"),
        put("a", "2"),
        put_if("a", "3", Condition::IfAbsent),
        put_if("b", "1", Condition::IfPresent),
        put_if("b", "1", Condition::IfAbsent),
        write("a", put_op("4", Ttl::Clear), Condition::Always, true),
        put_for("c", "1", 5_000),
        write("c", put_op("2", Ttl::Keep), Condition::IfPresent, false),
        write(
            "b",
            WriteOp::Expire { deadline: Some(Deadline::In(9_000)), when: meridian_core::ExpireWhen::Always },
            Condition::Always,
            false,
        ),
        del("a"),
        del("a"),
        write("b", WriteOp::Delete, Condition::Always, true),
    ];
    let (mut fast, mut long) = (lone(ReplicaKind::Mem), lone(ReplicaKind::Mem));
    fast.set_wall(T0);
    long.set_wall(T0);
    for req in writes {
        let (at_once, long_way) = (fast.answer(req.clone(), true), long.answer(req.clone(), false));
        assert_eq!(at_once, long_way, "{req:?}");
    }
    for key in ["a", "b", "c", "d"] {
        for how in [Read::Value, Read::Expiry] {
            let (a, b) = (fast.request(1, read(key, how)), long.request(1, read(key, how)));
            assert_eq!(a, b, "{key} {how:?}");
        }
    }
    assert_eq!(fast.request(1, read("c", Read::Expiry)), Some(Reply::Expiry(KeyExpiry::In(5_000))));
    assert_eq!(fast.lu(1), long.lu(1));
    let (fast, long) = (fast.nodes[&NodeId(1)].stats(), long.nodes[&NodeId(1)].stats());
    assert_eq!((fast.writes, fast.writes_at_once), (long.writes, long.writes));
    assert_eq!(long.writes_at_once, 0);
}

/// A write that would have another effect than its answer, or that `on_request` refuses, goes the long way,
/// untouched: it is handed back and nothing is logged.
#[test]
fn a_write_with_more_to_do_than_answer_is_handed_back() {
    let mut cases: Vec<(&str, Harness, Request)> = vec![
        ("a durable store", lone(ReplicaKind::Log), put("k", "v")),
        ("a chain of three", Harness::with_kinds(3, &[ReplicaKind::Mem; 3]), put("k", "v")),
        ("a read", lone(ReplicaKind::Mem), get("k")),
        ("an empty key", lone(ReplicaKind::Mem), put("", "v")),
    ];
    let mut unleased = lone(ReplicaKind::Mem);
    unleased.nodes.get_mut(&NodeId(1)).unwrap().leases.retain(|_, _| false);
    cases.push(("no lease", unleased, put("k", "v")));
    let cap = KeyspaceConfig { maxmemory: Some(1 << 20), ..KeyspaceConfig::with_replicas(vec![ReplicaKind::Mem]) };
    cases.push(("a cache, which may evict", Harness::with_config(1, cap), put("k", "v")));
    let mut due = lone(ReplicaKind::Mem);
    due.set_wall(T0);
    assert_eq!(due.write_at_once(put_for("k", "v", 1_000)), Ok(OK_NEW));
    due.set_wall(T0 + 1_000);
    cases.push(("a key past its deadline, deleted first", due, put("k", "w")));
    for (why, mut h, req) in cases {
        let lu = h.lu(1);
        assert_eq!(h.write_at_once(req.clone()), Err(req), "{why}");
        assert_eq!(h.lu(1), lu, "{why}: nothing logged");
    }
}

/// The chain the default keyspace's `key` falls in, in node 1's map.
#[cfg(debug_assertions)]
fn chain_of(h: &Harness, key: &[u8]) -> ChainId {
    let map = h.nodes[&NodeId(1)].map.clone().expect("a map");
    map.chain_of(KeyspaceId::DEFAULT, meridian_core::ring::key_token(key)).expect("a chain").id
}

/// The debug check of a read answered at once has teeth: a read the long way would hold back (no lease) stops
/// the node, however right the value.
#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "answered at once with")]
fn a_read_at_once_the_long_way_would_hold_fails_its_check() {
    let mut h = lone(ReplicaKind::Mem);
    h.written(1, "k", "v");
    let chain = chain_of(&h, b"k");
    let node = h.nodes.get_mut(&NodeId(1)).unwrap();
    node.leases.retain(|_, _| false);
    let value = Reply::Value(Some(Bytes::from("v")));
    node.chain.step(&mut node.host).check_read(Time::ZERO, chain, b"k", Read::Value, &value);
}

/// ... and so has the write's: a write logged at once while an answer is still owed stops the node.
#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "logged at once that the long way would not have left there")]
fn a_write_at_once_with_an_answer_owed_fails_its_check() {
    let mut h = lone(ReplicaKind::Mem);
    assert_eq!(h.write_at_once(put("k", "v")), Ok(OK_NEW));
    let chain = chain_of(&h, b"k");
    let node = h.nodes.get_mut(&NodeId(1)).unwrap();
    let origin = Origin { node: NodeId(2), incarnation: 0, id: RequestId(7) };
    let owed = replica::Unconfirmed { origin, reply: OK_NEW, since: 0, sent: None };
    node.replicas.get_mut(&chain).unwrap().unconfirmed.insert(1, owed);
    node.chain.step(&mut node.host).check_write(Time::ZERO, chain, b"k");
}
