//! MeteorShower's headline (seed 001 §4.2.5): three datacenters of three nodes each, closed-loop clients in each
//! talking to a node of their own, half reads and half updates. Quorum reads (R = QUORUM, and R = ALL with W =
//! ONE) pay a round trip to the replicas they wait for; MeteorShower1 (θt = 0) one one-way trip and up to a status
//! interval; MeteorShower2 (θt = auto) only what θt does not cover of that trip, so it stays flat as the
//! datacenters move apart. The sweep moves them from `one_way_ms[0]` to the last, each link the same; a last run
//! places them at real latencies, Ireland, Virginia and Tokyo of `canopus-7`. Every run is a
//! [`geo`](super::geo) run: the settings' latencies per client region, averaged over the regions here.

use super::geo::{
    self, latency_columns, quorum_setting, GeoExperiment, GeoReport, GeoSetting, Latency, LATENCY_HEADER,
};
use super::wan::{ms, WanError};
use meridian_core::topology::Topology;
use meridian_core::{KeyspaceConfig, MeteorOptions, Placement, ProtocolConfig, Theta};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct MeteorExperiment {
    pub seed: u64,
    /// The one-way delays between datacenters the sweep runs at.
    pub one_way_ms: Vec<u32>,
    pub nodes_per_region: usize,
    pub clients_per_region: usize,
    pub measure: Duration,
    pub status_interval_ms: u32,
    /// ε: the simulator's wall clocks are exact without the `clock` nemesis, so a small bound holds.
    pub clock_bound_ms: u32,
}

impl MeteorExperiment {
    pub fn new(seed: u64) -> MeteorExperiment {
        MeteorExperiment {
            seed,
            one_way_ms: vec![10, 25, 50, 75, 100, 150],
            nodes_per_region: 3,
            clients_per_region: 6,
            measure: Duration::from_secs(20),
            status_interval_ms: 10,
            clock_bound_ms: 2,
        }
    }

    /// Quorum reads at QUORUM and at ALL (with writes at ONE), MeteorShower1 and MeteorShower2, a replica in
    /// each of `topology`'s three regions.
    pub fn settings(&self, topology: &Topology) -> Vec<GeoSetting> {
        let regions: Vec<&str> = topology.regions().iter().map(|r| r.name.as_str()).collect();
        let placement = Placement::one_in_each(&regions.join(",")).expect("a topology's regions are valid names");
        let meteor = |name: &str, theta| {
            let m = MeteorOptions {
                status_interval_ms: self.status_interval_ms,
                clock_bound_ms: self.clock_bound_ms,
                theta,
                ..MeteorOptions::default()
            };
            let protocol = ProtocolConfig::Meteor(m);
            let keyspace = KeyspaceConfig { protocol, placement: placement.clone(), ..KeyspaceConfig::durable(3) };
            GeoSetting { name: name.into(), keyspace }
        };
        let placed =
            |s: GeoSetting| GeoSetting { keyspace: KeyspaceConfig { placement: placement.clone(), ..s.keyspace }, ..s };
        vec![
            placed(quorum_setting("quorum", "quorum", "clock")),
            placed(quorum_setting("all", "one", "clock")),
            meteor("MeteorShower1", Theta::Fixed(0)),
            meteor("MeteorShower2", Theta::Auto),
        ]
    }

    fn geo(&self, topology: Topology) -> GeoExperiment {
        let settings = self.settings(&topology);
        GeoExperiment {
            nodes_per_region: self.nodes_per_region,
            clients_per_region: self.clients_per_region,
            measure: self.measure,
            settings,
            ..GeoExperiment::new(self.seed, Arc::new(topology))
        }
    }
}

/// Three datacenters `one_way_ms` apart from each other.
pub fn equidistant(one_way_ms: u32) -> Topology {
    let mut text = String::new();
    for dc in ["dc1", "dc2", "dc3"] {
        text += &format!("[[region]]\nname = \"{dc}\"\nrtt_ms = 0.2\n");
    }
    for (a, b) in [("dc1", "dc2"), ("dc1", "dc3"), ("dc2", "dc3")] {
        text += &format!("[[link]]\nbetween = [\"{a}\", \"{b}\"]\nrtt_ms = {}\n", 2 * one_way_ms);
    }
    Topology::parse(&text, "equidistant").expect("a valid topology")
}

/// Ireland, Virginia and Tokyo with `canopus-7`'s round trips: Europe, America and Asia.
pub fn eu_us_asia() -> Topology {
    let all = Topology::load("canopus-7").expect("a preset");
    let names = ["ir", "va", "tk"];
    let mut text = String::new();
    for name in names {
        let r = &all.regions()[all.region(name).expect("in canopus-7")];
        text += &format!("[[region]]\nname = \"{name}\"\nrtt_ms = {}\n", r.rtt_ms);
    }
    for (i, a) in names.iter().enumerate() {
        for b in &names[i + 1..] {
            let link = all.link(all.region(a).expect("in canopus-7"), all.region(b).expect("in canopus-7"));
            text += &format!("[[link]]\nbetween = [\"{a}\", \"{b}\"]\nrtt_ms = {}\n", link.rtt_ms);
        }
    }
    Topology::parse(&text, "canopus-7: ir, va, tk").expect("a valid topology")
}

/// One setting's latencies at one placement of the datacenters, averaged over the client regions.
#[derive(Clone, Debug)]
pub struct Point {
    pub setting: String,
    pub reads: Latency,
    pub writes: Latency,
    pub failed: usize,
}

#[derive(Clone, Debug)]
pub struct MeteorReport {
    /// Per one-way delay of the sweep, a point per setting.
    pub sweep: Vec<(u32, Vec<Point>)>,
    /// At Ireland, Virginia and Tokyo.
    pub real: GeoReport,
}

pub fn run(x: &MeteorExperiment) -> Result<MeteorReport, WanError> {
    let mut sweep = Vec::new();
    for &d in &x.one_way_ms {
        let report = geo::run(&x.geo(equidistant(d)))?;
        sweep.push((d, report.settings.iter().map(averaged).collect()));
    }
    let real = geo::run(&x.geo(eu_us_asia()))?;
    Ok(MeteorReport { sweep, real })
}

/// A setting's latencies over every client region: counts summed, percentiles averaged.
fn averaged(s: &geo::SettingReport) -> Point {
    let n = s.regions.len().max(1) as u32;
    let mean = |pick: fn(&geo::RegionLatency) -> &Latency| Latency {
        count: s.regions.iter().map(|r| pick(r).count).sum(),
        p50: s.regions.iter().map(|r| pick(r).p50).sum::<Duration>() / n,
        p99: s.regions.iter().map(|r| pick(r).p99).sum::<Duration>() / n,
    };
    Point {
        setting: s.name.clone(),
        reads: mean(|r| &r.reads),
        writes: mean(|r| &r.writes),
        failed: s.regions.iter().map(|r| r.failed).sum(),
    }
}

impl MeteorReport {
    pub fn table(&self, x: &MeteorExperiment) -> String {
        let mut out = format!(
            "meteor experiment: 3 datacenters of {} nodes, {} closed-loop clients each (each talks to a node of its \
             own), 50% reads, status interval {} ms, ε {} ms, {:?} measured per run; latencies averaged over the \
             datacenters\n",
            x.nodes_per_region, x.clients_per_region, x.status_interval_ms, x.clock_bound_ms, x.measure
        );
        out += &format!("one-way ms  setting                    {LATENCY_HEADER}\n");
        for (d, points) in &self.sweep {
            for p in points {
                out += &format!("{d:>10}  {:<26} {}\n", p.setting, latency_columns(&p.reads, &p.writes, p.failed));
            }
        }
        let geo = GeoExperiment { nodes_per_region: x.nodes_per_region, ..x.geo(eu_us_asia()) };
        out + "\nat real latencies (Ireland, Virginia, Tokyo from canopus-7):\n" + &self.real.table(&geo)
    }

    /// Read p50 (left) and write p50 (right) against the one-way delay, a line per setting.
    pub fn svg(&self) -> String {
        let settings: Vec<&str> =
            self.sweep.first().map(|(_, ps)| ps.iter().map(|p| p.setting.as_str()).collect()).unwrap_or_default();
        let max_d = self.sweep.iter().map(|(d, _)| f64::from(*d)).fold(1.0, f64::max);
        let top = (self.sweep.iter().flat_map(|(_, ps)| ps))
            .map(|p| ms(p.reads.p50).max(ms(p.writes.p50)))
            .fold(1.0, f64::max)
            * 1.1;
        let (panel_w, h, pad) = (360.0, 320.0, 45.0);
        let x_of = |left: f64, d: f64| left + d / max_d * (panel_w - 2.0 * pad);
        let y_of = |v: f64| h - pad - v / top * (h - 2.0 * pad);
        let mut out = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{h}\" font-family=\"sans-serif\" \
             font-size=\"11\">\n<text x=\"{pad}\" y=\"16\">p50 latency (ms) against one-way delay between \
             datacenters (ms)</text>\n",
            2.0 * panel_w + 200.0
        );
        let colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"];
        for (p, title) in ["reads", "writes"].into_iter().enumerate() {
            let left = p as f64 * panel_w + pad;
            out += &format!("<text x=\"{left}\" y=\"{}\">{title}</text>\n", pad - 8.0);
            for tick in (0..).map(|t| f64::from(t) * 50.0).take_while(|&t| t < top) {
                let ty = y_of(tick);
                out += &format!(
                    "<line x1=\"{left}\" y1=\"{ty:.1}\" x2=\"{:.1}\" y2=\"{ty:.1}\" stroke=\"#ddd\"/>\n\
                     <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{tick:.0}</text>\n",
                    x_of(left, max_d),
                    left - 4.0,
                    ty + 4.0
                );
            }
            for (d, _) in &self.sweep {
                let tx = x_of(left, f64::from(*d));
                out += &format!("<text x=\"{tx:.1}\" y=\"{}\" text-anchor=\"middle\">{d}</text>\n", h - pad + 14.0);
            }
            for (k, name) in settings.iter().enumerate() {
                let points: Vec<String> = (self.sweep.iter())
                    .filter_map(|(d, ps)| Some((d, ps.iter().find(|pt| pt.setting == *name)?)))
                    .map(|(d, pt)| {
                        let v = if p == 0 { pt.reads.p50 } else { pt.writes.p50 };
                        format!("{:.1},{:.1}", x_of(left, f64::from(*d)), y_of(ms(v)))
                    })
                    .collect();
                out += &format!(
                    "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                    points.join(" "),
                    colors[k % colors.len()]
                );
            }
        }
        for (k, name) in settings.iter().enumerate() {
            let (lx, ly) = (2.0 * panel_w + 10.0, pad + 16.0 * k as f64);
            out += &format!(
                "<rect x=\"{lx}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>\n<text x=\"{}\" y=\"{ly}\">{name}</text>\n",
                ly - 9.0,
                colors[k % colors.len()],
                lx + 14.0
            );
        }
        out + "</svg>\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At 50 ms one way, quorum reads pay a round trip, MeteorShower1 about one one-way trip plus the interval,
    /// and MeteorShower2 less than that; MeteorShower's writes are quorum writes.
    #[test]
    fn meteor_reads_beat_quorum_reads_and_theta_beats_meteorshower1() {
        let x = MeteorExperiment {
            one_way_ms: vec![50],
            clients_per_region: 2,
            measure: Duration::from_secs(5),
            ..MeteorExperiment::new(3)
        };
        let geo = x.geo(equidistant(50));
        let report = geo::run(&geo).unwrap();
        let points: Vec<Point> = report.settings.iter().map(averaged).collect();
        let table = report.table(&geo);
        let read = |name: &str| ms(points.iter().find(|p| p.setting == name).unwrap().reads.p50);
        let (quorum, ms1, ms2) = (read("quorum QUORUM clock"), read("MeteorShower1"), read("MeteorShower2"));
        assert!(quorum >= 100.0, "a round trip: {table}");
        assert!((50.0..75.0).contains(&ms1), "a one-way trip and up to an interval: {table}");
        assert!(ms2 < ms1 - 20.0, "θt covers most of the trip: {table}");
        assert!(points.iter().all(|p| p.reads.count > 0 && p.writes.count > 0), "{table}");
    }
}
