//! Identifier newtypes, so a node id can never be passed where a chain id is expected.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A physical node of the cluster; unique within a cluster (a clash is a config error).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeId(pub u32);

/// One range of the ring and the chain of replicas that owns it (seed 003 §2.3): partition `p` of keyspace
/// `k` is chain `k · 2^12 + p`, so the default keyspace's chains are numbered by partition alone, and a chain
/// id names its keyspace without a map at hand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ChainId(pub u32);

/// A keyspace: a named set of keys with its own replication configuration and its own chains (one per
/// partition). Ids are handed out by the manager in order and never reused; 0 is `default`, which is also
/// what `Default` gives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct KeyspaceId(pub u32);

impl KeyspaceId {
    /// The keyspace every cluster starts with, which cannot be dropped.
    pub const DEFAULT: KeyspaceId = KeyspaceId(0);
    /// Keyspace ids fit in the bits of a chain id above its partition.
    pub const MAX: u32 = (1 << (32 - ChainId::PARTITION_BITS)) - 1;
}

impl ChainId {
    /// Bits of a chain id that number its partition: enough for the largest partition count.
    pub const PARTITION_BITS: u32 = 12;

    pub fn new(keyspace: KeyspaceId, partition: u32) -> ChainId {
        assert!(partition < 1 << Self::PARTITION_BITS && keyspace.0 <= KeyspaceId::MAX, "{keyspace:?} {partition}");
        ChainId(keyspace.0 << Self::PARTITION_BITS | partition)
    }

    pub fn keyspace(self) -> KeyspaceId {
        KeyspaceId(self.0 >> Self::PARTITION_BITS)
    }

    pub fn partition(self) -> u32 {
        self.0 & ((1 << Self::PARTITION_BITS) - 1)
    }
}

/// A client request as seen by the node that accepted it (its front-end); unique per node lifetime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RequestId(pub u64);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// `c5` for partition 5 of the default keyspace, `c2.5` for partition 5 of keyspace 2.
impl fmt::Display for ChainId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.keyspace() {
            KeyspaceId::DEFAULT => write!(f, "c{}", self.partition()),
            k => write!(f, "c{}.{}", k.0, self.partition()),
        }
    }
}

impl fmt::Display for KeyspaceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "k{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_ids_name_keyspace_and_partition() {
        let c = ChainId::new(KeyspaceId(2), 5);
        assert_eq!((c.keyspace(), c.partition(), c.to_string()), (KeyspaceId(2), 5, "c2.5".to_string()));
        assert_eq!(ChainId::new(KeyspaceId::DEFAULT, 7), ChainId(7));
        assert_eq!(ChainId(7).to_string(), "c7");
        let last = ChainId::new(KeyspaceId(KeyspaceId::MAX), (1 << ChainId::PARTITION_BITS) - 1);
        assert_eq!((last.0, last.keyspace().0), (u32::MAX, KeyspaceId::MAX));
    }
}
