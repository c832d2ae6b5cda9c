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

/// The keys of a page from the ring's start, COUNT 10, through `via`, and the node that answered it from its
/// store.
fn page_keys(h: &mut Harness, via: NodeId) -> (Option<Vec<Bytes>>, Option<NodeId>) {
    h.nodes.values_mut().flat_map(|n| n.replicas.values_mut()).for_each(|r| r.answered = None);
    let keys = h.request(via.0, scan(0, ScanWant::Keys(10))).map(|r| scanned(Some(r)).keys);
    let by = h.nodes.iter().find(|(_, n)| n.answered(Time::ZERO).next().is_some()).map(|(&id, _)| id);
    (keys, by)
}

/// A page is held to what a GET of each of its keys is: a head answering reads under `su` does not show a write
/// the tail has not acknowledged, but sends the page to the tail (`page_elsewhere`).
#[test]
fn a_head_that_answers_reads_sends_pages_over_tentative_writes_to_the_tail() {
    let mut h = Harness::with_config(3, keyspace(meridian_core::UpdateMode::Su, meridian_core::QueryNode::Head));
    h.written(1, "k", "v1");
    let (head, mid, _) = h.members();
    h.drop_to = vec![mid];
    assert_eq!(h.request(head.0, del("k")), None, "stuck at the head");
    let tail = h.chain().tail().unwrap();
    assert_eq!(page_keys(&mut h, head), (Some(vec![Bytes::from_static(b"k")]), Some(tail)), "the committed state");
    h.drop_to.clear();
    h.tick_all();
    h.tick_all();
    assert_eq!(page_keys(&mut h, head), (Some(vec![]), Some(head)), "the delete once committed, at the head");
}

/// Under `ausi`, a member after the head that holds an invalidation of a key in the page's range sends the page
/// to the head, which has the write; the head itself leaves a page over a write not yet invalidated everywhere
/// to the front-end's next try.
#[test]
fn ausi_pages_over_invalidated_keys_are_answered_by_the_head() {
    let mut h = Harness::with_config(3, ausi(meridian_core::QueryNode::Tail));
    h.written(1, "k", "v1");
    let (head, _, tail) = h.members();
    h.written(1, "other", "o1");
    let r = h.nodes.get_mut(&tail).unwrap().replicas.get_mut(&ChainId(0)).unwrap();
    r.invalid.insert(Bytes::from_static(b"k"), r.lu + 1);
    let (keys, by) = page_keys(&mut h, tail);
    assert_eq!((keys.map(|k| k.len()), by), (Some(2), Some(head)), "the head answered it");

    let mut h = Harness::with_config(3, ausi(meridian_core::QueryNode::Head));
    h.written(1, "k", "v1");
    let (head, _, tail) = h.members();
    h.drop_to = vec![tail];
    assert!(matches!(h.request(head.0, put("k", "v2")), None | Some(Reply::Written { .. })));
    assert_eq!(page_keys(&mut h, head), (None, None), "left for the front-end's next tick");
    h.drop_to.clear();
    let answered = |h: &Harness| h.replies.values().any(|r| matches!(r, Reply::Scanned(s) if s.keys == [&b"k"[..]]));
    for _ in 0..5 {
        h.tick_all();
    }
    assert!(answered(&h), "answered once the write is invalidated everywhere: {:?}", h.replies);
}
