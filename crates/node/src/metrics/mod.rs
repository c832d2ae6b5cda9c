//! What a node measures outside its protocol core, and how `/metrics` is put together.
//!
//! `GET /metrics` is two parts in the Prometheus text format: the core's (`Admin::Metrics`: chains,
//! replicas, replication lag, copies, stores, requests per keyspace) and the runner's, written here:
//! clients, commands (from [`CommandStats`], which INFO reads too), fsyncs, peer messages dropped, the
//! process and its data directory. `meridian_core_up` says whether the core answered, so a scrape of a
//! node whose core is stuck still shows the runner's part.

pub(crate) mod histogram;
mod process;

pub(crate) use process::{cpu_time, resident_bytes};

use crate::build_info;
use crate::durability::Persistence;
use crate::resp::CommandStats;
use meridian_core::exposition::{Exposition, MetricKind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The runner's figures, shared by the RESP server, INFO and the HTTP server.
#[derive(Debug)]
pub(crate) struct NodeMetrics {
    pub(crate) commands: CommandStats,
    pub(crate) clients: Clients,
    /// Peer messages dropped by the transport (full queues).
    pub(crate) peer_drops: Arc<AtomicU64>,
    /// The durability mode and the core's fsyncs.
    pub(crate) persistence: Arc<Persistence>,
    /// Peer connections failed by mutual TLS, if the node has it.
    pub(crate) peer_tls: Option<Arc<PeerTlsFailures>>,
    /// When the node started serving.
    pub(crate) started: Instant,
    started_unix: f64,
    data_dir: Option<PathBuf>,
}

/// Client connections of the RESP server.
#[derive(Debug, Default)]
pub(crate) struct Clients {
    connected: AtomicU64,
    received: AtomicU64,
    /// Refused at the connection limit; counted by the accept loop.
    pub(crate) rejected: Arc<AtomicU64>,
    /// TLS handshakes that failed (a bad or missing certificate, not TLS at all), and that did not finish in
    /// time.
    handshakes_failed: AtomicU64,
    handshakes_timed_out: AtomicU64,
}

/// Why a peer connection failed its mutual TLS (`--peer-certs-dir`): the label of
/// `meridian_peer_tls_failures_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PeerTlsFailure {
    /// An inbound handshake failed: no certificate, one of another CA, expired, not TLS at all.
    Handshake,
    /// An inbound handshake did not finish in time.
    Timeout,
    /// An inbound caller spoke plain TCP.
    Plain,
    /// An inbound caller's certificate names no node, or another node than its hello.
    Identity,
    /// A handshake this node started with a peer failed.
    Dial,
}

impl PeerTlsFailure {
    const ALL: [PeerTlsFailure; 5] = [Self::Handshake, Self::Timeout, Self::Plain, Self::Identity, Self::Dial];

    fn label(self) -> &'static str {
        match self {
            Self::Handshake => "handshake",
            Self::Timeout => "timeout",
            Self::Plain => "plain",
            Self::Identity => "identity",
            Self::Dial => "dial",
        }
    }
}

/// Peer connections refused or failed by mutual TLS, by [`PeerTlsFailure`].
#[derive(Debug, Default)]
pub(crate) struct PeerTlsFailures([AtomicU64; PeerTlsFailure::ALL.len()]);

impl PeerTlsFailures {
    pub(crate) fn count(&self, failure: PeerTlsFailure) {
        self.0[failure as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn get(&self, failure: PeerTlsFailure) -> u64 {
        self.0[failure as usize].load(Ordering::Relaxed)
    }
}

/// A connection counted as connected until this is dropped.
pub(crate) struct Connected<'a>(&'a Clients);

impl Drop for Connected<'_> {
    fn drop(&mut self) {
        self.0.connected.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A reading of [`Clients`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClientsReading {
    pub(crate) connected: u64,
    pub(crate) received: u64,
    pub(crate) rejected: u64,
    pub(crate) handshakes_failed: u64,
    pub(crate) handshakes_timed_out: u64,
}

impl Clients {
    pub(crate) fn connect(&self) -> Connected<'_> {
        self.received.fetch_add(1, Ordering::Relaxed);
        self.connected.fetch_add(1, Ordering::Relaxed);
        Connected(self)
    }

    /// Counts a TLS handshake that failed, or that `timed_out`.
    pub(crate) fn handshake_failed(&self, timed_out: bool) {
        let counter = if timed_out { &self.handshakes_timed_out } else { &self.handshakes_failed };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn read(&self) -> ClientsReading {
        ClientsReading {
            connected: self.connected.load(Ordering::Relaxed),
            received: self.received.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            handshakes_failed: self.handshakes_failed.load(Ordering::Relaxed),
            handshakes_timed_out: self.handshakes_timed_out.load(Ordering::Relaxed),
        }
    }
}

impl NodeMetrics {
    pub(crate) fn new(peer_drops: Arc<AtomicU64>, persistence: Arc<Persistence>, data_dir: Option<PathBuf>) -> Self {
        let started_unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        NodeMetrics {
            commands: CommandStats::default(),
            clients: Clients::default(),
            peer_drops,
            persistence,
            peer_tls: None,
            started: Instant::now(),
            started_unix,
            data_dir,
        }
    }

    /// The runner's families. Reads `/proc` and walks the data directory: call it off the async workers.
    pub(crate) fn render(&self, e: &mut Exposition) {
        let labels = [
            ("version", env!("CARGO_PKG_VERSION")),
            ("git_sha1", build_info::GIT_SHA1),
            ("git_dirty", build_info::GIT_DIRTY),
            ("profile", build_info::PROFILE),
        ];
        e.family("meridian_build_info", MetricKind::Gauge, "The build: version, commit and profile (always 1).")
            .sample("meridian_build_info", &labels, 1);
        e.single(
            "process_start_time_seconds",
            MetricKind::Gauge,
            "Start time since the Unix epoch.",
            self.started_unix,
        );
        self.client_families(e);
        self.command_families(e);
        self.persistence_families(e);
        let help = "Peer messages the transport dropped because a peer's queue was full.";
        e.single(
            "meridian_peer_messages_dropped_total",
            MetricKind::Counter,
            help,
            self.peer_drops.load(Ordering::Relaxed),
        );
        if let Some(failures) = &self.peer_tls {
            peer_tls_family(e, failures);
        }
        process::families(e, self.data_dir.as_deref());
    }

    fn client_families(&self, e: &mut Exposition) {
        let c = self.clients.read();
        e.single("meridian_connected_clients", MetricKind::Gauge, "Client connections open now.", c.connected);
        e.single(
            "meridian_connections_received_total",
            MetricKind::Counter,
            "Client connections accepted.",
            c.received,
        );
        let help = "Client connections refused at the connection limit (--max-connections).";
        e.single("meridian_connections_rejected_total", MetricKind::Counter, help, c.rejected);
        let name = "meridian_tls_handshake_failures_total";
        let help = "TLS handshakes on the client TLS port that failed (error) or did not finish in time (timeout).";
        e.family(name, MetricKind::Counter, help);
        e.sample(name, &[("reason", "error")], c.handshakes_failed);
        e.sample(name, &[("reason", "timeout")], c.handshakes_timed_out);
    }

    fn command_families(&self, e: &mut Exposition) {
        let called = self.commands.called();
        e.family("meridian_commands_total", MetricKind::Counter, "Commands run, by name.");
        for c in &called {
            e.sample("meridian_commands_total", &[("command", c.name)], c.latency.count);
        }
        e.family("meridian_command_errors_total", MetricKind::Counter, "Commands answered with an error, by name.");
        for c in &called {
            e.sample("meridian_command_errors_total", &[("command", c.name)], c.failed);
        }
        let help = "Time from parsing a command to its reply being ready, by name.";
        e.family("meridian_command_duration_seconds", MetricKind::Histogram, help);
        for c in &called {
            e.histogram("meridian_command_duration_seconds", &[("command", c.name)], &c.latency);
        }
    }

    fn persistence_families(&self, e: &mut Exposition) {
        let r = self.persistence.read();
        e.family("meridian_fsync_duration_seconds", MetricKind::Histogram, "The core's fsyncs, by duration.");
        e.histogram("meridian_fsync_duration_seconds", &[], &r.latency);
        let help = "The longest an async-mode write waited for its fsync: the worst loss window a power loss had.";
        e.single("meridian_async_loss_window_max_seconds", MetricKind::Gauge, help, r.loss_window_max.as_secs_f64());
    }
}

fn peer_tls_family(e: &mut Exposition, failures: &PeerTlsFailures) {
    let name = "meridian_peer_tls_failures_total";
    let help = "Peer connections failed by mutual TLS (--peer-certs-dir): inbound handshakes that failed, timed \
                out, spoke plain TCP or named no or another node (identity); handshakes this node dialled (dial).";
    e.family(name, MetricKind::Counter, help);
    for failure in PeerTlsFailure::ALL {
        e.sample(name, &[("reason", failure.label())], failures.get(failure));
    }
}
