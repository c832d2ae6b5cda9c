//! The network between nodes: one FIFO connection per ordered pair, with topology-driven latency,
//! jitter and bandwidth. A connection can break (partition, crash, flap): everything in flight on it is
//! lost, as with a reset TCP connection, and later messages use a fresh connection (a new epoch).
//!
//! The speeds are drawn per seed, unless the run is given a [`Topology`] (`meridian sim --topology`): then a
//! message takes half its regions' round trip, give or take up to the link's jitter (uniformly), and a link with
//! a bandwidth sends one message at a time, so a large one delays those behind it.

use crate::rng::SimRng;
use meridian_core::topology::Topology;
use meridian_core::NodeId;
use std::collections::BTreeMap;
use std::sync::Arc;
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
    /// Regions and links that replace the speeds above between placements' regions.
    pub topology: Option<Arc<Topology>>,
}

impl NetParams {
    /// The mean round trip between the two farthest of these placements, jitter included: what an operator
    /// tunes heartbeat and election timing to.
    pub fn round_trip(&self, placements: &BTreeMap<NodeId, Placement>) -> Duration {
        if let Some(t) = &self.topology {
            let placed: std::collections::BTreeSet<usize> = placements.values().map(|p| p.region as usize).collect();
            let pairs = placed.iter().flat_map(|&a| placed.iter().map(move |&b| t.link(a, b)));
            let farthest = pairs.map(|l| l.rtt_ms + 2.0 * l.jitter_ms).fold(0.0, f64::max);
            return Duration::from_secs_f64(farthest / 1e3);
        }
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
            topology: None,
        }
    }
}

/// How long one message takes: its latency, its time to send, and whether it waits for the messages before it
/// to be sent (a link of limited bandwidth).
struct Leg {
    one_way_ns: u64,
    transfer_ns: u64,
    paced: bool,
}

#[derive(Debug, Default, Clone)]
struct Link {
    epoch: u64,
    cut: bool,
    last_arrival: u64,
    /// When a link of limited bandwidth has sent what it was given.
    free_at: u64,
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

    /// The region `node` sits in (a topology's region index, or a drawn network's region).
    pub fn region_of(&self, node: NodeId) -> Option<u32> {
        self.placements.get(&node).map(|p| p.region)
    }

    /// The run's network in one line, for failure reports.
    pub fn describe(&self) -> String {
        let p = &self.params;
        if let Some(t) = &p.topology {
            let names: Vec<&str> =
                self.placements.values().map(|pl| t.regions()[pl.region as usize].name.as_str()).collect();
            return format!("topology {}: nodes in {} in turn", t.source, names.join(", "));
        }
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
        let leg = match self.topology_link(from, to) {
            Some(link) => self.leg_over(link, bytes),
            None => self.drawn_leg(from, to, bytes),
        };
        let link = self.links.entry((from, to)).or_default();
        if link.cut {
            return None;
        }
        let start = if leg.paced { now.max(link.free_at) } else { now };
        link.free_at = start + leg.transfer_ns;
        let arrival = (link.free_at + leg.one_way_ns).max(link.last_arrival + 1);
        link.last_arrival = arrival;
        Some((arrival, link.epoch))
    }

    /// A message's way over a network drawn from the seed: its placements' latency, an exponential jitter, and
    /// the run's bandwidth, which messages share without waiting for each other.
    fn drawn_leg(&mut self, from: NodeId, to: NodeId, bytes: usize) -> Leg {
        let base = self.base(from, to);
        let jitter = self.rng.exp(base.mul_f64(self.params.jitter.max(1e-9)));
        let transfer = bytes as u128 * 1_000_000_000 / self.params.bytes_per_sec.max(1) as u128;
        Leg { one_way_ns: (base + jitter).as_nanos() as u64, transfer_ns: transfer as u64, paced: false }
    }

    /// What the run's topology puts between `from` and `to`, if it has one.
    fn topology_link(&self, from: NodeId, to: NodeId) -> Option<meridian_core::topology::Link> {
        let (t, a, b) = (self.params.topology.as_ref()?, self.placements.get(&from)?, self.placements.get(&to)?);
        Some(t.link(a.region as usize, b.region as usize))
    }

    /// A message's way over a topology's link: half its round trip, give or take its jitter; on a link of limited
    /// bandwidth, after the messages before it have gone.
    fn leg_over(&mut self, l: meridian_core::topology::Link, bytes: usize) -> Leg {
        let one_way_ms = l.rtt_ms / 2.0 + l.jitter_ms * (2.0 * self.rng.unit() - 1.0);
        let (rate, bytes) = (l.bandwidth_mbps.map(|mbps| mbps * 1e6 / 8.0), bytes as f64);
        let transfer_ns = rate.map_or(bytes * 1e9 / self.params.bytes_per_sec.max(1) as f64, |rate| bytes * 1e9 / rate);
        Leg { one_way_ns: (one_way_ms * 1e6) as u64, transfer_ns: transfer_ns as u64, paced: rate.is_some() }
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
            topology: None,
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

    /// Over a topology: half the regions' round trip each way, give or take the link's jitter, and a link of
    /// limited bandwidth sends one message at a time.
    #[test]
    fn a_topology_sets_latency_jitter_and_bandwidth_per_region_pair() {
        let text = "[[region]]\nname = \"eu\"\n[[region]]\nname = \"us\"\n[[link]]\nbetween = [\"eu\", \"us\"]\n\
                    rtt_ms = 80\njitter_ms = 2\nbandwidth_mbps = 8\n";
        let topology = Arc::new(Topology::parse(text, "t").unwrap());
        let params = NetParams { topology: Some(topology), ..net().params };
        let placed = |r| Placement { region: r, zone: 0 };
        let placements = [(NodeId(1), placed(0)), (NodeId(2), placed(1)), (NodeId(3), placed(0))].into();
        let mut n = Network::new(params, placements, SimRng::new(3));
        assert_eq!(n.params.round_trip(&n.placements), Duration::from_millis(84));
        const MS: u64 = 1_000_000;
        for i in 0..20 {
            let (at, _) = n.send(i * 100 * MS, NodeId(1), NodeId(2), 10).unwrap();
            let one_way = at - i * 100 * MS;
            assert!((38 * MS..=42 * MS + 10 * MS / 1000).contains(&one_way), "{one_way} ns");
        }
        // 8 Mb/s is a byte a microsecond: 100 kB take 100 ms to send, and the next message waits for them.
        let (big, _) = n.send(10_000 * MS, NodeId(1), NodeId(2), 100_000).unwrap();
        let (small, _) = n.send(10_000 * MS, NodeId(1), NodeId(2), 1).unwrap();
        assert!(big >= 10_138 * MS && small >= 10_138 * MS && small > big, "{big} {small}");
        let (within, _) = n.send(0, NodeId(1), NodeId(3), 10).unwrap();
        assert!(within < MS, "within a region: 0.2 ms round trip ({within} ns)");
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
