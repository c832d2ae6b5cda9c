//! What the nodes of a lease keyspace say to each other. Every message about a partition names it (`ChainId`,
//! which names the keyspace) and, where it asks something of a replica, the [`Fence`] of the sender's map: a
//! replica takes part only in its own configuration, so no write counts acknowledgements from two.

use crate::requests::Origin;
pub use crate::versioned::copy::{CopyData, CopyReq};
pub use crate::versioned::{Fence, Versioned};
use bytes::Bytes;
use meridian_core::{ChainId, NodeId, Read, Reply, Request, Time};
use serde::{Deserialize, Serialize};

/// A write the master drives: its run (acknowledgements meant for an earlier run are dropped) and its number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OpId {
    pub incarnation: u64,
    pub seq: u64,
}

/// A client request on its way to the node that can serve it (the master for a write, the replica in the
/// origin's region for a read); `stamped` is the version a write took before it was bounced, which it keeps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forwarded {
    pub origin: Origin,
    pub req: Request,
    pub hops: u8,
    pub stamped: Option<u64>,
}

/// Replica → master: a read it holds no valid lease for; the master answers with the value and a lease.
/// `sent` is the replica's clock when it asked (in its run `incarnation`): the lease counts from there, within
/// `run`, the run of the master's confirmations the replica was in then (None: it was not confirmed, and the
/// lease will be worth nothing).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Renew {
    pub origin: Origin,
    pub chain: ChainId,
    pub fence: Fence,
    pub key: Bytes,
    pub read: Read,
    pub sent: Time,
    pub incarnation: u64,
    pub run: Option<u64>,
}

/// Master → replica: the key's committed value and a lease of `lease_ns` on the master's clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Granted {
    pub renew: Renew,
    pub versioned: Versioned,
    pub lease_ns: u64,
}

/// Master → replica: a write's value (Algorithm 2). `op` is None for a passive write's background update,
/// which nobody waits for; `lease_ns` (0: none) is the lease the write issues with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Push {
    pub op: Option<OpId>,
    pub chain: ChainId,
    pub fence: Fence,
    pub key: Bytes,
    pub versioned: Versioned,
    pub lease_ns: u64,
}

/// One partition in a master's heartbeat: its configuration, and how long (on the master's clock, from when the
/// heartbeat left) the member may answer reads under its leases: the rest of the master's own lease, or 0.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Beat {
    pub chain: ChainId,
    pub fence: Fence,
    pub confirm_ns: u64,
}

/// Master → member, every few ticks: asks for a promise per partition (`mastery.rs`). `acked` is the newest
/// round of the member's acknowledgements the master had when it sent this: the member's confirmations count
/// from when it sent that acknowledgement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub incarnation: u64,
    pub round: u64,
    pub acked: Option<u64>,
    pub beats: Vec<Beat>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LeaseMsg {
    Request(Forwarded),
    /// The answer to a request, for the node it came from.
    Answer {
        origin: Origin,
        reply: Reply,
    },
    /// The request cannot be served here now (not the master, or not ready): the origin sends it again.
    Bounce {
        origin: Origin,
        stamped: Option<u64>,
    },
    Renew(Renew),
    Granted(Granted),
    Push(Push),
    /// Replica → master: it holds `op`'s version or a newer one, durably.
    Stored {
        op: OpId,
    },
    /// Replica → master: it takes no part in `op`'s configuration, and has dropped its lease of the key.
    Released {
        op: OpId,
    },
    /// Master → replicas: the write of `version` succeeded; a replica may answer it under its lease. `leased`
    /// are the replicas whose acknowledgement came in time for the master to record the lease the write issued
    /// them: only those hold it.
    Commit {
        chain: ChainId,
        key: Bytes,
        version: u64,
        leased: Vec<NodeId>,
    },
    Heartbeat(Heartbeat),
    /// Member → master: the partitions of `round` it promised the master.
    Promised {
        incarnation: u64,
        round: u64,
        chains: Vec<ChainId>,
    },
    CopyReq(CopyReq),
    CopyData(CopyData),
}

impl LeaseMsg {
    /// The kind of message, for the simulator's traffic counts.
    pub fn label(&self) -> &'static str {
        match self {
            LeaseMsg::Request(_) | LeaseMsg::Answer { .. } | LeaseMsg::Bounce { .. } => "forward",
            LeaseMsg::Renew(_) | LeaseMsg::Granted(_) => "lease-renew",
            LeaseMsg::Push(_) | LeaseMsg::Stored { .. } | LeaseMsg::Released { .. } | LeaseMsg::Commit { .. } => {
                "lease-write"
            }
            LeaseMsg::Heartbeat(_) | LeaseMsg::Promised { .. } => "lease-heartbeat",
            LeaseMsg::CopyReq(_) | LeaseMsg::CopyData(_) => "copy",
        }
    }
}
