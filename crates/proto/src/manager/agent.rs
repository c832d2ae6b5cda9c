//! The manager's agent on every node: heartbeats to the leader (seed 003 §2.6, every `t_s`), the newest
//! cluster map (adopted only once durable, see [`super::mapfile`]), tail leases, and the node's reports of
//! finished steps and its request to join.
//!
//! The agent does not know who leads: it heartbeats the voter it last heard leads, follows `NotLeader`
//! redirections, and moves on to the next voter after a few unanswered heartbeats.

use super::mapfile::MapFile;
use super::msg::{Heartbeat, HeartbeatReply, ManagerMsg, MgrFx, MgrMsg};
use crate::map::{ClusterMap, NodeAddrs, NodeState};
use crate::reports::ReplicaReports;
use meridian_core::{ChainId, Location, NodeId, Time};
use std::collections::VecDeque;
use std::sync::Arc;

/// Heartbeats remembered for matching replies; older replies carry no lease.
const SENT_MAX: usize = 16;
/// Unanswered heartbeats after which the agent tries another voter: a second's worth at the default tick, so
/// that a slow link between regions does not send it round the voters.
const UNANSWERED_MAX: u32 = 10;

/// What the agent learned from a message, for the node to act on.
#[derive(Debug)]
pub enum Learned {
    /// A map newer than the agent's, not stored yet: the node makes durable what a restart would judge by it,
    /// then hands it to [`Agent::adopt`].
    Map(Box<ClusterMap>),
    /// Tail leases, valid until `until` on this node's clock.
    Leases { chains: Vec<(ChainId, u64)>, until: Time },
    /// The leader refused an operator's request this node forwarded as number `ask`.
    Refused { ask: u64, reason: String },
}

/// A node that is not yet in the cluster asks to be added with these addresses, at this location.
#[derive(Clone, Debug)]
pub struct JoinRequest {
    pub addrs: NodeAddrs,
    pub vnodes: u32,
    pub location: Location,
    /// The standard node this one joins as an affiliated node of (seed 001 §4.1.4), if it does.
    pub host: Option<NodeId>,
}

#[derive(Debug)]
pub struct Agent {
    me: NodeId,
    file: MapFile,
    map: Option<Arc<ClusterMap>>,
    /// The voters to heartbeat until a map names them.
    voters: Vec<NodeId>,
    leader: Option<NodeId>,
    next_voter: usize,
    seq: u64,
    sent: VecDeque<(u64, Time)>,
    unanswered: u32,
    join: Option<JoinRequest>,
    /// The leader's last refusal of a request of this node's, for status pages.
    pub refused: Option<String>,
}

impl Agent {
    /// Opens the agent with the map stored in `file`, if any; `voters` are the manager's voters as the
    /// node's start-up configuration gives them.
    pub fn open(me: NodeId, file: MapFile, voters: Vec<NodeId>, join: Option<JoinRequest>) -> std::io::Result<Agent> {
        let map = file.load()?.map(Arc::new);
        Ok(Agent {
            me,
            file,
            map,
            voters,
            leader: None,
            next_voter: 0,
            seq: 0,
            sent: VecDeque::new(),
            unanswered: 0,
            join,
            refused: None,
        })
    }

    pub fn map(&self) -> Option<&Arc<ClusterMap>> {
        self.map.as_ref()
    }

    pub fn epoch(&self) -> u64 {
        self.map.as_ref().map_or(0, |m| m.epoch)
    }

    fn voters(&self) -> &[NodeId] {
        match &self.map {
            Some(m) if !m.manager_voters.is_empty() => &m.manager_voters,
            _ => &self.voters,
        }
    }

    /// The voter this node takes for the manager's leader: where heartbeats and requests go now.
    pub fn leader_guess(&self) -> Option<NodeId> {
        let voters = self.voters();
        self.leader.or_else(|| (!voters.is_empty()).then(|| voters[self.next_voter % voters.len()]))
    }

    fn forget_leader(&mut self) {
        self.leader = None;
        self.next_voter += 1;
        self.unanswered = 0;
    }

    /// Every manager tick: a heartbeat to the leader, and the request to join while the map lacks this node.
    pub fn tick(&mut self, now: Time, replicas: ReplicaReports, out: &mut MgrFx) {
        if self.unanswered >= UNANSWERED_MAX {
            self.forget_leader();
        }
        let Some(to) = self.leader_guess() else { return };
        self.seq += 1;
        self.unanswered += 1;
        self.sent.push_back((self.seq, now));
        if self.sent.len() > SENT_MAX {
            self.sent.pop_front();
        }
        let heartbeat = Heartbeat { seq: self.seq, epoch: self.epoch(), replicas };
        out.send(to, ManagerMsg::Mgr(MgrMsg::Heartbeat(heartbeat)));
        if let Some(join) = self.join.as_ref().filter(|_| !self.in_map()) {
            let (id, addrs, vnodes, location, host) =
                (self.me, join.addrs.clone(), join.vnodes, join.location.clone(), join.host);
            out.send(to, ManagerMsg::Mgr(MgrMsg::Join { id, addrs, vnodes, location, host }));
        }
    }

    /// Whether the map has this node as a placeable one (so a join request has been taken).
    fn in_map(&self) -> bool {
        self.map.as_ref().and_then(|m| m.nodes.get(&self.me)).is_some_and(|n| n.state != NodeState::Removed)
    }

    /// Handles a message for the agent: what it learned, in the order the node must act on it (a map before the
    /// leases that came with it).
    pub fn on_msg(&mut self, from: NodeId, msg: MgrMsg) -> Vec<Learned> {
        let mut learned = Vec::new();
        match msg {
            MgrMsg::NotLeader { leader } => match leader {
                Some(l) if l != from => self.leader = Some(l),
                _ => self.forget_leader(),
            },
            MgrMsg::Map(map) => learned.extend(self.newer(map)),
            MgrMsg::HeartbeatReply(reply) => self.on_reply(from, reply, &mut learned),
            MgrMsg::Refused { reason, ask: Some(ask) } => learned.push(Learned::Refused { ask, reason }),
            MgrMsg::Refused { reason, ask: None } => {
                if self.refused.as_ref() != Some(&reason) {
                    tracing::error!(node = %self.me, "the cluster manager refused this node's request: {reason}");
                }
                self.refused = Some(reason);
            }
            MgrMsg::Heartbeat(_)
            | MgrMsg::Join { .. }
            | MgrMsg::Leave { .. }
            | MgrMsg::Admin { .. }
            | MgrMsg::Reported(_) => {}
        }
        learned
    }

    fn on_reply(&mut self, from: NodeId, reply: HeartbeatReply, learned: &mut Vec<Learned>) {
        self.leader = Some(from);
        self.unanswered = 0;
        learned.extend(reply.map.and_then(|map| self.newer(map)));
        if let Some(&(_, sent)) = self.sent.iter().find(|(seq, _)| *seq == reply.seq) {
            learned.push(Learned::Leases { chains: reply.leases, until: sent.plus(reply.hold) });
        }
    }

    /// `map`, to adopt, if it is newer than the agent's.
    fn newer(&self, map: Box<ClusterMap>) -> Option<Learned> {
        (map.epoch > self.epoch()).then_some(Learned::Map(map))
    }

    /// Takes `map` if it is newer than the current one, durably: the node has made durable first what a restart
    /// would judge by this map. The map now the agent's, if it took it.
    pub fn adopt(&mut self, map: ClusterMap) -> std::io::Result<Option<Arc<ClusterMap>>> {
        if map.epoch <= self.epoch() {
            return Ok(None);
        }
        self.file.store(&map)?;
        let map = Arc::new(map);
        self.map = Some(map.clone());
        Ok(Some(map))
    }
}
