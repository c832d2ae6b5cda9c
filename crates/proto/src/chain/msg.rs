//! Peer messages of chain replication (seed 003 §2.3–2.6, Listing 1), stamped with chain views.
//!
//! Every message between chain members carries the sender's view of the chain (the seed's chain-view-id,
//! §2.4); a receiver whose view differs drops it, so a member that has not yet heard of a membership change,
//! or one that was removed without hearing of it, can never mix its updates into the new chain. Requests from
//! front-ends carry the front-end's view too, for diagnostics; they are served by whoever is head or tail in
//! its own current view and bounced otherwise.

use bytes::Bytes;
use meridian_core::{ChainId, Read, Reply, Scan, Write};
use serde::{Deserialize, Serialize};

pub use crate::ops::outcome::{Answer, Change, Outcome, Refusal};
pub use crate::requests::Origin;

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
    /// The other keys the update changes in the same step (RENAME's source and destination, MSETNX's pairs:
    /// `ops::decide::decide_keys`), none of them `key`; empty for most. A member logs them with `key` as one
    /// group of records.
    pub also: Vec<(Bytes, Change)>,
}

impl Update {
    /// Every key the update changes with its change, `key` first.
    pub fn changes(&self) -> impl Iterator<Item = (&Bytes, &Change)> {
        std::iter::once((&self.key, &self.change)).chain(self.also.iter().map(|(k, c)| (k, c)))
    }

    /// Every key the update changes, `key` first.
    pub fn keys(&self) -> impl Iterator<Item = &Bytes> {
        self.changes().map(|(k, _)| k)
    }
}

/// A key's latest record as a copy carries it: its value (None for a tombstone) and the sequence number of
/// the update that wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyState {
    pub key: Bytes,
    pub seq: u64,
    pub value: Option<Bytes>,
}

/// Which copy a [`CopyReq`] belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CopyKind {
    /// Phase 1 of a join (§2.5): a joiner copies from the chain's tail before it is inserted. `step` is the
    /// map's id of the Add step, which the tail checks against its own map.
    PreCopy { step: u64 },
    /// Phase 2: an inserted member that is not yet a valid replica copies the rest from its successor, whose
    /// history stands still meanwhile because its only source of updates is the flushing member.
    Flush,
}

/// What part of the source's data a copy asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CopyPart {
    /// The latest state of every key with ring token in `first..=last` whose last update has a sequence
    /// number above `since`.
    States { since: u64, first: u64, last: u64 },
    /// A flush's second part: the source's unacknowledged updates after `after` (all of them if None).
    History { after: Option<u64> },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyReq {
    pub chain: ChainId,
    pub view: u64,
    pub kind: CopyKind,
    pub part: CopyPart,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyData {
    pub chain: ChainId,
    pub view: u64,
    pub kind: CopyKind,
    pub part: CopyPart,
    /// For a States part: the states found, sorted by token, and the last token covered (below `last` when
    /// the answer was cut to bound its size).
    pub states: Vec<KeyState>,
    pub covered: u64,
    /// For a History part: consecutive updates from `la + 1` or `after + 1`, whichever is later.
    pub history: Vec<Update>,
    /// The source's LU and LA for the chain when it answered.
    pub lu: u64,
    pub la: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChainMsg {
    /// Front-end → the chain's query node (the tail unless the keyspace reads elsewhere: `ClusterMap::query_node`),
    /// or a query node → the member that must answer instead: a read of `key` in `chain`, the chain of the key's
    /// partition in the request's keyspace.
    Get {
        origin: Origin,
        view: u64,
        chain: ChainId,
        key: Bytes,
        read: Read,
    },
    /// Front-end → head: a write to be ordered.
    Write {
        origin: Origin,
        view: u64,
        chain: ChainId,
        write: Write,
    },
    /// Predecessor → successor, strictly in sequence order; sent only once the sender has it durably.
    Update {
        view: u64,
        update: Update,
    },
    /// Successor → predecessor: cumulative acknowledgement that the tail holds every seq ≤ `seq`.
    Ack {
        chain: ChainId,
        view: u64,
        seq: u64,
    },
    /// Successor → predecessor: "I hold every seq ≤ `lu`; the tail holds every seq ≤ `la`; resend the rest".
    Sync {
        chain: ChainId,
        view: u64,
        lu: u64,
        la: u64,
    },
    /// Predecessor → successor: "I have updates you have not acknowledged; tell me where you are".
    Probe {
        chain: ChainId,
        view: u64,
    },
    /// Tail or head → front-end. A put answer from the tail names its update (`confirm`), and the front-end
    /// confirms it with [`ChainMsg::Confirm`]; until then the tail resends it (seed 003 §2.4).
    Reply {
        origin: Origin,
        reply: Reply,
        confirm: Option<(ChainId, u64)>,
    },
    /// Front-end → tail: the put answer for update `seq` arrived.
    Confirm {
        chain: ChainId,
        seq: u64,
    },
    /// Head or tail → front-end: "I cannot take this request in my current view of the chain" (not its head
    /// or tail, or not a valid replica yet). Certainly not applied; the front-end retries with a fresher map.
    Bounce {
        origin: Origin,
        chain: ChainId,
        view: u64,
    },
    /// Under `ausi`, predecessor → successor, ahead of update `seq`: "key `key` (and the keys `also`, when
    /// the update changes several) has a write you do not have yet"; held in memory, passed on at once.
    Invalidate {
        chain: ChainId,
        view: u64,
        seq: u64,
        key: Bytes,
        also: Vec<Bytes>,
    },
    /// Under `ausi`, tail → head: every member holds the invalidations up to `seq`.
    Invalidated {
        chain: ChainId,
        view: u64,
        seq: u64,
    },
    /// Joiner or flushing member → its copy source.
    CopyReq(CopyReq),
    CopyData(Box<CopyData>),
    /// Front-end → query node: a scan of `chain`'s keys from `scan.from`, a token of its partition, on
    /// (`scan.rs`). Answered like a read, or bounced. Last, as every new variant, so the others keep their
    /// encoding.
    Scan {
        origin: Origin,
        view: u64,
        chain: ChainId,
        scan: Scan,
    },
}
