//! Keys that expire and cache keyspaces, on real processes: SET with EX/PX/KEEPTTL, EXPIRE and its kin, PERSIST,
//! TTL and PTTL through Redis connections to different nodes of a three-node cluster, and keys deleted everywhere
//! once their deadline passes; a cache keyspace whose nodes stay within its cap by evicting the least recently
//! written keys (docs/keyspaces.md, "Expiry" and "Cache mode").

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
    assert_eq!(cmd(&mut b, &["GET", "short"]), Resp::bulk("v"));
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

/// Redis never returns a key past its deadline, and neither does any node here, though the head deletes expired
/// keys on its tick: a read of a key whose deadline has passed on the answering node's clock (one clock for all, on
/// one machine) waits for the key's delete. So a lock taken with SET NX PX is free again the moment it lapses.
#[test]
fn no_node_answers_a_key_past_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let mut conns: Vec<Conn> = cluster.servers.iter().map(conn).collect();
    for i in 0..12 {
        let key = format!("lock{i}");
        assert_eq!(cmd(&mut conns[i % 3], &["SET", &key, "held", "NX", "PX", "150"]), ok());
        // The deadline was fixed on the node's clock before the answer came back.
        std::thread::sleep(Duration::from_millis(151));
        let c = &mut conns[(i + 1) % 3];
        assert_eq!(cmd(c, &["GET", &key]), Resp::Bulk(None), "{key} read past its deadline");
        assert_eq!(int(c, &["EXISTS", &key]), 0);
        assert_eq!(int(c, &["PTTL", &key]), -2);
        assert_eq!(cmd(c, &["SET", &key, "other", "XX"]), Resp::Bulk(None), "XX finds the key gone");
        assert_eq!(cmd(&mut conns[(i + 2) % 3], &["SET", &key, "mine", "NX", "PX", "150"]), ok(), "free again");
    }
}

/// Redis 7's EXPIRE options and its arithmetic, through a chain of three: NX, XX, GT and LT decide against the
/// key's deadline at its head; an amount whose milliseconds overflow is refused and keeps the key; an absolute
/// deadline at the far end of time is taken.
#[test]
fn expire_options_and_limits_answer_as_redis_does() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let (mut a, mut b) = (conn(&cluster.servers[0]), conn(&cluster.servers[2]));
    assert_eq!(cmd(&mut a, &["SET", "k", "v"]), ok());
    assert_eq!(int(&mut b, &["EXPIRE", "k", "100", "XX"]), 0, "XX: no deadline yet");
    assert_eq!(int(&mut b, &["EXPIRE", "k", "100", "GT"]), 0, "GT: no deadline counts as never");
    assert_eq!(int(&mut b, &["EXPIRE", "k", "100", "nx"]), 1);
    assert_eq!(int(&mut a, &["EXPIRE", "k", "200", "NX"]), 0, "NX: it has one now");
    assert_eq!(int(&mut a, &["EXPIRE", "k", "50", "gt"]), 0);
    assert_eq!(int(&mut a, &["EXPIRE", "k", "200", "GT"]), 1);
    assert_eq!(int(&mut b, &["EXPIRE", "k", "300", "LT"]), 0);
    assert_eq!(int(&mut b, &["EXPIRE", "k", "150", "LT", "XX"]), 1);
    assert!((149..=150).contains(&int(&mut a, &["TTL", "k"])));
    assert_eq!(int(&mut a, &["PERSIST", "k"]), 1);
    assert_eq!(int(&mut a, &["EXPIRE", "k", "10", "LT"]), 1, "LT: no deadline counts as never");

    let refused = |e: &str| Resp::Error(e.to_string());
    let both = "ERR NX and XX, GT or LT options at the same time are not compatible";
    assert_eq!(cmd(&mut a, &["EXPIRE", "k", "5", "NX", "GT"]), refused(both));
    assert_eq!(
        cmd(&mut a, &["EXPIRE", "k", "5", "GT", "LT"]),
        refused("ERR GT and LT options at the same time are not compatible")
    );
    assert_eq!(cmd(&mut a, &["PEXPIRE", "k", "5", "soon"]), refused("ERR Unsupported option soon"));
    let invalid = refused("ERR invalid expire time in 'expire' command");
    assert_eq!(cmd(&mut a, &["EXPIRE", "k", "-9223372036854776"]), invalid);
    assert_eq!(cmd(&mut b, &["GET", "k"]), Resp::bulk("v"), "a refused EXPIRE keeps the key");
    assert_eq!(int(&mut a, &["PEXPIREAT", "k", "9223372036854770000"]), 1);
    assert!(int(&mut b, &["TTL", "k"]) > 1 << 52, "the far end of time");
}

/// The memory the replicas of keyspace `keyspace` hold on `server`, as the cap counts it.
fn cache_memory(server: &Server, keyspace: u64) -> u64 {
    let status = server.cluster_status();
    let replicas = status["status"]["replicas"].as_array().cloned().unwrap_or_default();
    let of_keyspace = replicas.iter().filter(|r| r["chain"].as_u64().is_some_and(|c| c / 4096 == keyspace));
    of_keyspace.map(|r| r["memory"].as_u64().expect("a cache keyspace's replica shows its memory")).sum()
}

#[test]
fn a_cache_keyspace_keeps_every_node_within_its_cap() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let first = &cluster.servers[0];
    let created =
        first.ctl(&["keyspace", "create", "sessions", "--replicas", "mem,mem", "--cache", "--maxmemory", "256kb"]);
    assert_eq!(created.trim(), "created keyspace sessions (number 1)");
    assert!(first.ctl(&["keyspace", "list"]).contains("maxmemory 256kb"));

    let mut c = conn(first);
    assert_eq!(cmd(&mut c, &["KEYSPACE", "sessions"]), ok());
    let value = "x".repeat(1000);
    for i in 0..2_000 {
        assert_eq!(cmd(&mut c, &["SET", &format!("session:{i}"), &value]), ok());
    }
    for server in &cluster.servers {
        let held = cache_memory(server, 1);
        assert!(held > 0 && held <= 256 << 10, "node {} holds {held} bytes of a 256 KiB cache", server.id);
    }
    let evicted: u64 =
        cluster.servers.iter().map(|s| s.cluster_status()["status"]["served"]["evicted"].as_u64().unwrap()).sum();
    assert!(evicted >= 1_000, "only {evicted} of 2,000 keys of 1 KB evicted to fit 256 KiB a node");
    assert_eq!(cmd(&mut c, &["GET", "session:1999"]), Resp::bulk(&value), "the newest key is kept");
    assert_eq!(cmd(&mut c, &["GET", "session:0"]), Resp::Bulk(None), "the oldest is gone");
    let mut other = conn(&cluster.servers[2]);
    assert_eq!(cmd(&mut other, &["SELECT", "1"]), ok());
    assert_eq!(cmd(&mut other, &["GET", "session:0"]), Resp::Bulk(None), "gone on every node");
}
