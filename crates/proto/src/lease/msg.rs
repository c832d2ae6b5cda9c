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
/// `withheld` is set on a write whose origin holds a replica of the key's partition: the moment, on the origin's
/// clock, it sent the write, from which it answers no read of the key under a lease begun earlier until the
/// write's push reaches it (`writes.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forwarded {
    pub origin: Origin,
    pub req: Request,
    pub hops: u8,
    pub stamped: Option<u64>,
    pub withheld: Option<Time>,
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

/// A lease on `key` a replica asks its master to extend, with the partition's fence and the run of confirmations
/// it was in when it asked; the same, sent back, for each lease the master extended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extension {
    pub chain: ChainId,
    pub fence: Fence,
    pub key: Bytes,
    pub run: u64,
}

/// Replica → master, with a heartbeat: leases it holds that end soon and that it answered reads under, to extend
/// from `sent` on its clock (in its run `incarnation`), without the values, which it holds already.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extend {
    pub sent: Time,
    pub incarnation: u64,
    pub keys: Vec<Extension>,
}

/// Master → replica: the leases of an [`Extend`] it extended, each by `lease_ns` on the master's clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extended {
    pub sent: Time,
    pub incarnation: u64,
    pub keys: Vec<(Extension, u64)>,
}

/// Master → replica: a write's value (Algorithm 2). `op` is None for a passive write's background update,
/// which nobody waits for; `lease_ns` (0: none) is the lease the write issues with it. `epoch` is the master's
/// table of who masters what: a replica takes no push from a table older than the key's last move. `withheld`
/// is set only in the push to the write's origin: the [`Forwarded::withheld`] it sent the write with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Push {
    pub op: Option<OpId>,
    pub chain: ChainId,
    pub fence: Fence,
    pub epoch: u64,
    pub key: Bytes,
    pub versioned: Versioned,
    pub lease_ns: u64,
    pub withheld: Option<Time>,
}

/// One domain in a master's heartbeat (`domains.rs`): its partition's configuration, the master's table of who
/// masters what, and how long (on the master's clock, from when the heartbeat left) the member may answer reads
/// under its leases on the domain: the rest of the master's own lease, or 0.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Beat {
    pub chain: ChainId,
    pub domain: String,
    pub fence: Fence,
    pub epoch: u64,
    pub confirm_ns: u64,
}

/// New master → holders: the versions of keys that moved into its domain (`catchup.rs`), asked of holders
/// whose table is at least at `epoch` (they take no more pushes of those keys from the old master).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fetch {
    pub chain: ChainId,
    pub domain: String,
    pub fence: Fence,
    pub epoch: u64,
    pub keys: Vec<Bytes>,
}

/// Holder → master: the versions a [`Fetch`] asked for (absent keys left out).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fetched {
    pub chain: ChainId,
    pub domain: String,
    pub fence: Fence,
    pub epoch: u64,
    pub entries: Vec<(Bytes, Versioned)>,
}

/// Who a copy is for: a joiner, or the master of a domain taking it over in its table of `epoch` (a holder
/// answers only from that table or a newer one, so it takes no more pushes from the domain's old master).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CopyFor {
    Joiner,
    Takeover { domain: String, epoch: u64 },
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

/// A host's run and the number of revocations it has sent in it: an affiliated node takes no [`Hot`] sent
/// before a revocation it has seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Revocation {
    pub incarnation: u64,
    pub seq: u64,
}

/// Affiliated node → host, every heartbeat (seed 001 §4.1.4): it asks for secondary leases on the host's hot
/// keys, from `sent` on its clock (in its run `incarnation`), and says which versions it holds and how many reads
/// of each it answered since its last pull (they count towards the host's judgement of what is hot).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pull {
    pub sent: Time,
    pub incarnation: u64,
    pub have: Vec<Held>,
}

/// A key an affiliated node holds: its version, and the reads of it answered since the last pull.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    pub chain: ChainId,
    pub key: Bytes,
    pub version: u64,
    pub reads: u32,
}

/// A key's value in a [`Secondary`]: the version the affiliated node said it holds, or a new one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Given {
    Same(u64),
    New(Versioned),
}

/// A secondary lease: the affiliated node may answer reads of `key` with the value for `lease_ns` (on the
/// host's clock) from when it pulled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Secondary {
    pub chain: ChainId,
    pub key: Bytes,
    pub value: Given,
    pub lease_ns: u64,
}

/// Host → affiliated node: the answer to its [`Pull`], the hot keys the host gives it now; `revoked` is the
/// host's count of revocations when it sent this.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hot {
    pub sent: Time,
    pub incarnation: u64,
    pub revoked: Revocation,
    pub keys: Vec<Secondary>,
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
    /// Replica → master: it holds `op`'s version or a newer one, durably; `since` is when the push arrived, on
    /// the replica's clock: the lease offered with it would count from there.
    Stored {
        op: OpId,
        since: Time,
    },
    /// Replica → master: it takes no part in `op`'s configuration, and has dropped its lease of the key.
    Released {
        op: OpId,
    },
    /// Master → replicas: the write of `version` succeeded; a replica may answer it under its lease. `leased`
    /// are the replicas whose acknowledgement came in time for the master to record the lease the write issued
    /// them, each with when that lease began on its clock (the `since` of its [`LeaseMsg::Stored`]): only those
    /// hold it, and only the lease the master recorded, not one a later push of the same write offered.
    Commit {
        chain: ChainId,
        key: Bytes,
        version: u64,
        leased: Vec<(NodeId, Time)>,
    },
    Heartbeat(Heartbeat),
    /// Member → master: the domains of `round` it promised the master.
    Promised {
        incarnation: u64,
        round: u64,
        domains: Vec<(ChainId, String)>,
    },
    CopyReq {
        req: CopyReq,
        to: CopyFor,
    },
    CopyData {
        data: CopyData,
        to: CopyFor,
    },
    Fetch(Fetch),
    Fetched(Fetched),
    Pull(Pull),
    Hot(Hot),
    /// Host → affiliated node: stop answering `key` (a write of it is under way); `at` numbers the revocation.
    Revoke {
        chain: ChainId,
        key: Bytes,
        at: Revocation,
    },
    /// Affiliated node → host: it answers `key` no more, as revocation `at` asked.
    Revoked {
        chain: ChainId,
        key: Bytes,
        at: Revocation,
    },
    Extend(Extend),
    Extended(Extended),
}

impl LeaseMsg {
    /// The kind of message, for the simulator's traffic counts.
    pub fn label(&self) -> &'static str {
        match self {
            LeaseMsg::Request(_) | LeaseMsg::Answer { .. } | LeaseMsg::Bounce { .. } => "forward",
            LeaseMsg::Renew(_) | LeaseMsg::Granted(_) | LeaseMsg::Extend(_) | LeaseMsg::Extended(_) => "lease-renew",
            LeaseMsg::Push(_) | LeaseMsg::Stored { .. } | LeaseMsg::Released { .. } | LeaseMsg::Commit { .. } => {
                "lease-write"
            }
            LeaseMsg::Heartbeat(_) | LeaseMsg::Promised { .. } => "lease-heartbeat",
            LeaseMsg::CopyReq { .. } | LeaseMsg::CopyData { .. } | LeaseMsg::Fetch(_) | LeaseMsg::Fetched(_) => "copy",
            LeaseMsg::Pull(_) | LeaseMsg::Hot(_) | LeaseMsg::Revoke { .. } | LeaseMsg::Revoked { .. } => "affiliate",
        }
    }
}
