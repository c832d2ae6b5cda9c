//! The planner's rules for a quorum partition: a replica is replaced, never just dropped. A node the placement
//! wants and the partition lacks is added first (it copies, `copy.rs`); only then does a member the placement no
//! longer wants (failed, leaving, or displaced) go. Every acknowledged write is on W of the N replicas, and every
//! value an ABD read returned on N − R + 1; the Add's joiner copies from enough replicas to meet both, and while
//! a Remove is in flight a store also waits for what it would need among the N − 1 that stay, so read quorums
//! keep meeting them. A partition with a
//! failed member and no node to replace it keeps the member: the quorums tolerate it.

use crate::map::{ChainChange, ChainView, ClusterMap};
use meridian_core::{NodeId, ReplicaKind};

/// The next step of quorum partition `c`, planned against the nodes its placement wants (`target`); it gets id
/// `step`.
pub fn next_change(map: &ClusterMap, c: &ChainView, target: &[NodeId], step: u64) -> Option<ChainChange> {
    let replication = map.replication(c.id);
    if let Some(&node) = target.iter().find(|&&n| !c.contains(n)).filter(|_| c.members.len() <= replication) {
        // Not the tail's place: the map keeps that rule for every chain, and a quorum has no order.
        return Some(ChainChange::Add { node, position: 0, step, inserted: false, kind: ReplicaKind::Log });
    }
    let unwanted = |m: &&NodeId| !target.contains(m);
    // A failed one first: it answers no quorum anyway.
    let failed = c.members.iter().filter(unwanted).find(|&&m| !map.is_live(m));
    let outgoing = failed.or_else(|| c.members.iter().find(unwanted)).copied();
    outgoing.filter(|_| c.members.len() > replication).map(|node| ChainChange::Remove { node, step })
}
