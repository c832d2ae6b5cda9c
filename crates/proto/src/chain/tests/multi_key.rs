//! Writes of several keys (RENAME, COPY, MSETNX): one update, logged by every member as one group of records,
//! resent whole, and rebuilt whole from the log after a restart.

use super::*;
use meridian_core::{Ttl, WriteOp};

fn rename(from: &str, to: &str) -> Request {
    let op = WriteOp::Rename { to: Bytes::from(to.to_string()), replace: true };
    Request::Write(Write::new(KeyspaceId::DEFAULT, Bytes::from(from.to_string()), op))
}

fn msetnx(pairs: &[(&str, &str)]) -> Request {
    let pairs: Vec<(Bytes, Bytes)> =
        pairs.iter().map(|(k, v)| (Bytes::from(k.to_string()), Bytes::from(v.to_string()))).collect();
    Request::Write(Write::new(KeyspaceId::DEFAULT, pairs[0].0.clone(), WriteOp::SetAllAbsent(pairs)))
}

/// What `node`'s store holds for `key`, taken apart: None if absent or deleted.
fn held(h: &Harness, node: NodeId, key: &str) -> Option<Bytes> {
    let store = h.nodes[&node].host.stores.get((KeyspaceId::DEFAULT, ReplicaKind::Log)).unwrap();
    store.get(key.as_bytes()).unwrap().and_then(|e| e.value).map(|v| Stored::unwrap(v).unwrap().data)
}

const APPLIED: Reply = Reply::Written { applied: true, existed: true };

#[test]
fn a_rename_reaches_every_member_as_one_update() {
    let mut h = Harness::new(3, 3);
    h.written(1, "a", "1");
    assert_eq!(h.request(2, rename("a", "b")), Some(APPLIED));
    for &m in &h.chain().members.clone() {
        assert_eq!((held(&h, m, "a"), held(&h, m, "b")), (None, Some(Bytes::from("1"))), "{m}");
        assert_eq!(h.lu(m.0), 2, "{m}: one sequence number for both keys");
    }
    assert_eq!(h.request(3, get("b")), Some(value("1")));
    let gone = h.request(1, rename("a", "c"));
    assert!(matches!(gone, Some(Reply::Error(ErrorKind::Invalid, ref m)) if m == "no such key"), "{gone:?}");
    assert_eq!(
        h.request(1, msetnx(&[("c", "1"), ("b", "2")])),
        Some(Reply::Written { applied: false, existed: false })
    );
    assert_eq!(h.request(1, msetnx(&[("c", "1"), ("d", "2")])), Some(APPLIED));
    assert_eq!((h.request(3, get("c")), h.request(3, get("d"))), (Some(value("1")), Some(value("2"))));
}

/// A member that restarts rebuilds its unacknowledged history from its log, which gives an update of several
/// keys back one record at a time: it must resend the update whole, or its successor would log half of it.
#[test]
fn an_unacknowledged_update_of_several_keys_is_resent_whole_after_a_restart() {
    let mut h = Harness::new(3, 3);
    let (head, mid, tail) = h.members();
    h.written(1, "a", "1");
    h.drop_to = vec![tail];
    assert_eq!(h.request(head.0, rename("a", "b")), None, "the tail never got it");
    assert_eq!(h.nodes[&mid].replicas[&ChainId(0)].unacked.back().map(|u| u.also.len()), Some(1));
    h.restart(mid);
    let rebuilt = h.nodes[&mid].replicas[&ChainId(0)].unacked.back().cloned().expect("unacknowledged");
    assert_eq!(rebuilt.keys().collect::<Vec<_>>(), [&Bytes::from("a"), &Bytes::from("b")]);
    h.drop_to.clear();
    h.tick_all();
    assert_eq!((held(&h, tail, "a"), held(&h, tail, "b")), (None, Some(Bytes::from("1"))));
    assert_eq!(h.request(tail.0, get("b")), Some(value("1")));
}

/// A key past its deadline is absent to a rename: it is refused, and the head deletes the key first.
#[test]
fn a_rename_meets_a_key_past_its_deadline_as_absent() {
    let mut h = Harness::new(3, 3);
    h.set_wall(1_000);
    let put = Write::new(KeyspaceId::DEFAULT, Bytes::from("a"), WriteOp::Put { value: "1".into(), ttl: Ttl::Clear });
    let expiring = WriteOp::Put { value: "1".into(), ttl: Ttl::Expire(meridian_core::Deadline::At(1_500)) };
    assert_eq!(h.request(1, Request::Write(Write { op: expiring, ..put })), Some(OK_NEW));
    h.set_wall(2_000);
    let gone = h.request(1, rename("a", "b"));
    assert!(matches!(gone, Some(Reply::Error(ErrorKind::Invalid, _))), "{gone:?}");
    let tail = h.members().2;
    assert_eq!(held(&h, tail, "a"), None, "deleted in order before the rename");
}
