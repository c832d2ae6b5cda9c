//! WAN emulation on one machine (`meridian server --wan FILE|PRESET`, docs/regions.md): every message a node
//! receives from a peer is handed to its core half the round trip between the two nodes' regions after it
//! arrived, give or take the link's jitter, and no sooner than the link's bandwidth lets the messages before it
//! through. It is a test and demo feature; without `--wan` nothing here runs.
//!
//! The delay is applied on the receiving side, per inbound connection (one per peer and direction, so one per
//! directed link): the peer's hello names its region, this node knows its own. Messages stay in order (a
//! message is never handed on before one that arrived before it), many are in flight at once, and none is
//! dropped for being held: when [`HELD_BYTES_MAX`] bytes of a link are held, the connection stops being read,
//! so TCP holds back the sender, whose queue then fills and drops as on any slow link.

use super::handshake::Refusal;
use meridian_core::splitmix::SplitMix64;
use meridian_core::topology::{Link, Topology};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Bytes of messages one link may hold back at once: the emulation's memory bound, per inbound connection.
pub(crate) const HELD_BYTES_MAX: usize = 64 << 20;

/// A node's view of the emulated WAN: the topology and the region it runs in.
#[derive(Clone, Debug)]
pub struct Wan {
    topology: Arc<Topology>,
    region: usize,
}

/// Why `--wan` cannot be used as given.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("this node's region '{region}' is not in the --wan topology {topology} (its regions: {regions})")]
pub struct UnknownRegion {
    region: String,
    topology: String,
    regions: String,
}

impl Wan {
    /// The WAN of `topology` for a node in `region`, which the topology must name.
    pub fn new(topology: Arc<Topology>, region: &str) -> Result<Wan, UnknownRegion> {
        match topology.region(region) {
            Some(region) => Ok(Wan { topology, region }),
            None => Err(UnknownRegion {
                region: region.into(),
                topology: topology.source.clone(),
                regions: topology.regions().iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(", "),
            }),
        }
    }

    /// The delay line of messages from a peer in `region`; a region the topology lacks is refused.
    pub(crate) fn line_from(&self, region: &str, seed: u64) -> Result<DelayLine, Refusal> {
        let theirs = self.topology.region(region).ok_or_else(|| Refusal::RegionNotInWan(region.into()))?;
        Ok(DelayLine::new(self.topology.link(theirs, self.region), seed))
    }
}

/// When each message of one directed link is handed on.
pub(crate) struct DelayLine {
    link: Link,
    jitter: SplitMix64,
    /// When the link has finished carrying the messages before: bandwidth is a capacity, so a large message
    /// delays those behind it.
    busy_until: Option<Instant>,
    /// When the message before is handed on: none overtakes it.
    last_due: Option<Instant>,
}

impl DelayLine {
    fn new(link: Link, seed: u64) -> DelayLine {
        DelayLine { link, jitter: SplitMix64::new(seed), busy_until: None, last_due: None }
    }

    /// When a message of `bytes` bytes that arrived at `now` is handed on.
    pub(crate) fn due(&mut self, now: Instant, bytes: usize) -> Instant {
        let start = self.busy_until.map_or(now, |b| b.max(now));
        let carried = start + self.link.bandwidth_mbps.map_or(Duration::ZERO, |mbps| transfer(bytes, mbps));
        self.busy_until = Some(carried);
        let due = carried + self.one_way();
        let due = self.last_due.map_or(due, |last| last.max(due));
        self.last_due = Some(due);
        due
    }

    /// Half the round trip, plus or minus up to the jitter, drawn uniformly per message.
    fn one_way(&mut self) -> Duration {
        let half = self.link.rtt_ms / 2.0;
        let spread = (self.jitter.below(2_001) as f64 / 1_000.0 - 1.0) * self.link.jitter_ms;
        Duration::from_secs_f64((half + spread).max(0.0) / 1_000.0)
    }
}

/// How long `bytes` take at `mbps` megabits per second.
fn transfer(bytes: usize, mbps: f64) -> Duration {
    Duration::from_secs_f64(bytes as f64 * 8.0 / (mbps * 1_000_000.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wan(region: &str) -> Wan {
        let text = r#"
            [[region]]
            name = "eu"
            [[region]]
            name = "us"
            [[link]]
            between = ["eu", "us"]
            rtt_ms = 80
            bandwidth_mbps = 8
            jitter_ms = 10
        "#;
        Wan::new(Arc::new(Topology::parse(text, "two").unwrap()), region).unwrap()
    }

    #[test]
    fn a_region_outside_the_topology_is_named_in_the_error() {
        let topology = wan("eu").topology;
        let err = Wan::new(topology, "asia").unwrap_err().to_string();
        assert!(err.contains("'asia' is not in the --wan topology two (its regions: eu, us)"), "{err}");
        assert!(matches!(wan("eu").line_from("sa", 1), Err(Refusal::RegionNotInWan(r)) if r == "sa"));
    }

    #[test]
    fn messages_wait_half_the_round_trip_give_or_take_the_jitter_and_stay_in_order() {
        let mut line = wan("eu").line_from("us", 7).unwrap();
        let start = Instant::now();
        let mut last = start;
        for i in 0..200u64 {
            let now = start + Duration::from_millis(i * 50);
            let due = line.due(now, 100);
            let waited = due - now;
            assert!(due >= last, "message {i} overtook the one before");
            assert!(waited >= Duration::from_millis(30) && waited <= Duration::from_millis(51), "{waited:?}");
            last = due;
        }
    }

    #[test]
    fn a_large_message_holds_up_the_ones_behind_it() {
        let mut line = wan("eu").line_from("us", 7).unwrap();
        let now = Instant::now();
        // 1 MB at 8 Mb/s takes a second to carry; the small message behind it waits for that.
        let big = line.due(now, 1_000_000);
        let small = line.due(now, 10);
        assert!(big - now >= Duration::from_millis(1_030), "{:?}", big - now);
        assert!(small - now >= Duration::from_millis(1_030), "{:?}", small - now);
        let within = wan("eu").line_from("eu", 7).unwrap().due(now, 1_000_000) - now;
        assert!(within < Duration::from_millis(1), "no bandwidth limit within a region: {within:?}");
    }
}
