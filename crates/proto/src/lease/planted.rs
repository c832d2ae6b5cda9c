//! Deliberately wrong variants of the lease core, switched on only by [`LeaseConfig::planted_bug`], which exists
//! only with the `planted-bugs` feature: they prove that the simulator's checkers catch what the lease protocol
//! must not do (`tests/sim_planted_bugs.rs`). Each is a one-line hook where it breaks, always false without the
//! feature.

use super::{LeaseConfig, LeaseNode};

/// Deliberately wrong variants of the lease core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeasePlantedBug {
    /// A replica's clock runs at a twentieth of real time (far beyond the drift bound ε): it counts every
    /// confirmation twenty times as long as the master meant it, so it answers under its leases after the master
    /// stopped counting on it and wrote past it. Shows what breaks beyond the clock model.
    ClockBeyondBound,
    /// The master commits a write at a majority without waiting for the replicas holding leases on its key.
    IgnoresLeases,
    /// A member promises a domain that gained keys while it still holds promises, given before the move, to
    /// another domain: the moved keys' new master may serve them while the old one still does.
    PromisesMovedKeysEarly,
    /// A host acknowledges a push, and a master commits a write, without revoking the key's secondary leases:
    /// affiliated nodes answer the old value after the write succeeded.
    AcksBeforeRevoking,
    /// A replica that sends its client's write to the master says it withholds its lease on the key, and goes on
    /// answering under it: the master commits without it, and it answers the old value until the push arrives.
    IgnoresItsOwnWrite,
    /// A replica with a pushed version of a key not yet committed parks reads of it even without a lease: a
    /// write may have succeeded without it, and the read then waits only for an older commit.
    ParksWithoutLease,
    /// A replica parks a read while a write of its own client is on its way without waiting for that write's
    /// push: the read counts from what the store held when it arrived, older than the write, which may have
    /// succeeded without this replica.
    ParksPastItsOwnWrite,
}

/// Whether `bug` is planted in a core of configuration `cfg`: never, without the `planted-bugs` feature.
#[inline(always)]
pub(super) fn planted_in(cfg: &LeaseConfig, bug: LeasePlantedBug) -> bool {
    #[cfg(feature = "planted-bugs")]
    return cfg.planted_bug == Some(bug);
    #[cfg(not(feature = "planted-bugs"))]
    {
        let _ = (cfg, bug);
        false
    }
}

impl LeaseNode {
    /// Whether `bug` is planted in this node (`planted_in`).
    #[inline(always)]
    pub(super) fn planted(&self, bug: LeasePlantedBug) -> bool {
        planted_in(&self.cfg, bug)
    }
}
