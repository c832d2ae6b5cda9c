//! What the protocols that keep each key's newest version (rather than a chain's ordered history) share: a
//! key's [`Versioned`] state, the [`Fence`] that names a partition's configuration, how versions are stamped
//! (`stamp.rs`), how a replica keeps its cells in a datastore (`cells.rs`), and how a replica copies a partition
//! from others a page at a time (`copy.rs`). The leaderless quorum keyspace (`quorum/`) and the lease keyspace
//! (`lease/`) both stand on it.

pub mod cells;
pub mod copy;
pub mod stamp;

use crate::ops::read::{decoded, reply_for};
use bytes::Bytes;
use meridian_core::{Condition, ErrorKind, Protocol, Read, Reply, Request, Stored, Ttl, WriteOp};
use serde::{Deserialize, Serialize};

/// A partition's configuration as the map gives it: its view (bumped whenever its members change) and the
/// membership step in flight (0: none). Every change of either is a new configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Fence {
    pub view: u64,
    pub step: u64,
}

/// A key's state at a replica: its version (0: never written) and its value (None: absent or deleted).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Versioned {
    pub version: u64,
    pub value: Option<Bytes>,
}

/// What a client asked of a keyspace that keeps only each key's newest version.
#[derive(Clone, Debug)]
pub enum Asked {
    Read(Read),
    /// A put of this stored value, or a delete (None).
    Write(Option<Bytes>),
}

impl Asked {
    /// What `req` asks, or why `protocol` refuses it: GET and its kin, SET without conditions, expiry or GET,
    /// and DEL; conditional and read-modify-write commands are the chain's.
    pub fn of(req: &Request, protocol: Protocol) -> Result<Asked, Unsupported> {
        let refused = || Unsupported(protocol);
        match req {
            Request::Get { read, .. } => Ok(Asked::Read(*read)),
            Request::Write(w) if w.cond == Condition::Always && !w.get_old => match &w.op {
                WriteOp::Put { value, ttl: Ttl::Clear | Ttl::Keep } => {
                    Ok(Asked::Write(Some(Stored::wrap(value, None))))
                }
                WriteOp::Delete => Ok(Asked::Write(None)),
                _ => Err(refused()),
            },
            _ => Err(refused()),
        }
    }
}

/// A request a protocol that keeps only each key's newest version does not take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not supported by protocol {0}: it takes GET and its kin, SET without conditions, expiry or GET, and DEL")]
pub struct Unsupported(pub Protocol);

/// The answer to a read whose newest version is `v`.
pub fn read_reply(read: Read, v: &Versioned, now_ms: u64) -> Reply {
    match v.value.clone().map(decoded).transpose() {
        Ok(stored) => reply_for(read, stored, now_ms),
        Err(e) => Reply::Error(ErrorKind::Storage, e.to_string()),
    }
}
