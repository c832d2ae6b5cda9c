//! `meridian bench join`: seed 003 §4.2's join experiment on real processes. The seed added a node to a
//! loaded 20-node cluster (R=3, one virtual id per node) and saw the three nodes it pre-copied from lose a
//! third of their throughput while the other seventeen were unaffected. Meridian's goal (issue 4): nodes a
//! join does not involve keep at least 90% of their steady throughput, and the involved ones lose no more
//! than the migration bandwidth cap allows.
//!
//! The bench starts `nodes` `meridian server` processes on 127.0.0.1.., each in its own CPU cgroup with a
//! quota of `cpu_per_node` cores, so that nodes on one machine cannot take each other's CPU (`cgroup`,
//! `cluster`); preloads `keys` keys so that a join copies real data; then drives every node to its quota
//! with read clients that each send GETs to one node, for keys whose chain it is the tail of (`load`).
//! Once a second it reads every node's `/v1/cluster`: the count of reads it answered as tail, and the
//! chains with a step in flight (`monitor`, `sample`). At `join_at` it starts one more node with `--join`
//! and watches until the joiner is ACTIVE and no chain has a step in flight. Each node's reads/s before the
//! join and during it, and whether the join copied from it, make the report (`report`). Everything it
//! started (processes, cgroups, data) is stopped and removed when it ends, however it ends.

mod load;
mod monitor;
mod report;
mod sample;

pub use report::{JoinFigures, JoinReport, LoadFigures, NodeFigures, UNINVOLVED_GOAL};
pub use sample::PerSecond;

use crate::incompressible;
use crate::local::cgroup::CpuBudget;
use crate::local::{Cluster, MapView, Setup, WorkDir};
use load::{KeySets, Readers};
use meridian_core::config::VNODES_MAX;
use meridian_store::VALUE_MAX;
use monitor::Plan;
use report::Measured;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Seconds of load before the steady window starts (less if the join comes sooner): connections open and
/// the nodes' quotas settle into their periods.
const WARMUP_S: u32 = 3;
/// Nodes the bench may start: 127.0.0.1 up to .254, the joiner included.
const NODES_MAX: u32 = 253;
const CLIENTS_MAX: usize = 1024;
const KEYS_MAX: u64 = 10_000_000;
const DURATION_MAX_S: u32 = 3600;

#[derive(Clone, Debug)]
pub struct JoinBench {
    /// The `meridian` binary the nodes run.
    pub exe: PathBuf,
    /// The nodes' data and logs go in a subdirectory of this, removed at the end.
    pub dir: PathBuf,
    pub nodes: u32,
    pub replication: usize,
    pub vnodes: usize,
    pub keys: u64,
    pub value_bytes: usize,
    pub duration_s: u32,
    pub join_at_s: u32,
    pub clients: usize,
    pub cpu_per_node: f64,
    pub migration_mb_per_s: u64,
}

/// Why the join bench made no report.
#[derive(Debug, thiserror::Error)]
pub enum JoinBenchError {
    /// A setting is out of range: nothing was started.
    #[error("{0}")]
    Setting(String),
    /// Starting, loading or watching the nodes failed, or `stop` was set.
    #[error("{0}")]
    Run(String),
}

/// Runs the join experiment; `progress` hears what happens, a line per second under load. Returns early
/// with an error once `stop` is set.
pub fn run(bench: &JoinBench, progress: &mut dyn FnMut(&str), stop: &AtomicBool) -> Result<JoinReport, JoinBenchError> {
    check(bench).map_err(JoinBenchError::Setting)?;
    measure(bench, progress, stop).map_err(JoinBenchError::Run)
}

/// [`run`] once the settings are checked.
fn measure(bench: &JoinBench, progress: &mut dyn FnMut(&str), stop: &AtomicBool) -> Result<JoinReport, String> {
    // Declared before the cluster, so dropped after it: the data is removed once the processes are gone.
    let work = WorkDir::create(&bench.dir, "join")?;
    let budget = CpuBudget::detect(bench.cpu_per_node);
    if budget.is_none() {
        progress("warning: no cgroup cpu controller found: the nodes share this machine's CPUs, so the figures are not per-node");
    }
    let setup = Setup {
        exe: bench.exe.clone(),
        dir: work.0.clone(),
        replication: bench.replication,
        vnodes: bench.vnodes,
        migration_mb_per_s: bench.migration_mb_per_s,
    };
    progress(&format!("starting {} nodes", bench.nodes));
    let mut cluster = Cluster::start(setup, bench.nodes, budget, progress)?;
    let cgroup = cluster.budget().map(|b| b.version().name().to_string());
    let map = current_map(&cluster)?;
    let addrs = cluster.resp_addrs();

    let value = incompressible(bench.value_bytes);
    let preload_start = Instant::now();
    load::preload(&map, &addrs, bench.keys, &value, stop)?;
    let preload_seconds = preload_start.elapsed().as_secs_f64();
    progress(&format!("preloaded {} keys of {} B in {preload_seconds:.1} s", bench.keys, bench.value_bytes));

    // The map again: the chains' tails now, when the clients pick their node.
    let map = current_map(&cluster)?;
    let sets = Arc::new(KeySets::new(&map, bench.keys)?);
    let tails = sets.nodes();
    let clients_per_node: Vec<(u32, usize)> =
        tails.iter().enumerate().map(|(i, &node)| (node, (i..bench.clients).step_by(tails.len()).count())).collect();
    let bytes_per_chain = sets.bytes_per_chain(map.chains.len(), value.len());

    let joiner = bench.nodes + 1;
    let plan = Plan { joiner, join_round: bench.join_at_s, last_round: bench.duration_s };
    let start = Instant::now();
    // The clients outlive the last round by half a second, so that round still samples a loaded cluster.
    let until = start + Duration::from_secs(bench.duration_s.into()) + Duration::from_millis(500);
    let readers = Readers::start(&sets, &addrs, bench.clients, bench.value_bytes, until)?;
    let seen = monitor::observe(&mut cluster, &plan, &sets, start, stop, progress);
    let tally = readers.finish();
    let seen = seen?;
    let joiner_store_bytes = cluster.nodes.iter().find(|n| n.id == joiner).map_or(0, |n| n.store_bytes());
    drop(cluster);

    let measured = Measured {
        preload_seconds,
        cgroup,
        clients_per_node,
        bytes_per_chain,
        tally,
        joiner_store_bytes,
        steady: (WARMUP_S.min(bench.join_at_s / 2), bench.join_at_s),
        last_round: bench.duration_s,
    };
    Ok(JoinReport::new(bench, joiner, measured, &seen))
}

fn check(bench: &JoinBench) -> Result<(), String> {
    let in_range = |ok: bool, what: &str| if ok { Ok(()) } else { Err(what.to_string()) };
    in_range((3..=NODES_MAX).contains(&bench.nodes), "--nodes must be 3 (the manager's voters) to 253")?;
    in_range(
        (1..=bench.nodes as usize).contains(&bench.replication),
        "the replication must be between 1 and the node count",
    )?;
    in_range((1..=VNODES_MAX).contains(&bench.vnodes), &format!("--vnodes must be 1 to {VNODES_MAX}"))?;
    in_range((1..=KEYS_MAX).contains(&bench.keys), "--keys must be 1 to 10,000,000")?;
    in_range((1..=VALUE_MAX).contains(&bench.value_bytes), &format!("--value-bytes must be 1 to {VALUE_MAX}"))?;
    in_range(
        bench.join_at_s >= 2 && bench.join_at_s < bench.duration_s && bench.duration_s <= DURATION_MAX_S,
        "--join-at must be at least 2 and before --duration ends (at most 3600 s)",
    )?;
    in_range(
        (bench.nodes as usize..=CLIENTS_MAX).contains(&bench.clients),
        "--clients must be at least --nodes (one per node) and at most 1024",
    )?;
    in_range(bench.cpu_per_node > 0.0 && bench.cpu_per_node <= 64.0, "--cpu-per-node must be above 0 and at most 64")
}

/// The cluster map as the first node sees it.
fn current_map(cluster: &Cluster) -> Result<MapView, String> {
    MapView::read(cluster.nodes.first().ok_or("no node")?.http)
}
