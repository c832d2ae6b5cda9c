//! Affiliated nodes (seed 001 §4.1.4): lightweight nodes attached to a standard node, their host, that hold no
//! partition, only the host's hot keys, and answer reads of them under secondary leases. The host measures which
//! keys are hot (the most read, [`HotConfig`]), gives them to its affiliated nodes when they ask (a [`Pull`] every
//! heartbeat), and sends each read of a key it gave to one of them in turn (round robin), so a key read more
//! than one node can serve is served by several.
//!
//! A node that sent a read to the host and got its answer from an affiliated node learns that route (the seed's
//! routing links): for a secondary lease's length it sends reads of the key to the affiliated nodes it learned,
//! in turn, and so past the host, whose load they were added to take. Affiliated nodes count the reads they answer
//! and report them with each pull, so a key read past its host stays hot there.
//!
//! A secondary lease is a sub-period of the host's own right to answer the key (its lease and the master's
//! confirmation as a replica, its own lease as master), and at most [`SECONDARY`]. Like a replica's lease it
//! counts from when the affiliated node asked, shrunk by ε (`timing.rs`), while the host's record counts from when
//! it gave it, in full: the record outlasts the lease. A write revokes it: a replica host acknowledges a write's
//! push only once every affiliated node it gave the key to has dropped it (or its record ran out), and a master
//! host commits a write only then; until the write is done the host gives the key to nobody. So an affiliated
//! node answers only a version its host may answer, while its host may.
//!
//! The host sends every revocation numbered ([`Revocation`]), and a [`Hot`] carries the number reached when it
//! left: an affiliated node takes no `Hot` that left before a revocation it has seen, so a late one cannot hand
//! back a revoked value.

use super::msg::{Forwarded, Given, Held, Hot, Pull, Revocation, Secondary};
use super::timing::shrunk_from;
use super::{Fx, Key, LeaseMsg, LeaseNode, OpId, Versioned};
use crate::host::Host;
use bytes::Bytes;
use meridian_core::{ChainId, NodeId, Time};
use std::collections::BTreeMap;
use std::time::Duration;

/// How a host picks the keys it gives its affiliated nodes: the `top_k` most read in a window, among those read
/// at least `min_reads` times in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HotConfig {
    pub window_ticks: u64,
    pub top_k: usize,
    pub min_reads: u32,
}

impl Default for HotConfig {
    /// 1 s windows at the default 50 ms tick; up to 64 keys read at least 16 times a second.
    fn default() -> HotConfig {
        HotConfig { window_ticks: 20, top_k: 64, min_reads: 16 }
    }
}

/// The longest secondary lease: a write of a key given to an affiliated node that stopped answering waits at most
/// this long.
pub const SECONDARY: Duration = Duration::from_secs(1);

/// Keys counted in a window at once.
const TRACKED_MAX: usize = 4096;

/// A host's side: its affiliated nodes, its hot keys, and what it gave whom.
#[derive(Debug, Default)]
pub(super) struct Hosting {
    cfg: HotConfig,
    /// The live affiliated nodes of this node, by the map.
    pub affiliates: Vec<NodeId>,
    /// Whether the map names any node, live or not, an affiliated node of this one: only then may an earlier
    /// run have given leases.
    pub hosted: bool,
    /// The tick the current window began at.
    began: u64,
    /// Reads counted in the current window.
    counts: BTreeMap<Key, u32>,
    /// The hot keys of the last window, most read first.
    hot: Vec<Key>,
    /// Secondary leases given: by key and affiliated node, until when on this node's clock, and the count of
    /// revocations when given.
    given: BTreeMap<Key, BTreeMap<NodeId, (Time, u64)>>,
    revoked: Revocation,
    /// The round robin's position.
    turn: usize,
    /// Answers to pushes (key, master, write, and when the push arrived if stored, None if released) held until
    /// the key's secondary leases are revoked.
    held: Vec<(Key, NodeId, OpId, Option<Time>)>,
    /// A host that ran before may have given leases its records, lost with the process, no longer show: it
    /// treats every key as given until [`SECONDARY`] after its first step.
    quiet: Quiet,
}

#[derive(Debug, Default)]
enum Quiet {
    #[default]
    None,
    /// Since the first step of a run that follows another.
    Pending,
    Until(Time),
}

impl Hosting {
    pub fn new(cfg: HotConfig, incarnation: u64, ran_before: bool) -> Hosting {
        let quiet = if ran_before { Quiet::Pending } else { Quiet::None };
        Hosting { cfg, revoked: Revocation { incarnation, seq: 0 }, quiet, ..Hosting::default() }
    }

    /// Notes the first moment of this run.
    fn start(&mut self, now: Time) {
        if matches!(self.quiet, Quiet::Pending) {
            self.quiet = Quiet::Until(now.plus(SECONDARY));
        }
    }

    /// Whether leases an earlier run gave may still be held.
    fn quiet(&self, now: Time) -> bool {
        self.hosted
            && match self.quiet {
                Quiet::None => false,
                Quiet::Pending => true,
                Quiet::Until(t) => now < t,
            }
    }

    /// `reads` of `key`, which this node holds, answered here or by an affiliated node: counted while it has
    /// affiliated nodes.
    pub fn count(&mut self, key: &Key, reads: u32) {
        if self.affiliates.is_empty() || (self.counts.len() >= TRACKED_MAX && !self.counts.contains_key(key)) {
            return;
        }
        let n = self.counts.entry(key.clone()).or_default();
        *n = n.saturating_add(reads);
    }

    /// Ends the window once it has lasted: its most read keys become the hot ones.
    pub fn judge(&mut self, tick: u64) {
        if tick < self.began + self.cfg.window_ticks {
            return;
        }
        self.began = tick;
        let mut read: Vec<(u32, Key)> = std::mem::take(&mut self.counts)
            .into_iter()
            .filter(|&(_, n)| n >= self.cfg.min_reads)
            .map(|(k, n)| (n, k))
            .collect();
        read.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        self.hot = read.into_iter().take(self.cfg.top_k).map(|(_, k)| k).collect();
    }

    /// The affiliated nodes that may be answering `key` now.
    fn holders<'a>(&'a self, key: &Key, now: Time) -> impl Iterator<Item = NodeId> + 'a {
        let given = self.given.get(key).into_iter().flatten();
        given.filter(move |(_, &(until, _))| until > now).map(|(&a, _)| a)
    }

    /// Whether no affiliated node may be answering `key` now.
    pub fn clear(&self, key: &Key, now: Time) -> bool {
        self.holders(key, now).next().is_none() && !self.quiet(now)
    }

    /// The next affiliated node, in turn, that holds `key` now.
    fn pick(&mut self, key: &Key, now: Time) -> Option<NodeId> {
        let holders: Vec<NodeId> = self.holders(key, now).collect();
        self.turn = self.turn.wrapping_add(1);
        holders.get(self.turn % holders.len().max(1)).copied()
    }

    /// Revokes `key` from the affiliated nodes that may be answering it: the revocation and whom it goes to.
    fn revoke(&mut self, key: &Key, now: Time) -> Option<(Revocation, Vec<NodeId>)> {
        let to: Vec<NodeId> = self.holders(key, now).collect();
        if to.is_empty() {
            return None;
        }
        self.revoked.seq += 1;
        Some((self.revoked, to))
    }

    /// `from` dropped `key` as revocation `at` asked: the leases given before it are void.
    fn revoked_by(&mut self, key: &Key, from: NodeId, at: Revocation) {
        if at.incarnation != self.revoked.incarnation {
            return;
        }
        if let Some(by) = self.given.get_mut(key) {
            by.retain(|&a, &mut (_, seq)| a != from || seq >= at.seq);
            if by.is_empty() {
                self.given.remove(key);
            }
        }
    }

    /// Forgets the leases that ran out.
    fn prune(&mut self, now: Time) {
        self.given.retain(|_, by| {
            by.retain(|_, &mut (until, _)| until > now);
            !by.is_empty()
        });
    }
}

/// An affiliated node's side: its host and the secondary leases it holds.
#[derive(Debug, Default)]
pub(super) struct Secondaries {
    /// The host, while the map names this node an affiliated one.
    pub host: Option<NodeId>,
    /// The newest revocation seen from the host.
    revoked: Revocation,
    held: BTreeMap<Key, (Versioned, Time)>,
    /// Reads answered since the last pull, by key.
    reads: BTreeMap<Key, u32>,
}

impl Secondaries {
    /// The value of `key` this node may answer now, if it holds a lease on it.
    fn value(&self, key: &Key, now: Time) -> Option<&Versioned> {
        self.held.get(key).filter(|(_, until)| *until > now).map(|(v, _)| v)
    }

    /// The versions held and the reads answered, for the next pull; the count starts again.
    fn have(&mut self) -> Vec<Held> {
        let mut reads = std::mem::take(&mut self.reads);
        let held = self.held.iter().map(|((chain, key), (v, _))| {
            let reads = reads.remove(&(*chain, key.clone())).unwrap_or(0);
            Held { chain: *chain, key: key.clone(), version: v.version, reads }
        });
        held.collect()
    }

    /// The host's answer to a pull: its keys replace those held, unless it left before a revocation seen here.
    fn take(&mut self, hot: Hot) {
        if hot.revoked < self.revoked {
            return;
        }
        let mut next = BTreeMap::new();
        for Secondary { chain, key, value, lease_ns } in hot.keys {
            let key = (chain, key);
            let versioned = match value {
                Given::New(v) => v,
                Given::Same(version) => match self.held.get(&key) {
                    Some((v, _)) if v.version == version => v.clone(),
                    _ => continue,
                },
            };
            next.insert(key, (versioned, shrunk_from(hot.sent, lease_ns)));
        }
        self.held = next;
    }

    fn revoke(&mut self, key: &Key, at: Revocation) {
        self.revoked = self.revoked.max(at);
        self.held.remove(key);
    }
}

/// Routes a node learned to affiliated nodes, by key: whom, and until when.
#[derive(Debug, Default)]
pub(super) struct Routes {
    to: BTreeMap<Key, BTreeMap<NodeId, Time>>,
    turn: usize,
}

impl Routes {
    /// `to` answered a read of `key` at `now`: reads of it go there for a secondary lease's length.
    fn learn(&mut self, key: Key, to: NodeId, now: Time) {
        if self.to.len() >= TRACKED_MAX && !self.to.contains_key(&key) {
            self.to.retain(|_, by| by.values().any(|&until| until > now));
            if self.to.len() >= TRACKED_MAX {
                return;
            }
        }
        self.to.entry(key).or_default().insert(to, now.plus(SECONDARY));
    }

    fn next(&mut self, key: &Key, now: Time) -> Option<NodeId> {
        let by = self.to.get_mut(key)?;
        by.retain(|_, until| *until > now);
        let live: Vec<NodeId> = by.keys().copied().collect();
        if live.is_empty() {
            self.to.remove(key);
            return None;
        }
        self.turn = self.turn.wrapping_add(1);
        Some(live[self.turn % live.len()])
    }
}

impl LeaseNode {
    /// Every heartbeat, at an affiliated node: asks the host for its hot keys.
    pub(super) fn pull(&mut self, now: Time, out: &mut Fx) {
        if let Some(host) = self.secondaries.host {
            let (sent, incarnation, have) = (now, self.incarnation, self.secondaries.have());
            out.send(host, LeaseMsg::Pull(Pull { sent, incarnation, have }));
        }
    }

    /// An affiliated node's pull: a secondary lease on every hot key this node may answer now.
    pub(super) fn on_pull(&mut self, host: &mut Host, now: Time, from: NodeId, p: Pull, out: &mut Fx) {
        if !self.hosting.affiliates.contains(&from) {
            return;
        }
        let mut have = BTreeMap::new();
        for Held { chain, key, version, reads } in p.have {
            let key = (chain, key);
            self.hosting.count(&key, reads);
            have.insert(key, version);
        }
        let mut keys = Vec::new();
        for key in self.hosting.hot.clone() {
            let Some(until) = self.answers_until(&key, now) else { continue };
            let Ok(versioned) = self.cell(host, key.0, &key.1) else { continue };
            // Given on, the key is read under this node's lease.
            self.member.read_under(&key);
            let lease = until.since(now).min(SECONDARY);
            let value = match have.get(&key) == Some(&versioned.version) {
                true => Given::Same(versioned.version),
                false => Given::New(versioned),
            };
            let (chain, k) = key.clone();
            keys.push(Secondary { chain, key: k, value, lease_ns: lease.as_nanos() as u64 });
            let seq = self.hosting.revoked.seq;
            self.hosting.given.entry(key).or_default().insert(from, (now.plus(lease), seq));
        }
        self.stats.secondaries += keys.len() as u64;
        let revoked = self.hosting.revoked;
        out.send(from, LeaseMsg::Hot(Hot { sent: p.sent, incarnation: p.incarnation, revoked, keys }));
    }

    /// Until when this node may answer `key` itself, and so give it: as its master with no write of it under way,
    /// or under its lease with no pushed version pending.
    fn answers_until(&self, key: &Key, now: Time) -> Option<Time> {
        let g = self.groups.get(&key.0)?;
        if g.master_of(&key.1) == self.me {
            if self.writing(key) {
                return None;
            }
            return self.mastery_of(g, &key.1)?.serves_key_until(g, &key.1, now);
        }
        g.holders.contains(&self.me).then(|| self.member.serves_until(g, &key.1, now))?
    }

    pub(super) fn on_hot(&mut self, from: NodeId, hot: Hot) {
        if self.secondaries.host == Some(from) && hot.incarnation == self.incarnation {
            self.secondaries.take(hot);
        }
    }

    /// A read at an affiliated node: answered if it holds a secondary lease on the key.
    pub(super) fn read_secondary(&mut self, key: &Key, now: Time) -> Option<Versioned> {
        let v = self.secondaries.value(key, now)?.clone();
        self.stats.affiliate_reads += 1;
        *self.secondaries.reads.entry(key.clone()).or_default() += 1;
        Some(v)
    }

    /// A read this host may answer: counted, and if another node sent it here, sent on to an affiliated node
    /// holding the key, in turn, whose answer teaches that node the route. A read of this node's own client is
    /// answered here (sending it on would cost this node the answer's relay as well), and so is one that came
    /// back from an affiliated node. Returns the read if it did not go.
    pub(super) fn spread(
        &mut self,
        host: &mut Host,
        now: Time,
        fwd: Forwarded,
        key: &Key,
        out: &mut Fx,
    ) -> Option<Forwarded> {
        if fwd.hops > 1 || self.hosting.affiliates.is_empty() {
            return Some(fwd);
        }
        self.hosting.count(key, 1);
        if fwd.hops == 0 {
            return Some(fwd);
        }
        let Some(to) = self.hosting.pick(key, now) else { return Some(fwd) };
        self.stats.spread += 1;
        self.forward(host, to, fwd, out);
        None
    }

    /// An answer from `from` to a read this node sent on: if an affiliated node answered it, the route to it is
    /// learned for a secondary lease's length.
    pub(super) fn learn_route(&mut self, host: &mut Host, now: Time, from: NodeId, origin: &super::Origin) {
        let Some(map) = self.map.as_deref().filter(|m| m.hosts.contains_key(&from)) else { return };
        let Some(req) = host.requests.kept(origin) else { return };
        let (Some(keyspace), Some(token), Some(key)) = (req.keyspace(), req.token(), req.key()) else { return };
        let Some(chain) = map.chain_of(keyspace, token).map(|c| c.id) else { return };
        self.routes.learn((chain, key.clone()), from, now);
    }

    /// The affiliated node to send a read of `key` to, in turn, if this node learned routes to any.
    pub(super) fn route(&mut self, key: &Key, now: Time) -> Option<NodeId> {
        self.routes.next(key, now)
    }

    pub(super) fn on_revoke(&mut self, from: NodeId, chain: ChainId, key: Bytes, at: Revocation, out: &mut Fx) {
        if self.secondaries.host == Some(from) {
            let k = (chain, key);
            self.secondaries.revoke(&k, at);
            out.send(from, LeaseMsg::Revoked { chain: k.0, key: k.1, at });
        }
    }

    /// An affiliated node dropped a key: held acknowledgements of it may go, and writes of it commit.
    pub(super) fn on_revoked(
        &mut self,
        host: &mut Host,
        now: Time,
        from: NodeId,
        key: Key,
        at: Revocation,
        out: &mut Fx,
    ) {
        self.hosting.revoked_by(&key, from, at);
        self.release_acks(now, out);
        self.drive_writes(host, now, out);
    }

    /// Revokes `key` from the affiliated nodes that may be answering it; returns whether any may.
    pub(super) fn revoke(&mut self, key: &Key, now: Time, out: &mut Fx) -> bool {
        let Some((at, to)) = self.hosting.revoke(key, now) else { return false };
        self.stats.revocations += to.len() as u64;
        for a in to {
            out.send(a, LeaseMsg::Revoke { chain: key.0, key: key.1.clone(), at });
        }
        true
    }

    /// Answers a push of `key` to its master (stored durably, or released: this node dropped its lease) once no
    /// affiliated node may answer the key, revoking it first: the master counts on the answer that nothing here
    /// answers the old value any more.
    pub(super) fn ack_push(
        &mut self,
        now: Time,
        key: Key,
        master: NodeId,
        op: OpId,
        stored: Option<Time>,
        out: &mut Fx,
    ) {
        let revoking = self.revoke(&key, now, out) || !self.hosting.clear(&key, now);
        if !revoking || self.planted(super::LeasePlantedBug::AcksBeforeRevoking) {
            return send_ack(master, op, stored, out);
        }
        let answer = (key, master, op, stored);
        if !self.hosting.held.contains(&answer) {
            self.hosting.held.push(answer);
        }
    }

    /// Sends the held answers whose keys no affiliated node may answer any more.
    fn release_acks(&mut self, now: Time, out: &mut Fx) {
        let hosting = &mut self.hosting;
        let (go, stay) = std::mem::take(&mut hosting.held).into_iter().partition(|a| hosting.clear(&a.0, now));
        hosting.held = stay;
        for (_, master, op, stored) in go {
            send_ack(master, op, stored, out);
        }
    }

    /// Every tick: judges the hot keys, forgets leases that ran out and releases the acknowledgements they held;
    /// every heartbeat, pulls (as an affiliated node) and revokes again what is still being revoked.
    pub(super) fn tend_affiliates(&mut self, tick: u64, now: Time, heartbeat: bool, out: &mut Fx) {
        self.hosting.start(now);
        self.hosting.judge(tick);
        self.hosting.prune(now);
        self.release_acks(now, out);
        if !heartbeat {
            return;
        }
        self.pull(now, out);
        if self.hosting.given.is_empty() {
            // Nothing given, nothing to revoke: spares a copy of every write's key per heartbeat.
            return;
        }
        let held = self.hosting.held.iter().map(|(k, ..)| k.clone());
        let writing: Vec<Key> = held.chain(self.ops.values().map(|o| o.key_of())).collect();
        for key in writing {
            self.revoke(&key, now, out);
        }
    }
}

/// A replica's answer to a push: stored (the push having arrived at `since`), after the sync that makes it
/// durable, or released.
fn send_ack(master: NodeId, op: OpId, stored: Option<Time>, out: &mut Fx) {
    match stored {
        Some(since) => out.send_after_sync(master, LeaseMsg::Stored { op, since }),
        None => out.send(master, LeaseMsg::Released { op }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> Key {
        (ChainId(1), Bytes::copy_from_slice(k.as_bytes()))
    }

    fn at(ms: u64) -> Time {
        Time::from_nanos(ms * 1_000_000)
    }

    fn hot(revoked: Revocation, k: &str, value: Given) -> Hot {
        let (chain, key) = key(k);
        let keys = vec![Secondary { chain, key, value, lease_ns: 500_000_000 }];
        Hot { sent: at(0), incarnation: 1, revoked, keys }
    }

    #[test]
    fn hot_keys_are_the_most_read_of_a_window_read_often_enough() {
        let cfg = HotConfig { window_ticks: 10, top_k: 2, min_reads: 3 };
        let mut h = Hosting::new(cfg, 1, false);
        h.count(&key("a"), 1);
        assert!(h.counts.is_empty(), "no affiliated node, nothing counted");
        h.affiliates = vec![NodeId(9)];
        for (k, n) in [("a", 5), ("b", 2), ("c", 9), ("d", 4)] {
            h.count(&key(k), n);
        }
        h.judge(5);
        assert!(h.hot.is_empty(), "the window has not ended");
        h.judge(10);
        assert_eq!(h.hot, vec![key("c"), key("a")]);
        h.judge(20);
        assert!(h.hot.is_empty(), "a window without reads has no hot keys");
    }

    /// A revocation voids only leases given before it, and a key given again after it counts as held.
    #[test]
    fn a_revocation_clears_the_leases_given_before_it() {
        let mut h = Hosting::new(HotConfig::default(), 1, false);
        let (k, a) = (key("k"), NodeId(9));
        h.given.entry(k.clone()).or_default().insert(a, (at(1_000), h.revoked.seq));
        assert!(!h.clear(&k, at(10)) && h.clear(&k, at(1_000)), "held until the record runs out");
        let (first, to) = h.revoke(&k, at(10)).unwrap();
        assert_eq!(to, vec![a]);
        h.given.entry(k.clone()).or_default().insert(a, (at(1_000), h.revoked.seq));
        h.revoked_by(&k, a, first);
        assert!(!h.clear(&k, at(10)), "given again after the revocation");
        let (second, _) = h.revoke(&k, at(10)).unwrap();
        h.revoked_by(&k, a, Revocation { incarnation: 2, ..second });
        assert!(!h.clear(&k, at(10)), "an answer to another run's revocation");
        h.revoked_by(&k, a, second);
        assert!(h.clear(&k, at(10)));
    }

    /// A host that ran before, and that the map names a host, treats every key as given for a secondary lease's
    /// length after its first step: its records of what it gave died with its process.
    #[test]
    fn a_restarted_host_waits_out_the_leases_it_may_have_given() {
        let mut h = Hosting::new(HotConfig::default(), 2, true);
        assert!(h.clear(&key("k"), at(0)), "no node was ever affiliated to it");
        h.hosted = true;
        assert!(!h.clear(&key("k"), at(0)));
        h.start(at(100));
        h.start(at(500));
        assert!(!h.clear(&key("k"), at(1_099)) && h.clear(&key("k"), at(1_100)));
    }

    /// An affiliated node takes no answer that left its host before a revocation it has seen, and keeps a
    /// value the host named as unchanged only if it still holds that version.
    #[test]
    fn an_answer_older_than_a_revocation_is_not_taken() {
        let mut s = Secondaries::default();
        let v1 = Versioned { version: 1, value: Some(Bytes::from_static(b"v1")) };
        let before = Revocation { incarnation: 1, seq: 0 };
        s.take(hot(before, "k", Given::New(v1.clone())));
        assert_eq!(s.value(&key("k"), at(1)), Some(&v1));
        assert_eq!(s.value(&key("k"), at(500)), None, "the lease, shrunk, has run out");
        let revocation = Revocation { incarnation: 1, seq: 1 };
        s.revoke(&key("k"), revocation);
        s.take(hot(before, "k", Given::New(v1.clone())));
        assert_eq!(s.value(&key("k"), at(1)), None, "left before the revocation");
        s.take(hot(revocation, "k", Given::Same(1)));
        assert_eq!(s.value(&key("k"), at(1)), None, "unchanged from a version no longer held");
        s.take(hot(revocation, "k", Given::New(v1.clone())));
        s.take(hot(revocation, "k", Given::Same(1)));
        assert_eq!(s.value(&key("k"), at(1)), Some(&v1));
        let have = |s: &mut Secondaries| s.have().into_iter().map(|h| (h.version, h.reads)).collect::<Vec<_>>();
        *s.reads.entry(key("k")).or_default() += 2;
        assert_eq!(have(&mut s), vec![(1, 2)]);
        assert_eq!(have(&mut s), vec![(1, 0)], "counted afresh after each pull");
    }
}
