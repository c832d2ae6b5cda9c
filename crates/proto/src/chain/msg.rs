//! Peer messages of chain replication (seed 003 §2.3 and Listing 1, adapted to static membership).

use bytes::Bytes;
use meridian_core::{ChainId, NodeId, Reply, RequestId, Write};
use serde::{Deserialize, Serialize};

/// Who is waiting for the answer: the front-end node, its incarnation (so replies meant for a
/// previous run of that node are never handed to a new client) and its request id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    pub node: NodeId,
    pub incarnation: u64,
    pub id: RequestId,
}

/// What an update does to its key. `Skip` consumes a sequence number without changing data: a
/// conditional write whose condition failed still travels the chain, so its "not applied" answer comes
/// from the tail like every other write (answering from the head could expose an order the tail has
/// not committed yet).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Change {
    Put(Bytes),
    Delete,
    Skip,
}

/// The result the head computed when it ordered the write; the tail returns it to the client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub applied: bool,
    pub existed: bool,
}

/// One entry of a chain's history H (seed 003 Listing 1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Update {
    pub chain: ChainId,
    pub seq: u64,
    pub key: Bytes,
    pub change: Change,
    pub outcome: Outcome,
    /// None for updates rebuilt from the log after a restart: their client has long given up.
    pub origin: Option<Origin>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChainMsg {
    /// Front-end → tail: a read (queries go to the tail only, §2.3).
    Get { origin: Origin, key: Bytes },
    /// Front-end → head: a write to be ordered.
    Write { origin: Origin, write: Write },
    /// Predecessor → successor, strictly in sequence order; sent only once the sender has it durably.
    Update(Update),
    /// Successor → predecessor: cumulative acknowledgement that the tail holds every seq ≤ `seq`.
    Ack { chain: ChainId, seq: u64 },
    /// Successor → predecessor: "I hold every seq ≤ `lu`; the tail holds every seq ≤ `la`; resend the rest".
    Sync { chain: ChainId, lu: u64, la: u64 },
    /// Predecessor → successor: "I have updates you have not acknowledged; tell me where you are".
    Probe { chain: ChainId },
    /// Head or tail → front-end.
    Reply { origin: Origin, reply: Reply },
}
