//! The geo baseline (issue 40 §5): what a client pays, per region, to read and write through the keyspace
//! settings Meridian has before its geo protocols. Each setting gets a fault-free run on a topology: closed-loop
//! clients in every region, each talking to a node of its own region, half reads and half writes over a set of
//! keys. A chain keyspace sends every write through its head and every read to its tail, wherever they are; a
//! quorum keyspace's coordinator (the client's own node) waits for the replicas its level names. The read and
//! write latencies per client region (p50, p99) are the figures GlobLease (seed 001 §4), MeteorShower and
//! Ensemble are measured against.

use super::wan::{ms, Samples, WanCluster, WanError};
use crate::rng::SimRng;
use crate::world::Event;
use bytes::Bytes;
use meridian_core::topology::Topology;
use meridian_core::{
    KeyspaceConfig, KeyspaceId, NodeId, Placement, Protocol, ProtocolConfig, ProtocolKnobs, Read, Reply, Request, Write,
};
use std::sync::Arc;
use std::time::Duration;

/// One keyspace setting the experiment measures.
#[derive(Clone, Debug)]
pub struct GeoSetting {
    pub name: String,
    pub keyspace: KeyspaceConfig,
}

#[derive(Clone, Debug)]
pub struct GeoExperiment {
    pub seed: u64,
    pub topology: Arc<Topology>,
    /// Nodes in each region; node k sits in region k mod n, as in the correctness runs.
    pub nodes_per_region: usize,
    pub clients_per_region: usize,
    pub keys: usize,
    pub value_bytes: usize,
    /// The share of operations that are reads; the rest are writes.
    pub read_ratio: f64,
    /// How long the cluster gets to elect its manager and publish its map before the load starts.
    pub warmup: Duration,
    /// How long the load is measured.
    pub measure: Duration,
    pub settings: Vec<GeoSetting>,
}

impl GeoExperiment {
    /// The experiment on `topology` with every setting of [`baseline_settings`] and a lease keyspace.
    pub fn new(seed: u64, topology: Arc<Topology>) -> GeoExperiment {
        let mut settings = baseline_settings();
        settings.push(lease_setting(&topology));
        GeoExperiment {
            seed,
            topology,
            nodes_per_region: 1,
            clients_per_region: 8,
            keys: 1_000,
            value_bytes: 100,
            read_ratio: 0.5,
            warmup: Duration::from_secs(15),
            measure: Duration::from_secs(30),
            settings,
        }
    }
}

/// Three `log` replicas each: a chain (`su`, reads at the tail), and quorum keyspaces at levels ONE, QUORUM
/// and ALL for reads and writes alike, stamped by the coordinator's clock (Cassandra's behaviour), and at
/// QUORUM stamped by a quorum (ABD, linearizable).
pub fn baseline_settings() -> Vec<GeoSetting> {
    vec![
        GeoSetting { name: "chain".into(), keyspace: KeyspaceConfig::durable(3) },
        quorum_setting("one", "one", "clock"),
        quorum_setting("quorum", "quorum", "clock"),
        quorum_setting("all", "all", "clock"),
        quorum_setting("quorum", "quorum", "quorum"),
    ]
}

/// A quorum keyspace of three `log` replicas at levels `read` and `write`, stamped by `stamps`.
pub fn quorum_setting(read: &str, write: &str, stamps: &str) -> GeoSetting {
    let knobs = ProtocolKnobs { read: Some(read), write: Some(write), timestamps: Some(stamps), ..Default::default() };
    let protocol =
        ProtocolConfig::from_options(Protocol::Quorum, &knobs).expect("the levels and stamps are valid names");
    let stamps = if stamps == "quorum" { "ABD" } else { stamps };
    let name = match read == write {
        true => format!("quorum {} {stamps}", read.to_uppercase()),
        false => format!("quorum R={} W={} {stamps}", read.to_uppercase(), write.to_uppercase()),
    };
    GeoSetting { name, keyspace: KeyspaceConfig { protocol, ..KeyspaceConfig::durable(3) } }
}

/// A lease keyspace (docs/protocols/lease.md) with a replica in each of `topology`'s regions, mastered in the
/// first: GlobLease, against the baseline.
pub fn lease_setting(topology: &Topology) -> GeoSetting {
    let regions: Vec<&str> = topology.regions().iter().map(|r| r.name.as_str()).collect();
    let placement = Placement::one_in_each(&regions.join(",")).expect("a topology's regions are valid names");
    let keyspace = KeyspaceConfig {
        protocol: ProtocolConfig::default_for(Protocol::Lease),
        placement,
        ..KeyspaceConfig::durable(regions.len())
    };
    GeoSetting { name: "lease".into(), keyspace }
}

/// Latencies of one kind of operation from one region.
#[derive(Clone, Debug, Default)]
pub struct Latency {
    pub count: usize,
    pub p50: Duration,
    pub p99: Duration,
}

impl Latency {
    fn of(samples: Vec<Duration>) -> Latency {
        let samples = Samples::of(samples);
        Latency { count: samples.len(), p50: samples.quantile(0.5), p99: samples.quantile(0.99) }
    }
}

/// The heading of [`latency_columns`].
pub const LATENCY_HEADER: &str = " reads  p50 ms  p99 ms   writes  p50 ms  p99 ms  failed";

/// Reads and writes, counted, at p50 and p99, and the failures, as the experiments' tables print them.
pub fn latency_columns(reads: &Latency, writes: &Latency, failed: usize) -> String {
    format!(
        "{:>6} {:>7.1} {:>7.1} {:>8} {:>7.1} {:>7.1} {:>7}",
        reads.count,
        ms(reads.p50),
        ms(reads.p99),
        writes.count,
        ms(writes.p50),
        ms(writes.p99),
        failed
    )
}

#[derive(Clone, Debug)]
pub struct RegionLatency {
    pub region: String,
    pub reads: Latency,
    pub writes: Latency,
    /// Operations answered with an error (a timeout, no map yet): counted, not timed.
    pub failed: usize,
}

#[derive(Clone, Debug)]
pub struct SettingReport {
    pub name: String,
    pub regions: Vec<RegionLatency>,
}

#[derive(Clone, Debug)]
pub struct GeoReport {
    pub settings: Vec<SettingReport>,
}

pub fn run(x: &GeoExperiment) -> Result<GeoReport, WanError> {
    let settings = x.settings.iter().map(|s| run_setting(x, s)).collect::<Result<_, _>>()?;
    Ok(GeoReport { settings })
}

/// A closed-loop client: the node it talks to, and when it sent its outstanding operation (a read or not).
struct Client {
    region: usize,
    node: NodeId,
    sent: u64,
    read: bool,
}

struct Run<'a> {
    x: &'a GeoExperiment,
    cluster: WanCluster,
    rng: SimRng,
    clients: Vec<Client>,
    value: Bytes,
    next_op: usize,
    /// Per region: read and write latencies, and failures, of operations sent after the warm-up.
    reads: Vec<Vec<Duration>>,
    writes: Vec<Vec<Duration>>,
    failed: Vec<usize>,
}

fn run_setting(x: &GeoExperiment, setting: &GeoSetting) -> Result<SettingReport, WanError> {
    let cluster = WanCluster::boot(x.seed, &x.topology, x.nodes_per_region, &[], &setting.keyspace)?;
    let regions = cluster.by_region.len();
    let clients = (0..regions * x.clients_per_region)
        .map(|c| {
            let region = c / x.clients_per_region;
            let local = &cluster.by_region[region];
            Client { region, node: local[c % local.len()], sent: 0, read: false }
        })
        .collect();
    let mut run = Run {
        x,
        rng: SimRng::new(x.seed).derive("clients"),
        cluster,
        clients,
        value: Bytes::from(vec![b'v'; x.value_bytes]),
        next_op: 0,
        reads: vec![Vec::new(); regions],
        writes: vec![Vec::new(); regions],
        failed: vec![0; regions],
    };
    run.load(setting)?;
    let regions = x.topology.regions().iter().enumerate().map(|(r, region)| RegionLatency {
        region: region.name.clone(),
        reads: Latency::of(std::mem::take(&mut run.reads[r])),
        writes: Latency::of(std::mem::take(&mut run.writes[r])),
        failed: run.failed[r],
    });
    Ok(SettingReport { name: setting.name.clone(), regions: regions.collect() })
}

impl Run<'_> {
    /// Lets the cluster form, then keeps every client busy until the measured time is over.
    fn load(&mut self, setting: &GeoSetting) -> Result<(), WanError> {
        let ns = |d: Duration| d.as_nanos() as u64;
        let fail = |why: String| WanError::World { setting: setting.name.clone(), why };
        self.step(ns(self.x.warmup)).map_err(fail)?;
        if !self.cluster.mapped() {
            return Err(WanError::NoMap { setting: setting.name.clone(), warmup: self.x.warmup });
        }
        (0..self.clients.len()).for_each(|c| self.send(c));
        let end = ns(self.x.warmup + self.x.measure);
        while let Some((client, reply)) = self.step(end).map_err(fail)? {
            self.answered(client, reply);
            self.send(client);
        }
        Ok(())
    }

    /// Runs the world to the next answer a client gets; None once `until` passes.
    fn step(&mut self, until: u64) -> Result<Option<(usize, Reply)>, String> {
        while let Some(event) = self.cluster.step(until)? {
            if let Event::Response { client, reply, .. } = event {
                return Ok(Some((client, reply)));
            }
        }
        Ok(None)
    }

    fn send(&mut self, client: usize) {
        let key = Bytes::from(format!("key{}", self.rng.index(self.x.keys)));
        let read = self.rng.unit() < self.x.read_ratio;
        let req = if read {
            Request::Get { keyspace: KeyspaceId::DEFAULT, key, read: Read::Value }
        } else {
            Request::Write(Write::put(KeyspaceId::DEFAULT, key, self.value.clone()))
        };
        let c = &mut self.clients[client];
        (c.sent, c.read) = (self.cluster.world.now(), read);
        self.next_op += 1;
        let to = c.node;
        self.cluster.world.client_send(client, self.next_op, to, req);
    }

    fn answered(&mut self, client: usize, reply: Reply) {
        let c = &self.clients[client];
        if matches!(reply, Reply::Error(..)) {
            self.failed[c.region] += 1;
            return;
        }
        let took = Duration::from_nanos(self.cluster.world.now() - c.sent);
        let into = if c.read { &mut self.reads } else { &mut self.writes };
        into[c.region].push(took);
    }
}

impl GeoReport {
    /// The report as a table: a row per setting and client region.
    pub fn table(&self, x: &GeoExperiment) -> String {
        let names: Vec<&str> = x.topology.regions().iter().map(|r| r.name.as_str()).collect();
        let mut out = format!(
            "geo experiment: regions {}, {} node(s) and {} closed-loop clients per region (each talks to a node of \
             its own region), {:.0}% reads of {} keys, {} B values, {:?} measured after {:?}\n",
            names.join(", "),
            x.nodes_per_region,
            x.clients_per_region,
            x.read_ratio * 100.0,
            x.keys,
            x.value_bytes,
            x.measure,
            x.warmup
        );
        out += &format!("setting              region   {LATENCY_HEADER}\n");
        for s in &self.settings {
            for r in &s.regions {
                out += &format!("{:<20} {:<8} {}\n", s.name, r.region, latency_columns(&r.reads, &r.writes, r.failed));
            }
        }
        out
    }

    /// Two panels (reads, writes) of bars: for each client region, one bar per setting up to its p50 and a
    /// whisker up to its p99.
    pub fn svg(&self) -> String {
        let regions = self.settings.first().map_or(0, |s| s.regions.len()).max(1);
        let bars = self.settings.len().max(1);
        let (panel_w, h, pad, bar) = (60.0 + (regions * (bars + 1)) as f64 * 14.0, 320.0, 40.0, 12.0);
        let top = self
            .settings
            .iter()
            .flat_map(|s| &s.regions)
            .map(|r| ms(r.reads.p99).max(ms(r.writes.p99)))
            .fold(1.0, f64::max)
            * 1.1;
        let y = |v: f64| h - pad - v / top * (h - 2.0 * pad);
        let width = 2.0 * panel_w + 220.0;
        let mut out = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{h}\" font-family=\"sans-serif\" \
             font-size=\"11\">\n<text x=\"{pad}\" y=\"16\">latency per client region (ms): bar p50, whisker p99; \
             top {top:.0} ms</text>\n"
        );
        let colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];
        for (p, (title, pick)) in [("reads", true), ("writes", false)].into_iter().enumerate() {
            let left = p as f64 * panel_w + pad;
            out += &format!("<text x=\"{left}\" y=\"{}\">{title}</text>\n", pad - 6.0);
            let (base, right) = (y(0.0), left + panel_w - pad);
            for tick in (0..).map(|t| f64::from(t) * 100.0).take_while(|&t| t < top) {
                let ty = y(tick);
                let shade = if tick == 0.0 { "gray" } else { "#ddd" };
                out +=
                    &format!("<line x1=\"{left}\" y1=\"{ty:.1}\" x2=\"{right}\" y2=\"{ty:.1}\" stroke=\"{shade}\"/>\n");
                out +=
                    &format!("<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{tick:.0}</text>\n", left - 4.0, ty + 4.0);
            }
            for r in 0..regions {
                let group = left + (r * (bars + 1)) as f64 * bar;
                for (k, s) in self.settings.iter().enumerate() {
                    let l = if pick { &s.regions[r].reads } else { &s.regions[r].writes };
                    let (x0, color) = (group + k as f64 * bar, colors[k % colors.len()]);
                    let (p50, p99) = (y(ms(l.p50)), y(ms(l.p99)));
                    out += &format!(
                        "<rect x=\"{x0}\" y=\"{p50:.1}\" width=\"{}\" height=\"{:.1}\" fill=\"{color}\"/>\n",
                        bar - 2.0,
                        base - p50
                    );
                    let mid = x0 + (bar - 2.0) / 2.0;
                    out += &format!(
                        "<line x1=\"{mid}\" y1=\"{p50:.1}\" x2=\"{mid}\" y2=\"{p99:.1}\" stroke=\"black\"/>\n"
                    );
                }
                let name = self.settings.first().map_or("", |s| s.regions[r].region.as_str());
                out += &format!("<text x=\"{group}\" y=\"{}\">{name}</text>\n", base + 14.0);
            }
        }
        for (k, s) in self.settings.iter().enumerate() {
            let (lx, ly) = (2.0 * panel_w + 10.0, pad + 16.0 * k as f64);
            let color = colors[k % colors.len()];
            out += &format!("<rect x=\"{lx}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{color}\"/>\n", ly - 9.0);
            out += &format!("<text x=\"{}\" y=\"{ly}\">{}</text>\n", lx + 14.0, s.name);
        }
        out + "</svg>\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On `globlease-4`, a chain's writes from every region cross the WAN to the head and on to the tail, so
    /// none is faster than the nearest round trip; a quorum keyspace answers at ONE no later than at ALL; a lease
    /// keyspace's master region reads locally, and its other regions pay at most the round trip to the master
    /// (a renewal: with uniform keys few reads find a lease from an earlier one).
    #[test]
    fn latencies_follow_the_topology() {
        let topology = Arc::new(Topology::load("globlease-4").unwrap());
        let x = GeoExperiment {
            clients_per_region: 2,
            measure: Duration::from_secs(10),
            ..GeoExperiment::new(7, topology.clone())
        };
        let report = run(&x).unwrap();
        let table = report.table(&x);
        let by = |name: &str| report.settings.iter().find(|s| s.name == name).unwrap();
        let nearest = (0..4)
            .flat_map(|a| (0..4).filter(move |&b| b != a).map(move |b| (a, b)))
            .map(|(a, b)| topology.link(a, b).rtt_ms)
            .fold(f64::INFINITY, f64::min);
        for r in &by("chain").regions {
            assert!(r.writes.count > 0 && r.reads.count > 0, "{table}");
            assert!(ms(r.writes.p50) >= nearest, "a chain write crosses the WAN: {table}");
        }
        let lease = &by("lease").regions;
        assert!(ms(lease[0].reads.p50) < nearest, "the master region reads locally: {table}");
        for (i, r) in lease.iter().enumerate().skip(1) {
            let to_master = topology.link(i, 0).rtt_ms;
            assert!(r.reads.count > 0 && ms(r.reads.p50) <= to_master + 5.0, "one round trip at most: {table}");
        }
        let (one, all) = (by("quorum ONE clock"), by("quorum ALL clock"));
        for (o, a) in one.regions.iter().zip(&all.regions) {
            assert!(o.failed == 0 && a.failed == 0, "{table}");
            assert!(o.writes.p50 <= a.writes.p50 && o.reads.p50 <= a.reads.p50, "{table}");
        }
    }
}
