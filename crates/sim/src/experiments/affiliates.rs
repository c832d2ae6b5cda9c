//! GlobLease's elasticity with affiliated nodes (seed 001 §4.1.5, "Elasticity with Spiky and Skewed Workload",
//! Fig. 4.10): a read-only load over Zipf-4 keys jumps from 400 to 1,800 requests per second; affiliated nodes,
//! started at the jump, take the hottest keys off the nodes that hold them, and read latency is back under the
//! SLO within seconds. The same run without them is the baseline: the nodes holding the hot keys stay overloaded.
//!
//! Nodes have finite processors here (the simulator's [`CostModel`]): every input costs a node `per_input`, and
//! what arrives while it is busy waits. Clients talk to the standard nodes of their region in turn, so a read of
//! a key goes to whichever node the client talks to and on to the key's replica in that region: under Zipf 4,
//! nine reads in ten go to the one node of each region holding the hottest key. Latency is measured per window
//! of sent time.

use super::wan::{key, ms, ns, Samples, WanCluster, WanError};
use crate::rng::SimRng;
use crate::workload::ClientEvent;
use crate::world::{CostModel, Event};
use bytes::Bytes;
use meridian_core::topology::Topology;
use meridian_core::{KeyspaceConfig, KeyspaceId, NodeId, Placement, Protocol, ProtocolConfig, Read, Reply, Request};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct AffiliatesExperiment {
    pub seed: u64,
    pub topology: Arc<Topology>,
    /// Standard nodes per region: a partition has one replica in each region, so the others are the front ends
    /// of its reads there.
    pub nodes_per_region: usize,
    /// Affiliated nodes each replica of the hottest key gets at the jump (one replica per region).
    pub affiliates_per_host: usize,
    pub clients: usize,
    pub keys: usize,
    pub value_bytes: usize,
    /// The Zipf law's exponent over the keys' popularity ranks.
    pub zipf: f64,
    /// Requests per second of all clients together, before the jump and after it.
    pub before: f64,
    pub after: f64,
    /// Load before the jump, and measured after it.
    pub steady: Duration,
    pub measure: Duration,
    pub cost: CostModel,
    /// The latency objective: a window meets it if its p99 read latency is within it and none failed.
    pub slo: Duration,
    pub window: Duration,
}

impl AffiliatesExperiment {
    /// The seed's run on `topology`: 400 -> 1,800 req/s of reads over Zipf-4 keys, 50 clients, 10 KB values,
    /// two affiliated nodes for each replica of the hottest key (the seed had six in three regions, for the
    /// most popular tenth of the keys, which under Zipf 4 is the first key's 92% of the reads and then some). A
    /// node spends 0.5 ms per input and 300 ns per byte it sends or receives: 3 ms for a 10 KB value.
    pub fn new(seed: u64, topology: Arc<Topology>) -> AffiliatesExperiment {
        AffiliatesExperiment {
            seed,
            topology,
            nodes_per_region: 5,
            affiliates_per_host: 2,
            clients: 50,
            keys: 1_000,
            value_bytes: 10 * 1024,
            zipf: 4.0,
            before: 400.0,
            after: 1_800.0,
            steady: Duration::from_secs(20),
            measure: Duration::from_secs(30),
            cost: CostModel {
                per_input: Duration::from_micros(500),
                per_byte: Duration::from_nanos(300),
                queued: Some(&["forward"]),
            },
            slo: Duration::from_millis(100),
            window: Duration::from_secs(1),
        }
    }

    fn keyspace(&self) -> Result<KeyspaceConfig, WanError> {
        let names: Vec<&str> = self.topology.regions().iter().map(|r| r.name.as_str()).collect();
        let protocol = ProtocolConfig::default_for(Protocol::Lease);
        let placement = Placement::one_in_each(&names.join(","))?;
        Ok(KeyspaceConfig { protocol, placement, ..KeyspaceConfig::durable(names.len()) })
    }
}

/// One window of sent time: the reads sent in it that succeeded, and those that did not.
#[derive(Clone, Debug, Default)]
pub struct Window {
    pub reads: Samples,
    pub failed: usize,
}

#[derive(Clone, Debug)]
pub struct ElasticRun {
    pub name: String,
    /// Windows from the start of the load; the jump is at window `steady / window`.
    pub windows: Vec<Window>,
    /// Reads the affiliated nodes answered.
    pub affiliate_reads: u64,
}

impl ElasticRun {
    /// How long after the jump every later window met the SLO, if they all did from some window on.
    pub fn recovered(&self, x: &AffiliatesExperiment) -> Option<Duration> {
        let jump = (x.steady.as_nanos() / x.window.as_nanos()) as usize;
        let meets = |w: &Window| w.failed == 0 && !w.reads.is_empty() && w.reads.quantile(0.99) <= x.slo;
        let after = &self.windows[jump.min(self.windows.len())..];
        let last_miss = after.iter().rposition(|w| !meets(w));
        match last_miss {
            None => Some(Duration::ZERO),
            Some(i) if i + 1 < after.len() => Some(x.window * (i as u32 + 1)),
            Some(_) => None,
        }
    }
}

pub struct AffiliatesReport {
    pub runs: Vec<ElasticRun>,
}

pub fn run(x: &AffiliatesExperiment) -> Result<AffiliatesReport, WanError> {
    let hosts = hot_replicas(x)?;
    let hosts: Vec<NodeId> = hosts.iter().flat_map(|&h| std::iter::repeat_n(h, x.affiliates_per_host)).collect();
    let runs = [("without affiliated nodes", &[][..]), ("with affiliated nodes", &hosts[..])];
    let runs = runs.into_iter().map(|(name, hosts)| Load::new(x, name, hosts)?.run());
    Ok(AffiliatesReport { runs: runs.collect::<Result<_, _>>()? })
}

/// The replicas of the hottest key's partition, from the map of a cluster booted alike: placement depends on
/// the nodes and the keyspace only.
fn hot_replicas(x: &AffiliatesExperiment) -> Result<Vec<NodeId>, WanError> {
    let mut probe = WanCluster::boot(x.seed, &x.topology, x.nodes_per_region, &[], &x.keyspace()?)?;
    let fail = |why: String| WanError::World { setting: "probe".into(), why };
    probe.step(ns(WARMUP)).map_err(fail)?;
    let map = probe.world.procs().find_map(|(_, p)| p.map().cloned());
    let chain = map.as_ref().and_then(|m| m.chain_of_key(KeyspaceId::DEFAULT, &key(0)));
    Ok(chain.ok_or_else(|| fail("no map after the warm-up".into()))?.members.clone())
}

const WARMUP: Duration = Duration::from_secs(15);
const DRAIN: Duration = Duration::from_secs(30);

struct Load<'a> {
    x: &'a AffiliatesExperiment,
    name: String,
    cluster: WanCluster,
    rng: SimRng,
    zipf: rand_distr::Zipf<f64>,
    rate: f64,
    next_op: usize,
    /// Reads under way: when each was sent.
    sent: HashMap<usize, u64>,
    start: u64,
    end: u64,
    /// Per window of sent time: the latencies of the reads that succeeded, and how many failed.
    windows: Vec<(Vec<Duration>, usize)>,
}

impl<'a> Load<'a> {
    fn new(x: &'a AffiliatesExperiment, name: &str, hosts: &[NodeId]) -> Result<Load<'a>, WanError> {
        let mut cluster = WanCluster::boot(x.seed, &x.topology, x.nodes_per_region, hosts, &x.keyspace()?)?;
        cluster.world.set_cost(x.cost);
        let zipf = rand_distr::Zipf::new(x.keys as f64, x.zipf).map_err(|e| WanError::World {
            setting: name.to_string(),
            why: format!("a Zipf law of exponent {} over {} keys: {e}", x.zipf, x.keys),
        })?;
        let rng = SimRng::new(x.seed).derive("clients");
        let (sent, windows) = (HashMap::new(), Vec::new());
        Ok(Load {
            x,
            name: name.to_string(),
            cluster,
            rng,
            zipf,
            rate: x.before,
            next_op: 0,
            sent,
            start: 0,
            end: 0,
            windows,
        })
    }

    fn fail(&self, why: String) -> WanError {
        WanError::World { setting: self.name.clone(), why }
    }

    fn run(mut self) -> Result<ElasticRun, WanError> {
        self.cluster.step(ns(WARMUP)).map_err(|e| self.fail(e))?;
        if !self.cluster.mapped() {
            return Err(WanError::NoMap { setting: self.name.clone(), warmup: WARMUP });
        }
        self.preload()?;
        self.start = self.cluster.world.now();
        let jump = self.start + ns(self.x.steady);
        self.end = jump + ns(self.x.measure);
        (0..self.x.clients).for_each(|c| self.arrive_later(c));
        self.serve(jump)?;
        self.rate = self.x.after;
        let affiliates: Vec<_> = self.cluster.affiliates.iter().map(|&(a, _)| a).collect();
        affiliates.into_iter().for_each(|a| self.cluster.world.boot(a));
        self.serve(self.end + ns(DRAIN))?;
        let failed: Vec<u64> = self.sent.drain().map(|(_, at)| at).collect();
        failed.into_iter().for_each(|at| self.record(at, None));
        let affiliate_reads = self.cluster.counter("lease affiliate reads");
        let windows = self.windows.into_iter().map(|(reads, failed)| Window { reads: Samples::of(reads), failed });
        Ok(ElasticRun { name: self.name, windows: windows.collect(), affiliate_reads })
    }

    /// Writes every key once through the first node.
    fn preload(&mut self) -> Result<(), WanError> {
        let (node, value) = (self.cluster.by_region[0][0], Bytes::from(vec![b'v'; self.x.value_bytes]));
        self.cluster.preload(node, self.x.keys, &value, self.x.clients, &self.name)
    }

    fn serve(&mut self, until: u64) -> Result<(), WanError> {
        while let Some(event) = self.cluster.step(until).map_err(|e| self.fail(e))? {
            match event {
                Event::Client(ClientEvent::Next { client }) => {
                    self.send(client);
                    self.arrive_later(client);
                }
                Event::Response { op, reply, .. } => {
                    if let Some(at) = self.sent.remove(&op) {
                        let took = (!matches!(reply, Reply::Error(..))).then(|| self.cluster.world.now() - at);
                        self.record(at, took);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn arrive_later(&mut self, client: usize) {
        let gap = self.rng.exp(Duration::from_secs_f64(self.x.clients as f64 / self.rate));
        let at = self.cluster.world.now() + ns(gap);
        if at < self.end {
            self.cluster.world.schedule(at, Event::Client(ClientEvent::Next { client }));
        }
    }

    /// A read from `client` to the standard node of its region it talks to.
    fn send(&mut self, client: usize) {
        let regions = self.cluster.by_region.len();
        let local = &self.cluster.by_region[client % regions];
        let node = local[client / regions % local.len()];
        let rank = self.rng.sample(&self.zipf) as usize - 1;
        self.next_op += 1;
        self.sent.insert(self.next_op, self.cluster.world.now());
        let req = Request::Get { keyspace: KeyspaceId::DEFAULT, key: key(rank), read: Read::Value };
        self.cluster.world.client_send(client, self.next_op, node, req);
    }

    /// A read sent at `at` that took `took`, or failed.
    fn record(&mut self, at: u64, took: Option<u64>) {
        let i = ((at - self.start) / ns(self.x.window)) as usize;
        if self.windows.len() <= i {
            self.windows.resize_with(i + 1, Default::default);
        }
        match took {
            Some(t) => self.windows[i].0.push(Duration::from_nanos(t)),
            None => self.windows[i].1 += 1,
        }
    }
}

impl AffiliatesReport {
    pub fn table(&self, x: &AffiliatesExperiment) -> String {
        let regions: Vec<&str> = x.topology.regions().iter().map(|r| r.name.as_str()).collect();
        let mut out = format!(
            "affiliated nodes experiment: regions {}, {} standard nodes each (a lease keyspace, one replica per \
             region), {} affiliated nodes per replica of the hottest key started at the jump; {} open-loop clients, \
             reads only, Zipf {} over {} keys of {} B; {} -> {} req/s after {:?}; every node spends {:?} per input \
             and {:?} per byte; SLO: p99 read latency of a {:?} window within {:?}\n",
            regions.join(", "),
            x.nodes_per_region,
            x.affiliates_per_host,
            x.clients,
            x.zipf,
            x.keys,
            x.value_bytes,
            x.before,
            x.after,
            x.steady,
            x.cost.per_input,
            x.cost.per_byte,
            x.window,
            x.slo
        );
        let jump = (x.steady.as_nanos() / x.window.as_nanos()) as usize;
        out += "\nwindow (s from the jump)";
        for r in &self.runs {
            out += &format!("  | {:<32}", r.name);
        }
        out += "\n                        ";
        out += &"  |    reads  p50 ms  p99 ms  failed".repeat(self.runs.len());
        out += "\n";
        let len = self.runs.iter().map(|r| r.windows.len()).max().unwrap_or(0);
        for i in jump.saturating_sub(5)..len {
            out += &format!("{:>24}", i as i64 - jump as i64);
            for r in &self.runs {
                let w = r.windows.get(i).cloned().unwrap_or_default();
                let (p50, p99) = (ms(w.reads.quantile(0.5)), ms(w.reads.quantile(0.99)));
                out += &format!("  | {:>8} {:>7.1} {:>7.1} {:>7}", w.reads.len(), p50, p99, w.failed);
            }
            out += "\n";
        }
        for r in &self.runs {
            let back = match r.recovered(x) {
                Some(d) => format!("back under the SLO {d:?} after the jump"),
                None => "not back under the SLO by the end".to_string(),
            };
            out += &format!("{}: {back}; {} reads answered by affiliated nodes\n", r.name, r.affiliate_reads);
        }
        out
    }

    /// p99 read latency per window of both runs, on a log scale, with the jump marked.
    pub fn svg(&self, x: &AffiliatesExperiment) -> String {
        let (w, h, pad) = (720.0, 360.0, 50.0);
        let len = self.runs.iter().map(|r| r.windows.len()).max().unwrap_or(2).max(2) as f64;
        let p99 = |win: &Window| ms(win.reads.quantile(0.99)).max(0.1);
        let top = self.runs.iter().flat_map(|r| r.windows.iter().map(p99)).fold(1.0, f64::max).log10().ceil();
        let px = |i: f64| pad + i / (len - 1.0) * (w - 2.0 * pad);
        let py = |v: f64| h - pad - (v.log10() + 1.0) / (top + 1.0) * (h - 2.0 * pad);
        let mut out = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n");
        out += &format!(
            "<text x=\"{pad}\" y=\"20\">p99 read latency per {:?} window (ms, log scale); {} -> {} req/s at the dashed line</text>\n",
            x.window, x.before, x.after
        );
        let jx = px((x.steady.as_nanos() / x.window.as_nanos()) as f64);
        out += &format!(
            "<line x1=\"{jx}\" y1=\"{pad}\" x2=\"{jx}\" y2=\"{}\" stroke=\"gray\" stroke-dasharray=\"4\"/>\n",
            h - pad
        );
        let slo = py(ms(x.slo));
        out += &format!("<line x1=\"{pad}\" y1=\"{slo}\" x2=\"{}\" y2=\"{slo}\" stroke=\"gray\"/>\n", w - pad);
        out += &format!("<text x=\"{}\" y=\"{}\">SLO</text>\n", w - pad + 4.0, slo + 4.0);
        for e in -1..=top as i32 {
            let y = py(10f64.powi(e));
            out += &format!("<text x=\"4\" y=\"{}\">{}</text>\n", y + 4.0, 10f64.powi(e));
        }
        for (k, (run, color)) in self.runs.iter().zip(["#d62728", "#1f77b4"]).enumerate() {
            let points: Vec<String> = run
                .windows
                .iter()
                .enumerate()
                .map(|(i, win)| format!("{:.1},{:.1}", px(i as f64), py(p99(win))))
                .collect();
            out += &format!("<polyline fill=\"none\" stroke=\"{color}\" points=\"{}\"/>\n", points.join(" "));
            out += &format!(
                "<text x=\"{}\" y=\"{}\" fill=\"{color}\">{}</text>\n",
                pad + 10.0,
                40.0 + 14.0 * k as f64,
                run.name
            );
        }
        out + "</svg>\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shorter run of the seed's: without affiliated nodes the replicas of the hottest key stay overloaded to
    /// the end; with them, started at the jump, reads are back under the SLO within the seed's 10 s, and the
    /// affiliated nodes answered reads.
    #[test]
    fn affiliated_nodes_started_at_a_jump_bring_reads_back_under_the_slo() {
        let topology = Arc::new(Topology::load("globlease-4").unwrap());
        let x = AffiliatesExperiment {
            steady: Duration::from_secs(4),
            measure: Duration::from_secs(12),
            keys: 200,
            ..AffiliatesExperiment::new(3, topology)
        };
        let report = run(&x).unwrap();
        let [without, with] = &report.runs[..] else { panic!("two runs") };
        assert_eq!(without.recovered(&x), None, "{}", report.table(&x));
        assert!(with.recovered(&x).is_some_and(|d| d <= Duration::from_secs(10)), "{}", report.table(&x));
        assert!(with.affiliate_reads > 0 && without.affiliate_reads == 0, "{}", report.table(&x));
    }
}
