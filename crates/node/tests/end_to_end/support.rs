//! Shared helpers: bounded waits, clusters on loopback, starting nodes that run [`KvNode`].

use crate::kv_process::KvNode;
use meridian_core::{ClusterConfig, Limits, NodeId, NodeSpec};
use meridian_node::{start_node, NodeHandle, NodeOptions, RespLimits, SyncPolicy};
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

/// Small limits so the limit tests stay small.
pub const LIMITS: Limits = Limits { max_key_bytes: 64, max_value_bytes: 256 };

/// Awaits `fut`, failing the test if it takes longer than a generous bound.
pub async fn within<F: Future>(what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(Duration::from_secs(20), fut).await {
        Ok(out) => out,
        Err(_) => panic!("timed out: {what}"),
    }
}

pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A port that was free a moment ago, for peer addresses that must be in the config before any node
/// starts.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind(loopback(0)).unwrap().local_addr().unwrap().port()
}

/// A cluster of `n` nodes on loopback ports that were free; replication 1 so each key has one owner.
pub fn cluster(n: u32) -> ClusterConfig {
    let nodes = (1..=n).map(|i| NodeSpec::new(NodeId(i), loopback(free_port()).to_string())).collect();
    ClusterConfig::new(nodes, 1, 8).unwrap()
}

pub fn peer_listen(cluster: &ClusterConfig, node: NodeId) -> SocketAddr {
    cluster.node(node).unwrap().peer_addr.parse().unwrap()
}

pub fn options(node: NodeId, cluster: &ClusterConfig) -> NodeOptions {
    NodeOptions {
        node_id: node,
        cluster: cluster.clone(),
        resp_listen: Some(loopback(0)),
        tls: None,
        peer_listen: peer_listen(cluster, node),
        http_listen: Some(loopback(0)),
        limits: LIMITS,
        resp: RespLimits::default(),
        durability: SyncPolicy::default(),
        data_dir: None,
        region: meridian_core::location::DEFAULT_REGION.into(),
        wan: None,
        peer_tls: None,
        requirepass: None,
        http_security: Default::default(),
    }
}

pub async fn start_kv(node: NodeId, cluster: &ClusterConfig) -> NodeHandle {
    start_node(options(node, cluster), KvNode::new(node, cluster)).await.unwrap()
}

/// A one-node cluster running the KV process.
pub async fn single_kv() -> NodeHandle {
    start_kv(NodeId(1), &cluster(1)).await
}

/// The `i`-th key (from 0) that `node` owns.
pub fn owned_key(cluster: &ClusterConfig, node: NodeId, i: usize) -> String {
    (0..).map(|n| format!("key{n}")).filter(|k| crate::kv_process::owner(cluster, k.as_bytes()) == node).nth(i).unwrap()
}
