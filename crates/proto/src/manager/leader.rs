//! What the manager's leader keeps in memory for its term: when it last heard from each node (failure
//! detection, seed 003 §2.6), the newest map epoch each node reported, the tail leases it granted, and the
//! proposals it has in flight.
//!
//! **Lease fencing.** Leases go to each chain's tail, to its query node (the member its keyspace reads from, if not the
//! tail) and to a head that acknowledges writes (`au`, `ausi`). A new tail may answer clients only once no older tail
//! of the chain can: otherwise a deposed tail that has not heard of its removal keeps serving reads of a history the
//! new tail moves past. The leader grants a lease for a chain at its current view only if every lease it granted for
//! another view has expired or its holder has reported the epoch that made the current tail the tail (it then knows the
//! new view and serves no older one; when other members hold leases too, the epoch that made the current members,
//! [`ClusterMap::fence_epoch`]), and, early in a term, only once every node has reported that epoch (to it, or to an
//! earlier leader that passed it on: [`Inheritance`]) or leases from earlier leaders have surely expired: a deposed
//! leader may grant until it notices it lost its quorum, two election timeouts at most, and its leases last one lease
//! term after that. In Raft's first term there was no earlier leader, so nothing to wait for.

use crate::map::{ChainChange, ChainView, ClusterMap};
use meridian_core::time::DRIFT_MAX_PPM;
use meridian_core::{ChainId, NodeId, Time};
use std::collections::BTreeMap;
use std::time::Duration;

/// Raft's first term with a leader: no earlier leader can have granted a lease.
const FIRST_TERM: u64 = 1;

/// Leases and fences are counted generously: a lease granted here is held for half its term by the node,
/// and every wait on this side is stretched by this factor on top of the clock drift bound.
const SAFETY: f64 = 1.1;

#[derive(Clone, Copy, Debug)]
struct Grant {
    holder: NodeId,
    view: u64,
    at: Time,
}

#[derive(Debug)]
pub struct Leadership {
    pub term: u64,
    since: Time,
    heard: BTreeMap<NodeId, Time>,
    reported: BTreeMap<NodeId, u64>,
    grants: BTreeMap<ChainId, Vec<Grant>>,
    /// Encoded commands proposed in this term and when, so each is proposed again only after `retry`.
    proposed: BTreeMap<Vec<u8>, Time>,
    /// The replicas each node last reported lost: (chain, node) → (the node's incarnation, LU it holds).
    lost: BTreeMap<(ChainId, NodeId), (u64, u64)>,
    /// Removals that wait for their chain's head (`ClusterMap::early_forwarding_ended_by`), by step, with the
    /// map epoch at which this leader first saw each under way: one the head must report.
    removals: BTreeMap<u64, u64>,
}

/// `d` stretched by the drift bound and the safety factor: a wait on this clock that surely covers `d` on
/// any other node's clock.
pub fn stretched(d: Duration) -> Duration {
    d.mul_f64(SAFETY * (1.0 + DRIFT_MAX_PPM as f64 / 1e6))
}

/// What a voter keeps, while it does not lead, of what the leader passes on every tick (`MgrMsg::Reported`),
/// so that it does not start from nothing if it leads next.
#[derive(Debug, Default)]
pub struct Inheritance {
    /// The newest epoch each node reported to an earlier leader.
    reported: BTreeMap<NodeId, u64>,
    /// The last leader heard from, and when.
    predecessor: Option<(NodeId, Time)>,
}

impl Inheritance {
    /// What `leader` passed on at `now`.
    pub fn learn(&mut self, leader: NodeId, now: Time, reported: Vec<(NodeId, u64)>) {
        merge_newest(&mut self.reported, reported);
        self.predecessor = Some((leader, now));
    }

    /// What this voter heard while it led, kept for a later term.
    pub fn keep(&mut self, ended: Leadership) {
        merge_newest(&mut self.reported, ended.reported);
    }
}

/// Keeps the newest epoch known for each node: a node that adopted an epoch never goes back.
fn merge_newest(known: &mut BTreeMap<NodeId, u64>, reported: impl IntoIterator<Item = (NodeId, u64)>) {
    for (node, epoch) in reported {
        let e = known.entry(node).or_default();
        *e = (*e).max(epoch);
    }
}

impl Leadership {
    pub fn new(term: u64, now: Time) -> Leadership {
        Leadership {
            term,
            since: now,
            heard: BTreeMap::new(),
            reported: BTreeMap::new(),
            grants: BTreeMap::new(),
            proposed: BTreeMap::new(),
            lost: BTreeMap::new(),
            removals: BTreeMap::new(),
        }
    }

    /// `node`, in run `incarnation`, holds `lost` (chain, LU) without a whole replica; nothing else.
    pub fn lost(&mut self, node: NodeId, incarnation: u64, lost: &[(ChainId, u64)]) {
        self.lost.retain(|&(_, n), _| n != node);
        self.lost.extend(lost.iter().map(|&(chain, lu)| ((chain, node), (incarnation, lu))));
    }

    /// The LU `node` last reported holding of its lost replica of `chain`, if in run `incarnation`.
    pub fn lost_lu(&self, chain: ChainId, node: NodeId, incarnation: u64) -> Option<u64> {
        self.lost.get(&(chain, node)).filter(|(inc, _)| *inc == incarnation).map(|&(_, lu)| lu)
    }

    /// One line for failure reports: how long this term has led, and what each node last reported.
    pub fn describe(&self, now: Time) -> String {
        let ago =
            |n| self.heard.get(n).map_or("not yet".to_string(), |&t| format!("{:.1}s ago", now.since(t).as_secs_f64()));
        let reported: Vec<String> = self.reported.iter().map(|(n, e)| format!("{n}@{e} {}", ago(n))).collect();
        format!("term {} for {:.1}s; heard {}", self.term, now.since(self.since).as_secs_f64(), reported.join(", "))
    }

    /// A leadership that starts from what `me` inherited. A node that adopted an epoch never acts on an older
    /// map again, whoever it told, so the new term's fence need not wait for a node that cannot report to this
    /// leader (a dead one, say) if it had reported the epoch that fences the lease to an earlier one. And the
    /// previous leader's silence counts from when this voter last heard from it, not from this term's start:
    /// a leader is most often replaced because its node died, and its chains should not wait for an election
    /// and a whole failure timeout more. Unless that was more than `timeout` ago: this voter then missed what
    /// came between (another leader, say) and would declare a live node failed at once.
    pub fn succeed(me: NodeId, term: u64, now: Time, inherited: &Inheritance, timeout: Duration) -> Leadership {
        let mut lead = Leadership::new(term, now);
        lead.reported = inherited.reported.clone();
        let recent = |&(p, at): &(NodeId, Time)| p != me && now.since(at) <= timeout;
        if let Some((predecessor, at)) = inherited.predecessor.filter(recent) {
            lead.heard.insert(predecessor, at);
        }
        lead
    }

    /// The newest map epoch each node has reported adopting, as sent to the other voters.
    pub fn reported(&self) -> Vec<(NodeId, u64)> {
        self.reported.iter().map(|(&n, &e)| (n, e)).collect()
    }

    /// A heartbeat from `node`, which has adopted map `epoch`.
    pub fn heard(&mut self, node: NodeId, epoch: u64, now: Time) {
        self.heard.insert(node, now);
        merge_newest(&mut self.reported, [(node, epoch)]);
    }

    /// How long `node` has been silent, counting from the start of the term.
    pub fn silent_for(&self, node: NodeId, now: Time) -> Duration {
        now.since(*self.heard.get(&node).unwrap_or(&self.since))
    }

    /// Live nodes of the map not heard from for `timeout` (counting from the start of the term).
    pub fn overdue(&self, map: &ClusterMap, now: Time, timeout: Duration) -> Vec<NodeId> {
        map.nodes
            .iter()
            .filter(|(_, n)| n.state.is_live())
            .map(|(&id, _)| id)
            .filter(|&id| self.silent_for(id, now) > timeout)
            .collect()
    }

    /// The Remove steps of `map` that may end now: all of them, but those whose chain's head must first adopt a
    /// map in which the step is under way ([`ClusterMap::early_forwarding_ended_by`]) and has not yet said so.
    pub fn removals_done(&mut self, map: &ClusterMap) -> Vec<(ChainId, u64)> {
        let mut done = Vec::new();
        let mut waiting = BTreeMap::new();
        for c in map.chains.values() {
            let Some(ChainChange::Remove { step, .. }) = c.change else { continue };
            match map.early_forwarding_ended_by(c) {
                Some(head) => {
                    let since = self.removals.get(&step).copied().unwrap_or(map.epoch);
                    if self.knows(head, since) {
                        done.push((c.id, step));
                    }
                    waiting.insert(step, since);
                }
                None => done.push((c.id, step)),
            }
        }
        self.removals = waiting;
        done
    }

    fn knows(&self, node: NodeId, epoch: u64) -> bool {
        self.reported.get(&node).is_some_and(|&e| e >= epoch)
    }

    /// The chains whose tail leases `node` gets now, recorded as granted.
    pub fn grant(
        &mut self,
        node: NodeId,
        map: &ClusterMap,
        now: Time,
        lease: Duration,
        fence: Duration,
    ) -> Vec<(ChainId, u64)> {
        let chains: Vec<(ChainId, u64)> = map
            .chains
            .values()
            .filter(|c| map.leased_at(c, node))
            .filter(|c| self.may_grant(c, node, map, now, lease, fence))
            .map(|c| (c.id, c.view))
            .collect();
        for &(chain, view) in &chains {
            let grants = self.grants.entry(chain).or_default();
            grants.retain(|g| (g.holder, g.view) != (node, view));
            grants.push(Grant { holder: node, view, at: now });
        }
        chains
    }

    fn may_grant(
        &self,
        c: &ChainView,
        holder: NodeId,
        map: &ClusterMap,
        now: Time,
        lease: Duration,
        fence: Duration,
    ) -> bool {
        let fence_epoch = map.fence_epoch(c);
        let others_fenced = self.grants.get(&c.id).is_none_or(|gs| {
            gs.iter()
                .all(|g| g.view == c.view || now.since(g.at) >= stretched(lease) || self.knows(g.holder, fence_epoch))
        });
        let term_settled = self.term <= FIRST_TERM
            || now.since(self.since) >= fence
            || map.nodes.keys().all(|&n| n == holder || self.knows(n, fence_epoch));
        others_fenced && term_settled
    }

    /// Forgets grants that have surely expired.
    pub fn prune(&mut self, now: Time, lease: Duration) {
        for grants in self.grants.values_mut() {
            grants.retain(|g| now.since(g.at) < stretched(lease));
        }
        self.grants.retain(|_, g| !g.is_empty());
    }

    /// Whether `cmd` (encoded) should be proposed now: not proposed in this term, or not within `retry`.
    pub fn should_propose(&mut self, cmd: &[u8], now: Time, retry: Duration) -> bool {
        match self.proposed.get(cmd) {
            Some(&at) if now.since(at) < retry => false,
            _ => {
                self.proposed.insert(cmd.to_vec(), now);
                true
            }
        }
    }

    /// Forgets proposals older than `retry`, which are either applied or lost.
    pub fn prune_proposals(&mut self, now: Time, retry: Duration) {
        self.proposed.retain(|_, at| now.since(*at) < retry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::{ChainChange, MapCommand, NodeAddrs};
    use meridian_core::Location;

    const LEASE: Duration = Duration::from_secs(2);
    const FENCE: Duration = Duration::from_secs(10);
    const TIMEOUT: Duration = Duration::from_secs(5);

    fn map3() -> ClusterMap {
        map3_with(meridian_core::KeyspaceConfig::durable(3))
    }

    fn map3_with(default: meridian_core::KeyspaceConfig) -> ClusterMap {
        let addrs = |i: u32| NodeAddrs { peer_addr: format!("h:{i}"), resp_addr: String::new(), http_addr: None };
        let nodes = (1..=3).map(|i| (NodeId(i), addrs(i), Location::default())).collect();
        let mut map = ClusterMap::default();
        let boot = MapCommand::Bootstrap { nodes, default, partitions: 1, vnodes: 4, voters: vec![NodeId(1)] };
        map.apply(&boot).unwrap();
        map
    }

    fn at(secs: f64) -> Time {
        Time::ZERO.plus(Duration::from_secs_f64(secs))
    }

    fn tail(map: &ClusterMap) -> NodeId {
        map.chains[&ChainId(0)].tail().unwrap()
    }

    /// Remove the tail: its predecessor becomes tail at a new view and epoch.
    fn truncate(map: &mut ClusterMap) {
        let c = &map.chains[&ChainId(0)];
        let (view, node, step) = (c.view, c.tail().unwrap(), map.next_step);
        map.apply(&MapCommand::StepStarted {
            chain: ChainId(0),
            expected_view: view,
            change: ChainChange::Remove { node, step },
        })
        .unwrap();
        map.apply(&MapCommand::StepDone { chain: ChainId(0), step }).unwrap();
    }

    #[test]
    fn a_new_term_grants_once_every_node_knows_the_map_or_the_fence_passed() {
        let map = map3();
        let mut lead = Leadership::new(3, at(0.0));
        let t = tail(&map);
        assert!(lead.grant(t, &map, at(0.1), LEASE, FENCE).is_empty(), "nothing heard yet");
        for n in (1..=3).map(NodeId) {
            lead.heard(n, map.epoch, at(0.2));
        }
        assert_eq!(lead.grant(t, &map, at(0.3), LEASE, FENCE), vec![(ChainId(0), 1)]);
        let mut quiet = Leadership::new(2, at(0.0));
        assert!(quiet.grant(t, &map, at(9.0), LEASE, FENCE).is_empty());
        assert_eq!(quiet.grant(t, &map, at(10.5), LEASE, FENCE).len(), 1, "the fence has passed");
        let mut first = Leadership::new(1, at(0.0));
        assert_eq!(first.grant(t, &map, at(0.1), LEASE, FENCE).len(), 1, "no leader before the first term");
    }

    /// A dead node never reports to a new leader; what it reported to the one before counts all the same.
    #[test]
    fn a_successor_grants_at_once_if_every_node_had_reported_the_map_to_its_predecessor() {
        let map = map3();
        let t = tail(&map);
        let dead = (1..=3).map(NodeId).find(|&n| n != t).unwrap();
        let mut inherited = Inheritance::default();
        inherited.learn(dead, at(0.0), (1..=3).map(|n| (NodeId(n), map.epoch)).collect());
        let mut lead = Leadership::succeed(t, 3, at(1.0), &inherited, TIMEOUT);
        (1..=3).map(NodeId).filter(|&n| n != dead).for_each(|n| lead.heard(n, map.epoch, at(1.1)));
        assert_eq!(lead.grant(t, &map, at(1.2), LEASE, FENCE).len(), 1);
        let mut behind = Inheritance::default();
        behind.learn(dead, at(0.0), vec![(dead, map.epoch - 1)]);
        let mut lead = Leadership::succeed(t, 3, at(1.0), &behind, TIMEOUT);
        (1..=3).map(NodeId).filter(|&n| n != dead).for_each(|n| lead.heard(n, map.epoch, at(1.1)));
        assert!(lead.grant(t, &map, at(1.2), LEASE, FENCE).is_empty(), "the dead node may hold an older lease");
    }

    /// The previous leader's silence counts from its last word to this voter; every other node's from the start
    /// of the term, since it may still be talking to the previous leader.
    #[test]
    fn a_successor_counts_its_predecessors_silence_from_its_last_word() {
        let map = map3();
        let mut inherited = Inheritance::default();
        inherited.learn(NodeId(1), at(10.0), vec![(NodeId(1), map.epoch)]);
        let lead = Leadership::succeed(NodeId(2), 3, at(13.0), &inherited, TIMEOUT);
        assert!(lead.overdue(&map, at(14.9), TIMEOUT).is_empty());
        assert_eq!(lead.overdue(&map, at(15.1), TIMEOUT), vec![NodeId(1)]);
        assert_eq!(lead.overdue(&map, at(18.1), TIMEOUT).len(), 3);
        let mut again = Inheritance::default();
        again.learn(NodeId(2), at(10.0), vec![]);
        let own = Leadership::succeed(NodeId(2), 4, at(13.0), &again, TIMEOUT);
        assert!(own.overdue(&map, at(15.1), TIMEOUT).is_empty(), "a voter that led before does not count itself");
        let stale = Leadership::succeed(NodeId(2), 5, at(40.0), &inherited, TIMEOUT);
        assert!(stale.overdue(&map, at(40.1), TIMEOUT).is_empty(), "a word from long ago tells nothing of now");
    }

    /// Late in a term (earlier leaders' leases long gone), only this leader's own grants matter.
    #[test]
    fn a_new_tail_waits_for_the_old_tails_lease_or_its_word() {
        let (mut map, mut lead) = (map3(), Leadership::new(1, at(0.0)));
        let t = |s: f64| at(100.0 + s);
        (1..=3).for_each(|n| lead.heard(NodeId(n), map.epoch, t(0.0)));
        let old = tail(&map);
        assert_eq!(lead.grant(old, &map, t(1.0), LEASE, FENCE).len(), 1);
        truncate(&mut map);
        let new = tail(&map);
        (1..=3).filter(|&n| NodeId(n) != old).for_each(|n| lead.heard(NodeId(n), map.epoch, t(1.1)));
        assert!(lead.grant(new, &map, t(1.2), LEASE, FENCE).is_empty(), "the old tail may still answer");
        assert!(lead.grant(new, &map, t(3.0), LEASE, FENCE).is_empty(), "its lease may not have run out yet");
        assert_eq!(lead.grant(new, &map, t(3.3), LEASE, FENCE).len(), 1, "now it has, on every clock");

        let (mut map, mut lead) = (map3(), Leadership::new(1, at(0.0)));
        (1..=3).for_each(|n| lead.heard(NodeId(n), map.epoch, t(0.0)));
        lead.grant(tail(&map), &map, t(1.0), LEASE, FENCE);
        truncate(&mut map);
        (1..=3).for_each(|n| lead.heard(NodeId(n), map.epoch, t(1.1)));
        assert_eq!(lead.grant(tail(&map), &map, t(1.2), LEASE, FENCE).len(), 1, "the old tail knows");
    }

    /// A head that answers writes (`au`, `ausi`) gets a lease as the tail does; a member that answers neither
    /// reads nor writes gets none.
    #[test]
    fn heads_that_answer_writes_get_leases() {
        use meridian_core::UpdateMode;
        for (update, head_leased) in [(UpdateMode::Su, false), (UpdateMode::Au, true), (UpdateMode::Ausi, true)] {
            let map = map3_with(meridian_core::KeyspaceConfig { update, ..meridian_core::KeyspaceConfig::durable(3) });
            let mut lead = Leadership::new(1, at(0.0));
            let c = &map.chains[&ChainId(0)];
            let (head, mid) = (c.members[0], c.members[1]);
            assert_eq!(!lead.grant(head, &map, at(0.1), LEASE, FENCE).is_empty(), head_leased, "{update:?}");
            assert!(lead.grant(mid, &map, at(0.1), LEASE, FENCE).is_empty(), "{update:?}");
            assert_eq!(lead.grant(tail(&map), &map, at(0.1), LEASE, FENCE).len(), 1, "{update:?}");
        }
    }

    /// A lease partition's master holds its view's lease; the master of a new view, after the old master was
    /// taken out, waits for the old master's lease to run out or for it to know the new view. Members that are
    /// not master get none.
    #[test]
    fn a_new_views_master_waits_for_the_old_masters_lease() {
        use meridian_core::{Placement, Protocol, ProtocolConfig};
        let config = meridian_core::KeyspaceConfig {
            protocol: ProtocolConfig::default_for(Protocol::Lease),
            placement: Placement::per_region("default=3").unwrap(),
            ..meridian_core::KeyspaceConfig::durable(3)
        };
        let (mut map, mut lead) = (map3_with(config), Leadership::new(1, at(0.0)));
        let t = |s: f64| at(100.0 + s);
        (1..=3).for_each(|n| lead.heard(NodeId(n), map.epoch, t(0.0)));
        let master = |map: &ClusterMap| map.lease_master(&map.chains[&ChainId(0)]).unwrap();
        let old = master(&map);
        let others: Vec<NodeId> = (1..=3).map(NodeId).filter(|&n| n != old).collect();
        assert!(others.iter().all(|&n| lead.grant(n, &map, t(0.5), LEASE, FENCE).is_empty()), "not masters");
        assert_eq!(lead.grant(old, &map, t(1.0), LEASE, FENCE).len(), 1);
        let (view, step) = (map.chains[&ChainId(0)].view, map.next_step);
        let change = ChainChange::Remove { node: old, step };
        map.apply(&MapCommand::StepStarted { chain: ChainId(0), expected_view: view, change }).unwrap();
        map.apply(&MapCommand::StepDone { chain: ChainId(0), step }).unwrap();
        let new = master(&map);
        assert_ne!(new, old, "the old master left the group");
        others.iter().for_each(|&n| lead.heard(n, map.epoch, t(1.1)));
        assert!(lead.grant(new, &map, t(1.2), LEASE, FENCE).is_empty(), "the old master may still serve");
        assert_eq!(lead.grant(new, &map, t(3.3), LEASE, FENCE).len(), 1, "its lease ran out on every clock");
    }

    #[test]
    fn silent_live_nodes_are_overdue() {
        let map = map3();
        let mut lead = Leadership::new(1, at(0.0));
        lead.heard(NodeId(1), 1, at(2.0));
        let overdue = lead.overdue(&map, at(3.5), Duration::from_secs(3));
        assert_eq!(overdue, vec![NodeId(2), NodeId(3)]);
    }

    /// A Remove that takes out the last member after an `su` head that keeps a log (here the tail of a
    /// `log,mem,log` chain) ends only once the head has adopted a map in which it is under way: until then the
    /// head may hold, unsynced, updates it passed on early whose only durable copy is on the removed member. Sim
    /// seed 930384 (`mem,log`, full nemesis) lost such writes when the head lost power right after the TRUNCATE.
    /// Any other Remove ends at once.
    #[test]
    fn a_removal_that_ends_early_forwarding_waits_for_the_head() {
        use meridian_core::ReplicaKind::{Log, Mem};
        let config = meridian_core::KeyspaceConfig::with_replicas(vec![Log, Mem, Log]);
        for (mut map, waits) in [(map3_with(config), true), (map3(), false)] {
            let mut lead = Leadership::new(1, at(0.0));
            let c = &map.chains[&ChainId(0)];
            let (head, view, node, step) = (c.members[0], c.view, c.tail().unwrap(), map.next_step);
            let change = ChainChange::Remove { node, step };
            map.apply(&MapCommand::StepStarted { chain: ChainId(0), expected_view: view, change }).unwrap();
            lead.heard(head, map.epoch - 1, at(0.1));
            let done = lead.removals_done(&map);
            assert_eq!(done.is_empty(), waits, "before the head has the step's map");
            lead.heard(head, map.epoch, at(0.2));
            assert_eq!(lead.removals_done(&map), vec![(ChainId(0), step)]);
        }
    }

    /// A joiner still flushing keeps what it is sent in memory, so it gives an `su` head no reason to pass updates
    /// on before its fsync: with a `log,mem` chain taking a `log` joiner before its tail, the head forwards early
    /// only once the flush is done. Sim seed 930746 (`mem,log`, full nemesis) lost acknowledged writes when such a
    /// head and the memory tail lost power during the flush.
    #[test]
    fn a_flushing_joiner_does_not_let_the_head_forward_early() {
        use meridian_core::ReplicaKind::{Log, Mem};
        let mut map = map3_with(meridian_core::KeyspaceConfig::with_replicas(vec![Log, Mem]));
        let c = &map.chains[&ChainId(0)];
        let (head, view, step) = (c.members[0], c.view, map.next_step);
        let node = (1..=3).map(NodeId).find(|n| !c.contains(*n)).unwrap();
        let change = ChainChange::Add { node, position: 1, step, inserted: false, kind: Log };
        map.apply(&MapCommand::StepStarted { chain: ChainId(0), expected_view: view, change }).unwrap();
        map.apply(&MapCommand::AddInserted { chain: ChainId(0), step }).unwrap();
        assert!(!map.head_forwards_early(&map.chains[&ChainId(0)], head), "the joiner is flushing");
        map.apply(&MapCommand::StepDone { chain: ChainId(0), step }).unwrap();
        assert!(map.head_forwards_early(&map.chains[&ChainId(0)], head), "the joiner's log holds every update");
    }
}
