//! Requests answered within their step, without the front-end's tracking, a message to this node itself or any
//! effect but the answer ([`meridian_core::Process::read_at_once`], [`meridian_core::Process::write_at_once`]). They are the common case of a small
//! deployment, a key whose chain has its query node (reads) or its only member (writes) here, and the long
//! way's bookkeeping would cost more than serving them. Each gives exactly the answer `on_request` would give
//! at that moment, or declines; debug builds hold every answer given here to the long way's (`check_read`,
//! `check_write`).

use super::msg::{ChainMsg, Origin};
use super::{ChainStep, Fx};
use crate::ops::read::Span;
use meridian_core::ring::key_token;
use meridian_core::{ChainId, Effect, ErrorKind, NodeId, Read, Reply, Request, RequestId, Time, UpdateMode, Write};
use meridian_store::{Durability, StoreError};

use super::PlantedBug;

impl ChainStep<'_> {
    /// The answer to `req` if it is a read this node serves without waiting and without a message: the key's
    /// query node is this node, which may answer the chain's reads now (`lease_ok`), and no write of the key
    /// makes the read wait or go elsewhere (`serve_read`). The caller must not let it overtake writes that are
    /// not yet durable (see `serve_read`'s answer); None sends the request the usual way.
    pub fn read_at_once(&mut self, now: Time, req: &Request) -> Option<Reply> {
        let Request::Get { keyspace, key, read } = req else { return None };
        // A TTL is reckoned on the wall clock, which the runner need not have set (`Process::read_at_once`).
        if *read == Read::Expiry || self.host.cfg.limits.check(req).is_err() {
            return None;
        }
        let map = self.s.map.as_ref()?;
        let view = map.chain_of(*keyspace, req.token()?)?;
        if map.query_node(view) != Some(self.s.me) {
            return None;
        }
        let chain = view.id;
        let update = self.s.update_mode(chain);
        let r = self.s.replicas.get(&chain)?;
        // So is whether a key with a deadline is past it (`expiry.rs`).
        let timed = self.host.stores.ledger((chain.keyspace(), r.kind)).is_some_and(|l| l.expires(key));
        // Under `ausi` a head may hold a read back behind a write (`defer_at_head`), which needs its origin.
        let waits = update == UpdateMode::Ausi && r.is_head();
        let unleased = self.s.planted(PlantedBug::FastReadIgnoresLease) && r.is_active() && self.s.reads_here(chain);
        let leased = unleased || self.s.lease_ok(chain, r, now);
        if timed || waits || !leased || self.read_elsewhere(chain, &Span::Key(key), update).is_some() {
            return None;
        }
        let reply = self.read_reply(now, chain, key, *read);
        if !unleased {
            self.check_read(now, chain, key, *read, &reply);
        }
        Some(reply)
    }

    /// In debug builds, holds a read's answer at once to the long way's from the same state: `on_get` for a
    /// front-end on another node, which leaves nothing behind here (the answer goes out as a message; the
    /// replica's `answered` is set to what it already is; the count of reads is put back), must answer the
    /// same and do nothing else. A planted bug that makes the two differ on purpose is left to the simulator.
    pub(super) fn check_read(&mut self, now: Time, chain: ChainId, key: &[u8], read: Read, fast: &Reply) {
        if !cfg!(debug_assertions) {
            return;
        }
        let elsewhere = NodeId(self.s.me.0.wrapping_add(1));
        let origin = Origin { node: elsewhere, incarnation: 0, id: RequestId(0) };
        let (reads, mut out) = (self.s.stats.reads, Fx::new());
        self.on_get(now, origin, chain, bytes::Bytes::copy_from_slice(key), read, &mut out);
        self.s.stats.reads = reads;
        let dirty = out.is_dirty();
        let (effects, _) = out.drain();
        let effects: Vec<_> = effects.collect();
        let same = match &effects[..] {
            [Effect::Send { to, msg: ChainMsg::Reply { origin: o, reply, confirm: None }, .. }] => {
                *to == elsewhere && *o == origin && reply == fast
            }
            _ => false,
        };
        let view = self.s.replicas.get(&chain).and_then(|r| r.view());
        assert!(
            same && !dirty,
            "{} chain {chain} view {view:?}: a read of {key:?} answered at once with {fast:?}; the long way: \
             {effects:?}",
            self.s.me
        );
    }

    /// The answer to `req` if it is a write this node logs and answers within the step: it is the only member of
    /// the key's chain, so head and tail at once, may answer as the tail now (`lease_ok`), owes no earlier answer,
    /// and keeps the chain in memory, with nothing to make durable; and the write deletes nothing first (a key
    /// past its deadline) or after (a cache's eviction), which would be effects of their own. The caller sets the
    /// wall clock first, as for any write, and must not let the answer overtake writes not yet durable; otherwise
    /// the request stays in `req`, to go the usual way (`on_write`, `log_and_pass`, `commit_at_tail`).
    pub fn write_at_once(&mut self, now: Time, req: &mut Option<Request>) -> Option<Reply> {
        // The limits last: a write that goes the long way has them checked there.
        let chain = match req.as_ref()? {
            checked @ Request::Write(write) => {
                self.writes_at_once(now, write).filter(|_| self.host.cfg.limits.check(checked).is_ok())?
            }
            _ => return None,
        };
        let Some(Request::Write(write)) = req.take() else { unreachable!("a write was looked at") };
        Some(self.log_at_once(now, chain, write))
    }

    /// Orders, logs and commits `write` as `chain`'s only member; the answer, or the store's error.
    fn log_at_once(&mut self, now: Time, chain: ChainId, write: Write) -> Reply {
        // The ordering and the tail's append take the key; only the debug check needs it after them.
        let key = cfg!(debug_assertions).then(|| write.key.clone());
        // Taken apart step by step rather than chained on a Result: each hand-over of the update in a Result
        // copied it whole, on every SET (bench/instructions).
        let (mut u, existed) = match self.order(chain, None, write.fixed_at(self.host.wall_ms)) {
            Ok(ordered) => ordered,
            Err(e) => return not_logged(chain, e),
        };
        if let Err(e) = self.append(&mut u, existed) {
            return not_logged(chain, e);
        }
        self.s.replicas.get_mut(&chain).expect("the chain's only member").record(&u);
        self.s.debug_check(chain);
        self.s.stats.writes += 1;
        self.s.stats.writes_at_once += 1;
        self.check_write(now, chain, key.as_deref().unwrap_or_default());
        u.outcome.reply()
    }

    /// In debug builds, holds a write logged at once to the long way (`on_write`, `log_and_pass_as`,
    /// `commit_at_tail`): the two share the ordering, the append, the record and the answer, so what is left to
    /// hold is that the long way's other steps would have had nothing to do here. There was no answer owed before
    /// this one, no unacknowledged history a head could be refused for, nothing to fsync, no read waiting for
    /// this key's delete, nothing to acknowledge upstream and nothing to evict.
    pub(super) fn check_write(&mut self, now: Time, chain: ChainId, key: &[u8]) {
        if !cfg!(debug_assertions) || self.s.planted(PlantedBug::FastWriteSkipsSync) {
            return;
        }
        let mut out = Fx::new();
        let awaited = self.awaited(chain, key);
        self.send_answers(now, chain, &mut out);
        self.ack_upstream(chain, &mut out);
        self.evict(now, chain, &mut out);
        let r = &self.s.replicas[&chain];
        let durable = self.store(chain).durability() != Durability::Volatile;
        let (effects, _) = out.drain();
        let effects: Vec<_> = effects.collect();
        assert!(
            effects.is_empty() && !durable && !awaited && r.unacked.is_empty() && r.unconfirmed.is_empty(),
            "{} chain {chain} view {:?}: a write of {key:?} logged at once that the long way would not have \
             left there: effects {effects:?}, durable {durable}, a read awaits its delete {awaited}, {} \
             unacknowledged, {} answers owed",
            self.s.me,
            r.view(),
            r.unacked.len(),
            r.unconfirmed.len(),
        );
    }

    /// The chain `write` falls in, if this node may log and answer it within the step ([`Self::write_at_once`]).
    fn writes_at_once(&self, now: Time, write: &Write) -> Option<ChainId> {
        // One of several keys goes the long way, which checks that they share the chain (`on_write`).
        if write.is_multi_key() {
            return None;
        }
        let map = self.s.map.as_ref()?;
        let view = map.chain_of(write.keyspace, key_token(&write.key))?;
        let (chain, r) = (view.id, self.s.replicas.get(&view.id)?);
        // A chain of several members, the common case that declines, is told by its view alone.
        if view.members[..] != [self.s.me] || !r.is_head() || !r.is_tail() || !r.unconfirmed.is_empty() {
            return None;
        }
        let volatile =
            self.store(chain).durability() == Durability::Volatile || self.s.planted(PlantedBug::FastWriteSkipsSync);
        let cache = self.s.budgets.contains_key(&chain);
        (volatile && !cache && !self.due_here(chain, &write.key) && self.s.lease_ok(chain, r, now)).then_some(chain)
    }
}

/// The answer to a write the store could not log.
fn not_logged(chain: ChainId, e: StoreError) -> Reply {
    tracing::error!(%chain, "cannot log update: {e}");
    Reply::Error(ErrorKind::Storage, e.to_string())
}
