//! Maps of formats 2 to 5, read to upgrade: the map as builds before per-key masters wrote it (the map file,
//! the Raft log's snapshots). Their commands decode as the current ones (`SetKeyMaster` came as a new variant
//! at the end); their maps lack [`ClusterMap::masters`], which postcard, not self-describing, cannot default,
//! so this frozen copy of the format-5 shape reads them and every lease keyspace starts with its keys mastered
//! in its home region. Format 6's shape is this one and the masters after it (`format6.rs`).
//!
//! Never change this type: it describes bytes already on disks.

use super::{ChainView, ClusterMap, KeyMasters, Keyspace, NodeInfo};
use meridian_core::{ChainMap, KeyspaceId, NodeId};
use serde::Deserialize;
use std::collections::BTreeMap;

/// Decodes a map of formats 2 to 5.
pub fn map(bytes: &[u8]) -> postcard::Result<ClusterMap> {
    postcard::from_bytes::<Map5>(bytes).map(|m| m.upgrade(BTreeMap::new(), BTreeMap::new()))
}

#[derive(Deserialize)]
pub(super) struct Map5 {
    epoch: u64,
    partitions: u32,
    nodes: BTreeMap<NodeId, NodeInfo>,
    chains: ChainMap<ChainView>,
    manager_voters: Vec<NodeId>,
    next_step: u64,
    keyspaces: BTreeMap<KeyspaceId, Keyspace>,
    next_keyspace: u32,
}

impl Map5 {
    /// The current map of these fields, `masters` (format 6's, or none) and `hosts` (format 7's, or none), with
    /// no ACL users.
    pub(super) fn upgrade(
        self,
        masters: BTreeMap<KeyspaceId, KeyMasters>,
        hosts: BTreeMap<NodeId, NodeId>,
    ) -> ClusterMap {
        let Map5 { epoch, partitions, nodes, chains, manager_voters, next_step, keyspaces, next_keyspace } = self;
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
            users: BTreeMap::new(),
            manager_learners: Vec::new(),
            voters_wanted: Vec::new(),
        }
    }
}
