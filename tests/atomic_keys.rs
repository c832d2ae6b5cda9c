//! RENAME, RENAMENX, COPY and MSETNX on a real three-node cluster, through different nodes: keys that share a
//! hash tag change in one step, as Redis answers; keys of two chains are refused with Redis Cluster's CROSSSLOT
//! and nothing changes (docs/resp.md, "Atomic commands of several keys").

mod support;

use meridian_core::ring::key_token;
use support::resp::{bulk, Resp};
use support::Cluster;

fn error(text: &str) -> Resp {
    Resp::Error(text.into())
}

const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";

/// Two keys without tags in different halves of the ring, so in different chains whatever the partition count
/// above one.
fn apart() -> (String, String) {
    let half = |k: &String| key_token(k.as_bytes()) >> 63;
    let first = "apart0".to_string();
    let second = (1..).map(|i| format!("apart{i}")).find(|k| half(k) != half(&first)).unwrap();
    (first, second)
}

#[test]
fn commands_of_several_keys_change_them_in_one_step_as_redis_does() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let (mut a, mut b, mut c) = (cluster.conn(0), cluster.conn(1), cluster.conn(2));

    assert_eq!(a.cmd(&["SET", "{u1}:old", "v", "PX", "100000"]).unwrap(), Resp::Simple("OK".into()));
    assert_eq!(b.cmd(&["RENAME", "{u1}:old", "{u1}:new"]).unwrap(), Resp::Simple("OK".into()));
    assert_eq!(c.cmd(&["GET", "{u1}:new"]).unwrap(), bulk("v"));
    assert_eq!(c.cmd(&["EXISTS", "{u1}:old"]).unwrap(), Resp::Int(0));
    let Resp::Int(pttl) = c.cmd(&["PTTL", "{u1}:new"]).unwrap() else { panic!("PTTL is an integer") };
    assert!((90_000..=100_000).contains(&pttl), "the deadline moved with the value: {pttl}");
    assert_eq!(a.cmd(&["RENAME", "{u1}:old", "{u1}:x"]).unwrap(), error("ERR no such key"));
    assert_eq!(a.cmd(&["RENAME", "{u1}:new", "{u1}:new"]).unwrap(), Resp::Simple("OK".into()));

    assert_eq!(a.cmd(&["SET", "{u1}:other", "w"]).unwrap(), Resp::Simple("OK".into()));
    assert_eq!(b.cmd(&["RENAMENX", "{u1}:new", "{u1}:other"]).unwrap(), Resp::Int(0));
    assert_eq!(c.cmd(&["GET", "{u1}:other"]).unwrap(), bulk("w"), "RENAMENX onto a key changes nothing");
    assert_eq!(b.cmd(&["RENAMENX", "{u1}:new", "{u1}:third"]).unwrap(), Resp::Int(1));

    assert_eq!(a.cmd(&["COPY", "{u1}:third", "{u1}:other"]).unwrap(), Resp::Int(0));
    assert_eq!(a.cmd(&["COPY", "{u1}:third", "{u1}:other", "REPLACE"]).unwrap(), Resp::Int(1));
    assert_eq!(
        (b.cmd(&["GET", "{u1}:other"]).unwrap(), b.cmd(&["GET", "{u1}:third"]).unwrap()),
        (bulk("v"), bulk("v"))
    );
    assert_eq!(a.cmd(&["HSET", "{u1}:h", "f", "1"]).unwrap(), Resp::Int(1));
    assert_eq!(a.cmd(&["COPY", "{u1}:h", "{u1}:h2"]).unwrap(), Resp::Int(1));
    assert_eq!(c.cmd(&["HGET", "{u1}:h2", "f"]).unwrap(), bulk("1"), "a hash copies as a hash");
    assert_eq!(a.cmd(&["COPY", "{u1}:h", "{u1}:h"]).unwrap(), error("ERR source and destination objects are the same"));

    assert_eq!(b.cmd(&["MSETNX", "{u2}a", "1", "{u2}b", "2"]).unwrap(), Resp::Int(1));
    assert_eq!(c.cmd(&["MSETNX", "{u2}b", "3", "{u2}c", "4"]).unwrap(), Resp::Int(0));
    let got = a.cmd(&["MGET", "{u2}a", "{u2}b", "{u2}c"]).unwrap();
    assert_eq!(got, Resp::Array(Some(vec![bulk("1"), bulk("2"), Resp::Bulk(None)])), "all or nothing");

    let (x, y) = apart();
    assert_eq!(a.cmd(&["SET", &x, "1"]).unwrap(), Resp::Simple("OK".into()));
    for words in
        [vec!["RENAME", &x, &y], vec!["RENAMENX", &x, &y], vec!["COPY", &x, &y], vec!["MSETNX", &y, "1", &x, "2"]]
    {
        assert_eq!(b.cmd(&words).unwrap(), error(CROSSSLOT), "{words:?}");
    }
    assert_eq!((c.cmd(&["GET", &x]).unwrap(), c.cmd(&["EXISTS", &y]).unwrap()), (bulk("1"), Resp::Int(0)));
}
