//! Map format 1, read to upgrade: the map and its commands as builds before locations and placements wrote
//! them (the map file, the Raft log's entries and snapshots). Postcard is not self-describing, so the types
//! here are frozen copies of the format-1 shapes of what format 2 changed (a node's info, a keyspace's
//! configuration, `Bootstrap` and `AddNode`), around the unchanged ones. What they lack reads as its default:
//! every node in region `default`, every keyspace a `chain` keyspace spread over all regions.
//!
//! Never change these types: they describe bytes already on disks.

use super::{ChainChange, ChainView, ClusterMap, Keyspace, MapCommand, NodeAddrs, NodeInfo, NodeState};
use meridian_core::{
    ChainId, ChainMap, DurabilityMode, KeyspaceConfig, KeyspaceId, Location, NodeId, QueryNode, ReplicaKind, UpdateMode,
};
use serde::Deserialize;
use std::collections::BTreeMap;

/// Decodes a format-1 map.
pub fn map(bytes: &[u8]) -> postcard::Result<ClusterMap> {
    postcard::from_bytes::<Map1>(bytes).map(Map1::upgrade)
}

/// Decodes a format-1 command.
pub fn command(bytes: &[u8]) -> postcard::Result<MapCommand> {
    postcard::from_bytes::<Command1>(bytes).map(Command1::upgrade)
}

#[derive(Deserialize)]
struct NodeInfo1 {
    addrs: NodeAddrs,
    vnodes: u32,
    state: NodeState,
    departed: bool,
}

#[derive(Deserialize)]
struct Config1 {
    replicas: Vec<ReplicaKind>,
    update: UpdateMode,
    read_from: QueryNode,
    maxmemory: Option<u64>,
    durability: Option<DurabilityMode>,
}

impl Config1 {
    fn upgrade(self) -> KeyspaceConfig {
        let Config1 { replicas, update, read_from, maxmemory, durability } = self;
        KeyspaceConfig { update, read_from, maxmemory, durability, ..KeyspaceConfig::with_replicas(replicas) }
    }
}

#[derive(Deserialize)]
struct Keyspace1 {
    name: String,
    config: Config1,
}

#[derive(Deserialize)]
struct Map1 {
    epoch: u64,
    partitions: u32,
    nodes: BTreeMap<NodeId, NodeInfo1>,
    chains: ChainMap<ChainView>,
    manager_voters: Vec<NodeId>,
    next_step: u64,
    keyspaces: BTreeMap<KeyspaceId, Keyspace1>,
    next_keyspace: u32,
}

impl Map1 {
    fn upgrade(self) -> ClusterMap {
        let node = |n: NodeInfo1| NodeInfo {
            addrs: n.addrs,
            vnodes: n.vnodes,
            state: n.state,
            departed: n.departed,
            location: Location::default(),
        };
        let keyspace = |k: Keyspace1| Keyspace { name: k.name, config: k.config.upgrade() };
        ClusterMap {
            epoch: self.epoch,
            partitions: self.partitions,
            nodes: self.nodes.into_iter().map(|(id, n)| (id, node(n))).collect(),
            chains: self.chains,
            manager_voters: self.manager_voters,
            next_step: self.next_step,
            keyspaces: self.keyspaces.into_iter().map(|(id, k)| (id, keyspace(k))).collect(),
            next_keyspace: self.next_keyspace,
            masters: BTreeMap::new(),
            hosts: BTreeMap::new(),
            users: BTreeMap::new(),
            manager_learners: Vec::new(),
            voters_wanted: Vec::new(),
        }
    }
}

/// `MapCommand` of format 1, variant for variant (postcard numbers variants by position).
#[derive(Deserialize)]
enum Command1 {
    Bootstrap { nodes: Vec<(NodeId, NodeAddrs)>, default: Config1, partitions: u32, vnodes: u32, voters: Vec<NodeId> },
    AddNode { id: NodeId, addrs: NodeAddrs, vnodes: u32 },
    RemoveNode { id: NodeId },
    NodeFailed { id: NodeId },
    NodeRecovered { id: NodeId },
    StepStarted { chain: ChainId, expected_view: u64, change: ChainChange },
    AddInserted { chain: ChainId, step: u64 },
    StepDone { chain: ChainId, step: u64 },
    StepAborted { chain: ChainId, step: u64 },
    CreateKeyspace { name: String, config: Config1 },
    DropKeyspace { name: String },
    ReplicaLost { chain: ChainId, node: NodeId, incarnation: u64 },
    ReplicaRestored { chain: ChainId, node: NodeId, incarnation: u64 },
}

impl Command1 {
    fn upgrade(self) -> MapCommand {
        use MapCommand as C;
        match self {
            Command1::Bootstrap { nodes, default, partitions, vnodes, voters } => {
                let nodes = nodes.into_iter().map(|(id, addrs)| (id, addrs, Location::default())).collect();
                C::Bootstrap { nodes, default: default.upgrade(), partitions, vnodes, voters }
            }
            Command1::AddNode { id, addrs, vnodes } => C::AddNode { id, addrs, vnodes, location: Location::default() },
            Command1::RemoveNode { id } => C::RemoveNode { id },
            Command1::NodeFailed { id } => C::NodeFailed { id },
            Command1::NodeRecovered { id } => C::NodeRecovered { id },
            Command1::StepStarted { chain, expected_view, change } => C::StepStarted { chain, expected_view, change },
            Command1::AddInserted { chain, step } => C::AddInserted { chain, step },
            Command1::StepDone { chain, step } => C::StepDone { chain, step },
            Command1::StepAborted { chain, step } => C::StepAborted { chain, step },
            Command1::CreateKeyspace { name, config } => C::CreateKeyspace { name, config: config.upgrade() },
            Command1::DropKeyspace { name } => C::DropKeyspace { name },
            Command1::ReplicaLost { chain, node, incarnation } => C::ReplicaLost { chain, node, incarnation },
            Command1::ReplicaRestored { chain, node, incarnation } => C::ReplicaRestored { chain, node, incarnation },
        }
    }
}
