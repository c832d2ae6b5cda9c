//! What a node tells the manager's leader about its replicas in every heartbeat: the steps of membership changes
//! it has durably done its part of, and the replicas it lost to a restart. The chain core makes them and the
//! manager reads them; they live here so that neither core depends on the other.

use meridian_core::ChainId;

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
}
