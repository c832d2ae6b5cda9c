//! Maps of format 6, read to upgrade: the map as builds before affiliated nodes wrote it. Its commands decode
//! as the current ones (`AddAffiliate` came as a new variant at the end); its maps lack [`ClusterMap::hosts`],
//! which this frozen copy of the format-6 shape reads as empty.
//!
//! Never change this type: it describes bytes already on disks.

use super::{ChainView, ClusterMap, KeyMasters, Keyspace, NodeInfo};
use meridian_core::{ChainMap, KeyspaceId, NodeId};
use serde::Deserialize;
use std::collections::BTreeMap;

/// Decodes a map of format 6.
pub fn map(bytes: &[u8]) -> postcard::Result<ClusterMap> {
    postcard::from_bytes::<Map6>(bytes).map(Map6::upgrade)
}

#[derive(Deserialize)]
struct Map6 {
    epoch: u64,
    partitions: u32,
    nodes: BTreeMap<NodeId, NodeInfo>,
    chains: ChainMap<ChainView>,
    manager_voters: Vec<NodeId>,
    next_step: u64,
    keyspaces: BTreeMap<KeyspaceId, Keyspace>,
    next_keyspace: u32,
    masters: BTreeMap<KeyspaceId, KeyMasters>,
}

impl Map6 {
    fn upgrade(self) -> ClusterMap {
        let Map6 { epoch, partitions, nodes, chains, manager_voters, next_step, keyspaces, next_keyspace, masters } =
            self;
        let hosts = BTreeMap::new();
        ClusterMap {
            epoch,
            partitions,
            nodes,
            chains,
            manager_voters,
            next_step,
            keyspaces,
            next_keyspace,
            masters,
            hosts,
        }
    }
}
