//! Starting and stopping a node: how the parts are wired.
//!
//! [`start_node`] binds every listener first, so a port in use is an error returned to the caller rather
//! than a log line from a task that quietly died; then it starts the core task, the peer transport,
//! the RESP server and the optional HTTP server. The client ports (plain RESP, TLS, or both) are bound at once
//! but listen only once the core can serve ([`Process::serving`]: a cluster node has its map): until then a
//! client's connection is refused, so a script that waits for the port and then sends a command is not answered
//! `-TRYAGAIN`. [`NodeHandle::shutdown`] stops them in the order that
//! loses the least: clients first (drained: what they sent is answered), then the core (which finishes its
//! batch and syncs), then the peer tasks.

use crate::certificates::{Certificates, ReloadError};
use crate::data_dir::DataDir;
use crate::drain::{Drain, DrainSwitch};
use crate::driver::{self, Driver, Published};
use crate::durability::{Persistence, SyncPolicy};
use crate::error::NodeError;
use crate::http::{self, HttpSecurity, HttpServer};
use crate::inbox::{self, CoreInbox};
use crate::metrics::NodeMetrics;
use crate::open_files;
use crate::resp::{self, ClientListeners, Frontend, Password, RespLimits};
use crate::tls::{TlsConfig, TlsListen};
use crate::transport::{self, Gate, PeerQueues, PeerTls, Wan};
use meridian_core::acl::User;
use meridian_core::{ClusterConfig, ErrorKind, Limits, NodeId, Process, Reply, Request};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpSocket};
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Everything a node needs besides its protocol core.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    pub node_id: NodeId,
    /// The configuration the cluster started from: where its first nodes are, and its fingerprint, which
    /// peers compare at the handshake. A node that joins later is not in it.
    pub cluster: ClusterConfig,
    /// Where Redis clients connect in plain TCP, if they may (port 0 picks a free port; see
    /// [`NodeHandle::resp_addr`]).
    pub resp_listen: Option<SocketAddr>,
    /// Where Redis clients connect over TLS, if they may, and the port's checked configuration. A node needs
    /// this or `resp_listen`, or both.
    pub tls: Option<TlsListen>,
    /// Where peers connect. Other nodes dial the address the cluster config gives for this node, so
    /// the two must lead to the same socket.
    pub peer_listen: SocketAddr,
    pub http_listen: Option<SocketAddr>,
    /// The largest key and value a client may write.
    pub limits: Limits,
    /// Pipelining depth and client connections (`docs/resp.md`).
    pub resp: RespLimits,
    /// When writes are fsynced relative to their acknowledgement (`docs/durability.md`).
    pub durability: SyncPolicy,
    /// The claimed data directory the core's stores live in, if any: kept (and so locked) until the node
    /// has stopped.
    pub data_dir: Option<Arc<DataDir>>,
    /// The region this node runs in, which its hello tells peers.
    pub region: String,
    /// The WAN this node emulates on what it receives from peers (`meridian server --wan`), if any.
    pub wan: Option<Wan>,
    /// Mutual TLS on every peer connection (`meridian server --peer-certs-dir`), if the cluster uses it.
    pub peer_tls: Option<PeerTls>,
    /// The `default` user's password (`meridian server --requirepass`): clients must authenticate first.
    pub requirepass: Option<Password>,
    /// Who may use the HTTP API, and over what.
    pub http_security: HttpSecurity,
}

/// A running node. Call [`NodeHandle::shutdown`] to stop it; a handle that is merely dropped leaves
/// the node running until the tokio runtime stops, which stops its core task with it.
pub struct NodeHandle {
    resp_addr: Option<SocketAddr>,
    tls_addr: Option<SocketAddr>,
    peer_addr: SocketAddr,
    http_addr: Option<SocketAddr>,
    core: Arc<dyn CoreInbox>,
    core_task: JoinHandle<()>,
    resp: JoinHandle<()>,
    /// Starts the RESP server's drain.
    drain: DrainSwitch,
    http: Option<HttpServer>,
    peers: Vec<JoinHandle<()>>,
    certificates: Certificates,
    /// Released only when the handle goes, after [`NodeHandle::shutdown`] has stopped the core.
    _data_dir: Option<Arc<DataDir>>,
}

/// Binds every listener first (so bind errors are returned, not logged), then starts the core task
/// and the others. Must be called within a tokio runtime.
pub async fn start_node<P: Process + Send + 'static>(opts: NodeOptions, process: P) -> Result<NodeHandle, NodeError> {
    let me = opts.node_id;
    opts.resp.check()?;
    let connections_max = open_files::fit_connections(opts.resp.connections_max).map_err(NodeError::Options)?;
    let resp_limits = RespLimits { connections_max, ..opts.resp };
    if opts.resp_listen.is_none() && opts.tls.is_none() {
        return Err(NodeError::Options("no client port: give a plain RESP port, a TLS port or both".into()));
    }
    let plain = opts.resp_listen.map(|addr| bind_only("RESP", addr)).transpose()?;
    let tls =
        opts.tls.as_ref().map(|tls| bind_only("TLS", tls.addr).map(|bound| (bound, tls.config.clone()))).transpose()?;
    let (peer_listener, peer_addr) = bind("peer", opts.peer_listen).await?;
    let http_listener = match opts.http_listen {
        Some(addr) => Some(bind("HTTP", addr).await?),
        None => None,
    };

    let peer_drops = Arc::new(AtomicU64::new(0));
    let (inbox_tx, inbox_rx) = inbox::channel();
    let gate = Gate::new(me, &opts.cluster, &opts.region, opts.wan.clone());
    let spawner = transport::spawner(gate.clone(), Handle::current(), opts.peer_tls.clone());
    let mut queues = PeerQueues::new(peer_drops.clone(), spawner);
    // Where the nodes the cluster started with are; the core tells the driver of others as they join.
    opts.cluster.nodes.iter().filter(|n| n.id != me).for_each(|n| queues.route(n.id, n.peer_addr.clone()));
    let persistence = Arc::new(Persistence::new(opts.durability));
    // A core that serves from the start (a node that stored a map) listens before this returns.
    let serving_now = process.serving();
    let (serving_tx, serving) = watch::channel(serving_now);
    let (access_tx, access) = watch::channel(process.access().cloned());
    let (resp_addr, tls_addr) = (plain.as_ref().map(|p| p.1), tls.as_ref().map(|t| t.0 .1));
    let ports = ClientPorts {
        plain: plain.map(|(socket, addr)| client_port(socket, serving_now, "RESP", addr)).transpose()?,
        tls: tls
            .map(|((socket, addr), config)| client_port(socket, serving_now, "TLS", addr).map(|port| (port, config)))
            .transpose()?,
    };
    let published = Published::new(serving_tx, access_tx);
    let driver = Driver::new(me, process, inbox_rx, queues, persistence.clone(), published);
    let core: Arc<dyn CoreInbox> = Arc::new(driver.handle(inbox_tx.clone()));
    let core_task = driver::spawn(driver);

    let accepting = transport::accept_peers(peer_listener, gate, inbox_tx.clone(), opts.peer_tls.clone());
    let peers = vec![tokio::spawn(accepting)];

    let data_path = opts.data_dir.as_ref().map(|d| d.path().to_path_buf());
    let mut metrics = NodeMetrics::new(peer_drops, persistence, data_path);
    metrics.peer_tls = opts.peer_tls.as_ref().map(PeerTls::failures);
    let metrics = Arc::new(metrics);
    let (drain_switch, drain) = Drain::switch();
    let frontend = Frontend {
        core: core.clone(),
        limits: opts.limits,
        resp: resp_limits,
        node: me,
        resp_port: resp_addr.map_or(0, |a| a.port()),
        cluster_nodes: opts.cluster.nodes.len(),
        metrics: metrics.clone(),
        client_ids: AtomicU64::new(0),
        drain,
        outbox: Default::default(),
        default_user: User::default_user(opts.requirepass.as_ref().map(|p| p.phc.clone())),
        access,
    };
    let users = http::Users { access: frontend.access.clone(), default_user: frontend.default_user.clone() };
    let resp = tokio::spawn(serve_resp_once_serving(ports, Arc::new(frontend), serving.clone()));
    let http_addr = http_listener.as_ref().map(|(_, addr)| *addr);
    let http = http_listener.map(|(listener, _)| {
        http::spawn(
            listener,
            http::View::new(me, &opts.cluster, core.clone(), metrics, serving),
            opts.http_security.clone(),
            users,
        )
    });
    let _data_dir = opts.data_dir.clone();
    let certificates = Certificates {
        client: opts.tls.as_ref().map(|t| t.config.clone()),
        http: opts.http_security.tls.as_ref().map(|t| t.tls.clone()),
        peer: opts.peer_tls.clone(),
    };
    Ok(NodeHandle {
        resp_addr,
        tls_addr,
        peer_addr,
        http_addr,
        core,
        core_task,
        resp,
        drain: drain_switch,
        http,
        peers,
        certificates,
        _data_dir,
    })
}

/// Connections the kernel queues for the RESP listener before it accepts them (tokio's default).
const RESP_BACKLOG: u32 = 1024;

/// Binds a socket without listening, so the port is the node's (and a clash an error now), and reports the
/// address it got.
fn bind_only(what: &'static str, addr: SocketAddr) -> Result<(TcpSocket, SocketAddr), NodeError> {
    let bind_error = |source| NodeError::Bind { what, addr, source };
    let socket = if addr.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }.map_err(bind_error)?;
    // As TcpListener::bind does: a restarted node may bind while its old connections linger in TIME_WAIT.
    socket.set_reuseaddr(true).map_err(bind_error)?;
    socket.bind(addr).map_err(bind_error)?;
    let bound = socket.local_addr().map_err(bind_error)?;
    Ok((socket, bound))
}

/// A client port: listening, or bound and waiting for the core to serve.
enum RespPort {
    Listening(TcpListener),
    Waiting(TcpSocket),
}

impl RespPort {
    fn listen(self) -> io::Result<TcpListener> {
        match self {
            RespPort::Listening(listener) => Ok(listener),
            RespPort::Waiting(socket) => socket.listen(RESP_BACKLOG),
        }
    }
}

/// A bound client port, listening already if the core serves now (so a clash is an error returned now).
fn client_port(
    socket: TcpSocket,
    serving_now: bool,
    what: &'static str,
    addr: SocketAddr,
) -> Result<RespPort, NodeError> {
    if !serving_now {
        return Ok(RespPort::Waiting(socket));
    }
    socket.listen(RESP_BACKLOG).map(RespPort::Listening).map_err(|source| NodeError::Bind { what, addr, source })
}

/// The node's client ports: the plain RESP one and the TLS one, either of which may be off.
struct ClientPorts {
    plain: Option<RespPort>,
    tls: Option<(RespPort, TlsConfig)>,
}

impl ClientPorts {
    fn waiting(&self) -> bool {
        let plain = self.plain.iter();
        plain.chain(self.tls.iter().map(|(port, _)| port)).any(|port| matches!(port, RespPort::Waiting(_)))
    }

    fn listen(self) -> io::Result<ClientListeners> {
        let tls = self.tls.map(|(port, config)| port.listen().map(|listener| (listener, config)));
        Ok(ClientListeners { plain: self.plain.map(RespPort::listen).transpose()?, tls: tls.transpose()? })
    }
}

/// Listens on the client ports once the core serves, then serves clients until the node drains. A node that
/// drains before it ever served never listens.
async fn serve_resp_once_serving(ports: ClientPorts, frontend: Arc<Frontend>, mut serving: watch::Receiver<bool>) {
    if ports.waiting() {
        let mut drain = frontend.drain.watch();
        tokio::select! {
            () = drain.started() => return,
            ready = serving.wait_for(|serving| *serving) => {
                if ready.is_err() {
                    return;
                }
            }
        }
    }
    match ports.listen() {
        Ok(listeners) => resp::serve(listeners, frontend).await,
        Err(e) => tracing::error!("cannot listen for Redis clients: {e}"),
    }
}

/// Binds one listener and reports the address it actually got (port 0 becomes a real port).
async fn bind(what: &'static str, addr: SocketAddr) -> Result<(TcpListener, SocketAddr), NodeError> {
    let bind_error = |source| NodeError::Bind { what, addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
    let bound = listener.local_addr().map_err(bind_error)?;
    Ok((listener, bound))
}

impl NodeHandle {
    /// The plain RESP port's address. Panics on a node without one (`NodeOptions::resp_listen` of `None`): see
    /// [`NodeHandle::plain_addr`].
    pub fn resp_addr(&self) -> SocketAddr {
        self.resp_addr.expect("the node has a plain RESP port")
    }

    /// The plain RESP port's address, if the node has one.
    pub fn plain_addr(&self) -> Option<SocketAddr> {
        self.resp_addr
    }

    /// The TLS client port's address, if the node has one.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
    }

    pub fn peer_addr(&self) -> SocketAddr {
        self.peer_addr
    }

    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// Reads the certificate files of the client TLS port, the HTTPS port and the peers again, and serves new
    /// connections with them if all of them load (`certificates.rs`): how many configurations were reloaded.
    pub fn reload_certificates(&self) -> Result<usize, ReloadError> {
        self.certificates.reload()
    }

    /// Hands a request to the node's core, as a client's would be, and waits for the reply.
    pub async fn request(&self, req: Request) -> Reply {
        let stopped = || Reply::Error(ErrorKind::Unavailable, "the node stopped".into());
        self.core.submit(req).await.unwrap_or_else(|_| stopped())
    }

    /// Graceful: stop accepting clients and drain them (every command a client has sent by now is answered,
    /// then its connection is closed; up to `accept::DRAIN_MAX`, after which the rest are
    /// cut off and their requests may or may not take effect), let the core task finish its batch and
    /// sync, stop tasks, wait for the core to end. Peer messages still queued may be lost (the protocols tolerate
    /// loss).
    pub async fn shutdown(self) {
        // The RESP task closes its listener, waits for its connections to drain, and ends.
        self.drain.throw();
        let _ = self.resp.await;
        if let Some(http) = self.http {
            http.stop().await;
        }
        let core = self.core;
        // Waits for room while the inbox is full, so it runs off the runtime.
        let _ = tokio::task::spawn_blocking(move || core.request_shutdown()).await;
        let _ = self.core_task.await;
        for task in &self.peers {
            task.abort();
        }
        for task in self.peers {
            let _ = task.await;
        }
    }
}
