//! Acting on the cluster map: taking part in chains, leaving them, joining them by pre-copy and flush
//! (seed 003 §2.5–2.6; docs/protocols/ouroboros.md), and the tail leases the manager grants.

use super::copy::{answer_history, answer_states, Copier, Progress};
use super::msg::{ChainMsg, CopyData, CopyKind, CopyPart, CopyReq, KeyState};
use super::replica::{Replica, Role};
use super::serve::{ack_mark, log_update};
use super::{evict, ChainStep, ChainTimer, Fx};
use super::{planted_in, PlantedBug};
use crate::map::placement::partition_range;
use crate::map::{ChainChange, ChainView, ClusterMap};
use crate::reports::StepReport;
use meridian_core::{ChainId, KeyspaceId, NodeId, Protocol, ReplicaKind, Time};
use meridian_store::{Body, Record, StoreError};
use std::sync::Arc;

use super::lease::Lease;

/// The record that drops everything of `chain` before it from a store.
pub(super) fn drop_record(chain: ChainId, partitions: u32) -> Record {
    let range = partition_range(chain, partitions);
    let body = Body::DropRange { start_exclusive: range.start().wrapping_sub(1), end_inclusive: *range.end() };
    Record { chain: chain.0, seq: 0, key: Default::default(), body }
}

/// This node's role in `chain` according to the map.
fn role_in(me: NodeId, map: &ClusterMap, chain: &ChainView) -> Role {
    if let Some(i) = chain.position(me) {
        let flushing = match chain.change {
            Some(ChainChange::Add { node, step, inserted: true, .. }) if node == me => Some(step),
            _ => None,
        };
        let pred = i.checked_sub(1).map(|p| chain.members[p]);
        let succ = chain.members.get(i + 1).copied();
        return Role::Member { view: chain.view, pred, succ, flushing };
    }
    match map.pre_copy(chain) {
        Some((joiner, step, source)) if joiner == me => Role::Joiner { step, view: chain.view, source },
        _ => Role::Outside,
    }
}

/// Whether `chain` was restored from a lost replica (`MapCommand::ReplicaRestored`) after `before`, the map
/// this node acted on last (none: it just started, and cannot tell, so any restoration counts).
fn restored_since(before: Option<&ClusterMap>, chain: &ChainView) -> bool {
    chain.restored.is_some() && before.and_then(|m| m.chains.get(&chain.id)).map(|c| c.restored) != Some(chain.restored)
}

impl ChainStep<'_> {
    /// Takes a newer cluster map: joins, leaves and repairs every chain whose membership changed for this node.
    pub fn adopt(&mut self, map: Arc<ClusterMap>, now: Time, out: &mut Fx) {
        if self.s.map.as_ref().is_some_and(|m| m.epoch >= map.epoch) {
            return;
        }
        let before = self.s.map.replace(map.clone());
        self.s.budgets = evict::budgets(&map);
        self.forget_dropped(&map, out);
        let mine = |c: &&ChainView| map.protocol_of(c.id.keyspace()) == Some(Protocol::Chain);
        for chain in map.chains.values().filter(mine) {
            let role = role_in(self.s.me, &map, chain);
            let known = self.s.replicas.get(&chain.id).map(|r| r.role);
            match role {
                Role::Outside if self.s.replicas.contains_key(&chain.id) => self.leave(chain.id, &map, out),
                Role::Outside => {}
                _ if known == Some(role) => {}
                Role::Joiner { .. } => {
                    if self.s.replicas.contains_key(&chain.id) && restored_since(before.as_deref(), chain) {
                        // The chain's history starts again from the restored replica, whose sequence numbers
                        // may name other writes than this node's data reflects: it is no pre-copy base.
                        self.leave(chain.id, &map, out);
                    }
                    self.prepare(chain, &map);
                    self.become_joiner(chain.id, role, &map)
                }
                Role::Member { .. } => {
                    self.prepare(chain, &map);
                    self.become_member(now, chain.id, role, &map, out)
                }
            }
        }
        self.s.leases.retain(|c, l| self.s.replicas.get(c).and_then(Replica::view) == Some(l.view));
    }

    /// Readies this node's replica of `chain`, which the map involves it in, for its new role: opens its store
    /// and gives it the kind the map says. A replica of another kind is left over from an earlier membership:
    /// its data goes, and a member that finds nothing else counts as lost. A replica added again starts afresh
    /// if it is lost or holds history its chain never acknowledged to it (above its LA): the chain may have
    /// gone on without those writes and given their sequence numbers to others. One the map restored from is
    /// whole again.
    fn prepare(&mut self, chain: &ChainView, map: &ClusterMap) {
        let kind = chain.kind_of(self.s.me).expect("the map involves this node");
        let key = (chain.id.keyspace(), kind);
        let cache = map.keyspaces.get(&key.0).is_some_and(|k| k.config.maxmemory.is_some());
        if let Err(e) = self.host.stores.get_or_open(key, cache) {
            // The node cannot take part without it, and it is in the map as if it did (fail-stop).
            panic!("{}: cannot open the {} datastore of keyspace {}: {e}", self.s.me, kind, key.0);
        }
        let member = chain.contains(self.s.me);
        let restored = chain.restored == Some((self.s.me, self.s.incarnation));
        let Some(r) = self.s.replicas.get_mut(&chain.id) else {
            self.s.replicas.insert(chain.id, Replica::empty(kind));
            return;
        };
        if r.kind != kind || (!member && (r.lost || r.lu > r.la)) {
            let old = r.kind;
            self.drop_data(chain.id, old, map);
            let r = Replica { lost: member && old != kind, ..Replica::empty(kind) };
            self.s.replicas.insert(chain.id, r);
        } else if r.lost && restored {
            r.lost = false;
            // The map made what this replica holds the chain's state, copied states above its history included
            // (a pre-copy or flush cut short): it continues from the highest sequence number it holds, as a
            // watermark that rides on the next sync.
            if !r.complete {
                let top = r.top;
                r.restore_watermark(top);
                r.complete = true;
                if let Err(e) = self.store_mut(chain.id).append(&ack_mark(chain.id, top)) {
                    tracing::warn!(chain = %chain.id, "cannot log the watermark of a restored replica: {e}");
                }
            }
        }
    }

    /// Appends a range drop for `chain` to the store of `kind`, so its data there is gone for good.
    fn drop_data(&mut self, chain: ChainId, kind: ReplicaKind, map: &ClusterMap) {
        let Some(store) = self.host.stores.get_mut((chain.keyspace(), kind)) else { return };
        if let Err(e) = store.append(&drop_record(chain, map.partitions)) {
            tracing::warn!(%chain, "cannot drop the data of a chain this node left: {e}");
        }
    }

    /// Forgets the chains of keyspaces the map dropped, and removes those keyspaces' stores.
    fn forget_dropped(&mut self, map: &ClusterMap, out: &mut Fx) {
        let gone: Vec<ChainId> = self.s.replicas.keys().filter(|c| !map.chains.contains_key(c)).copied().collect();
        gone.into_iter().for_each(|chain| self.forget(chain, out));
        let mut dropped: Vec<KeyspaceId> =
            self.host.stores.iter().map(|((k, _), _)| k).filter(|k| !map.keyspaces.contains_key(k)).collect();
        dropped.dedup();
        for keyspace in dropped {
            if let Err(e) = self.host.stores.remove(keyspace) {
                tracing::warn!(%keyspace, "cannot remove the files of a dropped keyspace: {e}");
            }
        }
    }

    /// Forgets a chain: its replication state, copies, temporary store, finished steps; reads held for its
    /// lease are bounced, so their front-ends route them again.
    fn forget(&mut self, chain: ChainId, out: &mut Fx) {
        self.s.stats.drops += 1;
        self.s.replicas.remove(&chain);
        self.s.copies.remove(&chain);
        self.s.temp.remove(&chain);
        self.s.finished.remove(&chain);
        for held in self.s.held.remove(&chain).unwrap_or_default() {
            self.bounce(held.origin, chain, held.request(chain), out);
        }
    }

    /// Leaves a chain this node no longer takes part in, dropping its data durably with a range drop.
    fn leave(&mut self, chain: ChainId, map: &ClusterMap, out: &mut Fx) {
        let kind = self.s.replicas[&chain].kind;
        self.forget(chain, out);
        self.drop_data(chain, kind, map);
    }

    fn become_joiner(&mut self, chain: ChainId, role: Role, map: &ClusterMap) {
        let Role::Joiner { step, view, source } = role else { unreachable!("called for joiners") };
        let r = self.s.replicas.get_mut(&chain).expect("prepared");
        // A member that was taken out and is added again keeps its data only if its chain acknowledged all of it
        // (`prepare`): it reflects the chain's history up to its LU, which is all a pre-copy base needs.
        assert!(r.unacked.is_empty() && r.la == r.lu, "{chain}: a joiner's base is acknowledged history");
        r.role = role;
        let range = partition_range(chain, map.partitions);
        self.s.copies.insert(chain, Copier::new(chain, CopyKind::PreCopy { step }, source, view, range, r.lu));
        self.s.finished.remove(&chain);
    }

    fn become_member(&mut self, now: Time, chain: ChainId, role: Role, map: &ClusterMap, out: &mut Fx) {
        let r = self.s.replicas.get_mut(&chain).expect("prepared");
        let was = r.role;
        r.role = role;
        if r.lost {
            // It waits, silent, for the manager to repair the chain around it or to restore from it.
            return;
        }
        let Role::Member { view, pred, succ, flushing } = role else { unreachable!("called for members") };
        if matches!(was, Role::Joiner { .. }) || flushing.is_none() {
            self.s.copies.remove(&chain);
        }
        // Only a flush of the step still in flight is worth reporting.
        self.s.finished.retain(|&c, (report, _)| {
            c != chain || matches!(report, StepReport::Flushed { step, .. } if Some(*step) == flushing)
        });
        if planted_in(&self.s.cfg, PlantedBug::SkipsFlush) && flushing.is_some() {
            (r.flushed, r.complete) = (flushing, true);
        }
        if !r.is_active() {
            return self.start_flush(chain, view, succ, map);
        }
        if succ.is_none() && was != role {
            self.settle_as_tail(now, chain, out);
        }
        self.s.debug_check(chain);
        let r = &self.s.replicas[&chain];
        if let Some(pred) = pred {
            out.send(pred, ChainMsg::Sync { chain, view, lu: r.lu, la: r.upstream_la() });
        }
    }

    /// A member that is not a valid replica copies what it lacks from its successor (§2.5 phase 2, FLUSH).
    fn start_flush(&mut self, chain: ChainId, view: u64, succ: Option<NodeId>, map: &ClusterMap) {
        let Some(succ) = succ else {
            // The planner never removes a tail while an inserted member flushes, so this cannot last.
            return tracing::warn!(%chain, "a member that needs a flush has no successor to flush from");
        };
        if self.s.copies.get(&chain).is_some_and(|c| c.kind == CopyKind::Flush && c.view == view && c.source == succ) {
            return;
        }
        let since = self.s.replicas[&chain].lu;
        let range = partition_range(chain, map.partitions);
        self.s.copies.insert(chain, Copier::new(chain, CopyKind::Flush, succ, view, range, since));
    }

    /// This member became the tail: everything it holds is committed; it answers the clients of its
    /// outstanding updates (seed Listing 1, CR_TAIL and TRUNCATE) once it holds a lease.
    fn settle_as_tail(&mut self, now: Time, chain: ChainId, out: &mut Fx) {
        let r = self.s.replicas.get_mut(&chain).expect("member");
        for u in r.settle_as_tail() {
            if let Some(origin) = u.origin {
                let written = u.outcome.reply();
                self.owe_answer(chain, u.seq, origin, written);
            }
        }
        self.send_answers(now, chain, out);
        self.ack_upstream(chain, out);
    }

    /// Leases from the manager's leader: for each listed chain, valid at its view until `until`.
    pub fn grant(&mut self, chains: &[(ChainId, u64)], until: Time, now: Time, out: &mut Fx) {
        for &(chain, view) in chains {
            let current = self.s.replicas.get(&chain).and_then(Replica::view);
            if current == Some(view) && self.s.leases.get(&chain).is_none_or(|l| l.view != view || l.until < until) {
                self.s.leases.insert(chain, Lease { view, until });
                self.send_answers(now, chain, out);
                self.ack_upstream(chain, out);
            }
        }
        self.release_held(now, out);
    }

    pub(super) fn copy_request(&mut self, now: Time, chain: ChainId, out: &mut Fx) {
        let tick = self.host.tick;
        let Some(copier) = self.s.copies.get_mut(&chain) else { return };
        if let Some(req) = copier.request(now, tick) {
            out.send(copier.source, ChainMsg::CopyReq(req));
        }
    }

    /// The source's side: answers a copy request from a joiner (as the chain's tail) or from the flushing
    /// member just before it (as its successor), once what it answers with is durable.
    pub(super) fn on_copy_req(&mut self, from: NodeId, req: CopyReq, out: &mut Fx) {
        let Some(r) = self.s.replicas.get(&req.chain).filter(|r| r.is_active() && r.view() == Some(req.view)) else {
            return;
        };
        let allowed = match req.kind {
            CopyKind::PreCopy { step } => self.copies_from_here(req.chain, from, step),
            CopyKind::Flush => r.pred() == Some(from),
        };
        if !allowed {
            return;
        }
        let answer = match req.part {
            CopyPart::States { since, first, last } => {
                answer_states(self.store(req.chain), &req, r, since, first, last)
            }
            CopyPart::History { after } => Ok(answer_history(&req, r, after)),
        };
        match answer {
            Ok(data) => out.send_after_sync(from, ChainMsg::CopyData(Box::new(data))),
            Err(e) => tracing::warn!(chain = %req.chain, "cannot answer a copy request: {e}"),
        }
    }

    /// Whether the map has `node` pre-copying into `chain` in step `step`, from this node.
    fn copies_from_here(&self, chain: ChainId, node: NodeId, step: u64) -> bool {
        let map = self.s.map.as_ref();
        map.and_then(|m| m.pre_copy(m.chains.get(&chain)?)) == Some((node, step, self.s.me))
    }

    pub(super) fn on_copy_data(&mut self, now: Time, from: NodeId, data: CopyData, out: &mut Fx) {
        let chain = data.chain;
        let bandwidth = self.s.cfg.migration_bandwidth;
        let Some(copier) = self.s.copies.get_mut(&chain).filter(|c| c.source == from) else { return };
        let progress = copier.on_data(data, now, bandwidth);
        let result = match progress {
            Progress::Stale => return,
            Progress::Restart => Ok(()),
            Progress::States(states) => self.log_states(chain, &states, out),
            Progress::Round { states, lu, settled } => self.finish_round(chain, &states, lu, settled, out),
            Progress::Flushed { la, history } => self.finish_flush(now, chain, la, history, out),
        };
        if let Err(e) = result {
            // Nothing is lost: the copy's watermark was not moved, so a later attempt copies it again.
            tracing::warn!(%chain, "cannot log copied data: {e}");
            self.s.copies.remove(&chain);
            return;
        }
        self.schedule_copy(now, chain, out);
    }

    /// Sends the copy's next request now, or sets a timer for when its pacing allows.
    fn schedule_copy(&mut self, now: Time, chain: ChainId, out: &mut Fx) {
        let Some(copier) = self.s.copies.get(&chain) else { return };
        match copier.due_in(now) {
            Some(wait) if !wait.is_zero() => out.set_timer(ChainTimer::Copy(chain), wait),
            Some(_) => self.copy_request(now, chain, out),
            None => {}
        }
    }

    fn log_states(&mut self, chain: ChainId, states: &[KeyState], out: &mut Fx) -> Result<(), StoreError> {
        for s in states {
            let body = s.value.clone().map_or(Body::Tombstone, Body::Value);
            self.store_mut(chain).append(&Record { chain: chain.0, seq: s.seq, key: s.key.clone(), body })?;
        }
        if !states.is_empty() {
            self.s.mark_written(chain, out);
        }
        Ok(())
    }

    fn finish_round(
        &mut self,
        chain: ChainId,
        states: &[KeyState],
        lu: u64,
        settled: bool,
        out: &mut Fx,
    ) -> Result<(), StoreError> {
        self.log_states(chain, states, out)?;
        self.store_mut(chain).append(&ack_mark(chain, lu))?;
        self.s.mark_written(chain, out);
        let r = self.s.replicas.get_mut(&chain).expect("a copy has a replica");
        r.restore_watermark(lu);
        r.complete = false;
        let role = r.role;
        self.s.debug_check(chain);
        if let (true, Role::Joiner { step, source, .. }) = (settled, role) {
            self.s.stats.precopies += 1;
            let tail = self.s.map.as_ref().and_then(|m| m.chains.get(&chain)?.tail());
            self.s.stats.precopies_near += u64::from(tail != Some(source));
            self.step_finished(StepReport::PreCopied { chain, step });
        }
        Ok(())
    }

    /// Completes a flush: the copied states are logged; the source's acknowledgement point and its history
    /// after it make this member's history whole, then what the predecessor sent meanwhile is played forward.
    fn finish_flush(
        &mut self,
        now: Time,
        chain: ChainId,
        la: u64,
        history: Vec<super::msg::Update>,
        out: &mut Fx,
    ) -> Result<(), StoreError> {
        let r = self.s.replicas.get_mut(&chain).expect("a flush has a replica");
        // The tail holds everything up to the source's LA, and everything up to this member's own watermark
        // (a copy's or an earlier membership's). The copied data reflects at least that state, and the source's
        // history after it continues it. A member that flushes again after a restart may hold more: updates it
        // took from its predecessor in this same view (after its first flush) that its successor has not got yet.
        // The view's head ordered them, so they continue the source's history, and are kept and passed on;
        // dropping them from memory while the log keeps them made a restart bring them back as history the chain
        // had moved past (sim seed 1402885).
        let la = la.max(r.la);
        let history: Vec<_> = history.into_iter().filter(|u| u.seq > la).collect();
        let top = history.last().map_or(la, |u| u.seq);
        // Already in this member's log, before the watermark about to be logged: replay keeps them as history.
        let own: Vec<_> = std::mem::take(&mut r.unacked).into_iter().filter(|u| u.seq > top).collect();
        let store = self.store_mut(chain);
        store.append(&ack_mark(chain, la))?;
        for u in &history {
            log_update(store, u)?;
        }
        let history: Vec<_> = history.into_iter().chain(own).collect();
        debug_assert!(
            history.iter().enumerate().all(|(i, u)| u.seq == la + 1 + i as u64),
            "chain {chain}: a flush's history must continue its watermark {la} without a gap"
        );
        self.s.mark_written(chain, out);
        self.s.copies.remove(&chain);
        let r = self.s.replicas.get_mut(&chain).expect("a flush has a replica");
        r.unacked.clear();
        (r.lu, r.la, r.la_logged) = (la, la, r.la_logged.max(la));
        for u in history {
            r.lu = u.seq;
            r.unacked.push_back(u);
        }
        r.complete = true;
        self.s.debug_check(chain);
        let r = self.s.replicas.get_mut(&chain).expect("a flush has a replica");
        let Role::Member { view, pred, flushing, .. } = r.role else { unreachable!("flushing members are members") };
        r.flushed = flushing;
        self.s.stats.flushes += 1;
        if let Some(step) = flushing {
            self.step_finished(StepReport::Flushed { chain, step });
        }
        self.play_forward(now, chain, out);
        let r = &self.s.replicas[&chain];
        if let Some(pred) = pred {
            out.send_after_sync(pred, ChainMsg::Sync { chain, view, lu: r.lu, la: r.la });
        }
        Ok(())
    }

    /// Plays the temporary store forward: the predecessor's updates that continue this member's history.
    fn play_forward(&mut self, now: Time, chain: ChainId, out: &mut Fx) {
        let mut temp = self.s.temp.remove(&chain).unwrap_or_default();
        loop {
            let next = self.s.replicas[&chain].lu + 1;
            temp.retain(|&seq, _| seq >= next);
            match temp.remove(&next) {
                Some(u) => self.log_and_pass(now, u, out),
                None => break,
            }
            if !self.s.replicas[&chain].is_active() {
                break;
            }
        }
    }
}
