//! ACL users on a real three-node cluster (docs/security.md, "ACL users"): a user set on one node is enforced by
//! every node within a second, by redis-cli and redis-py alike; a read-only user is refused writes, a user limited
//! to one keyspace is refused the others; users outlive a restart; a deleted user's connections close.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};
use support::resp::{Conn, Resp};
use support::Cluster;

fn ok() -> Resp {
    Resp::Simple("OK".into())
}

/// Waits until `user` authenticates with `password` on every node; how long that took.
fn seen_everywhere(cluster: &Cluster, user: &str, password: &str) -> Duration {
    let start = Instant::now();
    for i in 0..cluster.servers.len() {
        let mut c = cluster.conn(i);
        while c.cmd(&["AUTH", user, password]).unwrap() != ok() {
            assert!(start.elapsed() < Duration::from_secs(10), "node {i} never learned user {user}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    start.elapsed()
}

fn redis_cli_as(cluster: &Cluster, i: usize, user: &str, password: &str, words: &[&str]) -> String {
    let mut args = vec!["--user", user, "--pass", password, "--no-auth-warning"];
    args.extend_from_slice(words);
    cluster.servers[i].redis_cli(0, &args)
}

#[test]
fn users_set_on_one_node_are_enforced_by_every_node() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(3, dir.path());
    cluster.servers[0].ctl(&["keyspace", "create", "orders", "--replicas", "log,log,log"]);
    let mut admin = cluster.conn(0);
    let set = |c: &mut Conn, words: &[&str]| c.cmd(&[&["ACL", "SETUSER"], words].concat()).unwrap();
    assert_eq!(set(&mut admin, &["reader", "on", ">rpw", "~*", "+@read", "+@connection"]), ok());
    let took = seen_everywhere(&cluster, "reader", "rpw");
    assert!(took < Duration::from_secs(1), "seen by every node after {took:?}");
    eprintln!("a new user was enforced by all three nodes {took:?} after ACL SETUSER answered");
    assert_eq!(set(&mut admin, &["orders", "on", ">opw", "~*", "+@all", "resetkeyspaces", "ks~orders"]), ok());
    seen_everywhere(&cluster, "orders", "opw");
    assert_eq!(admin.cmd(&["SET", "k", "v"]).unwrap(), ok(), "the default user may do anything");

    assert_eq!(redis_cli_as(&cluster, 2, "reader", "rpw", &["GET", "k"]), "v");
    let refused = redis_cli_as(&cluster, 2, "reader", "rpw", &["SET", "k", "w"]);
    assert_eq!(refused, "NOPERM this user has no permissions to run the 'set' command");
    assert!(
        matches!(cluster.conn(1).cmd(&["AUTH", "reader", "wrong"]).unwrap(), Resp::Error(e) if e.starts_with("WRONGPASS"))
    );

    let mut orders = cluster.conn(1);
    assert_eq!(orders.cmd(&["AUTH", "orders", "opw"]).unwrap(), ok());
    let elsewhere = Resp::Error("NOPERM this user has no permissions to use keyspace 'default'".into());
    assert_eq!(orders.cmd(&["GET", "k"]).unwrap(), elsewhere);
    assert_eq!(orders.cmd(&["KEYSPACE", "orders"]).unwrap(), ok());
    assert_eq!(orders.cmd(&["SET", "o", "1"]).unwrap(), ok());
    let select = Resp::Error("NOPERM this user has no permissions to select keyspace 'default'".into());
    assert_eq!(orders.cmd(&["KEYSPACE", "default"]).unwrap(), select);

    let script = "import redis, sys\n\
        r = redis.Redis(host=sys.argv[1], port=int(sys.argv[2]), username='reader', password='rpw')\n\
        print(r.get('k').decode())\n\
        try:\n\
        \x20   r.set('k', 'w')\n\
        \x20   print('written')\n\
        except redis.exceptions.NoPermissionError as e:\n\
        \x20   print('refused:', e)\n";
    let py = Command::new(support::python_with("redis", "python3-redis"))
        .args(["-c", script, &cluster.servers[1].resp.ip().to_string(), &cluster.servers[1].resp.port().to_string()])
        .output()
        .unwrap();
    assert!(py.status.success(), "{}", String::from_utf8_lossy(&py.stderr));
    let printed = String::from_utf8_lossy(&py.stdout);
    assert!(printed.starts_with("v\nrefused: this user has no permissions to run the 'set' command"), "{printed}");

    let listed = admin.cmd(&["ACL", "LIST"]).unwrap();
    let Resp::Array(Some(lines)) = &listed else { panic!("ACL LIST: {listed:?}") };
    let text: Vec<String> = lines
        .iter()
        .map(|l| {
            format!(
                "{}",
                String::from_utf8_lossy(match l {
                    Resp::Bulk(Some(b)) => b,
                    other => panic!("ACL LIST line {other:?}"),
                })
            )
        })
        .collect();
    let text = text.join("\n");
    assert!(text.contains("user reader on #$argon2id$") && !text.contains("rpw"), "{text}");

    // A restarted node keeps the users: they are in the map it stored.
    cluster.servers[2].kill();
    cluster.servers[2].spawn();
    cluster.servers[2].wait_ready(Duration::from_secs(20));
    assert_eq!(redis_cli_as(&cluster, 2, "reader", "rpw", &["GET", "k"]), "v");

    let mut doomed = cluster.conn(2);
    assert_eq!(doomed.cmd(&["AUTH", "reader", "rpw"]).unwrap(), ok());
    assert_eq!(admin.cmd(&["ACL", "DELUSER", "reader", "nobody"]).unwrap(), Resp::Int(1));
    let start = Instant::now();
    loop {
        match doomed.cmd(&["GET", "k"]) {
            Ok(Resp::Bulk(_)) if start.elapsed() < Duration::from_secs(1) => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Ok(Resp::Error(e)) => {
                assert!(e.contains("deleted"), "{e}");
                break;
            }
            other => panic!("a deleted user's connection is closed within a second, not {other:?}"),
        }
    }
    for i in 0..3 {
        let refused = cluster.conn(i).cmd(&["AUTH", "reader", "rpw"]).unwrap();
        assert!(matches!(&refused, Resp::Error(e) if e.starts_with("WRONGPASS")), "node {i}: {refused:?}");
    }
}
