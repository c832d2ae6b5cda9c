//! The manager's Raft membership as the map shows it, and the plan that moves it: which nodes should vote
//! (spread over regions, then zones, then racks, as bootstrap chose them: `node::voters`), and the next
//! membership change towards them. The leader runs [`next_change`] every tick; it keeps no state, so a new
//! leader goes on where the old one stopped.
//!
//! A node becomes a voter in two steps, as etcd and TiKV add members: first a learner, which receives the log
//! (a snapshot, then entries) without a vote, and once it has caught up, a voter, in one change that also
//! takes out the voters it replaces (raft-rs enters a joint configuration for it and leaves it once
//! committed). A learner never counts towards a quorum, so a slow or dead one stalls nothing; a voter added
//! before it caught up would count and could stall every decision while it copies.

use super::{Applied, ClusterMap, MapError, NodeState};
use crate::manager::raft::{MemberChange, Membership};
use meridian_core::{NodeId, Placement};
use std::collections::BTreeSet;

/// The most voters an operator may ask for: each one more costs every decision a round trip to more nodes.
pub const VOTERS_WANTED_MAX: usize = 7;

/// How many voters the manager keeps by itself: enough to survive one failure, where the cluster has them.
pub const VOTERS_AUTO: usize = 3;

impl ClusterMap {
    /// Whether `id` may be chosen as a voter: a standard node (not affiliated) that is Joining or Active and was
    /// not removed by an operator.
    pub fn may_vote(&self, id: NodeId) -> bool {
        let usable = |n: &super::NodeInfo| n.state.is_placeable() && !n.departed;
        self.nodes.get(&id).is_some_and(usable) && !self.hosts.contains_key(&id)
    }

    pub(super) fn manager_membership(&mut self, voters: &[NodeId], learners: &[NodeId]) -> Result<Applied, MapError> {
        let (voters, learners) = (sorted(voters), sorted(learners));
        if self.manager_voters == voters && self.manager_learners == learners {
            return Ok(Applied::Unchanged);
        }
        self.manager_voters = voters;
        self.manager_learners = learners;
        Ok(Applied::Changed)
    }

    pub(super) fn want_voters(&mut self, voters: &[NodeId]) -> Result<Applied, MapError> {
        let wanted = sorted(voters);
        if wanted.len() != voters.len() {
            return Err(MapError::BadVoters("a node is named twice".into()));
        }
        if wanted.len() > VOTERS_WANTED_MAX || (wanted.len().is_multiple_of(2) && !wanted.is_empty()) {
            let why =
                format!("{} voters: ask for 1, 3, 5 or 7 (an even number survives no more failures)", wanted.len());
            return Err(MapError::BadVoters(why));
        }
        if let Some(&bad) = wanted.iter().find(|&&v| !self.may_vote(v)) {
            let why = match self.nodes.get(&bad) {
                None => format!("node {bad} is not in the cluster"),
                Some(_) if self.hosts.contains_key(&bad) => format!("node {bad} is an affiliated node"),
                Some(n) if n.departed => format!("node {bad} was removed from the cluster"),
                Some(n) => format!("node {bad} is {}", n.state),
            };
            return Err(MapError::BadVoters(why));
        }
        if wanted == self.voters_wanted {
            return Ok(Applied::Unchanged);
        }
        self.voters_wanted = wanted;
        Ok(Applied::Changed)
    }
}

fn sorted(ids: &[NodeId]) -> Vec<NodeId> {
    let set: BTreeSet<NodeId> = ids.iter().copied().collect();
    set.into_iter().collect()
}

/// What the leader knows besides the map when it plans a membership change.
pub struct VoterView<'a> {
    /// The leader itself: it never removes itself, it hands leadership over first.
    pub me: NodeId,
    /// The configuration raft has applied (the map's voters and learners, and whether it is joint).
    pub membership: &'a Membership,
    /// Voters to replace: removed from the cluster, or failed and silent for long.
    pub gone: &'a BTreeSet<NodeId>,
    /// Nodes the leader heard from lately, the only ones worth adding.
    pub alive: &'a dyn Fn(NodeId) -> bool,
    /// Whether a learner's log holds (nearly) everything committed.
    pub caught_up: &'a dyn Fn(NodeId) -> bool,
}

/// The next step towards the voters the map should have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VoterStep {
    /// A change for raft to commit.
    Change(Vec<MemberChange>),
    /// The leader is to be removed: hand leadership to this voter first.
    HandOver(NodeId),
}

/// The next membership change towards [`target`], if any: leave a joint configuration, drop a learner that is
/// not wanted, add a wanted node as learner, then, once every such learner has caught up, make them voters and
/// take out the voters not wanted, all in one change.
pub fn next_change(map: &ClusterMap, v: &VoterView<'_>) -> Option<VoterStep> {
    let m = v.membership;
    if m.joint {
        return Some(VoterStep::Change(Vec::new()));
    }
    let target = target(map, v);
    if let Some(&extra) = m.learners.iter().find(|l| !target.contains(l)) {
        return Some(VoterStep::Change(vec![MemberChange::Remove(extra)]));
    }
    let adds: Vec<NodeId> = target.iter().copied().filter(|t| !m.voters.contains(t)).collect();
    if let Some(&new) = adds.iter().find(|a| !m.learners.contains(a)) {
        return Some(VoterStep::Change(vec![MemberChange::AddLearner(new)]));
    }
    let removes: Vec<NodeId> = m.voters.iter().copied().filter(|x| !target.contains(x)).collect();
    if (adds.is_empty() && removes.is_empty()) || !adds.iter().all(|&a| (v.caught_up)(a)) {
        return None;
    }
    if removes.contains(&v.me) {
        let heir = target.iter().copied().filter(|&t| m.voters.contains(&t) && (v.caught_up)(t)).find(|&t| t != v.me);
        return heir.map(VoterStep::HandOver);
    }
    let changes = adds.into_iter().map(MemberChange::AddVoter).chain(removes.into_iter().map(MemberChange::Remove));
    Some(VoterStep::Change(changes.collect()))
}

/// The voters the manager moves to: the operator's, for as long as the map keeps them (those of them that can
/// still vote, topped up while some cannot, and back to them when they can again), else the present ones with
/// every gone voter replaced, and up to [`VOTERS_AUTO`] where nodes allow. Replacements are live nodes that may vote, chosen to spread the voters over regions, zones and racks
/// (lowest ids first among equals); a gone voter stays while nothing can replace it, since removing it alone
/// would shrink the group without making it any more available.
pub fn target(map: &ClusterMap, v: &VoterView<'_>) -> Vec<NodeId> {
    let staying = |n: &NodeId| !v.gone.contains(n);
    let (base, count): (Vec<NodeId>, usize) = if map.voters_wanted.is_empty() {
        let kept = v.membership.voters.iter().copied().filter(staying).collect();
        (kept, v.membership.voters.len().max(VOTERS_AUTO))
    } else {
        let usable = map.voters_wanted.iter().copied().filter(|n| staying(n) && map.may_vote(*n));
        (usable.collect(), map.voters_wanted.len())
    };
    let candidate = |id: NodeId, n: &super::NodeInfo| {
        n.state == NodeState::Active && map.may_vote(id) && staying(&id) && (v.alive)(id) && !base.contains(&id)
    };
    let candidates = map.nodes.iter().filter(|(&id, n)| candidate(id, n)).map(|(&id, _)| id);
    let prefs: Vec<NodeId> = base.iter().copied().chain(candidates).collect();
    let at = |id: NodeId| &map.nodes[&id].location;
    let spread = super::placement::choose(&prefs, at, &Placement::default(), count);
    let extras = spread.into_iter().filter(|n| !base.contains(n)).take(count.saturating_sub(base.len()));
    let mut target: Vec<NodeId> = base.iter().copied().chain(extras).collect();
    let stranded: Vec<NodeId> = v.membership.voters.iter().copied().filter(|x| !target.contains(x)).collect();
    let room = count.saturating_sub(target.len());
    target.extend(stranded.into_iter().take(room));
    target.sort_unstable();
    target
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::tests::addrs;
    use crate::map::MapCommand;
    use meridian_core::{KeyspaceConfig, Location};

    /// Nodes 1 to 6 in regions a, a, b, b, c, c; voters 1, 2 and 3 (two in region a).
    fn map6() -> ClusterMap {
        let region = |i: u32| ["a", "b", "c"][(i as usize - 1) / 2].parse::<Location>().unwrap();
        let nodes = (1..=6).map(|i| (NodeId(i), addrs(i), region(i))).collect();
        let voters = vec![NodeId(1), NodeId(2), NodeId(3)];
        let boot =
            MapCommand::Bootstrap { nodes, default: KeyspaceConfig::durable(3), partitions: 2, vnodes: 4, voters };
        let mut map = ClusterMap::default();
        map.apply(&boot).unwrap();
        map
    }

    fn membership(voters: &[u32], learners: &[u32], joint: bool) -> Membership {
        let ids = |v: &[u32]| v.iter().map(|&i| NodeId(i)).collect();
        Membership { voters: ids(voters), learners: ids(learners), joint }
    }

    fn step(map: &ClusterMap, m: &Membership, gone: &[u32], caught_up: bool, me: u32) -> Option<VoterStep> {
        let gone: BTreeSet<NodeId> = gone.iter().map(|&i| NodeId(i)).collect();
        let (alive, up) = (|_| true, move |_| caught_up);
        let view = VoterView { me: NodeId(me), membership: m, gone: &gone, alive: &alive, caught_up: &up };
        next_change(map, &view)
    }

    use MemberChange::{AddLearner, AddVoter, Remove};

    /// A gone voter is replaced by a node where no voter is (region c, not a second node in b), which first
    /// learns, then joins the voters in the change that removes the gone one.
    #[test]
    fn a_gone_voter_is_replaced_in_two_steps_by_a_node_that_widens_the_spread() {
        let map = map6();
        let m = membership(&[1, 2, 3], &[], false);
        assert_eq!(step(&map, &m, &[], true, 1), None, "nothing gone, three voters: nothing to do");
        assert_eq!(step(&map, &m, &[2], true, 1), Some(VoterStep::Change(vec![AddLearner(NodeId(5))])));
        let m = membership(&[1, 2, 3], &[5], false);
        assert_eq!(step(&map, &m, &[2], false, 1), None, "the learner has not caught up");
        let promote = VoterStep::Change(vec![AddVoter(NodeId(5)), Remove(NodeId(2))]);
        assert_eq!(step(&map, &m, &[2], true, 1), Some(promote));
        assert_eq!(step(&map, &m, &[2], true, 2), Some(VoterStep::HandOver(NodeId(1))), "the leader hands over first");
        assert_eq!(step(&map, &membership(&[1, 2, 3, 5], &[], true), &[2], true, 1), Some(VoterStep::Change(vec![])));
        assert_eq!(step(&map, &membership(&[1, 3, 5], &[], false), &[], true, 1), None, "done");
    }

    /// A learner that is not wanted (the voter it was to replace came back) is taken out; a gone voter nothing
    /// can replace stays; a group of fewer than three grows.
    #[test]
    fn stale_learners_go_gone_voters_stay_without_a_replacement_and_small_groups_grow() {
        let map = map6();
        let stale = membership(&[1, 2, 3], &[5], false);
        assert_eq!(step(&map, &stale, &[], true, 1), Some(VoterStep::Change(vec![Remove(NodeId(5))])));
        let mut lonely = map.clone();
        for i in 4..=6 {
            lonely.apply(&MapCommand::RemoveNode { id: NodeId(i) }).unwrap();
        }
        assert_eq!(step(&lonely, &membership(&[1, 2, 3], &[], false), &[2], true, 1), None);
        let one = membership(&[1], &[], false);
        assert_eq!(step(&map, &one, &[], true, 1), Some(VoterStep::Change(vec![AddLearner(NodeId(3))])));
    }

    /// An operator's voters are reached as the manager's are and kept: one gone is stood in for until it comes
    /// back, and a single voter stays single (the manager alone would grow the group to three).
    #[test]
    fn wanted_voters_are_reached_and_kept() {
        let mut map = map6();
        map.apply(&MapCommand::WantVoters { voters: vec![NodeId(1), NodeId(3), NodeId(5)] }).unwrap();
        let m = membership(&[1, 2, 3], &[], false);
        assert_eq!(step(&map, &m, &[], true, 1), Some(VoterStep::Change(vec![AddLearner(NodeId(5))])));
        let (voters, learners) = (vec![NodeId(1), NodeId(3), NodeId(5)], vec![]);
        map.apply(&MapCommand::ManagerMembership { voters, learners }).unwrap();
        assert_eq!(map.voters_wanted, [NodeId(1), NodeId(3), NodeId(5)]);
        let reached = membership(&[1, 3, 5], &[], false);
        assert_eq!(step(&map, &reached, &[], true, 1), None);
        assert_eq!(step(&map, &reached, &[5], true, 1), Some(VoterStep::Change(vec![AddLearner(NodeId(6))])));
        let stand_in = membership(&[1, 3, 6], &[], false);
        let back = VoterStep::Change(vec![AddLearner(NodeId(5))]);
        assert_eq!(step(&map, &stand_in, &[], true, 1), Some(back), "back to the wanted node once it can vote");
        map.apply(&MapCommand::WantVoters { voters: vec![NodeId(1)] }).unwrap();
        let shrink = VoterStep::Change(vec![Remove(NodeId(3)), Remove(NodeId(5))]);
        assert_eq!(step(&map, &reached, &[], true, 1), Some(shrink));
        assert_eq!(step(&map, &membership(&[1], &[], false), &[], true, 1), None, "one voter, as asked");
    }

    #[test]
    fn wanted_voters_must_be_an_odd_number_of_standard_live_nodes() {
        let mut map = map6();
        map.apply(&MapCommand::NodeFailed { id: NodeId(6) }).unwrap();
        let before = map.clone();
        let want = |ids: &[u32]| MapCommand::WantVoters { voters: ids.iter().map(|&i| NodeId(i)).collect() };
        for (ids, why) in [
            (&[1, 2][..], "2 voters"),
            (&[1, 1, 2], "named twice"),
            (&[1, 2, 9], "node n9 is not in the cluster"),
            (&[1, 2, 6], "node n6 is FAILED"),
            (&[1, 2, 3, 4, 5, 6, 7, 8, 9], "9 voters"),
        ] {
            let err = map.apply(&want(ids)).unwrap_err().to_string();
            assert!(err.contains(why), "{ids:?}: {err}");
            assert_eq!(map, before, "nothing changed");
        }
        assert_eq!(map.apply(&want(&[])), Ok(Applied::Unchanged), "already the manager's choice");
        assert_eq!(map.apply(&want(&[3, 2, 1])), Ok(Applied::Changed), "the present voters, kept from now on");
        assert_eq!(map.apply(&want(&[1, 2, 3])), Ok(Applied::Unchanged));
    }
}
