//! Cache mode: a chain's head evicts its least recently written keys, through the chain, once the chain holds
//! more than its share of the keyspace's cap (docs/keyspaces.md, "Cache mode").

use super::*;
use crate::stores::ledger::KEY_OVERHEAD;

/// What one key of `n` bytes and a one-byte value costs the cap (the stored value has a one-byte header).
fn cost(key: &str) -> u64 {
    key.len() as u64 + 1 + KEY_OVERHEAD
}

fn cache(keys: u64) -> Harness {
    let maxmemory = Some(keys * cost("k0"));
    Harness::with_config(3, meridian_core::KeyspaceConfig { maxmemory, ..meridian_core::KeyspaceConfig::durable(3) })
}

fn memory(h: &Harness, node: NodeId) -> u64 {
    h.nodes[&node].cache_bytes(ChainId(0)).unwrap()
}

#[test]
fn the_head_evicts_the_least_recently_written_keys_through_the_chain() {
    let mut h = cache(3);
    for i in 0..3 {
        h.written(1, &format!("k{i}"), "v");
    }
    assert_eq!(h.request(1, put("k0", "w")), Some(Reply::Written { applied: true, existed: true }));
    h.written(1, "k3", "v");
    for via in 1..=3 {
        assert_eq!(h.request(via, get("k1")), Some(Reply::Value(None)), "k1 was the least recently written");
        assert_eq!(h.request(via, get("k0")), Some(value("w")), "rewriting k0 made it recent");
    }
    let members = h.chain().members.clone();
    assert!(members.iter().all(|&m| memory(&h, m) == 3 * cost("k0")), "every member holds the same three keys");
    assert_eq!(h.nodes[&members[0]].stats().evicted, 1);
    let lus: Vec<u64> = members.iter().map(|m| h.lu(m.0)).collect();
    assert_eq!(lus, vec![6, 6, 6], "five writes and one eviction, in the same order everywhere");
}

#[test]
fn a_new_head_knows_what_the_chain_holds() {
    let mut h = cache(2);
    h.written(1, "k0", "v");
    h.written(1, "k1", "v");
    let (head, mid, _) = h.members();
    h.remove(head.0);
    assert_eq!(memory(&h, mid), 2 * cost("k0"));
    h.written(mid.0, "k2", "v");
    assert_eq!(h.request(mid.0, get("k0")), Some(Reply::Value(None)));
    assert_eq!(h.nodes[&mid].stats().evicted, 1);
}
