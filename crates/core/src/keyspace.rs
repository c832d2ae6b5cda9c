//! What a keyspace is configured with (seed 003 §5.3, Flex-KV's four knobs): its chain, replica by replica
//! (replication factor and replica types), when writes are acknowledged (update mode) and who answers reads
//! (query node). The manager keeps every keyspace's configuration in the cluster map; each
//! keyspace gets its own chains and, on every node, its own datastores.

use crate::placement::{Placement, PlacementError};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The keyspace every cluster starts with: keyspace id 0, the one clients use until they choose another.
pub const DEFAULT_KEYSPACE: &str = "default";
/// Keyspaces a cluster may have at once, `default` included.
pub const KEYSPACES_MAX: usize = 256;
/// Longest keyspace name, in bytes.
pub const NAME_MAX: usize = 64;
/// Longest chain a keyspace may ask for.
pub const REPLICAS_MAX: usize = 7;

/// A name that is not one of a knob's values; the message lists the ones it takes.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown {knob} {given:?}; expected one of {expected}")]
pub struct UnknownName {
    knob: &'static str,
    given: String,
    expected: String,
}

/// Why a keyspace's name or configuration was refused.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyspaceError {
    #[error("invalid keyspace name {0:?}: use 1 to {NAME_MAX} ASCII letters, digits, '_', '-' or '.'")]
    Name(String),
    #[error("a keyspace needs 1 to {REPLICAS_MAX} replicas, not {0}")]
    Replicas(usize),
    #[error("a cache keyspace's maxmemory must be more than 0 bytes")]
    NoMemory,
    #[error(transparent)]
    Placement(#[from] PlacementError),
}

/// A knob's values with their names: `name()`, `ALL`, `Display` and `FromStr` (which lists the names it takes).
macro_rules! named {
    ($(#[$meta:meta])* $ty:ident ($label:literal) { $($(#[$vmeta:meta])* $variant:ident = $name:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "lowercase")]
        pub enum $ty {
            $($(#[$vmeta])* $variant,)+
        }

        impl $ty {
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $ty {
            type Err = UnknownName;

            fn from_str(s: &str) -> Result<Self, UnknownName> {
                $ty::ALL.iter().copied().find(|k| k.name() == s).ok_or_else(|| {
                    let names: Vec<&str> = $ty::ALL.iter().map(|k| k.name()).collect();
                    UnknownName { knob: $label, given: s.into(), expected: names.join(", ") }
                })
            }
        }
    };
}

named! {
    /// The datastore a replica keeps its data in (seed 003 §5.3, "replica types").
    ReplicaKind("replica type") {
        /// `mem`: memory only (the seed's "M"); a restart loses it.
        Mem = "mem",
        /// `log`: FAWN-DS, the durable append-only log with an in-memory index (the seed's "D").
        Log = "log",
        /// `buffered`: memory over a log written a batch at a time (the seed's "M_b…D"); a crash loses the
        /// batch not yet on disk.
        Buffered = "buffered",
    }
}

impl ReplicaKind {
    /// Whether a replica of this kind is whole after its node restarts: only a log fsynced before every
    /// acknowledgement is. A replica of another kind may miss writes it acknowledged, so after a restart it is
    /// not trusted until copied again (or, if no replica of its chain is whole, kept as the best there is).
    pub fn survives_restart(self) -> bool {
        matches!(self, ReplicaKind::Log)
    }
}

named! {
    /// When a write is acknowledged (seed 003 §5.3, "update plumbing").
    UpdateMode("update mode") {
        /// `su`: once every replica has it (the tail committed it): chain replication.
        Su = "su",
        /// `au`: once the primary (the head) has logged it; the other replicas get it afterwards.
        Au = "au",
        /// `ausi`: once the head has logged it and every other replica holds an invalidation of its key in
        /// memory; the other replicas get the write afterwards and meanwhile send reads of the key to the head.
        Ausi = "ausi",
    }
}

named! {
    /// Which member of a chain answers reads (seed 003 §5.3, "query node").
    QueryNode("query node") {
        /// `tail`: the last member, which holds only committed writes.
        Tail = "tail",
        /// `mid`: the middle member (the head of a chain of one or two).
        Mid = "mid",
        /// `head`: the first member, which has every write first.
        Head = "head",
    }
}

named! {
    /// When a keyspace's writes are fsynced relative to their acknowledgement (docs/durability.md). Declared
    /// from the laxest to the strictest, so the strictest of several is their maximum.
    DurabilityMode("durability mode") {
        /// `async`: acknowledged once handed to the OS; fsynced within the node's async interval. A process
        /// crash loses nothing, a power loss up to one interval.
        Async = "async",
        /// `group`: acknowledged after the fsync that ends its batch (group commit).
        Group = "group",
        /// `sync`: acknowledged after an fsync of its own.
        Sync = "sync",
    }
}

named! {
    /// How a keyspace's replicas agree on its writes (docs/keyspaces.md). Chain replication is the only one so
    /// far; every keyspace names its protocol so that the next ones are a keyspace option.
    Protocol("protocol") {
        /// `chain`: chain replication (FAWN-KV, seed 003), with the update modes and query nodes above.
        Chain = "chain",
    }
}

// By hand: `named!` derives the same traits for every knob, and only this one has a default.
#[allow(clippy::derivable_impls)]
impl Default for Protocol {
    fn default() -> Self {
        Protocol::Chain
    }
}

impl QueryNode {
    /// The position of the query node in a chain of `len` members (`len` ≥ 1).
    pub fn position(self, len: usize) -> usize {
        match self {
            QueryNode::Tail => len - 1,
            QueryNode::Mid => (len - 1) / 2,
            QueryNode::Head => 0,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyspaceConfig {
    /// One entry per replica of each chain, head first: the keyspace's replication factor is its length.
    pub replicas: Vec<ReplicaKind>,
    pub update: UpdateMode,
    pub read_from: QueryNode,
    /// A cache keyspace's cap: the memory each node may hold of it, counted as its keys' and values' bytes plus a
    /// fixed overhead per key; chains' heads evict the least recently written keys to stay within it
    /// (docs/keyspaces.md, "Cache mode"). None: the keyspace never evicts.
    pub maxmemory: Option<u64>,
    /// When the keyspace's writes are fsynced. None: each node's own `--durability`.
    pub durability: Option<DurabilityMode>,
    #[serde(default)]
    pub protocol: Protocol,
    /// Where the replicas run: regions and counts, or a spread over regions, zones and racks.
    #[serde(default)]
    pub placement: Placement,
}

impl KeyspaceConfig {
    /// A chain of `replication` log replicas: FAWN-KV's durable, strongly consistent store.
    pub fn durable(replication: usize) -> KeyspaceConfig {
        KeyspaceConfig::with_replicas(vec![ReplicaKind::Log; replication])
    }

    /// Chain replication (`su`, reads at the tail) over these replicas.
    pub fn with_replicas(replicas: Vec<ReplicaKind>) -> KeyspaceConfig {
        KeyspaceConfig {
            replicas,
            update: UpdateMode::Su,
            read_from: QueryNode::Tail,
            maxmemory: None,
            durability: None,
            protocol: Protocol::Chain,
            placement: Placement::default(),
        }
    }

    /// R: how many replicas each chain of the keyspace keeps (fewer while the cluster has fewer nodes).
    pub fn replication(&self) -> usize {
        self.replicas.len()
    }

    /// Parses a comma-separated replica list, head first: `log,log,log`.
    pub fn parse_replicas(list: &str) -> Result<Vec<ReplicaKind>, UnknownName> {
        list.split(',').map(|s| s.trim().parse()).collect()
    }

    pub fn validate(&self) -> Result<(), KeyspaceError> {
        if !(1..=REPLICAS_MAX).contains(&self.replicas.len()) {
            return Err(KeyspaceError::Replicas(self.replicas.len()));
        }
        if self.maxmemory == Some(0) {
            return Err(KeyspaceError::NoMemory);
        }
        Ok(self.placement.validate(self.replicas.len())?)
    }

    /// The replica list as `--replicas` takes it.
    pub fn replicas_text(&self) -> String {
        self.replicas.iter().map(|r| r.name()).collect::<Vec<_>>().join(",")
    }
}

/// Checks a keyspace name: 1 to [`NAME_MAX`] bytes of ASCII letters, digits, `_`, `-` and `.`.
pub fn validate_name(name: &str) -> Result<(), KeyspaceError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if name.is_empty() || name.len() > NAME_MAX || !name.chars().all(allowed) {
        return Err(KeyspaceError::Name(name.into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_lists_parse_and_print() {
        let config = KeyspaceConfig::with_replicas(KeyspaceConfig::parse_replicas("mem, log,buffered").unwrap());
        assert_eq!((config.replication(), config.replicas_text()), (3, "mem,log,buffered".to_string()));
        assert!(KeyspaceConfig::parse_replicas("log,disk")
            .unwrap_err()
            .to_string()
            .contains("unknown replica type \"disk\""));
        assert!(KeyspaceConfig::durable(0).validate().is_err());
        assert!(KeyspaceConfig::durable(REPLICAS_MAX + 1).validate().is_err());
        assert!(KeyspaceConfig::durable(3).validate().is_ok());
    }

    #[test]
    fn names_are_short_and_plain() {
        assert!(validate_name("users_v2.eu-west").is_ok());
        assert_eq!("au".parse::<UpdateMode>(), Ok(UpdateMode::Au));
        let wrong = "middle".parse::<QueryNode>().unwrap_err();
        assert_eq!(wrong.to_string(), "unknown query node \"middle\"; expected one of tail, mid, head");
        assert_eq!([1, 2, 3].map(|n| QueryNode::Mid.position(n)), [0, 0, 1]);
        assert_eq!(DurabilityMode::Async.max(DurabilityMode::Sync).max(DurabilityMode::Group), DurabilityMode::Sync);
        for bad in ["", "a b", "ключ", &"x".repeat(NAME_MAX + 1)] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
    }
}
