//! `meridian bench keyspaces`: issue 5's comparison of chain configurations (seed 003 §5.3, Flex-KV) on real
//! node processes, in one run.
//!
//! 1. Put latency and rate (`puts`): one cluster with a keyspace for each chain (M-M `mem,mem`, M-D `mem,log`,
//!    D-D `log,log`) and update mode (`su`, `ausi`, `au`), measured one after the other for each value size by
//!    closed-loop clients that send each SET to the head of its key's chain (`writers`).
//! 2. Resident memory (`memory`): M-M and M-D keyspaces filled with the same data, each in a fresh cluster; the
//!    nodes' VmRSS after filling less before.
//! 3. M-D recovery against data size (`recovery`): for each size a fresh cluster, a filled M-D keyspace, a node
//!    SIGKILLed and restarted on its data, and the time until every chain of the keyspace is whole again.
//!
//! The nodes share this machine's CPUs with each other and with the clients (no CPU cgroups: the figures
//! compare configurations on the same machine, not per-node capacity). Every phase is bounded in time and in
//! data. Everything the bench started (processes, data) is stopped and removed when it ends, however it ends.
//!
//! Reading order: `configs` (what is measured), `writers`, then `puts`, `memory`, `recovery`, `report`.

mod configs;
mod memory;
mod puts;
mod recovery;
mod report;
mod writers;

pub use report::{KeyspacesReport, MemoryFigures, PutCell, RecoveryFigures};

use crate::local::{Cluster, Setup, WorkDir};
use meridian_core::config::{DEFAULT_REPLICATION, DEFAULT_VNODES};
use meridian_store::VALUE_MAX;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Nodes the bench may start: 127.0.0.1 up to .253.
const NODES_MAX: u32 = 253;
const CLIENTS_MAX: usize = 1024;
const DURATION_MAX_S: u32 = 600;
/// Value sizes and recovery sizes one run may take.
const SIZES_MAX: usize = 8;
/// The most data one keyspace is filled with, in MiB, for the memory and the recovery measurements.
const FILL_MB_MAX: u64 = 4096;

#[derive(Clone, Debug)]
pub struct KeyspacesBench {
    /// The `meridian` binary the nodes run.
    pub exe: PathBuf,
    /// The nodes' data and logs go in a subdirectory of this, removed at the end.
    pub dir: PathBuf,
    pub nodes: u32,
    /// Write clients, each with its own connection.
    pub clients: usize,
    /// Seconds each put cell is timed.
    pub duration_s: u32,
    /// The value sizes of the put matrix; the largest also fills the memory and recovery keyspaces.
    pub values: Vec<usize>,
    /// MiB of values each memory measurement writes.
    pub rss_mb: u64,
    /// MiB of values in the M-D keyspace for each recovery.
    pub recovery_mb: Vec<u64>,
    /// The nodes' `--migration-mb-per-s`: how fast a lost replica is copied back.
    pub migration_mb_per_s: u64,
}

impl KeyspacesBench {
    fn largest_value(&self) -> usize {
        self.values.iter().copied().max().unwrap_or(1)
    }
}

/// Runs the three measurements; `progress` hears what happens, a line per cell. Returns early with an error
/// once `stop` is set.
pub fn run(
    bench: &KeyspacesBench,
    progress: &mut dyn FnMut(&str),
    stop: &AtomicBool,
) -> Result<KeyspacesReport, String> {
    check(bench)?;
    let work = WorkDir::create(&bench.dir, "keyspaces")?;
    let puts = {
        let fresh = fresh_cluster(bench, &work.0, "puts", progress)?;
        puts::measure(bench, &fresh.cluster, progress, stop)?
    };
    let memory = memory::measure(bench, &work.0, progress, stop)?;
    let recovery = recovery::measure(bench, &work.0, progress, stop)?;
    Ok(KeyspacesReport::new(bench, puts, memory, recovery))
}

fn check(bench: &KeyspacesBench) -> Result<(), String> {
    let in_range = |ok: bool, what: &str| if ok { Ok(()) } else { Err(what.to_string()) };
    in_range((3..=NODES_MAX).contains(&bench.nodes), "--nodes must be 3 (the manager's voters) to 253")?;
    in_range((1..=CLIENTS_MAX).contains(&bench.clients), "--clients must be 1 to 1024")?;
    in_range((1..=DURATION_MAX_S).contains(&bench.duration_s), "--duration must be 1 to 600 seconds")?;
    in_range(
        (1..=SIZES_MAX).contains(&bench.values.len()) && bench.values.iter().all(|v| (1..=VALUE_MAX).contains(v)),
        &format!("--values must list 1 to {SIZES_MAX} sizes of 1 to {VALUE_MAX} bytes"),
    )?;
    in_range((1..=FILL_MB_MAX).contains(&bench.rss_mb), "--rss-mb must be 1 to 4096")?;
    in_range(
        (1..=SIZES_MAX).contains(&bench.recovery_mb.len())
            && bench.recovery_mb.iter().all(|mb| (1..=FILL_MB_MAX).contains(mb)),
        &format!("--recovery-mb must list 1 to {SIZES_MAX} sizes of 1 to {FILL_MB_MAX} MiB"),
    )
}

/// A cluster of its own, with its data in a directory of its own that is removed once the nodes have stopped
/// (fields drop in order).
struct Fresh {
    cluster: Cluster,
    _dir: WorkDir,
}

/// Starts `bench.nodes` nodes with their data in `<dir>/<name>-<pid>` and waits until each serves.
fn fresh_cluster(
    bench: &KeyspacesBench,
    dir: &Path,
    name: &str,
    progress: &mut dyn FnMut(&str),
) -> Result<Fresh, String> {
    let work = WorkDir::create(dir, name)?;
    let setup = Setup {
        exe: bench.exe.clone(),
        dir: work.0.clone(),
        // `default` is not measured; it keeps its usual configuration.
        replication: DEFAULT_REPLICATION,
        vnodes: DEFAULT_VNODES,
        migration_mb_per_s: bench.migration_mb_per_s,
    };
    progress(&format!("{name}: starting {} nodes", bench.nodes));
    Ok(Fresh { cluster: Cluster::start(setup, bench.nodes, None, progress)?, _dir: work })
}

fn interrupted(stop: &AtomicBool) -> Result<(), String> {
    if stop.load(Ordering::Relaxed) {
        return Err("interrupted".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bench() -> KeyspacesBench {
        KeyspacesBench {
            exe: "meridian".into(),
            dir: "/tmp".into(),
            nodes: 3,
            clients: 16,
            duration_s: 5,
            values: vec![100, 10240],
            rss_mb: 64,
            recovery_mb: vec![8, 32, 128],
            migration_mb_per_s: 64,
        }
    }

    #[test]
    fn flags_are_checked_against_their_bounds() {
        assert_eq!(check(&bench()), Ok(()));
        assert_eq!(bench().largest_value(), 10240);
        let refused = |change: fn(&mut KeyspacesBench)| {
            let mut b = bench();
            change(&mut b);
            check(&b).unwrap_err()
        };
        assert!(refused(|b| b.nodes = 2).starts_with("--nodes"));
        assert!(refused(|b| b.values.clear()).starts_with("--values"));
        assert!(refused(|b| b.values.push(VALUE_MAX + 1)).starts_with("--values"));
        assert!(refused(|b| b.recovery_mb = vec![8, 0]).starts_with("--recovery-mb"));
        assert!(refused(|b| b.recovery_mb = vec![1; 9]).starts_with("--recovery-mb"));
        assert!(refused(|b| b.rss_mb = 5000).starts_with("--rss-mb"));
        assert!(refused(|b| b.duration_s = 0).starts_with("--duration"));
    }
}
