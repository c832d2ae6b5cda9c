//! The consistent-hashing ring of seed 003 §2.2–2.3 with a 64-bit id space (the seed uses 160 bits; 64
//! is ample for ring placement and keeps tokens in one machine word).
//!
//! Each physical node owns `vnodes` points derived deterministically from its id. The range that ends
//! at a point (exclusive of the previous point, inclusive of its own) is served by a chain made of that
//! point's node (the head) and the next distinct physical nodes clockwise, so chains overlap as in the
//! seed's Fig. 2.6: with R = 3 every node is head of some chains, middle of others and tail of others.

use crate::config::ClusterConfig;
use crate::ids::{ChainId, NodeId};
use serde::Serialize;
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

const VID_SEED: u64 = 0x6d65_7269_6469_616e; // "meridian"

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Chain {
    pub id: ChainId,
    /// The ring point that ends this range: keys with `prev < token(key) <= end` (wrapping) belong here.
    pub end: u64,
    /// Head first, tail last; distinct physical nodes.
    pub members: Vec<NodeId>,
}

impl Chain {
    pub fn head(&self) -> NodeId {
        self.members[0]
    }

    pub fn tail(&self) -> NodeId {
        *self.members.last().expect("chains are never empty")
    }

    pub fn position(&self, node: NodeId) -> Option<usize> {
        self.members.iter().position(|&m| m == node)
    }

    pub fn predecessor(&self, node: NodeId) -> Option<NodeId> {
        self.position(node).and_then(|i| i.checked_sub(1)).map(|i| self.members[i])
    }

    pub fn successor(&self, node: NodeId) -> Option<NodeId> {
        self.position(node).and_then(|i| self.members.get(i + 1).copied())
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Ring {
    /// Sorted by `end`; chain i serves the range ending at `chains[i].end`.
    chains: Vec<Chain>,
}

/// The ring position of a key.
pub fn key_token(key: &[u8]) -> u64 {
    xxh3_64(key)
}

/// The ring position of virtual id `i` of `node` (seed 003 §2.2: VIDs are deterministic from the node id).
pub fn vid_token(node: NodeId, i: usize) -> u64 {
    let mut buf = [0u8; 12];
    buf[..4].copy_from_slice(&node.0.to_be_bytes());
    buf[4..].copy_from_slice(&(i as u64).to_be_bytes());
    xxh3_64_with_seed(&buf, VID_SEED)
}

impl Ring {
    pub fn new(config: &ClusterConfig) -> Ring {
        let mut points: Vec<(u64, NodeId)> =
            config.node_ids().flat_map(|n| (0..config.vnodes).map(move |i| (vid_token(n, i), n))).collect();
        points.sort_unstable();
        let r = config.replication.min(config.nodes.len());
        let chains = (0..points.len())
            .map(|i| {
                let mut members = Vec::with_capacity(r);
                for j in 0..points.len() {
                    let node = points[(i + j) % points.len()].1;
                    if !members.contains(&node) {
                        members.push(node);
                        if members.len() == r {
                            break;
                        }
                    }
                }
                Chain { id: ChainId(i as u32), end: points[i].0, members }
            })
            .collect();
        Ring { chains }
    }

    pub fn chains(&self) -> &[Chain] {
        &self.chains
    }

    pub fn chain(&self, id: ChainId) -> Option<&Chain> {
        self.chains.get(id.0 as usize)
    }

    pub fn chain_for_key(&self, key: &[u8]) -> &Chain {
        let t = key_token(key);
        let i = self.chains.partition_point(|c| c.end < t);
        &self.chains[if i == self.chains.len() { 0 } else { i }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::NodeSpec;

    fn config(n: u32, r: usize, v: usize) -> ClusterConfig {
        let nodes = (1..=n).map(|i| NodeSpec { id: NodeId(i), peer_addr: format!("h:{i}") }).collect();
        ClusterConfig::new(nodes, r, v).unwrap()
    }

    #[test]
    fn chains_are_r_distinct_successors() {
        let ring = Ring::new(&config(5, 3, 4));
        assert_eq!(ring.chains().len(), 20);
        for c in ring.chains() {
            assert_eq!(c.members.len(), 3);
            let mut m = c.members.clone();
            m.sort();
            m.dedup();
            assert_eq!(m.len(), 3, "members must be distinct: {c:?}");
        }
    }

    #[test]
    fn every_node_is_head_and_tail_somewhere() {
        let ring = Ring::new(&config(4, 3, 8));
        for n in 1..=4 {
            assert!(ring.chains().iter().any(|c| c.head() == NodeId(n)));
            assert!(ring.chains().iter().any(|c| c.tail() == NodeId(n)));
        }
    }

    #[test]
    fn keys_map_to_the_chain_whose_range_holds_them() {
        let ring = Ring::new(&config(3, 3, 8));
        for k in 0..1000u32 {
            let key = k.to_be_bytes();
            let t = key_token(&key);
            let c = ring.chain_for_key(&key);
            let i = c.id.0 as usize;
            let prev = ring.chains()[(i + ring.chains().len() - 1) % ring.chains().len()].end;
            let inside = if prev < c.end { prev < t && t <= c.end } else { t > prev || t <= c.end };
            assert!(inside, "key token {t} not in chain {i}");
        }
    }

    #[test]
    fn replication_is_capped_by_cluster_size() {
        let ring = Ring::new(&config(2, 3, 2));
        assert!(ring.chains().iter().all(|c| c.members.len() == 2));
    }

    #[test]
    fn neighbours_follow_member_order() {
        let c = Chain { id: ChainId(0), end: 0, members: vec![NodeId(3), NodeId(1), NodeId(2)] };
        assert_eq!(c.predecessor(NodeId(3)), None);
        assert_eq!(c.predecessor(NodeId(1)), Some(NodeId(3)));
        assert_eq!(c.successor(NodeId(1)), Some(NodeId(2)));
        assert_eq!(c.successor(NodeId(2)), None);
        assert_eq!((c.head(), c.tail()), (NodeId(3), NodeId(2)));
    }
}
