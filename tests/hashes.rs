//! Redis' hash commands on a real three-node chain: each answers as Redis does, through any node; a hash and
//! a string refuse each other's commands with WRONGTYPE (and TYPE tells them apart); a hash keeps its expiry and goes with its last field.

mod support;

use support::resp::{bulk, Resp};
use support::Cluster;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn hash_commands_answer_as_redis_does() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let (mut c, mut other) = (cluster.conn(0), cluster.conn(2));
    let mut cmd = |args: &[&str]| c.cmd(args).unwrap();

    assert_eq!(cmd(&["HSET", "h", "a", "1", "b", "2"]), Resp::Int(2));
    assert_eq!(cmd(&["HSET", "h", "b", "3", "c", "4"]), Resp::Int(1), "only c is new");
    assert_eq!(cmd(&["HMSET", "h", "d", "5"]), Resp::Simple("OK".into()));
    assert_eq!(other.cmd(&["HGET", "h", "b"]).unwrap(), bulk("3"));
    assert_eq!(cmd(&["HGET", "h", "zz"]), Resp::Bulk(None));
    assert_eq!(cmd(&["HMGET", "h", "a", "zz", "d"]), Resp::Array(Some(vec![bulk("1"), Resp::Bulk(None), bulk("5")])));
    let all = ["a", "1", "b", "3", "c", "4", "d", "5"].map(bulk).to_vec();
    assert_eq!(other.cmd(&["HGETALL", "h"]).unwrap(), Resp::Array(Some(all)));
    assert_eq!(cmd(&["HLEN", "h"]), Resp::Int(4));
    assert_eq!(cmd(&["HEXISTS", "h", "c"]), Resp::Int(1));
    assert_eq!(cmd(&["HEXISTS", "h", "zz"]), Resp::Int(0));
    assert_eq!(cmd(&["HDEL", "h", "a", "zz"]), Resp::Int(1));
    assert_eq!(cmd(&["HLEN", "missing"]), Resp::Int(0));
    assert_eq!(cmd(&["HGETALL", "missing"]), Resp::Array(Some(vec![])));
    assert_eq!(cmd(&["HSET", "h", "odd"]), Resp::Error("ERR wrong number of arguments for 'hset' command".into()));

    // A hash and a string refuse each other's commands; EXISTS, EXPIRE, TTL and DEL take both; SET replaces.
    assert_eq!(cmd(&["SET", "s", "v"]), Resp::Simple("OK".into()));
    assert_eq!(cmd(&["HSET", "s", "f", "v"]), Resp::Error(WRONGTYPE.into()));
    assert_eq!(cmd(&["HGET", "s", "f"]), Resp::Error(WRONGTYPE.into()));
    assert_eq!(cmd(&["GET", "h"]), Resp::Error(WRONGTYPE.into()));
    assert_eq!(cmd(&["TYPE", "h"]), Resp::Simple("hash".into()));
    assert_eq!(cmd(&["TYPE", "s"]), Resp::Simple("string".into()));
    assert_eq!(cmd(&["TYPE", "nothing-here"]), Resp::Simple("none".into()));
    assert_eq!(cmd(&["INCR", "h"]), Resp::Error(WRONGTYPE.into()));
    assert_eq!(cmd(&["GETDEL", "h"]), Resp::Error(WRONGTYPE.into()));
    assert_eq!(cmd(&["HLEN", "h"]), Resp::Int(3), "refusals changed nothing");
    assert_eq!(cmd(&["MGET", "s", "h"]), Resp::Array(Some(vec![bulk("v"), Resp::Bulk(None)])));
    assert_eq!(cmd(&["EXISTS", "h", "s", "missing"]), Resp::Int(2));
    assert_eq!(cmd(&["EXPIRE", "h", "100"]), Resp::Int(1));
    assert_eq!(cmd(&["HSET", "h", "e", "6"]), Resp::Int(1));
    assert!(matches!(cmd(&["TTL", "h"]), Resp::Int(t) if (90..=100).contains(&t)), "HSET keeps the expiry");
    assert_eq!(cmd(&["HDEL", "h", "b", "c", "d", "e"]), Resp::Int(4));
    assert_eq!(other.cmd(&["EXISTS", "h"]).unwrap(), Resp::Int(0), "the last field took the key with it");
    assert_eq!(cmd(&["HSET", "s2", "f", "v"]), Resp::Int(1));
    assert_eq!(cmd(&["SET", "s2", "plain"]), Resp::Simple("OK".into()));
    assert_eq!(cmd(&["GET", "s2"]), bulk("plain"), "SET replaces a hash");
    assert_eq!(cmd(&["DEL", "s2", "s"]), Resp::Int(2));
}

/// HSETNX, HINCRBY and HINCRBYFLOAT, decided at the key's head, answered as Redis answers them through any node.
#[test]
fn hash_counters_and_set_if_absent_answer_as_redis_does() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let (mut c, mut other) = (cluster.conn(0), cluster.conn(1));
    let mut cmd = |args: &[&str]| c.cmd(args).unwrap();
    let error = |e: &str| Resp::Error(e.to_string());

    assert_eq!(cmd(&["HSETNX", "h", "f", "1"]), Resp::Int(1));
    assert_eq!(cmd(&["HSETNX", "h", "f", "2"]), Resp::Int(0));
    assert_eq!(other.cmd(&["HGET", "h", "f"]).unwrap(), bulk("1"));
    assert_eq!(cmd(&["HINCRBY", "h", "f", "41"]), Resp::Int(42));
    assert_eq!(cmd(&["HINCRBY", "h", "new", "-5"]), Resp::Int(-5));
    assert_eq!(cmd(&["HINCRBY", "h", "f", "x"]), error("ERR value is not an integer or out of range"));
    assert_eq!(cmd(&["HINCRBY", "h", "f", "9223372036854775807"]), error("ERR increment or decrement would overflow"));
    assert_eq!(cmd(&["HSET", "h", "word", "hello"]), Resp::Int(1));
    assert_eq!(cmd(&["HINCRBY", "h", "word", "1"]), error("ERR hash value is not an integer"));
    assert_eq!(cmd(&["HINCRBYFLOAT", "h", "fl", "10.5"]), bulk("10.5"));
    assert_eq!(cmd(&["HINCRBYFLOAT", "h", "fl", "0.1"]), bulk("10.6"));
    assert_eq!(cmd(&["HINCRBYFLOAT", "h", "word", "1"]), error("ERR hash value is not a float"));
    assert_eq!(cmd(&["HINCRBYFLOAT", "h", "fl", "abc"]), error("ERR value is not a valid float"));
    assert_eq!(other.cmd(&["HGET", "h", "fl"]).unwrap(), bulk("10.6"));
    assert_eq!(cmd(&["SET", "s", "v"]), Resp::Simple("OK".into()));
    assert_eq!(cmd(&["HSETNX", "s", "f", "v"]), error(WRONGTYPE));
    assert_eq!(cmd(&["HINCRBY", "s", "f", "1"]), error(WRONGTYPE));
}
