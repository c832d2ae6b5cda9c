//! What the bench reads from a node's `GET /v1/cluster` and what it makes of a run of such reads: the
//! node's reads/s over a window of its samples, which nodes a join copies from, and whether it has settled.

use crate::local::{Change, MapView};
use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The part of a node's `status` the bench uses.
#[derive(Clone, Debug, Deserialize)]
pub(super) struct Status {
    /// Reads this node answered as a tail, since it started.
    pub served: Served,
    #[serde(flatten)]
    pub map: MapView,
    /// This node's replicas; on a joiner they carry the copies in progress.
    pub replicas: Vec<Replica>,
}

#[derive(Clone, Copy, Debug, Deserialize)]
pub(super) struct Served {
    pub reads: u64,
}

#[derive(Clone, Debug, Deserialize)]
pub(super) struct Replica {
    pub chain: u32,
    pub copy: Option<CopyProgress>,
}

#[derive(Clone, Debug, Deserialize)]
pub(super) struct CopyProgress {
    pub kind: String,
    /// The node copied from.
    pub source: u32,
    pub bytes: u64,
}

impl Status {
    /// The `status` of a `/v1/cluster` answer.
    pub(super) fn parse(cluster: &Value) -> Result<Status, String> {
        Status::deserialize(&cluster["status"]).map_err(|e| format!("unexpected /v1/cluster: {e}"))
    }
}

impl MapView {
    /// The nodes copying into a joiner right now: the tail of a chain whose Add is pre-copying, the
    /// joiner's successor once it is inserted and flushes.
    pub(super) fn copy_sources(&self) -> BTreeSet<u32> {
        let mut sources = BTreeSet::new();
        for c in &self.chains {
            let Some(Change { add: Some(joiner), inserted }) = c.change else { continue };
            let source = match inserted {
                false => c.members.last(),
                true => c.members.iter().position(|&m| m == joiner).and_then(|i| c.members.get(i + 1)),
            };
            sources.extend(source);
        }
        sources
    }

    /// The join of `joiner` is over: it is ACTIVE (it holds every chain it should) and no chain has a step
    /// in flight (the surplus members have been removed too).
    pub(super) fn settled(&self, joiner: u32) -> bool {
        self.nodes.iter().any(|n| n.id == joiner && n.state == "ACTIVE")
            && self.chains.iter().all(|c| c.change.is_none())
    }

    /// The chains `joiner` is a member of.
    pub(super) fn chains_of(&self, joiner: u32) -> BTreeSet<u32> {
        self.chains.iter().filter(|c| c.members.contains(&joiner)).map(|c| c.id).collect()
    }
}

/// The nodes a join pre-copied from, even those of steps that began and ended between two samples: the
/// tail, before the join, of every chain the joiner is a member of after it.
pub(super) fn precopy_sources(before: &MapView, after: &MapView, joiner: u32) -> BTreeSet<u32> {
    after.chains_of(joiner).iter().filter_map(|&c| before.chains.get(c as usize)?.members.last().copied()).collect()
}

/// One sample of one node: the sampling round (one per second), when it was read (seconds since the load
/// started), its read counter, the CPU seconds its process has used, and whether it led the manager.
#[derive(Clone, Copy, Debug)]
pub(super) struct Point {
    pub round: u32,
    pub at: f64,
    pub reads: u64,
    pub cpu_s: Option<f64>,
    pub leader: bool,
}

/// A node's samples, in order.
#[derive(Clone, Debug, Default)]
pub(super) struct Series(pub Vec<Point>);

impl Series {
    /// The samples of rounds `from..=to` (the first and last this node has in that range).
    fn window(&self, from: u32, to: u32) -> Option<(&Point, &Point)> {
        let first = self.0.iter().find(|p| p.round >= from)?;
        let last = self.0.iter().rev().find(|p| p.round <= to)?;
        (last.at > first.at).then_some((first, last))
    }

    /// Reads per second over rounds `from..=to`: the counter's growth over the time between the samples, which
    /// is the mean of the per-second rates weighted by how long each second really was.
    pub(super) fn rate(&self, from: u32, to: u32) -> Option<f64> {
        let (first, last) = self.window(from, to)?;
        Some(last.reads.saturating_sub(first.reads) as f64 / (last.at - first.at))
    }

    /// The standard deviation of the per-second rates over rounds `from..=to`: how steady "steady" was.
    pub(super) fn spread(&self, from: u32, to: u32) -> Option<f64> {
        let (first, last) = self.window(from, to)?;
        let inside = Series(self.0.iter().filter(|p| p.at >= first.at && p.at <= last.at).copied().collect());
        let rates: Vec<f64> = inside.per_second().iter().map(|p| p.reads_per_s).collect();
        let mean = rates.iter().sum::<f64>() / rates.len() as f64;
        Some((rates.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / rates.len() as f64).sqrt())
    }

    /// Whether the node led the cluster manager in any sample of rounds `from..=to`.
    pub(super) fn led(&self, from: u32, to: u32) -> bool {
        self.0.iter().any(|p| p.round >= from && p.round <= to && p.leader)
    }

    /// The cores the node used over rounds `from..=to` (its quota when the load holds it there).
    pub(super) fn cores(&self, from: u32, to: u32) -> Option<f64> {
        let (first, last) = self.window(from, to)?;
        Some((last.cpu_s? - first.cpu_s?) / (last.at - first.at))
    }

    /// Reads per second and cores used between consecutive samples, stamped with the later one's time.
    pub(super) fn per_second(&self) -> Vec<PerSecond> {
        self.0
            .windows(2)
            .filter(|w| w[1].at > w[0].at)
            .map(|w| {
                let took = w[1].at - w[0].at;
                PerSecond {
                    at: w[1].at,
                    reads_per_s: w[1].reads.saturating_sub(w[0].reads) as f64 / took,
                    cores: w[1].cpu_s.zip(w[0].cpu_s).map(|(b, a)| (b - a) / took),
                }
            })
            .collect()
    }
}

/// One node's figures over the second before `at` (seconds since the load started).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct PerSecond {
    pub at: f64,
    pub reads_per_s: f64,
    pub cores: Option<f64>,
}

/// The most bytes seen copied per (chain, copy kind) on the joiner. A copy shows in the status only while it
/// runs (a pre-copy until its chain inserts the joiner), so the sum is a lower bound.
#[derive(Clone, Debug, Default)]
pub(super) struct CopiedSeen(BTreeMap<(u32, String), u64>);

impl CopiedSeen {
    pub(super) fn record(&mut self, replicas: &[Replica]) {
        for r in replicas {
            if let Some(c) = &r.copy {
                let seen = self.0.entry((r.chain, c.kind.clone())).or_default();
                *seen = (*seen).max(c.bytes);
            }
        }
    }

    pub(super) fn bytes(&self) -> u64 {
        self.0.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn point(round: u32, at: f64, reads: u64) -> Point {
        Point { round, at, reads, cpu_s: Some(at / 4.0), leader: round == 2 }
    }

    #[test]
    fn rates_are_counter_growth_over_the_time_between_samples() {
        let s = Series(vec![point(0, 0.0, 0), point(1, 1.0, 900), point(2, 2.5, 2400), point(3, 3.0, 2900)]);
        assert_eq!(s.rate(1, 3), Some(1000.0));
        assert_eq!(s.rate(0, 1), Some(900.0));
        // A window beyond the samples uses those it has; one sample or none gives no rate.
        assert_eq!(s.rate(2, 9), Some(1000.0));
        assert_eq!(s.rate(3, 3), None);
        assert_eq!(s.rate(5, 9), None);
        let rates: Vec<(f64, f64)> = s.per_second().iter().map(|p| (p.at, p.reads_per_s)).collect();
        assert_eq!(rates, vec![(1.0, 900.0), (2.5, 1000.0), (3.0, 1000.0)]);
        assert_eq!(s.cores(1, 3), Some(0.25));
        assert!(s.per_second().iter().all(|p| p.cores == Some(0.25)));
        assert_eq!(s.spread(1, 3), Some(0.0));
        assert_eq!(s.spread(0, 2), Some(50.0));
        assert!(s.led(1, 3) && !s.led(3, 3));
    }

    fn status(chains: Value, nodes: Value) -> Status {
        let v = json!({ "status": {
            "node": 1, "epoch": 7, "partitions": 4, "nodes": nodes, "chains": chains,
            "replicas": [{ "chain": 2, "role": "joiner", "copy": { "kind": "pre-copy", "source": 3, "rounds": 1, "bytes": 500 } }],
            "manager": { "voters": [1, 2, 3], "here": null, "leader_guess": 2 },
            "served": { "reads": 42, "writes": 1 },
        }});
        Status::parse(&v).unwrap()
    }

    fn chain(id: u32, members: &[u32], change: Value) -> Value {
        crate::local::map::tests::chain(id, 0, 1, members, change, &[], &vec!["log"; members.len()])
    }

    #[test]
    fn copy_sources_are_tails_while_pre_copying_and_successors_while_flushing() {
        let chains = json!([
            chain(0, &[1, 2, 3], json!({ "add": 5, "position": 2, "step": 9, "inserted": false })),
            chain(1, &[5, 2, 3, 4], json!({ "add": 5, "position": 0, "step": 10, "inserted": true })),
            chain(2, &[1, 2, 4], json!({ "remove": 1, "step": 11 })),
            chain(3, &[2, 3, 4], Value::Null),
        ]);
        let s = status(chains, json!([{ "id": 5, "state": "JOINING" }]));
        assert_eq!(s.served.reads, 42);
        assert_eq!(s.map.copy_sources(), BTreeSet::from([3, 2]));
        assert!(!s.map.settled(5));
        let mut seen = CopiedSeen::default();
        seen.record(&s.replicas);
        seen.record(&s.replicas);
        assert_eq!(seen.bytes(), 500);
    }

    #[test]
    fn a_join_settles_once_the_joiner_is_active_and_no_step_is_in_flight() {
        let nodes = json!([{ "id": 1, "state": "ACTIVE" }, { "id": 5, "state": "ACTIVE" }]);
        let quiet = json!([chain(0, &[1, 5, 2], Value::Null), chain(1, &[5, 2, 3], Value::Null)]);
        assert!(status(quiet.clone(), nodes.clone()).map.settled(5));
        let joining = json!([{ "id": 1, "state": "ACTIVE" }, { "id": 5, "state": "JOINING" }]);
        assert!(!status(quiet.clone(), joining).map.settled(5));
        let removing =
            json!([chain(0, &[1, 5, 2, 4], json!({ "remove": 4, "step": 3 })), chain(1, &[5, 2, 3], Value::Null)]);
        assert!(!status(removing, nodes).map.settled(5));

        // Before the join chain 0 was [1, 2, 4] and chain 1 [2, 3, 4]: the joiner pre-copied from 4 twice.
        let before = json!([chain(0, &[1, 2, 4], Value::Null), chain(1, &[2, 3, 4], Value::Null)]);
        let before = status(before, json!([]));
        let after = status(quiet, json!([]));
        assert_eq!(precopy_sources(&before.map, &after.map, 5), BTreeSet::from([4]));
    }
}
