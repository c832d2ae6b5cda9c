//! What the WAN experiments share: a fault-free cluster on a topology whose default keyspace is the setting
//! measured, node k in region k mod n as in the correctness runs, run to the next event a client sees; and the
//! latency samples they summarise.

use crate::net::Network;
use crate::protocols;
use crate::rng::SimRng;
use crate::run::{node_ids, RunOptions};
use crate::sweep::fit_timings;
use crate::world::{DiskParams, Event, World};
use bytes::Bytes;
use meridian_core::keyspace::KeyspaceError;
use meridian_core::placement::PlacementError;
use meridian_core::topology::Topology;
use meridian_core::{ConfigError, KeyspaceConfig, KeyspaceId, NodeId, Reply, Request, Write};
use meridian_proto::node::{ClusterNode, NodeConfig, NodeTimer};
use meridian_store::LogOptions;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Why a WAN experiment ended without a report; `setting` names the keyspace setting that was running.
#[derive(Debug, thiserror::Error)]
pub enum WanError {
    #[error(transparent)]
    Cluster(#[from] ConfigError),
    #[error(transparent)]
    Keyspace(#[from] KeyspaceError),
    #[error(transparent)]
    Placement(#[from] PlacementError),
    #[error("{setting}: {why}")]
    World { setting: String, why: String },
    #[error("{setting}: a node had no cluster map after the {warmup:?} warm-up")]
    NoMap { setting: String, warmup: Duration },
    #[error("{setting}: {left} of {keys} keys were not loaded within {limit:?}")]
    Load { setting: String, left: usize, keys: usize, limit: Duration },
}

pub struct WanCluster {
    pub world: World<ClusterNode>,
    /// The nodes of each region, by the topology's region index.
    pub by_region: Vec<Vec<NodeId>>,
    /// Affiliated nodes, not started: each joins as one of its host when [`World::boot`] starts it.
    pub affiliates: Vec<(NodeId, NodeId)>,
}

impl WanCluster {
    /// `nodes_per_region` nodes in each of `topology`'s regions, booted, with `keyspace` as the default keyspace
    /// and the manager's timings fitted to the topology's farthest round trip; and affiliated nodes of the
    /// `hosts` given, one per entry, each beside its host and not started.
    pub fn boot(
        seed: u64,
        topology: &Arc<Topology>,
        nodes_per_region: usize,
        hosts: &[NodeId],
        keyspace: &KeyspaceConfig,
    ) -> Result<WanCluster, ConfigError> {
        let regions = topology.regions().len();
        let nodes = regions * nodes_per_region.max(1);
        let mut opts = RunOptions::new(seed, Vec::new());
        opts.nodes = nodes;
        opts.topology = Some(topology.clone());
        let affiliates = node_ids(nodes + hosts.len()).split_off(nodes);
        let hosts: BTreeMap<NodeId, NodeId> = affiliates.into_iter().zip(hosts.iter().copied()).collect();
        let (params, mut placements) = crate::run::topology(&opts);
        crate::run::place_beside_hosts(&mut placements, &hosts);
        let locations = protocols::locations(Some(topology), &placements);
        let mut node = NodeConfig::default();
        fit_timings(&mut node, params.round_trip(&placements));
        let initial = protocols::cluster(nodes, keyspace, 4)?;
        let mut hooks = protocols::chain(initial, node, LogOptions::default(), locations, hosts.clone());
        // Correctness is the sweeps' job; here the per-step checks would only slow the run.
        hooks.invariants = Box::new(|_| Ok(()));
        let root = SimRng::new(seed);
        let ids = node_ids(nodes);
        let by_region = (0..regions)
            .map(|r| ids.iter().copied().filter(|id| placements[id].region as usize == r).collect())
            .collect();
        let net = Network::new(params, placements, root.derive("net"));
        let disk = DiskParams { fsync_min: Duration::from_micros(100), fsync_max: Duration::from_micros(500) };
        let every: Vec<NodeId> = ids.iter().copied().chain(hosts.keys().copied()).collect();
        let mut world = World::new(&every, net, disk, root.derive("world"), hooks);
        ids.iter().for_each(|&id| world.boot(id));
        Ok(WanCluster { world, by_region, affiliates: hosts.into_iter().collect() })
    }

    /// Runs the world to the next event that leaves it (an answer to a client, a client's own event); None
    /// once `until` passes.
    pub fn step(&mut self, until: u64) -> Result<Option<Event<NodeTimer>>, String> {
        while let Some(event) = self.world.pop(until) {
            let escaped = self.world.handle(event);
            if let Some(failure) = self.world.failure.take() {
                return Err(failure);
            }
            if escaped.is_some() {
                return Ok(escaped);
            }
        }
        Ok(None)
    }

    /// Writes keys `0..keys` ([`key`]) once each with `value` through `node`, as client `client`, [`LOADERS`] at a
    /// time; `setting` names what runs, for the error.
    pub fn preload(
        &mut self,
        node: NodeId,
        keys: usize,
        value: &Bytes,
        client: usize,
        setting: &str,
    ) -> Result<(), WanError> {
        let fail = |why| WanError::World { setting: setting.to_string(), why };
        let limit = self.world.now() + ns(LOAD_LIMIT);
        let (mut next, mut acked) = (0, 0);
        while acked < keys {
            while next < keys && next - acked < LOADERS {
                let req = Request::Write(Write::put(KeyspaceId::DEFAULT, key(next), value.clone()));
                self.world.client_send(client, next, node, req);
                next += 1;
            }
            match self.step(limit).map_err(fail)? {
                Some(Event::Response { reply: Reply::Error(_, why), .. }) => return Err(fail(why)),
                Some(Event::Response { .. }) => acked += 1,
                Some(_) => {}
                None => {
                    let (setting, left) = (setting.to_string(), keys - acked);
                    return Err(WanError::Load { setting, left, keys, limit: LOAD_LIMIT });
                }
            }
        }
        Ok(())
    }

    /// Whether every node has a cluster map, so that it routes requests.
    pub fn mapped(&self) -> bool {
        self.world.procs().all(|(_, p)| p.map().is_some())
    }

    /// The sum over live nodes of one protocol counter (e.g. "lease renewals").
    pub fn counter(&self, name: &str) -> u64 {
        self.counter_of(|_| true, name)
    }

    /// The sum over live nodes of one protocol gauge (e.g. "lease keys awaiting a commit").
    pub fn gauge(&self, name: &str) -> u64 {
        let gauges = self.world.procs().flat_map(|(_, p)| p.protocols().gauges());
        gauges.filter(|(n, _)| *n == name).map(|(_, v)| v).sum()
    }

    /// The sum of one protocol counter over the live nodes `which` picks.
    pub fn counter_of(&self, which: impl Fn(NodeId) -> bool, name: &str) -> u64 {
        let counters = self.world.procs().filter(|(id, _)| which(*id)).flat_map(|(_, p)| p.protocols().counters());
        counters.filter(|(n, _)| *n == name).map(|(_, v)| v).sum()
    }
}

/// Writes outstanding at once while the keys are loaded.
const LOADERS: usize = 100;
/// How long the loading may take, and the answers to the last requests of the load.
const LOAD_LIMIT: Duration = Duration::from_secs(300);

/// The key of popularity rank `k` (0 the most popular); the ring hashes keys, so popular ones spread over
/// partitions.
pub fn key(k: usize) -> Bytes {
    Bytes::from(format!("user{k}"))
}

pub fn ns(d: Duration) -> u64 {
    d.as_nanos() as u64
}

/// Latencies of some operations, sorted.
#[derive(Clone, Debug, Default)]
pub struct Samples(Vec<Duration>);

impl Samples {
    pub fn of(mut samples: Vec<Duration>) -> Samples {
        samples.sort_unstable();
        Samples(samples)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The latency `q` of the samples stay within (nearest rank); zero without samples.
    pub fn quantile(&self, q: f64) -> Duration {
        let rank = (q * self.0.len() as f64).ceil() as usize;
        self.0.get(rank.clamp(1, self.0.len().max(1)) - 1).copied().unwrap_or_default()
    }

    /// The share of samples above `limit`; zero without samples.
    pub fn share_above(&self, limit: Duration) -> f64 {
        let above = self.0.len() - self.0.partition_point(|&d| d <= limit);
        above as f64 / self.0.len().max(1) as f64
    }

    /// The samples of every set, in one.
    pub fn merged<'a>(all: impl IntoIterator<Item = &'a Samples>) -> Samples {
        Samples::of(all.into_iter().flat_map(|s| s.0.iter().copied()).collect())
    }
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_shares_count_by_rank() {
        let s = Samples::of((1..=100).rev().map(Duration::from_millis).collect());
        assert_eq!(s.quantile(0.5), Duration::from_millis(50));
        assert_eq!(s.quantile(0.99), Duration::from_millis(99));
        assert_eq!(s.quantile(1.0), Duration::from_millis(100));
        assert_eq!(s.share_above(Duration::from_millis(90)), 0.1);
        assert_eq!(Samples::default().quantile(0.5), Duration::ZERO);
        assert_eq!(Samples::default().share_above(Duration::ZERO), 0.0);
    }
}
