//! Many seeds of one protocol, each run checked: the engine behind `meridian sim`. Seeds run on every
//! core; results are reported in seed order, so the summary is as deterministic as the runs.

use crate::nemesis::{FaultKind, NemesisStats};
use crate::protocols;
use crate::rng::SimRng;
use crate::run::{run, topology, RunOptions, RunReport};
use crate::world::Traffic;
use meridian_check::{
    check, check_sequential, present_violations, staleness, Budget, OpKind, SequentialVerdict, Staleness, Verdict,
};
use meridian_core::keyspace::UnknownName;
use meridian_core::topology::Topology;
use meridian_core::{KeyspaceConfig, Protocol};
use meridian_proto::lease::{HotConfig, OriginsConfig};
use meridian_proto::manager::core::{ManagerConfig, DEFAULT_TICK};
use meridian_proto::node::{NodeConfig, Protocols};
use meridian_proto::protocol::Claim;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The slowest manager tick a run uses: elections then take 5 to 10 s, within a run's liveness deadline.
const MANAGER_TICK_MAX: Duration = Duration::from_millis(500);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckModel {
    Linearizable,
    /// Measures stale reads (`meridian_check::staleness`); fails only on a value no write wrote.
    Staleness,
    /// Per-key sequential consistency (`meridian_check::check_sequential`), stale reads measured besides.
    Sequential,
    /// Only invariants and liveness; the history is not checked.
    None,
}

impl CheckModel {
    /// The check of what the docs claim for a keyspace configured so, as its protocol says
    /// (`KeyspaceProtocol::claim`): linearizability, or how stale reads are.
    pub fn claimed(config: &KeyspaceConfig) -> CheckModel {
        match Protocols::claim(config) {
            Claim::Linearizable => CheckModel::Linearizable,
            Claim::Staleness => CheckModel::Staleness,
            Claim::Sequential => CheckModel::Sequential,
        }
    }
}

impl fmt::Display for CheckModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CheckModel::Linearizable => "linearizable",
            CheckModel::Staleness => "staleness",
            CheckModel::Sequential => "sequential",
            CheckModel::None => "none",
        })
    }
}

impl FromStr for CheckModel {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<Self, UnknownName> {
        match s {
            "linearizable" => Ok(CheckModel::Linearizable),
            "staleness" => Ok(CheckModel::Staleness),
            "sequential" => Ok(CheckModel::Sequential),
            "none" => Ok(CheckModel::None),
            other => Err(UnknownName::new("check", other, &["linearizable", "sequential", "staleness", "none"])),
        }
    }
}

#[derive(Clone, Debug)]
pub struct ChainSweep {
    pub seeds: Range<u64>,
    pub nemesis: Vec<FaultKind>,
    pub check: CheckModel,
    pub nodes: usize,
    /// Nodes beyond the initial cluster, for the `join` nemesis.
    pub spares: usize,
    /// Affiliated nodes, booted with the initial cluster (`RunOptions::affiliates`).
    pub affiliates: usize,
    /// The `default` keyspace's configuration (R = its number of replicas).
    pub default: KeyspaceConfig,
    pub vnodes: usize,
    /// Partitions 0 are drawn per seed (`protocols::partitions`).
    pub node: NodeConfig,
    pub threads: usize,
    /// Print every step of the run to stderr (meant for one seed).
    pub trace: bool,
    /// Regions to place the nodes in (`RunOptions::topology`); None: a network drawn per seed.
    pub topology: Option<Arc<Topology>>,
    /// With `CheckModel::Staleness` or `Sequential`: fail a run with a read that missed a write acknowledged
    /// longer than this before it began (a keyspace's documented staleness bound).
    pub staleness_bound: Option<Duration>,
    /// Clients of a region without nodes talk to the nearest region's (`RunOptions::clients_near`).
    pub clients_near: bool,
}

/// The verdict on one seed.
#[derive(Debug)]
pub struct SeedResult {
    pub seed: u64,
    pub trace_hash: u64,
    pub ops: usize,
    pub unknown: usize,
    pub failed: usize,
    pub reads: usize,
    pub events: u64,
    pub crashes: u64,
    /// What the nemesis did.
    pub nemesis: NemesisStats,
    /// The protocol's counters summed over every node life (compactions, pre-copies, flushes, …).
    pub counters: BTreeMap<&'static str, u64>,
    /// With `CheckModel::Staleness` or `Sequential`: how stale the reads were.
    pub staleness: Option<Staleness>,
    /// Messages sent, by kind, and the virtual time they were sent over.
    pub traffic: BTreeMap<&'static str, Traffic>,
    pub elapsed_ns: u64,
    /// Invariant breach, liveness failure or linearizability violation, with a minimal history.
    pub failure: Option<String>,
}

/// Checks `report`'s history as `model` says, and its stalest read against `bound` if given.
pub fn judge(report: &RunReport, model: CheckModel, bound: Option<Duration>) -> SeedResult {
    let ops = &report.history.ops;
    let mut failure = report.failure.clone();
    if failure.is_none() && model == CheckModel::Linearizable {
        failure = match check(&report.history, Budget::default()) {
            Verdict::Linearizable { .. } => None,
            Verdict::Violation(cx) => Some(format!("not linearizable:\n{cx}")),
            Verdict::Inconclusive { key, reason } => Some(format!("check inconclusive for key {key}: {reason}")),
        };
        // The search leaves present reads (keys a SCAN page listed) out; these are the ones no order explains.
        if failure.is_none() {
            let present = present_violations(&report.history).into_iter().next();
            failure = present.map(|wrong| format!("not linearizable: a SCAN page's {wrong}"));
        }
    }
    if failure.is_none() && model == CheckModel::Sequential {
        failure = match check_sequential(&report.history) {
            SequentialVerdict::Consistent { .. } => None,
            other => Some(other.to_string()),
        };
    }
    let measured = matches!(model, CheckModel::Staleness | CheckModel::Sequential);
    let stale = measured.then(|| staleness(&report.history));
    if let Some(invented) = stale.as_ref().and_then(|s| s.invented.first()).filter(|_| failure.is_none()) {
        failure = Some(format!("a read returned a value no write wrote: {invented}"));
    }
    let beyond = |s: &&Staleness| bound.is_some_and(|b| s.max_ns > b.as_nanos() as u64);
    if let Some(s) = stale.as_ref().filter(beyond).filter(|_| failure.is_none()) {
        failure = Some(format!(
            "a read missed a write acknowledged {:.1} ms before it began, beyond the bound of {} ms",
            s.max_ns as f64 / 1e6,
            bound.expect("beyond a bound").as_millis()
        ));
    }
    SeedResult {
        seed: report.seed,
        trace_hash: report.trace_hash,
        ops: ops.len(),
        unknown: ops.iter().filter(|o| o.ok.is_none()).count(),
        failed: ops.iter().filter(|o| o.ok == Some(false)).count(),
        reads: ops.iter().filter(|o| matches!(o.op, OpKind::Get | OpKind::Present) && o.ok == Some(true)).count(),
        events: report.world.events,
        crashes: report.nemesis.crashes,
        nemesis: report.nemesis,
        counters: report.counters.clone(),
        staleness: stale,
        traffic: report.world.traffic.clone(),
        elapsed_ns: report.elapsed_ns,
        failure,
    }
}

pub fn run_chain_seed(s: &ChainSweep, seed: u64) -> RunReport {
    let cluster = protocols::cluster(s.nodes, &s.default, s.vnodes).expect("sweep options were validated");
    let mut rng = SimRng::new(seed).derive("store");
    let log = protocols::log_options(&mut rng);
    let mut node = s.node.clone();
    if node.partitions == 0 {
        node.partitions = protocols::partitions(&mut rng);
    }
    let mut opts = RunOptions::new(seed, s.nemesis.clone());
    opts.nodes = s.nodes;
    opts.spares = s.spares;
    opts.affiliates = s.affiliates;
    opts.default_evicts = s.default.maxmemory.is_some();
    opts.capabilities = Protocols::capabilities(&s.default);
    opts.trace = s.trace;
    opts.topology = s.topology.clone();
    opts.clients_near = s.clients_near;
    if s.default.protocol.protocol() == Protocol::Lease {
        opts.master_regions = s.default.placement.regions.iter().map(|(r, _)| r.clone()).collect();
    }
    if s.nemesis.contains(&FaultKind::Origins) {
        // A run lasts seconds: keys move after a few writes, and often, rather than settle.
        node.protocols.lease.origins = OriginsConfig { window_ticks: 10, min_writes: 4 };
    }
    if s.affiliates > 0 {
        // The workload's handful of keys are all hot: hosts give them after a few reads.
        node.protocols.lease.hot = HotConfig { window_ticks: 4, top_k: 8, min_reads: 2 };
    }
    // As an operator would: timings follow the round trip between the farthest nodes; clients wait several
    // such trips before giving up.
    let (net, placements) = topology(&opts);
    let locations = protocols::locations(opts.topology.as_deref(), &placements);
    let rtt = net.round_trip(&placements);
    fit_timings(&mut node, rtt);
    // A run's fault phase lasts seconds: voters that crash or are cut off get replaced within it, and often
    // come back to a group that moved on.
    node.manager.voter_timeout = node.manager.failure_timeout;
    // Long enough for the manager to declare the node failed (its heartbeats stop at once), wait out its leases
    // (a term at most) and leave the new tails one more term of serving while it is still cut off.
    opts.isolation = node.manager.failure_timeout + node.manager.lease * 2;
    if opts.topology.is_some() {
        opts.fault_pace = (node.manager.tick.as_millis() / DEFAULT_TICK.as_millis()).max(1) as u32;
    }
    opts.client_timeout = opts.client_timeout.max(rtt * 12);
    run(&opts, protocols::chain(cluster, node, log, locations, opts.hosts()))
}

/// Sets `node`'s manager tick and request timeout as an operator would for a network whose farthest nodes are
/// `rtt` apart: a write crosses the network about R + 1 times, and a front-end waits several such trips.
pub fn fit_timings(node: &mut NodeConfig, rtt: Duration) {
    let tick = rtt.clamp(DEFAULT_TICK, MANAGER_TICK_MAX);
    node.manager = ManagerConfig { limits: node.manager.limits, ..ManagerConfig::with_tick(tick) };
    node.requests.request_timeout = node.requests.request_timeout.max(rtt * 8);
}

/// Runs every seed; `keep` sees each failing run's report (e.g. to save its history).
pub fn sweep_chain(s: &ChainSweep, keep: &(dyn Fn(&RunReport) + Sync)) -> Vec<SeedResult> {
    let next = AtomicU64::new(s.seeds.start);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..s.threads.max(1) {
            scope.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= s.seeds.end {
                    break;
                }
                let report = run_chain_seed(s, seed);
                let result = judge(&report, s.check, s.staleness_bound);
                if result.failure.is_some() {
                    keep(&report);
                }
                results.lock().expect("no panics while holding the lock").push(result);
            });
        }
    });
    let mut results = results.into_inner().expect("threads joined");
    results.sort_by_key(|r| r.seed);
    results
}
