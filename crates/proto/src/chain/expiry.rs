//! Keys that expire (Redis' TTLs, docs/keyspaces.md "Expiry and cache mode"). Expiry is a delete like any
//! other: the head of a key's chain orders it once the key's deadline has passed on the head's wall clock, and
//! it travels the chain in sequence, so every member and every reader agrees on when the key went. Nobody
//! hides a key on its own clock: a member that did, with a clock ahead of the head's, could answer "absent"
//! before a PERSIST the head then applies, and show the key again afterwards. A wrong clock costs only
//! accuracy: a key goes early or late by the clocks' error.

use super::msg::{Change, Outcome, Update};
use super::{ChainNode, Fx};
use bytes::Bytes;
use meridian_core::{ChainId, Time};

#[cfg(feature = "planted-bugs")]
use super::PlantedBug;

/// Keys a node deletes for expiry per tick at most, over all the chains it heads.
pub const REAP_MAX: usize = 1024;

impl ChainNode {
    /// The wall clock by which this node judges deadlines.
    pub(super) fn deadline_clock(&self) -> u64 {
        #[cfg(feature = "planted-bugs")]
        if self.cfg.planted_bug == Some(PlantedBug::ExpiresEarly) {
            return self.wall_ms + 1_000;
        }
        self.wall_ms
    }

    /// At the head: deletes `key` first if its deadline has passed.
    pub(super) fn reap_if_due(&mut self, now: Time, chain: ChainId, key: &Bytes, out: &mut Fx) {
        let clock = self.deadline_clock();
        if self.ledger(chain).is_some_and(|l| l.is_due(key, clock)) {
            self.head_delete(now, chain, key.clone(), out);
            self.stats.expired += 1;
        }
    }

    /// On every tick: each chain this node heads deletes its keys whose deadline has passed, as many as the
    /// chain's unacknowledged history has room for.
    pub(super) fn reap_expired(&mut self, now: Time, out: &mut Fx) {
        let clock = self.deadline_clock();
        let mut budget = REAP_MAX;
        for chain in self.headed() {
            let room = (self.cfg.unacked_max / 2).saturating_sub(self.replicas[&chain].unacked.len());
            let due = self.ledger(chain).map_or(Vec::new(), |l| l.due(chain.0, clock, budget.min(room)));
            budget -= due.len();
            self.stats.expired += due.len() as u64;
            due.into_iter().for_each(|key| self.head_delete(now, chain, key, out));
        }
    }

    /// The chains this node heads as a valid replica.
    pub(super) fn headed(&self) -> Vec<ChainId> {
        self.replicas.iter().filter(|(_, r)| r.is_active() && r.is_head()).map(|(&c, _)| c).collect()
    }

    /// At the head: orders a delete of `key` that no client asked for (an expiry or an eviction).
    pub(super) fn head_delete(&mut self, now: Time, chain: ChainId, key: Bytes, out: &mut Fx) {
        let seq = self.replicas[&chain].lu + 1;
        let outcome = Outcome { applied: true, existed: true, ..Outcome::default() };
        self.log_and_pass(now, Update { chain, seq, key, change: Change::Delete, outcome, origin: None }, out);
    }
}
