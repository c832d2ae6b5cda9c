//! What a keyspace is configured with: its chain, replica by replica (seed 003 §5.3, Flex-KV's replication
//! factor and replica type knobs). The manager keeps every keyspace's configuration in the cluster map; each
//! keyspace gets its own chains and, on every node, its own datastores.

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

/// The datastore a replica keeps its data in (seed 003 §5.3, "replica types").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplicaKind {
    /// `mem`: memory only (the seed's "M"); a restart loses it.
    Mem,
    /// `log`: FAWN-DS, the durable append-only log with an in-memory index (the seed's "D").
    Log,
    /// `buffered`: memory over a log written a batch at a time (the seed's "M_b…D"); a crash loses the
    /// batch not yet on disk.
    Buffered,
}

impl ReplicaKind {
    pub const ALL: [ReplicaKind; 3] = [ReplicaKind::Mem, ReplicaKind::Log, ReplicaKind::Buffered];

    pub fn name(self) -> &'static str {
        match self {
            ReplicaKind::Mem => "mem",
            ReplicaKind::Log => "log",
            ReplicaKind::Buffered => "buffered",
        }
    }

    /// Whether a replica of this kind is whole after its node restarts: only a log fsynced before every
    /// acknowledgement is. A replica of another kind may miss writes it acknowledged, so after a restart it is
    /// not trusted until copied again (or, if no replica of its chain is whole, kept as the best there is).
    pub fn survives_restart(self) -> bool {
        matches!(self, ReplicaKind::Log)
    }
}

impl fmt::Display for ReplicaKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ReplicaKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        ReplicaKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown replica type {s:?}; expected mem, log or buffered"))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyspaceConfig {
    /// One entry per replica of each chain, head first: the keyspace's replication factor is its length.
    pub replicas: Vec<ReplicaKind>,
}

impl KeyspaceConfig {
    /// A chain of `replication` log replicas: FAWN-KV's durable, strongly consistent store.
    pub fn durable(replication: usize) -> KeyspaceConfig {
        KeyspaceConfig { replicas: vec![ReplicaKind::Log; replication] }
    }

    /// R: how many replicas each chain of the keyspace keeps (fewer while the cluster has fewer nodes).
    pub fn replication(&self) -> usize {
        self.replicas.len()
    }

    /// Parses a comma-separated replica list, head first: `log,log,log`.
    pub fn parse_replicas(list: &str) -> Result<Vec<ReplicaKind>, String> {
        list.split(',').map(|s| s.trim().parse()).collect()
    }

    pub fn validate(&self) -> Result<(), String> {
        if !(1..=REPLICAS_MAX).contains(&self.replicas.len()) {
            return Err(format!("a keyspace needs 1 to {REPLICAS_MAX} replicas, not {}", self.replicas.len()));
        }
        Ok(())
    }

    /// The replica list as `--replicas` takes it.
    pub fn replicas_text(&self) -> String {
        self.replicas.iter().map(|r| r.name()).collect::<Vec<_>>().join(",")
    }
}

/// Checks a keyspace name: 1 to [`NAME_MAX`] bytes of ASCII letters, digits, `_`, `-` and `.`.
pub fn validate_name(name: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if name.is_empty() || name.len() > NAME_MAX || !name.chars().all(allowed) {
        return Err(format!(
            "invalid keyspace name {name:?}: use 1 to {NAME_MAX} ASCII letters, digits, '_', '-' or '.'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_lists_parse_and_print() {
        let config = KeyspaceConfig { replicas: KeyspaceConfig::parse_replicas("mem, log,buffered").unwrap() };
        assert_eq!((config.replication(), config.replicas_text()), (3, "mem,log,buffered".to_string()));
        assert!(KeyspaceConfig::parse_replicas("log,disk").unwrap_err().contains("unknown replica type \"disk\""));
        assert!(KeyspaceConfig::durable(0).validate().is_err());
        assert!(KeyspaceConfig::durable(REPLICAS_MAX + 1).validate().is_err());
        assert!(KeyspaceConfig::durable(3).validate().is_ok());
    }

    #[test]
    fn names_are_short_and_plain() {
        assert!(validate_name("users_v2.eu-west").is_ok());
        for bad in ["", "a b", "ключ", &"x".repeat(NAME_MAX + 1)] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
    }
}
