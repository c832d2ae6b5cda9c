//! Chain replication on a consistent-hashing ring (seed 003 §2.2–2.3, Listing 1), with static
//! membership. Joins, failures and the replicated manager (Ouroboros, §2.4–2.6) come later; here a
//! node that crashes restarts with its log and catches up.
//!
//! Guarantee: per-key linearizability of get/put/delete/conditional put, and no acknowledged write is
//! lost, under crash-restart of any node with a durable datastore (unsynced writes lost, last write
//! torn), message loss on broken connections, partitions, pauses and clock skew. Availability is not
//! promised while a member of a key's chain is down or cut off: requests for it time out with an
//! "outcome unknown" error until the chain is whole again.
//!
//! How it holds (see docs/protocols/chain.md for the full argument):
//! - The head orders writes: it assigns the next sequence number of the chain, evaluates the write's
//!   condition against its own state, logs it and forwards it. Nothing is ever rolled back (membership
//!   is static), so the head's order is the order the tail commits in.
//! - Every node logs an update and makes it durable before forwarding it (`send_after_sync`), so
//!   `LU(successor) ≤ durable LU(predecessor)` survives any crash, and a restarted node recovers a gap-free
//!   prefix of each chain's history from its log.
//! - The tail answers a write and acknowledges it upstream only once it is durable, and answers reads
//!   only from durable state, so a read can never observe a write that a crash could take back.
//! - Lost messages are recovered by Sync: a successor that restarts, sees a gap, or is probed by a
//!   predecessor with stalled acknowledgements reports its LU, and the predecessor resends what follows.
//!
//! Sequence numbers continue from the recovered LU after a restart (the seed leaves this open, §2.6):
//! a sequence number the head assigned but never made durable was never forwarded, so reusing it
//! cannot conflict.

mod frontend;
pub mod msg;
mod replica;

use bytes::Bytes;
use frontend::FrontEnd;
use meridian_core::{
    ChainId, ClusterConfig, Effects, ErrorKind, Limits, NodeId, Process, Reply, Request, RequestId, Ring, Time, Write,
};
use meridian_store::{Body, Datastore, Record, StoreError, StoreStats};
use replica::Replica;
use std::collections::BTreeMap;
use std::time::Duration;

pub use msg::{ChainMsg, Change, Origin, Outcome, Update};

type Fx = Effects<ChainMsg, ChainTimer>;

#[derive(Clone, Debug)]
pub struct ChainConfig {
    /// Period of the housekeeping timer: probes for stalled chains, ack watermarks, request expiry.
    pub tick: Duration,
    /// How long a front-end waits for a chain before answering "outcome unknown".
    pub request_timeout: Duration,
    /// Bound on a chain's unacknowledged history at the head; beyond it new writes get BUSY.
    pub unacked_max: usize,
    /// Bound on the updates resent in answer to one Sync.
    pub resend_max: usize,
    pub limits: Limits,
    #[cfg(feature = "planted-bugs")]
    pub planted_bug: Option<PlantedBug>,
}

impl Default for ChainConfig {
    fn default() -> Self {
        ChainConfig {
            tick: Duration::from_millis(50),
            request_timeout: Duration::from_secs(2),
            unacked_max: 65_536,
            resend_max: 1024,
            limits: Limits::default(),
            #[cfg(feature = "planted-bugs")]
            planted_bug: None,
        }
    }
}

/// Deliberately wrong variants, to prove the simulator's checkers catch them.
#[cfg(feature = "planted-bugs")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlantedBug {
    /// The head answers a write once it has logged it, before the tail has it.
    HeadAcksEarly,
    /// The tail acknowledges (upstream and to the client) before its log is durable, so a crash can
    /// take back a write its predecessors have already dropped from their unacknowledged history.
    TailAcksEarly,
    /// Predecessors ignore Sync, so an update lost with a broken connection is never resent.
    IgnoresSync,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ChainTimer {
    Tick,
}

pub struct ChainNode {
    me: NodeId,
    ring: Ring,
    cfg: ChainConfig,
    store: Box<dyn Datastore>,
    /// The chains this node is a member of.
    replicas: BTreeMap<ChainId, Replica>,
    fe: FrontEnd,
    tick: u64,
}

impl ChainNode {
    /// Builds the node's state from its datastore's log. `incarnation` must differ between runs of the
    /// same node (the driver draws it at random) so answers addressed to a previous run are dropped.
    pub fn new(
        me: NodeId,
        cluster: &ClusterConfig,
        cfg: ChainConfig,
        mut store: Box<dyn Datastore>,
        incarnation: u64,
    ) -> Result<ChainNode, StoreError> {
        let ring = Ring::new(cluster);
        let mut replicas: BTreeMap<ChainId, Replica> = ring
            .chains()
            .iter()
            .filter(|c| c.position(me).is_some())
            .map(|c| (c.id, Replica::new(c.predecessor(me), c.successor(me))))
            .collect();
        recover(store.as_ref(), &mut replicas)?;
        // Records that survived a process crash may still sit in the page cache only; they are about to
        // be forwarded as durable, so make them so.
        store.sync()?;
        Ok(ChainNode { me, ring, cfg, store, replicas, fe: FrontEnd::new(me, incarnation), tick: 0 })
    }

    pub fn ring(&self) -> &Ring {
        &self.ring
    }

    pub fn store_stats(&self) -> StoreStats {
        self.store.stats()
    }

    /// (chain, LU, LA) for every chain this node is a member of.
    pub fn positions(&self) -> impl Iterator<Item = (ChainId, u64, u64)> + '_ {
        self.replicas.iter().map(|(&id, r)| (id, r.lu, r.la))
    }

    /// Local invariants of seed 003 Ch. 3: LA ≤ LU, the tail has no unacknowledged history, and the
    /// unacknowledged history is exactly LA+1 ..= LU.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.replicas.iter().try_for_each(|(id, r)| r.check().map_err(|e| format!("{} chain {id}: {e}", self.me)))
    }

    fn timeout_ticks(&self) -> u64 {
        (self.cfg.request_timeout.as_nanos() / self.cfg.tick.as_nanos().max(1)).max(1) as u64
    }

    fn handle(&mut self, from: NodeId, msg: ChainMsg, out: &mut Fx) {
        match msg {
            ChainMsg::Get { origin, key } => self.on_get(origin, key, out),
            ChainMsg::Write { origin, write } => self.on_write(origin, write, out),
            ChainMsg::Update(u) => self.on_update(from, u, out),
            ChainMsg::Ack { chain, seq } => self.on_ack(from, chain, seq, out),
            ChainMsg::Sync { chain, lu, la } => self.on_sync(from, chain, lu, la, out),
            ChainMsg::Probe { chain } => self.on_probe(from, chain, out),
            ChainMsg::Reply { origin, reply } => {
                if let Some(id) = self.fe.complete(&origin) {
                    out.reply(id, reply);
                }
            }
        }
    }

    /// Delivers an answer to the front-end waiting for it, local or remote.
    fn answer(&mut self, origin: Origin, reply: Reply, after_sync: bool, out: &mut Fx) {
        if origin.node != self.me {
            let msg = ChainMsg::Reply { origin, reply };
            if after_sync {
                out.send_after_sync(origin.node, msg)
            } else {
                out.send(origin.node, msg)
            }
        } else if let Some(id) = self.fe.complete(&origin) {
            if after_sync {
                out.reply_after_sync(id, reply)
            } else {
                out.reply(id, reply)
            }
        }
    }

    fn misrouted(&mut self, origin: Origin, role: &str, out: &mut Fx) {
        let msg = format!("{} is not the {role} for this key; cluster configs differ", self.me);
        self.answer(origin, Reply::Error(ErrorKind::Invalid, msg), false, out);
    }

    fn on_get(&mut self, origin: Origin, key: Bytes, out: &mut Fx) {
        if self.ring.chain_for_key(&key).tail() != self.me {
            return self.misrouted(origin, "tail", out);
        }
        let reply = match self.store.get(&key) {
            Ok(entry) => Reply::Value(entry.and_then(|e| e.value)),
            Err(e) => Reply::Error(ErrorKind::Storage, e.to_string()),
        };
        // A read may see writes this batch logged but has not made durable; it must not leave first.
        self.answer(origin, reply, true, out);
    }

    fn on_write(&mut self, origin: Origin, write: Write, out: &mut Fx) {
        let owner = self.ring.chain_for_key(&write.key);
        let chain = owner.id;
        if owner.head() != self.me {
            return self.misrouted(origin, "head", out);
        }
        let unacked = self.replicas[&chain].unacked.len();
        if unacked >= self.cfg.unacked_max {
            let msg = format!("chain {chain} has {unacked} unacknowledged writes; retry later");
            return self.answer(origin, Reply::Error(ErrorKind::Busy, msg), false, out);
        }
        match self.order(chain, origin, write) {
            Ok(update) => self.log_and_pass(update, out),
            Err(e) => self.answer(origin, Reply::Error(ErrorKind::Storage, e.to_string()), false, out),
        }
    }

    /// The head's decision: the next sequence number and the write's outcome against current state.
    fn order(&self, chain: ChainId, origin: Origin, write: Write) -> Result<Update, StoreError> {
        let existed = self.store.get(&write.key)?.is_some_and(|e| e.value.is_some());
        let applied = write.cond.holds(existed);
        let change = match (applied, write.value) {
            (false, _) => Change::Skip,
            (true, Some(v)) => Change::Put(v),
            (true, None) => Change::Delete,
        };
        let seq = self.replicas[&chain].lu + 1;
        Ok(Update { chain, seq, key: write.key, change, outcome: Outcome { applied, existed }, origin: Some(origin) })
    }

    fn on_update(&mut self, from: NodeId, u: Update, out: &mut Fx) {
        let tick = self.tick;
        let Some(r) = self.replicas.get_mut(&u.chain) else { return };
        if r.pred != Some(from) || u.seq <= r.lu {
            return;
        }
        if u.seq > r.lu + 1 {
            // An earlier update was lost with a broken connection: ask once per tick for a resend.
            if r.gap_sync_tick != Some(tick) {
                r.gap_sync_tick = Some(tick);
                out.send_after_sync(from, ChainMsg::Sync { chain: u.chain, lu: r.lu, la: r.la });
            }
            return;
        }
        self.log_and_pass(u, out);
    }

    /// Logs an update in sequence and passes it on: down the chain, or, at the tail, back up as an ack
    /// and to the client as the answer, always only once it is durable.
    fn log_and_pass(&mut self, u: Update, out: &mut Fx) {
        if let Err(e) = self.store.append(&record_of(&u)) {
            // Not logged, not acknowledged: the predecessor still holds it and will resend.
            tracing::error!(chain = %u.chain, seq = u.seq, "cannot log update: {e}");
            if let (Some(origin), None) = (u.origin, self.replicas[&u.chain].pred) {
                self.answer(origin, Reply::Error(ErrorKind::Storage, e.to_string()), false, out);
            }
            return;
        }
        out.mark_dirty();
        let r = self.replicas.get_mut(&u.chain).expect("member of the chain");
        r.record(u.clone());
        let (pred, succ) = (r.pred, r.succ);
        let written = Reply::Written { applied: u.outcome.applied, existed: u.outcome.existed };
        #[cfg(feature = "planted-bugs")]
        if self.cfg.planted_bug == Some(PlantedBug::HeadAcksEarly) && pred.is_none() {
            if let Some(origin) = u.origin {
                self.answer(origin, written.clone(), true, out);
            }
        }
        match (succ, pred) {
            (Some(succ), _) => out.send_after_sync(succ, ChainMsg::Update(u)),
            (None, pred) => {
                #[cfg(feature = "planted-bugs")]
                let durable_first = self.cfg.planted_bug != Some(PlantedBug::TailAcksEarly);
                #[cfg(not(feature = "planted-bugs"))]
                let durable_first = true;
                if let Some(pred) = pred {
                    let ack = ChainMsg::Ack { chain: u.chain, seq: u.seq };
                    if durable_first {
                        out.send_after_sync(pred, ack)
                    } else {
                        out.send(pred, ack)
                    }
                }
                if let Some(origin) = u.origin {
                    self.answer(origin, written, durable_first, out);
                }
            }
        }
    }

    fn on_ack(&mut self, from: NodeId, chain: ChainId, seq: u64, out: &mut Fx) {
        let Some(r) = self.replicas.get_mut(&chain) else { return };
        if r.succ != Some(from) || !r.ack(seq) {
            return;
        }
        if let Some(pred) = r.pred {
            out.send(pred, ChainMsg::Ack { chain, seq: r.la });
        }
    }

    fn on_sync(&mut self, from: NodeId, chain: ChainId, lu: u64, la: u64, out: &mut Fx) {
        if self.replicas.get(&chain).is_none_or(|r| r.succ != Some(from)) {
            return;
        }
        #[cfg(feature = "planted-bugs")]
        if self.cfg.planted_bug == Some(PlantedBug::IgnoresSync) {
            return;
        }
        self.on_ack(from, chain, la, out);
        let r = &self.replicas[&chain];
        for u in r.missing_after(lu, self.cfg.resend_max) {
            out.send_after_sync(from, ChainMsg::Update(u.clone()));
        }
    }

    fn on_probe(&mut self, from: NodeId, chain: ChainId, out: &mut Fx) {
        let Some(r) = self.replicas.get(&chain) else { return };
        if r.pred == Some(from) {
            out.send_after_sync(from, ChainMsg::Sync { chain, lu: r.lu, la: r.la });
        }
    }

    fn on_tick(&mut self, out: &mut Fx) {
        self.tick += 1;
        out.set_timer(ChainTimer::Tick, self.cfg.tick);
        let timeout = self.timeout_ticks();
        for id in self.fe.expire(self.tick, timeout) {
            let msg =
                format!("no answer within {:?}; the write may or may not have been applied", self.cfg.request_timeout);
            out.reply(id, Reply::Error(ErrorKind::Timeout, msg));
        }
        for (&chain, r) in self.replicas.iter_mut() {
            if let Some(succ) = r.succ.filter(|_| !r.unacked.is_empty() && r.la == r.la_at_tick) {
                out.send(succ, ChainMsg::Probe { chain });
            }
            r.la_at_tick = r.la;
            // Every member logs the watermark, the tail included: it is what lets compaction drop
            // superseded records (docs/protocols/chain.md, "The log and compaction").
            if r.la > r.la_logged {
                // Lazily durable: it rides on the next sync. Losing it only means resending more.
                let mark = Record { chain: chain.0, seq: r.la, key: Bytes::new(), body: Body::AckMark };
                match self.store.append(&mark) {
                    Ok(()) => r.la_logged = r.la,
                    Err(e) => tracing::warn!(%chain, "cannot log ack watermark: {e}"),
                }
            }
        }
    }
}

fn record_of(u: &Update) -> Record {
    let body = match &u.change {
        Change::Put(v) => Body::Value(v.clone()),
        Change::Delete => Body::Tombstone,
        Change::Skip => Body::Skip,
    };
    Record { chain: u.chain.0, seq: u.seq, key: u.key.clone(), body }
}

/// Rebuilds LU, LA and the unacknowledged history of each chain from the log.
fn recover(store: &dyn Datastore, replicas: &mut BTreeMap<ChainId, Replica>) -> Result<(), StoreError> {
    let mut gap = None;
    store.replay(&mut |rec: Record| {
        let Some(r) = replicas.get_mut(&ChainId(rec.chain)) else { return };
        let change = match rec.body {
            Body::AckMark => {
                r.restore_watermark(rec.seq);
                return;
            }
            Body::Value(v) => Change::Put(v),
            Body::Tombstone => Change::Delete,
            Body::Skip => Change::Skip,
        };
        if rec.seq == r.lu + 1 {
            let chain = ChainId(rec.chain);
            r.record(Update { chain, seq: rec.seq, key: rec.key, change, outcome: Outcome::default(), origin: None });
        } else if rec.seq > r.lu + 1 && gap.is_none() {
            gap = Some(format!("chain {} jumps from seq {} to {}", rec.chain, r.lu, rec.seq));
        }
    })?;
    match gap {
        Some(reason) => Err(StoreError::Corrupt { offset: 0, reason }),
        None => Ok(()),
    }
}

impl Process for ChainNode {
    type Msg = ChainMsg;
    type Timer = ChainTimer;

    fn start(&mut self, _now: Time, out: &mut Fx) {
        out.set_timer(ChainTimer::Tick, self.cfg.tick);
        for (&chain, r) in &self.replicas {
            if let Some(pred) = r.pred {
                out.send(pred, ChainMsg::Sync { chain, lu: r.lu, la: r.la });
            }
        }
    }

    fn on_message(&mut self, _now: Time, from: NodeId, msg: ChainMsg, out: &mut Fx) {
        self.handle(from, msg, out);
    }

    fn on_timer(&mut self, _now: Time, timer: ChainTimer, out: &mut Fx) {
        match timer {
            ChainTimer::Tick => self.on_tick(out),
        }
    }

    fn on_request(&mut self, _now: Time, id: RequestId, req: Request, out: &mut Fx) {
        if let Err(msg) = self.cfg.limits.check(&req) {
            return out.reply(id, Reply::Error(ErrorKind::Invalid, msg));
        }
        let chain = self.ring.chain_for_key(req.key());
        let origin = self.fe.track(id, self.tick);
        let (target, msg) = match req {
            Request::Get { key } => (chain.tail(), ChainMsg::Get { origin, key }),
            Request::Write(write) => (chain.head(), ChainMsg::Write { origin, write }),
        };
        if target == self.me {
            self.handle(self.me, msg, out);
        } else {
            out.send(target, msg);
        }
    }

    fn sync(&mut self) -> std::io::Result<()> {
        self.store.sync().map_err(std::io::Error::other)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.store.flush().map_err(std::io::Error::other)
    }
}

#[cfg(test)]
mod tests;
