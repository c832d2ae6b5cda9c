//! SCAN and DBSIZE on a real three-node cluster (64 partitions): keys written through one node are all found by
//! a SCAN through another, which walks every chain of the keyspace by ring position; MATCH and TYPE filter as in
//! Redis, DBSIZE counts every key once, and another keyspace's keys are never seen. redis-py's `scan_iter`
//! walks the same cursors.

mod support;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;
use support::resp::{Conn, Resp};
use support::Cluster;

const STRINGS: usize = 1800;
const HASHES: usize = 200;

/// Sends `commands` pipelined, 500 at a time, and checks every reply.
fn pipelined(c: &mut Conn, commands: &[Vec<String>], expected: &Resp) {
    for chunk in commands.chunks(500) {
        chunk.iter().for_each(|args| c.send(args).unwrap());
        chunk.iter().for_each(|args| assert_eq!(&c.read().unwrap(), expected, "{args:?}"));
    }
}

fn words(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// Every key a full SCAN returns (with `options`), and how many times keys were returned in all.
fn scan_all(c: &mut Conn, options: &[&str]) -> (BTreeSet<String>, usize) {
    let (mut cursor, mut keys, mut returned) = ("0".to_string(), BTreeSet::new(), 0);
    for _ in 0..100_000 {
        let reply = c.cmd(&[&["SCAN", cursor.as_str()], options].concat()).unwrap();
        let Resp::Array(Some(parts)) = reply else { panic!("SCAN answered {reply:?}") };
        let [Resp::Bulk(Some(next)), Resp::Array(Some(page))] = &parts[..] else { panic!("SCAN answered {parts:?}") };
        for key in page {
            let Resp::Bulk(Some(key)) = key else { panic!("a key that is not a bulk string: {key:?}") };
            keys.insert(String::from_utf8(key.clone()).unwrap());
            returned += 1;
        }
        cursor = String::from_utf8(next.clone()).unwrap();
        if cursor == "0" {
            return (keys, returned);
        }
    }
    panic!("SCAN did not finish");
}

fn expected(prefix: &str, n: usize, matching: impl Fn(&str) -> bool) -> BTreeSet<String> {
    (0..n).map(|i| format!("{prefix}{i}")).filter(|k| matching(k)).collect()
}

#[test]
fn scan_and_dbsize_cover_every_chain_of_the_keyspace() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    assert_eq!(cluster.servers[0].ctl(&["keyspace", "create", "other"]).trim(), "created keyspace other (number 1)");
    let mut writer = cluster.conn(0);
    let strings: Vec<Vec<String>> = (0..STRINGS).map(|i| words(&["SET", &format!("s:{i}"), "v"])).collect();
    pipelined(&mut writer, &strings, &Resp::Simple("OK".into()));
    let hashes: Vec<Vec<String>> = (0..HASHES).map(|i| words(&["HSET", &format!("h:{i}"), "f", "v"])).collect();
    pipelined(&mut writer, &hashes, &Resp::Int(1));
    assert_eq!(writer.cmd(&["SELECT", "1"]).unwrap(), Resp::Simple("OK".into()));
    let others: Vec<Vec<String>> = (0..50).map(|i| words(&["SET", &format!("o:{i}"), "v"])).collect();
    pipelined(&mut writer, &others, &Resp::Simple("OK".into()));
    assert_eq!(writer.cmd(&["SET", "s:gone", "v", "PX", "1"]).unwrap(), Resp::Simple("OK".into()));
    std::thread::sleep(Duration::from_millis(20));

    let mut reader = cluster.conn(2);
    let (keys, returned) = scan_all(&mut reader, &["COUNT", "25"]);
    let all: BTreeSet<String> =
        expected("s:", STRINGS, |_| true).into_iter().chain(expected("h:", HASHES, |_| true)).collect();
    assert_eq!(keys, all, "every key once at least, and no key of another keyspace");
    assert_eq!(returned, STRINGS + HASHES, "nothing moved, so nothing was returned twice");
    assert_eq!(reader.cmd(&["DBSIZE"]).unwrap(), Resp::Int((STRINGS + HASHES) as i64));

    let (hash_keys, _) = scan_all(&mut reader, &["TYPE", "hash", "COUNT", "100"]);
    assert_eq!(hash_keys, expected("h:", HASHES, |_| true));
    let (matched, _) = scan_all(&mut reader, &["MATCH", "s:1?", "TYPE", "string"]);
    assert_eq!(matched, expected("s:", STRINGS, |k| k.len() == 4 && k.starts_with("s:1")));
    let (classes, _) = scan_all(&mut reader, &["MATCH", "h:[0-4]7", "COUNT", "1000"]);
    assert_eq!(classes, ["h:17", "h:27", "h:37", "h:47"].map(String::from).into());
    assert_eq!(scan_all(&mut reader, &["TYPE", "zset"]).1, 0);
    assert_eq!(reader.cmd(&["SCAN", "x"]).unwrap(), Resp::Error("ERR invalid cursor".into()));
    assert_eq!(reader.cmd(&["SCAN", "0", "COUNT", "0"]).unwrap(), Resp::Error("ERR syntax error".into()));

    assert_eq!(reader.cmd(&["SELECT", "1"]).unwrap(), Resp::Simple("OK".into()));
    assert_eq!(reader.cmd(&["DBSIZE"]).unwrap(), Resp::Int(50), "the expired key is not counted");
    assert_eq!(scan_all(&mut reader, &[]).0, expected("o:", 50, |_| true));
    let Resp::Array(Some(one)) = reader.cmd(&["SCAN", "0", "COUNT", "1000"]).unwrap() else { panic!("not a page") };
    assert_eq!(one[0], Resp::Bulk(Some(b"0".to_vec())), "one SCAN walks all 64 partitions of a small keyspace");
    assert!(matches!(&one[1], Resp::Array(Some(keys)) if keys.len() == 50));

    // A client library walks the same cursors.
    let server = &cluster.servers[1];
    let script = "import redis, sys\n\
        r = redis.Redis(host=sys.argv[1], port=int(sys.argv[2]))\n\
        keys = set(r.scan_iter(match='s:*', count=100))\n\
        print(len(keys), r.dbsize())\n";
    let out = Command::new(support::python_with("redis", "python3-redis"))
        .args(["-c", script, &server.resp.ip().to_string(), &server.resp.port().to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("{STRINGS} {}", STRINGS + HASHES));
}
