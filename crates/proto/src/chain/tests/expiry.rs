//! Keys that expire: deadlines fixed by the front-end's wall clock, deletes ordered by the head once they
//! pass, and every member's ledger kept in step (docs/keyspaces.md, "Expiry and cache mode").

use super::*;
use meridian_core::{Deadline, KeyExpiry, Read, Ttl, WriteOp};

const T0: u64 = 1_800_000_000_000;

fn write(key: &str, op: WriteOp, cond: Condition) -> Request {
    let mut w = Write::delete(KeyspaceId::DEFAULT, Bytes::from(key.to_string()));
    (w.op, w.cond) = (op, cond);
    Request::Write(w)
}

fn put_for(key: &str, value: &str, ms: u64) -> Request {
    let ttl = Ttl::Expire(Deadline::In(ms));
    write(key, WriteOp::Put { value: Bytes::from(value.to_string()), ttl }, Condition::Always)
}

fn ttl(key: &str) -> Request {
    Request::Get { keyspace: KeyspaceId::DEFAULT, key: Bytes::from(key.to_string()), read: Read::Expiry }
}

fn expiring(h: &Harness, node: NodeId) -> usize {
    h.nodes[&node].ledger(ChainId(0)).map_or(0, |l| l.expiring())
}

const APPLIED: Reply = Reply::Written { applied: true, existed: true };
const NOT_APPLIED: Reply = Reply::Written { applied: false, existed: false };

#[test]
fn a_key_lives_until_its_deadline_then_the_head_deletes_it_everywhere() {
    let mut h = Harness::new(3, 3);
    h.set_wall(T0);
    assert_eq!(h.request(2, put_for("k", "v", 1_000)), Some(OK_NEW));
    h.set_wall(T0 + 400);
    assert_eq!(h.request(3, ttl("k")), Some(Reply::Expiry(KeyExpiry::In(600))));
    assert!(h.chain().members.iter().all(|&m| expiring(&h, m) == 1), "every member's ledger has it");
    h.tick_all();
    assert_eq!(h.request(1, get("k")), Some(value("v")), "not yet due");
    h.set_wall(T0 + 1_000);
    h.tick_all();
    assert_eq!(h.request(1, get("k")), Some(Reply::Value(None)));
    assert_eq!(h.request(1, ttl("k")), Some(Reply::Expiry(KeyExpiry::Absent)));
    assert!(h.chain().members.iter().all(|&m| expiring(&h, m) == 0));
    assert_eq!(h.nodes[&h.chain().members[0]].stats().expired, 1);
}

#[test]
fn persist_expire_and_keepttl_change_only_the_deadline() {
    let mut h = Harness::new(3, 3);
    h.set_wall(T0);
    let expire = |key: &str, d: Option<Deadline>| {
        write(key, WriteOp::Expire { deadline: d, when: meridian_core::ExpireWhen::Always }, Condition::Always)
    };
    assert_eq!(h.request(1, expire("missing", Some(Deadline::In(5)))), Some(NOT_APPLIED));
    h.written(1, "k", "v");
    assert_eq!(h.request(1, expire("k", None)), Some(Reply::Written { applied: false, existed: true }));
    assert_eq!(h.request(1, ttl("k")), Some(Reply::Expiry(KeyExpiry::Never)));
    assert_eq!(h.request(1, expire("k", Some(Deadline::In(50)))), Some(APPLIED));
    let keep = WriteOp::Put { value: Bytes::from_static(b"w"), ttl: Ttl::Keep };
    assert_eq!(h.request(1, write("k", keep, Condition::IfPresent)), Some(APPLIED));
    assert_eq!(h.request(1, ttl("k")), Some(Reply::Expiry(KeyExpiry::In(50))), "KEEPTTL kept it");
    assert_eq!(h.request(1, get("k")), Some(value("w")));
    assert_eq!(h.request(1, expire("k", None)), Some(APPLIED), "PERSIST");
    h.set_wall(T0 + 60);
    h.tick_all();
    assert_eq!(h.request(1, get("k")), Some(value("w")), "a persisted key stays");
    assert_eq!(h.request(1, expire("k", Some(Deadline::At(T0)))), Some(APPLIED), "a past deadline deletes");
    assert_eq!(h.request(1, get("k")), Some(Reply::Value(None)));
}

/// A write to a key whose deadline passed before the head's tick reaped it meets the key absent, and the key's
/// delete is ordered before it, so no reader sees the key come back.
#[test]
fn a_write_to_a_key_past_its_deadline_meets_it_absent() {
    let mut h = Harness::new(3, 3);
    h.set_wall(T0);
    assert_eq!(h.request(1, put_for("k", "old", 10)), Some(OK_NEW));
    h.set_wall(T0 + 10);
    let nx = WriteOp::Put { value: Bytes::from_static(b"new"), ttl: Ttl::Clear };
    assert_eq!(h.request(1, write("k", nx, Condition::IfAbsent)), Some(OK_NEW));
    assert_eq!(h.request(1, get("k")), Some(value("new")));
    assert_eq!((h.lu(1), h.lu(2), h.lu(3)), (3, 3, 3), "put, expiry, put");
}

/// Any member may become head, and a restarted one rebuilds its ledger from its log: the deadline survives both.
#[test]
fn deadlines_survive_a_new_head_and_a_restart() {
    let mut h = Harness::new(3, 3);
    h.set_wall(T0);
    assert_eq!(h.request(1, put_for("k", "v", 100)), Some(OK_NEW));
    let (head, mid, _) = h.members();
    h.restart(mid);
    h.set_wall(T0);
    assert_eq!(expiring(&h, mid), 1, "rebuilt from the log");
    h.remove(head.0);
    assert_eq!(h.chain().members[0], mid);
    h.set_wall(T0 + 100);
    h.tick_all();
    assert_eq!(h.request(mid.0, get("k")), Some(Reply::Value(None)));
    assert_eq!(h.nodes[&mid].stats().expired, 1);
}

/// Under `ausi` the head shows an expiry it ordered only once the chain holds its invalidation, as it does a
/// client's write: until then a member after it, with neither the delete nor an invalidation, still answers the
/// value, and a reader the head had told "absent" would see the key come back (found by the simulator's `isolate`
/// fault, which leaves a tail far behind its head).
#[test]
fn an_ausi_head_holds_reads_of_a_key_it_expired_until_the_chain_holds_the_invalidation() {
    let mut h = Harness::with_config(3, ausi(meridian_core::QueryNode::Head));
    h.set_wall(T0);
    assert_eq!(h.request(1, put_for("k", "v", 10)), Some(OK_NEW));
    let (head, _, tail) = h.members();
    h.drop_to = vec![tail];
    h.set_wall(T0 + 10);
    h.tick_all();
    assert_eq!(h.nodes[&head].stats().expired, 1, "the head ordered the delete");
    assert_eq!(h.request(head.0, get("k")), None, "held back at the head");
    h.drop_to.clear();
    h.tick_all();
    h.tick_all();
    assert!(h.replies.values().any(|r| *r == Reply::Value(None)), "{:?}", h.replies);
    assert_eq!(h.request(tail.0, get("k")), Some(Reply::Value(None)));
}

/// A member never answers a key past its deadline on its own clock: a tail whose clock is ahead of its head's
/// keeps the reads (value, TTL, type; the long way, not at once) until the head's delete reaches it, then answers
/// them "absent". It does not call the key absent on its own clock meanwhile, which a PERSIST the head applies
/// first would contradict.
#[test]
fn a_read_past_the_deadline_waits_for_the_heads_delete() {
    let mut h = Harness::new(3, 3);
    h.set_wall(T0);
    assert_eq!(h.request(1, put_for("k", "v", 100)), Some(OK_NEW));
    let (_, _, tail) = h.members();
    h.nodes.get_mut(&tail).unwrap().set_wall_clock(T0 + 100);
    assert_eq!(h.at_once(tail, &get("k")), None, "a key with a deadline is not read at once");
    let kind = Request::Get { keyspace: KeyspaceId::DEFAULT, key: Bytes::from_static(b"k"), read: Read::Kind };
    let mut waiting = Vec::new();
    for read in [get("k"), ttl("k"), kind] {
        assert_eq!(h.request(tail.0, read), None, "the tail's clock has the key past its deadline, the head's not");
        waiting.push(RequestId(h.next_id));
    }
    h.tick_all();
    assert!(waiting.iter().all(|id| !h.replies.contains_key(id)), "still waiting: {:?}", h.replies);
    assert_eq!(h.nodes[&tail].stats().overdue_reads, 3);
    h.set_wall(T0 + 100);
    h.tick_all();
    let answers: Vec<Option<Reply>> = waiting.iter().map(|id| h.replies.remove(id)).collect();
    let absent = [Reply::Value(None), Reply::Expiry(KeyExpiry::Absent), Reply::Kind(None)];
    assert_eq!(answers, absent.map(Some).to_vec());
}

/// The head, asked for a key past its deadline, orders the delete at once rather than at its next tick: a chain
/// of one answers "absent" within the request.
#[test]
fn a_head_asked_for_a_key_past_its_deadline_deletes_it_first() {
    let mut h = Harness::new(1, 1);
    h.set_wall(T0);
    assert_eq!(h.request(1, put_for("k", "v", 100)), Some(OK_NEW));
    h.set_wall(T0 + 100);
    assert_eq!(h.request(1, get("k")), Some(Reply::Value(None)));
    assert_eq!(h.nodes[&NodeId(1)].stats().expired, 1);
}

/// A read waiting for a delete on a member that loses its place goes where a new read would.
#[test]
fn a_read_waiting_for_a_delete_follows_the_chain_when_its_member_leaves() {
    let mut h = Harness::new(3, 3);
    h.set_wall(T0);
    assert_eq!(h.request(1, put_for("k", "v", 100)), Some(OK_NEW));
    let (_, mid, tail) = h.members();
    h.nodes.get_mut(&tail).unwrap().set_wall_clock(T0 + 100);
    assert_eq!(h.request(mid.0, get("k")), None);
    let id = RequestId(h.next_id);
    h.remove(tail.0);
    h.tick_all();
    assert!(!h.replies.contains_key(&id), "bounced back to its front-end, which tries again at its next tick");
    h.tick_all();
    assert_eq!(h.replies.remove(&id), Some(value("v")), "the new tail's clock has the key live");
}
