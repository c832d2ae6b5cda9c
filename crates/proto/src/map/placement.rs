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
//! Which nodes of that preference list a keyspace's chain takes depends on where they run and on the keyspace's
//! [`Placement`] ([`choose`]): a placement that names regions takes, region by region in its order (the first
//! is the home region, so the head runs there), that region's first nodes in preference order; a spread takes
//! first one node per region, then one per zone, then one per rack, then any, each pass in preference order
//! (Cassandra's NetworkTopologyStrategy), leaving out banned regions. In a cluster of one region without zones or
//! racks a spread is the first R nodes of the preference list: the seed's chain.
//!
//! Why fixed partitions:
//! - Chain ids never change when nodes come and go: there are no range splits or merges, so a chain's
//!   sequence numbers, ack watermarks and log records stay valid forever, and the seed's split flag on a
//!   head join (§2.5, FLUSH "tells downstream nodes to split the range") is unnecessary.
//! - A join still moves only the partitions whose successor VIDs the new node takes over: about `R·P/n`
//!   replica placements out of `R·P`, the seed's "only K/n keys move" property.
//! - Pre-copy to a joiner (§2.5 phase 1) is a scan of one token range, [`partition_range`].

use meridian_core::ring::vid_token;
use meridian_core::{ChainId, KeyspaceId, Location, NodeId, Placement};
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
        let mut members: Vec<NodeId> = Vec::with_capacity(r.min(self.points.len()));
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

/// The members of one chain of a keyspace placed by `placement`, at most `r`, head first: `prefs` is every
/// placeable node in the partition's preference order, `at` where each runs. See the module docs.
pub fn choose<'a>(
    prefs: &[NodeId],
    at: impl Fn(NodeId) -> &'a Location,
    placement: &Placement,
    r: usize,
) -> Vec<NodeId> {
    if placement.is_spread() {
        let allowed: Vec<NodeId> =
            prefs.iter().copied().filter(|&n| !placement.banned.contains(&at(n).region)).collect();
        return spread(&allowed, &at, r);
    }
    let in_region = |region: &str| prefs.iter().copied().filter(|&n| at(n).region == region).collect::<Vec<_>>();
    let placed = placement.regions.iter().flat_map(|(region, count)| spread(&in_region(region), &at, *count as usize));
    placed.take(r).collect()
}

/// How far apart two nodes must be for a pass of [`spread`] to take the second beside the first.
#[derive(Clone, Copy)]
enum Apart {
    Region,
    Zone,
    Rack,
    Node,
}

impl Apart {
    fn holds(self, a: &Location, b: &Location) -> bool {
        match self {
            Apart::Region => a.region != b.region,
            Apart::Zone => a.zone_key() != b.zone_key(),
            Apart::Rack => a.zone_key() != b.zone_key() || a.rack != b.rack,
            Apart::Node => true,
        }
    }
}

/// At most `r` of `nodes` (in preference order), taken in passes: a node apart from every one taken so far by
/// region, then by zone, then by rack, then any.
fn spread<'a>(nodes: &[NodeId], at: &impl Fn(NodeId) -> &'a Location, r: usize) -> Vec<NodeId> {
    let mut chosen: Vec<NodeId> = Vec::with_capacity(r.min(nodes.len()));
    for apart in [Apart::Region, Apart::Zone, Apart::Rack, Apart::Node] {
        for &n in nodes {
            if chosen.len() == r {
                return chosen;
            }
            if !chosen.contains(&n) && chosen.iter().all(|&c| apart.holds(at(c), at(n))) {
                chosen.push(n);
            }
        }
    }
    chosen
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

    fn at(table: &[(u32, &str)]) -> impl Fn(NodeId) -> Location {
        let table: Vec<(NodeId, Location)> = table.iter().map(|&(n, l)| (NodeId(n), l.parse().unwrap())).collect();
        move |n| table.iter().find(|(m, _)| *m == n).map(|(_, l)| l.clone()).unwrap_or_default()
    }

    fn chosen(prefs: &[u32], table: &[(u32, &str)], placement: &Placement, r: usize) -> Vec<u32> {
        let locations: Vec<(NodeId, Location)> = prefs.iter().map(|&n| (NodeId(n), at(table)(NodeId(n)))).collect();
        let find = |n: NodeId| &locations.iter().find(|(m, _)| *m == n).unwrap().1;
        let prefs: Vec<NodeId> = prefs.iter().copied().map(NodeId).collect();
        choose(&prefs, find, placement, r).into_iter().map(|n| n.0).collect()
    }

    /// Where every node is in region `default`, a spread is the seed's chain: the first R of the preference list.
    #[test]
    fn one_region_spreads_as_the_ring_does() {
        let ring = ring(1..=7, 8);
        let everywhere = Location::default();
        for (p, prefs) in ring.targets(64, usize::MAX).iter().enumerate() {
            assert_eq!(prefs.len(), 7, "every node in preference order");
            for r in 1..=8 {
                let token = *partition_range(ChainId(p as u32), 64).end();
                assert_eq!(choose(prefs, |_| &everywhere, &Placement::default(), r), ring.chain_at(token, r));
            }
        }
    }

    #[test]
    fn a_spread_takes_regions_then_zones_then_racks() {
        let table = [(1, "eu/a/r1"), (2, "eu/a/r1"), (3, "eu/a/r2"), (4, "eu/b"), (5, "us"), (6, "us")];
        let spread = Placement::default();
        assert_eq!(chosen(&[1, 2, 3, 4, 5, 6], &table, &spread, 2), [1, 5], "one per region first");
        assert_eq!(chosen(&[1, 2, 3, 4, 5, 6], &table, &spread, 3), [1, 5, 4], "then a new zone");
        assert_eq!(chosen(&[1, 2, 3, 4, 5, 6], &table, &spread, 4), [1, 5, 4, 3], "then a new rack");
        assert_eq!(chosen(&[1, 2, 3, 4, 5, 6], &table, &spread, 6), [1, 5, 4, 3, 2, 6], "then any");
        assert_eq!(chosen(&[6, 2, 1], &table, &spread, 2), [6, 2], "in preference order");
        assert_eq!(chosen(&[1, 2, 5, 6], &table, &spread.clone().banning("eu"), 3), [5, 6], "not in a banned region");
    }

    #[test]
    fn a_placement_puts_its_counts_region_by_region_home_first() {
        let table = [(1, "eu/a"), (2, "eu/a"), (3, "eu/b"), (4, "us"), (5, "asia")];
        let placed = Placement::per_region("us=1,eu=2").unwrap();
        assert_eq!(chosen(&[1, 2, 3, 4, 5], &table, &placed, 3), [4, 1, 3], "the head in the home region");
        let each = Placement::one_in_each("asia,eu").unwrap();
        assert_eq!(chosen(&[2, 1, 4, 5], &table, &each, 2), [5, 2]);
        assert_eq!(chosen(&[1, 4], &table, &placed, 3), [4, 1], "short where a region lacks nodes");
    }
}
