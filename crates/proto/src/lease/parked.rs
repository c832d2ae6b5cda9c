//! Reads that wait for a commit instead of renewing. A replica whose lease on a key holds, confirmed by the
//! master, may still not answer from its store when that holds a pushed version no commit has named: the version
//! may never succeed. Before this, such a read renewed at the master, a round trip and two messages; on a key
//! written often every read did, since some write of it was nearly always under way.
//!
//! While the lease holds, every write of the key that succeeded waited for this replica to store it (`writes.rs`).
//! So the version this store holds when the read arrives, `after`, is at least the newest write that succeeded
//! before the read began, and any committed version from `after` on is a value the read may return: the read is
//! parked until the commit of such a version arrives, and answered with that version's value, if this replica
//! holds it (the one held when it parked, or the store's). The lease need not last until then: what the answer
//! needs was settled when the read arrived, except a write this replica sent itself, which may succeed without
//! it (`writes.rs`): a read that arrives while one is on its way waits for its push too, and then counts from
//! that write's version. A read parked longer than [`PARK_TICKS`] (its write failed, the commit was lost on a
//! broken link, the master changed) is served again from the start, and renews; so do the key's later reads,
//! until a commit of it arrives. A pushed version no commit will name would otherwise hold every read
//! of its key for the whole wait (on real processes, `tk`'s reads of keys it wrote last: p99 515 ms).

use super::msg::Forwarded;
use super::{Fx, Group, Key, LeaseNode, LeasePlantedBug, Versioned};
use crate::host::Host;
use crate::versioned::read_reply;
use bytes::Bytes;
use meridian_core::{ChainId, Read, Reply, Time};

/// Ticks a read waits for a commit before it renews: two heartbeats, longer than a write takes to commit unless
/// something failed.
const PARK_TICKS: u64 = 2 * super::timing::HEARTBEAT_TICKS;

/// A read waiting for a commit of its key.
#[derive(Debug)]
pub(super) struct Parked {
    fwd: Forwarded,
    read: Read,
    /// What this replica's store held of the key when the read arrived: the oldest version it may return.
    after: Versioned,
    /// When the writes of the key this replica sent, still on their way when the read arrived, were sent: until
    /// their pushes arrive, `after` may be older than a write that succeeded.
    awaits: Vec<Time>,
    /// The tick it was parked at.
    since: u64,
}

impl LeaseNode {
    /// Whether a read of `key` that cannot be answered from the store waits for a commit rather than renews.
    pub(super) fn waits_for_commit(&self, g: &Group, key: &Bytes, now: Time) -> bool {
        let k = (g.chain, key.clone());
        if self.unawaited.contains(&k) {
            return false;
        }
        self.member.parks(g, key, now) || (self.planted(LeasePlantedBug::ParksWithoutLease) && self.member.pending(&k))
    }

    /// Parks a read of `key`, which this replica holds a lease on and a pushed version of.
    pub(super) fn park(&mut self, host: &mut Host, fwd: Forwarded, read: Read, g: &Group, key: Bytes, out: &mut Fx) {
        match self.cell(host, g.chain, &key) {
            Ok(after) => {
                let (since, k) = (host.tick, (g.chain, key));
                let awaits = match self.planted(LeasePlantedBug::ParksPastItsOwnWrite) {
                    true => Vec::new(),
                    false => self.member.withheld(&k),
                };
                self.parked.entry(k).or_default().push(Parked { fwd, read, after, since, awaits });
            }
            Err(e) => {
                let reply = Reply::Error(meridian_core::ErrorKind::Storage, e.to_string());
                self.answer(host, &fwd.origin, reply, out);
            }
        }
    }

    /// `version` of `key` committed: answers the reads parked on the key that may return it.
    pub(super) fn unpark(&mut self, host: &mut Host, chain: ChainId, key: &Bytes, version: u64, out: &mut Fx) {
        let k = (chain, key.clone());
        self.unawaited.remove(&k);
        let Some(mut waiting) = self.parked.remove(&k) else { return };
        let held = self.cell(host, chain, key).ok();
        let stored = held.clone().filter(|v| v.version == version);
        let mut answered = false;
        for mut p in std::mem::take(&mut waiting) {
            if p.awaits.iter().any(|&at| self.member.withholds(&k, at)) {
                waiting.push(p);
                continue;
            }
            if !p.awaits.is_empty() {
                // Leases begun since ended the waits (`Member::lease`): the store holds what the read needs.
                p.awaits.clear();
                p.after = held.clone().unwrap_or(p.after);
            }
            let value = stored.as_ref().or(Some(&p.after).filter(|a| a.version == version));
            match value.filter(|_| p.after.version <= version) {
                Some(v) => {
                    let reply = read_reply(p.read, v, host.wall_ms);
                    self.answer(host, &p.fwd.origin, reply, out);
                    self.stats.parked += 1;
                    answered = true;
                }
                None => waiting.push(p),
            }
        }
        if answered {
            self.member.read_under(&k);
        }
        if !waiting.is_empty() {
            self.parked.insert(k, waiting);
        }
    }

    /// The push of this replica's write of `key` sent at `at` arrived with `versioned`: the reads parked while
    /// it was on its way may return it, or a newer committed version, but no older one.
    pub(super) fn own_write_pushed(&mut self, key: &Key, at: Time, versioned: &Versioned) {
        for p in self.parked.get_mut(key).into_iter().flatten().filter(|p| p.awaits.contains(&at)) {
            p.awaits.retain(|&a| a != at);
            if versioned.version > p.after.version {
                p.after = versioned.clone();
            }
        }
    }

    /// Serves again, from the start, the reads parked for [`PARK_TICKS`]: they renew.
    pub(super) fn unpark_late(&mut self, host: &mut Host, now: Time, out: &mut Fx) {
        let late = |p: &Parked| host.tick.saturating_sub(p.since) >= PARK_TICKS;
        if !self.parked.values().flatten().any(late) {
            return;
        }
        let mut due: Vec<(Key, Parked)> = Vec::new();
        self.parked.retain(|k, waiting| {
            let (gone, kept): (Vec<Parked>, Vec<Parked>) = std::mem::take(waiting).into_iter().partition(late);
            due.extend(gone.into_iter().map(|p| (k.clone(), p)));
            *waiting = kept;
            !waiting.is_empty()
        });
        for (k, p) in due {
            let chain = k.0;
            self.unawaited.insert(k);
            match self.groups.get(&chain).cloned() {
                Some(g) => self.read_as(host, now, p.fwd, p.read, g, false, out),
                None => self.bounce(host, p.fwd.origin, p.fwd.req, None, out),
            }
        }
    }
}
