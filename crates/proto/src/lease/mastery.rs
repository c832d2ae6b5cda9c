//! The master's own lease, and what a member promises for it (seed 001 §4.1.3, "Master migration and failure
//! recovery", made safe without trusting the failure detector). Everything here is per domain (`domains.rs`):
//! the keys of a partition one region masters.
//!
//! Every [`HEARTBEAT_TICKS`] a master sends each member of its domains a heartbeat. A member that has promised
//! no other master of the domain in the last [`PROMISE`] promises this one (from the heartbeat's arrival, for
//! `PROMISE`) and says so. Once a majority of a partition's holders promised a round, the master's lease on the
//! domain runs to `shrunk(PROMISE)` after it sent that round: it ends before the promises of that majority, so
//! before any other master of the domain can gather a majority of its own. A master answers reads, and starts
//! writes, only within its lease.
//!
//! Keys move between domains with the map (`map/masters.rs`). Each round names the epoch of the master's
//! table of who masters what, and a member promises only rounds of its own table's epoch; a master serves a
//! key only under rounds of the epoch it last moved at or later. A member does not promise a domain that
//! gained keys after the epoch of a promise it still holds for another domain: so the new master of a moved
//! key has no lease on it before every lease the old one could have on it ran out.
//!
//! A replica's leases on keys are worth nothing by themselves: it answers under them only while the master
//! confirms it, and each heartbeat confirms it for the rest of the master's lease, counted from when the replica
//! sent the promise the master had heard before the heartbeat left (so from before the master measured it).
//! A write may succeed without a replica whose confirmation ran out, so a lease counts only within the run of
//! unbroken confirmations it began in: once they lapse, every lease the replica held on the domain is void.
//! When a master fails or is replaced, every confirmation it gave ends with its lease, so the new master need
//! not wait out leases of up to a minute: only promises of two seconds.
//!
//! A node forgets its promises when it restarts; one that ran before makes none until `PROMISE` after its start.

use super::msg::{Beat, Heartbeat};
use super::planted::planted_in;
use super::timing::{shrunk, shrunk_from, PROMISE};
use super::{Domain, Fence, Fx, Group, Key, LeaseMsg, LeaseNode, LeasePlantedBug};
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
    /// The promises each partition's domains hold, pruned as they run out.
    promises: BTreeMap<ChainId, Vec<Promise>>,
    /// When this node sent its promises of each round, per master and the master's run.
    sent: BTreeMap<(NodeId, u64), BTreeMap<u64, Time>>,
    /// Until when each domain's master confirmed this replica without a break, by partition and domain.
    confirmations: BTreeMap<ChainId, BTreeMap<String, Confirmation>>,
    /// Numbers the runs of unbroken confirmations.
    runs: u64,
    /// The leases this replica holds, by key.
    leases: BTreeMap<Key, Lease>,
    /// Keys with a pushed version not committed yet, and the newest such version: not answered under a lease.
    dirty: BTreeMap<Key, u64>,
    /// Leases pushed with a write, each held only once the write's commit says the master recorded it, with the
    /// version that offered it.
    offers: BTreeMap<Key, (u64, Lease)>,
    /// Keys with writes of this replica's clients on their way to the master, by when each was sent: the master
    /// may commit them without this replica (`writes.rs`), so it answers no read of the key under a lease begun
    /// before one of them until the write's push reaches it.
    withheld: BTreeMap<Key, BTreeSet<Time>>,
}

/// A promise to a domain's master, given for a round of the member's table `epoch`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Promise {
    domain: String,
    to: NodeId,
    epoch: u64,
    until: Time,
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

/// A lease on a key: the master that issued it, the run of confirmations it began in, when it began and when it
/// ends (on this replica's clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Lease {
    pub master: NodeId,
    pub run: u64,
    pub since: Time,
    pub until: Time,
    /// Whether a read was answered under it since it began or was last asked to be extended.
    pub read: bool,
}

impl Lease {
    pub fn new(master: NodeId, run: u64, since: Time, until: Time) -> Lease {
        Lease { master, run, since, until, read: false }
    }
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

    /// Forgets confirmations, leases and offers of domains and keys whose master changed or that this node no
    /// longer holds.
    pub fn adopt(&mut self, me: NodeId, groups: &BTreeMap<ChainId, super::Group>) {
        let held = |chain: &ChainId| groups.get(chain).filter(|g| g.holders.contains(&me));
        self.confirmations.retain(|chain, by| {
            let Some(g) = held(chain) else { return false };
            by.retain(|domain, c| g.master_in(domain) == Some(c.master));
            !by.is_empty()
        });
        let kept = |(chain, key): &Key, master: NodeId| held(chain).is_some_and(|g| g.master_of(key) == master);
        self.leases.retain(|key, l| kept(key, l.master));
        self.offers.retain(|key, (_, l)| kept(key, l.master));
    }

    /// Promises `domain` of `g` to `to` from `now`, for a round of `g`'s table, unless it promised another
    /// master of the domain that still counts on it, or the domain gained keys since a promise it still holds
    /// for another domain: that one's master may still serve them (`early` skips that wait: a planted bug).
    pub fn promise(&mut self, g: &Group, domain: &str, to: NodeId, now: Time, early: bool) -> bool {
        if !self.started || self.quiet_from.is_some_and(|t| now < t.plus(PROMISE)) {
            return false;
        }
        let held = self.promises.entry(g.chain).or_default();
        held.retain(|p| p.until > now);
        let gained = if early { 0 } else { g.domains.gained(domain) };
        let blocks = |p: &Promise| match p.domain == domain {
            true => p.to != to,
            false => p.epoch < gained,
        };
        if held.iter().any(blocks) {
            return false;
        }
        let (epoch, until) = (g.domains.epoch, now.plus(PROMISE));
        match held.iter_mut().find(|p| p.domain == domain && p.to == to && p.epoch == epoch) {
            Some(p) => p.until = until,
            None => held.push(Promise { domain: domain.to_string(), to, epoch, until }),
        }
        true
    }

    /// The run of confirmations by the master of `domain` of `g` this replica is in now, if it is confirmed.
    pub fn run(&self, g: &Group, domain: &str, now: Time) -> Option<u64> {
        let c = self.confirmations.get(&g.chain)?.get(domain)?;
        (Some(c.master) == g.master_in(domain) && c.until > now).then_some(c.run)
    }

    /// Whether this replica may answer reads of some domain of `g` under its leases now.
    pub fn confirmed(&self, g: &Group, now: Time) -> bool {
        g.domains.all().any(|(domain, _)| self.run(g, domain, now).is_some())
    }

    /// Whether this replica may answer a read of `key` in `g` from its store now.
    pub fn serves(&self, g: &Group, key: &Bytes, now: Time) -> bool {
        self.serves_until(g, key, now).is_some()
    }

    /// Until when this replica may answer reads of `key` in `g` from its store, if it may now: the end of its
    /// lease or of the master's confirmation, whichever comes first.
    pub fn serves_until(&self, g: &Group, key: &Bytes, now: Time) -> Option<Time> {
        let until = self.leased_until(g, key, now)?;
        (!self.pending(&(g.chain, key.clone()))).then_some(until)
    }

    /// Whether this replica holds a lease on `key` in `g` that the master confirms, but has a pushed version of
    /// the key that no commit named yet, or a write of it on its way: a read then waits for a commit
    /// (`parked.rs`).
    pub fn parks(&self, g: &Group, key: &Bytes, now: Time) -> bool {
        self.leased_until(g, key, now).is_some() && self.pending(&(g.chain, key.clone()))
    }

    /// Whether this replica holds a pushed version of `key` no commit has named yet, or withholds its lease on
    /// the key for a write of its own.
    pub fn pending(&self, key: &Key) -> bool {
        self.dirty.contains_key(key) || self.withheld.contains_key(key)
    }

    /// How many keys hold a pushed version no commit has named yet.
    pub fn awaiting_commit(&self) -> u64 {
        self.dirty.len() as u64
    }

    /// Whether this replica withholds its lease on `key` for the write it sent at `at`.
    pub fn withholds(&self, key: &Key, at: Time) -> bool {
        self.withheld.get(key).is_some_and(|w| w.contains(&at))
    }

    /// When this replica sent the writes of `key` it withholds its lease for.
    pub fn withheld(&self, key: &Key) -> Vec<Time> {
        self.withheld.get(key).map_or(Vec::new(), |w| w.iter().copied().collect())
    }

    /// Until when this replica's lease on `key` in `g` and the master's confirmation both hold, if they do now.
    pub fn leased_until(&self, g: &Group, key: &Bytes, now: Time) -> Option<Time> {
        let domain = g.domain_of(key);
        let c = self.confirmations.get(&g.chain)?.get(domain)?;
        let confirmed = Some(c.master) == g.master_in(domain) && c.until > now;
        let master = g.master_of(key);
        let l = self.leases.get(&(g.chain, key.clone()));
        let l = l.filter(|l| l.master == master && l.run == c.run && l.until > now)?;
        confirmed.then_some(l.until.min(c.until))
    }

    /// Whether this replica held a lease on `key` from its master that ran its length: a read then renews an
    /// expired lease rather than asks for a first one.
    pub fn expired(&self, g: &Group, key: &Bytes, now: Time) -> bool {
        let master = g.master_of(key);
        self.leases.get(&(g.chain, key.clone())).is_some_and(|l| l.master == master && l.until <= now)
    }

    /// Holds `lease` on `key`, which the master recorded; a lease of the same run only lengthens the one held.
    /// A lease begun at or after this replica sent a write of the key ends its withholding for that write: the
    /// master, recording it before the write commits, waits for this replica to store the write; recording it
    /// after, it gave with it a value at least as new (a renewal's, or that of the newest write, which this
    /// replica stored).
    pub fn lease(&mut self, key: Key, lease: Lease) {
        self.end_withholdings(&key, |at| at <= lease.since);
        let held = self.leases.entry(key).or_insert(lease);
        if (held.master, held.run) == (lease.master, lease.run) {
            held.until = held.until.max(lease.until);
            held.since = held.since.max(lease.since);
        } else if held.run < lease.run {
            // Runs only grow: an answer that left in an older run must not replace a lease of a newer one.
            *held = lease;
        }
    }

    /// Lengthens the lease held on `key` from `master` in `run` to `until`, if it still holds one: an extension,
    /// which carries no value, so it begins nothing (and ends no withholding).
    pub fn extend(&mut self, key: &Key, master: NodeId, run: u64, until: Time) {
        if let Some(held) = self.leases.get_mut(key).filter(|l| (l.master, l.run) == (master, run)) {
            held.until = held.until.max(until);
        }
    }

    /// A read of `key` was answered under its lease.
    pub fn read_under(&mut self, key: &Key) {
        if let Some(l) = self.leases.get_mut(key) {
            l.read = true;
        }
    }

    /// The leases to ask the master to extend now: read under since last asked, and ending within `soon(key)`
    /// (None: not at all); each is asked once, until it is read again.
    pub fn due(&mut self, now: Time, soon: impl Fn(&Key) -> Option<std::time::Duration>) -> Vec<(Key, Lease)> {
        let mut due = Vec::new();
        for (key, l) in self.leases.iter_mut().filter(|(_, l)| l.read && l.until > now) {
            if soon(key).is_some_and(|d| l.until < now.plus(d)) {
                l.read = false;
                due.push((key.clone(), *l));
            }
        }
        due
    }

    /// Withholds the lease on `key` from `now`, when this replica sends its client's write of it to the master:
    /// the write need not wait for this replica to store it (`writes.rs`).
    pub fn withhold(&mut self, key: Key, now: Time) {
        self.withheld.entry(key).or_default().insert(now);
    }

    /// The push of this replica's write sent at `at` arrived: the store holds its version or a newer one, and
    /// the lease counts again once a commit names them.
    pub fn unwithhold(&mut self, key: &Key, at: Time) {
        self.end_withholdings(key, |sent| sent == at);
    }

    /// Ends the withholdings on `key` for the writes sent at the moments `ended` picks.
    fn end_withholdings(&mut self, key: &Key, ended: impl Fn(Time) -> bool) {
        if let Some(w) = self.withheld.get_mut(key) {
            w.retain(|&at| !ended(at));
            if w.is_empty() {
                self.withheld.remove(key);
            }
        }
    }

    /// Forgets withholdings of keys this replica holds no lease or offer on, unless `awaited` (a parked read
    /// waits for them): any lease it takes from now on begins after them.
    pub fn forget_withheld(&mut self, awaited: impl Fn(&Key) -> bool) {
        let (leases, offers) = (&self.leases, &self.offers);
        self.withheld.retain(|k, _| leases.contains_key(k) || offers.contains_key(k) || awaited(k));
    }

    /// `master`, in its run `incarnation`, confirms this replica on `domain` until `until`: the same run if the
    /// last confirmation came from the same process and still held, otherwise a new one (and the leases of the
    /// old one are void).
    fn confirm(
        &mut self,
        (chain, domain): (ChainId, &str),
        (master, incarnation): (NodeId, u64),
        until: Time,
        now: Time,
    ) {
        let by = self.confirmations.entry(chain).or_default();
        match by.get_mut(domain) {
            Some(c) if (c.master, c.incarnation) == (master, incarnation) && c.until > now => {
                c.until = c.until.max(until)
            }
            _ => {
                self.runs += 1;
                by.insert(domain.to_string(), Confirmation { master, incarnation, run: self.runs, until });
            }
        }
    }

    /// `master` runs as `incarnation` now: a run of its confirmations on `domain` from an earlier run of its
    /// process ends, and with it every lease held under that run. That process's records died with it, so the new
    /// one may commit writes without this replica, and it may have a lease as soon as this replica promises it
    /// (sim seed 10204287: a restarted master's first heartbeat confirmed nothing, the replica promised it and
    /// went on answering under its old run, and the master committed a write that had not reached it).
    pub fn outlived(&mut self, (chain, domain): (ChainId, &str), (master, incarnation): (NodeId, u64)) {
        let Some(by) = self.confirmations.get_mut(&chain) else { return };
        if by.get(domain).is_some_and(|c| c.master == master && c.incarnation != incarnation) {
            by.remove(domain);
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
    /// lease offered with that version is held if it is the one the master recorded (`leased`: when it began).
    /// A push of the same write sent again offers a lease that began later, which the master never recorded
    /// (sim seed 94 of `partition` with affiliated nodes: a replica took that one after dropping its lease for a
    /// write of its own, which the master then committed without it).
    pub fn committed(&mut self, chain: ChainId, key: &Bytes, version: u64, leased: Option<Time>) {
        let k = (chain, key.clone());
        if self.dirty.get(&k).is_some_and(|&v| v <= version) {
            self.dirty.remove(&k);
        }
        if let Some(&(offered, lease)) = self.offers.get(&k).filter(|o| o.0 <= version) {
            self.offers.remove(&k);
            if leased == Some(lease.since) && offered == version {
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

/// A heartbeat round: when it left, and who promised each domain in it (with the partition's fence and the
/// table's epoch then).
#[derive(Debug)]
struct Sent {
    at: Time,
    promised: BTreeMap<Domain, (Fence, u64, BTreeSet<NodeId>)>,
}

/// What a master is doing for a domain.
#[derive(Debug)]
pub(super) enum Phase {
    /// Copying the partition from a majority (`takeover.rs`).
    Takeover(super::takeover::Takeover),
    /// Writing back keys fewer than a majority held; the writes' numbers.
    Repair(BTreeSet<u64>),
    Ready,
}

/// This node as master of a domain.
#[derive(Debug)]
pub(super) struct Mastery {
    pub fence: Fence,
    /// The end of the master's lease by its members' promises, by the table epoch of the rounds promised.
    leases: BTreeMap<u64, Time>,
    /// The end of the manager's lease on the partition's view (`ClusterMap::leased_at`), if it granted one.
    granted: Option<Time>,
    pub phase: Phase,
    /// Every key of the domain that moved into it at this epoch or before has been taken over.
    pub caught: u64,
    /// Keys that moved into the domain later, being copied from a majority (`catchup.rs`).
    pub catchup: Option<super::catchup::Catchup>,
    /// Keys taken over whose write-back is under way, with its number: not served until it commits.
    pub unready: BTreeMap<Bytes, u64>,
}

/// What this process granted on a domain as its master: kept across its masteries of the domain for as long
/// as the process runs, since a member counts a lease within its run of this process's confirmations
/// whichever mastery issued it.
#[derive(Debug, Default)]
pub(super) struct Grants {
    /// Lease records: who holds a lease on each key.
    records: BTreeMap<Bytes, BTreeMap<NodeId, Record>>,
    /// Until when each member may answer under its leases, by the confirmations sent to it.
    windows: BTreeMap<NodeId, Time>,
}

/// A lease the master recorded: until when it runs on the master's clock, and when the newest lease it covers
/// began on the holder's (compared only with the holder's own [`Withheld`] moments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Record {
    until: Time,
    since: Time,
}

/// A replica that withholds its lease on a write's key from `at` on its clock, when it sent the master the
/// write: the write need not wait for it unless the master recorded a lease of it that began then or later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Withheld {
    pub node: NodeId,
    pub at: Time,
}

impl Mastery {
    /// A mastery that has taken over every key that moved into its domain up to `caught`.
    pub fn new(fence: Fence, phase: Phase, caught: u64) -> Mastery {
        let (leases, unready) = (BTreeMap::new(), BTreeMap::new());
        Mastery { fence, leases, granted: None, phase, caught, catchup: None, unready }
    }

    /// Whether the master may answer reads and start writes of some keys now.
    pub fn serves(&self, now: Time) -> bool {
        matches!(self.phase, Phase::Ready) && self.lease_end(0).is_some_and(|u| u > now)
    }

    /// Whether the master may answer reads and start writes of `key` of `g` now: its lease holds by rounds of
    /// the epoch the key moved at or later, and the key has been taken over.
    pub fn serves_key(&self, g: &Group, key: &Bytes, now: Time) -> bool {
        self.serves_key_until(g, key, now).is_some()
    }

    /// Until when the master may answer reads of `key` of `g`, if it may now ([`Self::serves_key`]).
    pub fn serves_key_until(&self, g: &Group, key: &Bytes, now: Time) -> Option<Time> {
        let since = g.domains.since(key);
        let ready = matches!(self.phase, Phase::Ready) && since <= self.caught && !self.unready.contains_key(key);
        self.lease_end(since).filter(|&u| ready && u > now)
    }

    /// The end of the master's lease by rounds of table epoch `since` or later: within its members' promises
    /// and the manager's lease, both.
    fn lease_end(&self, since: u64) -> Option<Time> {
        let promised = self.leases.range(since..).map(|(_, &until)| until).max()?;
        Some(promised.min(self.granted?))
    }

    /// The manager's leader granted this node a lease on `view` of the partition until `until`.
    pub fn granted(&mut self, view: u64, until: Time) {
        if view == self.fence.view {
            self.granted = Some(self.granted.map_or(until, |g| g.max(until)));
        }
    }

    /// A new step in the same view: the lease starts again with the next round.
    pub fn restep(&mut self, fence: Fence) {
        self.fence = fence;
        self.leases.clear();
        // Asked in the old step, no holder answers it: the next tick asks again.
        self.catchup = None;
    }

    pub fn takes_over(&self, fence: Fence) -> bool {
        self.fence == fence && matches!(self.phase, Phase::Takeover(_))
    }

    /// Forgets write-backs that are no longer under way (`still`): their keys left the domain.
    pub fn forget_writes(&mut self, still: impl Fn(u64) -> bool) {
        self.unready.retain(|_, seq| still(*seq));
        if let Phase::Repair(waiting) = &mut self.phase {
            waiting.retain(|&seq| still(seq));
            if waiting.is_empty() {
                self.phase = Phase::Ready;
            }
        }
    }

    /// Write-back `seq` committed.
    pub fn written_back(&mut self, seq: u64) {
        self.forget_writes(|s| s != seq);
    }
}

impl Grants {
    /// The replicas that may be answering reads of `key` under a lease now: a write must reach each of them. A
    /// replica that `withheld` the key's lease counts only by a lease that began then or after.
    pub fn holders_of(&self, key: &Bytes, now: Time, withheld: Option<Withheld>) -> Vec<NodeId> {
        let window = |n: &NodeId| self.windows.get(n).is_some_and(|&w| w > now);
        let gone = |n: &NodeId, r: &Record| withheld.is_some_and(|d| d.node == *n && r.since < d.at);
        let records = self.records.get(key).into_iter().flatten();
        records.filter(|&(n, r)| r.until > now && window(n) && !gone(n, r)).map(|(&n, _)| n).collect()
    }

    /// Records a lease on `key` held by `node` from `since` on its clock until `until` on this one.
    pub fn record(&mut self, key: &Bytes, node: NodeId, since: Time, until: Time) {
        let held = self.records.entry(key.clone()).or_default().entry(node).or_insert(Record { until, since });
        held.until = held.until.max(until);
        held.since = held.since.max(since);
    }

    /// Lengthens the lease recorded on `key` for `node` to `until`, without a new start: an extension.
    pub fn extend(&mut self, key: &Bytes, node: NodeId, until: Time) {
        if let Some(r) = self.records.get_mut(key).and_then(|holders| holders.get_mut(&node)) {
            r.until = r.until.max(until);
        }
    }

    /// Drops records and windows that ran out; says whether anything is left.
    fn prune(&mut self, now: Time) -> bool {
        self.records.retain(|_, holders| {
            holders.retain(|_, r| r.until > now);
            !holders.is_empty()
        });
        self.windows.retain(|_, until| *until > now);
        !self.records.is_empty() || !self.windows.is_empty()
    }
}

impl LeaseNode {
    /// The replicas that may be answering reads of `key` of `g` under a lease now, leaving out a replica that
    /// `withheld` its leases on the key, except by a lease that began then or after.
    pub(super) fn holders_of(&self, g: &Group, key: &Bytes, now: Time, withheld: Option<Withheld>) -> Vec<NodeId> {
        self.grants.get(&g.domain_key(key)).map_or(Vec::new(), |grants| grants.holders_of(key, now, withheld))
    }

    /// Records a lease on `key` of `g` held by `node` from `since` on its clock until `until` on this one.
    pub(super) fn record(&mut self, g: &Group, key: &Bytes, node: NodeId, since: Time, until: Time) {
        self.grants.entry(g.domain_key(key)).or_default().record(key, node, since, until);
    }

    /// Lengthens the lease recorded on `key` of `g` for `node` to `until` on this node's clock.
    pub(super) fn extend_record(&mut self, g: &Group, key: &Bytes, node: NodeId, until: Time) {
        if let Some(grants) = self.grants.get_mut(&g.domain_key(key)) {
            grants.extend(key, node, until);
        }
    }

    /// The masteries of `chain`'s domains.
    pub(super) fn masteries_of(&mut self, chain: ChainId) -> impl Iterator<Item = &mut Mastery> {
        self.masteries.range_mut((chain, String::new())..).take_while(move |((c, _), _)| *c == chain).map(|(_, m)| m)
    }

    /// The mastery that serves `key` of `g`, if this node masters it.
    pub(super) fn mastery_of(&self, g: &Group, key: &[u8]) -> Option<&Mastery> {
        self.masteries.get(&g.domain_key(key))
    }

    /// Builds the masteries the map gives this node: kept when only the step changed (its lease starts again
    /// with the next round), a takeover when the members changed, it was not master before, it may have
    /// missed a map in which another node was, or its domain gained every key without a pin.
    pub(super) fn adopt_masteries(&mut self, host: &mut Host, now: Time, out: &mut Fx) {
        let (me, continuous) = (self.me, self.continuous);
        let groups = &self.groups;
        let mine = |(chain, domain): &Domain| groups.get(chain).is_some_and(|g| g.master_in(domain) == Some(me));
        self.masteries.retain(|d, _| continuous && mine(d));
        let mut takeovers = Vec::new();
        for g in self.groups.values() {
            for (domain, _) in g.domains.all().filter(|&(_, m)| m == me) {
                let d = (g.chain, domain.to_string());
                match self.masteries.get_mut(&d) {
                    Some(m) if domain == g.domains.home && g.domains.home_moved_since(m.caught) => {
                        takeovers.push((g.clone(), d))
                    }
                    Some(m) if m.fence == g.fence => {}
                    Some(m) if m.fence.view == g.fence.view && matches!(m.phase, Phase::Ready) => m.restep(g.fence),
                    _ => takeovers.push((g.clone(), d)),
                }
            }
        }
        // Writes of a mastery that ends go back to their clients first: the takeover's own write-backs stay.
        self.masteries.retain(|d, _| !takeovers.iter().any(|(_, t)| t == d));
        self.bounce_stale_writes(host, out);
        for (g, d) in takeovers {
            let m = self.start_takeover(host, now, &g, &d.1, out);
            self.masteries.insert(d, m);
        }
    }

    /// Sends a heartbeat round to every member of the domains this node is master of.
    pub(super) fn heartbeat(&mut self, now: Time, out: &mut Fx) {
        let round = self.rounds.next;
        self.rounds.next += 1;
        let mut promised = BTreeMap::new();
        let mut beats: BTreeMap<NodeId, Vec<Beat>> = BTreeMap::new();
        self.grants.retain(|_, grants| grants.prune(now));
        for ((chain, domain), m) in self.masteries.iter_mut() {
            let Some(g) = self.groups.get(chain) else { continue };
            let mut by = BTreeSet::new();
            let early = planted_in(&self.cfg, LeasePlantedBug::PromisesMovedKeysEarly);
            if self.member.promise(g, domain, self.me, now, early) {
                by.insert(self.me);
            }
            let epoch = g.domains.epoch;
            promised.insert((*chain, domain.clone()), (m.fence, epoch, by));
            for to in g.writers().filter(|&n| n != self.me) {
                let recent = self.rounds.heard.get(&to).is_some_and(|&r| r + CONFIRM_ROUNDS >= round);
                let confirm = match m.lease_end(0) {
                    Some(until) if until > now && recent && g.holders.contains(&to) => until.since(now),
                    _ => std::time::Duration::ZERO,
                };
                if !confirm.is_zero() {
                    let grants = self.grants.entry((*chain, domain.clone())).or_default();
                    let w = grants.windows.entry(to).or_insert(now);
                    *w = (*w).max(now.plus(confirm));
                }
                let confirm_ns = confirm.as_nanos() as u64;
                let beat = Beat { chain: *chain, domain: domain.clone(), fence: m.fence, epoch, confirm_ns };
                beats.entry(to).or_default().push(beat);
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
        domains: Vec<Domain>,
        out: &mut Fx,
    ) {
        if incarnation != self.incarnation {
            return;
        }
        let heard = self.rounds.heard.entry(from).or_insert(round);
        *heard = (*heard).max(round);
        let Some(sent) = self.rounds.sent.get_mut(&round) else { return };
        for d in domains {
            if let Some((_, _, by)) = sent.promised.get_mut(&d) {
                by.insert(from);
            }
        }
        if self.count_promises(round) {
            // A lease that just began may let writes waiting for it go.
            self.drive_writes(host, now, out);
        }
    }

    /// Extends the lease of every domain a majority promised in `round`; says whether one began.
    fn count_promises(&mut self, round: u64) -> bool {
        let Some(Sent { at, promised }) = self.rounds.sent.get(&round) else { return false };
        let mut began = false;
        for (d, (fence, epoch, by)) in promised {
            let (Some(m), Some(g)) = (self.masteries.get_mut(d), self.groups.get(&d.0)) else { continue };
            if m.fence != *fence || by.iter().filter(|n| g.holders.contains(n)).count() < g.majority() {
                continue;
            }
            let until = at.plus(shrunk(PROMISE));
            began |= !m.leases.contains_key(epoch);
            let held = m.leases.entry(*epoch).or_insert(until);
            *held = (*held).max(until);
        }
        began
    }

    /// A master's heartbeat: confirmations and a promise for each domain this node holds in the same
    /// configuration and table with that master.
    pub(super) fn on_heartbeat(&mut self, now: Time, from: NodeId, hb: Heartbeat, out: &mut Fx) {
        self.member.start(now);
        let sent = self.member.sent.entry((from, hb.incarnation)).or_default();
        let anchor = hb.acked.and_then(|r| sent.get(&r).copied());
        if let Some(r) = hb.acked {
            sent.retain(|&round, _| round >= r);
        }
        let mut promised = Vec::new();
        for beat in hb.beats {
            self.member.outlived((beat.chain, &beat.domain), (from, hb.incarnation));
            let Some(g) = self.groups.get(&beat.chain) else { continue };
            let current = g.fence == beat.fence && g.domains.epoch == beat.epoch;
            if !current || g.master_in(&beat.domain) != Some(from) || !g.takes_part(self.me) {
                continue;
            }
            if let Some(at) = anchor.filter(|_| beat.confirm_ns > 0 && g.holders.contains(&self.me)) {
                let slow = if self.planted(LeasePlantedBug::ClockBeyondBound) { 20 } else { 1 };
                let until = shrunk_from(at, beat.confirm_ns * slow);
                self.member.confirm((beat.chain, &beat.domain), (from, hb.incarnation), until, now);
            }
            let early = self.planted(LeasePlantedBug::PromisesMovedKeysEarly);
            if self.member.promise(g, &beat.domain, from, now, early) {
                promised.push((beat.chain, beat.domain));
            }
        }
        self.member.sent.entry((from, hb.incarnation)).or_default().insert(hb.round, now);
        out.send(from, LeaseMsg::Promised { incarnation: hb.incarnation, round: hb.round, domains: promised });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::Domains;
    use meridian_core::LeaseOptions;
    use std::sync::Arc;

    /// A partition of n1 (home region "eu"), n2 ("us") and n3, with table `epoch` and `pins`.
    fn group_with(epoch: u64, pins: &[(&str, &str, u64)]) -> Group {
        let (chain, fence) = (ChainId(0), Fence { view: 1, step: 0 });
        let holders = vec![NodeId(1), NodeId(2), NodeId(3)];
        let masters = [("eu", NodeId(1)), ("us", NodeId(2))];
        let domains = Arc::new(Domains::for_test("eu", &masters, epoch, pins));
        Group { chain, fence, holders, joiner: None, domains, opts: LeaseOptions::default() }
    }

    fn group() -> Group {
        group_with(0, &[])
    }

    fn at(ms: u64) -> Time {
        Time::from_nanos(ms * 1_000_000)
    }

    const HOME: &str = "eu";

    /// A lease counts only within the run of confirmations it began in: once they lapse, a confirmation that
    /// comes later starts a new run, and the master may have written past this replica in between.
    #[test]
    fn a_lease_is_void_once_the_confirmations_it_began_under_lapse() {
        let (g, key) = (group(), Bytes::from_static(b"k"));
        let mut m = Member::new(false);
        let master = (NodeId(1), 7);
        m.confirm((g.chain, HOME), master, at(1_000), at(0));
        let run = m.run(&g, HOME, at(10)).expect("confirmed");
        m.lease((g.chain, key.clone()), Lease::new(NodeId(1), run, at(0), at(60_000)));
        assert!(m.serves(&g, &key, at(500)));
        assert!(!m.expired(&g, &key, at(500)) && m.expired(&g, &key, at(60_000)), "expired once run out");
        m.confirm((g.chain, HOME), master, at(1_500), at(900));
        assert!(m.serves(&g, &key, at(1_200)), "the same run, extended");
        assert!(!m.serves(&g, &key, at(1_600)), "unconfirmed");
        m.confirm((g.chain, HOME), master, at(4_000), at(2_000));
        assert!(m.confirmed(&g, at(2_100)) && !m.serves(&g, &key, at(2_100)), "a new run: the lease is void");
        let run = m.run(&g, HOME, at(2_200)).unwrap();
        m.lease((g.chain, key.clone()), Lease::new(NodeId(1), run, at(0), at(60_000)));
        m.confirm((g.chain, HOME), (NodeId(1), 8), at(5_000), at(2_300));
        assert!(!m.serves(&g, &key, at(2_400)), "the master restarted without its records: a new run");
    }

    /// A heartbeat from a new run of the master's process ends the old run's confirmations, and with them the
    /// leases held under it, even when it confirms nothing yet; one from the same run changes nothing.
    #[test]
    fn a_new_run_of_the_masters_process_voids_the_old_runs_leases() {
        let (g, key) = (group(), Bytes::from_static(b"k"));
        let mut m = Member::new(false);
        m.confirm((g.chain, HOME), (NodeId(1), 7), at(2_000), at(0));
        let run = m.run(&g, HOME, at(1)).unwrap();
        m.lease((g.chain, key.clone()), Lease::new(NodeId(1), run, at(0), at(60_000)));
        m.outlived((g.chain, HOME), (NodeId(1), 7));
        assert!(m.serves(&g, &key, at(10)), "the same run");
        m.outlived((g.chain, HOME), (NodeId(2), 9));
        assert!(m.serves(&g, &key, at(10)), "another master's heartbeat");
        m.outlived((g.chain, HOME), (NodeId(1), 8));
        assert!(!m.serves(&g, &key, at(10)), "the master restarted: its records of this lease are gone");
    }

    /// A lease pushed with a write is held only if the commit names this replica, and a pushed version is not
    /// answered until committed.
    #[test]
    fn a_pushed_lease_counts_only_once_its_commit_names_the_replica() {
        let (g, key) = (group(), Bytes::from_static(b"k"));
        let mut m = Member::new(false);
        m.confirm((g.chain, HOME), (NodeId(1), 7), at(10_000), at(0));
        let lease = Lease::new(NodeId(1), m.run(&g, HOME, at(1)).unwrap(), at(1), at(60_000));
        m.pushed((g.chain, key.clone()), 7, Some(lease));
        assert!(!m.serves(&g, &key, at(2)), "offered, not held");
        m.committed(g.chain, &key, 7, None);
        assert!(!m.serves(&g, &key, at(3)), "the master recorded no lease for it");
        m.pushed((g.chain, key.clone()), 9, Some(lease));
        m.committed(g.chain, &key, 9, Some(at(0)));
        assert!(!m.serves(&g, &key, at(3)), "the master recorded another lease: an earlier push's");
        m.pushed((g.chain, key.clone()), 9, Some(lease));
        m.pushed((g.chain, key.clone()), 11, None);
        m.committed(g.chain, &key, 9, Some(at(1)));
        assert!(!m.serves(&g, &key, at(4)), "held, but version 11 awaits its commit");
        m.committed(g.chain, &key, 11, None);
        assert!(m.serves(&g, &key, at(5)));
    }

    /// A replica withholds its lease on a key from when it sends a write of it until the write's push arrives,
    /// or until it takes a lease begun then or later; an offer or a renewal begun before ends nothing.
    #[test]
    fn a_replica_withholds_its_lease_while_its_own_write_is_on_its_way() {
        let (g, key) = (group(), Bytes::from_static(b"k"));
        let k = (g.chain, key.clone());
        let mut m = Member::new(false);
        m.confirm((g.chain, HOME), (NodeId(1), 7), at(100_000), at(0));
        let run = m.run(&g, HOME, at(1)).unwrap();
        let lease = |since| Lease::new(NodeId(1), run, at(since), at(since + 60_000));
        m.lease(k.clone(), lease(10));
        m.pushed(k.clone(), 3, Some(lease(15)));
        m.withhold(k.clone(), at(20));
        m.withhold(k.clone(), at(25));
        m.committed(g.chain, &key, 3, Some(at(15)));
        m.lease(k.clone(), lease(19));
        assert!(!m.serves(&g, &key, at(30)) && m.parks(&g, &key, at(30)), "an offer, a renewal begun before");
        m.extend(&k, NodeId(1), run, at(90_000));
        assert!(m.withholds(&k, at(20)), "an extension begins nothing");
        m.unwithhold(&k, at(20));
        assert!(!m.serves(&g, &key, at(31)), "the write sent at 25 is still on its way");
        m.lease(k.clone(), lease(25));
        assert!(m.serves(&g, &key, at(80_000)), "a lease begun when it was sent, lengthened by the extension");
        m.withhold(k.clone(), at(30));
        m.drop_lease(&k);
        m.forget_withheld(|_| true);
        assert!(m.pending(&k), "a parked read awaits it");
        m.forget_withheld(|_| false);
        assert!(!m.pending(&k), "with no lease nor offer, nothing begun before is held again");
    }

    /// The master leaves out of a write the replica that withheld its lease when it sent it, unless it recorded
    /// a lease of that replica that began then or after; other replicas' leases count as before, and an
    /// extension begins nothing.
    #[test]
    fn a_write_waits_for_the_replica_it_came_from_only_by_a_later_lease() {
        let key = Bytes::from_static(b"k");
        let mut grants = Grants::default();
        grants.windows.insert(NodeId(2), at(10_000));
        grants.windows.insert(NodeId(3), at(10_000));
        grants.record(&key, NodeId(2), at(5), at(60_000));
        grants.record(&key, NodeId(3), at(5), at(60_000));
        let withheld = Some(Withheld { node: NodeId(2), at: at(7) });
        assert_eq!(grants.holders_of(&key, at(100), None), vec![NodeId(2), NodeId(3)]);
        assert_eq!(grants.holders_of(&key, at(100), withheld), vec![NodeId(3)], "n2 withholds its lease");
        grants.extend(&key, NodeId(2), at(70_000));
        assert_eq!(grants.holders_of(&key, at(100), withheld), vec![NodeId(3)], "extended, not begun again");
        grants.record(&key, NodeId(2), at(7), at(60_000));
        assert_eq!(grants.holders_of(&key, at(100), withheld), vec![NodeId(2), NodeId(3)], "a lease begun then");
    }

    /// A replica asks to extend the leases it answered reads under once they end within the window given, each
    /// once until read again; an answer from an older run of confirmations never replaces a lease of a newer one.
    #[test]
    fn leases_read_under_are_asked_to_be_extended_once_as_they_near_their_end() {
        let (g, key) = (group(), Bytes::from_static(b"k"));
        let (k, other) = ((g.chain, key.clone()), (g.chain, Bytes::from_static(b"unread")));
        let mut m = Member::new(false);
        m.confirm((g.chain, HOME), (NodeId(1), 7), at(100_000), at(0));
        let run = m.run(&g, HOME, at(1)).unwrap();
        m.lease(k.clone(), Lease::new(NodeId(1), run, at(0), at(60_000)));
        m.lease(other.clone(), Lease::new(NodeId(1), run, at(0), at(60_000)));
        let soon = |_: &Key| Some(std::time::Duration::from_secs(15));
        m.read_under(&k);
        assert!(m.due(at(40_000), soon).is_empty(), "not near its end yet");
        let due: Vec<Key> = m.due(at(50_000), soon).into_iter().map(|(k, _)| k).collect();
        assert_eq!(due, vec![k.clone()], "only the lease read under");
        assert!(m.due(at(50_200), soon).is_empty(), "asked once until read again");
        m.lease(k.clone(), Lease::new(NodeId(1), run, at(50_000), at(110_000)));
        assert!(m.serves(&g, &key, at(70_000)), "extended");
        m.confirm((g.chain, HOME), (NodeId(1), 8), at(200_000), at(100_000));
        let newer = m.run(&g, HOME, at(100_001)).unwrap();
        m.lease(k.clone(), Lease::new(NodeId(1), newer, at(100_001), at(160_000)));
        m.lease(k.clone(), Lease::new(NodeId(1), run, at(100_002), at(170_000)));
        assert!(m.serves(&g, &key, at(150_000)), "the newer run's lease stays");
    }

    /// A member promises one master at a time per domain, and one that ran before promises nothing until a
    /// promise's length after its start.
    #[test]
    fn a_member_promises_one_master_at_a_time_and_keeps_quiet_after_a_restart() {
        let g = group();
        let mut m = Member::new(false);
        assert!(m.promise(&g, HOME, NodeId(1), at(0), false));
        assert!(!m.promise(&g, HOME, NodeId(2), at(1_999), false), "promised to n1");
        assert!(m.promise(&g, "us", NodeId(2), at(1_000), false), "another domain, which gained nothing");
        assert!(m.promise(&g, HOME, NodeId(1), at(1_000), false), "n1 again");
        assert!(m.promise(&g, HOME, NodeId(2), at(3_001), false), "n1's promise ran out");
        let mut restarted = Member::new(true);
        restarted.start(at(100));
        assert!(!restarted.promise(&g, HOME, NodeId(1), at(2_099), false));
        assert!(restarted.promise(&g, HOME, NodeId(1), at(2_100), false));
    }

    /// A domain that gained a key at epoch 5 is promised only once every promise given before epoch 5 to
    /// another domain ran out: that domain's master may still serve the key.
    #[test]
    fn a_domain_that_gained_keys_waits_out_older_promises_to_other_domains() {
        let mut m = Member::new(false);
        assert!(m.promise(&group_with(4, &[]), HOME, NodeId(1), at(0), false));
        let moved = group_with(5, &[("k", "us", 5)]);
        assert!(!m.promise(&moved, "us", NodeId(2), at(100), false), "eu's master may still serve k");
        assert!(m.promise(&moved, HOME, NodeId(1), at(200), false), "eu gained nothing");
        assert!(!m.promise(&moved, "us", NodeId(2), at(1_999), false), "the epoch-4 promise still holds");
        assert!(m.promise(&moved, "us", NodeId(2), at(2_000), false), "only the epoch-5 one is left");
    }
}
