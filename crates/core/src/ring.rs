//! Positions on the consistent-hashing ring of seed 003 §2.2 with a 64-bit id space (the seed uses 160 bits;
//! 64 is ample for placement and keeps tokens in one machine word): where a key sits, and where each virtual id
//! of a node sits. Which nodes serve which keys is the cluster map's business
//! (`meridian_proto::map::placement`).

use crate::ids::NodeId;
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

const VID_SEED: u64 = 0x6d65_7269_6469_616e; // "meridian"

/// The ring position of a key. A key with a [`hash_tag`] takes its top [`TAG_BITS`] bits from its tag and the
/// rest from the whole key: keys sharing a tag then share a partition (partitions are ring ranges of at least
/// 2^(64 − 12) tokens, `meridian_proto::map::placement`), so a command changing several of them in one step
/// finds them in one chain (RENAME, COPY, MSETNX), while a store's index, ordered by token, still tells them
/// apart without reading them. A key without a tag sits where its whole bytes hash.
pub fn key_token(key: &[u8]) -> u64 {
    match hash_tag(key) {
        None => xxh3_64(key),
        Some(tag) => (xxh3_64(tag) & !(u64::MAX >> TAG_BITS)) | (xxh3_64(key) >> TAG_BITS),
    }
}

/// A hash of the whole key, tag or not: for telling keys apart where their place does not matter (a
/// connection's order of commands), without the search for a tag that [`key_token`] makes.
pub fn key_hash(key: &[u8]) -> u64 {
    xxh3_64(key)
}

/// How many of a tagged key's token bits its tag decides: more than the 12 that pick one of at most 4,096
/// partitions.
pub const TAG_BITS: u32 = 16;

/// The part of `key` that picks its partition, as Redis Cluster has it: the bytes between its first `{` and the
/// first `}` after that, if there are any. None for a key without one (`{}` is none, nor is a `{` with no `}`
/// after it).
#[inline]
pub fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = position(key, b'{')?;
    let rest = &key[open + 1..];
    position(rest, b'}').filter(|&len| len > 0).map(|len| &rest[..len])
}

/// Where `byte` first occurs in `bytes`. Every request's key is searched here on its way, and most keys hold no
/// `{`: that answer is found eight bytes at a time ([`holds`]), the rare other by a byte loop. On keys of a few
/// dozen bytes a byte loop costs about three instructions a byte and memchr's call and vector set-up about 50 a
/// search (bench/instructions), the words about 20.
#[inline]
fn position(bytes: &[u8], byte: u8) -> Option<usize> {
    if bytes.len() >= 8 && !holds(bytes, byte) {
        return None;
    }
    bytes.iter().position(|&b| b == byte)
}

/// Whether `bytes`, at least eight of them, hold `byte`: a word's byte equal to it is a zero byte of `x` below,
/// which sets that byte's high bit in `found`, and no word without one sets any (the borrow that can set a high
/// bit where a byte is not zero runs only upwards from a zero byte).
#[inline]
fn holds(bytes: &[u8], byte: u8) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let zero_bytes = |at: usize| {
        let word: [u8; 8] = bytes[at..at + 8].try_into().expect("eight bytes");
        let x = u64::from_le_bytes(word) ^ (ONES * u64::from(byte));
        x.wrapping_sub(ONES) & !x & HIGHS
    };
    // The first and the last word, which may overlap, then the whole words between them.
    let last = bytes.len() - 8;
    let mut found = zero_bytes(0) | zero_bytes(last);
    let mut at = 8;
    while at < last {
        found |= zero_bytes(at);
        at += 8;
    }
    found != 0
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

    /// Redis Cluster's examples (cluster specification, "Hash tags").
    #[test]
    fn hash_tags_are_read_as_redis_cluster_reads_them() {
        for (key, tag) in [
            ("{user1000}.following", Some("user1000")),
            ("{user1000}.followers", Some("user1000")),
            ("foo{}{bar}", None),
            ("foo{{bar}}zap", Some("{bar")),
            ("foo{bar}{zap}", Some("bar")),
            ("plain", None),
            ("open{only", None),
            ("}{", None),
        ] {
            assert_eq!(hash_tag(key.as_bytes()), tag.map(str::as_bytes), "{key}");
        }
    }

    /// Against a byte loop, for every length up to 40 and every place of one or two matches, and bytes that
    /// differ from the one looked for by one bit or by the borrow's reach (`0x7a`, `0x7c`, `0xfb`).
    #[test]
    fn the_word_search_finds_what_a_byte_loop_finds() {
        for len in 0..40 {
            for at in 0..=len {
                for other in [0x00, 0x7a, 0x7c, 0xfb, 0xff] {
                    let mut bytes = vec![other; len];
                    if at < len {
                        bytes[at] = b'{';
                    }
                    for second in at..len {
                        let mut twice = bytes.clone();
                        twice[second] = b'{';
                        assert_eq!(position(&twice, b'{'), twice.iter().position(|&b| b == b'{'), "{twice:?}");
                    }
                    assert_eq!(position(&bytes, b'{'), bytes.iter().position(|&b| b == b'{'), "{bytes:?}");
                }
            }
        }
    }

    #[test]
    fn keys_sharing_a_tag_share_a_partition_and_differ_in_token() {
        let tokens: std::collections::BTreeSet<u64> =
            (0..1000).map(|i| key_token(format!("{{user7}}:{i}").as_bytes())).collect();
        assert_eq!(tokens.len(), 1000, "each key its own token");
        let top = |t: u64| t >> (64 - TAG_BITS);
        assert_eq!(tokens.iter().map(|&t| top(t)).collect::<std::collections::BTreeSet<_>>().len(), 1);
        assert_ne!(top(key_token(b"{user7}")), top(key_token(b"{user8}")));
        assert_eq!(key_token(b"plain"), xxh3_64(b"plain"), "a key without a tag sits where it always did");
    }
}
