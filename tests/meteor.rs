//! Meteor keyspaces on real processes (docs/protocols/meteor.md): created with their status interval, clock
//! bound, θt and redundancy, listed with them (a forced θt flagged), refused with a clear error when misconfigured; plain reads, writes and deletes
//! through any node, reads answered from the replicas' statuses; and every acknowledged write still read back
//! with one of three nodes killed.

mod support;

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;
use support::resp::Resp;
use support::ycsb::{phase, ycsb};
use support::{free_port, Cluster, Server};

#[test]
fn meteor_keyspaces_serve_plain_commands_and_survive_a_node_kill() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(3, dir.path());
    let first = &cluster.servers[0];

    let misconfigured = [
        (&["--status-interval-ms", "0"][..], "a meteor keyspace's status interval must be at least 1 ms"),
        (&["--replicas", "log,log"][..], "a meteor keyspace needs at least 3 replicas"),
        (&["--replicas", "mem,log,log"][..], "a meteor keyspace keeps log replicas"),
        (&["--lease-ms", "1000"][..], "--lease-ms is not an option of protocol meteor"),
        (&["--theta-ms", "soon"][..], "unknown θt \"soon\"; expected one of auto, 0 (MeteorShower1) or milliseconds"),
        (&["--theta-ms", "auto", "--unsafe"][..], "--unsafe forces a fixed --theta-ms above its measured bound"),
        (&["--redundancy", "0"][..], "a meteor keyspace's status redundancy must be 1 to 8 statuses, not 0"),
    ];
    for (args, why) in misconfigured {
        let err = first.ctl_fails(&[&["keyspace", "create", "m", "--protocol", "meteor"][..], args].concat());
        assert!(err.contains(why), "{args:?}: {err}");
    }
    let err = first.ctl_fails(&["keyspace", "create", "c", "--clock-bound-ms", "5"]);
    assert!(err.contains("--clock-bound-ms is not an option of protocol chain"), "{err}");
    assert!(!first.ctl(&["keyspace", "list"]).contains(" m "), "nothing was created");

    let knobs = ["--status-interval-ms", "5", "--clock-bound-ms", "3", "--theta-ms", "auto", "--redundancy", "3"];
    let args = [&["keyspace", "create", "m", "--protocol", "meteor"][..], &knobs].concat();
    assert_eq!(first.ctl(&args).trim(), "created keyspace m (number 1)");
    let list = first.ctl(&["keyspace", "list"]);
    assert!(list.contains("meteor every 5 ms ε 3 ms θ auto (0 ms here) ×3"), "a LAN's trips leave no θt: {list}");
    first.ctl(&["keyspace", "create", "forced", "--protocol", "meteor", "--theta-ms", "40", "--unsafe"]);
    let list = first.ctl(&["keyspace", "list"]);
    assert!(list.contains("meteor every 10 ms ε 10 ms θ 40 (40 ms here) ×2 UNSAFE"), "flagged: {list}");

    let mut c = first.keyspace_conn("m");
    assert_eq!(c.cmd(&["SET", "k", "v1"]).unwrap(), Resp::Simple("OK".into()));
    let mut other = cluster.servers[2].keyspace_conn("m");
    assert_eq!(other.cmd(&["GET", "k"]).unwrap(), Resp::bulk("v1"), "read through another node");
    assert_eq!(other.cmd(&["DEL", "k"]).unwrap(), Resp::Int(1));
    assert_eq!(c.cmd(&["GET", "k"]).unwrap(), Resp::Bulk(None));
    for refused in [&["INCR", "n"][..], &["SET", "k", "v", "NX"], &["HSET", "h", "f", "v"]] {
        let reply = c.cmd(refused).unwrap();
        let says = matches!(&reply, Resp::Error(e) if e.contains("not supported by protocol meteor"));
        assert!(says, "{refused:?}: {reply:?}");
    }
    for i in 0..30 {
        assert_eq!(c.cmd(&["SET", &format!("key{i}"), &format!("value{i}")]).unwrap(), Resp::Simple("OK".into()));
    }

    // A majority of the three replicas is left: every acknowledged write reads back, and writes go on.
    cluster.servers[1].kill();
    let mut c = cluster.servers[0].keyspace_conn("m");
    for i in 0..30 {
        assert_eq!(c.cmd(&["GET", &format!("key{i}")]).unwrap(), Resp::bulk(&format!("value{i}")), "key{i}");
    }
    let mut c = cluster.servers[2].keyspace_conn("m");
    assert_eq!(c.cmd(&["SET", "after", "kill"]).unwrap(), Resp::Simple("OK".into()));
    assert_eq!(cluster.servers[0].keyspace_conn("m").cmd(&["GET", "after"]).unwrap(), Resp::bulk("kill"));
}

/// Three nodes in Oregon, Virginia and Ireland on globlease-4's emulated WAN (`--wan`), and a meteor keyspace
/// `db1` with a replica in each and θt `auto`: redis-py and redis-cli write through every node and read their own
/// writes back there at once, redis-py every other node's after 200 ms (more than θt); `meridian bench ycsb` (workload A, `--db 1`)
/// runs against Oregon without an error, and Oregon's replica answers its reads itself, each after less than the
/// least round trip between the regions (66 ms) on average: no read crosses the WAN and back. θt in force there,
/// from Oregon's probes, is about 45% of its least round trip (80 ms, to Virginia) less ε: 34 ms.
#[test]
fn meteor_reads_on_an_emulated_wan_stay_in_their_region() {
    let dir = tempfile::tempdir().unwrap();
    let regions = ["or", "va", "ir"];
    let peers: Vec<SocketAddr> =
        (1..=3).map(|i| format!("127.0.0.{i}:{}", free_port(&format!("127.0.0.{i}"))).parse().unwrap()).collect();
    let list: Vec<String> =
        peers.iter().zip(regions).enumerate().map(|(i, (a, r))| format!("{}={a}@{r}", i + 1)).collect();
    let start = ["--peers".to_string(), list.join(","), "--wan".into(), "globlease-4".into()];
    let servers: Vec<Server> = (1..=3)
        .map(|id| Server::launch(id, &format!("127.0.0.{id}"), peers[id as usize - 1], &start, dir.path()))
        .collect();
    servers.iter().for_each(|s| s.wait_ready(Duration::from_secs(30)));
    let create = ["keyspace", "create", "db1", "--protocol", "meteor", "--regions", "or,va,ir"];
    servers[0].ctl(&[&create[..], &["--theta-ms", "auto", "--clock-bound-ms", "2"]].concat());

    let script = "import redis, sys, time\n\
        rs = [redis.Redis(host=a.split(':')[0], port=int(a.split(':')[1]), db=1) for a in sys.argv[1:]]\n\
        for i, r in enumerate(rs):\n\
        \x20   r.set(f'py{i}', f'v{i}')\n\
        \x20   assert r.get(f'py{i}') == f'v{i}'.encode(), 'its own write, at once'\n\
        time.sleep(0.2)\n\
        print(' '.join(r.get(f'py{j}').decode() for r in rs for j in range(len(rs))))\n";
    let addrs: Vec<String> = servers.iter().map(|s| s.resp.to_string()).collect();
    let out = Command::new(support::python_with("redis", "python3-redis"))
        .args([&["-c", script][..], &addrs.iter().map(String::as_str).collect::<Vec<_>>()].concat())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "v0 v1 v2 v0 v1 v2 v0 v1 v2");

    for (i, server) in servers.iter().enumerate() {
        assert_eq!(server.redis_cli(1, &["SET", &format!("cli{i}"), "x"]), "OK");
        assert_eq!(server.redis_cli(1, &["GET", &format!("cli{i}")]), "x", "redis-cli reads its write at once");
    }

    let oregon = &servers[0];
    let before = (oregon.protocol_events("meteor_reads"), oregon.protocol_events("meteor_reads_parked"));
    let waited_before = oregon.protocol_events("meteor_parked_ms");
    let waits_before = (oregon.protocol_waits("meteor_read", "+Inf"), oregon.protocol_waits("meteor_read", "0.25"));
    let a = ["--db", "1", "--workload", "a", "--records", "100", "--operations", "400", "--clients", "4"];
    let report = ycsb(oregon.resp, &a, dir.path());
    phase(&report, "load");
    let (_, ops) = phase(&report, "run");
    let reads = ops.iter().find(|(op, _)| op == "READ").map_or(0, |(_, n)| *n);
    let answered = oregon.protocol_events("meteor_reads") - before.0;
    assert!(reads > 0 && answered >= reads, "Oregon's replica answered {answered} of the run's {reads} reads");
    let parked = oregon.protocol_events("meteor_reads_parked") - before.1;
    let waited_ms = oregon.protocol_events("meteor_parked_ms") - waited_before;
    // θt auto from the probes: 45% of the least round trip to Virginia (80 ms, and a little more for the time
    // the nodes take to answer), less ε (2 ms).
    let theta = oregon.protocol_gauge("meteor_theta_ms");
    println!("θt in force at Oregon: {theta} ms");
    assert!((20..=40).contains(&theta), "θt in force at Oregon: {theta} ms");
    let list = oregon.ctl(&["keyspace", "list"]);
    assert!(list.contains(&format!("θ auto ({theta} ms here)")), "keyspace list through Oregon: {list}");
    println!(
        "Oregon answered {answered} reads ({reads} of the run), {parked} of them after waiting {waited_ms} ms in all"
    );
    assert!(waited_ms < 66 * parked.max(1), "{parked} reads waited {waited_ms} ms in all");
    let waits = oregon.protocol_waits("meteor_read", "+Inf") - waits_before.0;
    let quick = oregon.protocol_waits("meteor_read", "0.25") - waits_before.1;
    assert_eq!(waits, answered, "every read answered is in the wait histogram");
    assert_eq!(quick, answered, "every read waited at most 250 ms: statuses, not a timeout");
}
