//! What an M-M chain costs in memory beside an M-D chain holding the same data: each in a fresh cluster, so
//! that nothing written before (or freed by a drop, which an allocator may keep) is counted. The nodes'
//! resident memory is summed once the keyspace exists and again once it is filled; the difference is what the
//! data costs in memory, index and allocator overhead included.

use super::configs::{self, Layout, MD, MM};
use super::report::MemoryFigures;
use super::writers;
use super::{fresh_cluster, interrupted, KeyspacesBench};
use crate::local::Cluster;
use meridian_core::UpdateMode;
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// M-M, then M-D, each filled with `rss_mb` MiB of the largest values measured.
pub(super) fn measure(
    bench: &KeyspacesBench,
    dir: &Path,
    progress: &mut dyn FnMut(&str),
    stop: &AtomicBool,
) -> Result<Vec<MemoryFigures>, String> {
    [MM, MD].into_iter().map(|chain| held(bench, dir, chain, progress, stop)).collect()
}

fn held(
    bench: &KeyspacesBench,
    dir: &Path,
    chain: Layout,
    progress: &mut dyn FnMut(&str),
    stop: &AtomicBool,
) -> Result<MemoryFigures, String> {
    let fresh = fresh_cluster(bench, dir, &format!("memory-{}", chain.name), progress)?;
    let keyspace = configs::create(&fresh.cluster, chain, UpdateMode::Su)?;
    let before = resident(&fresh.cluster)?;
    let value_len = bench.largest_value();
    let written = writers::fill(&fresh.cluster, &keyspace, bench.rss_mb << 20, value_len, bench.clients, stop)?;
    interrupted(stop)?;
    let after = resident(&fresh.cluster)?;
    let figures = MemoryFigures::new(chain.name, value_len, &written, before, after);
    progress(&figures.row());
    Ok(figures)
}

/// The resident bytes of every node process, summed.
fn resident(cluster: &Cluster) -> Result<u64, String> {
    cluster.nodes.iter().map(|n| n.rss_bytes().ok_or_else(|| format!("node {} is not running", n.id))).sum()
}
