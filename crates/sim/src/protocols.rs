//! How each protocol is put into the simulator: the factory that boots a node from its simulated disk,
//! and the cross-node invariants checked after every step.

use crate::run::node_ids;
use crate::world::{Factory, Invariants};
use meridian_core::{ChainId, ClusterConfig, ConfigError, NodeId, NodeSpec, Ring};
use meridian_proto::chain::{ChainConfig, ChainNode};
use meridian_store::{LogStore, SimVfs};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

pub fn cluster(nodes: usize, replication: usize, vnodes: usize) -> Result<ClusterConfig, ConfigError> {
    let specs = node_ids(nodes).into_iter().map(|id| NodeSpec { id, peer_addr: format!("sim-{}:1", id.0) }).collect();
    ClusterConfig::new(specs, replication, vnodes)
}

/// Chain replication over the log store on each node's simulated disk.
pub fn chain(cluster: ClusterConfig, cfg: ChainConfig) -> (Factory<ChainNode>, Invariants<ChainNode>) {
    let ring = Ring::new(&cluster);
    let factory: Factory<ChainNode> = Box::new(move |id: NodeId, disk: SimVfs, incarnation: u64| {
        let (store, _report) = LogStore::open(Arc::new(disk), Path::new("/data")).map_err(|e| e.to_string())?;
        ChainNode::new(id, &cluster, cfg.clone(), Box::new(store), incarnation).map_err(|e| e.to_string())
    });
    let invariants: Invariants<ChainNode> = Box::new(move |live| {
        live.values().try_for_each(|n| n.check_invariants())?;
        chain_property(&ring, live)
    });
    (factory, invariants)
}

/// Seed 003 Ch. 3's chain property for live neighbours: a successor never holds an update its
/// predecessor lacks (LU(succ) ≤ LU(pred)), which durable-before-forward keeps true across crashes.
fn chain_property(ring: &Ring, live: &BTreeMap<NodeId, &ChainNode>) -> Result<(), String> {
    let lus: BTreeMap<(NodeId, ChainId), u64> =
        live.iter().flat_map(|(&id, n)| n.positions().map(move |(c, lu, _)| ((id, c), lu))).collect();
    for chain in ring.chains() {
        for pair in chain.members.windows(2) {
            if let (Some(&x), Some(&y)) = (lus.get(&(pair[0], chain.id)), lus.get(&(pair[1], chain.id))) {
                if y > x {
                    return Err(format!(
                        "chain {}: {} has LU {y} but its predecessor {} has {x}",
                        chain.id, pair[1], pair[0]
                    ));
                }
            }
        }
    }
    Ok(())
}
