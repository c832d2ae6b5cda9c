//! Whether a node runs a replica of the manager's log: the map names it as a voter or a learner
//! (`map/voters.rs` moves the group), or, before the first map, it is one of the voters bootstrap chose. A
//! node the map adds opens its replica (an empty one, which the leader fills from a snapshot, if it never had
//! a seat); a node the map takes out closes its replica but keeps its log, term and vote: a node that lost
//! them could vote, in the configuration a stale voter still holds, for that voter (the simulator's `voters`
//! fault found such a split brain when closing deleted the log). Seated again, it goes on from that log, as
//! any replica that was down.

use super::{ClusterNode, NodeFx};
use crate::manager::core::{ManagerCore, ManagerStats};
use crate::map::ClusterMap;
use meridian_core::{NodeId, Time};

/// Whether `map` gives `me` a seat in the manager's group.
pub(super) fn seated(map: &ClusterMap, me: NodeId) -> bool {
    map.manager_voters.contains(&me) || map.manager_learners.contains(&me)
}

impl ClusterNode {
    /// What every replica of the manager this node ran did, the closed ones included.
    pub fn manager_stats(&self) -> ManagerStats {
        let mut stats = self.retired_manager;
        stats += self.manager.as_ref().map(ManagerCore::stats).unwrap_or_default();
        stats
    }

    /// Opens or closes this node's replica of the manager's log as the map it adopted says.
    pub(super) fn follow_seat(&mut self, now: Time, out: &mut NodeFx) {
        let Some(map) = self.agent.map().filter(|m| m.is_bootstrapped()).cloned() else { return };
        let fail_stop = "the manager's log must open (fail-stop)";
        match (seated(&map, self.me), self.manager.is_some()) {
            (true, false) => {
                tracing::info!(node = %self.me, epoch = map.epoch, "joining the manager's group");
                let (core, mgr) = ManagerCore::open(
                    self.me,
                    self.vfs.clone(),
                    &self.dir.join(super::RAFT_DIR),
                    &[],
                    self.bootstrap.clone(),
                    self.cfg.manager.clone(),
                    self.jitter,
                )
                .expect(fail_stop);
                self.manager = Some(core);
                self.send_mgr(now, mgr, out);
            }
            (false, true) => {
                tracing::info!(node = %self.me, epoch = map.epoch, "leaving the manager's group");
                if let Some(m) = self.manager.take() {
                    self.retired_manager += m.stats();
                }
            }
            (false, false) | (true, true) => {}
        }
    }
}

/// Whether a node opening with `map` (its stored one, if any) runs the manager: named in it, or, with no map
/// yet, one of `initial_voters`. A stored map is never older than the node's seat as a voter: a learner
/// adopts the map its replica applied before it acknowledges anything that could make it one.
pub(super) fn runs_manager(map: Option<&ClusterMap>, me: NodeId, initial_voters: &[NodeId]) -> bool {
    match map.filter(|m| m.is_bootstrapped()) {
        Some(m) => seated(m, me),
        None => initial_voters.contains(&me),
    }
}
