//! Requests answered within their step, without the front-end's tracking, a message to this node itself or any
//! effect but the answer ([`meridian_core::Process::answer_at_once`]). They are the common case of a small
//! deployment, a key whose chain has its query node (reads) or its only member (writes) here, and the long
//! way's bookkeeping would cost more than serving them. Each gives exactly the answer `on_request` would give
//! at that moment, or declines.

use super::ChainStep;
use crate::ops::read::Span;
use meridian_core::ring::key_token;
use meridian_core::{ChainId, ErrorKind, Read, Reply, Request, Time, UpdateMode, Write};
use meridian_store::Durability;

use super::PlantedBug;

impl ChainStep<'_> {
    /// The answer to `req` if it is a read this node serves without waiting and without a message: the key's
    /// query node is this node, which may answer the chain's reads now (`lease_ok`), and no write of the key
    /// makes the read wait or go elsewhere (`serve_read`). The caller must not let it overtake writes that are
    /// not yet durable (see `serve_read`'s answer); None sends the request the usual way.
    pub fn read_at_once(&mut self, now: Time, req: &Request) -> Option<Reply> {
        let Request::Get { keyspace, key, read } = req else { return None };
        // A TTL is reckoned on the wall clock, which the runner need not have set (`Process::answer_at_once`).
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
        Some(self.read_reply(now, chain, key, *read))
    }

    /// The answer to `req` if it is a write this node logs and answers within the step: it is the only member of
    /// the key's chain, so head and tail at once, may answer as the tail now (`lease_ok`), owes no earlier answer,
    /// and keeps the chain in memory, with nothing to make durable; and the write deletes nothing first (a key
    /// past its deadline) or after (a cache's eviction), which would be effects of their own. The caller sets the
    /// wall clock first, as for any write, and must not let the answer overtake writes not yet durable; otherwise
    /// the request comes back, to go the usual way (`on_write`, `log_and_pass`, `commit_at_tail`).
    pub fn write_at_once(&mut self, now: Time, req: Request) -> Result<Reply, Request> {
        // The limits last: a write that goes the long way has them checked there.
        let chain = match &req {
            Request::Write(write) => {
                self.writes_at_once(now, write).filter(|_| self.host.cfg.limits.check(&req).is_ok())
            }
            _ => None,
        };
        match (chain, req) {
            (Some(chain), Request::Write(write)) => Ok(self.log_at_once(chain, write)),
            (_, req) => Err(req),
        }
    }

    /// Orders, logs and commits `write` as `chain`'s only member; the answer, or the store's error.
    fn log_at_once(&mut self, chain: ChainId, write: Write) -> Reply {
        let ordered = self.order(chain, None, write.fixed_at(self.host.wall_ms));
        let logged = ordered.and_then(|(mut u, existed)| self.append(&mut u, existed).map(|()| u));
        match logged {
            Ok(u) => {
                self.s.replicas.get_mut(&chain).expect("the chain's only member").record(&u);
                self.s.stats.writes += 1;
                self.s.stats.writes_at_once += 1;
                u.outcome.reply()
            }
            Err(e) => {
                tracing::error!(%chain, "cannot log update: {e}");
                Reply::Error(ErrorKind::Storage, e.to_string())
            }
        }
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
