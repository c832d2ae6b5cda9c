//! Seed 003 §4.2's join experiment in the simulator: a cluster at full load on reads, a node joins, and the
//! throughput of every node is watched before and while it does. The seed (20 nodes, R = 3) saw the three
//! pre-copying nodes lose a third of their throughput and the others none; Meridian's claim is that nodes not
//! involved in the join keep at least 90% of their steady throughput and the involved ones lose what the
//! migration bandwidth cap allows.
//!
//! Nodes get a finite processor ([`CostModel`]): a node's throughput is what its processor allows, and the
//! join's copying takes its share of the processor of the nodes it copies from. Each node has its own closed-
//! loop clients, reading keys whose tail it is when the load starts; like routing-aware clients, they send each
//! read to the current tail of its key's chain (as of the newest map, looked up every sampling period), so a
//! slow node slows only the clients of its keys. A node's throughput is the reads it answers as a tail. As in the seed,
//! each node has one virtual id, so a join changes only the chains of the joiner's ring neighbours. A node is
//! involved if it was or became a member of a chain the join changed; it is a pre-copy source while it is the
//! tail of a chain the joiner copies. A source's throughput is taken over the time it is one; once chains have
//! moved to the joiner, the nodes that gave them up serve less because they hold less, which is the join's
//! purpose, not its cost.

use crate::net::{NetParams, Network, Placement};
use crate::protocols;
use crate::rng::SimRng;
use crate::run::node_ids;
use crate::workload::ClientEvent;
use crate::world::{CostModel, DiskParams, Event, World};
use bytes::Bytes;
use meridian_core::ring::key_token;
use meridian_core::{ConfigError, KeyspaceId, NodeId, Read, Reply, Request, Write};
use meridian_proto::map::placement::chain_for_token;
use meridian_proto::map::{ChainChange, ClusterMap, NodeState};
use meridian_proto::node::{ClusterNode, NodeConfig, NodeTimer};
use meridian_store::LogOptions;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// The client id the experiment's own periodic events use (clients are numbered from 0).
const SAMPLE: usize = usize::MAX - 1;
/// How often throughput and the pre-copy sources are sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

#[derive(Clone, Debug)]
pub struct JoinExperiment {
    pub seed: u64,
    /// Nodes before the join; one more joins.
    pub nodes: usize,
    pub keys: usize,
    pub value_bytes: usize,
    /// Closed-loop readers per node.
    pub clients_per_node: usize,
    /// Load before the join, and the longest the join may take.
    pub steady: Duration,
    pub join_limit: Duration,
    pub cost: CostModel,
    pub node: NodeConfig,
}

impl Default for JoinExperiment {
    fn default() -> Self {
        let mut node = NodeConfig { partitions: 64, ..NodeConfig::default() };
        node.protocols.chain.migration_bandwidth = 2_000_000;
        JoinExperiment {
            seed: 1,
            nodes: 12,
            keys: 50_000,
            value_bytes: 1024,
            clients_per_node: 8,
            steady: Duration::from_secs(10),
            join_limit: Duration::from_secs(120),
            // A modest processor, like the seed's: 100 µs per message and 100 MB/s of copying, so a node serves a
            // few thousand reads per second and a copy at the cap is a visible but bounded share of its work.
            cost: CostModel { per_input: Duration::from_micros(100), per_byte: Duration::from_nanos(10), queued: None },
            node,
        }
    }
}

/// One node's reads per second before and during the join.
#[derive(Clone, Debug)]
pub struct NodeThroughput {
    pub node: NodeId,
    /// Was or became a member of a chain the join changed.
    pub involved: bool,
    /// Over the five seconds before the join.
    pub steady: f64,
    /// From the join's start until it settled.
    pub during: f64,
    /// The share of its processor that copies took while the node was a pre-copy source, if it was one.
    pub copy_share: Option<f64>,
}

#[derive(Clone, Debug)]
pub struct JoinReport {
    pub nodes: Vec<NodeThroughput>,
    /// When the join began and settled, seconds into the measured load.
    pub join_at: f64,
    pub settled_at: Option<f64>,
    /// Reads per second each node answered, each second of the load.
    pub series: BTreeMap<NodeId, Vec<f64>>,
    /// Bytes of log the joiner holds at the end (what it copied, and what it logged since).
    pub joiner_log_bytes: u64,
}

/// What one sample saw: reads answered by each node as a tail since the previous sample, and the pre-copy
/// sources at that moment.
struct Sample {
    at: u64,
    served: BTreeMap<NodeId, u64>,
    /// Processor time each node spent on copies since the previous sample.
    copying: BTreeMap<NodeId, Duration>,
    sources: BTreeSet<NodeId>,
}

struct Run {
    world: World<ClusterNode>,
    rng: SimRng,
    keys: Vec<String>,
    joiner: NodeId,
    /// Per client: the node whose keys it reads, and those keys.
    clients: Vec<(NodeId, Vec<usize>)>,
    /// The newest map, for routing reads to the current tail.
    route: Option<Arc<ClusterMap>>,
    counts: BTreeMap<NodeId, u64>,
    copy_work: BTreeMap<NodeId, Duration>,
    samples: Vec<Sample>,
    /// The map when the join began.
    before: Option<ClusterMap>,
    settled_at: Option<u64>,
    next_op: usize,
}

/// Why a join experiment ended without a report.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The experiment's settings make no valid cluster.
    #[error(transparent)]
    Cluster(#[from] ConfigError),
    /// The simulated world failed (a broken invariant).
    #[error("{0}")]
    World(String),
    #[error("the preload did not finish within 60 s")]
    Preload,
    #[error("no cluster map after the preload")]
    NoMap,
}

pub fn run(x: &JoinExperiment) -> Result<JoinReport, JoinError> {
    let ids = node_ids(x.nodes + 1);
    let initial = protocols::cluster(x.nodes, &meridian_core::KeyspaceConfig::durable(3), 1)?;
    let mut hooks =
        protocols::chain(initial, x.node.clone(), LogOptions::default(), Default::default(), Default::default());
    // Correctness is the sweeps' job; here the per-step checks would only slow the run.
    hooks.invariants = Box::new(|_| Ok(()));
    let root = SimRng::new(x.seed);
    let placements = ids.iter().map(|&id| (id, Placement { region: 0, zone: 0 })).collect();
    let net = Network::new(lan(), placements, root.derive("net"));
    let disk = DiskParams { fsync_min: Duration::from_micros(100), fsync_max: Duration::from_micros(200) };
    let mut world = World::new(&ids, net, disk, root.derive("world"), hooks);
    world.set_cost(x.cost);
    ids[..x.nodes].iter().for_each(|&id| world.boot(id));
    let keys = (0..x.keys).map(|i| format!("key{i}")).collect();
    let mut run = Run {
        world,
        rng: root.derive("clients"),
        keys,
        joiner: ids[x.nodes],
        clients: Vec::new(),
        route: None,
        counts: BTreeMap::new(),
        copy_work: BTreeMap::new(),
        samples: Vec::new(),
        before: None,
        settled_at: None,
        next_op: 0,
    };
    run.preload(x)?;
    run.measure(x)
}

/// One zone of a data center: 100 µs between nodes, 10 Gbit/s.
fn lan() -> NetParams {
    let zone = Duration::from_micros(100);
    NetParams {
        same_zone: zone,
        same_region: zone,
        cross_region: zone,
        jitter: 0.1,
        bytes_per_sec: 1_250_000_000,
        topology: None,
    }
}

fn write(key: &str, value: &Bytes) -> Request {
    Request::Write(Write::put(KeyspaceId::DEFAULT, Bytes::from(key.to_string()), value.clone()))
}

impl Run {
    /// Writes every key once, 64 writes at a time, through node 1; a write refused while the cluster is still
    /// starting (no map yet) is written again.
    fn preload(&mut self, x: &JoinExperiment) -> Result<(), JoinError> {
        let value = Bytes::from(vec![b'v'; x.value_bytes]);
        let deadline = self.world.now() + Duration::from_secs(60).as_nanos() as u64;
        let (mut next, mut outstanding) = (0usize, 0usize);
        while next < self.keys.len() || outstanding > 0 {
            while outstanding < 64 && next < self.keys.len() {
                self.world.client_send(next, next, NodeId(1), write(&self.keys[next], &value));
                (next, outstanding) = (next + 1, outstanding + 1);
            }
            match self.step(deadline)? {
                Some(Event::Response { client, reply, .. }) => {
                    if matches!(reply, Reply::Written { .. }) {
                        outstanding -= 1;
                    } else {
                        self.world.client_send(client, client, NodeId(1), write(&self.keys[client], &value));
                    }
                }
                Some(_) => {}
                None => return Err(JoinError::Preload),
            }
        }
        Ok(())
    }

    /// The next event the world does not handle itself; None once `deadline` passes.
    fn step(&mut self, deadline: u64) -> Result<Option<Event<NodeTimer>>, JoinError> {
        loop {
            let Some(event) = self.world.pop(deadline) else { return Ok(None) };
            if let Some(failure) = &self.world.failure {
                return Err(JoinError::World(failure.clone()));
            }
            if let Some(other) = self.world.handle(event) {
                return Ok(Some(other));
            }
        }
    }

    fn map(&self) -> Option<ClusterMap> {
        self.newest().map(|m| (*m).clone())
    }

    fn newest(&self) -> Option<Arc<ClusterMap>> {
        self.world.procs().filter_map(|(_, p)| p.map()).max_by_key(|m| m.epoch).cloned()
    }

    /// Gives every node `clients_per_node` clients, each reading the keys whose chain that node is the tail of.
    fn assign_clients(&mut self, x: &JoinExperiment, map: &ClusterMap) {
        let mut by_tail: BTreeMap<NodeId, Vec<usize>> = BTreeMap::new();
        for (i, key) in self.keys.iter().enumerate() {
            let chain = chain_for_token(KeyspaceId::DEFAULT, key_token(key.as_bytes()), map.partitions);
            if let Some(tail) = map.chains[&chain].tail() {
                by_tail.entry(tail).or_default().push(i);
            }
        }
        for (node, keys) in by_tail {
            (0..x.clients_per_node).for_each(|_| self.clients.push((node, keys.clone())));
        }
    }

    fn read(&mut self, client: usize) {
        let (node, keys) = &self.clients[client];
        let key = &self.keys[keys[self.rng.index(keys.len())]];
        let map = self.route.as_ref().expect("routing starts with the load");
        let tail = map.chains[&chain_for_token(KeyspaceId::DEFAULT, key_token(key.as_bytes()), map.partitions)]
            .tail()
            .unwrap_or(*node);
        self.next_op += 1;
        self.world.client_send(
            client,
            self.next_op,
            tail,
            Request::Get { keyspace: KeyspaceId::DEFAULT, key: Bytes::from(key.clone()), read: Read::Value },
        );
    }

    fn measure(&mut self, x: &JoinExperiment) -> Result<JoinReport, JoinError> {
        let map = self.map().ok_or(JoinError::NoMap)?;
        self.assign_clients(x, &map);
        self.route = self.newest();
        let start = self.world.now();
        (0..self.clients.len()).for_each(|c| self.read(c));
        self.sample();
        let every = SAMPLE_EVERY.as_nanos() as u64;
        self.world.schedule(start + every, Event::Client(ClientEvent::Next { client: SAMPLE }));
        let join_at = start + x.steady.as_nanos() as u64;
        let deadline = join_at + x.join_limit.as_nanos() as u64;
        while let Some(event) = self.step(deadline)? {
            match event {
                Event::Response { client, .. } if client < self.clients.len() => self.read(client),
                Event::Client(ClientEvent::Next { client: SAMPLE }) => {
                    if self.before.is_none() && self.world.now() >= join_at {
                        self.before = self.map();
                        self.world.boot(self.joiner);
                    }
                    self.sample();
                    if self.settled_at.is_some_and(|t| self.world.now() >= t + 5_000_000_000) {
                        break;
                    }
                    self.world.schedule(self.world.now() + every, Event::Client(ClientEvent::Next { client: SAMPLE }));
                }
                _ => {}
            }
        }
        Ok(self.report(x, start, join_at))
    }

    /// Records the reads each node answered since the last sample and who is a pre-copy source now; notes
    /// when the joiner is active with no step left in flight.
    fn sample(&mut self) {
        self.route = self.newest().or(self.route.take());
        let counts: BTreeMap<NodeId, u64> = self.world.procs().map(|(id, p)| (id, p.chain().stats().reads)).collect();
        let served =
            counts.iter().map(|(&id, &n)| (id, n.saturating_sub(*self.counts.get(&id).unwrap_or(&n)))).collect();
        self.counts = counts;
        let work: BTreeMap<NodeId, Duration> =
            self.world.node_ids().into_iter().map(|id| (id, self.world.work(id, "copy"))).collect();
        let copying =
            work.iter().map(|(&id, &w)| (id, w.saturating_sub(*self.copy_work.get(&id).unwrap_or(&w)))).collect();
        self.copy_work = work;
        let map = self.map().filter(|_| self.before.is_some());
        let sources = map.iter().flat_map(|m| m.chains.values()).filter_map(|c| match c.change {
            Some(ChainChange::Add { node, inserted: false, .. }) if node == self.joiner => c.tail(),
            _ => None,
        });
        let sources = sources.collect();
        if let Some(m) = map.filter(|_| self.settled_at.is_none()) {
            let active = m.nodes.get(&self.joiner).is_some_and(|n| n.state == NodeState::Active);
            if active && m.chains.values().all(|c| c.change.is_none()) {
                self.settled_at = Some(self.world.now());
            }
        }
        self.samples.push(Sample { at: self.world.now(), served, copying, sources });
    }

    /// The nodes the join involved: members, before or after, of a chain it changed.
    fn involved(&self) -> BTreeSet<NodeId> {
        let (Some(before), Some(after)) = (&self.before, self.map()) else { return BTreeSet::new() };
        let changed = before.chains.iter().filter(|(id, old)| old.members != after.chains[*id].members);
        changed.flat_map(|(id, old)| old.members.iter().chain(&after.chains[id].members).copied()).collect()
    }

    /// Reads per second `node` answered over the samples that `pick` selects.
    fn rate(&self, node: NodeId, pick: impl Fn(&Sample) -> bool) -> Option<f64> {
        let picked: Vec<&Sample> = self.samples.iter().skip(1).filter(|s| pick(s)).collect();
        let reads: u64 = picked.iter().map(|s| s.served.get(&node).copied().unwrap_or(0)).sum();
        (!picked.is_empty()).then(|| reads as f64 / (picked.len() as f64 * SAMPLE_EVERY.as_secs_f64()))
    }

    /// The share of `node`'s processor that copies took over the samples in which it was a pre-copy source.
    fn copy_share(&self, node: NodeId) -> Option<f64> {
        let picked: Vec<&Sample> = self.samples.iter().skip(1).filter(|s| s.sources.contains(&node)).collect();
        let work: Duration = picked.iter().map(|s| s.copying.get(&node).copied().unwrap_or_default()).sum();
        (!picked.is_empty()).then(|| work.as_secs_f64() / (picked.len() as f64 * SAMPLE_EVERY.as_secs_f64()))
    }

    fn report(&self, x: &JoinExperiment, start: u64, join_at: u64) -> JoinReport {
        let settled = self.settled_at.unwrap_or(u64::MAX);
        let steady_from = join_at.saturating_sub(5_000_000_000).max(start);
        let involved = self.involved();
        let nodes = self.world.node_ids()[..x.nodes]
            .iter()
            .map(|&node| NodeThroughput {
                node,
                involved: involved.contains(&node),
                steady: self.rate(node, |s| s.at > steady_from && s.at <= join_at).unwrap_or(0.0),
                during: self.rate(node, |s| s.at > join_at && s.at <= settled).unwrap_or(0.0),
                copy_share: self.copy_share(node),
            })
            .collect();
        let secs = |t: u64| t.saturating_sub(start) as f64 / 1e9;
        let per_second = (1.0 / SAMPLE_EVERY.as_secs_f64()).round() as usize;
        let series = self.world.node_ids().iter().map(|&id| (id, self.per_second(id, per_second))).collect();
        let joiner_log_bytes =
            self.world.procs().find(|(id, _)| *id == self.joiner).map_or(0, |(_, p)| p.store_stats().log_bytes);
        JoinReport { nodes, join_at: secs(join_at), settled_at: self.settled_at.map(secs), series, joiner_log_bytes }
    }

    /// `node`'s reads per second, one value per second of the load.
    fn per_second(&self, node: NodeId, samples_per_second: usize) -> Vec<f64> {
        let served: Vec<u64> = self.samples.iter().skip(1).map(|s| s.served.get(&node).copied().unwrap_or(0)).collect();
        served.chunks_exact(samples_per_second).map(|c| c.iter().sum::<u64>() as f64).collect()
    }
}

impl JoinReport {
    /// The report as a table, with the claim it checks.
    pub fn table(&self, x: &JoinExperiment) -> String {
        let mut out = format!(
            "join experiment (seed 003 §4.2): {} nodes + 1 joining, R = 3, {} partitions, {} keys of {} B, {} readers per node\n",
            x.nodes, x.node.partitions, x.keys, x.value_bytes, x.clients_per_node
        );
        out += &format!(
            "each node: {:?} per message + {:?} per byte; migration cap {} MB/s per chain copied\n",
            x.cost.per_input,
            x.cost.per_byte,
            x.node.protocols.chain.migration_bandwidth / 1_000_000
        );
        let settled = self
            .settled_at
            .map_or("did not settle".into(), |t| format!("settled at {t:.0} s ({:.0} s)", t - self.join_at));
        out += &format!(
            "join started at {:.0} s, {settled}; the joiner logged {} MB\n",
            self.join_at,
            self.joiner_log_bytes / 1_000_000
        );
        out += "node  role      steady reads/s  during join  ratio  copying while a source\n";
        for n in &self.nodes {
            let role = if n.copy_share.is_some() {
                "source"
            } else if n.involved {
                "involved"
            } else {
                "-"
            };
            let ratio = if n.steady > 0.0 { n.during / n.steady } else { 0.0 };
            let share = n.copy_share.map_or(String::new(), |c| format!("{:>21.1}%", c * 100.0));
            out += &format!(
                "{:<5} {role:<9} {:>14.0} {:>12.0} {ratio:>6.2} {share}\n",
                n.node.to_string(),
                n.steady,
                n.during
            );
        }
        let not_involved = self.nodes.iter().filter(|n| !n.involved && n.steady > 0.0).map(|n| n.during / n.steady);
        let copies = x.node.manager.limits.copies_per_node as f64;
        let bound = x.cost.per_byte.as_secs_f64() * x.node.protocols.chain.migration_bandwidth as f64 * copies;
        let busiest = self.nodes.iter().filter_map(|n| n.copy_share).fold(0.0, f64::max);
        out += &format!(
            "nodes not involved: lowest ratio {:.2} during the join (claim: at least 0.90)\n",
            not_involved.fold(f64::INFINITY, f64::min)
        );
        out += &format!(
            "pre-copy sources: copies took at most {:.1}% of a source's processor; the cap bounds it to {:.1}% \
             ({copies} copies at {} MB/s, {:?} per byte copied)\n",
            busiest * 100.0,
            bound * 100.0,
            x.node.protocols.chain.migration_bandwidth / 1_000_000,
            x.cost.per_byte
        );
        out
    }

    /// Reads per second of every node over the run, as an SVG line chart, with the join marked.
    pub fn svg(&self) -> String {
        let (w, h, pad) = (720.0, 360.0, 40.0);
        let len = self.series.values().map(Vec::len).max().unwrap_or(1).max(2) as f64;
        let top = self.series.values().flatten().copied().fold(1.0, f64::max) * 1.1;
        let x = |i: f64| pad + i / (len - 1.0) * (w - 2.0 * pad);
        let y = |v: f64| h - pad - v / top * (h - 2.0 * pad);
        let mut out = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n");
        out += &format!("<text x=\"{pad}\" y=\"20\">reads/s per node; the join starts at the dashed line</text>\n");
        let jx = x(self.join_at);
        out += &format!(
            "<line x1=\"{jx}\" y1=\"{pad}\" x2=\"{jx}\" y2=\"{}\" stroke=\"gray\" stroke-dasharray=\"4\"/>\n",
            h - pad
        );
        let colors = [
            "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
            "#17becf",
        ];
        for (k, (node, series)) in self.series.iter().enumerate() {
            let points: Vec<String> =
                series.iter().enumerate().map(|(i, v)| format!("{:.1},{:.1}", x(i as f64), y(*v))).collect();
            let color = colors[k % colors.len()];
            out += &format!("<polyline fill=\"none\" stroke=\"{color}\" points=\"{}\"/>\n", points.join(" "));
            out += &format!(
                "<text x=\"{}\" y=\"{}\" fill=\"{color}\">{node}</text>\n",
                w - pad + 4.0,
                40.0 + 14.0 * k as f64
            );
        }
        out + "</svg>\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small join: the nodes it does not involve keep their throughput, and copying takes no more of a
    /// source's processor than the cap allows.
    #[test]
    fn a_join_leaves_uninvolved_nodes_alone_and_copies_within_the_cap() {
        let x = JoinExperiment { nodes: 8, keys: 8_000, steady: Duration::from_secs(4), ..JoinExperiment::default() };
        let report = run(&x).unwrap();
        assert!(report.settled_at.is_some(), "{}", report.table(&x));
        let uninvolved: Vec<&NodeThroughput> = report.nodes.iter().filter(|n| !n.involved).collect();
        assert!(!uninvolved.is_empty(), "{}", report.table(&x));
        assert!(uninvolved.iter().all(|n| n.during >= 0.9 * n.steady), "{}", report.table(&x));
        let bound = x.cost.per_byte.as_secs_f64() * x.node.protocols.chain.migration_bandwidth as f64 * 3.0;
        let shares: Vec<f64> = report.nodes.iter().filter_map(|n| n.copy_share).collect();
        assert!(!shares.is_empty() && shares.iter().all(|&s| s > 0.0 && s <= bound * 1.05), "{}", report.table(&x));
    }
}
