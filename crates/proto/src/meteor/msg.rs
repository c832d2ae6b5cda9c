//! What meteor nodes say to each other: the quorum engine's writes and copies, reads sent to the nearest
//! replica and their answers, and the status messages (with the pages that start a peer's view of a partition)
//! from which replicas answer reads.

use crate::quorum::msg::QuorumMsg;
use crate::requests::Origin;
use crate::versioned::{Fence, Versioned};
use bytes::Bytes;
use meridian_core::{ChainId, Read, Reply};
use serde::{Deserialize, Serialize};

/// Proxy → the partition's nearest replica: read `key` from what the replicas' statuses say (the seed's
/// readLocal), in the configuration `fence`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalRead {
    pub origin: Origin,
    pub chain: ChainId,
    pub fence: Fence,
    pub key: Bytes,
    pub read: Read,
}

/// What a status acknowledges of the statuses its addressee sent: the highest sequence number up to which the
/// sender's view of the addressee is whole, of the addressee's run `of`, and whether a later status came that
/// it could not take because it missed changes (so the next must carry everything since `seq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ack {
    pub of: u64,
    pub seq: u64,
    pub gap: bool,
}

/// Replica → replica, every status interval (the seed's statusMessage, aggregated per destination): the
/// versions its replicas took since, as of `sent_ms` on its clock. `changes` holds every change first carried by
/// a status after `covers_from`; a receiver whose view is whole up to `covers_from` is then whole up to `seq`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The sender's run: sequence numbers count within it.
    pub incarnation: u64,
    pub seq: u64,
    pub covers_from: u64,
    pub sent_ms: u64,
    pub ack: Option<Ack>,
    pub changes: Vec<(ChainId, Bytes, u64)>,
    /// The sender's configuration of each partition whose configuration changed, carried as `changes` are: a
    /// receiver counts the sender in a read only in the configuration the read was sent in.
    pub fences: Vec<(ChainId, Fence)>,
    /// The sender has reads waiting that count the receiver: send statuses every interval for a while,
    /// not only now and then.
    pub want: bool,
}

/// Replica → replica: the versions of its keys of `chain` after `after`, a page at a time, so that the asker's
/// view of it starts whole. `seq` is the last status the sender had sent the asker when it took the page.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    pub incarnation: u64,
    pub chain: ChainId,
    pub after: Option<Bytes>,
    pub seq: u64,
    /// The sender's configuration of the partition when it took the page.
    pub fence: Fence,
    pub versions: Vec<(Bytes, u64)>,
    pub more: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MeteorMsg {
    /// A write, its acknowledgement or refusal, or a joiner's copy: the quorum engine's own.
    Quorum(QuorumMsg),
    Read(LocalRead),
    /// Replica → proxy: the answer to a read.
    Answer {
        origin: Origin,
        reply: Reply,
    },
    /// Replica → proxy: it is not a replica of the read's partition in that configuration; send it again.
    Bounce {
        origin: Origin,
    },
    Status(Status),
    /// Replica → replica: send me your versions of `chain` after `after`, and your changes of it from now on.
    PageReq {
        chain: ChainId,
        after: Option<Bytes>,
    },
    Page(Page),
    /// Replica → replica that supports `version` of `key`: its value, which the asker lacks.
    Fetch {
        chain: ChainId,
        key: Bytes,
        version: u64,
    },
    /// The answer to a fetch: the value if the replica still holds that version.
    Fetched {
        chain: ChainId,
        key: Bytes,
        found: Option<Versioned>,
    },
    /// Replica → replica: answer at once, so that the round trip between them is measured (`theta.rs`);
    /// `sent_ns` is the asker's monotonic clock.
    Probe {
        sent_ns: u64,
    },
    ProbeAnswer {
        sent_ns: u64,
    },
}

impl MeteorMsg {
    /// The kind of message, for the simulator's traffic counts.
    pub fn label(&self) -> &'static str {
        match self {
            MeteorMsg::Quorum(q) => q.label(),
            MeteorMsg::Read(_) | MeteorMsg::Answer { .. } | MeteorMsg::Bounce { .. } => "meteor-read",
            MeteorMsg::Status(_) => "status",
            MeteorMsg::PageReq { .. } | MeteorMsg::Page(_) => "status-page",
            MeteorMsg::Fetch { .. } | MeteorMsg::Fetched { .. } => "fetch",
            MeteorMsg::Probe { .. } | MeteorMsg::ProbeAnswer { .. } => "probe",
        }
    }
}
