//! Whether a node runs a replica of the manager's log: the map names it as a voter or a learner
//! (`map/voters.rs` moves the group), or, before the first map, it is one of the voters bootstrap chose. A
//! node the map adds opens an empty replica that the leader fills from a snapshot; a node the map takes out
//! closes its replica and deletes the log, since its removal is committed once a map shows it (a log left by a
//! crash in between goes when the node next starts).

use super::{ClusterNode, NodeFx};
use crate::manager::core::{ManagerCore, ManagerStats};
use crate::manager::raft::RaftLog;
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
            (false, running) => {
                let dir = self.dir.join(super::RAFT_DIR);
                if running || RaftLog::exists(&*self.vfs, &dir) {
                    tracing::info!(node = %self.me, epoch = map.epoch, "leaving the manager's group");
                    if let Some(m) = self.manager.take() {
                        self.retired_manager += m.stats();
                    }
                    RaftLog::destroy(&*self.vfs, &dir).expect("the manager's log must be deletable (fail-stop)");
                }
            }
            (true, true) => {}
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
