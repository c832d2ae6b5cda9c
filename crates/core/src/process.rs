//! The sans-IO contract between a protocol core and whatever runs it (DESIGN.md §2, principle 1).
//!
//! A core is a deterministic state machine. The tokio driver and the simulator feed it inputs (start,
//! messages, timers, client requests) and carry out the [`Effect`]s it emits. The core may write to its
//! datastore synchronously (the store sits behind a `Vfs`, which the simulator fakes), but nothing it
//! writes is durable until the runner calls [`Process::sync`]. An effect marked `after_sync` may only be
//! carried out once every write made before it is durable: that is how "forward only after persisting"
//! is stated in the types, as raft-rs does with its persisted messages. A runner may batch the inputs of
//! many steps behind one sync (group commit); it must keep the order of the `after_sync` effects and the
//! order of the immediate effects.
//!
//! How soon a sync is owed is the durability mode the writes were made under ([`Dirt`]): a keyspace may
//! choose its own, or leave it to the runner's default.

use crate::acl::Access;
use crate::ids::{NodeId, RequestId};
use crate::keyspace::DurabilityMode;
use crate::kv::{Reply, Request};
use crate::time::Time;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

/// A protocol core. Implementations must not read clocks, spawn tasks, do network I/O or use an
/// unseeded RNG, and must not iterate hash maps with random state where the order reaches an output.
pub trait Process {
    /// The peer message type; it crosses the wire through [`crate::wire`].
    type Msg: Clone + Debug + serde::Serialize + serde::de::DeserializeOwned + Send + 'static;
    /// Timer names; setting a timer that is already set re-arms it.
    type Timer: Clone + Debug + Ord + Send + 'static;

    /// First input after construction (which includes recovery from the datastore).
    fn start(&mut self, now: Time, out: &mut Effects<Self::Msg, Self::Timer>);
    fn on_message(&mut self, now: Time, from: NodeId, msg: Self::Msg, out: &mut Effects<Self::Msg, Self::Timer>);
    fn on_timer(&mut self, now: Time, timer: Self::Timer, out: &mut Effects<Self::Msg, Self::Timer>);
    fn on_request(&mut self, now: Time, id: RequestId, req: Request, out: &mut Effects<Self::Msg, Self::Timer>);
    /// The answer `on_request` would give the read `req` ([`Request::is_read`]) at once, if the core can give it
    /// without any other effect (a read of data it holds), so a runner spares the request's effects; otherwise
    /// None, and the runner steps the request by `on_request`. The runner asks only while no write is waiting to
    /// be made durable, since such an answer leaves at once where an `after_sync` reply would wait for them. It
    /// need not set the wall clock first: a read's answer that depends on it is not given at once. The read is
    /// only looked at, so one declined costs no copy of its bytes.
    fn read_at_once(&mut self, _now: Time, _req: &Request) -> Option<Reply> {
        None
    }
    /// As [`Process::read_at_once`], for any other request (a write to a store with nothing to make durable),
    /// after the runner has set the wall clock, on which a write's outcome may depend (deadlines). A write answered
    /// is the core's: it takes `req`, leaving None, exactly when it returns a reply.
    fn write_at_once(&mut self, _now: Time, _req: &mut Option<Request>) -> Option<Reply> {
        None
    }
    /// The wall clock as this node reads it (Unix milliseconds); the runner gives it before every input. It
    /// may step and may differ between nodes: a core uses it only where a wrong clock costs accuracy, never
    /// safety (keys' expiry deadlines). Cores that need no wall clock ignore it.
    fn set_wall_clock(&mut self, _unix_ms: u64) {}

    /// Makes every datastore write made so far durable. A failure is fatal to the node (fail-stop):
    /// after a failed fsync the state of the file is unknown, so the runner stops the process.
    fn sync(&mut self) -> std::io::Result<()>;
    /// Hands every datastore write made so far to the OS: not durable against power loss, durable against a
    /// process crash (the kernel's page cache survives that). The runner calls it before acknowledging in
    /// async mode; a failure is fatal, as for `sync`. Required, so no core can forget a user-space buffer.
    fn flush(&mut self) -> std::io::Result<()>;
    /// [`Process::sync`] in two halves, so that the core can go on taking inputs while the disk works: hands
    /// every write so far to the OS and returns the fsync that makes them durable, for the runner to run on
    /// another thread. Writes made after it returns are not covered; they wait for the next one. `None` means
    /// nothing needs an fsync. The runner calls [`Process::end_sync`] on the core once the job has succeeded,
    /// and treats a failed job as a failed `sync`. By default the sync runs in place and there is no job.
    fn begin_sync(&mut self) -> std::io::Result<Option<SyncJob>> {
        self.sync().map(|()| None)
    }
    /// The core's part after a job of [`Process::begin_sync`] has succeeded (a store's compaction, say).
    fn end_sync(&mut self) {}
    /// The runner has made every write durable and will give the core no further input: a clean stop. A core
    /// may record it, for its next start to trust what only a clean stop vouches for; the runner only logs a
    /// failure, so such a record must be one whose absence is safe.
    fn stopped(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    /// Whether the core can take client requests now: route each to where it is served, rather than turn them
    /// all away (a cluster node before it has a cluster map). The runner opens its client port only once it
    /// can, and reports it (`GET /ready`).
    fn serving(&self) -> bool {
        true
    }
    /// The ACL users and keyspace names that clients' commands are checked against, once the core knows them (a
    /// cluster map's). The runner asks after every batch and hands a new one (another `Arc`) to its client
    /// connections, so a core hands out a new one only when they change. None: every client may do anything.
    fn access(&self) -> Option<&Arc<Access>> {
        None
    }
}

/// An fsync taken off a core by [`Process::begin_sync`]: run anywhere, once, it makes durable every write the
/// core had made when it was taken.
pub type SyncJob = Box<dyn FnOnce() -> std::io::Result<()> + Send>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect<M, T> {
    Send {
        to: NodeId,
        msg: M,
        after_sync: bool,
    },
    Reply {
        id: RequestId,
        reply: Reply,
        after_sync: bool,
    },
    SetTimer {
        timer: T,
        after: Duration,
    },
    CancelTimer {
        timer: T,
    },
    /// Node `node`'s peer listener is at `addr` (host:port): the runner sends its messages there from now on.
    /// How a core that learns of nodes at run time (a cluster map) tells the network layer where they are.
    Address {
        node: NodeId,
        addr: String,
    },
}

impl<M, T> Effect<M, T> {
    pub fn after_sync(&self) -> bool {
        match self {
            Effect::Send { after_sync, .. } | Effect::Reply { after_sync, .. } => *after_sync,
            Effect::SetTimer { .. } | Effect::CancelTimer { .. } | Effect::Address { .. } => false,
        }
    }
}

/// What a step's datastore writes owe before its `after_sync` effects may run: the durability modes they were
/// made under. The runner resolves writes left to its default mode ([`Dirt::owed`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dirt {
    by_default: bool,
    strictest: Option<DurabilityMode>,
}

impl Dirt {
    pub fn is_dirty(&self) -> bool {
        self.by_default || self.strictest.is_some()
    }

    /// The strictest mode of the writes, with those left to the runner in `default`; None: nothing written.
    pub fn owed(&self, default: DurabilityMode) -> Option<DurabilityMode> {
        let by_default = self.by_default.then_some(default);
        by_default.max(self.strictest)
    }

    /// Both steps' writes.
    pub fn and(self, other: Dirt) -> Dirt {
        Dirt { by_default: self.by_default || other.by_default, strictest: self.strictest.max(other.strictest) }
    }
}

/// Where a core puts its effects; the runner drains it after each input.
#[derive(Debug)]
pub struct Effects<M, T> {
    items: Vec<Effect<M, T>>,
    dirt: Dirt,
}

impl<M, T> Default for Effects<M, T> {
    fn default() -> Self {
        Effects { items: Vec::new(), dirt: Dirt::default() }
    }
}

impl<M, T> Effects<M, T> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn send(&mut self, to: NodeId, msg: M) {
        self.items.push(Effect::Send { to, msg, after_sync: false });
    }

    pub fn send_after_sync(&mut self, to: NodeId, msg: M) {
        self.items.push(Effect::Send { to, msg, after_sync: true });
    }

    pub fn reply(&mut self, id: RequestId, reply: Reply) {
        self.items.push(Effect::Reply { id, reply, after_sync: false });
    }

    pub fn reply_after_sync(&mut self, id: RequestId, reply: Reply) {
        self.items.push(Effect::Reply { id, reply, after_sync: true });
    }

    pub fn set_timer(&mut self, timer: T, after: Duration) {
        self.items.push(Effect::SetTimer { timer, after });
    }

    pub fn cancel_timer(&mut self, timer: T) {
        self.items.push(Effect::CancelTimer { timer });
    }

    pub fn address(&mut self, node: NodeId, addr: String) {
        self.items.push(Effect::Address { node, addr });
    }

    /// Records that the core wrote to its datastore under the runner's default durability mode: the runner
    /// must sync (or, in async mode, flush) before `after_sync` effects.
    pub fn mark_dirty(&mut self) {
        self.dirt.by_default = true;
    }

    /// Records a write under `mode` (a keyspace's own durability mode), or under the runner's default.
    pub fn mark_dirty_as(&mut self, mode: Option<DurabilityMode>) {
        match mode {
            Some(mode) => self.add_dirt(Dirt { by_default: false, strictest: Some(mode) }),
            None => self.mark_dirty(),
        }
    }

    /// Records another collector's writes (a core that wraps another's effects).
    pub fn add_dirt(&mut self, dirt: Dirt) {
        self.dirt = self.dirt.and(dirt);
    }

    /// True when a sync is owed before the `after_sync` effects drained so far may run.
    pub fn is_dirty(&self) -> bool {
        self.dirt.is_dirty()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty() && !self.is_dirty()
    }

    /// Moves `inner`'s effects and writes into this collector, wrapping its messages and timers: how a core that
    /// runs another core (a node its protocols, a protocol a shared engine) takes what that core did.
    #[inline]
    pub fn absorb<M2, T2>(&mut self, inner: &mut Effects<M2, T2>, msg: impl Fn(M2) -> M, timer: impl Fn(T2) -> T) {
        let (items, dirt) = inner.drain();
        self.add_dirt(dirt);
        self.items.extend(items.map(|e| match e {
            Effect::Send { to, msg: m, after_sync } => Effect::Send { to, msg: msg(m), after_sync },
            Effect::Reply { id, reply, after_sync } => Effect::Reply { id, reply, after_sync },
            Effect::SetTimer { timer: t, after } => Effect::SetTimer { timer: timer(t), after },
            Effect::CancelTimer { timer: t } => Effect::CancelTimer { timer: timer(t) },
            Effect::Address { node, addr } => Effect::Address { node, addr },
        }));
    }

    /// Takes the effects out, leaving the collector empty and clean. It keeps its room, so a runner that keeps
    /// one collector allocates nothing per step.
    pub fn drain(&mut self) -> (std::vec::Drain<'_, Effect<M, T>>, Dirt) {
        let dirt = std::mem::take(&mut self.dirt);
        (self.items.drain(..), dirt)
    }
}

/// What [`Process::write_at_once`] left, as a runner that holds a core to its contract reads it: the answer, or
/// the request the core did not take. Panics on a core that answered and left the request, or took it unanswered.
pub fn write_taken(answer: Option<Reply>, req: Option<Request>) -> Result<Reply, Request> {
    match (answer, req) {
        (Some(reply), None) => Ok(reply),
        (None, Some(req)) => Err(req),
        (answer, req) => panic!("a process answered {answer:?} at once and left the request {req:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drain_resets_and_keeps_order() {
        let mut fx: Effects<u8, u8> = Effects::new();
        fx.send(NodeId(1), 1);
        fx.mark_dirty();
        fx.send_after_sync(NodeId(2), 2);
        fx.set_timer(7, Duration::from_millis(5));
        let (items, dirt) = fx.drain();
        let items: Vec<_> = items.collect();
        assert_eq!(dirt.owed(DurabilityMode::Async), Some(DurabilityMode::Async));
        assert_eq!(items.len(), 3);
        assert!(!items[0].after_sync() && items[1].after_sync() && !items[2].after_sync());
        assert!(fx.is_empty());
    }

    #[test]
    fn the_strictest_mode_of_a_steps_writes_is_owed() {
        let mut fx: Effects<u8, u8> = Effects::new();
        assert_eq!(fx.drain().1.owed(DurabilityMode::Sync), None);
        fx.mark_dirty_as(Some(DurabilityMode::Group));
        fx.mark_dirty_as(Some(DurabilityMode::Async));
        let dirt = fx.drain().1;
        assert_eq!(
            (dirt.owed(DurabilityMode::Async), dirt.owed(DurabilityMode::Sync)),
            (Some(DurabilityMode::Group), Some(DurabilityMode::Group))
        );
        fx.mark_dirty_as(Some(DurabilityMode::Async));
        fx.mark_dirty_as(None);
        assert_eq!(fx.drain().1.owed(DurabilityMode::Sync), Some(DurabilityMode::Sync));
    }
}
