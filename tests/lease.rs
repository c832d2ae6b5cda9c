//! Lease keyspaces on real processes (docs/protocols/lease.md): created with their knobs, refused with a clear
//! error when misconfigured, listed; plain reads, writes and deletes through any node, the commands a lease
//! keyspace does not take refused and nothing changed; and, with the master's process killed, every
//! acknowledged write still read back once another replica took over.

mod support;

use std::time::{Duration, Instant};
use support::resp::Resp;
use support::{Cluster, Server};

/// `args` through `server` until it answers `want`, or panics after `limit` with the last answer: a failover
/// answers errors (or times out) until the new master serves, and a node that has not yet adopted the map that
/// created the keyspace refuses to select it.
fn eventually(server: &Server, args: &[&str], want: &Resp, limit: Duration) {
    let start = Instant::now();
    let mut last = None;
    while start.elapsed() < limit {
        let mut c = support::resp::Conn::connect(server.resp, Duration::from_secs(5)).expect("connect to a test node");
        let answer = match c.cmd(&["KEYSPACE", "pages"]) {
            Ok(Resp::Simple(ok)) if ok == "OK" => c.cmd(args),
            refused => refused,
        };
        match answer {
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
    let local_reads = || cluster.servers[2].protocol_events("lease_local_reads");
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

/// `ctl keyspace master` moves every partition's master to the named region: the node there takes each over,
/// every acknowledged write is read back and new writes succeed; a region the placement does not name, a keyspace
/// that is not a lease keyspace and an unknown one are refused with a clear error, changing nothing. `ctl
/// keyspace master NAME KEY REGION` then moves one key's master, which takes the key over.
#[test]
fn a_master_region_move_hands_every_partition_over_and_keeps_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let regions = ["eu", "us", "asia"];
    let peers: Vec<std::net::SocketAddr> = (1..=3)
        .map(|i| format!("127.0.0.{i}:{}", support::free_port(&format!("127.0.0.{i}"))).parse().unwrap())
        .collect();
    let list: Vec<String> =
        peers.iter().zip(regions).enumerate().map(|(i, (a, r))| format!("{}={a}@{r}", i + 1)).collect();
    let start = ["--peers".to_string(), list.join(",")];
    let servers: Vec<Server> = (1..=3)
        .map(|id| Server::launch(id, &format!("127.0.0.{id}"), peers[id as usize - 1], &start, dir.path()))
        .collect();
    servers.iter().for_each(|s| s.wait_ready(Duration::from_secs(30)));
    let created = servers[0].ctl(&["keyspace", "create", "pages", "--protocol", "lease", "--regions", "eu,us,asia"]);
    assert_eq!(created.trim(), "created keyspace pages (number 1)");
    eventually(&servers[1], &["SET", "k0", "v0"], &Resp::Simple("OK".into()), Duration::from_secs(20));
    let mut c = servers[2].keyspace_conn("pages");
    for i in 1..20 {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), &format!("v{i}")]).unwrap(), Resp::Simple("OK".into()));
    }
    assert_eq!(servers[1].protocol_events("lease_takeovers"), 0, "us masters nothing yet");

    for (args, why) in [
        (["keyspace", "master", "pages", "mars"], "region 'mars' is not one the placement names"),
        (["keyspace", "master", "default", "us"], "keyspace \"default\" is not a lease keyspace"),
        (["keyspace", "master", "nope", "us"], "unknown keyspace \"nope\""),
    ] {
        let err = servers[0].ctl_fails(&args);
        assert!(err.contains(why), "{args:?}: {err}");
    }
    let moved = servers[2].ctl(&["keyspace", "master", "pages", "us"]);
    assert_eq!(moved.trim(), "keyspace pages is mastered in region us");
    let list = servers[0].ctl(&["keyspace", "list"]);
    assert!(list.contains("us=1,eu=1,asia=1"), "{list}");
    assert_eq!(servers[0].ctl(&["keyspace", "master", "pages", "us"]).trim(), moved.trim(), "already there");

    for i in 0..20 {
        let (key, value) = (format!("k{i}"), format!("v{i}"));
        eventually(&servers[0], &["GET", &key], &Resp::bulk(&value), Duration::from_secs(20));
    }
    eventually(&servers[0], &["SET", "after", "move"], &Resp::Simple("OK".into()), Duration::from_secs(20));
    assert_eq!(servers[2].keyspace_conn("pages").cmd(&["GET", "after"]).unwrap(), Resp::bulk("move"));
    assert!(servers[1].protocol_events("lease_takeovers") > 0, "us took its partitions over");

    // One key's master moves to asia and stays there: asia's node takes the key over and masters its writes.
    let pinned = servers[1].ctl(&["keyspace", "master", "pages", "k3", "asia"]);
    assert_eq!(pinned.trim(), "key k3 of keyspace pages is mastered in region asia");
    let err = servers[0].ctl_fails(&["keyspace", "master", "pages", "k3", "mars"]);
    assert!(err.contains("region 'mars' is not one the placement names"), "{err}");
    eventually(&servers[0], &["GET", "k3"], &Resp::bulk("v3"), Duration::from_secs(20));
    eventually(&servers[1], &["SET", "k3", "pinned"], &Resp::Simple("OK".into()), Duration::from_secs(20));
    // Asia masters nothing else, so it copies k3's partition whole (a master that already ran the domain would
    // copy the key alone: `lease_keys_moved_in`).
    assert!(servers[2].protocol_events("lease_takeovers") > 0, "asia took k3 over");
    for server in &servers {
        eventually(server, &["GET", "k3"], &Resp::bulk("pinned"), Duration::from_secs(20));
    }
    assert_eq!(servers[0].keyspace_conn("pages").cmd(&["GET", "k4"]).unwrap(), Resp::bulk("v4"), "k4 stays in us");
}

/// `server --join ... --affiliate-of NODE` (seed 001 §4.1.4): a host that is not a node of the cluster is refused
/// before anything starts, and changes nothing; an affiliated node of node 2 joins, holds no partition, and once
/// its host finds a key hot answers reads of it itself; a write of the key through another node revokes its
/// secondary lease first, so every read after the write sees it.
#[test]
fn an_affiliated_node_answers_its_hosts_hot_key_and_never_an_overwritten_value() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let (first, host) = (&cluster.servers[0], &cluster.servers[1]);
    first.ctl(&["keyspace", "create", "pages", "--protocol", "lease", "--placement", "default=3"]);
    eventually(first, &["SET", "k", "v1"], &Resp::Simple("OK".into()), Duration::from_secs(20));

    let affiliate = |id: u32, of: &str| {
        let ip = format!("127.0.0.{id}");
        let peer: std::net::SocketAddr = format!("{ip}:{}", support::free_port(&ip)).parse().unwrap();
        let start = ["--join".to_string(), first.http.to_string(), "--affiliate-of".into(), of.into()];
        Server::launch(id, &ip, peer, &start, dir.path())
    };
    let mut stray = affiliate(5, "42");
    assert!(stray.wait_exit(Duration::from_secs(10)).is_some_and(|s| !s.success()), "{}", stray.log());
    assert!(stray.log().contains("the cluster has no node 42"), "{}", stray.log());

    let started = Instant::now();
    let node = affiliate(4, "2");
    node.wait_ready(Duration::from_secs(20));
    println!("the affiliated node answered its first read {:?} after it was started", started.elapsed());
    let status = first.cluster_status();
    let nodes = status["status"]["nodes"].as_array().cloned().unwrap_or_default();
    assert!(nodes.iter().all(|n| n["id"] != 5), "the refused node was never added: {nodes:?}");
    let four = nodes.iter().find(|n| n["id"] == 4).expect("node 4 in the map");
    assert_eq!((&four["state"], &four["affiliate_of"]), (&"ACTIVE".into(), &2.into()), "{four}");
    let chains = status["status"]["chains"].as_array().cloned().unwrap_or_default();
    assert!(chains.iter().all(|c| !c["members"].as_array().unwrap().contains(&4.into())), "{chains:?}");

    // Reads through the affiliated node go to its host, which counts them: once it judges `k` hot (a second's
    // window) and the affiliated node pulls it (every 200 ms), the affiliated node answers them itself.
    let mut reads = node.keyspace_conn("pages");
    let deadline = Instant::now() + Duration::from_secs(20);
    while node.protocol_events("lease_affiliate_reads") == 0 {
        assert!(Instant::now() < deadline, "node 4 answered no read of k:\n{}", node.log());
        for _ in 0..20 {
            assert_eq!(reads.cmd(&["GET", "k"]).unwrap(), Resp::bulk("v1"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(host.protocol_events("lease_secondary_leases_granted") > 0);
    assert_eq!(cluster.servers[2].keyspace_conn("pages").cmd(&["SET", "k", "v2"]).unwrap(), Resp::Simple("OK".into()));
    for _ in 0..200 {
        assert_eq!(reads.cmd(&["GET", "k"]).unwrap(), Resp::bulk("v2"), "a read after the write");
    }
    let revoked = host.protocol_events("lease_secondary_leases_revoked");
    let served = node.protocol_events("lease_affiliate_reads");
    println!("host revoked {revoked} secondary leases; the affiliated node answered {served} reads");
}
