//! The static cluster configuration: which nodes exist, where their peers listen, the `default` keyspace's
//! replica types (and so the replication factor) and the number of virtual ids per node. Every node must be
//! started with the same config; its [`ClusterConfig::fingerprint`] travels in the peer handshake so a mismatch
//! is refused.

use crate::ids::NodeId;
use crate::keyspace::KeyspaceConfig;
use crate::location::{Location, LocationError};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSpec {
    pub id: NodeId,
    /// host:port of the node's peer listener.
    pub peer_addr: String,
    /// Where the node runs; every node of the initial cluster is placed from the start.
    #[serde(default)]
    pub location: Location,
}

impl NodeSpec {
    /// A node in the default region.
    pub fn new(id: NodeId, peer_addr: impl Into<String>) -> NodeSpec {
        NodeSpec { id, peer_addr: peer_addr.into(), location: Location::default() }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterConfig {
    /// Sorted by id.
    pub nodes: Vec<NodeSpec>,
    /// R in seed 003 §2.3: chain length, capped at the number of nodes.
    pub replication: usize,
    /// V in seed 003 §2.2: virtual ids (ring points) per physical node.
    pub vnodes: usize,
    /// How the `default` keyspace is configured when the cluster is created: `replication` replicas.
    pub default: KeyspaceConfig,
}

pub const VNODES_MAX: usize = 1024;
pub const DEFAULT_REPLICATION: usize = 3;
pub const DEFAULT_VNODES: usize = 8;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("--peers: entry {0:?} is not ID=HOST:PORT or ID=HOST:PORT@REGION[/ZONE[/RACK]]")]
    PeerSyntax(String),
    #[error("--peers: node {id}: {why}")]
    PeerLocation { id: u32, why: LocationError },
    #[error("--peers: node id {0} appears more than once (node ids must be unique)")]
    DuplicateId(u32),
    #[error("--peers: address {0} is given to more than one node")]
    DuplicateAddr(String),
    #[error("the cluster has no nodes")]
    Empty,
    #[error("replication factor must be at least 1")]
    Replication,
    #[error("vnodes must be between 1 and {VNODES_MAX}, not {0}")]
    Vnodes(usize),
    #[error("node id {0} is not in the peer list")]
    UnknownNode(u32),
}

impl ClusterConfig {
    pub fn new(mut nodes: Vec<NodeSpec>, replication: usize, vnodes: usize) -> Result<Self, ConfigError> {
        if nodes.is_empty() {
            return Err(ConfigError::Empty);
        }
        if replication == 0 {
            return Err(ConfigError::Replication);
        }
        if vnodes == 0 || vnodes > VNODES_MAX {
            return Err(ConfigError::Vnodes(vnodes));
        }
        nodes.sort_by_key(|n| n.id);
        for pair in nodes.windows(2) {
            if pair[0].id == pair[1].id {
                return Err(ConfigError::DuplicateId(pair[0].id.0));
            }
        }
        let mut addrs: Vec<&str> = nodes.iter().map(|n| n.peer_addr.as_str()).collect();
        addrs.sort_unstable();
        if let Some(pair) = addrs.windows(2).find(|p| p[0] == p[1]) {
            return Err(ConfigError::DuplicateAddr(pair[0].to_string()));
        }
        Ok(ClusterConfig { nodes, replication, vnodes, default: KeyspaceConfig::durable(replication) })
    }

    /// The same cluster with `default` configured so; its number of replicas is R.
    pub fn with_default(self, default: KeyspaceConfig) -> Result<Self, ConfigError> {
        if default.replicas.is_empty() {
            return Err(ConfigError::Replication);
        }
        Ok(ClusterConfig { replication: default.replication(), default, ..self })
    }

    /// Parses `1=HOST:PORT,2=HOST:PORT@eu/a,…` (the `--peers` flag): each node's peer address and, after an `@`,
    /// its location (the default region without one).
    pub fn parse_peers(list: &str) -> Result<Vec<NodeSpec>, ConfigError> {
        list.split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|entry| {
                let (id, addr) = entry.trim().split_once('=').ok_or_else(|| ConfigError::PeerSyntax(entry.into()))?;
                let id: u32 = id.trim().parse().map_err(|_| ConfigError::PeerSyntax(entry.into()))?;
                let (addr, location) = match addr.trim().split_once('@') {
                    Some((addr, place)) => (addr, place.parse().map_err(|why| ConfigError::PeerLocation { id, why })?),
                    None => (addr.trim(), Location::default()),
                };
                if addr.rsplit_once(':').is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err()) {
                    return Err(ConfigError::PeerSyntax(entry.into()));
                }
                Ok(NodeSpec { id: NodeId(id), peer_addr: addr.to_string(), location })
            })
            .collect()
    }

    pub fn node(&self, id: NodeId) -> Option<&NodeSpec> {
        self.nodes.iter().find(|n| n.id == id)
    }

    pub fn require_member(&self, id: NodeId) -> Result<(), ConfigError> {
        self.node(id).map(|_| ()).ok_or(ConfigError::UnknownNode(id.0))
    }

    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes.iter().map(|n| n.id)
    }

    /// A stable hash of everything that shapes the ring and the chains.
    pub fn fingerprint(&self) -> u64 {
        let bytes = postcard::to_allocvec(self).expect("config serializes");
        xxhash_rust::xxh3::xxh3_64(&bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::ReplicaKind;

    fn spec(id: u32, addr: &str) -> NodeSpec {
        NodeSpec::new(NodeId(id), addr)
    }

    #[test]
    fn parses_peer_lists() {
        let p = ClusterConfig::parse_peers("1=127.0.0.1:7001, 2=localhost:7002").unwrap();
        assert_eq!(p, vec![spec(1, "127.0.0.1:7001"), spec(2, "localhost:7002")]);
        assert!(matches!(ClusterConfig::parse_peers("1:127.0.0.1:7001"), Err(ConfigError::PeerSyntax(_))));
        assert!(matches!(ClusterConfig::parse_peers("x=h:1"), Err(ConfigError::PeerSyntax(_))));
        assert!(matches!(ClusterConfig::parse_peers("1=h:port"), Err(ConfigError::PeerSyntax(_))));
        let placed = ClusterConfig::parse_peers("1=h:1@eu/a, 2=h:2").unwrap();
        assert_eq!((placed[0].location.to_string(), placed[1].location.to_string()), ("eu/a".into(), "default".into()));
        assert!(matches!(ClusterConfig::parse_peers("1=h:1@EU"), Err(ConfigError::PeerLocation { id: 1, .. })));
        assert!(matches!(ClusterConfig::parse_peers("1=h@eu"), Err(ConfigError::PeerSyntax(_))));
    }

    #[test]
    fn rejects_clashes_and_bad_factors() {
        let dup = vec![spec(1, "a:1"), spec(1, "b:1")];
        assert_eq!(ClusterConfig::new(dup, 3, 8), Err(ConfigError::DuplicateId(1)));
        let dup_addr = vec![spec(1, "a:1"), spec(2, "a:1")];
        assert_eq!(ClusterConfig::new(dup_addr, 3, 8), Err(ConfigError::DuplicateAddr("a:1".into())));
        assert_eq!(ClusterConfig::new(vec![spec(1, "a:1")], 0, 8), Err(ConfigError::Replication));
        assert_eq!(ClusterConfig::new(vec![spec(1, "a:1")], 1, 0), Err(ConfigError::Vnodes(0)));
        assert_eq!(ClusterConfig::new(vec![], 1, 1), Err(ConfigError::Empty));
    }

    #[test]
    fn fingerprint_ignores_listing_order_but_not_content() {
        let a = ClusterConfig::new(vec![spec(2, "b:1"), spec(1, "a:1")], 3, 8).unwrap();
        let b = ClusterConfig::new(vec![spec(1, "a:1"), spec(2, "b:1")], 3, 8).unwrap();
        let c = ClusterConfig::new(vec![spec(1, "a:1"), spec(2, "b:1")], 2, 8).unwrap();
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_ne!(a.fingerprint(), c.fingerprint());
        let md = c.clone().with_default(KeyspaceConfig::with_replicas(vec![ReplicaKind::Mem, ReplicaKind::Log]));
        let md = md.unwrap();
        assert_eq!((md.replication, md.default.replicas_text()), (2, "mem,log".to_string()));
        assert_ne!(md.fingerprint(), c.fingerprint());
        assert_eq!(c.with_default(KeyspaceConfig::with_replicas(vec![])), Err(ConfigError::Replication));
    }
}
