//! Meteor keyspaces on real processes (docs/protocols/meteor.md): created with their status interval, clock
//! bound and θt, listed with them (a forced θt flagged), refused with a clear error when misconfigured; plain reads, writes and deletes
//! through any node, reads answered from the replicas' statuses; and every acknowledged write still read back
//! with one of three nodes killed.

mod support;

use support::resp::Resp;
use support::Cluster;

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
    ];
    for (args, why) in misconfigured {
        let err = first.ctl_fails(&[&["keyspace", "create", "m", "--protocol", "meteor"][..], args].concat());
        assert!(err.contains(why), "{args:?}: {err}");
    }
    let err = first.ctl_fails(&["keyspace", "create", "c", "--clock-bound-ms", "5"]);
    assert!(err.contains("--clock-bound-ms is not an option of protocol chain"), "{err}");
    assert!(!first.ctl(&["keyspace", "list"]).contains(" m "), "nothing was created");

    let knobs = ["--status-interval-ms", "5", "--clock-bound-ms", "3", "--theta-ms", "auto"];
    let args = [&["keyspace", "create", "m", "--protocol", "meteor"][..], &knobs].concat();
    assert_eq!(first.ctl(&args).trim(), "created keyspace m (number 1)");
    let list = first.ctl(&["keyspace", "list"]);
    assert!(list.contains("meteor every 5 ms ε 3 ms θ auto"), "{list}");
    first.ctl(&["keyspace", "create", "forced", "--protocol", "meteor", "--theta-ms", "40", "--unsafe"]);
    let list = first.ctl(&["keyspace", "list"]);
    assert!(list.contains("meteor every 10 ms ε 10 ms θ 40 UNSAFE"), "flagged: {list}");

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
