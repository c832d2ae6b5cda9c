//! Positions on the consistent-hashing ring of seed 003 §2.2 with a 64-bit id space (the seed uses 160 bits;
//! 64 is ample for placement and keeps tokens in one machine word): where a key sits, and where each virtual id
//! of a node sits. Which nodes serve which keys is the cluster map's business
//! (`meridian_proto::map::placement`).

use crate::ids::NodeId;
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

const VID_SEED: u64 = 0x6d65_7269_6469_616e; // "meridian"

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_ids_differ_between_nodes_and_indexes() {
        let tokens: std::collections::BTreeSet<u64> =
            (1..=4).flat_map(|n| (0..8).map(move |i| vid_token(NodeId(n), i))).collect();
        assert_eq!(tokens.len(), 32);
        assert_eq!(vid_token(NodeId(1), 0), vid_token(NodeId(1), 0), "deterministic");
    }
}
