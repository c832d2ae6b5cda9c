//! The durability modes seen from a client: INFO's `# Persistence` section names the mode and counts the
//! fsyncs, and an async node reports the loss window it actually ran with.

use crate::kv_process::KvNode;
use crate::resp_client::{Client, Resp};
use crate::support::{cluster, options, within};
use meridian_core::{DurabilityMode, NodeId};
use meridian_node::{start_node, NodeHandle, SyncPolicy};
use std::time::Duration;

async fn start_kv_in(policy: SyncPolicy) -> NodeHandle {
    let cluster = cluster(1);
    let mut opts = options(NodeId(1), &cluster);
    opts.durability = policy;
    start_node(opts, KvNode::new(NodeId(1), &cluster)).await.unwrap()
}

/// INFO PERSISTENCE as `field -> value` pairs.
async fn persistence(c: &mut Client) -> Vec<(String, String)> {
    let Resp::Bulk(Some(info)) = c.cmd(&["INFO", "persistence"]).await else { panic!("INFO is not a bulk string") };
    let info = String::from_utf8(info).unwrap();
    assert!(info.starts_with("# Persistence\r\n"), "{info}");
    info.lines().filter_map(|l| l.split_once(':')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn field(info: &[(String, String)], name: &str) -> String {
    info.iter().find(|(k, _)| k == name).unwrap_or_else(|| panic!("no {name} in {info:?}")).1.clone()
}

fn micros(info: &[(String, String)], name: &str) -> u64 {
    field(info, name).parse().unwrap()
}

#[tokio::test]
async fn info_names_the_mode_and_counts_fsyncs() {
    let group = SyncPolicy { group_max_wait: Duration::from_micros(250), ..SyncPolicy::default() };
    for (policy, knob) in
        [(SyncPolicy::with_default(DurabilityMode::Sync), None), (group, Some(("group_max_wait_us", "250")))]
    {
        let node = start_kv_in(policy).await;
        let mut c = Client::connect(node.resp_addr()).await;
        for i in 0..3 {
            assert_eq!(c.cmd(&["SET", &format!("k{i}"), "v"]).await, Resp::ok());
        }
        let info = persistence(&mut c).await;
        assert_eq!(field(&info, "durability"), policy.default.to_string());
        if let Some((name, value)) = knob {
            assert_eq!(field(&info, name), value);
        }
        assert_eq!(micros(&info, "fsyncs"), 3, "one client, one write at a time: one fsync each");
        assert_eq!(micros(&info, "loss_window_max_us"), 0, "nothing is acknowledged before its fsync");
        within("shutdown", node.shutdown()).await;
    }
}

#[tokio::test]
async fn an_async_node_reports_the_loss_window_it_ran_with() {
    let interval = Duration::from_millis(30);
    let node =
        start_kv_in(SyncPolicy { async_interval: interval, ..SyncPolicy::with_default(DurabilityMode::Async) }).await;
    let mut c = Client::connect(node.resp_addr()).await;
    for i in 0..20 {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), "v"]).await, Resp::ok());
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let info = loop {
        let info = persistence(&mut c).await;
        if micros(&info, "fsyncs") > 0 {
            break info;
        }
        assert!(tokio::time::Instant::now() < deadline, "no fsync one interval after the writes: {info:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert_eq!(field(&info, "durability"), "async");
    assert_eq!(field(&info, "async_interval_ms"), "30");
    let window = Duration::from_micros(micros(&info, "loss_window_max_us"));
    assert!(window >= interval, "an async fsync waits out the interval after the oldest write: {window:?}");
    within("shutdown", node.shutdown()).await;
}
