//! `ausi` (seed 003 §5.3: "success when the primary commits and all secondaries received invalidations"): the
//! head logs a write and, once it is durable there, sends an invalidation of its key down the chain ahead of
//! the update. Each member holds it in memory (`Replica::invalid`) and passes it on at once; the tail tells the
//! head, which then answers the client. The update follows the ordinary chain path without anyone waiting for
//! it, and a member stops treating the key as invalid once its history reaches the write's sequence number.
//! Until then its reads of the key go to the head ([`ChainNode::serve_read`]).
//!
//! A head whose invalidations were lost with a broken connection or a view change still answers once the
//! chain acknowledges the update itself (its LA passes the write): that is `su`'s condition, stronger. It answers
//! when the acknowledgement arrives, or at its next tick when none will (a chain shrunk to its head alone).
//! Invalidations are not logged, so a member that restarts forgets them; docs/keyspaces.md states what that
//! costs.

use super::msg::{ChainMsg, Origin, Update};
use super::{planted_in, PlantedBug};
use super::{ChainStep, Fx};
use bytes::Bytes;
use meridian_core::{ChainId, NodeId, Read, Reply, Time};

/// A write the head owes an answer for once the chain holds the invalidation of its keys (`Replica::awaiting`).
#[derive(Debug)]
pub struct Awaited {
    pub key: Bytes,
    /// The other keys of an update of several (`Update::also`).
    pub also: Vec<Bytes>,
    /// None for a delete the head ordered itself.
    pub origin: Option<Origin>,
    pub reply: Reply,
}

impl Awaited {
    pub fn keys(&self) -> impl Iterator<Item = &Bytes> {
        std::iter::once(&self.key).chain(&self.also)
    }
}

/// An invalidation as it arrives: the write's sequence number and its keys.
pub(super) struct Invalidation {
    pub seq: u64,
    pub key: Bytes,
    pub also: Vec<Bytes>,
}

impl ChainStep<'_> {
    /// The head owes `origin` (if a client asked for `u`) the answer `reply` once the chain holds the
    /// invalidation of `u`'s key, which leaves for `succ` once `u` is durable here; until then it holds reads of
    /// the key back (`defer_at_head`).
    pub(super) fn invalidate(&mut self, u: &Update, succ: NodeId, origin: Option<Origin>, reply: Reply, out: &mut Fx) {
        let r = self.s.replicas.get_mut(&u.chain).expect("the head holds the chain");
        let also: Vec<Bytes> = u.also.iter().map(|(k, _)| k.clone()).collect();
        let awaited = Awaited { key: u.key.clone(), also: also.clone(), origin, reply };
        r.awaiting.insert(u.seq, awaited);
        let view = r.view().expect("members have a view");
        out.send_after_sync(succ, ChainMsg::Invalidate { chain: u.chain, view, seq: u.seq, key: u.key.clone(), also });
    }

    pub(super) fn on_invalidate(&mut self, from: NodeId, chain: ChainId, view: u64, keys: Invalidation, out: &mut Fx) {
        let Some(r) = self.s.replicas.get_mut(&chain) else { return };
        if r.view() != Some(view) || r.pred() != Some(from) {
            return;
        }
        let Invalidation { seq, key, also } = keys;
        for key in std::iter::once(&key).chain(&also) {
            let at = r.invalid.entry(key.clone()).or_default();
            *at = (*at).max(seq);
        }
        match r.succ() {
            Some(succ) => out.send(succ, ChainMsg::Invalidate { chain, view, seq, key, also }),
            None => {
                let head = self.s.map.as_ref().and_then(|m| m.chains.get(&chain)?.members.first().copied());
                if let Some(head) = head {
                    out.send(head, ChainMsg::Invalidated { chain, view, seq });
                }
            }
        }
    }

    pub(super) fn on_invalidated(&mut self, now: Time, chain: ChainId, view: u64, seq: u64, out: &mut Fx) {
        if self.s.replicas.get(&chain).is_some_and(|r| r.view() == Some(view) && r.is_head()) {
            self.answer_invalidated(now, chain, Some(seq), out);
        }
    }

    /// Answers the writes whose invalidations the whole chain holds, then the reads that waited for them: the
    /// write whose invalidation the tail just reported (`invalidated`), and every write the chain has acknowledged
    /// (up to LA). Only that one write: an earlier one's invalidation may have been lost (a broken connection, or
    /// sent in an earlier view), and it waits for LA. Only with a lease on the head's view, as a tail answers
    /// only with its own: until the manager's fence has passed, the last view's readers may still answer under
    /// theirs, and they hold no invalidation of these writes; without one they wait, and a later tick answers them
    /// (`answer_acknowledged`).
    pub(super) fn answer_invalidated(&mut self, now: Time, chain: ChainId, invalidated: Option<u64>, out: &mut Fx) {
        // Most acknowledgements find nothing waiting (every `su` write's do): they need no lease lookup.
        let Some(r) = self.s.replicas.get(&chain) else { return };
        if r.awaiting.is_empty() && r.deferred.is_empty() || !self.s.lease_ok(chain, r, now) {
            return;
        }
        let Some(r) = self.s.replicas.get_mut(&chain) else { return };
        let later = r.awaiting.split_off(&(r.la + 1));
        let mut due = std::mem::replace(&mut r.awaiting, later);
        if let Some((seq, entry)) = invalidated.and_then(|seq| Some((seq, r.awaiting.remove(&seq)?))) {
            due.insert(seq, entry);
        }
        let reads = std::mem::take(&mut r.deferred);
        for Awaited { origin, reply, .. } in due.into_values() {
            if let Some(origin) = origin {
                self.answer(origin, reply, false, out);
            }
        }
        // Taken again from the start, as the view may have changed since they were held back: a head that
        // lost its lease (or its place) meanwhile must not answer them.
        for (origin, key, read) in reads {
            self.on_get(now, origin, chain, key, read, out);
        }
    }

    /// Whether the head must hold a read of `key` back: a write of it is not yet invalidated everywhere, so a
    /// member after the head may still answer the key's older value, and this read must not show the newer one
    /// first.
    pub(super) fn defer_at_head(&mut self, chain: ChainId, origin: Origin, key: &[u8], read: Read) -> bool {
        let Some(r) = self.s.replicas.get_mut(&chain) else { return false };
        let shows = planted_in(&self.s.cfg, PlantedBug::ShowsUninvalidated);
        let waiting = !shows && r.awaiting.values().any(|a| a.keys().any(|k| k.as_ref() == key));
        if waiting {
            r.deferred.push((origin, Bytes::copy_from_slice(key), read));
        }
        waiting
    }

    /// Every tick: answers the writes whose updates the chain has acknowledged (LA passed them), with the reads
    /// deferred behind them, where no acknowledgement is coming to do it. A chain that shrank to its head has no
    /// successor left to acknowledge anything or return an invalidation, so without this a write that waited
    /// when the view changed held every later read of its key back for good.
    pub(super) fn answer_acknowledged(&mut self, now: Time, out: &mut Fx) {
        let due: Vec<ChainId> = self
            .s
            .replicas
            .iter()
            .filter(|(_, r)| r.awaiting.first_key_value().is_some_and(|(&seq, _)| seq <= r.la))
            .map(|(&chain, _)| chain)
            .collect();
        for chain in due {
            self.answer_invalidated(now, chain, None, out);
        }
    }

    /// Forgets invalidations whose writes this member's history now covers.
    pub(super) fn prune_invalid(&mut self) {
        for r in self.s.replicas.values_mut().filter(|r| !r.invalid.is_empty()) {
            let lu = r.lu;
            r.invalid.retain(|_, seq| *seq > lu);
        }
    }
}
