//! Real processes, seed 003 §2.5–2.6 end to end: four `meridian server`s under load; a fifth joins with
//! `--join` and takes its share of the chains; one node is SIGKILLed, the manager repairs its chains; the
//! operator removes it with `meridian ctl node remove`. The history must be linearizable, no acknowledged
//! write may be lost, and `meridian ctl status` must show every chain back at R.

mod support;

use serde_json::Value;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use support::load::{assert_linearizable, Load};
use support::{Cluster, Server};

/// Waits (boundedly) until `done` holds for `node`'s view of the cluster.
fn wait_for(node: &Server, what: &str, limit: Duration, done: impl Fn(&Value) -> bool) {
    let start = Instant::now();
    loop {
        let status = node.cluster_status();
        if done(&status["status"]) {
            return eprintln!("{what} after {:.1} s", start.elapsed().as_secs_f64());
        }
        assert!(start.elapsed() < limit, "not {what} after {limit:?}: {status:#}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn state(status: &Value, node: u32) -> String {
    let nodes = status["nodes"].as_array().cloned().unwrap_or_default();
    nodes.iter().find(|n| n["id"] == node).map_or("absent".into(), |n| n["state"].as_str().unwrap().to_string())
}

/// Every chain has R members, none of them `gone`, and no step in flight.
fn settled(status: &Value, gone: Option<u32>) -> bool {
    let r = status["replication"].as_u64().unwrap_or(0) as usize;
    let chains = status["chains"].as_array().cloned().unwrap_or_default();
    !chains.is_empty()
        && chains.iter().all(|c| {
            let members = c["members"].as_array().unwrap();
            members.len() == r && c["change"].is_null() && gone.is_none_or(|g| !members.iter().any(|m| *m == g))
        })
}

#[test]
fn a_node_joins_another_fails_and_is_removed_under_load() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(4, dir.path());
    let mut addrs: Vec<SocketAddr> = cluster.servers.iter().map(|s| s.resp).collect();
    let load = Load::start(addrs.clone(), 6);
    std::thread::sleep(Duration::from_secs(2));

    let joiner = Server::join(5, cluster.servers[0].http, dir.path());
    joiner.wait_ready(Duration::from_secs(20));
    wait_for(&cluster.servers[0], "n5 active and every chain at R", Duration::from_secs(60), |s| {
        state(s, 5) == "ACTIVE" && settled(s, None)
    });
    let holds = joiner.cluster_status()["status"]["replicas"].as_array().map_or(0, Vec::len);
    assert!(holds > 0, "the joiner holds no chain");
    let metrics = joiner.http_get("/metrics");
    let counted =
        |name: &str| metrics.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse::<u64>().ok());
    assert!(counted("meridian_precopies_total ") >= Some(1), "/metrics shows no pre-copy:\n{metrics}");
    assert!(counted("meridian_flushes_total ") >= Some(1), "/metrics shows no flush:\n{metrics}");
    load.add_node(joiner.resp);
    addrs.push(joiner.resp);
    std::thread::sleep(Duration::from_secs(2));

    let victim = cluster.servers[3].resp;
    load.drop_node(victim);
    cluster.servers[3].kill();
    let first = &cluster.servers[0];
    wait_for(first, "n4 repaired out of every chain", Duration::from_secs(60), |s| {
        state(s, 4) != "ACTIVE" && settled(s, Some(4))
    });
    let said = first.ctl(&["node", "remove", "4"]);
    assert!(said.contains("remove node 4"), "{said}");
    wait_for(first, "n4 removed", Duration::from_secs(30), |s| state(s, 4) == "REMOVED" && settled(s, Some(4)));
    let clash = std::process::Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["server", "--node-id", "2", "--peer-listen", "127.0.0.9:1", "--join", &first.http.to_string()])
        .args(["--data-dir", dir.path().join("clash").to_str().unwrap()])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&clash.stderr);
    assert!(!clash.status.success() && said.contains("node id 2 is already used"), "{said}");
    let status = first.ctl(&["status"]);
    assert!(status.contains("at their R, 0 with a step in flight, a lost replica or not at R"), "{status}");
    assert!(status.contains("REMOVED"), "{status}");
    std::thread::sleep(Duration::from_secs(2));

    addrs.retain(|&a| a != victim);
    eprintln!("{} unique writes acknowledged", load.acked());
    let history = load.finish(&addrs);
    let mut logs: Vec<String> = cluster.servers.iter().map(|s| s.log()).collect();
    logs.push(joiner.log());
    assert_linearizable(&history, dir, || logs);
}
