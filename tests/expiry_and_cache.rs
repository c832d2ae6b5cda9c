//! Keys that expire, on real processes: SET with EX/PX/KEEPTTL, EXPIRE and its kin, PERSIST, TTL and PTTL
//! through Redis connections to different nodes of a three-node cluster, and keys deleted everywhere once their
//! deadline passes (docs/keyspaces.md, "Expiry and cache mode").

mod support;

use std::time::{Duration, Instant};
use support::resp::{Conn, Resp};
use support::{Cluster, Server};

fn conn(server: &Server) -> Conn {
    Conn::connect(server.resp, Duration::from_secs(5)).unwrap()
}

fn cmd(c: &mut Conn, args: &[&str]) -> Resp {
    c.cmd(args).unwrap()
}

fn int(c: &mut Conn, args: &[&str]) -> i64 {
    match cmd(c, args) {
        Resp::Int(n) => n,
        other => panic!("{args:?}: expected an integer, got {other:?}"),
    }
}

fn ok() -> Resp {
    Resp::Simple("OK".into())
}

fn bulk(v: &str) -> Resp {
    Resp::Bulk(Some(v.as_bytes().to_vec()))
}

/// Polls `key` through `c` until it is gone; returns how long that took.
fn gone_within(c: &mut Conn, key: &str, limit: Duration) -> Duration {
    let start = Instant::now();
    while cmd(c, &["GET", key]) != Resp::Bulk(None) {
        assert!(start.elapsed() < limit, "{key} still there after {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    start.elapsed()
}

#[test]
fn keys_expire_on_every_node_at_their_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let (mut a, mut b) = (conn(&cluster.servers[0]), conn(&cluster.servers[1]));

    assert_eq!(cmd(&mut a, &["SET", "short", "v", "PX", "300"]), ok());
    let pttl = int(&mut b, &["PTTL", "short"]);
    assert!((1..=300).contains(&pttl), "PTTL {pttl}");
    assert_eq!(cmd(&mut b, &["GET", "short"]), bulk("v"));
    let waited = gone_within(&mut b, "short", Duration::from_secs(3));
    assert!(waited + Duration::from_millis(pttl as u64) >= Duration::from_millis(250), "gone too early");
    assert_eq!(int(&mut a, &["TTL", "short"]), -2);

    assert_eq!(cmd(&mut a, &["SET", "long", "v", "EX", "100"]), ok());
    let ttl = int(&mut b, &["TTL", "long"]);
    assert!((99..=100).contains(&ttl), "TTL {ttl}");
    assert_eq!(cmd(&mut b, &["SET", "long", "w", "XX", "KEEPTTL"]), ok());
    assert!(int(&mut a, &["TTL", "long"]) >= 99, "KEEPTTL keeps the deadline");
    assert_eq!(int(&mut a, &["PERSIST", "long"]), 1);
    assert_eq!(int(&mut a, &["PERSIST", "long"]), 0, "nothing left to persist");
    assert_eq!(int(&mut b, &["TTL", "long"]), -1);
    assert_eq!(int(&mut b, &["PEXPIRE", "long", "200"]), 1);
    assert_eq!(int(&mut a, &["EXPIRE", "missing", "10"]), 0);
    gone_within(&mut a, "long", Duration::from_secs(3));
    assert_eq!(cmd(&mut a, &["SET", "past", "v"]), ok());
    assert_eq!(int(&mut b, &["EXPIREAT", "past", "1"]), 1, "a deadline already past deletes the key");
    assert_eq!(cmd(&mut a, &["GET", "past"]), Resp::Bulk(None));

    let invalid = cmd(&mut a, &["SET", "k", "v", "EX", "0"]);
    assert_eq!(invalid, Resp::Error("ERR invalid expire time in 'set' command".into()));
    assert!(matches!(cmd(&mut a, &["SET", "k", "v", "EX", "1", "PX", "1"]), Resp::Error(e) if e == "ERR syntax error"));
    assert_eq!(cmd(&mut a, &["GET", "k"]), Resp::Bulk(None), "a refused SET wrote nothing");
}
