//! Real processes: three `meridian server`s on 127.0.0.1-3, concurrent clients writing and reading
//! through every node, one node SIGKILLed and restarted mid-run. The recorded history must be
//! linearizable and every acknowledged write must be readable at the end.

mod support;

use std::net::SocketAddr;
use std::time::Duration;
use support::load::{assert_linearizable, Load};
use support::Cluster;

#[test]
fn sigkill_and_restart_keeps_history_linearizable_and_acked_writes() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(3, dir.path());
    let addrs: Vec<SocketAddr> = cluster.servers.iter().map(|s| s.resp).collect();
    let load = Load::start(addrs.clone(), 6);
    std::thread::sleep(Duration::from_secs(3));
    cluster.servers[1].kill();
    std::thread::sleep(Duration::from_secs(2));
    cluster.servers[1].spawn();
    cluster.servers[1].wait_ready(Duration::from_secs(20));
    std::thread::sleep(Duration::from_secs(4));
    let history = load.finish(&addrs);
    assert_linearizable(&history, dir, || cluster.servers.iter().map(|s| s.log()).collect());
}
