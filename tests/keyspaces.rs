//! Keyspaces on real processes: `meridian ctl keyspace create|list|drop`, SELECT and KEYSPACE from a Redis
//! connection, the same key in two keyspaces, a keyspace's own replication factor, a drop that removes the
//! keyspace's files on every node, and an async-durability keyspace's data surviving a node's SIGKILL and
//! restart.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};
use support::resp::{Conn, Resp};
use support::{Cluster, Server};

fn conn(server: &Server) -> Conn {
    Conn::connect(server.resp, Duration::from_secs(5)).unwrap()
}

fn cmd(c: &mut Conn, args: &[&str]) -> Resp {
    c.cmd(args).unwrap()
}

fn ok() -> Resp {
    Resp::Simple("OK".into())
}

fn error_starting(resp: &Resp, prefix: &str) -> bool {
    matches!(resp, Resp::Error(e) if e.starts_with(prefix))
}

/// Members of every chain of keyspace `keyspace`, as `/v1/cluster` shows them.
fn chain_lengths(server: &Server, keyspace: u64) -> Vec<usize> {
    let status = server.cluster_status();
    let chains = status["status"]["chains"].as_array().cloned().unwrap_or_default();
    chains
        .iter()
        .filter(|c| c["keyspace"].as_u64() == Some(keyspace))
        .map(|c| c["members"].as_array().map_or(0, Vec::len))
        .collect()
}

/// Files left in a node's directory of keyspace `keyspace`.
fn files_of(dir: &Path, node: u32, keyspace: u32) -> usize {
    let path = dir.join(format!("node{node}/keyspaces/ks-{keyspace}"));
    std::fs::read_dir(path).map_or(0, |d| d.count())
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn keyspaces_are_created_selected_dropped_and_durable() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(3, dir.path());
    let first = &cluster.servers[0];

    assert_eq!(
        first.ctl(&["keyspace", "create", "cache", "--replicas", "log"]).trim(),
        "created keyspace cache (number 1)"
    );
    assert!(first.ctl_fails(&["keyspace", "create", "cache"]).contains("keyspace \"cache\" already exists"));
    assert!(first.ctl_fails(&["keyspace", "create", "x", "--replicas", "log,disk"]).contains("unknown replica type"));
    assert!(first.ctl_fails(&["keyspace", "create", "a b"]).contains("invalid keyspace name"));
    assert!(first.ctl_fails(&["keyspace", "drop", "default"]).contains("cannot be dropped"));
    let list = first.ctl(&["keyspace", "list"]);
    assert!(list.contains("0       default              log,log,log"), "{list}");
    assert!(list.contains("1       cache                log"), "{list}");
    assert!(chain_lengths(first, 1).iter().all(|&n| n == 1) && !chain_lengths(first, 1).is_empty());
    assert!(chain_lengths(first, 0).iter().all(|&n| n == 3));

    // The same key in two keyspaces, through any node.
    let mut c = conn(first);
    assert_eq!(cmd(&mut c, &["SET", "k", "in-default"]), ok());
    assert_eq!(cmd(&mut c, &["SELECT", "1"]), ok());
    assert_eq!(cmd(&mut c, &["GET", "k"]), Resp::Bulk(None));
    assert_eq!(cmd(&mut c, &["SET", "k", "in-cache"]), ok());
    assert_eq!(cmd(&mut c, &["SELECT", "0"]), ok());
    assert_eq!(cmd(&mut c, &["GET", "k"]), Resp::bulk("in-default"));
    assert!(error_starting(&cmd(&mut c, &["KEYSPACE", "nope"]), "ERR unknown keyspace \"nope\""));
    assert!(error_starting(&cmd(&mut c, &["SELECT", "16"]), "ERR DB index is out of range"));
    let mut other = conn(&cluster.servers[2]);
    // Pipelined: the GET must already run in the keyspace the KEYSPACE before it chose.
    other.send(&["KEYSPACE", "cache"]).unwrap();
    other.send(&["GET", "k"]).unwrap();
    assert_eq!((other.read().unwrap(), other.read().unwrap()), (ok(), Resp::bulk("in-cache")));

    // A dropped keyspace is gone for its clients and from every node's disk.
    assert_eq!(first.ctl(&["keyspace", "drop", "cache"]).trim(), "dropped keyspace cache");
    assert!(first.ctl_fails(&["keyspace", "drop", "cache"]).contains("unknown keyspace"));
    let dir_path = dir.path().to_path_buf();
    wait_until("the dropped keyspace's files removed", Duration::from_secs(10), || {
        (1..=3).all(|n| files_of(&dir_path, n, 1) == 0)
    });
    // The drop is answered once the node asked shows it; another node refuses the keyspace once it has
    // adopted that map (`docs/keyspaces.md`), which may come a moment later.
    wait_until("another node refusing the dropped keyspace", Duration::from_secs(10), || {
        error_starting(&cmd(&mut other, &["GET", "k"]), "ERR unknown keyspace 1")
    });
    assert!(error_starting(&cmd(&mut other, &["KEYSPACE", "cache"]), "ERR unknown keyspace \"cache\""));

    // A keyspace created again under the old name is new and empty, and its data survive a SIGKILL even
    // with async durability: a process crash keeps what was written to the OS.
    assert!(first.ctl_fails(&["keyspace", "create", "x", "--durability", "fast"]).contains("invalid value 'fast'"));
    assert_eq!(
        first.ctl(&["keyspace", "create", "cache", "--replicas", "log,log", "--durability", "async"]).trim(),
        "created keyspace cache (number 2)"
    );
    let list = first.ctl(&["keyspace", "list"]);
    assert!(list.contains("tail       node"), "{list}");
    assert!(list.contains("tail       async"), "{list}");
    assert_eq!(cmd(&mut c, &["KEYSPACE", "cache"]), ok());
    assert_eq!(cmd(&mut c, &["GET", "k"]), Resp::Bulk(None));
    for i in 0..50 {
        assert_eq!(cmd(&mut c, &["SET", &format!("key{i}"), &format!("value{i}")]), ok());
    }
    let victim = &mut cluster.servers[1];
    victim.kill();
    victim.spawn();
    victim.wait_ready(Duration::from_secs(30));
    let mut after = conn(victim);
    assert_eq!(cmd(&mut after, &["SELECT", "2"]), ok());
    wait_until("every key read back after the restart", Duration::from_secs(30), || {
        (0..50).all(|i| cmd(&mut after, &["GET", &format!("key{i}")]) == Resp::bulk(&format!("value{i}")))
    });
    assert_eq!(cmd(&mut after, &["SELECT", "0"]), ok());
    assert_eq!(cmd(&mut after, &["GET", "k"]), Resp::bulk("in-default"));
}

/// Seed 003 §5.3 on real processes: a `mem,log` keyspace keeps its head replicas in memory. A SIGKILLed node
/// restarts without them; it reports them lost, the manager repairs each chain around it and copies it back
/// from the log replica, and no acknowledged write is lost.
#[test]
fn memory_replicas_lost_to_a_restart_are_copied_back_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(3, dir.path());
    let first = &cluster.servers[0];
    let created = first.ctl(&["keyspace", "create", "md", "--replicas", "mem,log"]);
    assert_eq!(created.trim(), "created keyspace md (number 1)");
    let fast =
        first.ctl(&["keyspace", "create", "fast", "--replicas", "mem,log", "--update", "au", "--read-from", "head"]);
    assert_eq!(fast.trim(), "created keyspace fast (number 2)");
    let list = first.ctl(&["keyspace", "list"]);
    assert!(list.contains("1       md                   mem,log              su      tail"), "{list}");
    assert!(list.contains("2       fast                 mem,log              au      head"), "{list}");
    let mut f = conn(&cluster.servers[2]);
    assert_eq!(cmd(&mut f, &["KEYSPACE", "fast"]), ok());
    assert_eq!(cmd(&mut f, &["SET", "x", "1"]), ok());
    assert_eq!(cmd(&mut f, &["GET", "x"]), Resp::bulk("1"), "read back from the head that acknowledged it");
    let mut c = conn(first);
    assert_eq!(cmd(&mut c, &["KEYSPACE", "md"]), ok());
    for i in 0..200 {
        assert_eq!(cmd(&mut c, &["SET", &format!("key{i}"), &format!("value{i}")]), ok());
    }
    let md_chains = |s: &Server| -> Vec<serde_json::Value> {
        let chains = s.cluster_status()["status"]["chains"].as_array().cloned().unwrap_or_default();
        chains.into_iter().filter(|c| c["keyspace"].as_u64() == Some(1)).collect()
    };
    // The chains whose memory replica node 2 holds, and their views: each must be repaired (two new views).
    let in_memory: Vec<(u64, u64)> = md_chains(first)
        .iter()
        .filter(|c| {
            let at = c["members"].as_array().unwrap().iter().position(|m| m.as_u64() == Some(2));
            at.is_some_and(|i| c["kinds"][i] == "mem")
        })
        .map(|c| (c["id"].as_u64().unwrap(), c["view"].as_u64().unwrap()))
        .collect();
    assert!(!in_memory.is_empty(), "node 2 keeps some chain in memory");
    let victim = &mut cluster.servers[1];
    victim.kill();
    victim.spawn();
    victim.wait_ready(Duration::from_secs(30));
    let settled = |s: &Server| {
        let md = md_chains(s);
        let repaired = in_memory.iter().all(|&(id, view)| {
            md.iter().any(|c| c["id"].as_u64() == Some(id) && c["view"].as_u64().is_some_and(|v| v >= view + 2))
        });
        let kinds = |c: &serde_json::Value| {
            let mut k: Vec<String> = c["kinds"].as_array().unwrap().iter().map(|k| k.to_string()).collect();
            k.sort();
            k
        };
        repaired
            && md.iter().all(|c| {
                c["lost"].as_array().is_some_and(Vec::is_empty)
                    && c["change"].is_null()
                    && kinds(c) == ["\"log\"", "\"mem\""]
            })
    };
    wait_until("every md chain repaired, back at mem,log", Duration::from_secs(60), || settled(&cluster.servers[0]));
    let mut after = conn(&cluster.servers[1]);
    assert_eq!(cmd(&mut after, &["KEYSPACE", "md"]), ok());
    for i in 0..200 {
        assert_eq!(cmd(&mut after, &["GET", &format!("key{i}")]), Resp::bulk(&format!("value{i}")), "key{i}");
    }
    let lost = cluster.servers[1].cluster_status()["status"]["chains"].clone();
    assert!(lost.as_array().unwrap().iter().all(|c| c["restored_from"].is_null()), "nothing was restored: {lost}");
}

/// `--store` sets the `default` keyspace's replica type when the cluster is created: here `mem`, which keeps
/// no store files.
#[test]
fn store_flag_gives_the_default_keyspace_its_replica_type() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::single(dir.path(), &["--store", "mem"]);
    let list = server.ctl(&["keyspace", "list"]);
    assert!(list.contains("0       default              mem "), "{list}");
    let mut c = conn(&server);
    assert_eq!(cmd(&mut c, &["SET", "k", "v"]), ok());
    assert_eq!(cmd(&mut c, &["GET", "k"]), Resp::bulk("v"));
    assert_eq!(files_of(dir.path(), 1, 0), 0, "a mem keyspace writes no store files");
}
