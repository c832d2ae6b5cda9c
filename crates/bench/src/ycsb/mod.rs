//! `meridian bench ycsb`: a YCSB-style load generator that speaks RESP, so the same load and the same keys
//! drive redis-server, `meridian demo` or a `meridian server` alike; and memcached's text protocol, for records
//! of one field. Its connections may be spread over several servers, as over a cluster's nodes.
//!
//! A run has a load phase (every record inserted once, closed loop) and a run phase (the workload's mix of
//! reads, updates, inserts and read-modify-writes over records chosen by its request distribution), either or
//! both. Each phase runs `threadcount` connections on a tokio runtime, a task each, with up to `pipeline`
//! commands in flight per connection: closed loop, or open loop at a target rate with latency measured from each
//! operation's intended start (`driver`). Every operation type gets an HDR histogram (`report`).
//!
//! Reading order: `workload` (the presets and properties), `keys`, `distribution`, `ops` (operations as Redis
//! commands), `protocol` with `resp` and `memcache`, `driver`, `report`.

mod distribution;
mod driver;
mod keys;
mod memcache;
mod ops;
mod protocol;
mod report;
mod resp;
mod tls;
mod workload;

pub use distribution::OpKind;
pub use protocol::{Protocol, UnknownProtocol};
pub use report::{OpFigures, PhaseFigures, YcsbReport};
pub use tls::{TlsClient, TlsFiles};
pub use workload::{
    Distribution, InvalidWorkload, PropertiesFileError, PropertyError, Proportions, UnknownPreset, Workload,
    DEFAULT_CLIENTS, SCAN_REFUSED,
};

use distribution::KeyChooser;
use driver::{Pacing, Plan};
use keys::KeySpace;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Connections at most: each is a socket on both ends, and a server's client limit is near.
pub const CLIENTS_MAX: usize = 1024;
/// Commands in flight per connection at most (Meridian's default `--max-pipeline`).
pub const PIPELINE_MAX: usize = 1024;
/// Runtime threads at most.
pub const THREADS_MAX: usize = 64;
/// The run phase's length at most.
pub const DURATION_MAX: Duration = Duration::from_secs(3600);
/// The open loop's rate at most, in operations per second.
pub const RATE_MAX: f64 = 10_000_000.0;
/// How long the load phase may take.
const LOAD_MAX: Duration = Duration::from_secs(600);

#[derive(Clone, Debug)]
pub struct YcsbBench {
    /// The servers measured: connection `i` goes to `addrs[i % addrs.len()]`.
    pub addrs: Vec<SocketAddr>,
    /// What the servers speak.
    pub protocol: Protocol,
    /// The Redis database every connection selects first (`SELECT n`; in Meridian, keyspace `db<n>`).
    pub db: Option<u32>,
    /// The workload with every property and flag applied.
    pub workload: Workload,
    /// Which phases run.
    pub load: bool,
    pub run: bool,
    /// Commands each connection keeps in flight at most.
    pub pipeline: usize,
    /// Threads of the tokio runtime the connections run on.
    pub threads: usize,
    /// Connections go over TLS with this client (`--tls`), if given.
    pub tls: Option<TlsClient>,
}

/// A run that [`YcsbBench::validate`] refuses: not runnable at all, or not bounded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InvalidBench {
    #[error(transparent)]
    Workload(#[from] InvalidWorkload),
    #[error("no phase to run")]
    NoPhase,
    #[error(
        "the memcache protocol stores a record as one item, so it needs records of one field (fieldcount=1, \
         --field-count 1), not {0}"
    )]
    MemcacheFields(usize),
    #[error("--db selects a Redis database; memcached's text protocol has none")]
    MemcacheDb,
    #[error("the run phase needs a bound: --operations (operationcount), --duration (maxexecutiontime) or both")]
    Unbounded,
    #[error("--operations must be at least 1")]
    Operations,
    #[error("--duration must be more than 0 and at most {} seconds", DURATION_MAX.as_secs())]
    Duration,
    #[error("no server to measure: give --addr")]
    NoServer,
    #[error("--clients must be from 1 to {CLIENTS_MAX}")]
    Clients,
    #[error(
        "--clients ({clients}) must be at least the number of --addr servers ({servers}), so that each gets a \
         connection"
    )]
    FewClients { clients: usize, servers: usize },
    #[error("--pipeline must be from 1 to {PIPELINE_MAX}")]
    Pipeline,
    #[error("--threads must be from 1 to {THREADS_MAX}")]
    Threads,
    #[error("--rate must be from 1 to {RATE_MAX} operations per second")]
    Rate,
}

/// Why [`run`] made no report: the run is refused, the runtime cannot start, or a phase failed.
#[derive(Debug, thiserror::Error)]
pub enum YcsbError {
    #[error(transparent)]
    Invalid(#[from] InvalidBench),
    #[error("cannot start tokio: {0}")]
    Runtime(#[source] io::Error),
    /// A connection could not be made, or a server's replies could not be read.
    #[error("{0}")]
    Phase(String),
}

impl YcsbBench {
    /// Refuses a run that is not bounded or not runnable at all, saying why.
    pub fn validate(&self) -> Result<(), InvalidBench> {
        let w = &self.workload;
        w.validate()?;
        if !self.load && !self.run {
            return Err(InvalidBench::NoPhase);
        }
        if self.protocol == Protocol::Memcache && w.field_count != 1 {
            return Err(InvalidBench::MemcacheFields(w.field_count));
        }
        if self.protocol == Protocol::Memcache && self.db.is_some() {
            return Err(InvalidBench::MemcacheDb);
        }
        if self.run && w.operation_count.is_none() && w.max_execution_time.is_none() {
            return Err(InvalidBench::Unbounded);
        }
        let (clients, servers) = (w.thread_count, self.addrs.len());
        let checks = [
            (w.operation_count == Some(0), InvalidBench::Operations),
            (w.max_execution_time.is_some_and(|d| d.is_zero() || d > DURATION_MAX), InvalidBench::Duration),
            (self.addrs.is_empty(), InvalidBench::NoServer),
            (!(1..=CLIENTS_MAX).contains(&clients), InvalidBench::Clients),
            (clients < servers, InvalidBench::FewClients { clients, servers }),
            (!(1..=PIPELINE_MAX).contains(&self.pipeline), InvalidBench::Pipeline),
            (!(1..=THREADS_MAX).contains(&self.threads), InvalidBench::Threads),
            (w.target.is_some_and(|r| !(1.0..=RATE_MAX).contains(&r)), InvalidBench::Rate),
        ];
        match checks.into_iter().find(|(bad, _)| *bad) {
            Some((_, why)) => Err(why),
            None => Ok(()),
        }
    }
}

/// Runs `bench`'s phases against its server; `progress` hears what is starting.
pub fn run(bench: &YcsbBench, progress: &mut dyn FnMut(String)) -> Result<YcsbReport, YcsbError> {
    bench.validate()?;
    let runtime = runtime(bench.threads)?;
    let w = Arc::new(bench.workload.clone());
    let plan = |phase, pacing, operations, duration, seed| Plan {
        phase,
        addrs: &bench.addrs,
        protocol: bench.protocol,
        db: bench.db,
        clients: w.thread_count,
        depth: bench.pipeline,
        pacing,
        operations,
        duration,
        seed,
        tls: bench.tls.as_ref(),
    };
    let mut phases = Vec::new();
    if bench.load {
        progress(format!("load: inserting {} records through {} connections", w.record_count, w.thread_count));
        let load = Arc::new(w.for_load());
        let chooser = KeyChooser::new(&load, 0);
        let plan = plan("load", Pacing::Closed, w.record_count, LOAD_MAX, 1);
        let loaded =
            driver::run(&runtime, &plan, &load, &Arc::new(KeySpace::new(0)), &chooser).map_err(YcsbError::Phase)?;
        if loaded.operations + loaded.errors < w.record_count {
            progress(format!(
                "load: only {} of {} records sent within {LOAD_MAX:?}",
                loaded.operations, w.record_count
            ));
        }
        phases.push(loaded);
    }
    if bench.run {
        let operations = w.operation_count.unwrap_or(u64::MAX);
        let duration = w.max_execution_time.unwrap_or(DURATION_MAX);
        let pacing = w.target.map_or(Pacing::Closed, |per_second| Pacing::Open { per_second });
        progress(format!("run: workload {} through {} connections, {pacing}", w.preset, w.thread_count));
        let chooser = KeyChooser::new(&w, inserts_expected(&w));
        let keys = Arc::new(KeySpace::new(w.record_count));
        let plan = plan("run", pacing, operations, duration, 2);
        phases.push(driver::run(&runtime, &plan, &w, &keys, &chooser).map_err(YcsbError::Phase)?);
    }
    Ok(YcsbReport {
        addrs: bench.addrs.iter().map(SocketAddr::to_string).collect(),
        protocol: bench.protocol,
        db: bench.db,
        workload: bench.workload.clone(),
        pipeline: bench.pipeline,
        threads: bench.threads,
        phases,
    })
}

/// Inserts the run phase should make room for in the zipfian's range, as YCSB reckons them: the operation count
/// times the insert proportion (none when only a duration bounds the run, as YCSB would have no count either).
fn inserts_expected(w: &Workload) -> u64 {
    let p = &w.proportions;
    let share = p.insert / (p.read + p.update + p.insert + p.read_modify_write);
    (w.operation_count.unwrap_or(0) as f64 * share) as u64
}

/// One thread runs every connection's task on the thread that waits for them; more spread them over workers.
fn runtime(threads: usize) -> Result<tokio::runtime::Runtime, YcsbError> {
    let mut builder = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    builder.enable_all().build().map_err(YcsbError::Runtime)
}
