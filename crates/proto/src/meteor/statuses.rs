//! Status messages (seed 001 §4.2.2, Fig. 4.13): every status interval a replica tells each peer that shares a
//! partition with it which versions it took since, as of the moment it sends, on its clock; the peer keeps a
//! view of each of its partitions there, from which it answers reads without asking (`reads.rs`).
//!
//! A read may count a view only while it is whole: it holds every version the sender had taken before the
//! view's last status was sent. So the stream must lose nothing a receiver relies on, over links that drop,
//! delay and reorder messages and nodes that restart:
//! - A view starts with pages of the sender's versions of the partition (`PageReq`, `Page`), asked once the
//!   receiver's map shows the partition shared. Asking makes the receiver a follower: every change the sender
//!   takes from then on is owed to it. The view is whole once a status sent after the last page is taken.
//! - A change is owed until the receiver acknowledges a status that carried it. It rides in the next
//!   `redundancy` statuses (the keyspaces' knob); a status carries every change first carried after its
//!   `covers_from`, so a receiver whole up to `covers_from` is whole up to the status. One that is not says so in its next
//!   acknowledgement (`gap`), and the sender's next status carries everything owed since that acknowledgement.
//! - A status names its sender's run: a receiver that sees another run starts its views again, and an
//!   acknowledgement names the receiver's run, so one from an earlier run drops nothing owed to the new one.
//! - Each partition's configuration ([`Fence`]) travels the same way: a receiver counts the sender in a read
//!   only in the configuration the read was sent in, as a quorum replica answers only in its own.
//!
//! A view keeps the sender's version of every key of the partition (not the values: a read that needs a value
//! it lacks fetches it from a replica that has it).

use super::msg::{Ack, Page, Status};
use crate::versioned::Fence;
use bytes::Bytes;
use meridian_core::{ChainId, NodeId, Violation};
use std::collections::{BTreeMap, BTreeSet};

/// An idle peer (nothing to carry to it, nothing to acknowledge at once, no reads waiting on either side) gets a
/// status every this many intervals rather than every one: about 40 bytes ten times a second at 10 ms.
pub const IDLE_EVERY: u32 = 10;
/// How many intervals a peer that said it has reads waiting keeps getting a status every interval: long enough
/// that a keyspace read now and then answers its reads within one interval and one one-way trip, rather than
/// first paying a one-way trip to ask.
pub const EAGER_FOR: u32 = 100;
/// Most versions in a page.
pub const PAGE_MAX: usize = 512;

/// What this node owes one peer.
#[derive(Debug, Default)]
struct Outbox {
    /// The last status sent.
    seq: u64,
    /// Each changed key's newest version, with the first status that carries it, until acknowledged.
    versions: BTreeMap<(ChainId, Bytes), (u64, u64)>,
    /// Each partition's configuration here, the same way.
    fences: BTreeMap<ChainId, (Fence, u64)>,
    /// The peer's newest acknowledgement, of its newest run.
    ack: Option<Ack>,
    /// Intervals left in which the peer gets a status every interval: it recently had reads waiting on this node.
    eager: u32,
    /// Intervals since the last status went to the peer.
    skipped: u32,
}

impl Outbox {
    /// Owes `value` of `key` to the peer from the next status on (a newer value replaces one still owed).
    fn owe<K: Ord, V>(owed: &mut BTreeMap<K, (V, u64)>, next: u64, key: K, value: V) {
        owed.insert(key, (value, next));
    }

    /// The sequence number after which the next status must carry every change: the last `redundancy`
    /// statuses' share, or everything since the peer's acknowledgement if it said it missed some.
    fn covers_from(&self, seq: u64, redundancy: u64) -> u64 {
        match self.ack {
            Some(a) if a.gap => a.seq.min(seq.saturating_sub(redundancy)),
            _ => seq.saturating_sub(redundancy),
        }
    }
}

/// What this node knows of one peer's partitions.
#[derive(Debug, Default)]
struct Inbox {
    /// The peer's run the views are of.
    incarnation: u64,
    /// The last status up to which the views are whole, and when it was sent on the peer's clock.
    seq: u64,
    sent_ms: u64,
    /// A status came that did not cover what the views missed.
    gap: bool,
    views: BTreeMap<ChainId, View>,
}

/// One peer's partition as this node knows it.
#[derive(Debug)]
struct View {
    /// While paging, the last key taken so far (None: no page yet); None once the last page came.
    paging: Option<Option<Bytes>>,
    /// The last status the peer had sent when it took a page: the view is whole once a later one is.
    page_seq: u64,
    fence: Option<Fence>,
    versions: BTreeMap<Bytes, u64>,
}

impl View {
    fn new() -> View {
        View { paging: Some(None), page_seq: 0, fence: None, versions: BTreeMap::new() }
    }

    fn merge(&mut self, key: &Bytes, version: u64) {
        let held = self.versions.entry(key.clone()).or_default();
        *held = (*held).max(version);
    }
}

/// What a peer's statuses say of one key: its version and the peer's configuration of the partition, as of
/// `sent_ms` on the peer's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    pub version: u64,
    pub fence: Fence,
    pub sent_ms: u64,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct StatusStats {
    pub sent: u64,
    pub received: u64,
    /// Their size as encoded, sent and taken.
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Versions and configurations carried, sent and taken.
    pub entries_sent: u64,
    pub entries_received: u64,
    /// Statuses that could not be taken whole (changes missed) and views started again (a peer's new run).
    pub gaps: u64,
    pub restarts: u64,
    pub pages: u64,
}

/// Both directions of every peer's status stream.
#[derive(Debug)]
pub struct Statuses {
    incarnation: u64,
    outboxes: BTreeMap<NodeId, Outbox>,
    /// The peers that asked for each partition's changes here.
    followers: BTreeMap<ChainId, BTreeSet<NodeId>>,
    inboxes: BTreeMap<NodeId, Inbox>,
    /// This node's configuration of each partition it shares, as last owed to the followers.
    fences: BTreeMap<ChainId, Fence>,
    /// How many statuses in a row carry a change before it is left to the receiver's acknowledgement: the most
    /// the keyspaces of the shared partitions ask for.
    redundancy: u64,
    pub stats: StatusStats,
}

impl Statuses {
    pub fn new(incarnation: u64) -> Statuses {
        Statuses {
            incarnation,
            outboxes: BTreeMap::new(),
            followers: BTreeMap::new(),
            inboxes: BTreeMap::new(),
            fences: BTreeMap::new(),
            redundancy: 1,
            stats: StatusStats::default(),
        }
    }

    /// Follows the map: `shared` names, per peer, the partitions it shares with this node, each with this
    /// node's configuration of it, and `redundancy` the statuses in a row that carry a change. Views of
    /// partitions newly shared start paging; those no longer shared go, and so does a follower the map no longer
    /// has in a partition, once told of the new configuration.
    pub fn adopt(&mut self, shared: &BTreeMap<NodeId, BTreeMap<ChainId, Fence>>, redundancy: u64) {
        self.redundancy = redundancy.max(1);
        for (&peer, chains) in shared {
            let inbox = self.inboxes.entry(peer).or_default();
            inbox.views.retain(|c, _| chains.contains_key(c));
            for &c in chains.keys() {
                inbox.views.entry(c).or_insert_with(View::new);
            }
        }
        self.inboxes.retain(|peer, _| shared.contains_key(peer));
        let mut fences: BTreeMap<ChainId, Fence> = BTreeMap::new();
        shared.values().for_each(|chains| fences.extend(chains));
        for (c, followers) in &mut self.followers {
            let moved = fences.get(c).filter(|&f| self.fences.get(c) != Some(f));
            for (peer, &fence) in followers.iter().flat_map(|p| moved.map(|f| (p, f))) {
                let o = self.outboxes.entry(*peer).or_default();
                Outbox::owe(&mut o.fences, o.seq + 1, *c, fence);
            }
            followers.retain(|peer| shared.get(peer).is_some_and(|chains| chains.contains_key(c)));
        }
        self.fences = fences;
        self.followers.retain(|_, f| !f.is_empty());
        for &peer in shared.keys() {
            self.outboxes.entry(peer).or_default();
        }
        self.outboxes.retain(|peer, _| shared.contains_key(peer));
    }

    /// This node's replica of `chain` took `version` of `key`: owed to every follower of the partition.
    pub fn changed(&mut self, chain: ChainId, key: &Bytes, version: u64) {
        for peer in self.followers.get(&chain).into_iter().flatten() {
            let o = self.outboxes.get_mut(peer).expect("a follower has an outbox");
            Outbox::owe(&mut o.versions, o.seq + 1, (chain, key.clone()), version);
        }
    }

    /// The statuses due at this interval, sent at `now_ms` on this node's clock: to every peer that is owed
    /// something, had reads waiting on this node in the last [`EAGER_FOR`] intervals, must hear of a gap, or is
    /// named in `wanting` (reads here wait on it); to the others every [`IDLE_EVERY`] intervals.
    pub fn next(&mut self, now_ms: u64, wanting: &BTreeSet<NodeId>) -> Vec<(NodeId, Status)> {
        let mut sent = Vec::with_capacity(self.outboxes.len());
        for (&peer, o) in &mut self.outboxes {
            let covers_from = o.covers_from(o.seq + 1, self.redundancy);
            let carries = |since: u64| since > covers_from;
            let owed = o.versions.values().any(|(_, s)| carries(*s)) || o.fences.values().any(|(_, s)| carries(*s));
            let gap = self.inboxes.get(&peer).is_some_and(|i| i.gap);
            let want = wanting.contains(&peer);
            o.skipped += 1;
            let eager = o.eager > 0;
            o.eager = o.eager.saturating_sub(1);
            if !(owed || gap || want || eager || o.skipped >= IDLE_EVERY) {
                continue;
            }
            o.skipped = 0;
            o.seq += 1;
            let changes: Vec<(ChainId, Bytes, u64)> = (o.versions.iter())
                .filter(|(_, (_, since))| carries(*since))
                .map(|((c, k), (v, _))| (*c, k.clone(), *v))
                .collect();
            let fences: Vec<(ChainId, Fence)> =
                o.fences.iter().filter(|(_, (_, since))| carries(*since)).map(|(c, (f, _))| (*c, *f)).collect();
            let ack = self.inboxes.get(&peer).map(|i| Ack { of: i.incarnation, seq: i.seq, gap: i.gap });
            self.stats.entries_sent += (changes.len() + fences.len()) as u64;
            let status = Status {
                incarnation: self.incarnation,
                seq: o.seq,
                covers_from,
                sent_ms: now_ms,
                ack,
                changes,
                fences,
                want,
            };
            self.stats.sent += 1;
            self.stats.bytes_sent += encoded_size(&status);
            sent.push((peer, status));
        }
        sent
    }

    /// A peer's status: takes its acknowledgement, and its changes into the views. Returns whether the views
    /// of it moved on (reads waiting for newer statuses may now be answered).
    pub fn on_status(&mut self, from: NodeId, s: Status) -> bool {
        self.stats.received += 1;
        self.stats.bytes_received += encoded_size(&s);
        if let Some(o) = self.outboxes.get_mut(&from) {
            if s.want {
                o.eager = EAGER_FOR;
            }
            if let Some(a) = s.ack.filter(|a| a.of == self.incarnation) {
                o.versions.retain(|_, (_, since)| *since > a.seq);
                o.fences.retain(|_, (_, since)| *since > a.seq);
                o.ack = Some(a);
            }
        }
        self.learn_run(from, s.incarnation);
        let Some(inbox) = self.inboxes.get_mut(&from).filter(|i| i.incarnation == s.incarnation) else { return false };
        if s.seq <= inbox.seq {
            return false;
        }
        self.stats.entries_received += (s.changes.len() + s.fences.len()) as u64;
        for (c, key, version) in &s.changes {
            if let Some(view) = inbox.views.get_mut(c) {
                view.merge(key, *version);
            }
        }
        for (c, fence) in &s.fences {
            if let Some(view) = inbox.views.get_mut(c) {
                view.fence = Some(*fence);
            }
        }
        inbox.gap = s.covers_from > inbox.seq;
        if inbox.gap {
            self.stats.gaps += 1;
            return false;
        }
        inbox.seq = s.seq;
        inbox.sent_ms = inbox.sent_ms.max(s.sent_ms);
        true
    }

    /// A peer asks for this node's versions of `chain`: from now on it follows the partition's changes here.
    pub fn follow(&mut self, peer: NodeId, chain: ChainId) -> u64 {
        self.followers.entry(chain).or_default().insert(peer);
        self.outboxes.entry(peer).or_default().seq
    }

    /// A page of a peer's versions: taken if it is the one the view waits for.
    pub fn on_page(&mut self, from: NodeId, page: Page) {
        self.learn_run(from, page.incarnation);
        let Some(inbox) = self.inboxes.get_mut(&from).filter(|i| i.incarnation == page.incarnation) else { return };
        let Some(view) = inbox.views.get_mut(&page.chain).filter(|v| v.paging.as_ref() == Some(&page.after)) else {
            return;
        };
        self.stats.pages += 1;
        page.versions.iter().for_each(|(key, version)| view.merge(key, *version));
        view.page_seq = view.page_seq.max(page.seq);
        view.fence = view.fence.max(Some(page.fence));
        view.paging = match page.versions.last() {
            Some((key, _)) if page.more => Some(Some(key.clone())),
            _ if page.more => Some(page.after),
            _ => None,
        };
    }

    /// A peer's run, as its statuses name it: another one starts its views again (its statuses count from 1, and
    /// it owes this node nothing of what the run before owed). Runs are numbered at random, not in order; a late
    /// message of an earlier run only starts the views once more.
    fn learn_run(&mut self, from: NodeId, incarnation: u64) {
        if let Some(inbox) = self.inboxes.get_mut(&from).filter(|i| i.incarnation != incarnation) {
            self.stats.restarts += u64::from(inbox.incarnation != 0);
            let views = inbox.views.keys().map(|&c| (c, View::new())).collect();
            *inbox = Inbox { incarnation, views, ..Inbox::default() };
        }
    }

    /// The pages to ask for: the next of every view still paging.
    pub fn page_requests(&self) -> Vec<(NodeId, ChainId, Option<Bytes>)> {
        let mut all = Vec::new();
        for (&peer, inbox) in &self.inboxes {
            all.extend(inbox.views.iter().filter_map(|(&c, v)| Some((peer, c, v.paging.clone()?))));
        }
        all
    }

    /// What `peer`'s statuses say of `key` of `chain`, if its view is whole.
    pub fn seen(&self, peer: NodeId, chain: ChainId, key: &[u8]) -> Option<Seen> {
        let inbox = self.inboxes.get(&peer)?;
        let view = inbox.views.get(&chain).filter(|v| v.paging.is_none() && inbox.seq > v.page_seq)?;
        let version = view.versions.get(key).copied().unwrap_or(0);
        Some(Seen { version, fence: view.fence?, sent_ms: inbox.sent_ms })
    }

    /// The peers this node shares partitions with.
    pub fn peers(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.outboxes.keys().copied()
    }

    /// The invariants of the streams: every follower has an outbox, and no view is whole without a fence.
    pub fn check(&self) -> Result<(), Violation> {
        for (c, followers) in &self.followers {
            if let Some(peer) = followers.iter().find(|p| !self.outboxes.contains_key(p)) {
                return Err(format!("{peer} follows {c} with no outbox").into());
            }
        }
        for (peer, inbox) in &self.inboxes {
            for (c, v) in &inbox.views {
                if v.paging.is_none() && v.fence.is_none() {
                    return Err(format!("the view of {peer}'s {c} is paged but has no configuration").into());
                }
            }
        }
        Ok(())
    }
}

fn encoded_size(s: &Status) -> u64 {
    postcard::experimental::serialized_size(s).map_or(0, |n| n as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: ChainId = ChainId(0);
    /// The statuses in a row that carry a change, the default.
    const REDUNDANCY: u64 = 2;
    const F: Fence = Fence { view: 1, step: 0 };

    fn key(k: &str) -> Bytes {
        Bytes::from(k.to_string())
    }

    /// Two nodes sharing partition C, node 2's view of node 1 paged (empty) and so waiting for a status.
    fn pair() -> (Statuses, Statuses) {
        let shared = |peer| BTreeMap::from([(NodeId(peer), BTreeMap::from([(C, F)]))]);
        let (mut one, mut two) = (Statuses::new(7), Statuses::new(9));
        one.adopt(&shared(2), REDUNDANCY);
        two.adopt(&shared(1), REDUNDANCY);
        assert_eq!(two.page_requests(), [(NodeId(1), C, None)]);
        let seq = one.follow(NodeId(2), C);
        let page = Page { incarnation: 7, chain: C, after: None, seq, fence: F, versions: vec![], more: false };
        two.on_page(NodeId(1), page);
        assert!(two.page_requests().is_empty());
        assert_eq!(two.seen(NodeId(1), C, b"k"), None, "whole only once a status after the page came");
        (one, two)
    }

    fn status_to(from: &mut Statuses, to: NodeId, now_ms: u64) -> Status {
        from.next(now_ms, &BTreeSet::from([to])).into_iter().find(|(n, _)| *n == to).expect("a status for the peer").1
    }

    #[test]
    fn a_change_rides_a_few_statuses_and_a_receiver_that_missed_them_asks_for_all() {
        let (mut one, mut two) = pair();
        one.changed(C, &key("k"), 5);
        let first = status_to(&mut one, NodeId(2), 100);
        assert_eq!(first.changes, [(C, key("k"), 5)]);
        assert!(two.on_status(NodeId(1), first));
        assert_eq!(two.seen(NodeId(1), C, b"k"), Some(Seen { version: 5, fence: F, sent_ms: 100 }));

        one.changed(C, &key("k"), 8);
        let lost: Vec<Status> = (0..=REDUNDANCY).map(|i| status_to(&mut one, NodeId(2), 110 + i)).collect();
        assert!(lost[..REDUNDANCY as usize].iter().all(|s| s.changes == [(C, key("k"), 8)]));
        assert!(lost[REDUNDANCY as usize].changes.is_empty(), "left to the acknowledgement after {REDUNDANCY}");
        let late = status_to(&mut one, NodeId(2), 150);
        assert!(!two.on_status(NodeId(1), late), "it missed a change: not whole");
        assert_eq!(two.seen(NodeId(1), C, b"k").unwrap().sent_ms, 100, "still the last whole status");

        let ack = status_to(&mut two, NodeId(1), 151);
        assert!(ack.ack.is_some_and(|a| a.gap && a.of == 7));
        one.on_status(NodeId(2), ack);
        let again = status_to(&mut one, NodeId(2), 160);
        assert_eq!(again.changes, [(C, key("k"), 8)], "everything owed since the acknowledgement");
        assert!(two.on_status(NodeId(1), again));
        assert_eq!(two.seen(NodeId(1), C, b"k"), Some(Seen { version: 8, fence: F, sent_ms: 160 }));

        let ack = status_to(&mut two, NodeId(1), 161);
        one.on_status(NodeId(2), ack);
        assert!(status_to(&mut one, NodeId(2), 170).changes.is_empty(), "acknowledged: owed no more");
    }

    /// Two replicas sharing an idle partition of a million keys exchange under 1 KB/s: statuses carry only
    /// changes, and with none to carry and no reads waiting they go every `IDLE_EVERY` intervals.
    #[test]
    fn an_idle_partition_of_a_million_keys_costs_under_a_kilobyte_a_second() {
        let (mut one, mut two) = pair();
        let versions: Vec<(Bytes, u64)> =
            (0..1_000_000u64).map(|i| (key(&format!("key{i:07}")), i << 16 | 1)).collect();
        let seq = two.follow(NodeId(1), C);
        one.on_page(NodeId(2), Page { incarnation: 9, chain: C, after: None, seq, fence: F, versions, more: false });
        let (interval_ms, seconds) = (10, 10);
        for tick in 0..seconds * 1000 / interval_ms {
            let now = 1_000 + tick * interval_ms;
            let (from_one, from_two) = (one.next(now, &BTreeSet::new()), two.next(now, &BTreeSet::new()));
            for (to, status) in from_one.into_iter().chain(from_two) {
                let (receiver, from) = if to == NodeId(2) { (&mut two, NodeId(1)) } else { (&mut one, NodeId(2)) };
                receiver.on_status(from, status);
            }
        }
        let seen = one.seen(NodeId(2), C, b"key0999999").expect("a whole view");
        assert_eq!(seen.version, 999_999 << 16 | 1);
        let bytes = one.stats.bytes_sent + two.stats.bytes_sent;
        assert_eq!(bytes, one.stats.bytes_received + two.stats.bytes_received, "none lost");
        assert!(bytes / seconds < 1_000, "{} B/s for the pair", bytes / seconds);
    }

    /// What a replica's statuses to one peer cost as keys are written: each changed key rides in up to
    /// `REDUNDANCY` statuses (fewer once acknowledged) with its version, so the cost grows by about that many
    /// times a key and a version per key written, over a floor of a status per interval (the peer keeps getting
    /// them while changes flow). Keys of 14 bytes, statuses every 10 ms, acknowledged by the next status back.
    #[test]
    fn status_bytes_grow_with_the_keys_written_per_interval() {
        let mut per_second = Vec::new();
        for written in [0u64, 1, 10, 100] {
            let (mut one, mut two) = pair();
            for tick in 0..100u64 {
                for k in 0..written {
                    one.changed(C, &key(&format!("user{:010}", tick * written + k)), tick << 16 | 1);
                }
                let now = 1_000 + tick * 10;
                for (_, status) in one.next(now, &BTreeSet::new()) {
                    two.on_status(NodeId(1), status);
                }
                for (_, status) in two.next(now, &BTreeSet::new()) {
                    one.on_status(NodeId(2), status);
                }
            }
            per_second.push((written, one.stats.bytes_sent));
            println!("{written:>4} keys written per interval: {} B/s of statuses to the peer", one.stats.bytes_sent);
        }
        let bytes_per_key = |w: u64| {
            let (idle, busy) = (per_second[0].1, per_second.iter().find(|(n, _)| *n == w).unwrap().1);
            (busy - idle) as f64 / (w * 100) as f64
        };
        for w in [10, 100] {
            let per_key = bytes_per_key(w);
            assert!((14.0..=REDUNDANCY as f64 * 30.0).contains(&per_key), "{per_key:.1} B per key written at {w}");
        }
    }

    #[test]
    fn a_new_run_starts_the_views_again_and_old_acknowledgements_drop_nothing() {
        let (mut one, mut two) = pair();
        assert!(two.on_status(NodeId(1), status_to(&mut one, NodeId(2), 100)));
        let mut restarted = Statuses::new(8);
        restarted.adopt(&BTreeMap::from([(NodeId(2), BTreeMap::from([(C, F)]))]), REDUNDANCY);
        two.on_status(NodeId(1), status_to(&mut restarted, NodeId(2), 200));
        assert_eq!(two.seen(NodeId(1), C, b"k"), None, "its views page again");
        assert_eq!(two.page_requests(), [(NodeId(1), C, None)]);

        restarted.follow(NodeId(2), C);
        restarted.changed(C, &key("k"), 3);
        let stale_ack = Status { ack: Some(Ack { of: 7, seq: 99, gap: false }), ..status_to(&mut two, NodeId(1), 201) };
        restarted.on_status(NodeId(2), stale_ack);
        assert_eq!(status_to(&mut restarted, NodeId(2), 210).changes, [(C, key("k"), 3)], "acked for another run");
    }

    #[test]
    fn a_partition_that_moves_tells_its_followers_even_those_it_drops() {
        let (mut one, mut two) = pair();
        let (moved, other) = (Fence { view: 2, step: 0 }, ChainId(1));
        let shared = [(NodeId(2), BTreeMap::from([(other, F)])), (NodeId(3), BTreeMap::from([(C, moved)]))];
        one.adopt(&BTreeMap::from(shared), REDUNDANCY);
        let told = status_to(&mut one, NodeId(2), 100);
        assert_eq!(told.fences, [(C, moved)], "the dropped follower hears of the new configuration");
        assert!(two.on_status(NodeId(1), told));
        assert_eq!(two.seen(NodeId(1), C, b"k").map(|s| s.fence), Some(moved));
        one.changed(C, &key("k"), 4);
        assert!(status_to(&mut one, NodeId(3), 101).changes.is_empty(), "node 3 follows nothing yet");
    }
}
