//! Why the map refuses a command. A refused command changes nothing, not even the epoch.

use super::masters::{PINNED_KEY_MAX, PINNED_MAX};
use super::users::{USERS_MAX, USER_NAME_MAX, USER_RULES_MAX};
use super::CHAINS_MAX;
use meridian_core::acl::AclError;
use meridian_core::config::VNODES_MAX;
use meridian_core::keyspace::KeyspaceError;
use meridian_core::keyspace::{DEFAULT_KEYSPACE, KEYSPACES_MAX};
use meridian_core::location::LocationError;
use meridian_core::{ChainId, NodeId};
use std::fmt;

use super::NodeState;

/// Why a command was refused; a refused command changed nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapError {
    AlreadyBootstrapped,
    NotBootstrapped,
    BadBootstrap(&'static str),
    /// `WantVoters` named a set of voters the manager cannot have.
    BadVoters(String),
    BadVnodes(u32),
    BadLocation(LocationError),
    /// A keyspace's placement puts more replicas in `region` than it has placeable nodes.
    PlacementUnmet {
        region: String,
        has: usize,
        needs: u32,
    },
    /// The id exists with other addresses, vnodes or location.
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
    /// The node left by `RemoveNode`: only `AddNode` brings it back.
    Departed(NodeId),
    UnknownChain(ChainId),
    StaleView {
        chain: ChainId,
        expected: u64,
        actual: u64,
    },
    StepInFlight(ChainId),
    NoStepInFlight(ChainId),
    /// The chain's step in flight has another id.
    WrongStep {
        chain: ChainId,
        step: u64,
        in_flight: u64,
    },
    /// `AddInserted` named a Remove.
    NotAnAdd {
        chain: ChainId,
        step: u64,
    },
    /// `AddInserted` twice, or a `StepStarted` whose Add claims to be inserted.
    AlreadyInserted {
        chain: ChainId,
        step: u64,
    },
    /// `StepDone` of an Add whose joiner was never inserted.
    NotInserted {
        chain: ChainId,
        step: u64,
    },
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
    StepReused {
        step: u64,
        next: u64,
    },
    /// No other live member with a whole replica would remain.
    LastReplica {
        chain: ChainId,
        node: NodeId,
    },
    /// The keyspace keeps a kind that survives a restart, and no other live member with a whole replica of
    /// such a kind would remain.
    LastDurable {
        chain: ChainId,
        node: NodeId,
    },
    /// `ReplicaRestored` of a member whose replica is not recorded as lost (by that incarnation).
    NotLost {
        chain: ChainId,
        node: NodeId,
    },
    /// `ReplicaRestored` while `node`, another live member, still holds a whole replica.
    WholeReplica {
        chain: ChainId,
        node: NodeId,
    },
    /// `ReplicaRestored` of a member that is not live while `live`, another member, is: the chain would be
    /// left with no member that serves.
    RestoreFromFailed {
        chain: ChainId,
        node: NodeId,
        live: NodeId,
    },
    KeyspaceExists(String),
    /// `db<number>` would take `SELECT number` from keyspace `number`, `name`, which is no database.
    NumberTaken {
        number: u32,
        name: String,
    },
    UnknownKeyspace(String),
    /// `default` cannot be dropped.
    DefaultKeyspace,
    /// The keyspace's name or configuration is invalid (the reason says how).
    BadKeyspace(KeyspaceError),
    /// Another keyspace would exceed [`KEYSPACES_MAX`] keyspaces or [`CHAINS_MAX`] chains.
    TooManyKeyspaces,
    /// No node is Joining or Active, so a new keyspace's chains would have no member.
    NoPlaceableNode,
    /// Only lease keyspaces have a master region.
    NotLease(String),
    /// A pinned key must have 1 to `PINNED_KEY_MAX` bytes; it had this many.
    BadPinnedKey(usize),
    /// The keyspace already pins `PINNED_MAX` keys.
    TooManyPins(String),
    /// An affiliated node named a host the map lacks.
    UnknownHost(NodeId),
    /// An affiliated node named a host that is itself affiliated, or not a Joining or Active node.
    NotAHost {
        host: NodeId,
        state: NodeState,
    },
    /// An ACL rule that cannot apply to its user.
    Acl(AclError),
    /// A user name that is empty, too long, or not printable ASCII without spaces.
    BadUserName(String),
    /// Another user would exceed [`USERS_MAX`].
    TooManyUsers,
    /// The user would gather more than [`USER_RULES_MAX`] passwords, patterns and command rules.
    UserTooLarge(String),
}

impl fmt::Display for MapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MapError::AlreadyBootstrapped => write!(f, "the cluster is already bootstrapped"),
            MapError::NotBootstrapped => write!(f, "the cluster is not bootstrapped"),
            MapError::BadBootstrap(why) => write!(f, "invalid bootstrap: {why}"),
            MapError::BadVoters(why) => write!(f, "invalid manager voters: {why}"),
            MapError::BadVnodes(v) => write!(f, "vnodes must be between 1 and {VNODES_MAX}, not {v}"),
            MapError::BadLocation(why) => write!(f, "bad location: {why}"),
            MapError::PlacementUnmet { region, has, needs } => {
                write!(
                    f,
                    "the placement puts {needs} replicas in region '{region}', which has {has} nodes to hold them"
                )
            }
            MapError::IdClash(id) => write!(f, "node {id} already exists with other addresses, vnodes or location"),
            MapError::AddrInUse { addr, by } => write!(f, "address {addr} is used by node {by}"),
            MapError::NodeBusy { id, state } => write!(f, "node {id} is {state}; add it again once it is REMOVED"),
            MapError::UnknownNode(id) => write!(f, "unknown node {id}"),
            MapError::Departed(id) => write!(f, "node {id} was removed from the cluster; add it again"),
            MapError::UnknownChain(c) => write!(f, "unknown chain {c}"),
            MapError::StaleView { chain, expected, actual } => {
                write!(f, "chain {chain} is at view {actual}, the command expected {expected}")
            }
            MapError::StepInFlight(c) => write!(f, "chain {c} already has a step in flight"),
            MapError::NoStepInFlight(c) => write!(f, "chain {c} has no step in flight"),
            MapError::WrongStep { chain, step, in_flight } => {
                write!(f, "chain {chain} has step {in_flight} in flight, not {step}")
            }
            MapError::NotAnAdd { chain, step } => write!(f, "step {step} on chain {chain} is not an addition"),
            MapError::AlreadyInserted { chain, step } => {
                write!(f, "the joiner of step {step} on chain {chain} is already inserted")
            }
            MapError::NotInserted { chain, step } => {
                write!(f, "the joiner of step {step} on chain {chain} is not inserted yet")
            }
            MapError::NotPlaceable { id, state } => write!(f, "node {id} is {state} and cannot join a chain"),
            MapError::AlreadyMember { chain, node } => write!(f, "node {node} is already a member of chain {chain}"),
            MapError::NotMember { chain, node } => write!(f, "node {node} is not a member of chain {chain}"),
            MapError::NeedsRepair(c) => write!(f, "chain {c} has a failed member to repair first"),
            MapError::NeverTail { chain, position } => {
                write!(f, "position {position} is not before the tail of chain {chain}")
            }
            MapError::TooManyReplicas(c) => write!(f, "chain {c} already has R+1 members"),
            MapError::StepReused { step, next } => write!(f, "step id {step} is used (next is {next})"),
            MapError::LastReplica { chain, node } => {
                write!(f, "removing {node} would leave chain {chain} without a live replica")
            }
            MapError::LastDurable { chain, node } => {
                write!(f, "removing {node} would leave chain {chain} without a whole replica that survives a restart")
            }
            MapError::NotLost { chain, node } => write!(f, "{node}'s replica of chain {chain} is not lost"),
            MapError::WholeReplica { chain, node } => write!(f, "{node} still holds a whole replica of chain {chain}"),
            MapError::RestoreFromFailed { chain, node, live } => {
                write!(f, "chain {chain} cannot be restored from {node}, which is down, while {live} is up")
            }
            MapError::KeyspaceExists(name) => write!(f, "keyspace {name:?} already exists"),
            MapError::NumberTaken { number, name } => write!(
                f,
                "keyspace number {number} is {name:?}, which SELECT {number} chooses: a keyspace named db{number} \
                 would take that number from it"
            ),
            MapError::UnknownKeyspace(name) => write!(f, "unknown keyspace {name:?}"),
            MapError::DefaultKeyspace => write!(f, "the {DEFAULT_KEYSPACE} keyspace cannot be dropped"),
            MapError::NotLease(name) => {
                write!(f, "keyspace {name:?} is not a lease keyspace: only lease keyspaces have a master region")
            }
            MapError::BadKeyspace(why) => write!(f, "{why}"),
            MapError::BadPinnedKey(len) => {
                write!(f, "a key given its own master must have 1 to {PINNED_KEY_MAX} bytes, not {len}")
            }
            MapError::TooManyPins(name) => {
                write!(f, "keyspace {name:?} already gives {PINNED_MAX} keys their own master region")
            }
            MapError::NoPlaceableNode => {
                write!(f, "no ACTIVE or JOINING node outside the keyspace's banned regions can hold its chains")
            }
            MapError::TooManyKeyspaces => {
                write!(f, "too many keyspaces (at most {KEYSPACES_MAX}, and {CHAINS_MAX} chains in all)")
            }
            MapError::Acl(why) => write!(f, "{why}"),
            MapError::BadUserName(name) => write!(
                f,
                "invalid user name {name:?}: 1 to {USER_NAME_MAX} printable ASCII characters other than the space"
            ),
            MapError::TooManyUsers => write!(f, "too many ACL users (at most {USERS_MAX})"),
            MapError::UserTooLarge(name) => write!(
                f,
                "user {name:?} would have more than {USER_RULES_MAX} passwords, patterns and command rules together"
            ),
            MapError::UnknownHost(host) => write!(f, "no node {host} to affiliate to"),
            MapError::NotAHost { host, state } => {
                write!(
                    f,
                    "node {host} ({state}) cannot host affiliated nodes: only a JOINING or ACTIVE standard node can"
                )
            }
        }
    }
}

impl std::error::Error for MapError {}
