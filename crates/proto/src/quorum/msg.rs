//! What quorum replicas and coordinators say to each other. Every message names its partition (`ChainId`, which
//! names the keyspace) and, where it asks something of a replica, the [`Fence`] of the coordinator's map: a
//! replica answers only what was sent in the configuration it is in itself, so no operation counts replies
//! from two configurations.

pub use crate::versioned::copy::{CopyData, CopyReq};
pub use crate::versioned::{Fence, Versioned};
use bytes::Bytes;
use meridian_core::ChainId;
use serde::{Deserialize, Serialize};

/// An operation of one coordinator: its run (replies meant for an earlier run are dropped) and its number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OpId {
    pub incarnation: u64,
    pub seq: u64,
}

/// Coordinator → replica: what do you hold of `key`? (A read's first phase, an ABD write's version query.)
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadReq {
    pub op: OpId,
    pub chain: ChainId,
    pub fence: Fence,
    pub key: Bytes,
}

/// Coordinator → replica: take this version of `key` if it is newer than yours (a write, a write-back, a read
/// repair; `op` is None for a repair nobody waits for).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteReq {
    pub op: Option<OpId>,
    pub chain: ChainId,
    pub fence: Fence,
    pub key: Bytes,
    pub versioned: Versioned,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum QuorumMsg {
    Read(ReadReq),
    /// Replica → coordinator: what it holds, sent once everything it holds is durable.
    Found {
        op: OpId,
        found: Versioned,
    },
    Write(WriteReq),
    /// Replica → coordinator: it holds `op`'s version or a newer one, durably; `existed` says whether the key
    /// had a value before it.
    Written {
        op: OpId,
        existed: bool,
    },
    /// Replica → coordinator: it is in another configuration of the partition than `op` was sent in.
    Refused {
        op: OpId,
    },
    /// Replica → coordinator: it holds `held`, newer than `op`'s version, and took nothing (meteor keyspaces
    /// only; a quorum replica acknowledges a version it did not need).
    Rejected {
        op: OpId,
        held: u64,
    },
    CopyReq(CopyReq),
    CopyData(CopyData),
}

impl QuorumMsg {
    /// The kind of message, for the simulator's traffic counts.
    pub fn label(&self) -> &'static str {
        match self {
            QuorumMsg::Read(_) | QuorumMsg::Found { .. } => "quorum-read",
            QuorumMsg::Write(_)
            | QuorumMsg::Written { .. }
            | QuorumMsg::Refused { .. }
            | QuorumMsg::Rejected { .. } => "quorum-write",
            QuorumMsg::CopyReq(_) | QuorumMsg::CopyData(_) => "copy",
        }
    }
}
