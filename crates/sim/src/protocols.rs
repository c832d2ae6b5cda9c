//! How each protocol is put into the simulator: the factory that boots a node from its simulated disk,
//! and the cross-node invariants checked after every step.

use crate::rng::SimRng;
use crate::run::node_ids;
use crate::world::{Counters, Factory, Invariants};
use meridian_core::{ChainId, ClusterConfig, ConfigError, NodeId, NodeSpec, Ring};
use meridian_proto::chain::{ChainConfig, ChainNode};
use meridian_store::{CompactionOptions, LogOptions, LogStore, SimVfs};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

pub fn cluster(nodes: usize, replication: usize, vnodes: usize) -> Result<ClusterConfig, ConfigError> {
    let specs = node_ids(nodes).into_iter().map(|id| NodeSpec { id, peer_addr: format!("sim-{}:1", id.0) }).collect();
    ClusterConfig::new(specs, replication, vnodes)
}

/// Log-store settings swarm-randomised per run: segments small enough that runs seal many of them and
/// compaction passes interleave with replication, crashes and recovery.
pub fn log_options(rng: &mut SimRng) -> LogOptions {
    LogOptions {
        segment_bytes: rng.range(512, 32 << 10),
        write_buffer_bytes: rng.range(0, 4 << 10) as usize,
        compaction: CompactionOptions {
            dead_ratio: 0.2 + rng.unit() * 0.5,
            slice_bytes: rng.range(256, 16 << 10),
            min_segments: rng.range(1, 4) as usize,
        },
    }
}

/// Chain replication over the log store on each node's simulated disk.
pub fn chain(
    cluster: ClusterConfig,
    cfg: ChainConfig,
    log: LogOptions,
) -> (Factory<ChainNode>, Invariants<ChainNode>, Counters<ChainNode>) {
    let ring = Ring::new(&cluster);
    let factory: Factory<ChainNode> = Box::new(move |id: NodeId, disk: SimVfs, incarnation: u64| {
        let (store, _report) =
            LogStore::open_with(Arc::new(disk), Path::new("/data"), log).map_err(|e| e.to_string())?;
        ChainNode::new(id, &cluster, cfg.clone(), Box::new(store), incarnation).map_err(|e| e.to_string())
    });
    let invariants: Invariants<ChainNode> = Box::new(move |live| {
        live.values().try_for_each(|n| n.check_invariants())?;
        chain_property(&ring, live)
    });
    let counters: Counters<ChainNode> = Box::new(|node| {
        let stats = node.store_stats();
        vec![("compactions", stats.compactions), ("segments", stats.segments)]
    });
    (factory, invariants, counters)
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
