//! The keyspace configurations issue 5 compares, and making them on a running cluster: each is created through
//! one node's `POST /v1/keyspaces`, and used once every node's map has it (a node that has not seen it yet
//! refuses the keyspace's requests).

use crate::local::{http, Cluster, MapView};
use meridian_core::{ReplicaKind, UpdateMode};
use serde_json::json;
use std::time::{Duration, Instant};

/// A chain's replica types, head first, with the seed's name for it (M: memory, D: disk log).
#[derive(Clone, Copy, Debug)]
pub(super) struct Layout {
    pub name: &'static str,
    pub replicas: [ReplicaKind; 2],
}

pub(super) const MM: Layout = Layout { name: "M-M", replicas: [ReplicaKind::Mem, ReplicaKind::Mem] };
pub(super) const MD: Layout = Layout { name: "M-D", replicas: [ReplicaKind::Mem, ReplicaKind::Log] };
pub(super) const DD: Layout = Layout { name: "D-D", replicas: [ReplicaKind::Log, ReplicaKind::Log] };
/// The chains whose put latency is measured.
pub(super) const CHAINS: [Layout; 3] = [MM, MD, DD];
/// The update modes measured, from the most waiting to the least.
pub(super) const UPDATES: [UpdateMode; 3] = [UpdateMode::Su, UpdateMode::Ausi, UpdateMode::Au];
/// How long every node may take to show a new keyspace in its map: one map change, normally well under a
/// second.
const KNOWN_WAIT: Duration = Duration::from_secs(30);

/// A keyspace the bench made.
#[derive(Clone, Debug)]
pub(super) struct Keyspace {
    pub name: String,
    /// What `SELECT` takes; chains of this keyspace carry it.
    pub id: u32,
    /// Its chains' length at full replication.
    pub replication: usize,
    /// The seed's name of its chain (`M-D`).
    pub chain: &'static str,
    pub update: UpdateMode,
}

/// Creates a keyspace of `chain` under `update`, read from the tail, through the first node, and waits until
/// every node's map has it. Its name says what it is: `md-ausi`.
pub(super) fn create(cluster: &Cluster, chain: Layout, update: UpdateMode) -> Result<Keyspace, String> {
    let name = format!("{}-{}", chain.name.replace('-', "").to_lowercase(), update.name());
    let body = json!({
        "name": name, "replicas": chain.replicas.map(ReplicaKind::name), "update": update.name(), "read_from": "tail",
    });
    http::post(first_http(cluster)?, "/v1/keyspaces", &body)?;
    let start = Instant::now();
    for node in &cluster.nodes {
        while !MapView::read(node.http).is_ok_and(|m| m.keyspace(&name).is_some()) {
            if start.elapsed() > KNOWN_WAIT {
                return Err(format!("node {} did not show keyspace {name} within {KNOWN_WAIT:?}", node.id));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let map = MapView::read(first_http(cluster)?)?;
    let known = map.keyspace(&name).ok_or_else(|| format!("keyspace {name} is gone"))?;
    Ok(Keyspace { name, id: known.id, replication: known.replication, chain: chain.name, update })
}

/// Drops `keyspace` and its data on every node, so that what the next measurement writes has the memory and
/// disk to itself.
pub(super) fn drop(cluster: &Cluster, keyspace: &Keyspace) -> Result<(), String> {
    http::delete(first_http(cluster)?, &format!("/v1/keyspaces/{}", keyspace.name)).map(|_| ())
}

fn first_http(cluster: &Cluster) -> Result<std::net::SocketAddr, String> {
    Ok(cluster.nodes.first().ok_or("no node")?.http)
}
