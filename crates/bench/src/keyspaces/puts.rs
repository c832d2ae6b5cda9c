//! Issue 5's put matrix: the latency and rate of SETs on M-M, M-D and D-D chains under `su`, `ausi` and `au`,
//! for each value size. One cluster measures the nine keyspaces one after the other: each is created, measured
//! for every value size and dropped before the next is created, so that every cell runs beside the same
//! keyspaces (`default` only). Were they all created up front, the early cells would pay for the others: a node
//! fsyncs every open log store at each group commit, written or not, so an M-M keyspace's writes would wait for
//! six idle logs' fsyncs until the M-D and D-D keyspaces were dropped.

use super::configs::{self, CHAINS, UPDATES};
use super::report::PutCell;
use super::writers::{self, Load};
use super::{interrupted, KeyspacesBench};
use crate::local::{Cluster, MapView};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// How long each cell writes before its SETs are timed: connections open, and a new keyspace's stores and
/// files are made on its first writes.
pub(super) const WARMUP: Duration = Duration::from_secs(1);
/// Bytes of values one cell writes at most, whatever its duration: an M-M keyspace keeps them twice in memory
/// until it is dropped.
const CELL_BYTES_MAX: u64 = 512 << 20;

/// Every cell, in the order measured: chain, then update mode, then value size.
pub(super) fn measure(
    bench: &KeyspacesBench,
    cluster: &Cluster,
    progress: &mut dyn FnMut(&str),
    stop: &AtomicBool,
) -> Result<Vec<PutCell>, String> {
    let addrs = cluster.resp_addrs();
    let mut cells = Vec::new();
    for (chain, update) in CHAINS.iter().flat_map(|&chain| UPDATES.iter().map(move |&update| (chain, update))) {
        let keyspace = configs::create(cluster, chain, update)?;
        let map = MapView::read(cluster.nodes.first().ok_or("no node")?.http)?;
        for &value_len in &bench.values {
            let value = crate::incompressible(value_len);
            let prefix = value_len.to_string();
            let load = Load {
                keyspace: &keyspace,
                map: &map,
                addrs: &addrs,
                clients: bench.clients,
                value: &value,
                prefix: &prefix,
                warmup: WARMUP,
                until: Instant::now() + WARMUP + Duration::from_secs(bench.duration_s.into()),
                sets_max: CELL_BYTES_MAX.div_ceil(value_len as u64),
            };
            let cell = PutCell::new(&keyspace, value_len, &writers::run(&load, stop)?);
            interrupted(stop)?;
            progress(&cell.row());
            cells.push(cell);
        }
        configs::drop(cluster, &keyspace)?;
    }
    Ok(cells)
}
