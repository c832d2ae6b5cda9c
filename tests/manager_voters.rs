//! The manager's Raft group on real processes: a voter killed for good is replaced by another node, and an
//! operator moves the group with `ctl manager voters --set` (docs/regions.md, "The control plane").

mod support;

use serde_json::Value;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use support::resp::Resp;
use support::{free_port, Server};

fn voters(server: &Server) -> Value {
    server.cluster_status()["status"]["manager"]["voters"].clone()
}

/// Polls `server`'s view of the voters until it is `want`, for up to `limit`.
fn wait_for_voters(server: &Server, want: Value, limit: Duration) {
    let deadline = Instant::now() + limit;
    while voters(server) != want {
        assert!(Instant::now() < deadline, "voters {} never became {want}", voters(server));
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Four nodes with a fast manager tick (20 ms: a voter failed for 6 s is replaced): voters 1, 2 and 3. Node 1
/// killed with SIGKILL is replaced by node 4 without operator action, and the cluster takes writes. Brought
/// back, node 1 is no voter (it closes its replica, keeping the log); an operator puts it back in place of node
/// 4, and it catches up as a learner, then votes; the operator's set stays the group's. Bad sets are refused
/// with the reason.
#[test]
fn a_dead_voter_is_replaced_and_an_operator_moves_the_voters() {
    let dir = tempfile::tempdir().unwrap();
    let peers: Vec<SocketAddr> =
        (1..=4).map(|i| format!("127.0.0.{i}:{}", free_port(&format!("127.0.0.{i}"))).parse().unwrap()).collect();
    let list: Vec<String> = peers.iter().enumerate().map(|(i, a)| format!("{}={a}", i + 1)).collect();
    let start = ["--peers".to_string(), list.join(","), "--manager-tick-ms".into(), "20".into()];
    let mut servers: Vec<Server> = (1..=4)
        .map(|id| Server::launch(id, &format!("127.0.0.{id}"), peers[id as usize - 1], &start, dir.path()))
        .collect();
    servers.iter().for_each(|s| s.wait_ready(Duration::from_secs(30)));
    wait_for_voters(&servers[1], serde_json::json!([1, 2, 3]), Duration::from_secs(10));

    servers[0].kill();
    wait_for_voters(&servers[1], serde_json::json!([2, 3, 4]), Duration::from_secs(40));
    let mut conn = support::resp::Conn::connect(servers[3].resp, Duration::from_secs(5)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while conn.cmd(&["SET", "after", "replaced"]).unwrap() != Resp::Simple("OK".into()) {
        assert!(Instant::now() < deadline, "no write after the voter was replaced");
        std::thread::sleep(Duration::from_millis(100));
    }

    for (set, why) in [("1,2", "2 voters"), ("2,3,9", "node n9 is not in the cluster"), ("a,b", "node ids")] {
        let said = servers[1].ctl_fails(&["manager", "voters", "--set", set]);
        assert!(said.contains(why), "--set {set}: {said}");
    }
    servers[0].spawn();
    servers[0].wait_ready(Duration::from_secs(30));
    assert_eq!(voters(&servers[1]), serde_json::json!([2, 3, 4]), "a replaced voter does not come back by itself");
    let said = servers[1].ctl(&["manager", "voters", "--set", "1,2,3"]);
    assert!(said.contains("n1, n2, n3"), "{said}");
    wait_for_voters(&servers[1], serde_json::json!([1, 2, 3]), Duration::from_secs(30));
    // Node 1 started from the map it stored before it was killed, which named it a voter too: wait for the
    // group's map to reach it.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let shown = servers[0].ctl(&["manager", "voters"]);
        let here = servers[0].cluster_status()["status"]["manager"]["here"].clone();
        let voting = here == "voter" || here == "leader";
        if shown.contains("voters:   n1 n2 n3") && shown.contains("wanted:   n1 n2 n3") && voting {
            break;
        }
        assert!(Instant::now() < deadline, "node 1 does not show itself voting for the set asked: {shown} {here}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
