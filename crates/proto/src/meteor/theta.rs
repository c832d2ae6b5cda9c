//! θt, how old a status a read may count (seed 001 §4.2.2, "Summary of θt"; MeteorShower2, §4.2.5), and the
//! round trips its bound is measured from.
//!
//! Why a status up to θt old may count: a write succeeded once a majority acknowledged it, and a replica's
//! acknowledgement left after it took the write. If the acknowledgement's trip to the write's coordinator lasts
//! at least L, every replica of that majority took the write at least L before the coordinator answered, so
//! before any later read there arrived; a status sent after the read arrived, less L, reports it. So θt ≤ L − ε
//! keeps the argument of `reads.rs` whole for reads from the replica's region, L being the least one-way trip
//! between the replica and another of the partition: a client's writes go through a node of its region, whose
//! trips to the other regions are the replica's. The least trip is taken as [`ONE_WAY_SHARE`] of the least round
//! trip probes measured, once [`PROBES_MIN`] came back: an assumption about the network (trips never shorter than
//! that, from any node of the region), which the docs state with the guarantee.
//!
//! A read sent on from another region counts only statuses sent after it arrived: the argument says nothing of
//! the trips from there. A replica's views of its peers only grow, so its reads never go back whatever θt (a
//! majority that agrees meets the majority an earlier read agreed with), and a peer counts in a read only in the
//! read's configuration, whose statuses come after those of the configuration before.

use meridian_core::{MeteorOptions, NodeId, Theta};
use std::collections::BTreeMap;
use std::time::Duration;

/// Probes to a peer before its round trip counts: enough that the least of them is near the least there is.
pub const PROBES_MIN: u32 = 20;
/// After [`PROBES_MIN`], a peer is probed every this many status intervals.
pub const PROBE_EVERY: u64 = 10;
/// The part of the least measured round trip a one-way trip is taken to last at least: half, less a tenth for
/// asymmetric routes and round trips a little longer than the least there is.
pub const ONE_WAY_SHARE: f64 = 0.45;

#[derive(Clone, Copy, Debug, Default)]
struct Least {
    rtt: Option<Duration>,
    probes: u32,
}

/// The least round trip to each peer, from probes answered at once (not after a sync, as statuses are).
#[derive(Debug, Default)]
pub struct RoundTrips {
    peers: BTreeMap<NodeId, Least>,
    ticks: u64,
}

impl RoundTrips {
    /// The peers to probe at this status interval, of `peers` (those that share partitions with this node):
    /// every interval until a peer's round trip counts, then every [`PROBE_EVERY`] intervals.
    pub fn due(&mut self, peers: impl Iterator<Item = NodeId>) -> Vec<NodeId> {
        self.ticks += 1;
        let every = self.ticks.is_multiple_of(PROBE_EVERY);
        peers.filter(|p| every || self.peers.get(p).is_none_or(|l| l.probes < PROBES_MIN)).collect()
    }

    pub fn on_probe_answered(&mut self, peer: NodeId, rtt: Duration) {
        let least = self.peers.entry(peer).or_default();
        least.rtt = Some(least.rtt.map_or(rtt, |r| r.min(rtt)));
        least.probes = least.probes.saturating_add(1);
    }

    /// The least one-way trip between this node and `peer`, in milliseconds, once measured.
    pub fn one_way_floor_ms(&self, peer: NodeId) -> Option<u64> {
        let least = self.peers.get(&peer).filter(|l| l.probes >= PROBES_MIN)?;
        least.rtt.map(|rtt| (rtt.as_secs_f64() * 1000.0 * ONE_WAY_SHARE) as u64)
    }

    /// The least one-way trip to any of `peers`, once every one is measured.
    pub fn floor_ms(&self, mut peers: impl Iterator<Item = NodeId>) -> Option<u64> {
        peers.try_fold(u64::MAX, |least, p| self.one_way_floor_ms(p).map(|f| least.min(f)))
    }
}

/// The θt a read counts statuses by, in milliseconds: the keyspace's, within the bound `floor_ms` (the least
/// one-way trip to another replica, None until measured) makes safe unless the keyspace forces it, and 0 for a
/// read from another region.
pub fn in_force(m: &MeteorOptions, floor_ms: Option<u64>, same_region: bool) -> u64 {
    let bound = floor_ms.map_or(0, |f| f.saturating_sub(u64::from(m.clock_bound_ms)));
    match m.theta {
        _ if !same_region => 0,
        Theta::Auto => bound,
        Theta::Fixed(ms) if m.unsafe_theta => u64::from(ms),
        Theta::Fixed(ms) => u64::from(ms).min(bound),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_counts_once_probed_enough_and_then_is_probed_now_and_then() {
        let mut trips = RoundTrips::default();
        let (near, far) = (NodeId(2), NodeId(3));
        for i in 0..PROBES_MIN {
            assert_eq!(trips.due([near, far].into_iter()).len(), 2, "every interval while unmeasured");
            trips.on_probe_answered(near, Duration::from_millis(20 + u64::from(i)));
            assert_eq!(trips.floor_ms([near, far].into_iter()), None, "the far peer is unmeasured");
            trips.on_probe_answered(far, Duration::from_millis(100));
        }
        assert_eq!(trips.one_way_floor_ms(near), Some(9), "45% of the least round trip, 20 ms");
        assert_eq!(trips.floor_ms([near, far].into_iter()), Some(9));
        let probed: usize = (0..PROBE_EVERY).map(|_| trips.due([near, far].into_iter()).len()).sum();
        assert_eq!(probed, 2, "once in PROBE_EVERY intervals");
    }

    #[test]
    fn theta_stays_within_its_bound_unless_forced() {
        let m = |theta, unsafe_theta| MeteorOptions { clock_bound_ms: 5, theta, unsafe_theta, ..Default::default() };
        assert_eq!(in_force(&m(Theta::Auto, false), Some(40), true), 35, "the least trip less ε");
        assert_eq!(in_force(&m(Theta::Auto, false), None, true), 0, "unmeasured: MeteorShower1");
        assert_eq!(in_force(&m(Theta::Auto, false), Some(3), true), 0, "a trip shorter than ε");
        assert_eq!(in_force(&m(Theta::Fixed(20), false), Some(40), true), 20);
        assert_eq!(in_force(&m(Theta::Fixed(80), false), Some(40), true), 35, "clamped to the bound");
        assert_eq!(in_force(&m(Theta::Fixed(80), true), Some(40), true), 80, "forced");
        assert_eq!(in_force(&m(Theta::Fixed(80), true), Some(40), false), 0, "a read from another region");
        assert_eq!(in_force(&m(Theta::Fixed(0), false), Some(40), true), 0);
    }
}
