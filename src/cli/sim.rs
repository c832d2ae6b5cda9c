//! `meridian sim`: many seeds of a protocol under a nemesis, each history checked. Prints one summary
//! line and exits non-zero, naming the seed, on any violation.

use super::protocol_args::ProtocolArgs;
use clap::Args;
use meridian_check::Staleness;
use meridian_core::keyspace::UnknownName;
use meridian_core::size::parse_size;
use meridian_core::topology::Topology;
use meridian_core::{DurabilityMode, KeyspaceConfig, Placement, Protocol, ProtocolConfig, ReplicaKind};
use meridian_proto::node::NodeConfig;
use meridian_sim::experiments::affiliates::AffiliatesExperiment;
use meridian_sim::experiments::geo::GeoExperiment;
use meridian_sim::experiments::globlease::GlobLeaseExperiment;
use meridian_sim::experiments::join::JoinExperiment;
use meridian_sim::experiments::meteor::MeteorExperiment;
use meridian_sim::nemesis::NemesisStats;
use meridian_sim::sweep::{sweep_chain, ChainSweep, CheckModel, SeedResult};
use meridian_sim::world::Traffic;
use meridian_sim::{parse_kinds, RunReport};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct SimArgs {
    /// The `default` keyspace's replication protocol: `chain`, `quorum`, `lease` or `meteor` (docs/protocols/). A lease
    /// keyspace has a replica in each of the topology's regions (in region `default` without --topology), its
    /// master in the first.
    #[arg(long, default_value = "chain")]
    protocol: String,
    #[command(flatten)]
    knobs: ProtocolArgs,
    /// Number of seeds to run.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// First seed; a single run is `--seed S --seeds 1`.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Comma-separated faults: crash (power loss), partition, pause, clock, join, leave, manager (the manager
    /// leader's power loss), kill (process crash; page cache kept), stop (a clean shutdown, then a power loss
    /// while the node is down), isolate (a node cut off from the others
    /// until the manager has moved its chains on; makes the fault phase longer), region (a region cut off),
    /// migrate (a lease keyspace's master moved to another of its regions), voters (other manager voters asked
    /// for) (empty for none).
    #[arg(long, default_value = "crash,partition,pause,clock")]
    nemesis: String,
    /// History check: linearizable, sequential (per key, one order of the writes every client's reads and
    /// writes respect in its own order; stale reads measured besides), staleness (the fraction of stale reads
    /// and the largest staleness), auto (what docs/keyspaces.md claims for the default keyspace's
    /// configuration) or none.
    #[arg(long, default_value = "linearizable")]
    check: String,
    /// With --check staleness or sequential: fail a run with a read that missed a write acknowledged longer
    /// than this many milliseconds before it began (a keyspace's documented staleness bound).
    #[arg(long)]
    bound_ms: Option<u64>,
    /// On a topology with regions that have no node: their clients talk to the nearest region's nodes rather than
    /// any node, so that every client stays in one region (what MeteorShower's θt > 0 assumes).
    #[arg(long)]
    clients_near: bool,
    /// Nodes of the initial cluster; three of them, spread over the topology's regions, run the manager.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Further nodes that the `join` nemesis starts (and that `leave` may take out, at most as many).
    #[arg(long, default_value_t = 2)]
    spares: usize,
    /// Affiliated nodes (lease keyspaces, seed 001 §4.1.4), started with the cluster, each joining as one of an
    /// initial node in turn; hosts give them the workload's keys after a few reads.
    #[arg(long, default_value_t = 0)]
    affiliates: usize,
    /// Replicas per key (chain length) of the `default` keyspace, all of type `log`.
    #[arg(long, default_value_t = 3, conflicts_with = "replicas")]
    replication: usize,
    /// Instead of --replication: the replica type of each chain position of `default`, head first, e.g.
    /// `mem,log` (M-D); their number is R.
    #[arg(long)]
    replicas: Option<String>,
    /// The `default` keyspace's update mode: `su` (acknowledged once every replica has a write), `ausi` (once
    /// the head has it and every other replica an invalidation of its key) or `au` (once the head has it).
    #[arg(long, default_value = "su", value_parser = ["su", "ausi", "au"])]
    update: String,
    /// Which member of `default`'s chains answers reads: `tail`, `mid` or `head`.
    #[arg(long, default_value = "tail", value_parser = ["tail", "mid", "head"])]
    read_from: String,
    /// Makes `default` a cache keyspace with this cap per node (e.g. 4k): heads evict the least recently
    /// written keys beyond it, and the check lets any value vanish, but never come back.
    #[arg(long, value_parser = parse_size)]
    maxmemory: Option<u64>,
    /// The `default` keyspace's durability mode: sync, group or async (default: the node's, group). Async
    /// loses acknowledged writes on power loss, so it runs only with nemeses without crash and manager.
    #[arg(long)]
    durability: Option<DurabilityMode>,
    #[arg(long, default_value_t = 4)]
    vnodes: usize,
    /// Worker threads the seeds are spread over (default: one per core). Each seed runs alone on one thread, so
    /// its result and trace hash are the same whatever the number.
    #[arg(long, visible_alias = "jobs")]
    threads: Option<usize>,
    /// Where to write the history of the lowest failing seed (JSON lines).
    #[arg(long)]
    history_out: Option<PathBuf>,
    /// Print one line per seed with its trace hash.
    #[arg(long)]
    verbose: bool,
    /// Print every input each node handles (messages, timers, client requests) and every fault, with its virtual
    /// time in microseconds, to stderr: a failing seed's story. Only with `--seeds 1`.
    #[arg(long)]
    trace: bool,
    /// Place the nodes in a topology's regions, node k in region k mod n, with its round trips, jitter and
    /// bandwidths (a preset, such as canopus-7, or a TOML file: docs/regions.md), instead of a network drawn per
    /// seed.
    #[arg(long)]
    topology: Option<String>,
    /// Run an experiment instead of correctness seeds: `join` (seed 003 §4.2, throughput of every node while a
    /// node joins; uses --seed and --nodes) or `geo` (read and write latency per client region of a chain
    /// keyspace and of quorum keyspaces at ONE, QUORUM and ALL; needs --topology, uses --seed, and --nodes
    /// for the nodes per region when it is at least the topology's regions) or `globlease` (seed 001 §4.1.5: a
    /// lease keyspace against the seed's quorum baselines under open-loop YCSB-style mixes; --topology defaults
    /// to globlease-4; uses --seed, --lease-ms, --write-mode, --rate and --kill-master-after) or `affiliates` (seed
    /// 001 §4.1.5, Fig. 4.10: Zipf-4 reads jumping from 400 to 1,800 req/s, with and without affiliated nodes
    /// started at the jump, on nodes of finite capacity; --topology defaults to globlease-4; uses --seed) or
    /// `meteor` (seed 001 §4.2.5: read and write latency of quorum reads, MeteorShower1 and MeteorShower2 on three
    /// datacenters 10 to 150 ms apart one way, then at Ireland, Virginia and Tokyo; uses --seed).
    #[arg(long, value_parser = ["join", "geo", "globlease", "affiliates", "meteor"])]
    experiment: Option<String>,
    /// With --experiment globlease: requests per second, all clients together (the seed's 100 to 2,500; default
    /// 1,000).
    #[arg(long)]
    rate: Option<f64>,
    /// With --experiment globlease: kill the master region's node this many seconds into the measured time, and
    /// report per region how long until reads and writes succeed again and how long the reads caught took.
    #[arg(long)]
    kill_master_after: Option<f64>,
    /// With --experiment: where to write the plot (SVG).
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Also print the messages the nodes sent, by kind: how many, their bytes, and bytes per second of
    /// simulated time per node of the initial cluster.
    #[arg(long)]
    traffic: bool,
}

pub fn run(args: SimArgs) -> Result<ExitCode, String> {
    let globlease_only = [("--rate", args.rate.is_some()), ("--kill-master-after", args.kill_master_after.is_some())];
    if let Some((flag, _)) = globlease_only.iter().find(|(_, given)| *given) {
        if args.experiment.as_deref() != Some("globlease") {
            return Err(format!("{flag} is a setting of --experiment globlease, which this run is not"));
        }
    }
    match args.experiment.as_deref() {
        Some("join") => return join_experiment(&args),
        Some("globlease") => return globlease_experiment(&args),
        Some("affiliates") => return affiliates_experiment(&args),
        Some("meteor") => return meteor_experiment(&args),
        Some(_) => return geo_experiment(&args),
        None => {}
    }
    let topology = args.topology.as_deref().map(Topology::load).transpose().map_err(|e| e.to_string())?.map(Arc::new);
    let protocol = protocol_config(&args)?;
    let mut replicas = super::node::default_replicas(args.replicas.as_deref(), args.replication, ReplicaKind::Log)?;
    let placement = match protocol.protocol() {
        Protocol::Lease => lease_placement(topology.as_deref(), replicas.len()),
        _ => Placement::default(),
    };
    if let Some(n) = placement.placed() {
        replicas = vec![ReplicaKind::Log; n as usize];
    }
    let default = KeyspaceConfig {
        update: args.update.parse().map_err(|e: UnknownName| e.to_string())?,
        read_from: args.read_from.parse().map_err(|e: UnknownName| e.to_string())?,
        maxmemory: args.maxmemory,
        durability: args.durability,
        protocol,
        placement,
        ..KeyspaceConfig::with_replicas(replicas)
    };
    default.validate().map_err(|e| e.to_string())?;
    let nemesis = parse_kinds(&args.nemesis).map_err(|e| e.to_string())?;
    if default.durability == Some(DurabilityMode::Async) && nemesis.iter().any(|k| k.is_power_loss()) {
        return Err("async durability may lose acknowledged writes on a power loss (docs/durability.md), which \
                    `crash` and `manager` are; run it under `kill` (a process crash) instead"
            .into());
    }
    if args.trace && args.seeds != 1 {
        return Err("--trace prints every step of one run; give it --seeds 1".into());
    }
    let check = match args.check.as_str() {
        "auto" => CheckModel::claimed(&default),
        other => other.parse::<CheckModel>().map_err(|e| e.to_string())?,
    };
    if args.bound_ms.is_some() && !matches!(check, CheckModel::Staleness | CheckModel::Sequential) {
        return Err(format!("--bound-ms judges stale reads, which --check {check} does not measure"));
    }
    if args.clients_near && topology.is_none() {
        return Err("--clients-near places clients by a topology's regions; give --topology".into());
    }
    let sweep = ChainSweep {
        seeds: args.seed..args.seed.checked_add(args.seeds).ok_or("--seed + --seeds overflows")?,
        nemesis,
        check,
        nodes: args.nodes,
        spares: args.spares,
        affiliates: args.affiliates,
        default,
        vnodes: args.vnodes,
        node: NodeConfig::default(),
        threads: args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        trace: args.trace,
        topology,
        staleness_bound: args.bound_ms.map(Duration::from_millis),
        clients_near: args.clients_near,
    };
    meridian_sim::protocols::cluster(args.nodes, &sweep.default, args.vnodes).map_err(|e| e.to_string())?;
    let saved = std::sync::Mutex::new(None);
    let keep = |report: &RunReport| save_history(&args.history_out, report, &saved);
    let results = sweep_chain(&sweep, &keep);
    if args.verbose || args.seeds == 1 {
        results.iter().for_each(print_seed);
    }
    Ok(summarize(&args, &sweep, &results))
}

/// A lease keyspace's placement in the simulator: a replica in each of the topology's regions, in its order (the
/// first the master region), or all `replicas` in region `default` without a topology.
fn lease_placement(topology: Option<&Topology>, replicas: usize) -> Placement {
    let regions = match topology {
        Some(t) => t.regions().iter().map(|r| (r.name.clone(), 1)).collect(),
        None => vec![(meridian_core::location::DEFAULT_REGION.to_string(), replicas as u32)],
    };
    Placement { regions, banned: Vec::new() }
}

/// The `default` keyspace's protocol and its knobs, as the options give them. A meteor keyspace's clock bound
/// defaults to what the simulator's wall clocks keep to (each within ±`WALL_ERROR_MS` of true time), so that the
/// `clock` nemesis stays within its model unless the bound is given.
fn protocol_config(args: &SimArgs) -> Result<ProtocolConfig, String> {
    let protocol: Protocol = args.protocol.parse().map_err(|e: UnknownName| e.to_string())?;
    let wall_spread_ms = 2 * meridian_sim::clock::WALL_ERROR_MS as u32;
    let clock_bound_ms = args.knobs.clock_bound_ms.or((protocol == Protocol::Meteor).then_some(wall_spread_ms));
    ProtocolConfig::from_options(protocol, &meridian_core::ProtocolKnobs { clock_bound_ms, ..args.knobs.knobs() })
        .map_err(|e| e.to_string())
}

fn print_seed(r: &SeedResult) {
    let verdict = if r.failure.is_some() { "FAIL" } else { "ok" };
    println!(
        "seed {} trace {:016x} ops {} unknown {} failed {} events {} crashes {} {verdict}",
        r.seed, r.trace_hash, r.ops, r.unknown, r.failed, r.events, r.crashes
    );
}

/// Writes the history of the lowest failing seed seen so far, so that what the file holds does not depend on
/// which worker finished first.
fn save_history(path: &Option<PathBuf>, report: &RunReport, saved: &std::sync::Mutex<Option<u64>>) {
    let Some(path) = path else { return };
    let mut lowest = saved.lock().expect("lock");
    if lowest.is_some_and(|seed| seed <= report.seed) {
        return;
    }
    match std::fs::File::create(path).map(std::io::BufWriter::new) {
        Ok(f) => match report.history.write_jsonl(f) {
            Ok(()) => *lowest = Some(report.seed),
            Err(e) => eprintln!("cannot write {}: {e}", path.display()),
        },
        Err(e) => eprintln!("cannot create {}: {e}", path.display()),
    }
}

fn summarize(args: &SimArgs, sweep: &ChainSweep, results: &[SeedResult]) -> ExitCode {
    let failures: Vec<&SeedResult> = results.iter().filter(|r| r.failure.is_some()).collect();
    let ops: usize = results.iter().map(|r| r.ops).sum();
    let unknown: usize = results.iter().map(|r| r.unknown).sum();
    let reads: usize = results.iter().map(|r| r.reads).sum();
    let crashes: u64 = results.iter().map(|r| r.crashes).sum();
    let sum = |name: &str| results.iter().map(|r| r.counters.get(name).copied().unwrap_or(0)).sum::<u64>();
    let compactions = sum("compactions");
    let (precopies, flushes, left) = (sum("pre-copies"), sum("flushes"), sum("chains left"));
    let (keyspaces, elsewhere) = (sum("keyspaces created"), sum("operations outside default"));
    let (lost, aside) = (sum("replicas lost"), sum("keys of restored chains"));
    let (expired, evicted) = (sum("keys expired"), sum("keys evicted"));
    let overdue = sum("reads that waited for an expiry");
    let (pages, absent) = (sum("scan pages answered"), sum("keys scans found absent"));
    let present = sum("keys scans found present");
    let (nx_applied, nx_refused) = (sum("SET NX applied"), sum("SET NX refused"));
    let at_once = sum("writes answered at once");
    let nem = |f: fn(&NemesisStats) -> u64| results.iter().map(|r| f(&r.nemesis)).sum::<u64>();
    let (joins, leaves, managers, kills, stops) =
        (nem(|n| n.joins), nem(|n| n.leaves), nem(|n| n.manager_crashes), nem(|n| n.kills), nem(|n| n.stops));
    let isolations = nem(|n| n.isolations);
    let (region_cuts, migrations, key_moves) = (nem(|n| n.region_cuts), nem(|n| n.migrations), nem(|n| n.key_moves));
    let voter_moves = nem(|n| n.voter_moves);
    println!(
        "sim {} replicas {} update {} read from {} nemesis [{}] check {}: {} seeds ({}..{}), {} violations; {ops} ops ({reads} successful reads, {unknown} unknown outcomes), {crashes} crashes, {kills} kills, {stops} clean stops, {isolations} isolations, {region_cuts} region cuts, {migrations} master region moves, {key_moves} key master moves and {voter_moves} voter sets asked, {compactions} log compactions; {joins} joins, {leaves} leaves, {managers} manager leader crashes; {precopies} pre-copies, {flushes} flushes, {left} chains left; {keyspaces} keyspaces created, {elsewhere} successful operations outside default; {lost} replicas lost to restarts, {aside} keys of restored chains left unchecked; {expired} keys expired ({overdue} reads waited for one), {evicted} evicted; {pages} SCAN pages answered, {absent} keys they found absent and {present} present; {nx_applied} SET NX applied, {nx_refused} refused; {at_once} writes answered at once",
        args.protocol,
        sweep.default.replicas_text(),
        sweep.default.update,
        sweep.default.read_from,
        args.nemesis,
        sweep.check,
        results.len(),
        args.seed,
        args.seed + args.seeds,
        failures.len(),
    );
    let others = other_counters(results);
    if !others.is_empty() {
        println!("also: {others}");
    }
    let measured = results.iter().any(|r| r.staleness.is_some());
    if let Some(stale) = measured.then(|| results.iter().filter_map(|r| r.staleness.clone()).sum::<Staleness>()) {
        println!(
            "staleness: {} of {} successful reads stale ({:.4}%), the stalest missed a write acknowledged {:.1} ms before it began",
            stale.stale,
            stale.reads,
            stale.fraction() * 100.0,
            stale.max_ns as f64 / 1e6
        );
    }
    if args.traffic {
        print!("{}", traffic(results, args.nodes));
    }
    let Some(first) = failures.first() else { return ExitCode::SUCCESS };
    let seeds: Vec<String> = failures.iter().map(|r| r.seed.to_string()).collect();
    println!("FAILED seeds: {}", seeds.join(", "));
    println!("seed {}: {}", first.seed, first.failure.as_deref().unwrap_or_default());
    println!(
        "reproduce: meridian sim --protocol {}{} --seed {} --seeds 1 --nodes {} --spares {} --affiliates {} --vnodes {} \
         --replicas {} --update {} --read-from {}{}{}{} --nemesis {} --check {}{}{}",
        args.protocol,
        args.topology.as_ref().map_or(String::new(), |t| format!(" --topology {t}")),
        first.seed,
        args.nodes,
        args.spares,
        args.affiliates,
        args.vnodes,
        sweep.default.replicas_text(),
        sweep.default.update,
        sweep.default.read_from,
        sweep.default.maxmemory.map_or(String::new(), |m| format!(" --maxmemory {m}")),
        sweep.default.durability.map_or(String::new(), |m| format!(" --durability {m}")),
        sweep.default.protocol.as_args(),
        args.nemesis,
        sweep.check,
        args.bound_ms.map_or(String::new(), |b| format!(" --bound-ms {b}")),
        if args.clients_near { " --clients-near" } else { "" },
    );
    ExitCode::FAILURE
}

/// The counters the summary line does not name (a protocol's own), summed over the seeds; those that stayed 0
/// are left out, since every node runs every protocol's core and most count nothing in a run of one protocol.
fn other_counters(results: &[SeedResult]) -> String {
    const NAMED: &[&str] = &[
        "compactions",
        "segments",
        "pre-copies",
        "flushes",
        "chains left",
        "keyspaces created",
        "operations outside default",
        "replicas lost",
        "keys of restored chains",
        "keys expired",
        "keys evicted",
        "reads that waited for an expiry",
        "scan pages answered",
        "keys scans found absent",
        "keys scans found present",
        "SET NX applied",
        "SET NX refused",
        "writes answered at once",
        "reads served",
        "writes committed",
    ];
    let mut sums: BTreeMap<&str, u64> = BTreeMap::new();
    for (&name, &n) in results.iter().flat_map(|r| &r.counters).filter(|(name, _)| !NAMED.contains(name)) {
        *sums.entry(name).or_default() += n;
    }
    sums.iter().filter(|(_, n)| **n > 0).map(|(name, n)| format!("{n} {name}")).collect::<Vec<_>>().join(", ")
}

/// The messages of every run, by kind, with their rate per node of the initial cluster.
fn traffic(results: &[SeedResult], nodes: usize) -> String {
    let mut kinds: BTreeMap<&str, Traffic> = BTreeMap::new();
    for (kind, t) in results.iter().flat_map(|r| &r.traffic) {
        let sum = kinds.entry(kind).or_default();
        sum.messages += t.messages;
        sum.bytes += t.bytes;
    }
    let node_seconds = results.iter().map(|r| r.elapsed_ns as f64 / 1e9).sum::<f64>() * nodes.max(1) as f64;
    let mut out = String::from("traffic: kind, messages, bytes, mean bytes per message, bytes per second per node\n");
    for (kind, t) in kinds {
        let per_message = t.bytes as f64 / t.messages.max(1) as f64;
        let rate = t.bytes as f64 / node_seconds.max(f64::MIN_POSITIVE);
        out += &format!("  {kind:<10} {:>12} {:>14} {per_message:>10.1} {rate:>12.1}\n", t.messages, t.bytes);
    }
    out
}

fn join_experiment(args: &SimArgs) -> Result<ExitCode, String> {
    let x = JoinExperiment { seed: args.seed, nodes: args.nodes.max(4), ..JoinExperiment::default() };
    let report = meridian_sim::experiments::join::run(&x).map_err(|e| e.to_string())?;
    print!("{}", report.table(&x));
    write_svg(args, &report.svg())
}

fn geo_experiment(args: &SimArgs) -> Result<ExitCode, String> {
    let name = args.topology.as_deref().ok_or("--experiment geo needs --topology PRESET|FILE (e.g. globlease-4)")?;
    let topology = Arc::new(Topology::load(name).map_err(|e| e.to_string())?);
    let regions = topology.regions().len();
    let x =
        GeoExperiment { nodes_per_region: (args.nodes / regions).max(1), ..GeoExperiment::new(args.seed, topology) };
    let report = meridian_sim::experiments::geo::run(&x).map_err(|e| e.to_string())?;
    print!("{}", report.table(&x));
    write_svg(args, &report.svg())
}

/// `--experiment globlease`'s requests per second without `--rate`.
const GLOBLEASE_RATE: f64 = 1000.0;

fn globlease_experiment(args: &SimArgs) -> Result<ExitCode, String> {
    let topology =
        Arc::new(Topology::load(args.topology.as_deref().unwrap_or("globlease-4")).map_err(|e| e.to_string())?);
    let rate = args.rate.unwrap_or(GLOBLEASE_RATE);
    if !(rate > 0.0 && rate.is_finite()) {
        return Err(format!("--rate must be a positive number of requests per second, not {rate}"));
    }
    let mut x = GlobLeaseExperiment { rate, ..GlobLeaseExperiment::new(args.seed, topology) };
    if let Some(ms) = args.knobs.lease_ms {
        x.lease = std::time::Duration::from_millis(ms.into());
    }
    if let Some(mode) = &args.knobs.write_mode {
        x.write_mode = mode.clone();
    }
    if let Some(secs) = args.kill_master_after {
        if !(secs >= 0.0 && secs < x.measure.as_secs_f64()) {
            return Err(format!("--kill-master-after must be from 0 to {:?}, not {secs}", x.measure));
        }
        x.kill_master_after = Some(std::time::Duration::from_secs_f64(secs));
    }
    let report = meridian_sim::experiments::globlease::run(&x).map_err(|e| e.to_string())?;
    print!("{}", report.table(&x));
    write_svg(args, &report.svg(&x))
}

fn affiliates_experiment(args: &SimArgs) -> Result<ExitCode, String> {
    let topology =
        Arc::new(Topology::load(args.topology.as_deref().unwrap_or("globlease-4")).map_err(|e| e.to_string())?);
    let x = AffiliatesExperiment::new(args.seed, topology);
    let report = meridian_sim::experiments::affiliates::run(&x).map_err(|e| e.to_string())?;
    print!("{}", report.table(&x));
    write_svg(args, &report.svg(&x))
}

fn meteor_experiment(args: &SimArgs) -> Result<ExitCode, String> {
    let x = MeteorExperiment::new(args.seed);
    let report = meridian_sim::experiments::meteor::run(&x).map_err(|e| e.to_string())?;
    print!("{}", report.table(&x));
    write_svg(args, &report.svg())
}

fn write_svg(args: &SimArgs, svg: &str) -> Result<ExitCode, String> {
    if let Some(path) = &args.svg {
        std::fs::write(path, svg).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("plot: {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
