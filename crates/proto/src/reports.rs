//! What a node tells the manager's leader about its replicas in every heartbeat: the steps of membership changes
//! it has durably done its part of, the replicas it lost to a restart, and the keys whose master should move.
//! Protocol cores make them and the manager reads them; they live here so that neither depends on the other.

use bytes::Bytes;
use meridian_core::{ChainId, KeyspaceId};

/// A step this node finished its part of, for the manager's leader (reported only once durable).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StepReport {
    /// The joiner's pre-copy settled: insert it (`AddInserted`).
    PreCopied { chain: ChainId, step: u64 },
    /// The inserted member's flush completed: it is a valid replica (`StepDone`).
    Flushed { chain: ChainId, step: u64 },
}

impl StepReport {
    pub fn chain(&self) -> ChainId {
        match *self {
            StepReport::PreCopied { chain, .. } | StepReport::Flushed { chain, .. } => chain,
        }
    }
}

/// What a node says about its replicas in every heartbeat.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReplicaReports {
    /// Steps this node has durably finished its part of.
    pub steps: Vec<StepReport>,
    /// This run of the node.
    pub incarnation: u64,
    /// The chains this node is a member of but lost its replica of to a restart, with the LU it holds.
    pub lost: Vec<(ChainId, u64)>,
    /// Keys of lease keyspaces whose master this node, as their master, would move to where their writes come
    /// from (`lease/origins.rs`): the leader proposes each the map does not already have.
    pub moves: Vec<KeyMove>,
}

/// A key's master asked to move to another region of its keyspace's placement.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct KeyMove {
    pub keyspace: KeyspaceId,
    pub key: Bytes,
    pub region: String,
}
