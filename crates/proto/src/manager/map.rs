//! The cluster map: the state the manager's Raft log replicates (DESIGN.md §2 principle 4; the seed's
//! single manager, 003 §2.1 and Listing 2, made fault tolerant).
//!
//! The map is changed only by [`ClusterMap::apply`] on a [`MapCommand`] taken from the log. `apply` is
//! deterministic (ordered maps only, no clock, no randomness), so every replica of the log computes the
//! same map. A command that is invalid against the current map is refused with a [`MapError`] and
//! changes nothing, not even the epoch; a command that changes anything bumps [`ClusterMap::epoch`]
//! exactly once.
//!
//! # Chains
//! Placement is by fixed partitions ([`super::placement`]): chain `ChainId(p)` serves partition `p`
//! forever. Each chain carries its members (head first, tail last), its `view` (the seed's
//! chain-view-id, §2.4) and at most one membership step in flight ([`ChainChange`]). The planner
//! ([`super::plan`]) proposes steps that move a chain toward its target; an executor carries a step out
//! on the chain (pre-copy and FLUSH for an Add, §2.5; CR_HEAD / CR_MID / CR_TAIL or TRUNCATE for a
//! Remove, §2.6 and Listing 1) and reports it through the log as `StepStarted`, then `StepDone` or
//! `StepAborted`.
//!
//! The view is bumped by each of the three, so it names one (members, step in flight) pair. Every step
//! command carries the view it was planned against and is refused if the chain's view moved: a stale
//! leader's plan, a duplicated command or the `StepDone` of an attempt that was aborted and re-planned
//! can never apply twice or to the wrong step. Chain nodes and front-ends may likewise drop anything
//! stamped with an older view.
//!
//! # Node states
//! ```text
//!   AddNode ──► Joining ──(member of all its target chains)──► Active
//!                  │                                            │
//!                  └────────────── RemoveNode ──► Leaving ◄─────┘
//!   NodeFailed (from Joining, Active or Leaving) ──► Failed
//!   Leaving, Failed ──(member of no chain, no step in flight names it)──► Removed ──AddNode──► Joining
//! ```
//! Joining and Active nodes are placeable (targets of chains). Leaving nodes still hold valid data and
//! are drained by the planner (an Add of their replacement first, then their removal), so a leave never
//! lowers a chain's replication on the way. Failed nodes are fail-stop (§2.6): the planner repairs them
//! out of every chain first. There is no "recovered" command: a failed node that comes back may have
//! missed updates, so it must wait until it is Removed and then be added again as a fresh joiner (same
//! addresses), which pre-copies its data anew. Removed entries stay as tombstones, so `ctl status` can
//! show them and an id is never silently reused with other addresses.
//!
//! A failure aborts every step in flight on a chain the failed node is a member of or is being added
//! to: the seed's FLUSH and repair messages pass through every member, so such a step cannot finish,
//! and "the manager locks the chain state, repairs the chain, redoes the addition" (§2.5).
//!
//! A chain never loses its last live member: removing a member requires another member that is not
//! Failed. A chain whose members have all failed keeps them and is reported irreparable by the planner;
//! nothing is invented for it.
//!
//! # Evolution
//! The map and the commands are postcard-encoded, which is not self-describing: new commands are added
//! as new variants at the end of [`MapCommand`] and new map state (keyspaces, voter changes) as new
//! fields at the end of [`ClusterMap`], with a log format version bump.

use super::placement::{partitions_valid, VidRing};
use meridian_core::config::VNODES_MAX;
use meridian_core::{ChainId, NodeId};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Lifecycle of a node in the map; see the module docs for the transitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum NodeState {
    Joining,
    Active,
    Leaving,
    Failed,
    Removed,
}

impl NodeState {
    /// Joining and Active nodes are targets of chains.
    pub fn is_placeable(self) -> bool {
        matches!(self, NodeState::Joining | NodeState::Active)
    }

    /// A member in this state holds a valid replica that a step can read from.
    pub fn is_live(self) -> bool {
        matches!(self, NodeState::Joining | NodeState::Active | NodeState::Leaving)
    }
}

/// As `ctl status` prints it.
impl fmt::Display for NodeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NodeState::Joining => "JOINING",
            NodeState::Active => "ACTIVE",
            NodeState::Leaving => "LEAVING",
            NodeState::Failed => "FAILED",
            NodeState::Removed => "REMOVED",
        })
    }
}

/// Where a node listens.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAddrs {
    /// host:port of the peer (chain and manager) listener.
    pub peer_addr: String,
    /// host:port of the RESP listener.
    pub resp_addr: String,
    pub http_addr: Option<String>,
}

impl NodeAddrs {
    fn all(&self) -> impl Iterator<Item = &str> {
        [Some(self.peer_addr.as_str()), Some(self.resp_addr.as_str()), self.http_addr.as_deref()].into_iter().flatten()
    }

    fn shared_with(&self, other: &NodeAddrs) -> Option<&str> {
        self.all().find(|a| other.all().any(|b| a == &b))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub addrs: NodeAddrs,
    /// Virtual ids on the ring (seed §2.2): the node's placement weight.
    pub vnodes: u32,
    pub state: NodeState,
}

/// A membership step in flight on one chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChainChange {
    /// Pre-copy from the tail, then FLUSH (§2.5); on success `node` is inserted at `position`, which is
    /// always before the tail (a node never joins directly as tail). `flush` is the FLUSH sequence number,
    /// unique in the map (§2.5: "each FLUSH carries a unique sequence number").
    Add { node: NodeId, position: usize, flush: u64 },
    /// Take `node` out: CR_HEAD / CR_MID / CR_TAIL after a failure or for a leave, TRUNCATE of a surplus
    /// live tail (see [`super::plan::removal_kind`]).
    Remove { node: NodeId },
}

impl ChainChange {
    pub fn node(&self) -> NodeId {
        match *self {
            ChainChange::Add { node, .. } | ChainChange::Remove { node } => node,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainView {
    pub id: ChainId,
    /// Head first, tail last; never empty once bootstrapped.
    pub members: Vec<NodeId>,
    /// The seed's chain-view-id (§2.4), ≥ 1; bumped by every step command that applies to the chain.
    pub view: u64,
    pub change: Option<ChainChange>,
}

impl ChainView {
    pub fn position(&self, node: NodeId) -> Option<usize> {
        self.members.iter().position(|&m| m == node)
    }

    pub fn contains(&self, node: NodeId) -> bool {
        self.members.contains(&node)
    }

    pub fn tail(&self) -> Option<NodeId> {
        self.members.last().copied()
    }

    /// `node` is a member or the subject of the step in flight.
    fn involves(&self, node: NodeId) -> bool {
        self.contains(node) || self.change.as_ref().is_some_and(|c| c.node() == node)
    }
}

/// The replicated cluster map. Fields are public for reading; change them only through [`Self::apply`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMap {
    /// Bumped once by every applied command that changes anything; 0 before bootstrap.
    pub epoch: u64,
    /// R: target chain length (capped by the number of placeable nodes).
    pub replication: usize,
    /// P: number of partitions and of chains; 0 before bootstrap.
    pub partitions: u32,
    pub nodes: BTreeMap<NodeId, NodeInfo>,
    /// One chain per partition, `ChainId(0)..ChainId(P)`.
    pub chains: BTreeMap<ChainId, ChainView>,
    /// The nodes that run the manager's Raft group.
    pub manager_voters: Vec<NodeId>,
    /// The next unused FLUSH sequence number.
    pub next_flush: u64,
}

impl Default for ClusterMap {
    fn default() -> Self {
        ClusterMap {
            epoch: 0,
            replication: 0,
            partitions: 0,
            nodes: BTreeMap::new(),
            chains: BTreeMap::new(),
            manager_voters: Vec::new(),
            next_flush: 1,
        }
    }
}

/// An entry of the manager's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MapCommand {
    /// Only on an empty map: every node Active, every chain at its target, view 1.
    Bootstrap { nodes: Vec<(NodeId, NodeAddrs)>, replication: usize, partitions: u32, vnodes: u32, voters: Vec<NodeId> },
    /// A new node (Joining), or a Removed one back as a fresh joiner. Idempotent for a Joining or Active
    /// node with the same addresses and vnodes.
    AddNode { id: NodeId, addrs: NodeAddrs, vnodes: u32 },
    /// Graceful leave: Leaving, drained out of its chains, then Removed.
    RemoveNode { id: NodeId },
    /// The failure detector declared `id` dead (fail-stop, §2.6).
    NodeFailed { id: NodeId },
    /// An executor began `change` on `chain`, planned against `expected_view`.
    StepStarted { chain: ChainId, expected_view: u64, change: ChainChange },
    /// The step in flight finished; `expected_view` is the view `StepStarted` produced.
    StepDone { chain: ChainId, expected_view: u64 },
    /// The step in flight was given up; the chain keeps its members.
    StepAborted { chain: ChainId, expected_view: u64 },
}

/// What an accepted command did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The map changed and its epoch was bumped.
    Changed,
    /// The command was valid but already in effect (a repeated AddNode, RemoveNode or NodeFailed).
    Unchanged,
}

/// Why a command was refused; a refused command changed nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapError {
    AlreadyBootstrapped,
    NotBootstrapped,
    BadBootstrap(&'static str),
    BadVnodes(u32),
    /// The id exists with other addresses or vnodes.
    IdClash(NodeId),
    AddrInUse {
        addr: String,
        by: NodeId,
    },
    /// The node must reach Removed before it can be added again.
    NodeBusy {
        id: NodeId,
        state: NodeState,
    },
    UnknownNode(NodeId),
    UnknownChain(ChainId),
    StaleView {
        chain: ChainId,
        expected: u64,
        actual: u64,
    },
    StepInFlight(ChainId),
    NoStepInFlight(ChainId),
    /// Only Joining and Active nodes are added to chains.
    NotPlaceable {
        id: NodeId,
        state: NodeState,
    },
    AlreadyMember {
        chain: ChainId,
        node: NodeId,
    },
    NotMember {
        chain: ChainId,
        node: NodeId,
    },
    /// A failed member must be repaired out before anything is added.
    NeedsRepair(ChainId),
    /// The Add would put the joiner at or after the tail (§2.5) or the chain has no member to copy from.
    NeverTail {
        chain: ChainId,
        position: usize,
    },
    /// The chain already has R+1 members.
    TooManyReplicas(ChainId),
    FlushReused {
        flush: u64,
        next: u64,
    },
    /// No other live member would remain.
    LastReplica {
        chain: ChainId,
        node: NodeId,
    },
}

impl fmt::Display for MapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MapError::AlreadyBootstrapped => write!(f, "the cluster is already bootstrapped"),
            MapError::NotBootstrapped => write!(f, "the cluster is not bootstrapped"),
            MapError::BadBootstrap(why) => write!(f, "invalid bootstrap: {why}"),
            MapError::BadVnodes(v) => write!(f, "vnodes must be between 1 and {VNODES_MAX}, not {v}"),
            MapError::IdClash(id) => write!(f, "node {id} already exists with other addresses or vnodes"),
            MapError::AddrInUse { addr, by } => write!(f, "address {addr} is used by node {by}"),
            MapError::NodeBusy { id, state } => write!(f, "node {id} is {state}; add it again once it is REMOVED"),
            MapError::UnknownNode(id) => write!(f, "unknown node {id}"),
            MapError::UnknownChain(c) => write!(f, "unknown chain {c}"),
            MapError::StaleView { chain, expected, actual } => {
                write!(f, "chain {chain} is at view {actual}, the command expected {expected}")
            }
            MapError::StepInFlight(c) => write!(f, "chain {c} already has a step in flight"),
            MapError::NoStepInFlight(c) => write!(f, "chain {c} has no step in flight"),
            MapError::NotPlaceable { id, state } => write!(f, "node {id} is {state} and cannot join a chain"),
            MapError::AlreadyMember { chain, node } => write!(f, "node {node} is already a member of chain {chain}"),
            MapError::NotMember { chain, node } => write!(f, "node {node} is not a member of chain {chain}"),
            MapError::NeedsRepair(c) => write!(f, "chain {c} has a failed member to repair first"),
            MapError::NeverTail { chain, position } => {
                write!(f, "position {position} is not before the tail of chain {chain}")
            }
            MapError::TooManyReplicas(c) => write!(f, "chain {c} already has R+1 members"),
            MapError::FlushReused { flush, next } => write!(f, "FLUSH number {flush} is used (next is {next})"),
            MapError::LastReplica { chain, node } => {
                write!(f, "removing {node} would leave chain {chain} without a live replica")
            }
        }
    }
}

impl std::error::Error for MapError {}

impl ClusterMap {
    pub fn is_bootstrapped(&self) -> bool {
        self.partitions != 0
    }

    pub fn state(&self, id: NodeId) -> Option<NodeState> {
        self.nodes.get(&id).map(|n| n.state)
    }

    /// Unknown nodes are not live.
    pub fn is_live(&self, id: NodeId) -> bool {
        self.state(id).is_some_and(NodeState::is_live)
    }

    /// The target chain of every partition, indexed by chain id ([`super::placement`]).
    pub fn targets(&self) -> Vec<Vec<NodeId>> {
        let placeable = self.nodes.iter().filter(|(_, n)| n.state.is_placeable()).map(|(&id, n)| (id, n.vnodes));
        VidRing::new(placeable).targets(self.partitions, self.replication)
    }

    /// Applies one log entry. Deterministic; on error nothing changed.
    pub fn apply(&mut self, cmd: &MapCommand) -> Result<Applied, MapError> {
        if !self.is_bootstrapped() && !matches!(cmd, MapCommand::Bootstrap { .. }) {
            return Err(MapError::NotBootstrapped);
        }
        let applied = match cmd {
            MapCommand::Bootstrap { nodes, replication, partitions, vnodes, voters } => {
                self.bootstrap(nodes, *replication, *partitions, *vnodes, voters)
            }
            MapCommand::AddNode { id, addrs, vnodes } => self.add_node(*id, addrs, *vnodes),
            MapCommand::RemoveNode { id } => self.remove_node(*id),
            MapCommand::NodeFailed { id } => self.node_failed(*id),
            MapCommand::StepStarted { chain, expected_view, change } => {
                self.step_started(*chain, *expected_view, change)
            }
            MapCommand::StepDone { chain, expected_view } => self.step_done(*chain, *expected_view),
            MapCommand::StepAborted { chain, expected_view } => self.step_aborted(*chain, *expected_view),
        }?;
        if applied == Applied::Changed {
            self.epoch += 1;
            self.settle();
        }
        Ok(applied)
    }

    fn bootstrap(
        &mut self,
        nodes: &[(NodeId, NodeAddrs)],
        replication: usize,
        partitions: u32,
        vnodes: u32,
        voters: &[NodeId],
    ) -> Result<Applied, MapError> {
        if self.is_bootstrapped() {
            return Err(MapError::AlreadyBootstrapped);
        }
        validate_bootstrap(nodes, replication, partitions, voters)?;
        let mut map = ClusterMap { replication, partitions, manager_voters: voters.to_vec(), ..self.clone() };
        for (id, addrs) in nodes {
            map.add_node(*id, addrs, vnodes)?;
            map.nodes.get_mut(id).expect("just added").state = NodeState::Active;
        }
        for (p, members) in map.targets().into_iter().enumerate() {
            let id = ChainId(p as u32);
            map.chains.insert(id, ChainView { id, members, view: 1, change: None });
        }
        *self = map;
        Ok(Applied::Changed)
    }

    fn add_node(&mut self, id: NodeId, addrs: &NodeAddrs, vnodes: u32) -> Result<Applied, MapError> {
        if vnodes == 0 || vnodes as usize > VNODES_MAX {
            return Err(MapError::BadVnodes(vnodes));
        }
        if let Some(info) = self.nodes.get(&id) {
            if info.addrs != *addrs || info.vnodes != vnodes {
                return Err(MapError::IdClash(id));
            }
            match info.state {
                NodeState::Joining | NodeState::Active => return Ok(Applied::Unchanged),
                NodeState::Leaving | NodeState::Failed => return Err(MapError::NodeBusy { id, state: info.state }),
                NodeState::Removed => {}
            }
        }
        for (&other, info) in &self.nodes {
            if other == id || info.state == NodeState::Removed {
                continue;
            }
            if let Some(addr) = info.addrs.shared_with(addrs) {
                return Err(MapError::AddrInUse { addr: addr.to_string(), by: other });
            }
        }
        self.nodes.insert(id, NodeInfo { addrs: addrs.clone(), vnodes, state: NodeState::Joining });
        Ok(Applied::Changed)
    }

    fn remove_node(&mut self, id: NodeId) -> Result<Applied, MapError> {
        let info = self.nodes.get_mut(&id).ok_or(MapError::UnknownNode(id))?;
        if !info.state.is_placeable() {
            return Ok(Applied::Unchanged);
        }
        info.state = NodeState::Leaving;
        Ok(Applied::Changed)
    }

    fn node_failed(&mut self, id: NodeId) -> Result<Applied, MapError> {
        let info = self.nodes.get_mut(&id).ok_or(MapError::UnknownNode(id))?;
        if !info.state.is_live() {
            return Ok(Applied::Unchanged);
        }
        info.state = NodeState::Failed;
        // §2.5: a failure during a step stops it; the planner repairs the chain and redoes the step.
        for chain in self.chains.values_mut() {
            if chain.change.is_some() && chain.involves(id) {
                chain.change = None;
                chain.view += 1;
            }
        }
        Ok(Applied::Changed)
    }

    /// The chain, if its view is `expected_view`.
    fn chain_at(&self, chain: ChainId, expected_view: u64) -> Result<&ChainView, MapError> {
        let c = self.chains.get(&chain).ok_or(MapError::UnknownChain(chain))?;
        if c.view != expected_view {
            return Err(MapError::StaleView { chain, expected: expected_view, actual: c.view });
        }
        Ok(c)
    }

    fn step_started(&mut self, chain: ChainId, expected_view: u64, change: &ChainChange) -> Result<Applied, MapError> {
        let c = self.chain_at(chain, expected_view)?;
        if c.change.is_some() {
            return Err(MapError::StepInFlight(chain));
        }
        match *change {
            ChainChange::Add { node, position, flush } => self.check_add(c, node, position, flush)?,
            ChainChange::Remove { node } => self.check_remove(c, node)?,
        }
        if let ChainChange::Add { flush, .. } = *change {
            self.next_flush = flush + 1;
        }
        let c = self.chains.get_mut(&chain).expect("checked");
        c.change = Some(change.clone());
        c.view += 1;
        Ok(Applied::Changed)
    }

    fn check_add(&self, c: &ChainView, node: NodeId, position: usize, flush: u64) -> Result<(), MapError> {
        let state = self.state(node).ok_or(MapError::UnknownNode(node))?;
        if !state.is_placeable() {
            return Err(MapError::NotPlaceable { id: node, state });
        }
        if c.contains(node) {
            return Err(MapError::AlreadyMember { chain: c.id, node });
        }
        if c.members.iter().any(|&m| !self.is_live(m)) {
            return Err(MapError::NeedsRepair(c.id));
        }
        if c.members.len() > self.replication {
            return Err(MapError::TooManyReplicas(c.id));
        }
        if position >= c.members.len() {
            return Err(MapError::NeverTail { chain: c.id, position });
        }
        if flush < self.next_flush {
            return Err(MapError::FlushReused { flush, next: self.next_flush });
        }
        Ok(())
    }

    fn check_remove(&self, c: &ChainView, node: NodeId) -> Result<(), MapError> {
        if !c.contains(node) {
            return Err(MapError::NotMember { chain: c.id, node });
        }
        if !c.members.iter().any(|&m| m != node && self.is_live(m)) {
            return Err(MapError::LastReplica { chain: c.id, node });
        }
        Ok(())
    }

    /// Completes the step in flight. Its preconditions still hold: every failure that could break them
    /// aborted the step and moved the view (see `node_failed`).
    fn step_done(&mut self, chain: ChainId, expected_view: u64) -> Result<Applied, MapError> {
        self.chain_at(chain, expected_view)?;
        let c = self.chains.get_mut(&chain).expect("checked");
        match c.change.take().ok_or(MapError::NoStepInFlight(chain))? {
            ChainChange::Add { node, position, .. } => c.members.insert(position, node),
            ChainChange::Remove { node } => c.members.retain(|&m| m != node),
        }
        c.view += 1;
        Ok(Applied::Changed)
    }

    fn step_aborted(&mut self, chain: ChainId, expected_view: u64) -> Result<Applied, MapError> {
        self.chain_at(chain, expected_view)?;
        let c = self.chains.get_mut(&chain).expect("checked");
        c.change.take().ok_or(MapError::NoStepInFlight(chain))?;
        // The chain's nodes may have seen part of the step: the new view tells them to reset.
        c.view += 1;
        Ok(Applied::Changed)
    }

    /// `node` is a member of, or the subject of a step on, some chain.
    fn involved(&self, node: NodeId) -> bool {
        self.chains.values().any(|c| c.involves(node))
    }

    /// The automatic transitions: Joining → Active once in every target chain, Leaving/Failed → Removed
    /// once in no chain. Part of the command that made them true, so they share its epoch.
    fn settle(&mut self) {
        let targets = self.nodes.values().any(|n| n.state == NodeState::Joining).then(|| self.targets());
        let updates: Vec<(NodeId, NodeState)> = self
            .nodes
            .iter()
            .filter_map(|(&id, n)| match n.state {
                NodeState::Joining if self.holds_targets(id, targets.as_deref()?) => Some((id, NodeState::Active)),
                NodeState::Leaving | NodeState::Failed if !self.involved(id) => Some((id, NodeState::Removed)),
                _ => None,
            })
            .collect();
        for (id, state) in updates {
            self.nodes.get_mut(&id).expect("listed").state = state;
        }
    }

    fn holds_targets(&self, node: NodeId, targets: &[Vec<NodeId>]) -> bool {
        targets.iter().zip(self.chains.values()).all(|(t, c)| !t.contains(&node) || c.contains(node))
    }

    /// The map's invariants; `Err` describes the first violation. The simulator runs this after every
    /// applied command.
    pub fn check(&self) -> Result<(), String> {
        if !self.is_bootstrapped() {
            return match self.nodes.is_empty() && self.chains.is_empty() {
                true => Ok(()),
                false => Err("nodes or chains before bootstrap".into()),
            };
        }
        ensure(partitions_valid(self.partitions), || format!("invalid partition count {}", self.partitions))?;
        ensure(self.replication >= 1, || "replication 0".into())?;
        ensure(self.chains.len() == self.partitions as usize, || format!("{} chains", self.chains.len()))?;
        for (i, (&id, c)) in self.chains.iter().enumerate() {
            ensure(id == ChainId(i as u32) && c.id == id, || format!("chain {id} out of place"))?;
            self.check_chain(c)?;
        }
        self.check_flushes()?;
        self.check_nodes()
    }

    fn check_chain(&self, c: &ChainView) -> Result<(), String> {
        let id = c.id;
        ensure(c.view >= 1, || format!("chain {id} has view 0"))?;
        ensure(!c.members.is_empty(), || format!("chain {id} is empty"))?;
        ensure(c.members.len() <= self.replication + 1, || format!("chain {id} has more than R+1 members"))?;
        let distinct: BTreeSet<NodeId> = c.members.iter().copied().collect();
        ensure(distinct.len() == c.members.len(), || format!("chain {id} repeats a member: {:?}", c.members))?;
        for &m in &c.members {
            let state = self.state(m);
            ensure(state.is_some_and(|s| s != NodeState::Removed), || format!("chain {id}: member {m} is {state:?}"))?;
        }
        match c.change {
            None => Ok(()),
            Some(ChainChange::Add { node, position, flush }) => self.check_add_in_flight(c, node, position, flush),
            Some(ChainChange::Remove { node }) => self.check_remove_in_flight(c, node),
        }
    }

    fn check_add_in_flight(&self, c: &ChainView, node: NodeId, position: usize, flush: u64) -> Result<(), String> {
        let id = c.id;
        ensure(self.is_live(node), || format!("chain {id}: adding {node}, which is {:?}", self.state(node)))?;
        ensure(!c.contains(node), || format!("chain {id}: adding {node}, already a member"))?;
        ensure(position < c.members.len(), || format!("chain {id}: adding {node} at or after the tail"))?;
        ensure(c.members.len() <= self.replication, || format!("chain {id}: add would exceed R+1"))?;
        ensure(flush < self.next_flush, || format!("chain {id}: FLUSH {flush} not below {}", self.next_flush))?;
        ensure(c.members.iter().all(|&m| self.is_live(m)), || format!("chain {id}: add with a failed member"))
    }

    fn check_remove_in_flight(&self, c: &ChainView, node: NodeId) -> Result<(), String> {
        let id = c.id;
        ensure(c.contains(node), || format!("chain {id}: removing {node}, not a member"))?;
        let other_live = c.members.iter().any(|&m| m != node && self.is_live(m));
        ensure(other_live, || format!("chain {id}: removing {node} would leave no live member"))
    }

    fn check_flushes(&self) -> Result<(), String> {
        let mut seen = BTreeSet::new();
        for c in self.chains.values() {
            if let Some(ChainChange::Add { flush, .. }) = c.change {
                ensure(seen.insert(flush), || format!("FLUSH {flush} in flight twice"))?;
            }
        }
        Ok(())
    }

    fn check_nodes(&self) -> Result<(), String> {
        let targets = self.targets();
        for (&id, n) in &self.nodes {
            let settled = match n.state {
                NodeState::Joining => !self.holds_targets(id, &targets),
                NodeState::Leaving | NodeState::Failed => self.involved(id),
                NodeState::Removed => !self.involved(id),
                NodeState::Active => true,
            };
            ensure(settled, || format!("node {id} should not be {}", n.state))?;
        }
        for v in &self.manager_voters {
            ensure(self.nodes.contains_key(v), || format!("voter {v} is not a node"))?;
        }
        Ok(())
    }
}

fn ensure(ok: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(why())
    }
}

fn validate_bootstrap(
    nodes: &[(NodeId, NodeAddrs)],
    replication: usize,
    partitions: u32,
    voters: &[NodeId],
) -> Result<(), MapError> {
    if nodes.is_empty() {
        return Err(MapError::BadBootstrap("no nodes"));
    }
    if replication == 0 {
        return Err(MapError::BadBootstrap("replication must be at least 1"));
    }
    if !partitions_valid(partitions) {
        return Err(MapError::BadBootstrap("partitions must be a power of two between 1 and 4096"));
    }
    let ids: BTreeSet<NodeId> = nodes.iter().map(|(id, _)| *id).collect();
    if ids.len() != nodes.len() {
        return Err(MapError::BadBootstrap("a node id appears twice"));
    }
    let distinct_voters: BTreeSet<&NodeId> = voters.iter().collect();
    if voters.is_empty() || distinct_voters.len() != voters.len() || !voters.iter().all(|v| ids.contains(v)) {
        return Err(MapError::BadBootstrap("voters must be distinct nodes of the cluster, at least one"));
    }
    Ok(())
}

#[cfg(test)]
#[path = "map_tests.rs"]
pub(crate) mod tests;
