//! Redis' read-modify-write string commands on a real three-node chain: INCR and its kin, APPEND, GETDEL,
//! SET … GET and STRLEN answer as Redis answers, through any node, and concurrent INCRs from many
//! connections lose no increment (each is ordered once, at its chain's head).

mod support;

use std::time::Duration;
use support::resp::{bulk, Conn, Resp};
use support::Cluster;

fn error(e: &str) -> Resp {
    Resp::Error(e.to_string())
}

#[test]
fn read_modify_write_commands_answer_as_redis_does() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let (mut c, mut other) = (cluster.conn(0), cluster.conn(2));
    let mut cmd = |args: &[&str]| c.cmd(args).unwrap();

    assert_eq!(cmd(&["INCR", "n"]), Resp::Int(1));
    assert_eq!(cmd(&["INCRBY", "n", "41"]), Resp::Int(42));
    assert_eq!(cmd(&["DECR", "n"]), Resp::Int(41));
    assert_eq!(cmd(&["DECRBY", "n", "-9"]), Resp::Int(50));
    assert_eq!(other.cmd(&["GET", "n"]).unwrap(), bulk("50"));
    assert_eq!(cmd(&["INCRBY", "n", "+1"]), error("ERR value is not an integer or out of range"));
    // Every integer argument is read as Redis reads one: no sign but `-`, no leading zero.
    for refused in
        [&["EXPIRE", "n", "+5"][..], &["EXPIRE", "n", "05"], &["SCAN", "0", "COUNT", "+10"], &["SELECT", "01"]]
    {
        assert_eq!(cmd(refused), error("ERR value is not an integer or out of range"), "{refused:?}");
    }
    assert_eq!(cmd(&["TTL", "n"]), Resp::Int(-1), "the refused EXPIREs changed nothing");
    assert_eq!(cmd(&["DECRBY", "n", "-9223372036854775808"]), error("ERR decrement would overflow"));
    assert_eq!(cmd(&["SET", "big", "9223372036854775807"]), Resp::Simple("OK".into()));
    assert_eq!(cmd(&["INCR", "big"]), error("ERR increment or decrement would overflow"));
    assert_eq!(cmd(&["SET", "word", "hello"]), Resp::Simple("OK".into()));
    assert_eq!(cmd(&["INCR", "word"]), error("ERR value is not an integer or out of range"));
    assert_eq!(cmd(&["GET", "word"]), bulk("hello"), "a refused INCR changes nothing");

    assert_eq!(cmd(&["APPEND", "word", " world"]), Resp::Int(11));
    assert_eq!(cmd(&["APPEND", "fresh", "abc"]), Resp::Int(3));
    assert_eq!(cmd(&["STRLEN", "word"]), Resp::Int(11));
    assert_eq!(cmd(&["STRLEN", "missing"]), Resp::Int(0));

    assert_eq!(cmd(&["SET", "word", "bye", "GET"]), bulk("hello world"));
    assert_eq!(cmd(&["SET", "word", "never", "NX", "GET"]), bulk("bye"), "NX failed, the old value still comes back");
    assert_eq!(cmd(&["SET", "unset", "v", "GET"]), Resp::Bulk(None));
    assert_eq!(cmd(&["GETDEL", "word"]), bulk("bye"));
    assert_eq!(cmd(&["GETDEL", "word"]), Resp::Bulk(None));
    assert_eq!(other.cmd(&["EXISTS", "word"]).unwrap(), Resp::Int(0));

    // INCR keeps the key's expiry, as in Redis.
    assert_eq!(cmd(&["SET", "ttl", "1", "EX", "100"]), Resp::Simple("OK".into()));
    assert_eq!(cmd(&["INCR", "ttl"]), Resp::Int(2));
    assert!(matches!(cmd(&["TTL", "ttl"]), Resp::Int(t) if (90..=100).contains(&t)));
}

#[test]
fn concurrent_increments_are_each_counted_once() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let (clients, each) = (8, 200);
    let workers: Vec<_> = (0..clients)
        .map(|i| {
            let addr = cluster.servers[i % 3].resp;
            std::thread::spawn(move || {
                let mut c = Conn::connect(addr, Duration::from_secs(5)).unwrap();
                (0..each).for_each(|_| assert!(matches!(c.cmd(&["INCR", "counter"]).unwrap(), Resp::Int(_))));
            })
        })
        .collect();
    workers.into_iter().for_each(|w| w.join().unwrap());
    let mut c = cluster.conn(1);
    assert_eq!(c.cmd(&["GET", "counter"]).unwrap(), bulk(&(clients * each).to_string()));
}

/// A pipeline is one connection's sequence: a read or write of a key sees every earlier command of the same
/// pipeline on that key, though the write goes to the key's head and the read to its tail.
#[test]
fn a_pipeline_sees_its_own_writes_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let mut c = cluster.conn(1);
    for i in 0..200 {
        c.send(&["SET", &format!("p{i}"), "first"]).unwrap();
        c.send(&["GET", &format!("p{i}")]).unwrap();
        c.send(&["SET", &format!("p{i}"), "second"]).unwrap();
        c.send(&["APPEND", &format!("p{i}"), "!"]).unwrap();
        c.send(&["GET", &format!("p{i}")]).unwrap();
    }
    for i in 0..200 {
        let replies: Vec<Resp> = (0..5).map(|_| c.read().unwrap()).collect();
        let expected =
            [Resp::Simple("OK".into()), bulk("first"), Resp::Simple("OK".into()), Resp::Int(7), bulk("second!")];
        assert_eq!(replies, expected, "key p{i}");
    }
}

/// INCRBYFLOAT, SETRANGE, GETEX and EXPIRETIME/PEXPIRETIME, through different nodes of three, answered and refused
/// as Redis answers and refuses them.
#[test]
fn float_ranges_and_expiry_commands_answer_as_redis_does() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let (mut c, mut other) = (cluster.conn(0), cluster.conn(2));
    let mut cmd = |args: &[&str]| c.cmd(args).unwrap();

    assert_eq!(cmd(&["SET", "f", "10.50"]), Resp::Simple("OK".into()));
    assert_eq!(cmd(&["INCRBYFLOAT", "f", "0.1"]), bulk("10.6"));
    assert_eq!(cmd(&["INCRBYFLOAT", "f", "-5"]), bulk("5.6"));
    assert_eq!(cmd(&["SET", "e", "5.0e3"]), Resp::Simple("OK".into()));
    assert_eq!(cmd(&["INCRBYFLOAT", "e", "2.0e2"]), bulk("5200"));
    assert_eq!(cmd(&["INCRBYFLOAT", "fresh", "3"]), bulk("3"));
    assert_eq!(cmd(&["INCRBYFLOAT", "f", "x"]), error("ERR value is not a valid float"));
    assert_eq!(cmd(&["SET", "word", "hello"]), Resp::Simple("OK".into()));
    assert_eq!(cmd(&["INCRBYFLOAT", "word", "1"]), error("ERR value is not a valid float"));
    assert_eq!(other.cmd(&["GET", "f"]).unwrap(), bulk("5.6"));

    assert_eq!(cmd(&["SET", "s", "Hello World"]), Resp::Simple("OK".into()));
    assert_eq!(cmd(&["SETRANGE", "s", "6", "Redis"]), Resp::Int(11));
    assert_eq!(other.cmd(&["GET", "s"]).unwrap(), bulk("Hello Redis"));
    assert_eq!(cmd(&["SETRANGE", "pad", "3", "ab"]), Resp::Int(5));
    assert_eq!(cmd(&["GET", "pad"]), Resp::Bulk(Some(b"\0\0\0ab".to_vec())));
    assert_eq!(cmd(&["SETRANGE", "none", "3", ""]), Resp::Int(0));
    assert_eq!(cmd(&["EXISTS", "none"]), Resp::Int(0), "nothing to write makes no key");
    assert_eq!(cmd(&["SETRANGE", "s", "-1", "x"]), error("ERR offset is out of range"));

    assert_eq!(cmd(&["GETEX", "s"]), bulk("Hello Redis"));
    assert_eq!(cmd(&["TTL", "s"]), Resp::Int(-1), "GETEX alone changes nothing");
    assert_eq!(cmd(&["GETEX", "s", "EX", "100"]), bulk("Hello Redis"));
    assert!(matches!(other.cmd(&["TTL", "s"]).unwrap(), Resp::Int(t) if (99..=100).contains(&t)));
    let Resp::Int(at) = cmd(&["EXPIRETIME", "s"]) else { panic!("EXPIRETIME is an integer") };
    let Resp::Int(at_ms) = cmd(&["PEXPIRETIME", "s"]) else { panic!("PEXPIRETIME is an integer") };
    assert_eq!(at, at_ms / 1000);
    assert_eq!(cmd(&["GETEX", "s", "PERSIST"]), bulk("Hello Redis"));
    assert_eq!(cmd(&["EXPIRETIME", "s"]), Resp::Int(-1));
    assert_eq!(cmd(&["EXPIRETIME", "missing"]), Resp::Int(-2));
    assert_eq!(cmd(&["GETEX", "missing", "PX", "10"]), Resp::Bulk(None));
    assert_eq!(cmd(&["GETEX", "s", "EX", "0"]), error("ERR invalid expire time in 'getex' command"));
    assert_eq!(cmd(&["GETEX", "s", "EX", "1", "PX", "1"]), error("ERR syntax error"));
    assert_eq!(cmd(&["HSET", "h", "f", "v"]), Resp::Int(1));
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    assert_eq!(cmd(&["GETEX", "h", "EX", "5"]), error(wrongtype));
    assert_eq!(cmd(&["TTL", "h"]), Resp::Int(-1), "a refused GETEX changes nothing");
}
