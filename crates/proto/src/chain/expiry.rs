//! Keys that expire (Redis' TTLs, docs/keyspaces.md "Expiry and cache mode"). Expiry is a delete like any
//! other: the head of a key's chain orders it once the key's deadline has passed on the head's wall clock, and
//! it travels the chain in sequence, so every member and every reader agrees on when the key went.
//!
//! A member that answers a read never returns a key past its deadline on its own clock, as Redis never does:
//! such a read waits here until the head's delete (or a newer write of the key) reaches this member, and is then
//! answered from the store. It must not answer "absent" on its own clock instead: with a clock ahead of the
//! head's, it could do so before a PERSIST the head then applies, and show the key again afterwards. So a read
//! of a key just past its deadline costs up to the head's tick, the clocks' disagreement and the chain's
//! latency; a wrong clock costs only accuracy (a key goes early or late by the clocks' error) and, for a
//! clock far ahead of its head's, reads that wait for the front-end's timeout.

use super::lease::{hold, Held};
use super::msg::{Change, Outcome, Update};
use super::{ChainStep, Fx};
use bytes::Bytes;
use meridian_core::{ChainId, Time};
use std::collections::VecDeque;
use std::ops::RangeInclusive;

use super::PlantedBug;

/// Keys a node deletes for expiry per tick at most, over all the chains it heads.
pub const REAP_MAX: usize = 1024;

impl ChainStep<'_> {
    /// The wall clock by which this node judges deadlines.
    pub(super) fn deadline_clock(&self) -> u64 {
        if self.s.planted(PlantedBug::ExpiresEarly) {
            return self.host.wall_ms + 1_000;
        }
        self.host.wall_ms
    }

    /// Whether `key` of `chain` is past its deadline on this node's clock.
    pub(super) fn due_here(&self, chain: ChainId, key: &[u8]) -> bool {
        self.ledger(chain).is_some_and(|l| l.is_due(key, self.deadline_clock()))
    }

    /// Whether a read of `key` of `chain` must wait here for the key's delete ([`Self::due_here`]).
    pub(super) fn overdue_here(&self, chain: ChainId, key: &[u8]) -> bool {
        !self.s.planted(PlantedBug::ReadsPastDeadline) && self.due_here(chain, key)
    }

    /// Whether a key of `chain` within `tokens` is past its deadline here: a page over them waits too.
    pub(super) fn overdue_within(&self, chain: ChainId, tokens: &RangeInclusive<u64>) -> bool {
        if self.s.planted(PlantedBug::ReadsPastDeadline) {
            return false;
        }
        self.ledger(chain).is_some_and(|l| l.due_within(chain.0, self.deadline_clock(), tokens))
    }

    /// Keeps a read of a key past its deadline until the key's delete reaches this member; one beyond the
    /// chain's bound goes back to its front-end, which tries again.
    pub(super) fn await_delete(&mut self, chain: ChainId, held: Held, out: &mut Fx) {
        self.s.stats.overdue_reads += 1;
        if let Err(held) = hold(self.s.overdue.entry(chain).or_default(), held) {
            self.bounce(held.origin, chain, held.request(chain), out);
        }
    }

    /// Whether a read here waits for `key` of `chain` to change.
    pub(super) fn awaited(&self, chain: ChainId, key: &[u8]) -> bool {
        self.s.overdue.get(&chain).is_some_and(|q| q.iter().any(|h| h.key == key))
    }

    /// Serves again the reads of `chain` that waited for a key's delete, once it is no longer past its deadline
    /// here; the rest wait on.
    pub(super) fn release_overdue(&mut self, now: Time, chain: ChainId, out: &mut Fx) {
        let Some(queue) = self.s.overdue.remove(&chain) else { return };
        let (ready, waiting): (VecDeque<Held>, VecDeque<Held>) =
            queue.into_iter().partition(|h| !self.overdue_here(chain, &h.key));
        if !waiting.is_empty() {
            self.s.overdue.insert(chain, waiting);
        }
        for held in ready {
            self.on_get(now, held.origin, chain, held.key, held.read, out);
        }
    }

    /// On every tick: serves again the reads waiting for a delete that may go ahead, and, where this member may no
    /// longer answer its chain's reads (a new view, a lapsed lease), every one, to go where a new read would.
    pub(super) fn retry_overdue(&mut self, now: Time, out: &mut Fx) {
        let chains: Vec<ChainId> = self.s.overdue.keys().copied().collect();
        for chain in chains {
            if self.s.replicas.get(&chain).is_some_and(|r| self.s.lease_ok(chain, r, now)) {
                self.release_overdue(now, chain, out);
            } else {
                for held in self.s.overdue.remove(&chain).unwrap_or_default() {
                    self.on_get(now, held.origin, chain, held.key, held.read, out);
                }
            }
        }
    }

    /// At the head: deletes `key` first if its deadline has passed.
    pub(super) fn reap_if_due(&mut self, now: Time, chain: ChainId, key: &[u8], out: &mut Fx) {
        if self.due_here(chain, key) {
            self.head_delete(now, chain, Bytes::copy_from_slice(key), out);
            self.s.stats.expired += 1;
        }
    }

    /// On every tick: each chain this node heads deletes its keys whose deadline has passed, as many as the
    /// chain's unacknowledged history has room for.
    pub(super) fn reap_expired(&mut self, now: Time, out: &mut Fx) {
        let clock = self.deadline_clock();
        let mut budget = REAP_MAX;
        for chain in self.headed() {
            let room = (self.s.cfg.unacked_max / 2).saturating_sub(self.s.replicas[&chain].unacked.len());
            let due = self.ledger(chain).map_or(Vec::new(), |l| l.due(chain.0, clock, budget.min(room)));
            budget -= due.len();
            self.s.stats.expired += due.len() as u64;
            due.into_iter().for_each(|key| self.head_delete(now, chain, key, out));
        }
    }

    /// The chains this node heads as a valid replica.
    pub(super) fn headed(&self) -> Vec<ChainId> {
        self.s.replicas.iter().filter(|(_, r)| r.is_active() && r.is_head()).map(|(&c, _)| c).collect()
    }

    /// At the head: orders a delete of `key` that no client asked for (an expiry or an eviction).
    pub(super) fn head_delete(&mut self, now: Time, chain: ChainId, key: Bytes, out: &mut Fx) {
        let seq = self.s.replicas[&chain].lu + 1;
        let outcome = Outcome { applied: true, existed: true, ..Outcome::default() };
        let update = Update { chain, seq, key, change: Change::Delete, outcome, origin: None, also: Vec::new() };
        self.log_and_pass(now, update, out);
    }
}
