//! The bench's clock. Once a second (a round) it reads every node's `/v1/cluster` for its read counter and
//! CPU time, and starts the joining node when its time comes. While the join runs it also watches the
//! joiner's status ten times a second: the chains' tails move as the join goes, and the clients must follow
//! them at once (`KeySets::follow`); copies and steps last well under a second, so a slower look would miss
//! who copies to the joiner, and place the end of the join coarsely.

use super::load::KeySets;
use super::sample::{CopiedSeen, Point, Series, Status};
use crate::local::{http, Cluster, MapView};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const ROUND: Duration = Duration::from_secs(1);
/// How often the joiner's status is read while the join runs.
const WATCH_EVERY: Duration = Duration::from_millis(100);
/// How long after the load the bench still waits for a join to settle, so that its length is known.
const SETTLE_MAX_AFTER_LOAD: Duration = Duration::from_secs(120);

/// When the joiner starts and which node it is.
pub(super) struct Plan {
    pub joiner: u32,
    /// The round (second of the load) at which the joiner starts.
    pub join_round: u32,
    /// The load's last round.
    pub last_round: u32,
}

/// What the rounds and the watch saw.
pub(super) struct Observed {
    pub series: BTreeMap<u32, Series>,
    /// When the joiner was started, in seconds since the load started.
    pub join_at: f64,
    /// When the join was seen settled, if it was.
    pub settled_at: Option<f64>,
    /// Nodes seen copying to the joiner.
    pub sources_seen: BTreeSet<u32>,
    /// The newest map just before the joiner started, and at the end.
    pub before: MapView,
    pub after: MapView,
    pub copied: CopiedSeen,
}

/// The join as the joiner reports it.
struct Watch {
    joiner: u32,
    http: SocketAddr,
    sources: BTreeSet<u32>,
    copied: CopiedSeen,
    settled_at: Option<f64>,
}

impl Watch {
    /// One look at the joiner's status (nothing if it does not answer yet), `at` seconds into the load.
    fn look(&mut self, keys: &KeySets, at: f64) {
        let Ok(status) = http::get(self.http, "/v1/cluster").and_then(|v| Status::parse(&v)) else { return };
        keys.follow(&status.map);
        self.sources.extend(status.map.copy_sources());
        self.sources.extend(status.replicas.iter().filter_map(|r| Some(r.copy.as_ref()?.source)));
        self.copied.record(&status.replicas);
        if status.map.settled(self.joiner) {
            self.settled_at = Some(at);
        }
    }
}

/// Runs the rounds from `start` (the load's start) until the load is over and the join has settled (or
/// [`SETTLE_MAX_AFTER_LOAD`] has passed). `progress` hears one line per round.
pub(super) fn observe(
    cluster: &mut Cluster,
    plan: &Plan,
    keys: &KeySets,
    start: Instant,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str),
) -> Result<Observed, String> {
    let mut series: BTreeMap<u32, Series> = BTreeMap::new();
    let (mut watch, mut before, mut after, mut join_at) = (None::<Watch>, None, None, None);
    let settle_limit = plan.last_round + SETTLE_MAX_AFTER_LOAD.as_secs() as u32;
    for round in 0.. {
        let joining = watch.as_mut().filter(|w| w.settled_at.is_none());
        wait_until(start, start + ROUND * round, stop, joining, keys)?;
        cluster.check_alive()?;
        let under_load = round <= plan.last_round;
        let reads = read_statuses(cluster, plan.joiner, under_load, start)?;
        if under_load {
            for r in &reads {
                let leader = r.status.map.leads();
                let point = Point { round, at: r.at, reads: r.status.served.reads, cpu_s: r.cpu_s, leader };
                series.entry(r.node).or_default().0.push(point);
            }
        }
        let newest = reads.iter().map(|r| &r.status.map).max_by_key(|m| m.epoch).ok_or("no node answered")?;
        keys.follow(newest);
        if under_load {
            progress(&round_line(round, &series, newest, plan.joiner));
        }
        if watch.is_none() && round >= plan.join_round {
            before = Some(newest.clone());
            cluster.join(plan.joiner, progress)?;
            let joiner = cluster.nodes.last().expect("the joiner was just started");
            let at = start.elapsed().as_secs_f64();
            // The joiner's counter starts from zero now.
            let point = Point { round, at, reads: 0, cpu_s: joiner.cpu_seconds(), leader: false };
            series.entry(plan.joiner).or_default().0.push(point);
            let (sources, copied) = (BTreeSet::new(), CopiedSeen::default());
            watch = Some(Watch { joiner: plan.joiner, http: joiner.http, sources, copied, settled_at: None });
            join_at = Some(at);
            progress(&format!("t={at:.1}s: node {} joins", plan.joiner));
        }
        let settled = watch.as_ref().is_some_and(|w| w.settled_at.is_some());
        if round >= plan.last_round && (settled || round >= settle_limit) {
            after = Some(newest.clone());
            break;
        }
    }
    let watch = watch.ok_or("the load ended before the join")?;
    Ok(Observed {
        series,
        join_at: join_at.expect("set with the watch"),
        settled_at: watch.settled_at,
        sources_seen: watch.sources,
        before: before.ok_or("no map before the join")?,
        after: after.expect("the rounds end with a map"),
        copied: watch.copied,
    })
}

/// One node's answer in a round.
struct Read {
    node: u32,
    status: Status,
    /// Seconds since the load started, when the answer came.
    at: f64,
    cpu_s: Option<f64>,
}

/// The answers of the nodes, each with when it came and the CPU time the node has used. Every node must
/// answer under load; the joiner may not be up yet. After the load only the first node is asked (the bench
/// then only waits for the join to settle).
fn read_statuses(cluster: &Cluster, joiner: u32, under_load: bool, start: Instant) -> Result<Vec<Read>, String> {
    let asked = if under_load { cluster.nodes.len() } else { 1 };
    let mut reads = Vec::new();
    for node in &cluster.nodes[..asked] {
        let status = match http::get(node.http, "/v1/cluster").and_then(|v| Status::parse(&v)) {
            Ok(status) => status,
            Err(_) if node.id == joiner => continue,
            Err(e) => return Err(format!("node {}: {e}", node.id)),
        };
        let at = start.elapsed().as_secs_f64();
        reads.push(Read { node: node.id, status, at, cpu_s: node.cpu_seconds() });
    }
    Ok(reads)
}

/// Sleeps until `when`, looking at the joiner every [`WATCH_EVERY`] meanwhile if a join is in flight.
fn wait_until(
    start: Instant,
    when: Instant,
    stop: &AtomicBool,
    mut watch: Option<&mut Watch>,
    keys: &KeySets,
) -> Result<(), String> {
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err("interrupted".into());
        }
        let left = when.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        let look_at = Instant::now() + WATCH_EVERY;
        match watch.as_deref_mut() {
            Some(w) if w.settled_at.is_none() => w.look(keys, start.elapsed().as_secs_f64()),
            _ => {}
        }
        std::thread::sleep(look_at.min(when).saturating_duration_since(Instant::now()));
    }
}

/// `t=12s reads/s (cores): n1 10234 (0.25) n2 ...; 3 steps in flight, node 5 copying from 2, 3`.
fn round_line(round: u32, series: &BTreeMap<u32, Series>, map: &MapView, joiner: u32) -> String {
    let rates: Vec<String> = series
        .iter()
        .filter(|(_, s)| s.0.last().is_some_and(|p| p.round == round))
        .filter_map(|(node, s)| {
            let last = s.per_second().last().copied()?;
            Some(format!("n{node} {:.0} ({})", last.reads_per_s, cores(last.cores)))
        })
        .collect();
    let mut line = format!("t={round}s reads/s (cores): {}", rates.join(" "));
    let steps = map.chains.iter().filter(|c| c.change.is_some()).count();
    if steps > 0 {
        line += &format!("; {steps} steps in flight");
    }
    let from: Vec<String> = map.copy_sources().iter().map(u32::to_string).collect();
    if !from.is_empty() {
        line += &format!(", node {joiner} copying from {}", from.join(", "));
    }
    line
}

fn cores(cores: Option<f64>) -> String {
    cores.map_or_else(|| "-".to_string(), |c| format!("{c:.2}"))
}
