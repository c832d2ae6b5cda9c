//! The manager on one voter: the Raft replica of the cluster map and, while it leads, the seed's master
//! (003 §2.5–2.6, Listing 2) made fault tolerant: it bootstraps the map, detects failures by heartbeats,
//! drives the planner's steps through the log, turns nodes' reports into step commands, and grants tail
//! leases ([`super::leader`]).
//!
//! Every decision is a command in the Raft log, so a new leader continues where the old one stopped: a step
//! started by a deposed leader is still in the map, its joiner keeps copying and reports to whoever leads.
//! The leader acts only once it has applied everything committed before its term (`leader_ready`); until
//! then its map may lag the one nodes already act on.

use super::leader::{stretched, Inheritance, Leadership};
use super::msg::{Heartbeat, HeartbeatReply, ManagerMsg, MgrFx, MgrMsg};
use super::plan::{next_steps_with, PlanLimits};
use super::raft::{Committed, Membership, RaftConfig, RaftCore, RaftError, RaftMsg, RaftOutput, StepError};
use crate::map::voters::{self, VoterStep, VoterView};
use crate::map::{ChainChange, ClusterMap, MapCommand, NodeState};
use crate::reports::{KeyMove, ReplicaReports, StepReport};
use meridian_core::{NodeId, Time};
use meridian_store::Vfs;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct ManagerConfig {
    /// Period of the manager's timer: a Raft tick, a heartbeat from every node, the leader's duties.
    pub tick: Duration,
    pub raft: RaftConfig,
    /// Lease term as the leader counts it; nodes count half of it from when they sent the heartbeat.
    pub lease: Duration,
    /// A live node not heard from for this long is declared failed (seed's `t_s · f_threshold`).
    pub failure_timeout: Duration,
    pub limits: PlanLimits,
    /// A proposal not reflected in the map after this long is proposed again.
    pub retry: Duration,
    /// Applied commands between two compactions of the Raft log into a snapshot of the map.
    pub snapshot_every: u64,
    /// A voter declared failed and silent for this long is replaced by another node ([`crate::map::voters`]).
    pub voter_timeout: Duration,
}

/// The manager tick unless configured otherwise: right for a cluster within one region.
pub const DEFAULT_TICK: Duration = Duration::from_millis(100);

/// The longest lease term for ticks up to 500 ms ([`ManagerConfig::with_tick`]): 40 ticks of the default.
pub const LEASE_CAP: Duration = Duration::from_secs(4);

/// The longest failure timeout for ticks up to 500 ms: 50 ticks of the default.
pub const FAILURE_TIMEOUT_CAP: Duration = Duration::from_secs(5);

impl Default for ManagerConfig {
    fn default() -> Self {
        ManagerConfig::with_tick(DEFAULT_TICK)
    }
}

impl ManagerConfig {
    /// Every timing of the manager scaled to one tick, as etcd scales its election timeout to its heartbeat
    /// interval: choose a tick near the round trip between the farthest voters (100 ms within a region, a few
    /// hundred milliseconds across regions). Elections take 10 to 20 ticks; the lease term is 40 ticks (a
    /// node counts half of it from when it sent its heartbeat, so it outlives several slow heartbeats) and a
    /// node not heard from for 50 ticks is declared failed, but those two are capped at [`LEASE_CAP`] and
    /// [`FAILURE_TIMEOUT_CAP`] (or 8 and 10 ticks if longer): they measure how long a node may stay silent
    /// (a pause, a stalled disk), which a longer round trip does not change, and a failed node's chains
    /// wait for both. A voter failed for six failure timeouts is replaced: long enough to restart a node
    /// without the group moving away from it.
    pub fn with_tick(tick: Duration) -> ManagerConfig {
        let failure_timeout = (tick * 50).min(FAILURE_TIMEOUT_CAP.max(tick * 10));
        ManagerConfig {
            tick,
            raft: RaftConfig::default(),
            lease: (tick * 40).min(LEASE_CAP.max(tick * 8)),
            failure_timeout,
            limits: PlanLimits::default(),
            retry: tick * 10,
            snapshot_every: 256,
            voter_timeout: failure_timeout * 6,
        }
    }

    /// How long a new leader waits before leases granted in earlier terms have surely expired: a deposed
    /// leader notices it lost its quorum within two election timeouts, and its last lease lasts one term.
    pub fn fence(&self) -> Duration {
        let election_max = self.tick * (2 * self.raft.election_ticks) as u32;
        stretched(election_max * 2 + self.lease)
    }
}

pub struct ManagerCore {
    me: NodeId,
    raft: RaftCore,
    map: ClusterMap,
    cfg: ManagerConfig,
    bootstrap: MapCommand,
    lead: Option<Leadership>,
    inherited: Inheritance,
    applied_since_snapshot: u64,
    /// A learner was added: compact now, so that the snapshot it must start from names it.
    compact_now: bool,
    stats: ManagerStats,
}

/// What this replica did while it led, for the simulator's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ManagerStats {
    /// Membership changes proposed (learners added or dropped, voters replaced, joint configurations left).
    pub membership_changes: u64,
    /// Leadership handed to another voter because this one was to be removed.
    pub hand_overs: u64,
}

impl std::ops::AddAssign for ManagerStats {
    fn add_assign(&mut self, o: ManagerStats) {
        self.membership_changes += o.membership_changes;
        self.hand_overs += o.hand_overs;
    }
}

/// Entries a learner may lag the commit index by and still be made a voter: it catches up in one round.
const CATCH_UP_SLACK: u64 = 8;

impl ManagerCore {
    /// Opens this voter's replica of the map's log in `dir`; `bootstrap` is the command that creates the map,
    /// proposed by the first leader. `jitter` seeds the election timeouts (see [`RaftCore::open`]). With no
    /// `voters` a new log stays empty until the leader sends this replica, a learner it added, a snapshot.
    pub fn open(
        me: NodeId,
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        voters: &[NodeId],
        bootstrap: MapCommand,
        cfg: ManagerConfig,
        jitter: u64,
    ) -> Result<(ManagerCore, MgrFx), RaftError> {
        let mut raft_out = RaftOutput::default();
        let raft = RaftCore::open(vfs, dir, me, voters, &cfg.raft, jitter, &mut raft_out)?;
        let mut core = ManagerCore {
            me,
            raft,
            map: ClusterMap::default(),
            cfg,
            bootstrap,
            lead: None,
            inherited: Inheritance::default(),
            applied_since_snapshot: 0,
            compact_now: false,
            stats: ManagerStats::default(),
        };
        let mut out = MgrFx::new();
        core.absorb(Time::ZERO, raft_out, &mut out)?;
        Ok((core, out))
    }

    /// The map as this replica has applied it: a consistent prefix of the history, possibly behind.
    pub fn map(&self) -> &ClusterMap {
        &self.map
    }

    pub fn is_leader(&self) -> bool {
        self.lead.is_some()
    }

    pub fn stats(&self) -> ManagerStats {
        self.stats
    }

    /// The leader's view of its term, for failure reports; None on a voter that does not lead.
    pub fn describe_leadership(&self, now: Time) -> Option<String> {
        self.lead.as_ref().map(|l| l.describe(now))
    }

    pub fn tick(&mut self, now: Time, out: &mut MgrFx) -> Result<(), RaftError> {
        let mut raft_out = RaftOutput::default();
        self.raft.tick(&mut raft_out)?;
        self.absorb(now, raft_out, out)?;
        self.follow_leadership(now);
        if self.lead.is_some() {
            self.lead_duties(now, out)?;
        }
        Ok(())
    }

    pub fn on_raft(&mut self, now: Time, from: NodeId, msg: &RaftMsg, out: &mut MgrFx) -> Result<(), RaftError> {
        let mut raft_out = RaftOutput::default();
        let stepped = self.raft.step(from, msg, &mut raft_out);
        self.absorb(now, raft_out, out)?;
        match stepped {
            Err(StepError::Fatal(e)) => Err(e),
            Err(e) => {
                tracing::warn!("{e}");
                Ok(())
            }
            Ok(()) => Ok(()),
        }
    }

    /// A message for the leader. Anyone else answers with who it takes for the leader, and keeps what a
    /// leader passes on for its successor.
    pub fn on_mgr(&mut self, now: Time, from: NodeId, msg: MgrMsg, out: &mut MgrFx) -> Result<(), RaftError> {
        if let MgrMsg::Reported(reported) = msg {
            if self.lead.is_none() {
                self.inherited.learn(from, now, reported);
            }
            return Ok(());
        }
        if self.lead.is_none() {
            if matches!(msg, MgrMsg::Heartbeat(_) | MgrMsg::Join { .. } | MgrMsg::Leave { .. } | MgrMsg::Admin { .. }) {
                let leader = self.raft.leader().filter(|&l| l != self.me);
                out.send(from, ManagerMsg::Mgr(MgrMsg::NotLeader { leader }));
            }
            return Ok(());
        }
        match msg {
            MgrMsg::Heartbeat(hb) => self.on_heartbeat(now, from, hb, out),
            MgrMsg::Join { id, addrs, vnodes, location, host } => {
                let cmd = match host {
                    Some(host) => MapCommand::AddAffiliate { id, addrs, location, host },
                    None => MapCommand::AddNode { id, addrs, vnodes, location },
                };
                self.admin(now, from, cmd, None, out)
            }
            MgrMsg::Leave { id } => self.admin(now, from, MapCommand::RemoveNode { id }, None, out),
            MgrMsg::Admin { cmd, ask } => match cmd {
                MapCommand::CreateKeyspace { .. }
                | MapCommand::CreateDatabase { .. }
                | MapCommand::DropKeyspace { .. }
                | MapCommand::SetMasterRegion { .. }
                | MapCommand::SetKeyMaster { .. }
                | MapCommand::SetUser { .. }
                | MapCommand::DelUsers { .. }
                | MapCommand::WantVoters { .. } => self.admin(now, from, cmd, Some(ask), out),
                _ => {
                    let reason = "only keyspace, ACL and voter commands are taken from operators".to_string();
                    out.send(from, ManagerMsg::Mgr(MgrMsg::Refused { reason, ask: Some(ask) }));
                    Ok(())
                }
            },
            MgrMsg::HeartbeatReply(_)
            | MgrMsg::NotLeader { .. }
            | MgrMsg::Map(_)
            | MgrMsg::Refused { .. }
            | MgrMsg::Reported(_) => Ok(()),
        }
    }

    /// Proposes an operator's (or a joining node's) command, or tells `from` why the map would refuse it.
    fn admin(
        &mut self,
        now: Time,
        from: NodeId,
        cmd: MapCommand,
        ask: Option<u64>,
        out: &mut MgrFx,
    ) -> Result<(), RaftError> {
        match self.map.clone().apply(&cmd) {
            Ok(_) => self.propose(now, cmd, out),
            Err(e) => {
                out.send(from, ManagerMsg::Mgr(MgrMsg::Refused { reason: e.to_string(), ask }));
                Ok(())
            }
        }
    }

    /// Starts or ends this replica's leadership as Raft says. Leadership waits until the map is current, and
    /// starts from what earlier leaders heard of the nodes' epochs.
    fn follow_leadership(&mut self, now: Time) {
        let term = self.raft.term();
        let leads = self.raft.leader_ready();
        if leads && self.lead.as_ref().is_some_and(|l| l.term == term) {
            return;
        }
        if let Some(ended) = self.lead.take() {
            self.inherited.keep(ended);
        }
        if leads {
            tracing::info!(node = %self.me, term, "leading the manager");
            let timeout = self.cfg.failure_timeout;
            self.lead = Some(Leadership::succeed(self.me, term, now, &self.inherited, timeout));
        }
    }

    fn lead_duties(&mut self, now: Time, out: &mut MgrFx) -> Result<(), RaftError> {
        if !self.map.is_bootstrapped() {
            return self.propose(now, self.bootstrap.clone(), out);
        }
        let lead = self.lead.as_mut().expect("leading");
        let reported = lead.reported();
        let others = self.map.manager_voters.iter().filter(|&&v| v != self.me);
        others.for_each(|&v| out.send(v, ManagerMsg::Mgr(MgrMsg::Reported(reported.clone()))));
        lead.prune(now, self.cfg.lease);
        lead.prune_proposals(now, self.cfg.retry);
        let failed = lead.overdue(&self.map, now, self.cfg.failure_timeout);
        let mut cmds: Vec<MapCommand> = failed.into_iter().map(|id| MapCommand::NodeFailed { id }).collect();
        // The chain's members repair themselves as they adopt the view, so a removal waits at most for its head.
        let removed = lead.removals_done(&self.map);
        cmds.extend(removed.into_iter().map(|(chain, step)| MapCommand::StepDone { chain, step }));
        cmds.extend(self.restorations());
        cmds.extend(
            next_steps_with(&self.map, &self.cfg.limits)
                .into_iter()
                .map(|(chain, expected_view, change)| MapCommand::StepStarted { chain, expected_view, change }),
        );
        cmds.into_iter().try_for_each(|cmd| self.propose(now, cmd, out))?;
        self.plan_voters(now, out)
    }

    /// Takes the next step towards the voters the map should have ([`voters::next_change`]), one membership
    /// change at a time, each again only after `retry`.
    fn plan_voters(&mut self, now: Time, out: &mut MgrFx) -> Result<(), RaftError> {
        if self.raft.membership_pending() {
            return Ok(());
        }
        let membership = self.raft.membership();
        let gone: BTreeSet<NodeId> = membership.voters.iter().copied().filter(|&v| self.voter_gone(v, now)).collect();
        let lead = self.lead.as_ref().expect("leading");
        let alive = |n: NodeId| lead.silent_for(n, now) <= self.cfg.failure_timeout;
        let caught_up = |n: NodeId| self.raft.caught_up(n, CATCH_UP_SLACK);
        let view =
            VoterView { me: self.me, membership: &membership, gone: &gone, alive: &alive, caught_up: &caught_up };
        let Some(step) = voters::next_change(&self.map, &view) else {
            return Ok(());
        };
        let key = format!("{step:?}").into_bytes();
        if !self.lead.as_mut().expect("leading").should_propose(&key, now, self.cfg.retry) {
            return Ok(());
        }
        tracing::info!(node = %self.me, ?step, "changing the manager's voters");
        let mut raft_out = RaftOutput::default();
        match step {
            VoterStep::Change(changes) => match self.raft.change_membership(&changes, &mut raft_out) {
                Err(super::raft::ProposeError::Fatal(e)) => return Err(e),
                Err(e) => tracing::debug!("membership change not taken: {e}"),
                Ok(_) => self.stats.membership_changes += 1,
            },
            VoterStep::HandOver(to) => {
                self.raft.transfer_leadership(to, &mut raft_out)?;
                self.stats.hand_overs += 1;
            }
        }
        self.absorb(now, raft_out, out)
    }

    /// A voter to replace: removed by an operator, or failed and silent for `voter_timeout` (a failed node
    /// repaired out of every chain is Removed too, but comes back when heard from, so only silence counts).
    fn voter_gone(&self, v: NodeId, now: Time) -> bool {
        let lead = self.lead.as_ref().expect("leading");
        match self.map.nodes.get(&v) {
            None => true,
            Some(n) if n.departed || self.map.hosts.contains_key(&v) => true,
            Some(n) => !n.state.is_live() && lead.silent_for(v, now) > self.cfg.voter_timeout,
        }
    }

    fn on_heartbeat(&mut self, now: Time, from: NodeId, hb: Heartbeat, out: &mut MgrFx) -> Result<(), RaftError> {
        let lead = self.lead.as_mut().expect("leading");
        lead.heard(from, hb.epoch, now);
        let leases = lead.grant(from, &self.map, now, self.cfg.lease, self.cfg.fence());
        let map = (hb.epoch < self.map.epoch).then(|| Box::new(self.map.clone()));
        let reply = HeartbeatReply { seq: hb.seq, leases, hold: self.cfg.lease / 2, map };
        out.send(from, ManagerMsg::Mgr(MgrMsg::HeartbeatReply(reply)));
        if let Some(info) = self.map.nodes.get(&from) {
            if info.state == NodeState::Failed || (info.state == NodeState::Removed && !info.departed) {
                self.propose(now, MapCommand::NodeRecovered { id: from }, out)?;
            }
        }
        for report in &hb.replicas.steps {
            if let Some(cmd) = self.command_for(*report) {
                self.propose(now, cmd, out)?;
            }
        }
        for cmd in self.lost_commands(from, &hb.replicas) {
            self.propose(now, cmd, out)?;
        }
        for cmd in self.move_commands(&hb.replicas.moves) {
            self.propose(now, cmd, out)?;
        }
        let lead = self.lead.as_mut().expect("leading");
        lead.lost(from, hb.replicas.incarnation, &hb.replicas.lost);
        Ok(())
    }

    /// `ReplicaLost` for each chain `node` reports lost that the map does not yet know lost in this run.
    fn lost_commands(&self, node: NodeId, replicas: &ReplicaReports) -> Vec<MapCommand> {
        let incarnation = replicas.incarnation;
        let known = |chain| {
            self.map.chains.get(&chain).is_none_or(|c| !c.contains(node) || c.lost.get(&node) == Some(&incarnation))
        };
        let lost = replicas.lost.iter().map(|&(chain, _)| chain).filter(|&chain| !known(chain));
        lost.map(|chain| MapCommand::ReplicaLost { chain, node, incarnation }).collect()
    }

    /// `SetKeyMaster` for each key a master asked to move that the map does not already master there; the map
    /// refuses what its placement or its pin table does not allow.
    fn move_commands(&self, moves: &[KeyMove]) -> Vec<MapCommand> {
        let pending = |m: &&KeyMove| self.map.key_master_region(m.keyspace, &m.key) != Some(m.region.as_str());
        let cmd = |m: &KeyMove| {
            let name = self.map.keyspaces.get(&m.keyspace)?.name.clone();
            Some(MapCommand::SetKeyMaster { name, key: m.key.clone(), region: m.region.clone() })
        };
        moves.iter().filter(pending).filter_map(cmd).collect()
    }

    /// `ReplicaRestored` for each chain that has no whole replica left, once every live member that lost its
    /// replica has said what it holds: of those the map would restore from, the one holding the most is kept
    /// (the lowest node id on a tie).
    fn restorations(&self) -> Vec<MapCommand> {
        let lead = self.lead.as_ref().expect("leading");
        let mut cmds = Vec::new();
        for c in self.map.chains.values().filter(|c| !c.lost.is_empty()) {
            let held: Vec<(u64, NodeId, u64)> = c
                .lost
                .iter()
                .filter_map(|(&node, &inc)| lead.lost_lu(c.id, node, inc).map(|lu| (lu, node, inc)))
                .collect();
            let silent = c.lost.keys().any(|&n| self.map.is_live(n) && !held.iter().any(|h| h.1 == n));
            let restorable = held.into_iter().filter(|&(_, node, inc)| self.map.restorable(c.id, node, inc).is_ok());
            let best = restorable.max_by_key(|&(lu, node, _)| (lu, std::cmp::Reverse(node)));
            if let (false, Some((_, node, incarnation))) = (silent, best) {
                cmds.push(MapCommand::ReplicaRestored { chain: c.id, node, incarnation });
            }
        }
        cmds
    }

    /// The command a node's report calls for, if the map still waits for it.
    fn command_for(&self, report: StepReport) -> Option<MapCommand> {
        let (chain, step, inserted) = match report {
            StepReport::PreCopied { chain, step } => (chain, step, false),
            StepReport::Flushed { chain, step } => (chain, step, true),
        };
        match self.map.chains.get(&chain)?.change {
            Some(ChainChange::Add { step: s, inserted: i, .. }) if s == step && i == inserted => Some(if inserted {
                MapCommand::StepDone { chain, step }
            } else {
                MapCommand::AddInserted { chain, step }
            }),
            _ => None,
        }
    }

    fn propose(&mut self, now: Time, cmd: MapCommand, out: &mut MgrFx) -> Result<(), RaftError> {
        let data = postcard::to_allocvec(&cmd).expect("commands serialize");
        let lead = self.lead.as_mut().expect("only the leader proposes");
        if !lead.should_propose(&data, now, self.cfg.retry) {
            return Ok(());
        }
        let mut raft_out = RaftOutput::default();
        match self.raft.propose(data, &mut raft_out) {
            Ok(_) => {}
            Err(super::raft::ProposeError::Fatal(e)) => return Err(e),
            Err(e) => tracing::debug!("proposal not taken: {e}"),
        }
        self.absorb(now, raft_out, out)
    }

    /// Sends Raft's messages and applies what committed; a leader tells every node about a new map.
    fn absorb(&mut self, now: Time, raft_out: RaftOutput, out: &mut MgrFx) -> Result<(), RaftError> {
        raft_out.messages.into_iter().for_each(|(to, msg)| out.send(to, ManagerMsg::Raft(msg)));
        let epoch = self.map.epoch;
        for item in raft_out.committed {
            self.apply(item)?;
        }
        if self.applied_since_snapshot >= self.cfg.snapshot_every || self.compact_now {
            let state = postcard::to_allocvec(&self.map).expect("maps serialize");
            self.raft.compact(self.raft.applied_index(), state)?;
            self.applied_since_snapshot = 0;
            self.compact_now = false;
        }
        if self.map.epoch != epoch && self.lead.is_some() {
            let targets = self.map.nodes.keys().filter(|&&n| n != self.me);
            targets.for_each(|&n| out.send(n, ManagerMsg::Mgr(MgrMsg::Map(Box::new(self.map.clone())))));
        }
        self.follow_leadership(now);
        Ok(())
    }

    fn apply(&mut self, item: Committed) -> Result<(), RaftError> {
        match item {
            Committed::Entry { data, .. } => match postcard::from_bytes::<MapCommand>(&data) {
                // A refused command changes nothing; it was planned against a map that has since moved.
                Ok(cmd) => drop(self.map.apply(&cmd)),
                Err(e) => tracing::error!("undecodable map command in the log: {e}"),
            },
            Committed::Snapshot { data, .. } => {
                self.map = postcard::from_bytes(&data)
                    .map_err(|e| RaftError::Invalid(format!("undecodable map snapshot: {e}")))?;
            }
            Committed::Membership { membership, .. } => {
                self.compact_now |= membership.learners.iter().any(|l| !self.map.manager_learners.contains(l));
                let Membership { voters, learners, .. } = membership;
                drop(self.map.apply(&MapCommand::ManagerMembership { voters, learners }));
            }
        }
        self.applied_since_snapshot += 1;
        Ok(())
    }
}
