//! Measurements on the machine at hand, against real disks and real node processes, each read as a ratio to
//! a yardstick measured in the same run: the `meridian bench` subcommands.
//!
//! `meridian bench store` measures the storage layer beside what the disk itself delivers in the same run and
//! directory. For each store (mem, log), durability mode (sync, group, async; mem only once, as it has no fsync)
//! and value size, `writers` threads hand puts to one committer thread that does what the node's core
//! thread does with them (`committer`); each put is timed from hand-over to acknowledgement. After the
//! group-commit run, one thread gets random keys back from the filled store. The log store also runs a
//! single writer putting back to back (`sequential`), and `disk` measures the raw sequential write
//! bandwidth and fsync latency. Every run is bounded by a duration and a byte budget; nothing is assumed,
//! every figure is measured.
//!
//! The other measurements run real node processes (module `local`): `meridian bench join` (module `join`), each
//! node under its own CPU quota, serving reads while a node joins; and `meridian bench keyspaces` (module
//! `keyspaces`), put latency, memory and recovery of the keyspace configurations of seed 003 §5.3.
//! `meridian bench ycsb` (module `ycsb`) drives any RESP server, Meridian or redis-server, with YCSB's core
//! workloads, closed or open loop. Two scripts outside this crate build on it: `bench/compare` (Python) runs it
//! and go-ycsb against Meridian, redis-server, memcached and etcd, and `bench/instructions` (Python) counts a
//! request's user-space instructions under callgrind.
//!
//! Reading order for `bench store`: `suite` (what runs in which order), `committer`, `puts`, `gets`,
//! `sequential`, `disk`, `report`. For the others, each module's own doc.
//!
//! Modules:
//! - `committer`: the committer thread, the node's core reduced to what a store sees.
//! - `compaction`: gets while the log store compacts, beside gets once it has finished.
//! - `disk`: the disk's own sequential bandwidth and append-plus-fsync latency, the yardstick for the stores.
//! - `gets`: gets from a filled store on one thread, as the node's core serves them.
//! - `join`: `meridian bench join`, seed 003 §4.2's join experiment: node processes in CPU cgroups, read load, a
//!   join.
//! - `keyspaces`: `meridian bench keyspaces`: put latency of M-M, M-D and D-D under `su`, `ausi` and `au`,
//!   resident memory, and M-D recovery time.
//! - `latency`: an HDR histogram of nanoseconds, read out in microseconds.
//! - `local`: a local cluster of `meridian server` processes on 127.0.0.x (start, SIGKILL, restart, CPU cgroups,
//!   `/proc` CPU time and RSS) with HTTP, cluster-map and RESP clients.
//! - `puts`: concurrent puts through the committer, each timed from hand-over to acknowledgement.
//! - `report`: one run's figures, as JSON and as the printed table.
//! - `sequential`: the log store's sequential put bandwidth against the disk's, measured in interleaved pairs.
//! - `stores`: the stores under test, each opened fresh in its own directory.
//! - `suite`: which measurements run, in which order.
//! - `ycsb`: `meridian bench ycsb`: YCSB's core workloads over RESP against any server, or over memcached's text
//!   protocol; connections spread over one or more servers, closed or open loop, one tokio task per connection.

mod committer;
mod compaction;
mod disk;
mod gets;
pub mod join;
pub mod keyspaces;
mod latency;
mod local;
mod puts;
mod report;
mod sequential;
mod stores;
mod suite;
pub mod ycsb;

pub use disk::DiskFigures;
pub use report::{CompactionFigures, GetFigures, PutFigures, Ratio, Report, SequentialFigures};
pub use stores::StoreKind;
pub use suite::run;

use meridian_core::splitmix::SplitMix64;
use std::path::PathBuf;
use std::time::Duration;

/// The value sizes measured unless told otherwise: 100 B, 1 KiB, 10 KiB.
pub const VALUE_SIZES: [usize; 3] = [100, 1 << 10, 10 << 10];
/// Concurrent writers unless told otherwise.
pub const DEFAULT_WRITERS: usize = 64;
/// The writers one run may have at most: each is an OS thread.
pub const WRITERS_MAX: usize = 1024;

/// What bounds each measurement.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Wall-clock time per measurement.
    pub duration: Duration,
    /// Bytes per measurement: keys and values for the stores, file bytes for the raw disk test.
    pub max_bytes: u64,
}

#[derive(Clone, Debug)]
pub struct StoreBench {
    /// Where the stores and the raw test files go; each measurement uses and removes its own subdirectory.
    pub dir: PathBuf,
    pub writers: usize,
    pub value_sizes: Vec<usize>,
    pub limits: Limits,
}

/// Megabytes (10^6 bytes) per second.
fn mb_per_s(bytes: u64, took: Duration) -> f64 {
    bytes as f64 / 1e6 / took.as_secs_f64().max(f64::MIN_POSITIVE)
}

fn per_second(count: u64, took: Duration) -> f64 {
    count as f64 / took.as_secs_f64().max(f64::MIN_POSITIVE)
}

/// Pseudo-random bytes, so that a disk or file system that compresses or deduplicates cannot flatter
/// the figures.
fn incompressible(len: usize) -> Vec<u8> {
    let mut rng = SplitMix64::new(len as u64);
    let mut bytes: Vec<u8> = (0..len.div_ceil(8)).flat_map(|_| rng.next_u64().to_le_bytes()).collect();
    bytes.truncate(len);
    bytes
}
