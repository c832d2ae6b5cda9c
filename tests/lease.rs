//! Lease keyspaces on real processes (docs/protocols/lease.md): created with their knobs, refused with a clear
//! error when misconfigured, listed; plain reads, writes and deletes through any node, the commands a lease
//! keyspace does not take refused and nothing changed; and, with the master's process killed, every
//! acknowledged write still read back once another replica took over.

mod support;

use std::time::{Duration, Instant};
use support::resp::Resp;
use support::{Cluster, Server};

/// `args` through `server` until it answers `want`, or panics after `limit` with the last answer: a failover
/// answers errors (or times out) until the new master serves.
fn eventually(server: &Server, args: &[&str], want: &Resp, limit: Duration) {
    let start = Instant::now();
    let mut last = None;
    while start.elapsed() < limit {
        let mut c = server.keyspace_conn("pages");
        match c.cmd(args) {
            Ok(answer) if &answer == want => return,
            other => last = Some(other),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("{args:?} did not answer {want:?} within {limit:?}; last {last:?}");
}

#[test]
fn lease_keyspaces_serve_plain_commands_and_keep_acknowledged_writes_when_the_master_dies() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(3, dir.path());
    let first = &cluster.servers[0];

    let lease = ["keyspace", "create", "pages", "--protocol", "lease"];
    let misconfigured = [
        (&[][..], "a lease keyspace needs --regions"),
        (&["--placement", "default=3", "--lease-ms", "50"][..], "shorter than the least a lease keyspace grants"),
        (&["--placement", "default=3", "--master-region", "tk"][..], "region 'tk' is not one the placement names"),
        (&["--placement", "default=3", "--read-quorum", "one"][..], "--read-quorum is not an option of protocol lease"),
        (&["--placement", "default=3", "--write-mode", "lazy"][..], "unknown write mode \"lazy\""),
    ];
    for (args, why) in misconfigured {
        let err = first.ctl_fails(&[&lease[..], args].concat());
        assert!(err.contains(why), "{args:?}: {err}");
    }
    let err = first.ctl_fails(&["keyspace", "create", "c", "--master-region", "default", "--regions", "default"]);
    assert!(err.contains("--master-region is an option of protocol lease"), "{err}");
    assert!(!first.ctl(&["keyspace", "list"]).contains(" pages "), "nothing was created");

    let created = first.ctl(&[&lease[..], &["--placement", "default=3", "--lease-ms", "30000"]].concat());
    assert_eq!(created.trim(), "created keyspace pages (number 1)");
    let list = first.ctl(&["keyspace", "list"]);
    assert!(list.contains("lease 30000 ms active"), "{list}");

    let mut c = first.keyspace_conn("pages");
    eventually(first, &["SET", "k", "v1"], &Resp::Simple("OK".into()), Duration::from_secs(20));
    let mut other = cluster.servers[2].keyspace_conn("pages");
    assert_eq!(other.cmd(&["GET", "k"]).unwrap(), Resp::bulk("v1"), "read through another node");
    // A replica holds the lease a renewal brings only once its master confirms it, a heartbeat after the keyspace
    // began (and that node may be the master itself, which answers its own reads): within seconds, reads of `k`
    // through it are answered there.
    let local_reads = || {
        let metrics = cluster.servers[2].http_get("/metrics");
        let line =
            metrics.lines().find(|l| l.starts_with("meridian_protocol_events_total{event=\"lease_local_reads\"}"));
        line.and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok()).expect("the lease counters on /metrics")
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while local_reads() == 0 {
        assert!(Instant::now() < deadline, "no read of k was answered locally at node 3");
        assert_eq!(other.cmd(&["GET", "k"]).unwrap(), Resp::bulk("v1"), "again, under a lease once it holds one");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(other.cmd(&["DEL", "k"]).unwrap(), Resp::Int(1));
    assert_eq!(c.cmd(&["GET", "k"]).unwrap(), Resp::Bulk(None));
    for refused in
        [&["INCR", "n"][..], &["SET", "k", "v", "NX"], &["SET", "k", "v", "EX", "10"], &["HSET", "h", "f", "v"]]
    {
        let reply = c.cmd(refused).unwrap();
        assert!(
            matches!(&reply, Resp::Error(e) if e.contains("not supported by protocol lease")),
            "{refused:?}: {reply:?}"
        );
    }
    assert_eq!(c.cmd(&["GET", "k"]).unwrap(), Resp::Bulk(None), "the refused SET changed nothing");
    for i in 0..30 {
        assert_eq!(c.cmd(&["SET", &format!("key{i}"), &format!("value{i}")]).unwrap(), Resp::Simple("OK".into()));
    }

    // Every node of region `default` holds every partition; node 1 is the longest-standing holder of some of
    // them, so it masters those. Killed, the manager marks it failed and another replica takes over each partition.
    cluster.servers[0].kill();
    let survivor = &cluster.servers[1];
    for i in 0..30 {
        eventually(survivor, &["GET", &format!("key{i}")], &Resp::bulk(&format!("value{i}")), Duration::from_secs(30));
    }
    eventually(&cluster.servers[2], &["SET", "after", "kill"], &Resp::Simple("OK".into()), Duration::from_secs(30));
    assert_eq!(survivor.keyspace_conn("pages").cmd(&["GET", "after"]).unwrap(), Resp::bulk("kill"));
}
