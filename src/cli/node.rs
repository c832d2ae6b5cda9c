//! What `demo` and `server` share: the durability, cluster and client-limit flags, opening a node's data
//! directory and starting a node (chain replication with its replicated manager) on it.

use clap::Args;
use meridian_core::ring::hash_tag;
use meridian_core::size::parse_size;
use meridian_core::topology::Topology;
use meridian_core::{wire, ClusterConfig, DurabilityMode, KeyspaceConfig, Limits, Location, NodeId, ReplicaKind};
use meridian_node::{
    start_node, DataDir, HttpSecurity, NodeHandle, NodeOptions, Password, PeerTls, RespLimits, SyncPolicy, TlsListen,
    Wan, DEFAULT_CONNECTIONS_MAX, DEFAULT_PIPELINE_MAX,
};
use meridian_proto::chain::ChainConfig;
use meridian_proto::host::RequestConfig;
use meridian_proto::manager::agent::JoinRequest;
use meridian_proto::manager::core::ManagerConfig;
use meridian_proto::node::{ClusterNode, NodeConfig, NodeSetup as CoreSetup, ProtocolConfigs};
use meridian_store::{Datastore, LogOptions, LogStore, RealVfs, KEY_MAX};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Where a node runs (docs/regions.md): `meridian server`'s own location, or that of a node `ctl node add` adds.
#[derive(Args, Debug)]
pub struct LocationArgs {
    /// The region the node runs in (default: `default`). A node of --peers must be where --peers says.
    #[arg(long)]
    region: Option<String>,
    /// The zone (within --region) the node runs in.
    #[arg(long, requires = "region")]
    zone: Option<String>,
    /// The rack (within --zone) the node runs in.
    #[arg(long, requires = "zone")]
    rack: Option<String>,
}

impl LocationArgs {
    /// The location given, if any; one with a malformed name is refused, saying why.
    pub fn location(&self) -> Result<Option<Location>, String> {
        let Some(region) = &self.region else { return Ok(None) };
        Location::new(region, self.zone.as_deref(), self.rack.as_deref()).map(Some).map_err(|e| e.to_string())
    }
}

/// When a node fsyncs relative to acknowledging writes (docs/durability.md).
#[derive(Args, Debug)]
pub struct DurabilityArgs {
    /// For keyspaces created without a durability mode of their own: sync: fsync before acknowledging each
    /// write; group: one fsync per batch, acknowledged after it (group commit); async: acknowledge at once,
    /// fsync every --async-interval-ms (a power loss can lose that window; a process crash loses nothing).
    #[arg(long, default_value = "group")]
    durability: DurabilityMode,
    /// Async mode (this node's default or a keyspace's): how long after the oldest unsynced write the node
    /// fsyncs.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    async_interval_ms: u64,
    /// Group mode, as this node's default: how long a batch may wait for more writes after its first (0: only what is queued).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=100_000))]
    group_max_wait_us: u64,
}

impl DurabilityArgs {
    pub fn policy(&self) -> SyncPolicy {
        SyncPolicy {
            default: self.durability,
            group_max_wait: Duration::from_micros(self.group_max_wait_us),
            async_interval: Duration::from_millis(self.async_interval_ms),
        }
    }
}

/// The cluster manager's timing and the pace of joins (`docs/protocols/ouroboros.md`).
#[derive(Args, Debug)]
pub struct ClusterArgs {
    /// Manager tick: heartbeats every tick, elections after 10-20 ticks, leases of 40 ticks (a node counts
    /// 20), a node declared failed after 50 ticks without a heartbeat (those two at most 4 s and 5 s, or 8 and
    /// 10 ticks if longer). Near the round trip between the farthest manager voters: 100 within a region, a
    /// few hundred across regions.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(10..=10_000))]
    manager_tick_ms: u64,
    /// How fast a joining node may copy each chain from its tail, in MB/s (0: unlimited); what a join takes from
    /// the nodes it copies from.
    #[arg(long, default_value_t = 64)]
    migration_mb_per_s: u64,
}

impl ClusterArgs {
    /// The node's configuration, with the key and value limits it checks every request against.
    pub fn config_with(&self, limits: Limits) -> NodeConfig {
        let migration_bandwidth = self.migration_mb_per_s * 1_000_000;
        let chain = ChainConfig { migration_bandwidth, ..ChainConfig::default() };
        let requests = RequestConfig { limits, ..RequestConfig::default() };
        let manager = ManagerConfig::with_tick(Duration::from_millis(self.manager_tick_ms));
        let protocols = ProtocolConfigs { chain, ..ProtocolConfigs::default() };
        NodeConfig { requests, protocols, manager, ..NodeConfig::default() }
    }
}

/// The largest `--max-value-bytes`: a value travels between nodes in one peer frame (at most
/// `wire::FRAME_MAX`, 16 MiB) together with its key and the message around it.
const VALUE_BYTES_CEILING: usize = wire::FRAME_MAX / 2;
/// The largest `--max-pipeline`: far past any pipelining gain, and each slot may hold a reply.
const PIPELINE_CEILING: u64 = 1 << 20;
/// The largest `--max-connections`.
const CONNECTIONS_CEILING: u64 = 1 << 20;

/// What Redis clients may send and hold open (docs/resp.md). Give every node the same values, so a client
/// meets the same limits whichever node it talks to.
#[derive(Args, Debug)]
pub struct LimitArgs {
    /// The longest key a client may use, in bytes (a size like 4096 or 4k, at most 64k); a longer one gets
    /// an -ERR and the connection goes on.
    #[arg(long, default_value_t = Limits::default().max_key_bytes, value_parser = key_bytes)]
    max_key_bytes: usize,
    /// The largest value a client may write, in bytes (a size like 1048576 or 1mb, at most 8mb); a larger one
    /// gets an -ERR and is dropped as it arrives, never buffered whole.
    #[arg(long, default_value_t = Limits::default().max_value_bytes, value_parser = value_bytes)]
    max_value_bytes: usize,
    /// Requests of one connection in flight (sent, not yet answered) before the server stops reading from it.
    #[arg(long, default_value_t = DEFAULT_PIPELINE_MAX,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=PIPELINE_CEILING))]
    max_pipeline: usize,
    /// Client connections served at once; one more is sent `-ERR max number of clients reached` and closed.
    #[arg(long, default_value_t = DEFAULT_CONNECTIONS_MAX,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=CONNECTIONS_CEILING))]
    max_connections: usize,
}

impl LimitArgs {
    pub fn limits(&self) -> Limits {
        Limits { max_key_bytes: self.max_key_bytes, max_value_bytes: self.max_value_bytes }
    }

    pub fn resp(&self) -> RespLimits {
        RespLimits { pipeline_max: self.max_pipeline, connections_max: self.max_connections }
    }
}

fn key_bytes(text: &str) -> Result<usize, String> {
    size_between(text, KEY_MAX)
}

fn value_bytes(text: &str) -> Result<usize, String> {
    size_between(text, VALUE_BYTES_CEILING)
}

/// A byte count from 1 to `max`.
fn size_between(text: &str, max: usize) -> Result<usize, String> {
    let n = parse_size(text).map_err(|e| e.to_string())?;
    match usize::try_from(n) {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("{n} bytes is not between 1 and {max}")),
    }
}

pub struct NodeSetup {
    pub node_id: NodeId,
    /// The configuration the cluster started from.
    pub cluster: ClusterConfig,
    /// Set for a node that joins a running cluster (it is not in `cluster`).
    pub join: Option<JoinRequest>,
    /// The plain RESP port, if clients may use one.
    pub resp: Option<SocketAddr>,
    /// The TLS client port, if any.
    pub tls: Option<TlsListen>,
    pub peer: SocketAddr,
    pub http: Option<SocketAddr>,
    pub data_dir: PathBuf,
    pub durability: SyncPolicy,
    pub config: NodeConfig,
    pub resp_limits: RespLimits,
    /// The WAN to emulate on messages from peers (`--wan`), if any.
    pub wan: Option<Arc<Topology>>,
    /// The `default` user's password (`--requirepass`), already hashed.
    pub requirepass: Option<Password>,
    /// Who may use the HTTP API, and over what.
    pub http_security: HttpSecurity,
    /// Mutual TLS between peers (`--peer-certs-dir`), if any.
    pub peer_tls: Option<PeerTls>,
}

/// A fresh number per process start, so answers addressed to a previous run of this node are dropped.
fn incarnation() -> u64 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32)
}

/// Marks a data directory of format 1 as this build's, unless one of its stores holds a key with a hash tag:
/// format 1 placed such a key by its whole bytes, where this build looks for it by its tag
/// (`meridian_core::ring::key_token`), so it would read as missing and its chain would hold it for nothing.
fn upgrade_data_dir(data_dir: &mut DataDir) -> Result<(), String> {
    if data_dir.format() == 1 {
        let keyspaces = data_dir.path().join("keyspaces");
        let stores = match std::fs::read_dir(&keyspaces) {
            Ok(entries) => entries.map(|e| e.map(|e| e.path())).collect::<Result<Vec<_>, _>>(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        };
        let cannot = |e: &dyn std::fmt::Display| format!("cannot read {}: {e}", keyspaces.display());
        for store in stores.map_err(|e| cannot(&e))?.into_iter().filter(|p| p.is_dir()) {
            let (log, _) = LogStore::open_with(Arc::new(RealVfs), &store, LogOptions::default())
                .map_err(|e| format!("cannot read {}: {e}", store.display()))?;
            let mut tagged = None;
            log.scan_range(0, 0, &mut |key, entry| {
                if tagged.is_none() && entry.value.is_some() && hash_tag(&key).is_some() {
                    tagged = Some(key);
                }
            })
            .map_err(|e| format!("cannot read {}: {e}", store.display()))?;
            if let Some(key) = tagged {
                return Err(format!(
                    "data directory {} holds key {:?} (in {}), which an older build placed by its whole name; this \
                     build places a key with a hash tag ({{...}}) by its tag and would not find it. Rename such keys \
                     with the release that wrote them, or start this node on an empty --data-dir",
                    data_dir.path().display(),
                    String::from_utf8_lossy(&key),
                    store.display()
                ));
            }
        }
    }
    data_dir.mark_current().map_err(|e| e.to_string())
}

pub async fn start(setup: NodeSetup) -> Result<NodeHandle, String> {
    if setup.join.is_none() {
        setup.cluster.require_member(setup.node_id).map_err(|e| e.to_string())?;
    }
    let location = match (&setup.join, setup.cluster.node(setup.node_id)) {
        (Some(join), _) => join.location.clone(),
        (None, spec) => spec.map(|n| n.location.clone()).unwrap_or_default(),
    };
    let wan = setup.wan.map(|t| Wan::new(t, &location.region)).transpose().map_err(|e| e.to_string())?;
    let mut data_dir = DataDir::claim(&setup.data_dir, setup.node_id).map_err(|e| e.to_string())?;
    upgrade_data_dir(&mut data_dir)?;
    let data_dir = Arc::new(data_dir);
    let cfg = setup.config;
    let limits = cfg.requests.limits;
    let incarnation = incarnation();
    let core = CoreSetup {
        me: setup.node_id,
        vfs: Arc::new(RealVfs),
        dir: setup.data_dir.clone(),
        initial: setup.cluster.clone(),
        join: setup.join,
        incarnation,
        jitter: incarnation.rotate_left(17),
    };
    let process = ClusterNode::open(core, cfg, LogOptions::default())
        .map_err(|e| format!("cannot recover node {} from {}: {e}", setup.node_id.0, setup.data_dir.display()))?;
    let opts = NodeOptions {
        node_id: setup.node_id,
        cluster: setup.cluster,
        resp_listen: setup.resp,
        tls: setup.tls,
        peer_listen: setup.peer,
        http_listen: setup.http,
        limits,
        resp: setup.resp_limits,
        durability: setup.durability,
        data_dir: Some(data_dir),
        region: location.region,
        wan,
        requirepass: setup.requirepass,
        http_security: setup.http_security,
        peer_tls: setup.peer_tls,
    };
    start_node(opts, process).await.map_err(|e| e.to_string())
}

/// Waits for Ctrl-C or SIGTERM.
pub async fn stop_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// The `default` keyspace's replica types, head first: `--replicas` if given, else `replication` replicas of
/// type `store`.
pub fn default_replicas(
    list: Option<&str>,
    replication: usize,
    store: ReplicaKind,
) -> Result<Vec<ReplicaKind>, String> {
    match list {
        Some(list) => KeyspaceConfig::parse_replicas(list).map_err(|e| format!("--replicas: {e}")),
        None => Ok(vec![store; replication]),
    }
}

pub fn init_logging(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if json {
        logs.json().init();
    } else {
        logs.init();
    }
}

/// The threads a node process runs on (docs/performance-history.md, sections 10 and 23).
#[derive(Args, Debug)]
pub struct ThreadArgs {
    /// Threads that run the nodes' cores and their client and peer connections (default: one per CPU core
    /// less one, and at least one; fsyncs run on a thread of each core's own). A node's core is one task, so
    /// more threads only spread its connections, and handing a request between threads costs more than serving
    /// it: the core left over serves the kernel's network work, the fsyncs and whatever shares the machine.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,
}

impl ThreadArgs {
    /// A multi-threaded runtime even with one worker: the core's fsync then runs off the worker, on the core's
    /// own thread (`meridian_node` driver), instead of in place. Without `--threads`, tokio's
    /// `TOKIO_WORKER_THREADS` still applies.
    pub fn runtime(&self) -> Result<tokio::runtime::Runtime, String> {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        let workers = match self.threads {
            Some(threads) => Some(threads.into()),
            None if std::env::var_os("TOKIO_WORKER_THREADS").is_some() => None,
            None => Some(default_workers(std::thread::available_parallelism().map_or(1, |n| n.get()))),
        };
        if let Some(workers) = workers {
            builder.worker_threads(workers);
        }
        builder.enable_all().build().map_err(|e| format!("cannot start tokio: {e}"))
    }
}

/// Worker threads without `--threads`: one per core but one, at least one (section 23 of
/// docs/performance-history.md measured one against two on two cores).
fn default_workers(cores: usize) -> usize {
    cores.saturating_sub(1).max(1)
}

#[cfg(test)]
mod tests {
    use super::default_workers;

    #[test]
    fn one_core_is_left_over_but_one_worker_always_runs() {
        assert_eq!([1, 2, 3, 8].map(default_workers), [1, 1, 2, 7]);
    }
}
