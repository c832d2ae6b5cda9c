//! How each protocol is put into the simulator: the factory that boots a node from its simulated disk,
//! and the cross-node invariants checked after every step.

use crate::net::Placement;
use crate::rng::SimRng;
use crate::run::node_ids;
use crate::world::Hooks;
use meridian_core::ring::key_token;
use meridian_core::topology::Topology;
use meridian_core::{
    ChainId, ClusterConfig, ConfigError, KeyspaceConfig, KeyspaceId, Location, NodeId, NodeSpec, Time, Violation,
};
use meridian_proto::manager::agent::JoinRequest;
use meridian_proto::manager::msg::MgrMsg;
use meridian_proto::map::placement::chain_for_token;
use meridian_proto::map::{ClusterMap, NodeAddrs};
use meridian_proto::node::{ClusterNode, NodeConfig, NodeMsg, NodeSetup, Protocols};
use meridian_store::{CompactionOptions, LogOptions, SimVfs};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// `nodes` nodes whose `default` keyspace is configured as `default`.
pub fn cluster(nodes: usize, default: &KeyspaceConfig, vnodes: usize) -> Result<ClusterConfig, ConfigError> {
    let specs = node_ids(nodes).into_iter().map(|id| NodeSpec::new(id, peer_addr(id))).collect();
    ClusterConfig::new(specs, default.replication().max(1), vnodes)?.with_default(default.clone())
}

fn peer_addr(id: NodeId) -> String {
    format!("sim-{}:1", id.0)
}

/// Log-store settings swarm-randomised per run: segments small enough that runs seal many of them and
/// compaction passes interleave with replication, crashes and recovery.
pub fn log_options(rng: &mut SimRng) -> LogOptions {
    let mut opts = LogOptions {
        segment_bytes: rng.range(512, 32 << 10),
        write_buffer_bytes: rng.range(0, 4 << 10) as usize,
        compaction: CompactionOptions {
            dead_ratio: 0.2 + rng.unit() * 0.5,
            slice_bytes: rng.range(256, 16 << 10),
            min_segments: rng.range(1, 4) as usize,
            pace: 0,
        },
        // Drawn last, so the draws above stay what they were for each seed.
        preallocate_bytes: rng.range(0, 2 << 10),
    };
    // Unpaced in a third of the runs; in the others slices larger than the pace's floor are paced.
    opts.compaction.pace = [0, 2, 4][rng.range(0, 3) as usize];
    opts
}

/// Partitions per run: few, so that the workload's handful of keys share chains and joins copy data.
pub fn partitions(rng: &mut SimRng) -> u32 {
    1 << rng.range(0, 5)
}

/// Where each node runs: on a topology, in the region [`crate::run::topology`] puts it in; on a drawn network,
/// in region `default` (its regions and zones shape only latencies).
pub fn locations(topology: Option<&Topology>, placements: &BTreeMap<NodeId, Placement>) -> BTreeMap<NodeId, Location> {
    let Some(t) = topology else { return BTreeMap::new() };
    let region = |p: &Placement| Location::region(&t.regions()[p.region as usize].name).expect("a topology's names");
    placements.iter().map(|(&id, p)| (id, region(p))).collect()
}

/// Chain replication with its replicated manager over the log store on each node's simulated disk. Nodes
/// outside `initial` are spares that ask to join when the nemesis starts them, at their `locations` (region
/// `default` for a node it lacks), as those in `initial` are at theirs; those `hosts` names join as affiliated
/// nodes of their host.
pub fn chain(
    mut initial: ClusterConfig,
    cfg: NodeConfig,
    log: LogOptions,
    locations: BTreeMap<NodeId, Location>,
    hosts: BTreeMap<NodeId, NodeId>,
) -> Hooks<ClusterNode> {
    let at = move |id: NodeId| locations.get(&id).cloned().unwrap_or_default();
    initial.nodes.iter_mut().for_each(|n| n.location = at(n.id));
    let vnodes = initial.vnodes as u32;
    let factory_initial = initial.clone();
    let factory = Box::new(move |id: NodeId, disk: SimVfs, incarnation: u64| {
        let vfs = Arc::new(disk);
        let join = factory_initial.node(id).is_none().then(|| JoinRequest {
            addrs: NodeAddrs { peer_addr: peer_addr(id), resp_addr: format!("sim-{}:2", id.0), http_addr: None },
            vnodes,
            location: at(id),
            host: hosts.get(&id).copied(),
        });
        let setup = NodeSetup {
            me: id,
            vfs,
            dir: "/data".into(),
            initial: factory_initial.clone(),
            join,
            incarnation,
            jitter: incarnation.rotate_left(17),
        };
        ClusterNode::open(setup, cfg.clone(), log).map_err(Into::into)
    });
    let invariants = Box::new(|live: &BTreeMap<NodeId, (&ClusterNode, Time)>| {
        for (n, _) in live.values() {
            n.protocols().check_invariants()?;
        }
        same_epoch_same_map(live)?;
        one_tail_per_chain(live)?;
        chain_property(live)?;
        restored_only_without_a_durable_kind(live)
    });
    let counters = Box::new(|node: &ClusterNode| {
        let stats = node.store_stats();
        let mut counters = vec![("compactions", stats.compactions), ("segments", stats.segments)];
        counters.extend(node.protocols().counters());
        let manager = node.manager_stats();
        counters.push(("manager membership changes", manager.membership_changes));
        counters.push(("manager leadership hand-overs", manager.hand_overs));
        counters
    });
    let restored = Box::new(|node: &ClusterNode, keyspace: KeyspaceId, key: &[u8]| {
        let Some(map) = node.map() else { return false };
        let chain = chain_for_token(keyspace, key_token(key), map.partitions);
        map.chains.get(&chain).is_some_and(|c| c.restored.is_some())
    });
    Hooks {
        factory,
        invariants,
        counters,
        restored,
        leads: Box::new(|n: &ClusterNode| n.manager().is_some_and(|m| m.is_leader())),
        describe: Box::new(|n: &ClusterNode, now: Time| n.describe(now)),
        label: Box::new(|msg: &NodeMsg| match msg {
            NodeMsg::Raft(_) => "raft",
            NodeMsg::Mgr(MgrMsg::Map(_)) => "map",
            NodeMsg::Mgr(MgrMsg::HeartbeatReply(r)) if r.map.is_some() => "map",
            NodeMsg::Mgr(MgrMsg::Heartbeat(_) | MgrMsg::HeartbeatReply(_)) => "heartbeat",
            NodeMsg::Mgr(_) => "admin",
            protocol => Protocols::label(protocol).expect("a protocol's message"),
        }),
    }
}

/// Raft's safety as the nodes see it: two nodes that adopted the same epoch hold the same map, and every map
/// keeps the map's own invariants.
fn same_epoch_same_map(live: &BTreeMap<NodeId, (&ClusterNode, Time)>) -> Result<(), Violation> {
    let mut seen: BTreeMap<u64, (NodeId, &Arc<ClusterMap>)> = BTreeMap::new();
    for (&id, (n, _)) in live {
        let Some(map) = n.map() else { continue };
        match seen.get(&map.epoch) {
            Some((other, m)) if !Arc::ptr_eq(m, map) && ***m != **map => {
                return Err(format!("{id} and {other} hold different maps at epoch {}", map.epoch).into());
            }
            Some(_) => {}
            None => {
                map.check().map_err(|e| format!("{id}'s map at epoch {}: {e}", map.epoch))?;
                seen.insert(map.epoch, (id, map));
            }
        }
    }
    Ok(())
}

/// The property tail leases exist for: at no moment do two nodes answer clients as tail of the same chain, or
/// answer its reads at different views. A node's claim is what it says it serves (`serving`) and what it just
/// answered (`answered`): a path that answers without asking `serving`'s question is held to it all the same.
fn one_tail_per_chain(live: &BTreeMap<NodeId, (&ClusterNode, Time)>) -> Result<(), Violation> {
    let mut tails: BTreeMap<ChainId, (NodeId, u64)> = BTreeMap::new();
    let mut readers: BTreeMap<ChainId, (NodeId, u64)> = BTreeMap::new();
    for (&id, (n, now)) in live {
        let claims: BTreeSet<(ChainId, u64, bool)> =
            n.chain().serving(*now).into_iter().chain(n.chain().answered(*now)).collect();
        for (chain, view, tail) in claims {
            // A node's own claims may differ within one step (it answered, then moved on to a new view).
            let other =
                |seen: &mut BTreeMap<ChainId, (NodeId, u64)>| seen.insert(chain, (id, view)).filter(|&(o, _)| o != id);
            if let Some((o, v)) = tail.then(|| other(&mut tails)).flatten() {
                return Err(format!("chain {chain}: {o} (view {v}) and {id} (view {view}) both serve as tail").into());
            }
            if let Some((o, v)) = other(&mut readers).filter(|&(_, v)| v != view) {
                return Err(format!("chain {chain}: {o} serves reads at view {v} and {id} at view {view}").into());
            }
        }
    }
    Ok(())
}

/// A chain is restored from a lost replica, giving up the writes it missed, only in a keyspace that keeps no
/// replica that survives a restart (`docs/keyspaces.md`, "Replica types"): with a `log` replica in the chain, some
/// member always holds every acknowledged write durably, and the chain waits for it.
fn restored_only_without_a_durable_kind(live: &BTreeMap<NodeId, (&ClusterNode, Time)>) -> Result<(), Violation> {
    let Some(map) = live.values().filter_map(|(n, _)| n.map()).max_by_key(|m| m.epoch) else { return Ok(()) };
    for c in map.chains.values().filter(|c| c.restored.is_some()) {
        let Some(keyspace) = map.keyspaces.get(&c.id.keyspace()) else { continue };
        if keyspace.config.replicas.iter().any(|k| k.survives_restart()) {
            return Err(format!(
                "chain {} was restored from a lost replica though its keyspace keeps {:?}: acknowledged writes may be lost",
                c.id, keyspace.config.replicas
            ).into());
        }
    }
    Ok(())
}

/// Seed 003 Ch. 3's chain property for live neighbours of the newest map: a successor never holds an
/// update its predecessor lacks (LU(succ) ≤ LU(pred)), for members that are valid replicas at that view.
fn chain_property(live: &BTreeMap<NodeId, (&ClusterNode, Time)>) -> Result<(), Violation> {
    let Some(map) = live.values().filter_map(|(n, _)| n.map()).max_by_key(|m| m.epoch) else { return Ok(()) };
    let lus: BTreeMap<(NodeId, ChainId), (u64, u64)> = live
        .iter()
        .flat_map(|(&id, (n, _))| n.chain().positions().map(move |(c, lu, _, view)| ((id, c), (lu, view))))
        .collect();
    for chain in map.chains.values() {
        for pair in chain.members.windows(2) {
            let at_view = |n: NodeId| lus.get(&(n, chain.id)).filter(|(_, v)| *v == chain.view).map(|(lu, _)| *lu);
            if let (Some(x), Some(y)) = (at_view(pair[0]), at_view(pair[1])) {
                if y > x {
                    return Err(format!(
                        "chain {} view {}: {} has LU {y} but its predecessor {} has {x}",
                        chain.id, chain.view, pair[1], pair[0]
                    )
                    .into());
                }
            }
        }
    }
    Ok(())
}
