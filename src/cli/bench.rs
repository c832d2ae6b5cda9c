//! `meridian bench`: measurements on the machine at hand (crate `meridian-bench`). `bench store` measures
//! the datastores under each durability mode beside the disk's own bandwidth and fsync latency; `bench join`
//! measures real node processes' read throughput while a node joins (seed 003 §4.2); `bench keyspaces`
//! measures put latency, memory and M-D recovery of keyspace configurations on real processes (seed 003 §5.3);
//! `bench ycsb` drives any RESP server (Meridian, redis-server) or memcached with YCSB's core workloads.

use clap::{Args, Subcommand};
use meridian_bench::join::JoinBench;
use meridian_bench::keyspaces::KeyspacesBench;
use meridian_bench::ycsb::{Protocol, TlsClient, TlsFiles, Workload, YcsbBench};
use meridian_bench::{Limits, StoreBench, DEFAULT_WRITERS, VALUE_SIZES};
use meridian_core::config::DEFAULT_REPLICATION;
use meridian_core::size::parse_size;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: BenchCommand,
}

#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// Put and get throughput and latency of the mem and log stores in each durability mode, beside the
    /// disk's raw sequential write bandwidth and fsync latency measured in the same directory.
    Store(StoreArgs),
    /// Reads/s of each node of a local cluster of `meridian server` processes, each under its own CPU quota,
    /// before and while a node joins (seed 003 §4.2's join experiment).
    Join(JoinArgs),
    /// Put latency and rate of M-M, M-D and D-D keyspaces under su, ausi and au; resident memory of M-M
    /// beside M-D holding the same data; and M-D recovery time against data size, on local `meridian server`
    /// processes (seed 003 §5.3, issue 5).
    Keyspaces(KeyspacesArgs),
    /// YCSB's core workloads (a-f) over RESP against any server (redis-server, `meridian demo`, `meridian
    /// server` nodes) or over memcached's text protocol: a load phase and a run phase, closed loop or open loop
    /// at a fixed rate, with each operation type's latency percentiles (docs/load-testing.md).
    // Boxed: its many flags would make every variant as large.
    Ycsb(Box<YcsbArgs>),
}

#[derive(Args, Debug)]
pub struct YcsbArgs {
    /// The server to measure, HOST:PORT (redis-server's default port is 6379, `meridian demo`'s first node
    /// 6380, memcached's 11211). Repeatable or comma-separated: connections are spread evenly over the servers,
    /// as over a cluster's nodes.
    #[arg(long, value_delimiter = ',', default_value = "127.0.0.1:6380")]
    addr: Vec<String>,
    /// What the servers speak: `resp` (Redis, Meridian) or `memcache` (memcached's text protocol; records of
    /// one field only, set and get).
    #[arg(long, default_value = "resp", value_parser = ["resp", "memcache"])]
    protocol: String,
    /// The Redis database every connection selects first (`SELECT n`): in Meridian the keyspace `db<n>`, made
    /// with the default settings if it does not exist yet (docs/keyspaces.md). RESP only.
    #[arg(long)]
    db: Option<u32>,
    /// YCSB's core workload: a (50% read, 50% update, zipfian), b (95% read, 5% update), c (reads only), d (95%
    /// read, 5% insert, latest records first), e (scans: refused, see docs/load-testing.md), f (50% read, 50%
    /// read-modify-write).
    #[arg(long, default_value = "a", value_parser = ["a", "b", "c", "d", "e", "f"])]
    workload: String,
    /// A YCSB properties file (`name=value` lines, as YCSB's `workloads/workloada`), applied over the workload;
    /// repeatable.
    #[arg(short = 'P', long = "properties", value_name = "FILE")]
    properties: Vec<PathBuf>,
    /// One YCSB property, `name=value` (recordcount, operationcount, fieldcount, readproportion, ...), applied
    /// over the files; repeatable.
    #[arg(short = 'p', long = "property", value_name = "NAME=VALUE")]
    property: Vec<String>,
    /// Which phases run: `load` (insert the records), `run` (the workload's operations on loaded records) or
    /// `both`.
    #[arg(long, default_value = "both", value_parser = ["load", "run", "both"])]
    phase: String,
    /// Records loaded, and chosen among by the run (recordcount; default 1000).
    #[arg(long)]
    records: Option<u64>,
    /// Operations of the run phase at most (operationcount). The run needs this, --duration or both.
    #[arg(long)]
    operations: Option<u64>,
    /// Seconds of the run phase at most (maxexecutiontime).
    #[arg(long)]
    duration: Option<f64>,
    /// Connections, each a tokio task (threadcount; default 16).
    #[arg(long)]
    clients: Option<usize>,
    /// Commands each connection keeps in flight.
    #[arg(long, default_value_t = 1)]
    pipeline: usize,
    /// Open loop: the run phase sends this many operations per second on a schedule fixed in advance, and
    /// times each from when it was due (target). Without it, the loop is closed.
    #[arg(long)]
    rate: Option<f64>,
    /// Fields per record (fieldcount; default 1): one field is a string (SET, GET), more a hash (HSET,
    /// HGETALL, HMGET).
    #[arg(long)]
    field_count: Option<usize>,
    /// Bytes per field (fieldlength; default 100).
    #[arg(long)]
    field_length: Option<usize>,
    /// Which records reads and updates choose (requestdistribution): uniform, zipfian or latest.
    #[arg(long, value_parser = ["uniform", "zipfian", "latest"])]
    distribution: Option<String>,
    /// The skew of the zipfian and latest distributions (zipfianconstant; default YCSB's 0.99): record k of
    /// popularity rank k drawn with probability proportional to 1/k^s. Above 1, a few records take nearly every
    /// operation (GlobLease's skewed workload uses 4).
    #[arg(long)]
    zipfian_constant: Option<f64>,
    /// Threads of the load generator's runtime.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Connect over TLS, checking the server's certificate against --cacert (as `redis-cli --tls`). RESP only.
    #[arg(long, requires = "cacert")]
    tls: bool,
    /// With --tls: the CA certificates (PEM) the server's certificate must be signed by.
    #[arg(long, value_name = "FILE", requires = "tls")]
    cacert: Option<PathBuf>,
    /// With --tls: this client's certificate (PEM), for servers that ask for one.
    #[arg(long, value_name = "FILE", requires_all = ["tls", "key"])]
    cert: Option<PathBuf>,
    /// With --tls: the client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires_all = ["tls", "cert"])]
    key: Option<PathBuf>,
    /// Also write the figures to this file as CSV, a line per phase and operation type.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Also write every figure to this file as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct StoreArgs {
    /// Where to put the stores and test files (default: a temporary directory, removed afterwards).
    /// Measure on the disk you mean to run on.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 2.0)]
    duration: f64,
    /// Bytes per measurement at most (keys and values; the raw test writes at most 256 MiB).
    /// Accepts K, M and G suffixes (powers of 1024).
    #[arg(long, default_value = "256M", value_parser = parse_size)]
    max_bytes: u64,
    /// Concurrent writers handing puts to the committer.
    #[arg(long, default_value_t = DEFAULT_WRITERS)]
    writers: usize,
    /// Also write every figure to this file as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct JoinArgs {
    /// Nodes the cluster starts with (on 127.0.0.1 and up); one more joins.
    #[arg(long, default_value_t = 4)]
    nodes: u32,
    /// Replicas per key (chain length).
    #[arg(long, default_value_t = DEFAULT_REPLICATION)]
    replication: usize,
    /// Ring points per node. The seed's experiment has one, so a join copies from three nodes and leaves
    /// the others alone; with more, a join touches most nodes' chains.
    #[arg(long, default_value_t = 1)]
    vnodes: usize,
    /// Keys preloaded before the load, so that the join copies real data.
    #[arg(long, default_value_t = 50_000)]
    keys: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 256)]
    value_bytes: usize,
    /// Seconds of read load.
    #[arg(long, default_value_t = 40)]
    duration: u32,
    /// Second of the load at which the new node starts.
    #[arg(long, default_value_t = 15)]
    join_at: u32,
    /// Read clients, each with its own connection, spread evenly over the nodes.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Each node's CPU quota in cores (a cgroup per node), as if each ran on its own machine.
    #[arg(long, default_value_t = 0.25)]
    cpu_per_node: f64,
    /// How fast the joining node copies each chain, in MB/s (the nodes' --migration-mb-per-s).
    #[arg(long, default_value_t = 64)]
    migration_mb_per_s: u64,
    #[command(flatten)]
    out: NodesOut,
}

#[derive(Args, Debug)]
pub struct KeyspacesArgs {
    /// Nodes in each cluster (on 127.0.0.1 and up); keyspaces have two replicas.
    #[arg(long, default_value_t = 3)]
    nodes: u32,
    /// Seconds each put cell (chain, update mode, value size) is timed, after one second of warm-up.
    #[arg(long, default_value_t = 5)]
    duration: u32,
    /// Write clients, each with its own connection and one SET in flight.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Value sizes of the put matrix, in bytes; the largest also fills the memory and recovery keyspaces.
    #[arg(long, value_delimiter = ',', default_value = "100,10240")]
    values: Vec<usize>,
    /// MiB of values in the M-M and in the M-D keyspace whose resident memory is compared.
    #[arg(long, default_value_t = 64)]
    rss_mb: u64,
    /// MiB of values in the M-D keyspace of each recovery, one recovery per size.
    #[arg(long, value_delimiter = ',', default_value = "8,32,128")]
    recovery_mb: Vec<u64>,
    /// How fast a node copies each chain, in MB/s (the nodes' --migration-mb-per-s): what bounds how fast a
    /// lost memory replica is copied back.
    #[arg(long, default_value_t = 64)]
    migration_mb_per_s: u64,
    #[command(flatten)]
    out: NodesOut,
}

/// Where a bench of node processes keeps their data, and where it writes its figures.
#[derive(Args, Debug)]
pub struct NodesOut {
    /// Where the nodes keep their data (default: a temporary directory); removed afterwards.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Also write every figure to this file as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub fn run(args: BenchArgs) -> Result<ExitCode, String> {
    match args.what {
        BenchCommand::Store(store) => run_store(store),
        BenchCommand::Join(join) => run_join(join),
        BenchCommand::Keyspaces(keyspaces) => run_keyspaces(keyspaces),
        BenchCommand::Ycsb(ycsb) => run_ycsb(*ycsb),
    }
}

/// The directory to work in: `dir`, or a temporary one that lives as long as the returned guard.
fn work_dir(dir: &Option<PathBuf>) -> Result<(PathBuf, Option<tempfile::TempDir>), String> {
    match dir {
        Some(dir) => Ok((dir.clone(), None)),
        None => {
            let temp = tempfile::Builder::new().prefix("meridian-bench-").tempdir().map_err(|e| e.to_string())?;
            Ok((temp.path().to_path_buf(), Some(temp)))
        }
    }
}

/// Prints `report`'s tables, and writes it as JSON to `json` if given.
fn print_report(
    report: &(impl std::fmt::Display + serde::Serialize),
    json: &Option<PathBuf>,
) -> Result<ExitCode, String> {
    println!("{report}");
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn run_store(args: StoreArgs) -> Result<ExitCode, String> {
    // Checked here because a negative or NaN duration cannot even be built; the bench checks the rest.
    if !(args.duration > 0.0 && args.duration <= 600.0) {
        return Err("--duration must be more than 0 and at most 600 seconds".into());
    }
    let (dir, _temp) = work_dir(&args.dir)?;
    let bench = StoreBench {
        dir,
        writers: args.writers,
        value_sizes: VALUE_SIZES.to_vec(),
        limits: Limits { duration: Duration::from_secs_f64(args.duration), max_bytes: args.max_bytes },
    };
    let report = meridian_bench::run(&bench, &mut |line| eprintln!("{line}")).map_err(|e| e.to_string())?;
    print_report(&report, &args.json)
}

fn run_join(args: JoinArgs) -> Result<ExitCode, String> {
    on_nodes(&args.out, |exe, dir, stop| {
        let bench = JoinBench {
            exe,
            dir,
            nodes: args.nodes,
            replication: args.replication,
            vnodes: args.vnodes,
            keys: args.keys,
            value_bytes: args.value_bytes,
            duration_s: args.duration,
            join_at_s: args.join_at,
            clients: args.clients,
            cpu_per_node: args.cpu_per_node,
            migration_mb_per_s: args.migration_mb_per_s,
        };
        meridian_bench::join::run(&bench, &mut |line| eprintln!("{line}"), stop).map_err(|e| e.to_string())
    })
}

fn run_keyspaces(args: KeyspacesArgs) -> Result<ExitCode, String> {
    on_nodes(&args.out, |exe, dir, stop| {
        let bench = KeyspacesBench {
            exe,
            dir,
            nodes: args.nodes,
            clients: args.clients,
            duration_s: args.duration,
            values: args.values,
            rss_mb: args.rss_mb,
            recovery_mb: args.recovery_mb,
            migration_mb_per_s: args.migration_mb_per_s,
        };
        meridian_bench::keyspaces::run(&bench, &mut |line| eprintln!("{line}"), stop)
    })
}

fn run_ycsb(args: YcsbArgs) -> Result<ExitCode, String> {
    let bench = YcsbBench {
        addrs: args.addr.iter().map(|a| resolve(a)).collect::<Result<_, _>>()?,
        protocol: Protocol::parse_name(&args.protocol).map_err(|e| e.to_string())?,
        db: args.db,
        workload: ycsb_workload(&args)?,
        load: args.phase != "run",
        run: args.phase != "load",
        pipeline: args.pipeline,
        threads: args.threads,
        tls: ycsb_tls(&args)?,
    };
    let report = meridian_bench::ycsb::run(&bench, &mut |line| eprintln!("{line}")).map_err(|e| e.to_string())?;
    if let Some(path) = &args.csv {
        std::fs::write(path, report.csv()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    let (errors, first) = report.errors();
    if errors > 0 {
        eprintln!("{errors} operations failed; the first: {}", first.unwrap_or("?"));
    }
    print_report(&report, &args.json)
}

/// The TLS client of --tls, its files read and checked.
fn ycsb_tls(args: &YcsbArgs) -> Result<Option<TlsClient>, String> {
    let Some(ca) = args.cacert.clone().filter(|_| args.tls) else { return Ok(None) };
    let identity = args.cert.clone().zip(args.key.clone());
    TlsFiles { ca, identity }.load().map(Some).map_err(|e| format!("--tls: {e}"))
}

/// The workload: the preset, then the properties files, then single properties, then the flags.
fn ycsb_workload(args: &YcsbArgs) -> Result<Workload, String> {
    let mut w = Workload::preset(args.workload.chars().next().unwrap_or('a')).map_err(|e| e.to_string())?;
    for file in &args.properties {
        w.apply_file(file).map_err(|e| e.to_string())?;
    }
    for property in &args.property {
        w.apply(property).map_err(|e| format!("-p {e}"))?;
    }
    let flags = [
        args.records.map(|n| format!("recordcount={n}")),
        args.operations.map(|n| format!("operationcount={n}")),
        args.clients.map(|n| format!("threadcount={n}")),
        args.field_count.map(|n| format!("fieldcount={n}")),
        args.field_length.map(|n| format!("fieldlength={n}")),
        args.distribution.as_ref().map(|d| format!("requestdistribution={d}")),
        args.zipfian_constant.map(|s| format!("zipfianconstant={s}")),
    ];
    for property in flags.into_iter().flatten() {
        w.apply(&property).map_err(|e| e.to_string())?;
    }
    // Fractions of a second and of an operation per second are kept, which YCSB's whole-number properties
    // would not.
    if let Some(seconds) = args.duration {
        if !(seconds > 0.0 && seconds.is_finite()) {
            return Err("--duration must be a positive number of seconds".into());
        }
        w.max_execution_time = Some(Duration::from_secs_f64(seconds.min(1e9)));
    }
    if let Some(rate) = args.rate {
        w.target = Some(rate);
    }
    Ok(w)
}

/// `HOST:PORT` as an address, the first the name resolves to.
fn resolve(addr: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    addr.to_socket_addrs()
        .map_err(|e| format!("--addr {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("--addr {addr}: resolves to no address"))
}

/// Runs a bench of node processes and prints its report: `run` gets the binary the nodes run (this one), the
/// directory for their data (`out.dir`, or a temporary one), and the flag that Ctrl-C or SIGTERM sets.
fn on_nodes<R: std::fmt::Display + serde::Serialize>(
    out: &NodesOut,
    run: impl FnOnce(PathBuf, PathBuf, &AtomicBool) -> Result<R, String>,
) -> Result<ExitCode, String> {
    let (dir, _temp) = work_dir(&out.dir)?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the meridian binary: {e}"))?;
    let stop = interrupt_flag()?;
    let report = run(exe, dir, &stop)?;
    print_report(&report, &out.json)
}

/// Set on Ctrl-C or SIGTERM instead of dying at once, so the bench stops its node processes and removes
/// their cgroups and data on the way out.
fn interrupt_flag() -> Result<Arc<AtomicBool>, String> {
    use tokio::signal::unix::{signal, SignalKind};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start tokio: {e}"))?;
    // Installed here, before the bench starts anything.
    let (mut interrupt, mut terminate) = runtime
        .block_on(async {
            Ok::<_, std::io::Error>((signal(SignalKind::interrupt())?, signal(SignalKind::terminate())?))
        })
        .map_err(|e| format!("cannot handle signals: {e}"))?;
    let flag = Arc::new(AtomicBool::new(false));
    let set = flag.clone();
    std::thread::spawn(move || {
        runtime.block_on(async {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        });
        eprintln!("stopping: the nodes are being stopped and their cgroups and data removed");
        set.store(true, Ordering::Relaxed);
    });
    Ok(flag)
}
