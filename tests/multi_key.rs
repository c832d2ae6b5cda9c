//! Multi-key commands of 100,000 keys through every node of a real three-node cluster: MSET, MGET, EXISTS and
//! DEL answer in full and no message to a peer is dropped on the way. An MSET of 8,000 new keys through one node
//! of three used to overflow its queues to the others (4,096 messages each), time out after 2 s and leave
//! hundreds of its keys unwritten; a command now keeps `MULTI_KEY_WINDOW` of its requests in the core at once.

mod support;

use std::time::Duration;
use support::resp::{Conn, Resp};
use support::Cluster;

const KEYS: usize = 100_000;

/// The value of `meridian_peer_messages_dropped_total` on a node's `/metrics` page.
fn peer_drops(page: &str) -> u64 {
    let line = page.lines().find(|l| l.starts_with("meridian_peer_messages_dropped_total")).expect("the metric");
    line.rsplit(' ').next().and_then(|n| n.parse().ok()).expect("a count")
}

#[test]
fn commands_of_a_hundred_thousand_keys_work_through_any_node() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let conn = |i: usize| Conn::connect(cluster.servers[i].resp, Duration::from_secs(60)).unwrap();
    let keys: Vec<String> = (0..KEYS).map(|i| format!("key:{i}")).collect();

    let mut mset = vec!["MSET".to_string()];
    keys.iter().for_each(|k| mset.extend([k.clone(), format!("value of {k}")]));
    assert_eq!(conn(0).cmd(&mset).unwrap(), Resp::Simple("OK".into()));

    let mut mget = vec!["MGET".to_string()];
    mget.extend(keys.iter().cloned());
    let Resp::Array(Some(values)) = conn(1).cmd(&mget).unwrap() else { panic!("MGET answers an array") };
    assert_eq!(values.len(), KEYS);
    for (key, value) in keys.iter().zip(&values) {
        assert_eq!(value, &Resp::Bulk(Some(format!("value of {key}").into_bytes())), "{key}");
    }

    let with = |command: &str| [command.to_string()].into_iter().chain(keys.iter().cloned()).collect::<Vec<_>>();
    assert_eq!(conn(2).cmd(&with("EXISTS")).unwrap(), Resp::Int(KEYS as i64));
    assert_eq!(conn(2).cmd(&with("DEL")).unwrap(), Resp::Int(KEYS as i64));
    assert_eq!(conn(0).cmd(&with("EXISTS")).unwrap(), Resp::Int(0));

    for server in &cluster.servers {
        assert_eq!(peer_drops(&server.http_get("/metrics")), 0, "node {} dropped peer messages", server.id);
    }
}
