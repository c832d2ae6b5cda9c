//! Redis 7 commands built at the front end from requests the core already answers, on a real three-node
//! cluster and through different nodes: SETNX, SETEX, PSETEX, GETSET and UNLINK; GETRANGE and SUBSTR; HKEYS,
//! HVALS, HSTRLEN and HRANDFIELD; KEYS; FLUSHDB and FLUSHALL; SELECT of a database that does not exist yet; TIME and INFO. Each reply
//! and error is the one redis-server 7.0.15 gives to the same command; redis-py and redis-cli read INFO, TIME and
//! numbered databases as they read Redis'.

mod support;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::resp::{bulk, Conn, Resp};
use support::Cluster;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn ok() -> Resp {
    Resp::Simple("OK".into())
}

fn error(text: &str) -> Resp {
    Resp::Error(text.into())
}

fn bulks(items: &[&str]) -> Resp {
    Resp::Array(Some(items.iter().map(|i| bulk(i)).collect()))
}

fn wrong_arity(command: &str) -> Resp {
    error(&format!("ERR wrong number of arguments for '{command}' command"))
}

/// An array reply's bulk strings, as text.
fn texts(reply: Resp) -> Vec<String> {
    let Resp::Array(Some(items)) = reply else { panic!("not an array: {reply:?}") };
    let text = |item: Resp| match item {
        Resp::Bulk(Some(b)) => String::from_utf8(b).unwrap(),
        other => panic!("not a bulk string: {other:?}"),
    };
    items.into_iter().map(text).collect()
}

fn sorted(reply: Resp) -> Vec<String> {
    let mut items = texts(reply);
    items.sort();
    items
}

#[test]
fn set_forms_and_unlink_answer_as_redis_does() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let (mut a, mut b, mut c) = (cluster.conn(0), cluster.conn(1), cluster.conn(2));

    assert_eq!(a.cmd(&["SETNX", "k", "v"]).unwrap(), Resp::Int(1));
    assert_eq!(b.cmd(&["SETNX", "k", "w"]).unwrap(), Resp::Int(0));
    assert_eq!(c.cmd(&["GET", "k"]).unwrap(), bulk("v"));
    assert_eq!(a.cmd(&["HSET", "hash", "f", "v"]).unwrap(), Resp::Int(1));
    assert_eq!(b.cmd(&["SETNX", "hash", "x"]).unwrap(), Resp::Int(0), "a hash is a key that exists");

    assert_eq!(a.cmd(&["SETEX", "e", "100", "v"]).unwrap(), ok());
    assert!(matches!(b.cmd(&["TTL", "e"]).unwrap(), Resp::Int(t) if (90..=100).contains(&t)));
    assert_eq!(c.cmd(&["PSETEX", "p", "100000", "v"]).unwrap(), ok());
    assert!(matches!(a.cmd(&["PTTL", "p"]).unwrap(), Resp::Int(t) if (90_000..=100_000).contains(&t)));
    for (words, refusal) in [
        (["SETEX", "e", "0", "x"], "ERR invalid expire time in 'setex' command"),
        (["SETEX", "e", "-1", "x"], "ERR invalid expire time in 'setex' command"),
        (["SETEX", "e", "9223372036854775807", "x"], "ERR invalid expire time in 'setex' command"),
        (["PSETEX", "e", "0", "x"], "ERR invalid expire time in 'psetex' command"),
        (["PSETEX", "e", "9223372036854775807", "x"], "ERR invalid expire time in 'psetex' command"),
        (["SETEX", "e", "soon", "x"], "ERR value is not an integer or out of range"),
    ] {
        assert_eq!(b.cmd(&words).unwrap(), error(refusal), "{words:?}");
    }
    assert_eq!(c.cmd(&["GET", "e"]).unwrap(), bulk("v"), "the refusals wrote nothing");

    assert_eq!(c.cmd(&["GETSET", "e", "new"]).unwrap(), bulk("v"));
    assert_eq!(a.cmd(&["TTL", "e"]).unwrap(), Resp::Int(-1), "GETSET clears the expiry, as SET does");
    assert_eq!(b.cmd(&["GET", "e"]).unwrap(), bulk("new"));
    assert_eq!(a.cmd(&["GETSET", "fresh", "v"]).unwrap(), Resp::Bulk(None));
    assert_eq!(c.cmd(&["GET", "fresh"]).unwrap(), bulk("v"));
    assert_eq!(b.cmd(&["GETSET", "hash", "x"]).unwrap(), error(WRONGTYPE));
    assert_eq!(a.cmd(&["HGET", "hash", "f"]).unwrap(), bulk("v"), "the refused GETSET left the hash");
    assert_eq!(c.cmd(&["SETEX", "hash", "100", "s"]).unwrap(), ok(), "SETEX replaces a hash, as SET does");
    assert_eq!(a.cmd(&["GET", "hash"]).unwrap(), bulk("s"));

    assert_eq!(b.cmd(&["UNLINK", "k", "e", "missing", "fresh"]).unwrap(), Resp::Int(3));
    assert_eq!(c.cmd(&["EXISTS", "k", "e", "fresh"]).unwrap(), Resp::Int(0));

    for (words, command) in [
        (&["SETNX", "k"][..], "setnx"),
        (&["SETEX", "k", "10"], "setex"),
        (&["PSETEX", "k", "1", "v", "extra"], "psetex"),
        (&["GETSET", "k"], "getset"),
        (&["UNLINK"], "unlink"),
    ] {
        assert_eq!(a.cmd(words).unwrap(), wrong_arity(command), "{words:?}");
    }
}

#[test]
fn getrange_and_substr_slice_as_redis_does() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let (mut a, mut b, mut c) = (cluster.conn(0), cluster.conn(1), cluster.conn(2));
    assert_eq!(a.cmd(&["SET", "s", "hello world"]).unwrap(), ok());
    assert_eq!(a.cmd(&["SET", "empty", ""]).unwrap(), ok());
    assert_eq!(a.cmd(&["HSET", "hash", "f", "v"]).unwrap(), Resp::Int(1));

    for (start, end, slice) in [
        ("0", "4", "hello"),
        ("-5", "-1", "world"),
        ("0", "-1", "hello world"),
        ("-1", "-5", ""),
        ("5", "1", ""),
        ("100", "200", ""),
        ("-100", "100", "hello world"),
        ("0", "9223372036854775807", "hello world"),
        ("-9223372036854775808", "0", "h"),
    ] {
        assert_eq!(b.cmd(&["GETRANGE", "s", start, end]).unwrap(), bulk(slice), "GETRANGE s {start} {end}");
    }
    assert_eq!(c.cmd(&["SUBSTR", "s", "6", "-1"]).unwrap(), bulk("world"));
    assert_eq!(c.cmd(&["GETRANGE", "missing", "0", "-1"]).unwrap(), bulk(""), "an empty string, not nil");
    assert_eq!(b.cmd(&["GETRANGE", "empty", "0", "-1"]).unwrap(), bulk(""));
    assert_eq!(a.cmd(&["GETRANGE", "hash", "0", "1"]).unwrap(), error(WRONGTYPE));
    let not_an_integer = error("ERR value is not an integer or out of range");
    assert_eq!(b.cmd(&["GETRANGE", "s", "x", "1"]).unwrap(), not_an_integer);
    assert_eq!(b.cmd(&["SUBSTR", "hash", "0", "1.5"]).unwrap(), not_an_integer, "indexes are read before the key");
    assert_eq!(c.cmd(&["GETRANGE", "s", "0"]).unwrap(), wrong_arity("getrange"));
    assert_eq!(c.cmd(&["SUBSTR", "s", "0", "1", "2"]).unwrap(), wrong_arity("substr"));
}

#[test]
fn hash_reads_answer_as_redis_does() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let (mut a, mut b, mut c) = (cluster.conn(0), cluster.conn(1), cluster.conn(2));
    assert_eq!(a.cmd(&["HSET", "h", "a", "1", "b", "22", "c", "333"]).unwrap(), Resp::Int(3));
    assert_eq!(a.cmd(&["SET", "s", "v"]).unwrap(), ok());

    assert_eq!(b.cmd(&["HKEYS", "h"]).unwrap(), bulks(&["a", "b", "c"]));
    assert_eq!(c.cmd(&["HVALS", "h"]).unwrap(), bulks(&["1", "22", "333"]));
    assert_eq!(b.cmd(&["HSTRLEN", "h", "c"]).unwrap(), Resp::Int(3));
    assert_eq!(b.cmd(&["HSTRLEN", "h", "zz"]).unwrap(), Resp::Int(0));
    assert_eq!(c.cmd(&["HSTRLEN", "missing", "a"]).unwrap(), Resp::Int(0));
    assert_eq!(c.cmd(&["HKEYS", "missing"]).unwrap(), bulks(&[]));
    assert_eq!(a.cmd(&["HVALS", "missing"]).unwrap(), bulks(&[]));
    for words in
        [&["HKEYS", "s"][..], &["HVALS", "s"], &["HSTRLEN", "s", "a"], &["HRANDFIELD", "s"], &["HRANDFIELD", "s", "0"]]
    {
        assert_eq!(b.cmd(words).unwrap(), error(WRONGTYPE), "{words:?}");
    }

    let fields: BTreeSet<String> = ["a", "b", "c"].map(String::from).into();
    let value_of = |f: &str| match f {
        "a" => "1",
        "b" => "22",
        _ => "333",
    };
    assert_eq!(c.cmd(&["HRANDFIELD", "missing"]).unwrap(), Resp::Bulk(None));
    assert_eq!(c.cmd(&["HRANDFIELD", "missing", "3"]).unwrap(), bulks(&[]));
    assert_eq!(a.cmd(&["HRANDFIELD", "missing", "-3", "WITHVALUES"]).unwrap(), bulks(&[]));
    assert_eq!(a.cmd(&["HRANDFIELD", "h", "0"]).unwrap(), bulks(&[]));
    let Resp::Bulk(Some(one)) = b.cmd(&["HRANDFIELD", "h"]).unwrap() else { panic!("one field") };
    assert!(fields.contains(&String::from_utf8(one).unwrap()));
    let two = texts(c.cmd(&["HRANDFIELD", "h", "2"]).unwrap());
    assert!(two.len() == 2 && two[0] != two[1] && two.iter().all(|f| fields.contains(f)), "{two:?}");
    assert_eq!(a.cmd(&["HRANDFIELD", "h", "5"]).unwrap(), bulks(&["a", "b", "c"]), "the whole hash");
    assert_eq!(b.cmd(&["hrandfield", "h", "3", "withvalues"]).unwrap(), bulks(&["a", "1", "b", "22", "c", "333"]));
    let repeated = texts(c.cmd(&["HRANDFIELD", "h", "-7"]).unwrap());
    assert!(repeated.len() == 7 && repeated.iter().all(|f| fields.contains(f)), "{repeated:?}");
    let pairs = texts(a.cmd(&["HRANDFIELD", "h", "-4", "WithValues"]).unwrap());
    assert_eq!(pairs.len(), 8);
    assert!(pairs.chunks(2).all(|p| fields.contains(&p[0]) && p[1] == value_of(&p[0])), "{pairs:?}");

    for (words, refusal) in [
        (&["HRANDFIELD", "h", "x"][..], "ERR value is not an integer or out of range"),
        (&["HRANDFIELD", "h", "1", "bogus"], "ERR syntax error"),
        (&["HRANDFIELD", "missing", "1", "withvalues", "x"], "ERR syntax error"),
        (
            &["HRANDFIELD", "h", "-9223372036854775808"],
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ),
        (&["HRANDFIELD", "h", "4611686018427387904", "WITHVALUES"], "ERR value is out of range"),
        (&["HRANDFIELD", "h", "-4611686018427387904", "WITHVALUES"], "ERR value is out of range"),
        (&["HRANDFIELD"], "ERR wrong number of arguments for 'hrandfield' command"),
        (&["HKEYS"], "ERR wrong number of arguments for 'hkeys' command"),
        (&["HVALS", "h", "x"], "ERR wrong number of arguments for 'hvals' command"),
        (&["HSTRLEN", "h"], "ERR wrong number of arguments for 'hstrlen' command"),
    ] {
        assert_eq!(b.cmd(words).unwrap(), error(refusal), "{words:?}");
    }
}

/// KEYS lists the matching keys of the selected keyspace alone, whichever node it asks.
#[test]
fn keys_lists_the_selected_keyspace_as_redis_does() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let (mut a, mut b, mut c) = (cluster.conn(0), cluster.conn(1), cluster.conn(2));
    assert_eq!(a.cmd(&["MSET", "user:1", "a", "user:2", "b", "other", "c"]).unwrap(), ok());
    assert_eq!(a.cmd(&["HSET", "user:h", "f", "v"]).unwrap(), Resp::Int(1));
    assert_eq!(sorted(b.cmd(&["KEYS", "user:*"]).unwrap()), ["user:1", "user:2", "user:h"]);
    assert_eq!(sorted(c.cmd(&["KEYS", "*"]).unwrap()), ["other", "user:1", "user:2", "user:h"]);
    assert_eq!(sorted(a.cmd(&["KEYS", "user:[12]"]).unwrap()), ["user:1", "user:2"]);
    assert_eq!(b.cmd(&["KEYS", "nothing*"]).unwrap(), bulks(&[]));
    assert_eq!(b.cmd(&["KEYS"]).unwrap(), wrong_arity("keys"));
    cluster.servers[0].ctl(&["keyspace", "create", "cache", "--replicas", "log"]);
    select_once_known(&mut b, "cache");
    assert_eq!(b.cmd(&["KEYS", "*"]).unwrap(), bulks(&[]));
    assert_eq!(b.cmd(&["SET", "in-cache", "x"]).unwrap(), ok());
    assert_eq!(b.cmd(&["KEYS", "*"]).unwrap(), bulks(&["in-cache"]));
    assert_eq!(c.cmd(&["KEYS", "in-*"]).unwrap(), bulks(&[]), "c is still in default");
}

/// FLUSHDB empties the selected keyspace alone, over every chain and whichever node it asks, and a command
/// pipelined right after it is not flushed; FLUSHALL empties every keyspace.
#[test]
fn flushdb_and_flushall_empty_one_keyspace_or_all() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let (mut a, mut b, mut c) = (cluster.conn(0), cluster.conn(1), cluster.conn(2));
    let mset: Vec<String> = (0..2_000).flat_map(|i| [format!("k{i}"), "v".to_string()]).collect();
    let mset: Vec<&str> = ["MSET"].into_iter().chain(mset.iter().map(String::as_str)).collect();
    assert_eq!(a.cmd(&mset).unwrap(), ok());
    assert_eq!(b.cmd(&["SELECT", "3"]).unwrap(), ok());
    assert_eq!(b.cmd(&["SET", "in-db3", "x"]).unwrap(), ok());
    assert_eq!(c.cmd(&["DBSIZE"]).unwrap(), Resp::Int(2_000));
    assert_eq!(c.cmd(&["FLUSHDB", "ASYNC", "now"]).unwrap(), error("ERR syntax error"));
    assert_eq!(c.cmd(&["DBSIZE"]).unwrap(), Resp::Int(2_000), "a refused FLUSHDB deleted nothing");
    c.send(&["FLUSHDB"]).unwrap();
    c.send(&["SET", "after", "y"]).unwrap();
    assert_eq!((c.read().unwrap(), c.read().unwrap()), (ok(), ok()));
    assert_eq!(sorted(a.cmd(&["KEYS", "*"]).unwrap()), ["after"], "flushed, but for the SET after it");
    assert_eq!(b.cmd(&["DBSIZE"]).unwrap(), Resp::Int(1), "db3 is another keyspace");
    assert_eq!(b.cmd(&["FLUSHALL", "SYNC"]).unwrap(), ok());
    assert_eq!((a.cmd(&["DBSIZE"]).unwrap(), b.cmd(&["DBSIZE"]).unwrap()), (Resp::Int(0), Resp::Int(0)));
    assert_eq!(a.cmd(&["GET", "after"]).unwrap(), Resp::Bulk(None));
}

/// SELECT makes Redis' numbered databases on demand: by number from any node, the same database whichever node
/// made it, never two numbers for one keyspace, and a keyspace made with `meridian ctl` still chosen by its
/// number.
/// Selects `keyspace` on `c` once its node knows it: ctl answers once the node it asked has the keyspace, and
/// another node resolves names by its own map, which learns it a moment later.
fn select_once_known(c: &mut Conn, keyspace: &str) {
    let start = Instant::now();
    while c.cmd(&["KEYSPACE", keyspace]).unwrap() != ok() {
        assert!(start.elapsed() < Duration::from_secs(10), "the node never learned keyspace {keyspace}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn select_makes_numbered_databases_on_demand() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let (mut a, mut b, mut c) = (cluster.conn(0), cluster.conn(1), cluster.conn(2));
    assert_eq!(a.cmd(&["SET", "in-default", "x"]).unwrap(), ok());

    // `cache`, made with ctl, is keyspace number 1: SELECT 1 still chooses it.
    assert_eq!(
        cluster.servers[0].ctl(&["keyspace", "create", "cache", "--replicas", "log"]).trim(),
        "created keyspace cache (number 1)"
    );
    select_once_known(&mut b, "cache");
    assert_eq!(b.cmd(&["SELECT", "0"]).unwrap(), ok());
    assert_eq!(b.cmd(&["SELECT", "1"]).unwrap(), ok());
    assert_eq!(b.cmd(&["SET", "in-cache", "x"]).unwrap(), ok());
    assert_eq!(b.cmd(&["KEYSPACE", "cache"]).unwrap(), ok());
    assert_eq!(b.cmd(&["KEYS", "*"]).unwrap(), bulks(&["in-cache"]));

    // Database 9 does not exist: the first SELECT 9 makes it (as keyspace number 2), on any node.
    assert_eq!(b.cmd(&["SELECT", "9"]).unwrap(), ok());
    assert_eq!(b.cmd(&["KEYS", "*"]).unwrap(), bulks(&[]));
    assert_eq!(b.cmd(&["SET", "only9", "x"]).unwrap(), ok());
    assert_eq!(c.cmd(&["SELECT", "9"]).unwrap(), ok());
    assert_eq!(c.cmd(&["GET", "only9"]).unwrap(), bulk("x"));
    assert_eq!(c.cmd(&["DBSIZE"]).unwrap(), Resp::Int(1));
    assert_eq!(a.cmd(&["KEYSPACE", "db9"]).unwrap(), ok(), "KEYSPACE names it");
    assert_eq!(a.cmd(&["GET", "only9"]).unwrap(), bulk("x"));
    // Number 2 is db9's keyspace number, not database 2: SELECT 2 makes a database of its own.
    assert_eq!(a.cmd(&["SELECT", "2"]).unwrap(), ok());
    assert_eq!(a.cmd(&["GET", "only9"]).unwrap(), Resp::Bulk(None));
    assert_eq!(a.cmd(&["SELECT", "0"]).unwrap(), ok());
    assert_eq!(a.cmd(&["KEYS", "*"]).unwrap(), bulks(&["in-default"]));

    // Two nodes selecting a new number at once end up in one database.
    b.send(&["SELECT", "4"]).unwrap();
    c.send(&["SELECT", "4"]).unwrap();
    assert_eq!((b.read().unwrap(), c.read().unwrap()), (ok(), ok()));
    assert_eq!(b.cmd(&["SET", "shared", "4"]).unwrap(), ok());
    assert_eq!(c.cmd(&["GET", "shared"]).unwrap(), bulk("4"));

    assert_eq!(a.cmd(&["SELECT", "15"]).unwrap(), ok());
    for n in ["16", "-1", "4294967296"] {
        assert_eq!(a.cmd(&["SELECT", n]).unwrap(), error("ERR DB index is out of range"), "SELECT {n}");
    }
    assert_eq!(a.cmd(&["SELECT", "01"]).unwrap(), error("ERR value is not an integer or out of range"));
    assert_eq!(a.cmd(&["DBSIZE"]).unwrap(), Resp::Int(0), "still in database 15");
    let list = cluster.servers[2].ctl(&["keyspace", "list"]);
    for made in ["db9", "db2", "db4", "db15"] {
        let line = list.lines().find(|l| l.split_whitespace().nth(1) == Some(made)).unwrap_or_else(|| panic!("{list}"));
        assert!(line.contains("log,log,log"), "{made} has default's configuration: {list}");
    }

    // A Redis client's database number works unchanged.
    assert_eq!(cluster.servers[0].redis_cli(7, &["SET", "cli", "seven"]), "OK");
    assert_eq!(cluster.servers[2].redis_cli(7, &["GET", "cli"]), "seven");
    assert_eq!(c.cmd(&["SELECT", "7"]).unwrap(), ok());
    assert_eq!(c.cmd(&["KEYS", "*"]).unwrap(), bulks(&["cli"]));
}

/// TIME is the node's clock; INFO has Redis' sections with the fields clients and exporters read, and its
/// keyspace lines name databases by their SELECT number.
#[test]
fn time_and_info_answer_as_clients_expect() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let (mut a, mut b) = (cluster.conn(0), cluster.conn(1));

    let time = texts(b.cmd(&["TIME"]).unwrap());
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let (secs, micros): (u64, u64) = (time[0].parse().unwrap(), time[1].parse().unwrap());
    assert!(time.len() == 2 && secs.abs_diff(now) < 60 && micros < 1_000_000, "{time:?}");
    assert_eq!(b.cmd(&["TIME", "x"]).unwrap(), wrong_arity("time"));

    for i in 0..5 {
        assert_eq!(a.cmd(&["SET", &format!("k{i}"), "v"]).unwrap(), ok());
    }
    assert_eq!(a.cmd(&["EXPIRE", "k0", "1000"]).unwrap(), Resp::Int(1));
    assert_eq!(a.cmd(&["SET", "k1", "v", "PX", "1000000"]).unwrap(), ok());
    assert_eq!(a.cmd(&["SELECT", "3"]).unwrap(), ok());
    assert_eq!(a.cmd(&["MSET", "x", "1", "y", "2"]).unwrap(), ok());
    assert_eq!(a.cmd(&["SELECT", "5"]).unwrap(), ok(), "an empty database is not listed");
    let Resp::Bulk(Some(info)) = b.cmd(&["INFO"]).unwrap() else { panic!("INFO is a bulk string") };
    let info = String::from_utf8(info).unwrap();
    let headers: Vec<&str> = info.lines().filter(|l| l.starts_with('#')).collect();
    let sections = ["# Server", "# Clients", "# Memory", "# Persistence", "# Stats", "# Replication", "# CPU"];
    assert_eq!(headers, [&sections[..], &["# Keyspace"]].concat());
    assert!(info.starts_with("# Server\r\nredis_version:7.0.15\r\n"), "{info}");
    for line in ["role:master", "connected_slaves:0", "maxmemory:0", "blocked_clients:0"] {
        assert!(info.lines().any(|l| l == line), "{line} in {info}");
    }
    let field = |name: &str| -> f64 {
        let value = info.lines().find_map(|l| l.strip_prefix(name).and_then(|l| l.strip_prefix(':')));
        value.unwrap_or_else(|| panic!("{name} in {info}")).parse().unwrap()
    };
    assert!(field("used_memory") > 0.0 && field("used_memory_rss") > 0.0);
    assert!(field("used_cpu_sys") + field("used_cpu_user") > 0.0);
    // Every node holds a replica of every chain (three nodes, three replicas): its counts are the keyspaces'.
    assert!(
        info.ends_with("# Keyspace\r\ndb0:keys=5,expires=2,avg_ttl=0\r\ndb3:keys=2,expires=0,avg_ttl=0\r\n"),
        "{info}"
    );
    let Resp::Bulk(Some(cpu)) = b.cmd(&["INFO", "cpu"]).unwrap() else { panic!("INFO cpu") };
    assert!(String::from_utf8(cpu).unwrap().starts_with("# CPU\r\nused_cpu_sys:"));

    // redis-py reads them as from Redis.
    let server = &cluster.servers[2];
    let script = "import redis, sys\n\
        r = redis.Redis(host=sys.argv[1], port=int(sys.argv[2]))\n\
        info = r.info()\n\
        print(info['redis_version'], info['role'], info['db0']['keys'], info['db3']['keys'], info['db3']['expires'])\n\
        print(sorted(r.info('keyspace')), type(r.time()[0]).__name__, sorted(r.keys('k[0-1]')))\n";
    let out = Command::new(support::python_with("redis", "python3-redis"))
        .args(["-c", script, &server.resp.ip().to_string(), &server.resp.port().to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(printed.trim(), "7.0.15 master 5 2 0\n['db0', 'db3'] int [b'k0', b'k1']");
}
