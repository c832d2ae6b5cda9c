//! Tail leases: the right to answer clients as a chain's tail (docs/protocols/ouroboros.md, "Leases").
//!
//! A tail that has been removed from its chain without hearing of it (cut off, paused) would otherwise keep
//! answering reads from a history that the new tail has moved past, and acknowledging writes that the new
//! chain never received. So a tail answers a client, read or write, only while it holds a lease for the chain
//! at its current view. The manager's leader grants leases in its heartbeat replies and never grants one for
//! a new view while a lease of an older view may still be valid. A lease runs on the holder's monotonic clock
//! from the moment it *sent* the heartbeat the grant answers, for half the lease term, so clock drift and
//! message delay only ever shorten it. Every other member that answers clients without the tail holds the same
//! lease: a query node before the tail, and an `au` or `ausi` head, which acknowledges writes
//! ([`crate::map::ClusterMap::leased_at`]).
//!
//! Answers that wait for a lease are held here, at most [`HELD_MAX`] per chain; the front-end's timeout
//! covers a lease that never comes.

use super::msg::Origin;
use bytes::Bytes;
use meridian_core::{ChainId, Read, Request, Time};
use std::collections::VecDeque;

/// Reads one chain may hold back while its tail waits for a lease.
pub const HELD_MAX: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub view: u64,
    pub until: Time,
}

impl Lease {
    pub fn valid(&self, view: u64, now: Time) -> bool {
        self.view == view && now < self.until
    }
}

/// A read waiting for the tail's lease, answered from the store as it is when the lease arrives.
#[derive(Clone, Debug)]
pub struct Held {
    pub origin: Origin,
    pub key: Bytes,
    pub read: Read,
}

impl Held {
    /// The read as its front-end sent it, to send again.
    pub fn request(self, chain: ChainId) -> Request {
        Request::Get { keyspace: chain.keyspace(), key: self.key, read: self.read }
    }
}

/// Queues `held`, unless the chain already holds [`HELD_MAX`] reads: then it is returned for the caller to
/// turn away.
pub fn hold(queue: &mut VecDeque<Held>, held: Held) -> Result<(), Held> {
    if queue.len() >= HELD_MAX {
        return Err(held);
    }
    queue.push_back(held);
    Ok(())
}
