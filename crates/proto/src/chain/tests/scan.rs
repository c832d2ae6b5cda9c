//! SCAN and DBSIZE through the chain: a walk by ring position from any node, answered by the query node, that
//! survives a change of tail mid-walk (docs/resp.md, "SCAN and DBSIZE").

use super::*;
use meridian_core::{Scan, ScanWant, Scanned};
use std::collections::BTreeSet;

fn scan(from: u64, want: ScanWant) -> Request {
    Request::Scan(Scan { keyspace: KeyspaceId::DEFAULT, from, want, pattern: None, kind: None })
}

fn scanned(reply: Option<Reply>) -> Scanned {
    match reply {
        Some(Reply::Scanned(s)) => s,
        other => panic!("not a scan's answer: {other:?}"),
    }
}

/// Walks the ring through node `via`, COUNT `count`, calling `between` after every answer.
fn walk(h: &mut Harness, via: u32, count: usize, mut between: impl FnMut(&mut Harness)) -> Vec<Bytes> {
    let (mut from, mut keys) = (Some(0), Vec::new());
    while let Some(f) = from {
        let s = scanned(h.request(via, scan(f, ScanWant::Keys(count))));
        assert!(s.examined <= count as u64, "no key shares a token here, so COUNT bounds an answer");
        keys.extend(s.keys);
        from = s.next;
        between(h);
    }
    keys
}

#[test]
fn a_walk_from_any_node_returns_every_key_once() {
    let mut h = Harness::new(3, 3);
    let names: BTreeSet<Bytes> = (0..40).map(|i| Bytes::from(format!("k{i}"))).collect();
    names.iter().for_each(|k| h.written(1, std::str::from_utf8(k).unwrap(), "v"));
    for via in 1..=3 {
        let keys = walk(&mut h, via, 7, |_| {});
        assert_eq!(keys.len(), names.len(), "no duplicates while nothing moves");
        assert_eq!(keys.into_iter().collect::<BTreeSet<_>>(), names);
    }
    let total = scanned(h.request(2, scan(0, ScanWant::Count)));
    assert_eq!((total.matched, total.next), (40, None), "one partition, one answer");
    // What the simulator's invariant holds the tail to, as for a GET: it answered as the tail at this view.
    let (tail, view) = (h.chain().tail().unwrap(), h.chain().view);
    assert_eq!(h.nodes[&tail].answered(Time::ZERO).collect::<Vec<_>>(), vec![(ChainId(0), view, true)]);
}

/// A ring position means the same keys whichever member answers it: removing the tail mid-walk loses none.
#[test]
fn a_walk_survives_a_change_of_tail() {
    let mut h = Harness::new(3, 3);
    let names: BTreeSet<Bytes> = (0..30).map(|i| Bytes::from(format!("k{i}"))).collect();
    names.iter().for_each(|k| h.written(1, std::str::from_utf8(k).unwrap(), "v"));
    let mut removed = false;
    let keys = walk(&mut h, 1, 4, |h| {
        if !removed {
            removed = true;
            let tail = h.chain().tail().unwrap();
            h.remove(tail.0);
        }
    });
    assert_eq!(keys.into_iter().collect::<BTreeSet<_>>(), names);
}

#[test]
fn a_query_node_without_a_lease_bounces_and_the_front_end_retries() {
    let mut h = Harness::new(3, 3);
    h.written(1, "k", "v");
    let tail = h.chain().tail().unwrap();
    h.nodes.get_mut(&tail).unwrap().leases.retain(|_, _| false);
    assert_eq!(h.request(1, scan(0, ScanWant::Count)), None, "bounced, to be retried");
    h.grant_tail();
    h.tick_all();
    let total = h.replies.values().find_map(|r| if let Reply::Scanned(s) = r { Some(s.matched) } else { None });
    assert_eq!(total, Some(1));
}
