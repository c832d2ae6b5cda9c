//! The network between nodes: one FIFO connection per ordered pair, with topology-driven latency,
//! jitter and bandwidth. A connection can break (partition, crash, flap): everything in flight on it is
//! lost, as with a reset TCP connection, and later messages use a fresh connection (a new epoch).

use crate::rng::SimRng;
use meridian_core::NodeId;
use std::collections::BTreeMap;
use std::time::Duration;

/// Where a node sits; latency grows with the distance between placements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    pub region: u32,
    pub zone: u32,
}

#[derive(Clone, Debug)]
pub struct NetParams {
    pub same_zone: Duration,
    pub same_region: Duration,
    pub cross_region: Duration,
    /// Mean of the exponential jitter added to every message, as a fraction of its base latency.
    pub jitter: f64,
    pub bytes_per_sec: u64,
}

impl NetParams {
    /// The mean round trip between the two farthest of these placements, jitter included: what an operator
    /// tunes heartbeat and election timing to.
    pub fn round_trip(&self, placements: &BTreeMap<NodeId, Placement>) -> Duration {
        let regions: std::collections::BTreeSet<u32> = placements.values().map(|p| p.region).collect();
        let zones: std::collections::BTreeSet<(u32, u32)> = placements.values().map(|p| (p.region, p.zone)).collect();
        let base = match (regions.len(), zones.len()) {
            (r, _) if r > 1 => self.cross_region,
            (_, z) if z > 1 => self.same_region,
            _ => self.same_zone,
        };
        base.mul_f64(2.0 * (1.0 + self.jitter))
    }

    /// Swarm-randomised per seed: each run gets its own speeds and jitter.
    pub fn random(rng: &mut SimRng) -> NetParams {
        let zone = rng.duration(Duration::from_micros(20), Duration::from_micros(500));
        NetParams {
            same_zone: zone,
            same_region: zone * 4,
            cross_region: rng.duration(Duration::from_millis(10), Duration::from_millis(120)),
            jitter: rng.unit() * 2.0,
            bytes_per_sec: rng.range(50_000_000, 5_000_000_000),
        }
    }
}

#[derive(Debug, Default, Clone)]
struct Link {
    epoch: u64,
    cut: bool,
    last_arrival: u64,
}

#[derive(Debug)]
pub struct Network {
    params: NetParams,
    placements: BTreeMap<NodeId, Placement>,
    links: BTreeMap<(NodeId, NodeId), Link>,
    rng: SimRng,
}

impl Network {
    pub fn new(params: NetParams, placements: BTreeMap<NodeId, Placement>, rng: SimRng) -> Network {
        Network { params, placements, links: BTreeMap::new(), rng }
    }

    /// The run's network in one line, for failure reports.
    pub fn describe(&self) -> String {
        let p = &self.params;
        let regions: std::collections::BTreeSet<u32> = self.placements.values().map(|pl| pl.region).collect();
        let zones: std::collections::BTreeSet<(u32, u32)> =
            self.placements.values().map(|pl| (pl.region, pl.zone)).collect();
        format!(
            "{} regions, {} zones; latency {:?} in a zone, {:?} across zones, {:?} across regions; jitter {:.2}x; {} MB/s",
            regions.len(),
            zones.len(),
            p.same_zone,
            p.same_region,
            p.cross_region,
            p.jitter,
            p.bytes_per_sec / 1_000_000
        )
    }

    fn base(&self, from: NodeId, to: NodeId) -> Duration {
        match (self.placements.get(&from), self.placements.get(&to)) {
            (Some(a), Some(b)) if a.region != b.region => self.params.cross_region,
            (Some(a), Some(b)) if a.zone != b.zone => self.params.same_region,
            _ => self.params.same_zone,
        }
    }

    /// Schedules a message; returns its arrival time and the connection epoch it travels on, or None
    /// when the link is cut.
    pub fn send(&mut self, now: u64, from: NodeId, to: NodeId, bytes: usize) -> Option<(u64, u64)> {
        let base = self.base(from, to);
        let jitter = self.rng.exp(base.mul_f64(self.params.jitter.max(1e-9)));
        let transfer = bytes as u128 * 1_000_000_000 / self.params.bytes_per_sec.max(1) as u128;
        let link = self.links.entry((from, to)).or_default();
        if link.cut {
            return None;
        }
        let arrival = (now + (base + jitter).as_nanos() as u64 + transfer as u64).max(link.last_arrival + 1);
        link.last_arrival = arrival;
        Some((arrival, link.epoch))
    }

    /// Whether a message sent on `epoch` still arrives: its connection must not have broken since.
    pub fn delivers(&self, from: NodeId, to: NodeId, epoch: u64) -> bool {
        self.links.get(&(from, to)).is_some_and(|l| l.epoch == epoch && !l.cut)
    }

    /// Breaks the connection from → to, losing what is in flight.
    pub fn break_link(&mut self, from: NodeId, to: NodeId) {
        let link = self.links.entry((from, to)).or_default();
        link.epoch += 1;
    }

    pub fn cut(&mut self, from: NodeId, to: NodeId) {
        self.break_link(from, to);
        self.links.entry((from, to)).or_default().cut = true;
    }

    /// Breaks every connection to and from `node` (it crashed).
    pub fn break_node(&mut self, node: NodeId) {
        let peers: Vec<NodeId> = self.placements.keys().copied().filter(|&p| p != node).collect();
        for p in peers {
            self.break_link(node, p);
            self.break_link(p, node);
        }
    }

    pub fn heal_all(&mut self) {
        self.links.values_mut().for_each(|l| l.cut = false);
    }

    pub fn is_cut(&self, from: NodeId, to: NodeId) -> bool {
        self.links.get(&(from, to)).is_some_and(|l| l.cut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net() -> Network {
        let params = NetParams {
            same_zone: Duration::from_micros(100),
            same_region: Duration::from_millis(1),
            cross_region: Duration::from_millis(50),
            jitter: 0.5,
            bytes_per_sec: 1_000_000_000,
        };
        let placements = [(NodeId(1), Placement { region: 0, zone: 0 }), (NodeId(2), Placement { region: 1, zone: 0 })]
            .into_iter()
            .collect();
        Network::new(params, placements, SimRng::new(3))
    }

    #[test]
    fn links_are_fifo_and_respect_distance() {
        let mut n = net();
        let mut last = 0;
        for i in 0..100 {
            let (at, _) = n.send(i * 10, NodeId(1), NodeId(2), 100).unwrap();
            assert!(at > last, "FIFO arrival order");
            assert!(at >= i * 10 + 50_000_000, "cross-region latency applies");
            last = at;
        }
    }

    #[test]
    fn breaking_a_link_loses_what_is_in_flight() {
        let mut n = net();
        let (_, epoch) = n.send(0, NodeId(1), NodeId(2), 10).unwrap();
        n.break_link(NodeId(1), NodeId(2));
        assert!(!n.delivers(NodeId(1), NodeId(2), epoch));
        let (_, epoch2) = n.send(0, NodeId(1), NodeId(2), 10).unwrap();
        assert!(n.delivers(NodeId(1), NodeId(2), epoch2));
    }

    #[test]
    fn cuts_are_directional_until_healed() {
        let mut n = net();
        n.cut(NodeId(1), NodeId(2));
        assert!(n.send(0, NodeId(1), NodeId(2), 10).is_none());
        assert!(n.send(0, NodeId(2), NodeId(1), 10).is_some());
        n.heal_all();
        assert!(n.send(0, NodeId(1), NodeId(2), 10).is_some());
    }
}
