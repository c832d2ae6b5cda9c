//! Fixed-partition placement on the virtual-id ring (Dynamo's "strategy 3").
//!
//! The seed (003 §2.2–2.3) gives every key to the chain that starts at its clockwise successor VID, so
//! each join splits a range and each leave merges two. Meridian keeps the VID ring for *who* replicates
//! what, but cuts the 64-bit token space into `P` equal partitions that never change: partition `p`
//! covers tokens `[p·2^64/P, (p+1)·2^64/P)` and is served by chain `ChainId::new(k, p)` of every keyspace `k`
//! forever. `P` is a power
//! of two between 1 and [`PARTITIONS_MAX`] ([`DEFAULT_PARTITIONS`] by default), so the partition of a
//! token is its top `log2 P` bits.
//!
//! The *target* chain of partition `p` is the node owning the first VID clockwise at or after the
//! partition's last token, then the next distinct physical nodes clockwise, `R` of them (fewer if the
//! cluster has fewer placeable nodes). Only Joining and Active nodes are placeable: a Leaving or Failed
//! node is being drained out, so it is never a target.
//!
//! Why fixed partitions:
//! - Chain ids never change when nodes come and go: there are no range splits or merges, so a chain's
//!   sequence numbers, ack watermarks and log records stay valid forever, and the seed's split flag on a
//!   head join (§2.5, FLUSH "tells downstream nodes to split the range") is unnecessary.
//! - A join still moves only the partitions whose successor VIDs the new node takes over: about `R·P/n`
//!   replica placements out of `R·P`, the seed's "only K/n keys move" property.
//! - Pre-copy to a joiner (§2.5 phase 1) is a scan of one token range, [`partition_range`].

use meridian_core::ring::vid_token;
use meridian_core::{ChainId, KeyspaceId, NodeId};
use std::ops::RangeInclusive;

/// Partitions (= chains) of a cluster unless configured otherwise.
pub const DEFAULT_PARTITIONS: u32 = 64;
/// Bound on the partition count: the cluster map holds one chain per partition and travels whole.
pub const PARTITIONS_MAX: u32 = 1 << ChainId::PARTITION_BITS;

/// A partition count is valid if it is a power of two in `1..=PARTITIONS_MAX`.
pub fn partitions_valid(partitions: u32) -> bool {
    partitions.is_power_of_two() && partitions <= PARTITIONS_MAX
}

fn width(partitions: u32) -> u128 {
    debug_assert!(partitions_valid(partitions), "invalid partition count {partitions}");
    (1u128 << 64) / u128::from(partitions)
}

/// The tokens of `chain`'s partition, both ends inclusive.
pub fn partition_range(chain: ChainId, partitions: u32) -> RangeInclusive<u64> {
    let first = u128::from(chain.partition()) * width(partitions);
    first as u64..=(first + width(partitions) - 1) as u64
}

/// The chain of `keyspace` that serves a key whose token is `token` ([`meridian_core::ring::key_token`]).
pub fn chain_for_token(keyspace: KeyspaceId, token: u64, partitions: u32) -> ChainId {
    ChainId::new(keyspace, (u128::from(token) / width(partitions)) as u32)
}

/// The VIDs of a set of physical nodes, sorted clockwise.
#[derive(Clone, Debug)]
pub struct VidRing {
    points: Vec<(u64, NodeId)>,
}

impl VidRing {
    /// `nodes` yields each placeable node with its VID count.
    pub fn new(nodes: impl IntoIterator<Item = (NodeId, u32)>) -> VidRing {
        let mut points: Vec<(u64, NodeId)> = nodes
            .into_iter()
            .flat_map(|(node, vnodes)| (0..vnodes as usize).map(move |i| (vid_token(node, i), node)))
            .collect();
        // Ties between VIDs of different nodes are broken by node id, so the order is total.
        points.sort_unstable();
        VidRing { points }
    }

    /// The owner of the first VID at or after `token` (wrapping) and the next distinct nodes clockwise,
    /// at most `r` of them, head first.
    pub fn chain_at(&self, token: u64, r: usize) -> Vec<NodeId> {
        let start = self.points.partition_point(|&(t, _)| t < token);
        let mut members: Vec<NodeId> = Vec::with_capacity(r);
        for j in 0..self.points.len() {
            if members.len() == r {
                break;
            }
            let node = self.points[(start + j) % self.points.len()].1;
            if !members.contains(&node) {
                members.push(node);
            }
        }
        members
    }

    /// The target chain of every partition, indexed by chain id.
    pub fn targets(&self, partitions: u32, r: usize) -> Vec<Vec<NodeId>> {
        (0..partitions).map(|p| self.chain_at(*partition_range(ChainId(p), partitions).end(), r)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::config::{DEFAULT_REPLICATION, DEFAULT_VNODES};
    use std::collections::BTreeSet;

    fn ring(ids: impl IntoIterator<Item = u32>, vnodes: u32) -> VidRing {
        VidRing::new(ids.into_iter().map(|i| (NodeId(i), vnodes)))
    }

    #[test]
    fn partitions_tile_the_token_space() {
        for p in [1, 2, 64, PARTITIONS_MAX] {
            let mut next = 0u128;
            for c in 0..p {
                let range = partition_range(ChainId(c), p);
                assert_eq!(u128::from(*range.start()), next);
                let k = KeyspaceId::DEFAULT;
                assert_eq!(chain_for_token(k, *range.start(), p), ChainId(c));
                assert_eq!(chain_for_token(k, *range.end(), p), ChainId(c));
                assert_eq!(chain_for_token(KeyspaceId(3), *range.end(), p), ChainId::new(KeyspaceId(3), c));
                next = u128::from(*range.end()) + 1;
            }
            assert_eq!(next, 1u128 << 64);
        }
        assert!(!partitions_valid(0) && !partitions_valid(3) && !partitions_valid(2 * PARTITIONS_MAX));
    }

    #[test]
    fn targets_have_min_r_nodes_distinct_members() {
        for n in 0..6u32 {
            for r in 1..=4 {
                for chain in ring(1..=n, 4).targets(16, r) {
                    let distinct: BTreeSet<NodeId> = chain.iter().copied().collect();
                    assert_eq!(chain.len(), r.min(n as usize));
                    assert_eq!(distinct.len(), chain.len(), "members must be distinct: {chain:?}");
                }
            }
        }
    }

    /// 4 nodes × 8 VIDs × 64 partitions: every node holds replicas, as head and as tail somewhere.
    #[test]
    fn every_node_has_a_share() {
        let targets = ring(1..=4, DEFAULT_VNODES as u32).targets(DEFAULT_PARTITIONS, DEFAULT_REPLICATION);
        for n in (1..=4).map(NodeId) {
            let share = targets.iter().filter(|c| c.contains(&n)).count();
            // A fair share is 3·64/4 = 48; 8 VIDs give a coarse but never empty split.
            assert!((16..=64).contains(&share), "{n} holds {share} partitions");
            assert!(targets.iter().any(|c| c[0] == n) && targets.iter().any(|c| c[2] == n));
        }
    }

    /// Replica placements that differ between two target sets, and the partitions that changed.
    fn moves(before: &[Vec<NodeId>], after: &[Vec<NodeId>]) -> (usize, usize) {
        let mut placements = 0;
        let mut partitions = 0;
        for (b, a) in before.iter().zip(after) {
            let moved = a.iter().filter(|n| !b.contains(n)).count();
            placements += moved;
            partitions += usize::from(moved > 0);
        }
        (placements, partitions)
    }

    /// A 5th node joining moves about R·P/5 placements, each into the new node, at most one per partition.
    #[test]
    fn a_join_moves_about_one_nth() {
        let (p, r) = (DEFAULT_PARTITIONS, DEFAULT_REPLICATION);
        let before = ring(1..=4, 8).targets(p, r);
        let after = ring(1..=5, 8).targets(p, r);
        let (placements, partitions) = moves(&before, &after);
        assert_eq!(placements, partitions, "a join moves at most one replica of a partition");
        for (b, a) in before.iter().zip(&after) {
            assert!(a == b || (a.contains(&NodeId(5)) && !b.contains(&NodeId(5))), "{b:?} -> {a:?}");
        }
        // R·P/5 = 38.4 of R·P = 192 placements; 8 VIDs per node leave room for luck both ways.
        assert!((16..=56).contains(&placements), "{placements} placements moved");
    }

    /// Averaged over many clusters the moved share of placements is close to 1/(n+1).
    #[test]
    fn joins_move_one_nth_on_average() {
        let (mut moved, mut total) = (0, 0);
        for base in 0..40u32 {
            let ids: Vec<u32> = (0..7).map(|i| base * 100 + i).collect();
            let before = ring(ids.iter().copied(), 8).targets(1024, 3);
            let after = ring(ids.iter().copied().chain([base * 100 + 99]), 8).targets(1024, 3);
            moved += moves(&before, &after).0;
            total += 3 * 1024;
        }
        let share = moved as f64 / total as f64;
        assert!((0.09..=0.16).contains(&share), "moved share {share}, expected about 1/8");
    }
}
