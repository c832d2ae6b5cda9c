//! The master's own lease, and what a member promises for it (seed 001 §4.1.3, "Master migration and failure
//! recovery", made safe without trusting the failure detector).
//!
//! Every [`HEARTBEAT_TICKS`] a master sends each member of its partitions a heartbeat. A member that has
//! promised no other master of the partition in the last [`PROMISE`] promises this one (from the heartbeat's
//! arrival, for `PROMISE`) and says so. Once a majority of a partition's holders promised a round, the master's
//! lease on the partition runs to `shrunk(PROMISE)` after it sent that round: it ends before the promises of that
//! majority, so before any other master can gather a majority of its own. A master answers reads, and starts
//! writes, only within its lease.
//!
//! A replica's leases on keys are worth nothing by themselves: it answers under them only while the master
//! confirms it, and each heartbeat confirms it for the rest of the master's lease, counted from when the replica
//! sent the promise the master had heard before the heartbeat left (so from before the master measured it).
//! A write may succeed without a replica whose confirmation ran out, so a lease counts only within the run of
//! unbroken confirmations it began in: once they lapse, every lease the replica held on the partition is void.
//! When a master fails or is replaced, every confirmation it gave ends with its lease, so the new master need
//! not wait out leases of up to a minute: only promises of two seconds.
//!
//! A node forgets its promises when it restarts; one that ran before makes none until `PROMISE` after its start.

use super::msg::{Beat, Heartbeat};
use super::timing::{shrunk, shrunk_from, PROMISE};
use super::{Fence, Fx, Group, Key, LeaseMsg, LeaseNode, LeasePlantedBug};
use crate::host::Host;
use bytes::Bytes;
use meridian_core::{ChainId, NodeId, Time};
use std::collections::{BTreeMap, BTreeSet};

/// Rounds a member may have missed and still be confirmed: its acknowledgements are late, not lost.
const CONFIRM_ROUNDS: u64 = 3;

/// This node as a member of lease partitions.
#[derive(Debug, Default)]
pub(super) struct Member {
    /// When this run began, if it follows an earlier run: promises made then are forgotten, so none is made
    /// until `PROMISE` after.
    quiet_from: Option<Time>,
    started: bool,
    /// The master each partition's promise went to, and until when.
    promises: BTreeMap<ChainId, (NodeId, Time)>,
    /// When this node sent its promises of each round, per master and the master's run.
    sent: BTreeMap<(NodeId, u64), BTreeMap<u64, Time>>,
    /// Until when each partition's master confirmed this replica without a break.
    confirmations: BTreeMap<ChainId, Confirmation>,
    /// Numbers the runs of unbroken confirmations.
    runs: u64,
    /// The leases this replica holds, by key.
    leases: BTreeMap<Key, Lease>,
    /// Keys with a pushed version not committed yet, and the newest such version: not answered under a lease.
    dirty: BTreeMap<Key, u64>,
    /// Leases pushed with a write, each held only once the write's commit says the master recorded it, with the
    /// version that offered it.
    offers: BTreeMap<Key, (u64, Lease)>,
}

/// An unbroken run of a master's confirmations: which master (and which run of its process: one that restarted
/// holds none of the lease records it kept), this run's number, and until when it lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Confirmation {
    master: NodeId,
    incarnation: u64,
    run: u64,
    until: Time,
}

/// A lease on a key: the master that issued it, the run of confirmations it began in, and when it ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Lease {
    pub master: NodeId,
    pub run: u64,
    pub until: Time,
}

impl Member {
    /// A node that ran before keeps quiet for a promise's length after its first step.
    pub fn new(ran_before: bool) -> Member {
        Member { quiet_from: None, started: !ran_before, ..Member::default() }
    }

    /// Notes the first moment of this run.
    pub fn start(&mut self, now: Time) {
        if !self.started {
            self.started = true;
            self.quiet_from = Some(now);
        }
    }

    /// Forgets confirmations, leases and offers of partitions whose master changed or that this node no longer
    /// holds.
    pub fn adopt(&mut self, me: NodeId, groups: &BTreeMap<ChainId, super::Group>) {
        let kept = |chain: &ChainId, master: NodeId| {
            groups.get(chain).is_some_and(|g| g.master == master && g.holders.contains(&me))
        };
        self.confirmations.retain(|chain, c| kept(chain, c.master));
        self.leases.retain(|(chain, _), l| kept(chain, l.master));
        self.offers.retain(|(chain, _), (_, l)| kept(chain, l.master));
    }

    /// Promises `chain` to `to` from `now`, unless it promised another master that still counts on it.
    pub fn promise(&mut self, chain: ChainId, to: NodeId, now: Time) -> bool {
        if !self.started || self.quiet_from.is_some_and(|t| now < t.plus(PROMISE)) {
            return false;
        }
        if self.promises.get(&chain).is_some_and(|&(other, until)| other != to && until > now) {
            return false;
        }
        self.promises.insert(chain, (to, now.plus(PROMISE)));
        true
    }

    /// The run of confirmations by `g`'s master this replica is in now, if it is confirmed.
    pub fn run(&self, g: &Group, now: Time) -> Option<u64> {
        let c = self.confirmations.get(&g.chain).filter(|c| c.master == g.master && c.until > now)?;
        Some(c.run)
    }

    /// Whether this replica may answer reads of `g` under its leases now.
    pub fn confirmed(&self, g: &Group, now: Time) -> bool {
        self.run(g, now).is_some()
    }

    /// Whether this replica may answer a read of `key` in `g` from its store now.
    pub fn serves(&self, g: &Group, key: &Bytes, now: Time) -> bool {
        let k = (g.chain, key.clone());
        let run = self.run(g, now);
        run.is_some()
            && self.leases.get(&k).is_some_and(|l| l.master == g.master && Some(l.run) == run && l.until > now)
            && !self.dirty.contains_key(&k)
    }

    /// Whether this replica held a lease on `key` from `g`'s master that ran its length: a read then renews an
    /// expired lease rather than asks for a first one.
    pub fn expired(&self, g: &Group, key: &Bytes, now: Time) -> bool {
        self.leases.get(&(g.chain, key.clone())).is_some_and(|l| l.master == g.master && l.until <= now)
    }

    /// Holds `lease` on `key`; a lease of the same run only lengthens it.
    pub fn lease(&mut self, key: Key, lease: Lease) {
        let held = self.leases.entry(key).or_insert(lease);
        if (held.master, held.run) == (lease.master, lease.run) {
            held.until = held.until.max(lease.until);
        } else {
            *held = lease;
        }
    }

    /// `master`, in its run `incarnation`, confirms this replica on `chain` until `until`: the same run if the
    /// last confirmation came from the same process and still held, otherwise a new one (and the leases of the
    /// old one are void).
    fn confirm(&mut self, chain: ChainId, (master, incarnation): (NodeId, u64), until: Time, now: Time) {
        match self.confirmations.get_mut(&chain) {
            Some(c) if (c.master, c.incarnation) == (master, incarnation) && c.until > now => {
                c.until = c.until.max(until)
            }
            _ => {
                self.runs += 1;
                self.confirmations.insert(chain, Confirmation { master, incarnation, run: self.runs, until });
            }
        }
    }

    /// Drops the lease on `key`, and the one an earlier write offered with it: the master counts this replica
    /// out of the write it answers, so no commit may hand it a lease again (sim seed 10800306: a late commit of
    /// an earlier write did, and the replica answered that write's value after the next one succeeded).
    pub fn drop_lease(&mut self, key: &Key) {
        self.leases.remove(key);
        self.offers.remove(key);
    }

    /// A pushed version not yet committed, and the lease pushed with it (if any), offered until its commit.
    pub fn pushed(&mut self, key: Key, version: u64, offer: Option<Lease>) {
        self.uncommitted(key.clone(), version);
        if let Some(lease) = offer {
            self.offers.insert(key, (version, lease));
        }
    }

    /// This store holds `version` of `key`, which no commit has yet said is the partition's: the key is not
    /// answered under a lease until one does. A version may also be one no commit will ever name: a write of an
    /// earlier master that never succeeded, numbered past what the current master stamps. Reads of that key
    /// then go to the master, which is slower but never wrong.
    pub fn uncommitted(&mut self, key: Key, version: u64) {
        let v = self.dirty.entry(key).or_insert(version);
        *v = (*v).max(version);
    }

    /// The master committed `version` of `key`: the key is clean unless a newer push is still pending, and the
    /// lease offered with that version is held if the master recorded it (`leased`).
    pub fn committed(&mut self, chain: ChainId, key: &Bytes, version: u64, leased: bool) {
        let k = (chain, key.clone());
        if self.dirty.get(&k).is_some_and(|&v| v <= version) {
            self.dirty.remove(&k);
        }
        if let Some(&(offered, lease)) = self.offers.get(&k).filter(|o| o.0 <= version) {
            self.offers.remove(&k);
            if leased && offered == version {
                self.lease(k, lease);
            }
        }
    }
}

/// Heartbeat rounds this node sent as master.
#[derive(Debug, Default)]
pub(super) struct Rounds {
    next: u64,
    sent: BTreeMap<u64, Sent>,
    /// The newest round each member's promises came back for.
    heard: BTreeMap<NodeId, u64>,
}

/// A heartbeat round: when it left, and who promised each partition in it (with the partition's fence then).
#[derive(Debug)]
struct Sent {
    at: Time,
    promised: BTreeMap<ChainId, (Fence, BTreeSet<NodeId>)>,
}

/// What a master is doing for a partition.
#[derive(Debug)]
pub(super) enum Phase {
    /// Copying the partition from a majority (`takeover.rs`).
    Takeover(super::takeover::Takeover),
    /// Writing back keys fewer than a majority held; the writes' numbers.
    Repair(BTreeSet<u64>),
    Ready,
}

/// This node as master of a partition.
#[derive(Debug)]
pub(super) struct Mastery {
    pub fence: Fence,
    /// The end of the master's lease by its members' promises, if it has one.
    until: Option<Time>,
    /// The end of the manager's lease on the partition's view (`ClusterMap::leased_at`), if it granted one.
    granted: Option<Time>,
    pub phase: Phase,
}

/// What this process granted on a partition as its master: kept across its masteries of the partition for as
/// long as the process runs, since a member counts a lease within its run of this process's confirmations
/// whichever mastery issued it.
#[derive(Debug, Default)]
pub(super) struct Grants {
    /// Lease records: who holds a lease on each key, until when on this clock.
    records: BTreeMap<Bytes, BTreeMap<NodeId, Time>>,
    /// Until when each member may answer under its leases, by the confirmations sent to it.
    windows: BTreeMap<NodeId, Time>,
}

impl Mastery {
    pub fn new(fence: Fence, phase: Phase) -> Mastery {
        Mastery { fence, until: None, granted: None, phase }
    }

    /// Whether the master may answer reads and start writes now.
    pub fn serves(&self, now: Time) -> bool {
        matches!(self.phase, Phase::Ready) && self.lease_end().is_some_and(|u| u > now)
    }

    /// The end of the master's lease: within its members' promises and the manager's lease, both.
    fn lease_end(&self) -> Option<Time> {
        Some(self.until?.min(self.granted?))
    }

    /// The manager's leader granted this node a lease on `view` of the partition until `until`.
    pub fn granted(&mut self, view: u64, until: Time) {
        if view == self.fence.view {
            self.granted = Some(self.granted.map_or(until, |g| g.max(until)));
        }
    }

    pub fn takes_over(&self, fence: Fence) -> bool {
        self.fence == fence && matches!(self.phase, Phase::Takeover(_))
    }
}

impl Grants {
    /// The replicas that may be answering reads of `key` under a lease now: a write must reach each of them.
    pub fn holders_of(&self, key: &Bytes, now: Time) -> Vec<NodeId> {
        let window = |n: &NodeId| self.windows.get(n).is_some_and(|&w| w > now);
        let records = self.records.get(key).into_iter().flatten();
        records.filter(|&(n, &until)| until > now && window(n)).map(|(&n, _)| n).collect()
    }

    /// Records a lease on `key` held by `node` until `until`.
    pub fn record(&mut self, key: &Bytes, node: NodeId, until: Time) {
        let held = self.records.entry(key.clone()).or_default().entry(node).or_insert(until);
        *held = (*held).max(until);
    }

    /// Drops records and windows that ran out; says whether anything is left.
    fn prune(&mut self, now: Time) -> bool {
        self.records.retain(|_, holders| {
            holders.retain(|_, until| *until > now);
            !holders.is_empty()
        });
        self.windows.retain(|_, until| *until > now);
        !self.records.is_empty() || !self.windows.is_empty()
    }
}

impl LeaseNode {
    /// The replicas that may be answering reads of `key` of `chain` under a lease now.
    pub(super) fn holders_of(&self, chain: ChainId, key: &Bytes, now: Time) -> Vec<NodeId> {
        self.grants.get(&chain).map_or(Vec::new(), |g| g.holders_of(key, now))
    }

    /// Records a lease on `key` of `chain` held by `node` until `until`.
    pub(super) fn record(&mut self, chain: ChainId, key: &Bytes, node: NodeId, until: Time) {
        self.grants.entry(chain).or_default().record(key, node, until);
    }

    /// Builds the masteries the map gives this node: kept when only the step changed (its lease starts again
    /// with the next round), a takeover when the members changed, it was not master before, or it may have
    /// missed a map in which another node was.
    pub(super) fn adopt_masteries(&mut self, host: &mut Host, now: Time, out: &mut Fx) {
        let (me, continuous) = (self.me, self.continuous);
        let groups = &self.groups;
        self.masteries.retain(|chain, _| continuous && groups.get(chain).is_some_and(|g| g.master == me));
        let mut takeovers = Vec::new();
        for g in self.groups.values().filter(|g| g.master == me) {
            match self.masteries.get_mut(&g.chain) {
                Some(m) if m.fence == g.fence => {}
                Some(m) if m.fence.view == g.fence.view && matches!(m.phase, Phase::Ready) => {
                    m.fence = g.fence;
                    m.until = None;
                }
                _ => takeovers.push(g.clone()),
            }
        }
        // Writes of a mastery that ends go back to their clients first: the takeover's own write-backs stay.
        self.masteries.retain(|chain, _| !takeovers.iter().any(|g| g.chain == *chain));
        self.bounce_stale_writes(host, out);
        for g in takeovers {
            let m = self.start_takeover(host, now, &g, out);
            self.masteries.insert(g.chain, m);
        }
    }

    /// Sends a heartbeat round to every member of the partitions this node is master of.
    pub(super) fn heartbeat(&mut self, now: Time, out: &mut Fx) {
        let round = self.rounds.next;
        self.rounds.next += 1;
        let mut promised = BTreeMap::new();
        let mut beats: BTreeMap<NodeId, Vec<Beat>> = BTreeMap::new();
        self.grants.retain(|_, grants| grants.prune(now));
        for (chain, m) in self.masteries.iter_mut() {
            let Some(g) = self.groups.get(chain) else { continue };
            let mut by = BTreeSet::new();
            if self.member.promise(*chain, self.me, now) {
                by.insert(self.me);
            }
            promised.insert(*chain, (m.fence, by));
            for to in g.writers().filter(|&n| n != self.me) {
                let recent = self.rounds.heard.get(&to).is_some_and(|&r| r + CONFIRM_ROUNDS >= round);
                let confirm = match m.lease_end() {
                    Some(until) if until > now && recent && g.holders.contains(&to) => until.since(now),
                    _ => std::time::Duration::ZERO,
                };
                if !confirm.is_zero() {
                    let w = self.grants.entry(*chain).or_default().windows.entry(to).or_insert(now);
                    *w = (*w).max(now.plus(confirm));
                }
                let confirm_ns = confirm.as_nanos() as u64;
                beats.entry(to).or_default().push(Beat { chain: *chain, fence: m.fence, confirm_ns });
            }
        }
        self.rounds.sent.retain(|_, s| s.at.plus(PROMISE) > now);
        self.rounds.sent.insert(round, Sent { at: now, promised });
        for (to, beats) in beats {
            let acked = self.rounds.heard.get(&to).copied();
            out.send(to, LeaseMsg::Heartbeat(Heartbeat { incarnation: self.incarnation, round, acked, beats }));
        }
        self.count_promises(round);
    }

    /// A member's promises for a round this node sent.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_promised(
        &mut self,
        host: &mut Host,
        now: Time,
        from: NodeId,
        incarnation: u64,
        round: u64,
        chains: Vec<ChainId>,
        out: &mut Fx,
    ) {
        if incarnation != self.incarnation {
            return;
        }
        let heard = self.rounds.heard.entry(from).or_insert(round);
        *heard = (*heard).max(round);
        let Some(sent) = self.rounds.sent.get_mut(&round) else { return };
        for chain in chains {
            if let Some((_, by)) = sent.promised.get_mut(&chain) {
                by.insert(from);
            }
        }
        if self.count_promises(round) {
            // A lease that just began may let writes waiting for it go.
            self.drive_writes(host, now, out);
        }
    }

    /// Extends the lease of every partition a majority promised in `round`; says whether one began.
    fn count_promises(&mut self, round: u64) -> bool {
        let Some(Sent { at, promised }) = self.rounds.sent.get(&round) else { return false };
        let mut began = false;
        for (chain, (fence, by)) in promised {
            let (Some(m), Some(g)) = (self.masteries.get_mut(chain), self.groups.get(chain)) else { continue };
            if m.fence != *fence || by.iter().filter(|n| g.holders.contains(n)).count() < g.majority() {
                continue;
            }
            let until = at.plus(shrunk(PROMISE));
            began |= m.until.is_none();
            m.until = Some(m.until.map_or(until, |u| u.max(until)));
        }
        began
    }

    /// A master's heartbeat: confirmations and a promise for each partition this node holds in the same
    /// configuration with that master.
    pub(super) fn on_heartbeat(&mut self, now: Time, from: NodeId, hb: Heartbeat, out: &mut Fx) {
        self.member.start(now);
        let sent = self.member.sent.entry((from, hb.incarnation)).or_default();
        let anchor = hb.acked.and_then(|r| sent.get(&r).copied());
        if let Some(r) = hb.acked {
            sent.retain(|&round, _| round >= r);
        }
        let mut chains = Vec::new();
        for beat in hb.beats {
            let Some(g) = self.groups.get(&beat.chain) else { continue };
            if g.fence != beat.fence || g.master != from || !g.takes_part(self.me) {
                continue;
            }
            if let Some(at) = anchor.filter(|_| beat.confirm_ns > 0 && g.holders.contains(&self.me)) {
                let slow = if self.planted(LeasePlantedBug::ClockBeyondBound) { 20 } else { 1 };
                let until = shrunk_from(at, beat.confirm_ns * slow);
                self.member.confirm(beat.chain, (from, hb.incarnation), until, now);
            }
            if self.member.promise(beat.chain, from, now) {
                chains.push(beat.chain);
            }
        }
        self.member.sent.entry((from, hb.incarnation)).or_default().insert(hb.round, now);
        out.send(from, LeaseMsg::Promised { incarnation: hb.incarnation, round: hb.round, chains });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::LeaseOptions;

    fn group() -> Group {
        let (chain, fence) = (ChainId(0), Fence { view: 1, step: 0 });
        let holders = vec![NodeId(1), NodeId(2), NodeId(3)];
        Group { chain, fence, holders, joiner: None, master: NodeId(1), opts: LeaseOptions::default() }
    }

    fn at(ms: u64) -> Time {
        Time::from_nanos(ms * 1_000_000)
    }

    /// A lease counts only within the run of confirmations it began in: once they lapse, a confirmation that
    /// comes later starts a new run, and the master may have written past this replica in between.
    #[test]
    fn a_lease_is_void_once_the_confirmations_it_began_under_lapse() {
        let (g, key) = (group(), Bytes::from_static(b"k"));
        let mut m = Member::new(false);
        let master = (g.master, 7);
        m.confirm(g.chain, master, at(1_000), at(0));
        let run = m.run(&g, at(10)).expect("confirmed");
        m.lease((g.chain, key.clone()), Lease { master: g.master, run, until: at(60_000) });
        assert!(m.serves(&g, &key, at(500)));
        assert!(!m.expired(&g, &key, at(500)) && m.expired(&g, &key, at(60_000)), "expired once run out");
        m.confirm(g.chain, master, at(1_500), at(900));
        assert!(m.serves(&g, &key, at(1_200)), "the same run, extended");
        assert!(!m.serves(&g, &key, at(1_600)), "unconfirmed");
        m.confirm(g.chain, master, at(4_000), at(2_000));
        assert!(m.confirmed(&g, at(2_100)) && !m.serves(&g, &key, at(2_100)), "a new run: the lease is void");
        let run = m.run(&g, at(2_200)).unwrap();
        m.lease((g.chain, key.clone()), Lease { master: g.master, run, until: at(60_000) });
        m.confirm(g.chain, (g.master, 8), at(5_000), at(2_300));
        assert!(!m.serves(&g, &key, at(2_400)), "the master restarted without its records: a new run");
    }

    /// A lease pushed with a write is held only if the commit names this replica, and a pushed version is not
    /// answered until committed.
    #[test]
    fn a_pushed_lease_counts_only_once_its_commit_names_the_replica() {
        let (g, key) = (group(), Bytes::from_static(b"k"));
        let mut m = Member::new(false);
        m.confirm(g.chain, (g.master, 7), at(10_000), at(0));
        let lease = Lease { master: g.master, run: m.run(&g, at(1)).unwrap(), until: at(60_000) };
        m.pushed((g.chain, key.clone()), 7, Some(lease));
        assert!(!m.serves(&g, &key, at(2)), "offered, not held");
        m.committed(g.chain, &key, 7, false);
        assert!(!m.serves(&g, &key, at(3)), "the master recorded no lease for it");
        m.pushed((g.chain, key.clone()), 9, Some(lease));
        m.pushed((g.chain, key.clone()), 11, None);
        m.committed(g.chain, &key, 9, true);
        assert!(!m.serves(&g, &key, at(4)), "held, but version 11 awaits its commit");
        m.committed(g.chain, &key, 11, false);
        assert!(m.serves(&g, &key, at(5)));
    }

    /// A member promises one master at a time per partition, and one that ran before promises nothing until a
    /// promise's length after its start.
    #[test]
    fn a_member_promises_one_master_at_a_time_and_keeps_quiet_after_a_restart() {
        let chain = ChainId(0);
        let mut m = Member::new(false);
        assert!(m.promise(chain, NodeId(1), at(0)));
        assert!(!m.promise(chain, NodeId(2), at(1_999)), "promised to n1");
        assert!(m.promise(chain, NodeId(1), at(1_000)), "n1 again");
        assert!(m.promise(chain, NodeId(2), at(3_001)), "n1's promise ran out");
        let mut restarted = Member::new(true);
        restarted.start(at(100));
        assert!(!restarted.promise(chain, NodeId(1), at(2_099)));
        assert!(restarted.promise(chain, NodeId(1), at(2_100)));
    }
}
