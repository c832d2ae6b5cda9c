//! 128-bit fingerprints of search configurations (which operations are linearized, and the register's state).
//!
//! A configuration's fingerprint is the XOR of a random key per linearized operation and a random key for the
//! register state (Zobrist hashing), so linearizing or un-linearizing an operation updates it in O(1) instead of rehashing a
//! bitset of every operation. The search remembers fingerprints instead of whole bitsets (hash compaction): that
//! keeps each visited configuration at 16 bytes however many operations a key has. Two distinct configurations
//! collide with probability about 2^-128 per pair; a collision could only prune one wrongly, which can turn a linearizable
//! verdict into a false violation, never the reverse, because "linearizable" is only reported after a complete
//! linearization has actually been built.

use crate::register::Value;
use std::hash::{BuildHasherDefault, Hasher};

/// The set of visited configurations, hashed by the fingerprint itself (it is already uniformly random).
pub(crate) type Visited = std::collections::HashSet<u128, BuildHasherDefault<FoldHasher>>;

/// Domains keep the keys of operations and of the two kinds of state from ever sharing an input.
const OP_DOMAIN: u64 = 0;
const STATE_DOMAIN: u64 = 2;
const MUST_OBSERVE_STATE_DOMAIN: u64 = 4;
const DOMAINS: u64 = 6;

/// The key XORed into a fingerprint while operation `op` is linearized.
pub(crate) fn op_key(op: usize) -> u128 {
    random_key(OP_DOMAIN, op as u64)
}

/// The key XORed into a fingerprint for the register holding `value`, and whether the next operation must
/// observe it.
pub(crate) fn state_key(value: Value, must_observe: bool) -> u128 {
    let domain = if must_observe { MUST_OBSERVE_STATE_DOMAIN } else { STATE_DOMAIN };
    random_key(domain, u64::from(value))
}

/// Each key takes two consecutive inputs of the mixer, so domains are spaced by two.
fn random_key(domain: u64, index: u64) -> u128 {
    let base = index.wrapping_mul(DOMAINS).wrapping_add(domain);
    (u128::from(splitmix64(base)) << 64) | u128::from(splitmix64(base + 1))
}

/// The splitmix64 output function: a bijective mixer whose outputs for consecutive inputs look independent.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hashes a fingerprint by folding its halves; SipHash over already-random bits would only cost time.
#[derive(Default)]
pub(crate) struct FoldHasher(u64);

impl Hasher for FoldHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u128(&mut self, value: u128) {
        self.0 ^= (value as u64) ^ ((value >> 64) as u64);
    }

    /// Only reached for types other than `u128`, which the visited set never hashes; kept correct regardless.
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
}
