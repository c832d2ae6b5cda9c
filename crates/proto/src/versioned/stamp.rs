//! A version is `counter << 16 | node`: the coordinator's node id in the low bits makes versions unique, so two
//! writes never tie. A clock counter is `ms << 8 | n`, milliseconds since 2025 on the coordinator's wall clock
//! then the write's place within its millisecond (a coordinator that stamps more than 256 writes in one
//! millisecond runs ahead of its clock, never behind it); 40 bits of milliseconds last until 2059. A quorum
//! (ABD) counter is one past the highest a read quorum holds.

use meridian_core::NodeId;

/// 2025-01-01T00:00:00Z in Unix milliseconds: clock counters count from here.
const EPOCH_MS: u64 = 1_735_689_600_000;
const NODE_BITS: u32 = 16;
const WITHIN_MS_BITS: u32 = 8;

pub fn of(counter: u64, node: NodeId) -> u64 {
    counter << NODE_BITS | u64::from(node.0 & 0xffff)
}

pub fn counter(version: u64) -> u64 {
    version >> NODE_BITS
}

/// The first clock counter of wall-clock millisecond `wall_ms`.
pub fn clock_counter(wall_ms: u64) -> u64 {
    wall_ms.saturating_sub(EPOCH_MS) << WITHIN_MS_BITS
}

/// The wall-clock millisecond a clock-stamped version names.
pub fn clock_ms(version: u64) -> u64 {
    (counter(version) >> WITHIN_MS_BITS) + EPOCH_MS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_versions_order_by_time_then_place_then_node() {
        let at = |ms: u64, n: u64, node: u32| of(clock_counter(ms) + n, NodeId(node));
        let t = 1_800_000_000_000;
        assert!(at(t, 0, 9) < at(t, 1, 1), "the second write of a millisecond is newer");
        assert!(at(t, 255, 9) < at(t + 1, 0, 1), "a later millisecond is newer");
        assert!(at(t, 0, 1) < at(t, 0, 2), "the node id breaks a tie");
        assert_eq!(clock_ms(at(t, 7, 3)), t);
        assert_eq!(counter(of(41, NodeId(7))), 41);
    }
}
