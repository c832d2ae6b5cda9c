//! `meridian bench`: measurements on the machine at hand (crate `meridian-bench`). `bench store` measures
//! the datastores under each durability mode beside the disk's own bandwidth and fsync latency; `bench join`
//! measures real node processes' read throughput while a node joins (seed 003 §4.2).

use clap::{Args, Subcommand};
use meridian_bench::join::JoinBench;
use meridian_bench::{Limits, StoreBench, DEFAULT_WRITERS, VALUE_SIZES};
use meridian_core::config::DEFAULT_REPLICATION;
use meridian_core::size::parse_size;
use std::path::{Path, PathBuf};
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

fn write_json(path: &Path, json: serde_json::Result<String>) -> Result<(), String> {
    let json = json.map_err(|e| e.to_string())?;
    std::fs::write(path, json + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))
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
    println!("{report}");
    if let Some(path) = &args.json {
        write_json(path, serde_json::to_string_pretty(&report))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn run_join(args: JoinArgs) -> Result<ExitCode, String> {
    let (dir, _temp) = work_dir(&args.dir)?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the meridian binary: {e}"))?;
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
    let stop = interrupt_flag()?;
    let report = meridian_bench::join::run(&bench, &mut |line| eprintln!("{line}"), &stop)?;
    println!("{report}");
    if let Some(path) = &args.json {
        write_json(path, serde_json::to_string_pretty(&report))?;
    }
    Ok(ExitCode::SUCCESS)
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
