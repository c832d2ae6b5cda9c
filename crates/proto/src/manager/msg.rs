//! Messages between every node's agent and the manager's leader (seed 003 §2.6: heartbeats between the
//! manager and its back-ends; Listing 2's JOIN, FLUSH_ACK and CR_*_DONE become reports in heartbeats).

use super::raft::RaftMsg;
use crate::map::{ClusterMap, MapCommand, NodeAddrs};
use crate::reports::ReplicaReports;
use meridian_core::{ChainId, Effects, Location, NodeId};
use serde::{Deserialize, Serialize};
use std::convert::Infallible;
use std::time::Duration;

/// What the manager and the agent send: Raft's messages among the voters, and the manager's own.
#[derive(Debug)]
pub enum ManagerMsg {
    Raft(RaftMsg),
    Mgr(MgrMsg),
}

/// Where the manager and the agent put their effects. They only send: the node's manager tick drives them.
pub type MgrFx = Effects<ManagerMsg, Infallible>;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MgrMsg {
    /// Node → the voter it takes for the leader, every manager tick.
    Heartbeat(Heartbeat),
    /// Leader → node.
    HeartbeatReply(HeartbeatReply),
    /// A voter that does not lead → node: the leader as far as it knows.
    NotLeader { leader: Option<NodeId> },
    /// Leader → every node, when the map changes.
    Map(Box<ClusterMap>),
    /// Node → leader: add node `id` (the sender itself when it joins, or any node an operator adds); with a
    /// `host`, as an affiliated node of it ([`MapCommand::AddAffiliate`]).
    Join { id: NodeId, addrs: NodeAddrs, vnodes: u32, location: Location, host: Option<NodeId> },
    /// Admin → leader: drain `id` out of its chains and remove it.
    Leave { id: NodeId },
    /// Leader → the node that asked: the map refuses the request (a node id used with other addresses, say).
    /// `ask` is the asker's number for an operator's request ([`MgrMsg::Admin`]), None for the node's own join.
    Refused { reason: String, ask: Option<u64> },
    /// Admin → leader: an operator's keyspace or ACL command ([`MapCommand::CreateKeyspace`] or
    /// [`MapCommand::CreateDatabase`],
    /// [`MapCommand::DropKeyspace`], [`MapCommand::SetMasterRegion`], [`MapCommand::SetKeyMaster`],
    /// [`MapCommand::SetUser`] or [`MapCommand::DelUsers`]; the leader refuses any other), numbered `ask` by the
    /// sender.
    Admin { cmd: MapCommand, ask: u64 },
    /// Leader → every other voter, every manager tick: the newest map epoch each node has reported adopting,
    /// for whichever voter leads next ([`super::leader::Leadership::succeed`]); its arrival also tells the voter
    /// the leader was alive.
    Reported(Vec<(NodeId, u64)>),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// Numbers this node's heartbeats, so a reply's lease counts from when its heartbeat was sent.
    pub seq: u64,
    /// The newest map epoch this node has adopted (and persisted): it will never act on an older one.
    pub epoch: u64,
    /// Steps this node has durably finished its part of, and the replicas it lost to a restart.
    pub replicas: ReplicaReports,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatReply {
    pub seq: u64,
    /// The chains whose tail leases the node holds, at these views.
    pub leases: Vec<(ChainId, u64)>,
    /// How long after sending heartbeat `seq` the node may count those leases valid, on its own clock.
    pub hold: Duration,
    /// The leader's map, if the heartbeat showed an older epoch.
    pub map: Option<Box<ClusterMap>>,
}
