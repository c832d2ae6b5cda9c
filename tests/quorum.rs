//! Quorum keyspaces on real processes (docs/protocols/quorum.md): created with their consistency levels and
//! stamps, listed with them, refused with a clear error when misconfigured; plain reads, writes and deletes
//! through any node; the commands a quorum keyspace does not take refused and nothing changed; and every
//! acknowledged write still read back with one of three nodes killed.

mod support;

use support::resp::Resp;
use support::Cluster;

#[test]
fn quorum_keyspaces_serve_plain_commands_and_survive_a_node_kill() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(3, dir.path());
    let first = &cluster.servers[0];

    let misconfigured = [
        (&["--read-quorum", "4"][..], "consistency level 4 is more than the keyspace's 3 replicas"),
        (&["--write-quorum", "most"][..], "unknown consistency level \"most\""),
        (&["--timestamps", "lamport"][..], "unknown timestamps \"lamport\""),
        (&["--update", "au"][..], "--update is not an option of protocol quorum"),
        (&["--replicas", "mem,log,log"][..], "a quorum keyspace keeps log replicas"),
    ];
    for (args, why) in misconfigured {
        let err = first.ctl_fails(&[&["keyspace", "create", "q", "--protocol", "quorum"][..], args].concat());
        assert!(err.contains(why), "{args:?}: {err}");
    }
    let err = first.ctl_fails(&["keyspace", "create", "c", "--timestamps", "clock"]);
    assert!(err.contains("--timestamps is not an option of protocol chain"), "{err}");
    assert!(!first.ctl(&["keyspace", "list"]).contains(" q "), "nothing was created");

    let created = first.ctl(&["keyspace", "create", "q", "--protocol", "quorum", "--write-quorum", "all"]);
    assert_eq!(created.trim(), "created keyspace q (number 1)");
    let clock = first.ctl(&["keyspace", "create", "qc", "--protocol", "quorum", "--timestamps", "clock"]);
    assert_eq!(clock.trim(), "created keyspace qc (number 2)");
    let list = first.ctl(&["keyspace", "list"]);
    assert!(list.contains("quorum R=quorum W=all quorum"), "{list}");
    assert!(list.contains("quorum R=quorum W=quorum clock"), "{list}");

    for keyspace in ["q", "qc"] {
        let mut c = first.keyspace_conn(keyspace);
        assert_eq!(c.cmd(&["SET", "k", "v1"]).unwrap(), Resp::Simple("OK".into()));
        let mut other = cluster.servers[2].keyspace_conn(keyspace);
        assert_eq!(other.cmd(&["GET", "k"]).unwrap(), Resp::bulk("v1"), "{keyspace}: read through another node");
        assert_eq!(other.cmd(&["DEL", "k"]).unwrap(), Resp::Int(1));
        assert_eq!(c.cmd(&["GET", "k"]).unwrap(), Resp::Bulk(None));
        for refused in
            [&["INCR", "n"][..], &["SET", "k", "v", "NX"], &["SET", "k", "v", "EX", "10"], &["HSET", "h", "f", "v"]]
        {
            let reply = c.cmd(refused).unwrap();
            assert!(
                matches!(&reply, Resp::Error(e) if e.contains("not supported by protocol quorum")),
                "{keyspace} {refused:?}: {reply:?}"
            );
        }
        assert_eq!(c.cmd(&["GET", "k"]).unwrap(), Resp::Bulk(None), "{keyspace}: the refused SET changed nothing");
        for i in 0..30 {
            assert_eq!(c.cmd(&["SET", &format!("key{i}"), &format!("value{i}")]).unwrap(), Resp::Simple("OK".into()));
        }
    }

    // R = W = a majority for `qc`: one node down changes nothing a client sees. `q` writes to all three, so its
    // writes wait for the node, but its reads (a majority) go on.
    cluster.servers[1].kill();
    for keyspace in ["q", "qc"] {
        let mut c = cluster.servers[0].keyspace_conn(keyspace);
        for i in 0..30 {
            assert_eq!(
                c.cmd(&["GET", &format!("key{i}")]).unwrap(),
                Resp::bulk(&format!("value{i}")),
                "{keyspace} key{i}"
            );
        }
    }
    let mut c = cluster.servers[2].keyspace_conn("qc");
    assert_eq!(c.cmd(&["SET", "after", "kill"]).unwrap(), Resp::Simple("OK".into()));
    assert_eq!(cluster.servers[0].keyspace_conn("qc").cmd(&["GET", "after"]).unwrap(), Resp::bulk("kill"));
}
