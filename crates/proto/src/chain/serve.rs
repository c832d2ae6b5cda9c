//! The data path of a chain member: ordering writes at the head, passing updates down, acknowledging them
//! back up, answering at the tail (seed 003 §2.3, Listing 1), and catching up lost messages by Sync.

use super::lease::{hold, Held};
use super::msg::{ChainMsg, Change, Origin, Update};
use super::replica::{Answered, Replica};
use super::{ChainNode, ChainStep, Fx};
use crate::ops::decide::{blind, decide, decide_keys, needs_value, Current, Decision, KeysDecision};
use crate::ops::read::{decoded, reply_for, Span};
use bytes::Bytes;
use meridian_core::{ChainId, ErrorKind, NodeId, Read, Reply, Request, Stored, Time, UpdateMode, Write};
use meridian_store::{Body, Datastore, Durability, Entry, Record, StoreError};

use super::{planted_in, PlantedBug};

/// Where a write's `existed` comes from: the head's decision, or, for a [`blind`] write, the head's store as
/// it logs the write.
#[derive(Clone, Copy)]
pub(super) enum Existed {
    Decided,
    AtAppend,
}

pub(super) fn ack_mark(chain: ChainId, seq: u64) -> Record {
    Record { chain: chain.0, seq, key: Bytes::new(), body: Body::AckMark }
}

pub(super) fn record_of(u: &Update) -> Record {
    Record { chain: u.chain.0, seq: u.seq, key: u.key.clone(), body: body_of(u.change.clone()) }
}

/// Logs `u` in `store`: one record, or, for an update of several keys, one group of them, which a crash keeps
/// whole or drops.
pub(super) fn log_update(store: &mut dyn Datastore, u: &Update) -> Result<(), StoreError> {
    if u.also.is_empty() {
        return store.append(&record_of(u));
    }
    let record = |(key, change): (&Bytes, &Change)| Record {
        chain: u.chain.0,
        seq: u.seq,
        key: key.clone(),
        body: body_of(change.clone()),
    };
    store.append_group(&u.changes().map(record).collect::<Vec<_>>())
}

fn body_of(change: Change) -> Body {
    match change {
        Change::Put(v) => Body::Value(v),
        Change::Delete => Body::Tombstone,
        Change::Skip => Body::Skip,
    }
}

/// `u` as a record, its key and value taken rather than shared, for the tail: it keeps nothing of an update once
/// it has logged it (`Replica::record` keeps a copy only where `is_tail` is false), and sharing a value just
/// wrapped allocates its shared count (bytes' `Vec`-backed buffers), which is freed again once the store has
/// copied the value.
fn record_taken(u: &mut Update) -> Record {
    let body = body_of(std::mem::replace(&mut u.change, Change::Skip));
    Record { chain: u.chain.0, seq: u.seq, key: std::mem::take(&mut u.key), body }
}

impl ChainNode {
    /// Whether this node may answer clients as the tail or the query node of `chain` at `now`: an active
    /// member in that place with a lease for its view.
    pub(super) fn lease_ok(&self, chain: ChainId, r: &Replica, now: Time) -> bool {
        r.is_active() && self.reads_here(chain) && self.lease_valid(chain, r, now)
    }

    /// Whether this node holds a lease on `chain` for `r`'s view at `now`, wherever it stands in the chain.
    pub(super) fn lease_valid(&self, chain: ChainId, r: &Replica, now: Time) -> bool {
        if self.planted(PlantedBug::IgnoresLease) {
            return true;
        }
        let view = r.view();
        self.leases.get(&chain).is_some_and(|l| view.is_some_and(|v| l.valid(v, now)))
    }

    /// Whether this node may answer reads of `chain` ([`crate::map::ClusterMap::reads_at`]).
    pub(super) fn reads_here(&self, chain: ChainId) -> bool {
        let map = self.map.as_ref();
        map.and_then(|m| Some(m.reads_at(m.chains.get(&chain)?, self.me))).unwrap_or(false)
    }
}

impl ChainStep<'_> {
    pub(super) fn on_get(&mut self, now: Time, origin: Origin, chain: ChainId, key: Bytes, read: Read, out: &mut Fx) {
        // `lease_ok`, with the placement checked once for both of its outcomes.
        let leased = match self.s.replicas.get(&chain) {
            Some(r) if r.is_active() && self.s.reads_here(chain) => self.s.lease_valid(chain, r, now),
            _ => return self.bounce(origin, chain, Request::Get { keyspace: chain.keyspace(), key, read }, out),
        };
        if leased {
            self.serve_read(now, origin, chain, &key, read, out);
        } else {
            self.hold_or_bounce(chain, Held { origin, key, read }, out);
        }
    }

    /// Answers a read here, unless this is a query node before the tail, the keyspace acknowledges writes only
    /// once the tail has them (`su`), and the key has a write here the tail has not acknowledged: its value
    /// here may never commit, so the tail answers (CRAQ's "dirty" read, seed 003 §5.3's tentative writes).
    ///
    /// Under `ausi`, a member after the head answers a key it holds an invalidation for from the head, which
    /// has the write; the head holds a read back while a write of its key is not yet invalidated everywhere.
    pub(super) fn serve_read(
        &mut self,
        now: Time,
        origin: Origin,
        chain: ChainId,
        key: &[u8],
        read: Read,
        out: &mut Fx,
    ) {
        let update = self.s.update_mode(chain);
        let head = self.s.replicas[&chain].is_head();
        if head {
            // The head orders a due key's delete at once rather than at its next tick, for this read to see.
            self.reap_if_due(now, chain, key, out);
        }
        if update == UpdateMode::Ausi && head && self.defer_at_head(chain, origin, key, read) {
            return;
        }
        match (self.read_elsewhere(chain, &Span::Key(key), update), self.s.replicas[&chain].view()) {
            (Some(to), Some(view)) => {
                let key = Bytes::copy_from_slice(key);
                if origin.node == self.s.me {
                    self.host
                        .requests
                        .keep(&origin, Request::Get { keyspace: chain.keyspace(), key: key.clone(), read });
                }
                out.send(to, ChainMsg::Get { origin, view, chain, key, read })
            }
            _ => self.read(now, origin, chain, key, read, out),
        }
    }

    /// The member that must answer a read of `span` instead of this one, if any (see [`Self::serve_read`]).
    pub(super) fn read_elsewhere(&self, chain: ChainId, span: &Span, update: UpdateMode) -> Option<NodeId> {
        let r = &self.s.replicas[&chain];
        let members = &self.s.map.as_ref()?.chains.get(&chain)?.members;
        let tentative = planted_in(&self.s.cfg, PlantedBug::ReadsTentative);
        let dirty = !tentative
            && !r.is_tail()
            && update == UpdateMode::Su
            && r.unacked.iter().any(|u| u.keys().any(|k| span.holds(k)));
        let invalidated = |(key, &seq): (&Bytes, &u64)| seq > r.lu && span.holds(key);
        let invalid = update == UpdateMode::Ausi
            && !r.is_head()
            && match span {
                Span::Key(key) => r.invalid.get_key_value(*key).is_some_and(invalidated),
                Span::Tokens(_) => r.invalid.iter().any(invalidated),
            };
        match (dirty, invalid) {
            (true, _) => members.last().copied(),
            (_, true) => members.first().copied(),
            _ => None,
        }
    }

    fn read(&mut self, now: Time, origin: Origin, chain: ChainId, key: &[u8], read: Read, out: &mut Fx) {
        if self.overdue_here(chain, key) {
            let key = Bytes::copy_from_slice(key);
            return self.await_delete(chain, Held { origin, key, read }, out);
        }
        let reply = self.read_reply(now, chain, key, read);
        // A read may see writes this batch logged but has not made durable; it must not leave first.
        self.answer(origin, reply, true, out);
    }

    /// A read's answer from this member's store, given at `now`.
    pub(super) fn read_reply(&mut self, now: Time, chain: ChainId, key: &[u8], read: Read) -> Reply {
        self.s.stats.reads += 1;
        self.note_answered(now, chain);
        match self.stored(chain, key) {
            Ok(stored) => reply_for(read, stored, self.host.wall_ms),
            Err(e) => Reply::Error(ErrorKind::Storage, e.to_string()),
        }
    }

    /// Records that this member answers a read of `chain` from its own store at `now`, for the simulator to
    /// hold to the lease rule ([`ChainNode::answered`]).
    pub(super) fn note_answered(&mut self, now: Time, chain: ChainId) {
        if let Some(r) = self.s.replicas.get_mut(&chain) {
            r.answered = r.view().map(|view| Answered { at: now, view, tail: r.is_tail() });
        }
    }

    /// The value this member holds for `key`, taken apart; None if absent or deleted.
    fn stored(&self, chain: ChainId, key: &[u8]) -> Result<Option<Stored>, StoreError> {
        let value = self.store(chain).get(key)?.and_then(|e: Entry| e.value);
        value.map(decoded).transpose()
    }

    fn hold_or_bounce(&mut self, chain: ChainId, held: Held, out: &mut Fx) {
        if let Err(held) = hold(self.s.held.entry(chain).or_default(), held) {
            self.bounce(held.origin, chain, held.request(chain), out);
        }
    }

    /// Answers the reads that waited for a lease, on every chain that now has one.
    pub(super) fn release_held(&mut self, now: Time, out: &mut Fx) {
        let ready: Vec<ChainId> = self
            .s
            .held
            .iter()
            .filter(|(c, q)| !q.is_empty() && self.s.replicas.get(c).is_some_and(|r| self.s.lease_ok(**c, r, now)))
            .map(|(&c, _)| c)
            .collect();
        for chain in ready {
            for held in self.s.held.remove(&chain).unwrap_or_default() {
                self.serve_read(now, held.origin, chain, &held.key, held.read, out);
            }
        }
    }

    pub(super) fn on_write(&mut self, now: Time, origin: Origin, chain: ChainId, write: Write, out: &mut Fx) {
        let unacked = match self.s.replicas.get(&chain) {
            Some(r) if r.is_active() && r.is_head() => r.unacked.len(),
            _ => return self.bounce(origin, chain, Request::Write(write), out),
        };
        if unacked >= self.s.cfg.unacked_max {
            let msg = format!("chain {chain} has {unacked} unacknowledged writes; retry later");
            return self.answer(origin, Reply::Error(ErrorKind::Busy, msg), false, out);
        }
        if write.is_multi_key() && !self.s.holds_all(chain, &write) {
            let msg = "Keys in request don't hash to the same slot".to_string();
            return self.answer(origin, Reply::Error(ErrorKind::CrossSlot, msg), false, out);
        }
        // A key past its deadline is deleted first, in order, so the write meets it absent, as every member
        // will once the delete reaches it.
        for key in write.keys() {
            self.reap_if_due(now, chain, key, out);
        }
        match self.order(chain, Some(origin), write) {
            Ok((update, existed)) => self.log_and_pass_as(now, update, existed, out),
            Err(e) => return self.answer(origin, Reply::Error(ErrorKind::Storage, e.to_string()), false, out),
        }
        self.evict(now, chain, out);
    }

    /// The head's decision: the next sequence number and the write's outcome against current state. A
    /// [`blind`] write looks nothing up: whether its key existed is learned as it is logged.
    pub(super) fn order(
        &self,
        chain: ChainId,
        origin: Option<Origin>,
        mut write: Write,
    ) -> Result<(Update, Existed), StoreError> {
        let seq = self.s.replicas[&chain].lu + 1;
        if write.is_multi_key() {
            let current = write.keys().map(|k| self.stored(chain, k)).collect::<Result<_, _>>()?;
            let KeysDecision { changes, outcome } = decide_keys(write, current, self.host.wall_ms);
            let mut changes = changes.into_iter();
            let (key, change) = changes.next().expect("a decision changes at least one key");
            let update = Update { chain, seq, key, change, outcome, origin, also: changes.collect() };
            return Ok((update, Existed::Decided));
        }
        let current = match (needs_value(&write), self.store(chain)) {
            (true, _) => Current::from(self.stored(chain, &write.key)?),
            (false, _) if blind(&write) => Current::Unknown,
            (false, store) if store.has_value(&write.key)? => Current::Exists,
            (false, _) => Current::Absent,
        };
        let current = match current {
            Current::Exists if self.s.planted(PlantedBug::HeadStoreForgets) => Current::Absent,
            current => current,
        };
        let existed = if matches!(current, Current::Unknown) { Existed::AtAppend } else { Existed::Decided };
        // Taken, not shared: `decide` has no use for the key, and sharing a `Vec`-backed one allocates its count.
        let key = std::mem::take(&mut write.key);
        let Decision { change, outcome } =
            decide(write, current, self.host.wall_ms, self.host.cfg.limits.max_value_bytes);
        Ok((Update { chain, seq, key, change, outcome, origin, also: Vec::new() }, existed))
    }

    pub(super) fn on_update(&mut self, now: Time, from: NodeId, view: u64, u: Update, out: &mut Fx) {
        let tick = self.host.tick;
        let Some(r) = self.s.replicas.get_mut(&u.chain) else { return };
        if r.view() != Some(view) || r.pred() != Some(from) || u.seq <= r.lu || r.lost {
            return;
        }
        if !r.is_active() {
            // A flushing member keeps what its predecessor sends in the temporary store.
            let temp = self.s.temp.entry(u.chain).or_default();
            if temp.len() < self.s.cfg.unacked_max {
                temp.insert(u.seq, u);
            }
            return;
        }
        if u.seq > r.lu + 1 {
            // An earlier update was lost with a broken connection: ask once per tick for a resend.
            if r.gap_sync_tick != Some(tick) {
                r.gap_sync_tick = Some(tick);
                let msg = ChainMsg::Sync { chain: u.chain, view, lu: r.lu, la: r.la };
                out.send_after_sync(from, msg);
            }
            return;
        }
        self.log_and_pass(now, u, out);
    }

    /// Logs an update in sequence and passes it on: down the chain, or, at the tail, back up as an ack
    /// and to the client as the answer, only once it is durable (but at a head that forwards early).
    pub(super) fn log_and_pass(&mut self, now: Time, u: Update, out: &mut Fx) {
        self.log_and_pass_as(now, u, Existed::Decided, out)
    }

    fn log_and_pass_as(&mut self, now: Time, mut u: Update, existed: Existed, out: &mut Fx) {
        let awaited = !self.s.overdue.is_empty() && u.keys().any(|key| self.awaited(u.chain, key));
        if let Err(e) = self.append(&mut u, existed) {
            // Not logged, not acknowledged: the predecessor still holds it and will resend.
            tracing::error!(chain = %u.chain, seq = u.seq, "cannot log update: {e}");
            if let (Some(origin), None) = (u.origin, self.s.replicas[&u.chain].pred()) {
                self.answer(origin, Reply::Error(ErrorKind::Storage, e.to_string()), false, out);
            }
            return;
        }
        // A memory replica has nothing to make durable: its node's batch owes no fsync for it.
        if self.store(u.chain).durability() != Durability::Volatile {
            self.s.mark_written(u.chain, out);
        }
        if self.s.planted(PlantedBug::EvictsLocally) {
            self.evict_locally(u.chain, u.seq);
        }
        let u = self.answer_at_head(now, u, out);
        let r = self.s.replicas.get_mut(&u.chain).expect("member of the chain");
        r.record(&u);
        let (succ, view) = (r.succ(), r.view().expect("members have a view"));
        if self.s.planted(PlantedBug::HeadAcksEarly) {
            self.ack_early_at_head(&u, out);
        }
        let chain = u.chain;
        match succ {
            Some(succ) if self.s.forwards_early(chain) => out.send(succ, ChainMsg::Update { view, update: u }),
            Some(succ) => out.send_after_sync(succ, ChainMsg::Update { view, update: u }),
            None => self.commit_at_tail(now, u, out),
        }
        self.s.debug_check(chain);
        if awaited {
            self.release_overdue(now, chain, out);
        }
    }

    /// Appends `u` to its replica's store, learning at the append whether its key existed if the head did not
    /// decide that (`Existed`).
    pub(super) fn append(&mut self, u: &mut Update, existed: Existed) -> Result<(), StoreError> {
        if !u.also.is_empty() {
            debug_assert!(matches!(existed, Existed::Decided), "{u:?}: an update of several keys is decided");
            if self.s.planted(PlantedBug::LogsFirstKeyOnly) && !self.s.replicas[&u.chain].is_head() {
                return self.store_mut(u.chain).append(&record_of(u));
            }
            return log_update(self.store_mut(u.chain), u);
        }
        let record = if self.s.replicas[&u.chain].is_tail() { record_taken(u) } else { record_of(u) };
        let store = self.store_mut(u.chain);
        u.outcome.existed = match existed {
            Existed::Decided => store.append(&record).map(|()| u.outcome.existed)?,
            Existed::AtAppend => store.append_existed(&record)?,
        };
        Ok(())
    }

    /// With `au`, the head answers a write once it has logged it (durably, for its replica's kind); with `ausi`,
    /// once the rest of the chain also holds an invalidation of its key (`invalidate.rs`). Either way the rest
    /// of the chain gets the update without anyone to answer. A head that is also the tail answers as the tail.
    ///
    /// Like a tail, an `au` head answers only with a lease on its view: a head removed without hearing of it
    /// would otherwise go on answering writes the chain never gets, for as long as clients reach it. Without a
    /// lease the write goes on as under `su`, answered by the tail once committed.
    ///
    /// Under `ausi` a delete the head orders itself (an expiry, an eviction), which nobody waits for, is
    /// invalidated all the same: the head shows a write only once the chain holds its invalidation, or a member
    /// after it could answer the older value after the head had answered the newer one.
    fn answer_at_head(&mut self, now: Time, mut u: Update, out: &mut Fx) -> Update {
        let update = self.s.update_mode(u.chain);
        let r = &self.s.replicas[&u.chain];
        let Some(succ) = r.succ().filter(|_| r.is_head() && update != UpdateMode::Su) else { return u };
        match (update, u.origin) {
            (UpdateMode::Ausi, origin) => self.invalidate(&u, succ, origin, u.outcome.reply(), out),
            (_, Some(origin)) if self.s.lease_valid(u.chain, r, now) => {
                self.answer(origin, u.outcome.reply(), true, out)
            }
            _ => return u,
        }
        u.origin = None;
        u
    }

    /// The tail has logged `u`: its answer goes to the front-end and, once confirmed, the update is
    /// acknowledged upstream (`answers.rs`), always only once it is durable.
    fn commit_at_tail(&mut self, now: Time, u: Update, out: &mut Fx) {
        self.s.stats.writes += 1;
        match u.origin {
            Some(origin) => self.answer_committed(now, u.chain, u.seq, origin, u.outcome.reply(), out),
            None => self.send_answers(now, u.chain, out),
        }
        self.ack_upstream(u.chain, out);
    }

    pub(super) fn on_ack(&mut self, now: Time, from: NodeId, chain: ChainId, view: u64, seq: u64, out: &mut Fx) {
        let Some(r) = self.s.replicas.get_mut(&chain) else { return };
        if r.view() != Some(view) || r.succ() != Some(from) || !r.is_active() || !r.ack(seq) {
            return;
        }
        if let Some(pred) = r.pred() {
            out.send(pred, ChainMsg::Ack { chain, view, seq: r.la });
        }
        self.s.debug_check(chain);
        self.answer_invalidated(now, chain, None, out);
    }

    /// Whether a Sync from `from` is this member's to answer: it comes from the successor of its current view.
    pub(super) fn takes_sync(&self, from: NodeId, chain: ChainId, view: u64) -> bool {
        if self.s.planted(PlantedBug::IgnoresSync) {
            return false;
        }
        self.s.replicas.get(&chain).is_some_and(|r| r.view() == Some(view) && r.succ() == Some(from) && r.is_active())
    }

    /// Sends the successor `to` again what it lacks after its `lu`.
    pub(super) fn resend(&self, to: NodeId, chain: ChainId, view: u64, lu: u64, out: &mut Fx) {
        for u in self.s.replicas[&chain].missing_after(lu, self.s.cfg.resend_max) {
            out.send_after_sync(to, ChainMsg::Update { view, update: u.clone() });
        }
    }

    pub(super) fn on_probe(&mut self, from: NodeId, chain: ChainId, view: u64, out: &mut Fx) {
        let Some(r) = self.s.replicas.get(&chain) else { return };
        if r.view() == Some(view) && r.pred() == Some(from) && r.is_active() {
            out.send_after_sync(from, ChainMsg::Sync { chain, view, lu: r.lu, la: r.upstream_la() });
        }
    }
}
