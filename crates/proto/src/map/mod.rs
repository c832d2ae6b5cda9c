//! The cluster map: the state the manager's Raft log replicates (DESIGN.md §2 principle 4; the seed's
//! single manager, 003 §2.1 and Listing 2, made fault tolerant).
//!
//! The map is changed only by [`ClusterMap::apply`] on a [`MapCommand`] taken from the log. It holds every node
//! with its addresses, state and location (region, zone, rack), every keyspace with its configuration (its
//! placement among them), every chain, and the ACL users (`users.rs`). `apply` is
//! deterministic (ordered maps only, no clock, no randomness), so every replica of the log computes the
//! same map. A command that is invalid against the current map is refused with a [`MapError`] and
//! changes nothing, not even the epoch; a command that changes anything bumps [`ClusterMap::epoch`]
//! exactly once.
//!
//! # Chains and views
//! Placement is by fixed partitions ([`placement`]): chain `ChainId::new(k, p)` serves partition `p` of keyspace `k`
//! forever. Each chain carries its members (head first, tail last), its `view` (the seed's
//! chain-view-id, §2.4), the epoch at which its tail last changed (`tail_epoch`) and at most one
//! membership step in flight ([`ChainChange`]).
//!
//! The view is bumped exactly when `members` changes (a member inserted or removed) or the chain is restored
//! from a lost replica (its history starts afresh, even if that replica was its only member). Chain nodes stamp
//! every chain message with it and drop messages of any other view, so it must name one member list;
//! bumping it for anything else (starting or giving up a step that leaves the members alone) would only
//! stall the chain until every node had caught up.
//!
//! `tail_epoch` is the map epoch of the command that last changed `members.last()` (bootstrap's epoch at
//! first). The manager leader fences read leases with it: a lease granted to a tail before that epoch
//! belongs to a deposed tail.
//!
//! # Steps
//! The planner ([`crate::manager::plan`]) proposes steps that move a chain toward its target; an executor carries
//! a step out on the chain and reports its progress through the log:
//! ```text
//!   Add:    StepStarted ──(pre-copy done)──► AddInserted ──(FLUSH came back)──► StepDone
//!   Remove: StepStarted ──(CR_HEAD / CR_MID / CR_TAIL or TRUNCATE done)──────► StepDone
//!   either, at any point: StepAborted, or a NodeFailed of a node the chain involves
//! ```
//! - `StepStarted` names the view it was planned against and must find it; the members do not change.
//! - `AddInserted` puts the joiner into the members before the tail (§2.5: the FLUSH that follows passes
//!   through the new member list): a new view.
//! - `StepDone` ends an inserted Add, leaving the members and the view alone, or takes a Remove's node
//!   out of the members: a new view.
//! - An abort clears the step. A joiner already inserted is taken out again, a new view: until its FLUSH
//!   came back it is not a valid replica (§2.5: the manager "repairs the chain, redoes the addition").
//!
//! Every step has an id from [`ClusterMap::next_step`], never reused; an Add's FLUSH carries it as the
//! seed's unique FLUSH sequence number (§2.5). `StepStarted` must take an id at or above `next_step`, and
//! the later commands name the step by its id, so a stale leader's plan, a duplicated command or the
//! report of an attempt that was aborted and re-planned can never apply twice or to the wrong step.
//!
//! A failure aborts every step in flight on a chain the failed node is a member of or is being added
//! to: the seed's FLUSH and repair messages pass through every member, so such a step cannot finish.
//! While a step is in flight only that step changes the chain's members, so its preconditions hold
//! until it ends.
//!
//! A chain never loses its last live member: removing a member requires another member that is not
//! Failed. A chain whose members have all failed keeps them and is reported irreparable by the planner;
//! nothing is invented for it.
//!
//! # Replica kinds and lost replicas
//! Each member keeps its replica in a datastore of the kind the map gives it (`ChainView::kinds`, chosen
//! as [`kinds`] describes). A node that restarts holds a whole replica only of the chains it keeps in a
//! kind that survives a restart (`log`), but for a head that passed updates on before its fsync
//! ([`ClusterMap::head_forwards_early`]); its other replicas may miss acknowledged writes. It
//! reports them, and `ReplicaLost` records them in `ChainView::lost`: such a member holds nothing the chain
//! can use, so the planner removes it as it removes a Failed one (while another member holds a whole
//! replica) and adds it back with a fresh copy. If no member holds a whole replica any more and none keeps
//! a `log` (a Failed `log` member comes back whole, so the chain waits for it), the manager's leader keeps
//! the lost replica holding the most (`ReplicaRestored`, recorded in `ChainView::restored`): it becomes the
//! chain's only member and the chain goes on from it, without the writes it missed. Only a chain without a
//! live `log` replica can come to that.
//!
//! # Node states
//! ```text
//!   AddNode ──► Joining ──(holds all its target chains)──► Active
//!                  │                                        │
//!                  └──────────── RemoveNode ──► Leaving ◄───┘
//!   NodeFailed (from Joining, Active or Leaving) ──► Failed
//!   Leaving, Failed ──(member of no chain, no step in flight names it)──► Removed ──AddNode──► Joining
//!   NodeRecovered: Failed ──► Joining (Leaving if it had departed); Removed ──► Joining, unless departed
//! ```
//! Joining and Active nodes are placeable (targets of chains). A node *holds* a chain when it is a
//! member and not the joiner of the Add in flight: until its FLUSH is done it has no full replica.
//! Leaving nodes still hold valid data and are drained by the planner (an Add of their replacement
//! first, then their removal), so a leave never lowers a chain's replication on the way. Failed nodes
//! are fail-stop (§2.6): the planner repairs them out of every chain first.
//!
//! `NodeRecovered` is the failure detector hearing again from a node it declared Failed. The node keeps
//! the chains it is still a member of: every write of a view passes through every member, so while it
//! was one the chain committed nothing without it. It becomes Joining, and Active at once if it holds all
//! of its target chains; the planner adds it to the others with a fresh pre-copy, as it does for a
//! Removed node that comes back. A node the operator took out (`RemoveNode` sets
//! [`NodeInfo::departed`]) is never brought back by the failure detector: a departed Failed node resumes
//! its leave, a departed Removed one is refused until an `AddNode` adds it afresh. Removed entries stay
//! as tombstones, so `ctl status` can show them and an id is never silently reused with other addresses.
//!
//! # Evolution
//! The map and the commands are postcard-encoded, which is not self-describing: new commands are added
//! as new variants at the end of [`MapCommand`] and new map state as new fields at the end of [`ClusterMap`].
//! A change an older build would misread bumps [`MAP_FORMAT`], which older builds refuse; this build reads the
//! formats before it through frozen copies of their types (`format1.rs`: format 1 had no node locations and no
//! keyspace placements or protocols) and writes only its own.

mod chain;
mod check;
mod errors;
pub(crate) mod format1;
pub(crate) mod format10;
pub(crate) mod format5;
pub(crate) mod format6;
pub(crate) mod format8;
pub mod kinds;
pub mod masters;
pub mod placement;
pub mod users;
pub mod voters;

pub use chain::{ChainChange, ChainView};
pub use errors::MapError;
pub use masters::{KeyMasters, Pin};

use meridian_core::acl::{AclRule, User};
use meridian_core::config::VNODES_MAX;
use meridian_core::keyspace::{database_number, validate_name, DEFAULT_KEYSPACE, KEYSPACES_MAX};
use meridian_core::{
    ChainId, ChainMap, KeyspaceConfig, KeyspaceId, Location, NodeId, Placement, Protocol, QueryNode, ReplicaKind,
    UpdateMode,
};
use placement::{chain_for_token, partitions_valid, VidRing};
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
    /// The addresses given; an empty one is not known yet (a bootstrap list names only peer addresses).
    fn all(&self) -> impl Iterator<Item = &str> {
        let addrs = [Some(self.peer_addr.as_str()), Some(self.resp_addr.as_str()), self.http_addr.as_deref()];
        addrs.into_iter().flatten().filter(|a| !a.is_empty())
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
    /// The operator took the node out (`RemoveNode`); only a later `AddNode` brings it back, never the
    /// failure detector (`NodeRecovered`).
    pub departed: bool,
    /// Where the node runs: placement spreads replicas over regions, zones and racks by it.
    pub location: Location,
}

/// A keyspace as the map keeps it: its name (unique among keyspaces) and configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Keyspace {
    pub name: String,
    pub config: KeyspaceConfig,
}

/// Chains a map may hold, over all keyspaces: the map travels whole in every change.
pub const CHAINS_MAX: usize = 16_384;

/// The replicated cluster map. Fields are public for reading; change them only through [`Self::apply`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMap {
    /// Bumped once by every applied command that changes anything; 0 before bootstrap.
    pub epoch: u64,
    /// P: number of partitions, so of chains per keyspace; 0 before bootstrap.
    pub partitions: u32,
    pub nodes: BTreeMap<NodeId, NodeInfo>,
    /// One chain per partition of every keyspace: `ChainId::new(k, 0)..ChainId::new(k, P)` for keyspace `k`.
    pub chains: ChainMap<ChainView>,
    /// The nodes whose votes count in the manager's Raft group (both sides of a joint configuration).
    pub manager_voters: Vec<NodeId>,
    /// The next unused step id (and FLUSH sequence number).
    pub next_step: u64,
    /// Every keyspace; `KeyspaceId::DEFAULT` always exists once bootstrapped.
    pub keyspaces: BTreeMap<KeyspaceId, Keyspace>,
    /// The next unused keyspace id: ids are never reused, so data of a dropped keyspace can never be taken
    /// for a new one's.
    pub next_keyspace: u32,
    /// Where the keys of lease keyspaces are mastered, for those whose master region or keys ever moved.
    pub masters: BTreeMap<KeyspaceId, KeyMasters>,
    /// Affiliated nodes (seed 001 §4.1.4), each with its host: they hold no chain, only the hot keys their host
    /// gives them under secondary leases (`lease/affiliates.rs`).
    pub hosts: BTreeMap<NodeId, NodeId>,
    /// ACL users by name (`users.rs`); without a `default` entry each node keeps its own default user.
    pub users: BTreeMap<String, User>,
    /// Nodes that run a replica of the manager's log without a vote: voters to be, catching up (`voters.rs`).
    pub manager_learners: Vec<NodeId>,
    /// The voters an operator asked for, which the manager keeps to; empty: the manager chooses.
    pub voters_wanted: Vec<NodeId>,
}

impl Default for ClusterMap {
    fn default() -> Self {
        ClusterMap {
            epoch: 0,
            partitions: 0,
            nodes: BTreeMap::new(),
            chains: ChainMap::new(),
            manager_voters: Vec::new(),
            next_step: 1,
            keyspaces: BTreeMap::new(),
            next_keyspace: 0,
            masters: BTreeMap::new(),
            hosts: BTreeMap::new(),
            users: BTreeMap::new(),
            manager_learners: Vec::new(),
            voters_wanted: Vec::new(),
        }
    }
}

/// An entry of the manager's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MapCommand {
    /// Only on an empty map: every node Active, the `default` keyspace configured as `default`, every chain at
    /// its target, view 1.
    Bootstrap {
        nodes: Vec<(NodeId, NodeAddrs, Location)>,
        default: KeyspaceConfig,
        partitions: u32,
        vnodes: u32,
        voters: Vec<NodeId>,
    },
    /// A new node (Joining), or a Removed one back as a fresh joiner. Idempotent for a Joining or Active
    /// node with the same addresses, vnodes and location.
    AddNode { id: NodeId, addrs: NodeAddrs, vnodes: u32, location: Location },
    /// Graceful leave: the node is departed; a placeable one becomes Leaving, is drained out of its
    /// chains, then Removed.
    RemoveNode { id: NodeId },
    /// The failure detector declared `id` dead (fail-stop, §2.6).
    NodeFailed { id: NodeId },
    /// The failure detector hears again from `id`, which it had declared dead.
    NodeRecovered { id: NodeId },
    /// An executor began `change` (an Add not yet inserted) on `chain`, planned against `expected_view`.
    StepStarted { chain: ChainId, expected_view: u64, change: ChainChange },
    /// The joiner of Add `step` finished its pre-copy and is inserted into the chain.
    AddInserted { chain: ChainId, step: u64 },
    /// Step `step` finished: an inserted Add's FLUSH came back, or a Remove's node is out.
    StepDone { chain: ChainId, step: u64 },
    /// Step `step` was given up.
    StepAborted { chain: ChainId, step: u64 },
    /// A new keyspace under the next keyspace id, its chains at their targets (there is nothing to copy).
    CreateKeyspace { name: String, config: KeyspaceConfig },
    /// Removes a keyspace and its chains; nodes drop its data as they adopt the map.
    DropKeyspace { name: String },
    /// `node`, a member of `chain`, restarted (as `incarnation`) without a whole replica: it takes no part
    /// until repaired (removed, then added again with a fresh copy).
    /// Any step in flight on the chain is given up.
    ReplicaLost { chain: ChainId, node: NodeId, incarnation: u64 },
    /// No member of `chain` holds a whole replica any more (every other member lost its own or is Failed, and
    /// none keeps a `log`): `node`'s lost replica, from `incarnation`, becomes the chain's state, the writes
    /// it missed are lost, and `node` is the chain's only member. The manager keeps the lost replica holding
    /// the most.
    ReplicaRestored { chain: ChainId, node: NodeId, incarnation: u64 },
    /// Makes `region`, which the lease keyspace's placement names, its master region: each partition's master
    /// moves there as nodes adopt the map (`docs/protocols/lease.md`, "Master migration").
    SetMasterRegion { name: String, region: String },
    /// Masters `key` of the lease keyspace `name` in `region`, which its placement must name, whatever its
    /// master region is or becomes (`map/masters.rs`).
    SetKeyMaster { name: String, key: bytes::Bytes, region: String },
    /// A new node affiliated to `host`, a placeable standard node: it becomes Active at once and is never
    /// placed in a chain (seed 001 §4.1.4). Idempotent as `AddNode` is.
    AddAffiliate { id: NodeId, addrs: NodeAddrs, location: Location, host: NodeId },
    /// `ACL SETUSER`: applies `rules` to user `name`, which starts as `base` if the map lacks it (the `default`
    /// user as the node taking the command has it), else as a new user.
    SetUser { name: String, base: Option<User>, rules: Vec<AclRule> },
    /// `ACL DELUSER`: removes the users named (never `default`).
    DelUsers { names: Vec<String> },
    /// `CreateKeyspace` of `db<number>`, Redis' database `number` (`SELECT number` makes it, and `keyspace
    /// create` of that name), refused while keyspace number `number` is one of another name that is no
    /// database: `SELECT number` chooses that one, and must go on doing so on every node (`NumberTaken`). Checked
    /// here, where commands are ordered, since a node whose map lags cannot see the other keyspace.
    CreateDatabase { number: u32, config: KeyspaceConfig },
    /// The manager's Raft configuration changed (a membership entry committed at this point of its log): every
    /// replica applies it as it applies the entry; never proposed as a command.
    ManagerMembership { voters: Vec<NodeId>, learners: Vec<NodeId> },
    /// `ctl manager voters --set`: the voters the manager moves its group to and keeps it at (an odd number, at
    /// most [`voters::VOTERS_WANTED_MAX`], of standard live nodes); none hands the choice back to the manager.
    WantVoters { voters: Vec<NodeId> },
}

/// What an accepted command did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The map changed and its epoch was bumped.
    Changed,
    /// The command was valid but already in effect (a repeated AddNode, RemoveNode, NodeFailed or
    /// NodeRecovered).
    Unchanged,
}

/// The version of the encoding of the map and its commands as nodes store them (the map file, the Raft log's
/// entries): it changes whenever that encoding does, which the schema lock (`node/schema_lock.rs`) enforces. A
/// node refuses files of another version, naming both. Format 3 added quorum keyspaces (a protocol variant
/// with its knobs) to format 2, format 4 lease keyspaces to format 3, and format 5 the command
/// [`MapCommand::SetMasterRegion`], each keeping the encoding before it; format 6 added [`ClusterMap::masters`]
/// and [`MapCommand::SetKeyMaster`], format 7 [`ClusterMap::hosts`] and [`MapCommand::AddAffiliate`], format 8
/// meteor keyspaces, format 9 [`ClusterMap::users`] with [`MapCommand::SetUser`] and [`MapCommand::DelUsers`],
/// format 10 the command [`MapCommand::CreateDatabase`], format 11 [`ClusterMap::manager_learners`] and
/// [`ClusterMap::voters_wanted`] with [`MapCommand::ManagerMembership`] and [`MapCommand::WantVoters`]. Commands of
/// formats 2 to 10 decode as they are, and their
/// maps through [`older_map`] ([`ENCODED_AS_CURRENT`]), while an older build refuses a newer file rather than
/// misread it.
pub const MAP_FORMAT: u8 = 11;

/// The formats before [`MAP_FORMAT`] whose commands the current types decode unchanged (their maps may lack
/// later fields: [`older_map`] reads them).
pub const ENCODED_AS_CURRENT: &[u8] = &[2, 3, 4, 5, 6, 7, 8, 9, 10];

/// Decodes a map of `format`, one before [`MAP_FORMAT`], through the frozen copy of its shape.
pub(crate) fn older_map(format: u8, bytes: &[u8]) -> postcard::Result<ClusterMap> {
    match format {
        1 => format1::map(bytes),
        6 => format6::map(bytes),
        7 | 8 => format8::map(bytes),
        // Format 10 added a command only: its maps are format 9's.
        9 | 10 => format10::map(bytes),
        _ => format5::map(bytes),
    }
}

/// The member the Remove in flight on `c` takes out, if one is under way.
fn removed_by(c: &ChainView) -> Option<NodeId> {
    match c.change {
        Some(ChainChange::Remove { node, .. }) => Some(node),
        _ => None,
    }
}

/// The joiner the Add in flight on `c` has inserted, if one is flushing: it keeps what it is sent in memory
/// (the temporary store) until its flush is done.
fn flushing_in(c: &ChainView) -> Option<NodeId> {
    match c.change {
        Some(ChainChange::Add { node, inserted: true, .. }) => Some(node),
        _ => None,
    }
}

impl ClusterMap {
    pub fn is_bootstrapped(&self) -> bool {
        self.partitions != 0
    }

    pub fn state(&self, id: NodeId) -> Option<NodeState> {
        self.nodes.get(&id).map(|n| n.state)
    }

    /// Whether chains may be placed on `id`: a Joining or Active standard node (not an affiliated one).
    fn placeable(&self, id: NodeId, info: &NodeInfo) -> bool {
        info.state.is_placeable() && !self.hosts.contains_key(&id)
    }

    /// The live affiliated nodes of `host`, in id order.
    pub fn affiliates_of(&self, host: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        self.hosts.iter().filter(move |(&a, &h)| h == host && self.is_live(a)).map(|(&a, _)| a)
    }

    /// Unknown nodes are not live.
    pub fn is_live(&self, id: NodeId) -> bool {
        self.state(id).is_some_and(NodeState::is_live)
    }

    /// The chain of `keyspace` whose range holds a key's ring `token`; None for a keyspace the map lacks.
    pub fn chain_of(&self, keyspace: KeyspaceId, token: u64) -> Option<&ChainView> {
        self.chains.get(&chain_for_token(keyspace, token, self.partitions))
    }

    /// The chain of `keyspace` that holds `key`.
    pub fn chain_of_key(&self, keyspace: KeyspaceId, key: &[u8]) -> Option<&ChainView> {
        self.chain_of(keyspace, meridian_core::ring::key_token(key))
    }

    /// The member of `c` that answers reads, as its keyspace's `read_from` says.
    pub fn query_node(&self, c: &ChainView) -> Option<NodeId> {
        let read_from = self.keyspaces.get(&c.id.keyspace())?.config.read_from;
        (!c.members.is_empty()).then(|| c.members[read_from.position(c.members.len())])
    }

    /// Whether `node` may answer reads of `c` (with a lease): its tail, which answers the reads a query node
    /// sends on; its query node; and under `ausi` its head, which answers reads of invalidated keys.
    pub fn reads_at(&self, c: &ChainView, node: NodeId) -> bool {
        // The keyspace's update mode is looked up only if the tail and the query node are not `node`: the tail,
        // the common answer, needs no lookup at all.
        let ausi = || self.update_mode(c.id.keyspace()) == Some(UpdateMode::Ausi);
        c.tail() == Some(node) || self.query_node(c) == Some(node) || (c.members.first() == Some(&node) && ausi())
    }

    /// Whether the manager grants `node` a lease on `c`: every member that [`Self::reads_at`] it, and the head
    /// of a keyspace that answers writes at the head (`au`, `ausi`), which answers them only with a lease on
    /// its view, so a head removed without hearing of it stops once its lease runs out.
    ///
    /// In a lease keyspace, the partition's master ([`Self::lease_master`]): its own lease and the leases it
    /// lets its replicas answer under last no longer than the manager's, so a master of an older view gets no
    /// lease past the one it holds, and a master of a new view gets one only once every older view's lease ran
    /// out or its holder adopted the new view. Promises fence masters of one view (their majorities meet) but
    /// not across views: after two configuration changes a majority of the new group need not meet the
    /// majority still promising a master cut off with the old map (sim seed 22104513).
    pub fn leased_at(&self, c: &ChainView, node: NodeId) -> bool {
        match self.protocol_of(c.id.keyspace()) {
            Some(Protocol::Chain) => {
                self.reads_at(c, node)
                    || c.members.first() == Some(&node) && self.update_mode(c.id.keyspace()) != Some(UpdateMode::Su)
            }
            Some(Protocol::Lease) => self.masters_some_of(c, node),
            _ => false,
        }
    }

    /// The master of a lease partition's keys that are not pinned elsewhere: see [`Self::lease_master_in`].
    pub fn lease_master(&self, c: &ChainView) -> Option<NodeId> {
        let keyspace = self.keyspaces.get(&c.id.keyspace())?;
        self.lease_master_in(c, keyspace.config.placement.home())
    }

    /// The protocol `keyspace` runs, if the map has it.
    pub fn protocol_of(&self, keyspace: KeyspaceId) -> Option<Protocol> {
        Some(self.keyspaces.get(&keyspace)?.config.protocol.protocol())
    }

    /// Whether `node`, as the head of `c`, passes an update on before its own fsync: when the keyspace answers
    /// writes from the tail (`su`) and a member after the head keeps a log, fsynced before that member passes
    /// the update on or commits it. An acknowledged write is then durable on a member that comes back whole
    /// from a restart, while the head's copy may not be (a power loss takes its unsynced updates after its
    /// successor has them), so a node that restarts as such a head counts its replica lost and the chain is
    /// repaired from the others (`chain/recovery.rs`). Under `au` and `ausi` the head answers writes itself, so
    /// it must hold them durably.
    ///
    /// A member a Remove in flight takes out does not count: from the map that starts the step on, the head
    /// makes its updates durable before it passes them on, so that once it has adopted that map (and synced
    /// every earlier write as it did, `Host::sync_now`) the step may end without leaving an
    /// acknowledged write durable on the removed member alone ([`ClusterMap::early_forwarding_ended_by`]).
    ///
    /// Nor does a joiner still flushing, which holds what it is sent in memory: with it the only `log` member
    /// after the head, an acknowledged write would be durable nowhere until the head's own fsync.
    pub fn head_forwards_early(&self, c: &ChainView, node: NodeId) -> bool {
        self.forwards_early_without(c, node, removed_by(c))
    }

    /// The head whose early forwarding the Remove in flight on `c` ends, if it does: the step may end only once
    /// that head has adopted a map in which the step is under way, having made every earlier write durable.
    /// Otherwise the removed member could hold the only durable copy of an acknowledged write the head passed
    /// on before its fsync (and then lost to a power loss).
    pub fn early_forwarding_ended_by(&self, c: &ChainView) -> Option<NodeId> {
        let head = *c.members.first()?;
        let removed = removed_by(c)?;
        let ends = self.forwards_early_without(c, head, None) && !self.forwards_early_without(c, head, Some(removed));
        (head != removed && ends).then_some(head)
    }

    fn forwards_early_without(&self, c: &ChainView, node: NodeId, removed: Option<NodeId>) -> bool {
        let holds = |m: NodeId| Some(m) != removed && Some(m) != flushing_in(c);
        let durable_after = c.members.iter().zip(&c.kinds).skip(1).any(|(&m, k)| holds(m) && k.survives_restart());
        c.members.first() == Some(&node) && durable_after && self.update_mode(c.id.keyspace()) == Some(UpdateMode::Su)
    }

    fn update_mode(&self, keyspace: KeyspaceId) -> Option<UpdateMode> {
        self.keyspaces.get(&keyspace).map(|k| k.config.update)
    }

    /// The epoch a node must have seen before a lease of `c`'s current view may be granted while another view's
    /// lease may still be held: the one that made the current tail the tail when only the tail holds leases,
    /// otherwise the one that made the current members (the other holders move with any of them).
    pub fn fence_epoch(&self, c: &ChainView) -> u64 {
        let config = self.keyspaces.get(&c.id.keyspace()).map(|k| &k.config);
        match config {
            // A lease partition's master, like a query node or an answering head, holds its view's lease: within
            // a view its members' promises fence masters (the same majorities), across views the manager's lease.
            Some(k)
                if k.protocol.protocol() == Protocol::Lease
                    || k.read_from != QueryNode::Tail
                    || k.update != UpdateMode::Su =>
            {
                c.view_epoch
            }
            _ => c.tail_epoch,
        }
    }

    pub fn replication(&self, chain: ChainId) -> usize {
        self.keyspaces.get(&chain.keyspace()).map_or(0, |k| k.config.replication())
    }

    /// The keyspace called `name`.
    pub fn keyspace_named(&self, name: &str) -> Option<(KeyspaceId, &Keyspace)> {
        self.keyspaces.iter().find(|(_, k)| k.name == name).map(|(&id, k)| (id, k))
    }

    /// The target members of every chain ([`placement`]): its keyspace's placement applied to its partition's
    /// preference list.
    pub fn targets(&self) -> BTreeMap<ChainId, Vec<NodeId>> {
        let prefs = self.preferences();
        let placed = |id: ChainId| {
            let config = &self.keyspaces[&id.keyspace()].config;
            self.choose(&prefs[id.partition() as usize], config)
        };
        self.chains.keys().map(|&id| (id, placed(id))).collect()
    }

    /// Every placeable node, in each partition's preference order.
    fn preferences(&self) -> Vec<Vec<NodeId>> {
        let placeable = self.nodes.iter().filter(|(id, n)| self.placeable(**id, n)).map(|(&id, n)| (id, n.vnodes));
        VidRing::new(placeable).targets(self.partitions, usize::MAX)
    }

    fn choose(&self, prefs: &[NodeId], config: &KeyspaceConfig) -> Vec<NodeId> {
        placement::choose(prefs, |n| &self.nodes[&n].location, &config.placement, config.replication())
    }

    /// The regions a placement names that have fewer placeable nodes than it puts there, with how many they
    /// have: a keyspace placed so cannot be created, and one running so is short of replicas.
    pub fn unmet<'a>(&self, placement: &'a Placement) -> Vec<(&'a str, usize, u32)> {
        let placeable = |region: &str| {
            let here = |(id, n): &(&NodeId, &NodeInfo)| self.placeable(**id, n) && n.location.region == region;
            self.nodes.iter().filter(here).count()
        };
        let short = placement.regions.iter().map(|(region, n)| (region.as_str(), placeable(region), *n));
        short.filter(|&(_, has, needs)| has < needs as usize).collect()
    }

    /// Applies one log entry. Deterministic; on error nothing changed.
    pub fn apply(&mut self, cmd: &MapCommand) -> Result<Applied, MapError> {
        if !self.is_bootstrapped() && !matches!(cmd, MapCommand::Bootstrap { .. }) {
            return Err(MapError::NotBootstrapped);
        }
        let applied = match cmd {
            MapCommand::Bootstrap { nodes, default, partitions, vnodes, voters } => {
                self.bootstrap(nodes, default, *partitions, *vnodes, voters)
            }
            MapCommand::AddNode { id, addrs, vnodes, location } => self.add_standard(*id, addrs, *vnodes, location),
            MapCommand::RemoveNode { id } => self.remove_node(*id),
            MapCommand::NodeFailed { id } => self.node_failed(*id),
            MapCommand::NodeRecovered { id } => self.node_recovered(*id),
            MapCommand::StepStarted { chain, expected_view, change } => {
                self.step_started(*chain, *expected_view, change)
            }
            MapCommand::AddInserted { chain, step } => self.add_inserted(*chain, *step),
            MapCommand::StepDone { chain, step } => self.step_done(*chain, *step),
            MapCommand::StepAborted { chain, step } => self.step_aborted(*chain, *step),
            MapCommand::CreateKeyspace { name, config } => self.create_keyspace(name, config),
            MapCommand::CreateDatabase { number, config } => self.create_database(*number, config),
            MapCommand::DropKeyspace { name } => self.drop_keyspace(name),
            MapCommand::ReplicaLost { chain, node, incarnation } => self.replica_lost(*chain, *node, *incarnation),
            MapCommand::ReplicaRestored { chain, node, incarnation } => {
                self.replica_restored(*chain, *node, *incarnation)
            }
            MapCommand::SetMasterRegion { name, region } => self.set_master_region(name, region),
            MapCommand::SetKeyMaster { name, key, region } => self.set_key_master(name, key, region),
            MapCommand::AddAffiliate { id, addrs, location, host } => self.add_affiliate(*id, addrs, location, *host),
            MapCommand::SetUser { name, base, rules } => self.set_user(name, base, rules),
            MapCommand::DelUsers { names } => self.del_users(names),
            MapCommand::ManagerMembership { voters, learners } => self.manager_membership(voters, learners),
            MapCommand::WantVoters { voters } => self.want_voters(voters),
        }?;
        if applied == Applied::Changed {
            self.epoch += 1;
            self.settle();
            if cfg!(debug_assertions) {
                // A command the map took must leave it whole: the simulator checks from outside too.
                if let Err(why) = self.check() {
                    panic!("map epoch {} after {cmd:?}: {why}", self.epoch);
                }
            }
        }
        Ok(applied)
    }

    /// The epoch of the command being applied: `apply` bumps the epoch once the command succeeded.
    fn applying_epoch(&self) -> u64 {
        self.epoch + 1
    }

    fn bootstrap(
        &mut self,
        nodes: &[(NodeId, NodeAddrs, Location)],
        default: &KeyspaceConfig,
        partitions: u32,
        vnodes: u32,
        voters: &[NodeId],
    ) -> Result<Applied, MapError> {
        if self.is_bootstrapped() {
            return Err(MapError::AlreadyBootstrapped);
        }
        validate_bootstrap(nodes, default.replication(), partitions, voters)?;
        let mut map = ClusterMap { partitions, manager_voters: voters.to_vec(), ..self.clone() };
        for (id, addrs, location) in nodes {
            map.add_node(*id, addrs, vnodes, location)?;
            map.nodes.get_mut(id).expect("just added").state = NodeState::Active;
        }
        map.create_keyspace(DEFAULT_KEYSPACE, default)?;
        *self = map;
        Ok(Applied::Changed)
    }

    /// `db<number>` for SELECT, refused while keyspace `number` has another, non-database name
    /// ([`MapCommand::CreateDatabase`]).
    fn create_database(&mut self, number: u32, config: &KeyspaceConfig) -> Result<Applied, MapError> {
        let numbered = self.keyspaces.get(&KeyspaceId(number)).filter(|k| database_number(&k.name).is_none());
        if let Some(k) = numbered {
            return Err(MapError::NumberTaken { number, name: k.name.clone() });
        }
        self.create_keyspace(&format!("db{number}"), config)
    }

    /// The keyspace's chains start at their targets with view 1: a new keyspace has no data to copy.
    fn create_keyspace(&mut self, name: &str, config: &KeyspaceConfig) -> Result<Applied, MapError> {
        validate_name(name).and_then(|()| config.validate()).map_err(MapError::BadKeyspace)?;
        if self.keyspace_named(name).is_some() {
            return Err(MapError::KeyspaceExists(name.to_string()));
        }
        let too_many = self.keyspaces.len() >= KEYSPACES_MAX
            || self.chains.len() + self.partitions as usize > CHAINS_MAX
            || self.next_keyspace > KeyspaceId::MAX;
        if too_many {
            return Err(MapError::TooManyKeyspaces);
        }
        if let Some(&(region, has, needs)) = self.unmet(&config.placement).first() {
            return Err(MapError::PlacementUnmet { region: region.to_string(), has, needs });
        }
        let partitions: Vec<Vec<NodeId>> = self.preferences().iter().map(|p| self.choose(p, config)).collect();
        if partitions.iter().any(Vec::is_empty) {
            return Err(MapError::NoPlaceableNode);
        }
        let keyspace = KeyspaceId(self.next_keyspace);
        self.next_keyspace += 1;
        self.keyspaces.insert(keyspace, Keyspace { name: name.to_string(), config: config.clone() });
        let tail_epoch = self.applying_epoch();
        for (p, members) in partitions.into_iter().enumerate() {
            let id = ChainId::new(keyspace, p as u32);
            let kinds = kinds::wanted(&config.replicas, members.len());
            let (lost, restored) = (BTreeMap::new(), None);
            let view_epoch = tail_epoch;
            let change = None;
            let chain = ChainView { id, members, view: 1, tail_epoch, change, kinds, lost, restored, view_epoch };
            self.chains.insert(id, chain);
        }
        Ok(Applied::Changed)
    }

    fn member_of(&self, chain: ChainId, node: NodeId) -> Result<&ChainView, MapError> {
        let c = self.chains.get(&chain).ok_or(MapError::UnknownChain(chain))?;
        if !c.contains(node) {
            return Err(MapError::NotMember { chain, node });
        }
        Ok(c)
    }

    /// A lost member stays until the planner repairs it out. The step in flight stops, as for a failure: an
    /// Add's copies and FLUSH pass through every member, and a Remove might take out the last whole replica.
    fn replica_lost(&mut self, chain: ChainId, node: NodeId, incarnation: u64) -> Result<Applied, MapError> {
        let c = self.member_of(chain, node)?;
        if c.lost.get(&node) == Some(&incarnation) {
            return Ok(Applied::Unchanged);
        }
        let epoch = self.applying_epoch();
        let c = self.chains.get_mut(&chain).expect("checked");
        c.abort(epoch);
        // The abort may have taken `node` out, if it was the joiner being inserted.
        if c.contains(node) {
            c.lost.insert(node, incarnation);
        }
        Ok(Applied::Changed)
    }

    /// Where `joiner`, to be inserted into `c` at `position`, pre-copies from: of the members that will follow it
    /// (the one it is inserted before, and on to the tail) the nearest to it ([`Location::shared_levels`]), and
    /// of equally near ones the nearest the tail. A member after the joiner holds a prefix of what the members
    /// before it hold, so what the joiner copies never runs ahead of the history it enters; in one region the
    /// source is the tail, as in seed 003 §2.5. Only the map's structure decides, so the joiner and the source
    /// agree on it for a view.
    pub fn precopy_source(&self, c: &ChainView, joiner: NodeId, position: usize) -> Option<NodeId> {
        let at = |n: NodeId| self.nodes.get(&n).map(|info| &info.location);
        let near = |m: &NodeId| at(joiner).zip(at(*m)).map_or(0, |(a, b)| a.shared_levels(b));
        let after = position.min(c.members.len().saturating_sub(1));
        // `max_by_key` keeps the last of equals: the one nearest the tail.
        c.members.get(after..)?.iter().copied().max_by_key(near)
    }

    /// The pre-copy `c` has in flight, if any: the joiner of its Add not yet inserted, the step, and the source
    /// ([`Self::precopy_source`]). What the joiner, the source and the planner each look up.
    pub fn pre_copy(&self, c: &ChainView) -> Option<(NodeId, u64, NodeId)> {
        match c.change {
            Some(ChainChange::Add { node, step, inserted: false, position, .. }) => {
                Some((node, step, self.precopy_source(c, node, position)?))
            }
            _ => None,
        }
    }

    /// `node` is a live member of `c` whose replica is not lost: one the chain can copy from and rely on.
    pub fn holds_whole(&self, c: &ChainView, node: NodeId) -> bool {
        c.contains(node) && self.is_live(node) && !c.lost.contains_key(&node)
    }

    /// [`ClusterMap::holds_whole`], in a kind that survives a restart: what a keyspace that keeps such a kind
    /// never runs without.
    pub fn holds_whole_durable(&self, c: &ChainView, node: NodeId) -> bool {
        c.kind_of(node).is_some_and(ReplicaKind::survives_restart) && self.holds_whole(c, node)
    }

    /// Whether `ReplicaRestored` would be accepted: `node`'s replica is lost as `incarnation`, every other
    /// member is lost or Failed, no Failed one that is not lost keeps a replica that survives a restart (a
    /// Failed `log` member comes back whole: the chain waits for it), and `node` is live unless no member is. A
    /// member recorded lost never comes back whole, whatever its kind: a `log` replica is lost when its head
    /// passed updates on before its fsync, and its node keeps that verdict across restarts.
    pub fn restorable(&self, chain: ChainId, node: NodeId, incarnation: u64) -> Result<(), MapError> {
        let c = self.member_of(chain, node)?;
        if c.lost.get(&node) != Some(&incarnation) {
            return Err(MapError::NotLost { chain, node });
        }
        let comes_back = |m: NodeId| c.kind_of(m).is_some_and(ReplicaKind::survives_restart);
        let whole = |m: NodeId| !c.lost.contains_key(&m) && (self.is_live(m) || comes_back(m));
        if let Some(&other) = c.members.iter().find(|&&m| m != node && whole(m)) {
            return Err(MapError::WholeReplica { chain, node: other });
        }
        match c.members.iter().find(|&&m| m != node && self.is_live(m)).filter(|_| !self.is_live(node)) {
            Some(&live) => Err(MapError::RestoreFromFailed { chain, node, live }),
            None => Ok(()),
        }
    }

    /// See [`ClusterMap::restorable`]. The other members go: a Failed one may still hold writes in memory
    /// that `node` lacks, and the chain must not meet them again.
    fn replica_restored(&mut self, chain: ChainId, node: NodeId, incarnation: u64) -> Result<Applied, MapError> {
        self.restorable(chain, node, incarnation)?;
        let epoch = self.applying_epoch();
        let c = self.chains.get_mut(&chain).expect("checked");
        c.abort(epoch);
        c.keep_only(epoch, node);
        c.restored = Some((node, incarnation));
        Ok(Applied::Changed)
    }

    /// Steps in flight on the keyspace's chains go with them; `settle` then removes nodes that were Leaving
    /// or Failed and are in no chain any more.
    fn drop_keyspace(&mut self, name: &str) -> Result<Applied, MapError> {
        let (id, _) = self.keyspace_named(name).ok_or_else(|| MapError::UnknownKeyspace(name.to_string()))?;
        if id == KeyspaceId::DEFAULT {
            return Err(MapError::DefaultKeyspace);
        }
        self.keyspaces.remove(&id);
        self.masters.remove(&id);
        self.chains.retain(|c, _| c.keyspace() != id);
        Ok(Applied::Changed)
    }

    /// Reorders the placement only: each region keeps its replicas, so the planner has nothing to move, and the
    /// views stay as they are: the master of every key not pinned elsewhere changes within a view, as when the
    /// failure detector moves it, and the promises fence the old master (`lease/mastery.rs`). Pinned keys stay
    /// where they are pinned.
    fn set_master_region(&mut self, name: &str, region: &str) -> Result<Applied, MapError> {
        let (id, keyspace) = self.lease_keyspace(name)?;
        let placement = &keyspace.config.placement;
        let homed = placement.clone().homed_in(region).map_err(|e| MapError::BadKeyspace(e.into()))?;
        if homed == *placement {
            return Ok(Applied::Unchanged);
        }
        self.keyspaces.get_mut(&id).expect("named above").config.placement = homed;
        let epoch = self.applying_epoch();
        let masters = self.masters.entry(id).or_default();
        (masters.epoch, masters.home_since) = (epoch, epoch);
        Ok(Applied::Changed)
    }

    fn add_node(
        &mut self,
        id: NodeId,
        addrs: &NodeAddrs,
        vnodes: u32,
        location: &Location,
    ) -> Result<Applied, MapError> {
        if vnodes == 0 || vnodes as usize > VNODES_MAX {
            return Err(MapError::BadVnodes(vnodes));
        }
        location.validate().map_err(MapError::BadLocation)?;
        if let Some(info) = self.nodes.get(&id) {
            if info.addrs != *addrs || info.vnodes != vnodes || info.location != *location {
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
        let location = location.clone();
        let info = NodeInfo { addrs: addrs.clone(), vnodes, state: NodeState::Joining, departed: false, location };
        self.nodes.insert(id, info);
        Ok(Applied::Changed)
    }

    /// A standard node: an affiliated one keeps its role until it is Removed.
    fn add_standard(
        &mut self,
        id: NodeId,
        addrs: &NodeAddrs,
        vnodes: u32,
        location: &Location,
    ) -> Result<Applied, MapError> {
        if self.hosts.contains_key(&id) && self.state(id) != Some(NodeState::Removed) {
            return Err(MapError::IdClash(id));
        }
        let applied = self.add_node(id, addrs, vnodes, location)?;
        self.hosts.remove(&id);
        Ok(applied)
    }

    /// An affiliated node: added as a node with no share of the ring, then Active at once, as it has no chain to
    /// hold. A standard node cannot become one, nor an affiliated node change hosts (`IdClash`).
    fn add_affiliate(
        &mut self,
        id: NodeId,
        addrs: &NodeAddrs,
        location: &Location,
        host: NodeId,
    ) -> Result<Applied, MapError> {
        let host_info = self.nodes.get(&host).ok_or(MapError::UnknownHost(host))?;
        if host == id || self.hosts.contains_key(&host) || !self.placeable(host, host_info) {
            return Err(MapError::NotAHost { host, state: host_info.state });
        }
        let known = self.nodes.get(&id).filter(|n| n.state != NodeState::Removed);
        if known.is_some() && self.hosts.get(&id) != Some(&host) {
            return Err(MapError::IdClash(id));
        }
        let applied = self.add_node(id, addrs, 1, location)?;
        self.hosts.insert(id, host);
        Ok(applied)
    }

    /// Also for a Failed or Removed node: the operator's decision that it is gone outlives the failure,
    /// so `NodeRecovered` will not bring it back.
    fn remove_node(&mut self, id: NodeId) -> Result<Applied, MapError> {
        let info = self.nodes.get_mut(&id).ok_or(MapError::UnknownNode(id))?;
        if info.departed {
            return Ok(Applied::Unchanged);
        }
        info.departed = true;
        if info.state.is_placeable() {
            info.state = NodeState::Leaving;
        }
        Ok(Applied::Changed)
    }

    fn node_failed(&mut self, id: NodeId) -> Result<Applied, MapError> {
        let info = self.nodes.get_mut(&id).ok_or(MapError::UnknownNode(id))?;
        if !info.state.is_live() {
            return Ok(Applied::Unchanged);
        }
        info.state = NodeState::Failed;
        // §2.5: a failure during a step stops it; the planner repairs the chain and redoes the step.
        let epoch = self.applying_epoch();
        for chain in self.chains.values_mut().filter(|c| c.change.is_some() && c.involves(id)) {
            chain.abort(epoch);
        }
        Ok(Applied::Changed)
    }

    /// The node keeps the chains it is still a member of (see the module docs); `settle` makes a Joining
    /// node that holds all of its target chains Active at once.
    fn node_recovered(&mut self, id: NodeId) -> Result<Applied, MapError> {
        let info = self.nodes.get_mut(&id).ok_or(MapError::UnknownNode(id))?;
        info.state = match info.state {
            NodeState::Joining | NodeState::Active | NodeState::Leaving => return Ok(Applied::Unchanged),
            NodeState::Removed if info.departed => return Err(MapError::Departed(id)),
            // It was leaving when it was declared failed, and its data is still valid: drain it as before.
            NodeState::Failed if info.departed => NodeState::Leaving,
            NodeState::Failed | NodeState::Removed => NodeState::Joining,
        };
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

    /// Leaves the members, and so the view, alone.
    fn step_started(&mut self, chain: ChainId, expected_view: u64, change: &ChainChange) -> Result<Applied, MapError> {
        let c = self.chain_at(chain, expected_view)?;
        if c.change.is_some() {
            return Err(MapError::StepInFlight(chain));
        }
        match *change {
            ChainChange::Add { inserted: true, step, .. } => return Err(MapError::AlreadyInserted { chain, step }),
            ChainChange::Add { node, position, .. } => self.check_add(c, node, position)?,
            ChainChange::Remove { node, .. } => self.check_remove(c, node)?,
        }
        let step = change.step();
        if step < self.next_step {
            return Err(MapError::StepReused { step, next: self.next_step });
        }
        self.next_step = step + 1;
        self.chains.get_mut(&chain).expect("checked").change = Some(change.clone());
        Ok(Applied::Changed)
    }

    fn check_add(&self, c: &ChainView, node: NodeId, position: usize) -> Result<(), MapError> {
        let info = self.nodes.get(&node).ok_or(MapError::UnknownNode(node))?;
        if !self.placeable(node, info) {
            return Err(MapError::NotPlaceable { id: node, state: info.state });
        }
        if c.contains(node) {
            return Err(MapError::AlreadyMember { chain: c.id, node });
        }
        // A chain repairs around a failed member before it grows; a quorum or lease partition replaces it first
        // (`quorum/rules.rs`), since dropping a replica could leave a written value on fewer than a majority.
        let replaces = self.protocol_of(c.id.keyspace()).is_some_and(Protocol::replaces_before_removing);
        if !replaces && (c.members.iter().any(|&m| !self.is_live(m)) || !c.lost.is_empty()) {
            return Err(MapError::NeedsRepair(c.id));
        }
        if c.members.len() > self.replication(c.id) {
            return Err(MapError::TooManyReplicas(c.id));
        }
        if position >= c.members.len() {
            return Err(MapError::NeverTail { chain: c.id, position });
        }
        Ok(())
    }

    fn check_remove(&self, c: &ChainView, node: NodeId) -> Result<(), MapError> {
        if !c.contains(node) {
            return Err(MapError::NotMember { chain: c.id, node });
        }
        if !c.members.iter().any(|&m| m != node && self.holds_whole(c, m)) {
            return Err(MapError::LastReplica { chain: c.id, node });
        }
        // The planner never plans this (`plan.rs`, rules 1 and 3), but it plans against a map that a loss
        // recorded since may have changed: sim seed 9741457 removed a whole `log` tail after its only other `log`
        // member, the head, was recorded lost, and kept a memory replica alone.
        let durable = |m: NodeId| self.holds_whole_durable(c, m);
        let wanted = self
            .keyspaces
            .get(&c.id.keyspace())
            .is_some_and(|k| k.config.replicas.iter().any(|k| k.survives_restart()));
        if wanted && durable(node) && !c.members.iter().any(|&m| m != node && durable(m)) {
            return Err(MapError::LastDurable { chain: c.id, node });
        }
        Ok(())
    }

    /// The step in flight on `chain`, if its id is `step`. Ids are never reused, so a late, repeated or
    /// misdirected report finds no step of its id.
    fn step_in_flight(&self, chain: ChainId, step: u64) -> Result<&ChainChange, MapError> {
        let c = self.chains.get(&chain).ok_or(MapError::UnknownChain(chain))?;
        let change = c.change.as_ref().ok_or(MapError::NoStepInFlight(chain))?;
        if change.step() != step {
            return Err(MapError::WrongStep { chain, step, in_flight: change.step() });
        }
        Ok(change)
    }

    /// The Add's preconditions still hold: nothing but this step changes the members while it is in
    /// flight, and a failure of the joiner or of a member would have aborted it (see `node_failed`).
    fn add_inserted(&mut self, chain: ChainId, step: u64) -> Result<Applied, MapError> {
        let (node, position, kind) = match *self.step_in_flight(chain, step)? {
            ChainChange::Add { inserted: true, .. } => return Err(MapError::AlreadyInserted { chain, step }),
            ChainChange::Add { node, position, kind, .. } => (node, position, kind),
            ChainChange::Remove { .. } => return Err(MapError::NotAnAdd { chain, step }),
        };
        let epoch = self.applying_epoch();
        let c = self.chains.get_mut(&chain).expect("checked");
        c.change = Some(ChainChange::Add { node, position, step, inserted: true, kind });
        c.insert_member(epoch, position, node, kind);
        Ok(Applied::Changed)
    }

    /// Ends the step in flight; as for `add_inserted`, its preconditions still hold.
    fn step_done(&mut self, chain: ChainId, step: u64) -> Result<Applied, MapError> {
        let change = self.step_in_flight(chain, step)?.clone();
        if let ChainChange::Add { inserted: false, .. } = change {
            return Err(MapError::NotInserted { chain, step });
        }
        let epoch = self.applying_epoch();
        let c = self.chains.get_mut(&chain).expect("checked");
        c.change = None;
        if let ChainChange::Remove { node, .. } = change {
            c.remove_member(epoch, node);
        }
        Ok(Applied::Changed)
    }

    fn step_aborted(&mut self, chain: ChainId, step: u64) -> Result<Applied, MapError> {
        self.step_in_flight(chain, step)?;
        let epoch = self.applying_epoch();
        self.chains.get_mut(&chain).expect("checked").abort(epoch);
        Ok(Applied::Changed)
    }

    /// `node` is a member of, or the subject of a step on, some chain.
    fn involved(&self, node: NodeId) -> bool {
        self.chains.values().any(|c| c.involves(node))
    }

    /// The automatic transitions: Joining → Active once it holds every target chain, Leaving/Failed →
    /// Removed once in no chain. Part of the command that made them true, so they share its epoch.
    fn settle(&mut self) {
        let targets = self.nodes.values().any(|n| n.state == NodeState::Joining).then(|| self.targets());
        let updates: Vec<(NodeId, NodeState)> = self
            .nodes
            .iter()
            .filter_map(|(&id, n)| match n.state {
                NodeState::Joining if self.holds_targets(id, targets.as_ref()?) => Some((id, NodeState::Active)),
                NodeState::Leaving | NodeState::Failed if !self.involved(id) => Some((id, NodeState::Removed)),
                _ => None,
            })
            .collect();
        for (id, state) in updates {
            self.nodes.get_mut(&id).expect("listed").state = state;
        }
    }

    fn holds_targets(&self, node: NodeId, targets: &BTreeMap<ChainId, Vec<NodeId>>) -> bool {
        targets.iter().all(|(id, t)| !t.contains(&node) || self.chains[id].holds(node))
    }
}

fn validate_bootstrap(
    nodes: &[(NodeId, NodeAddrs, Location)],
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
    let ids: BTreeSet<NodeId> = nodes.iter().map(|(id, ..)| *id).collect();
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
pub(crate) mod tests;
