//! The HTTP server (axum): `GET /health` for liveness probes, `GET /ready` (200 once the node serves clients), `GET /metrics` for Prometheus (`docs/metrics.md`),
//! `GET /v1/cluster` for tools that need the
//! cluster as this node sees it — its id, the configuration it started from (with its fingerprint), and
//! what its protocol core reports (`Admin::Status`: for a Meridian node, the cluster map's nodes and
//! chains, the manager, and this node's replicas with their copy progress) — and the administration that
//! `meridian ctl` uses: `POST /v1/nodes` (add a node: JSON `{"id", "peer_addr", "resp_addr", "http_addr",
//! "vnodes", "region", "zone", "rack"}`) and `POST /v1/nodes/{id}/remove` (drain a node out and remove it). Both answer 202: the
//! request is on its way to the manager, and `/v1/cluster` shows when it took.
//!
//! Keyspaces: `GET /v1/keyspaces` lists them (number, name, configuration); `POST /v1/keyspaces` with JSON
//! `{"name": "sessions", "replicas": ["log", "log"], "update": "su", "read_from": "tail", "durability": "group",
//! "maxmemory": "256mb", "protocol": "chain", "placement": [["eu", 1], ["us", 1]], "ban_regions": ["asia"]}` (all
//! but the first two optional; `maxmemory` makes a cache keyspace, `placement` names regions) creates one,
//! `DELETE /v1/keyspaces/{name}` drops one, and `PUT /v1/keyspaces/{name}/master` with JSON `{"region": "us"}`
//! moves a lease keyspace's master region; `PUT /v1/manager/voters` with JSON `{"voters": [1, 4, 7]}` asks the
//! manager to move its Raft group to those voters (`[]`: the manager chooses). Each answers once this node's map
//! shows the change (the voters: the wish recorded): 201 or 200, or
//! 400 with why the map refuses it, 504 if the map did not show it in time, 503 if the node cannot ask yet.
//!
//! The port may be HTTPS (`tls.rs`), and may ask callers for the token or a certificate (`admission.rs`).

mod admission;
mod tls;
mod token;

pub(crate) use admission::Users;
pub use tls::HttpsConfig;
pub use token::{BadToken, HttpToken};

use crate::inbox::CoreInbox;
use crate::metrics::NodeMetrics;
use admission::Admission;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use meridian_core::exposition::{Exposition, MetricKind};
use meridian_core::keyspace::UnknownName;
use meridian_core::location::DEFAULT_REGION;
use meridian_core::size::parse_size;
use meridian_core::{
    Admin, ClusterConfig, ErrorKind, KeyspaceConfig, Location, NodeId, NodeToAdd, Placement, ProtocolConfig,
    ProtocolKnobs, ReplicaKind, Reply, Request,
};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tracing::error;

/// How long shutdown lets in-flight HTTP requests finish before cutting them off.
const DRAIN_MAX: Duration = Duration::from_secs(2);

/// What the HTTP handlers read: the node, the configuration it started from, its core and its figures.
pub(crate) struct View {
    node: NodeId,
    config: Value,
    core: Arc<dyn CoreInbox>,
    metrics: Arc<NodeMetrics>,
    /// Whether the core serves clients (`GET /ready`).
    serving: watch::Receiver<bool>,
}

impl View {
    pub(crate) fn new(
        node: NodeId,
        cluster: &ClusterConfig,
        core: Arc<dyn CoreInbox>,
        metrics: Arc<NodeMetrics>,
        serving: watch::Receiver<bool>,
    ) -> View {
        View { node, config: config_json(cluster), core, metrics, serving }
    }
}

/// A running HTTP server.
pub(crate) struct HttpServer {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

/// Who may use the HTTP API, and over what (docs/security.md). The default: plain HTTP, open to every caller.
#[derive(Clone, Debug, Default)]
pub struct HttpSecurity {
    /// The token a request may carry to be admitted (`--http-token-file`).
    pub token: Option<HttpToken>,
    /// HTTPS instead of HTTP, possibly asking callers for certificates.
    pub tls: Option<HttpsConfig>,
    /// Whether the probes go without the token or a certificate.
    pub open_probes: bool,
}

pub(crate) fn spawn(listener: TcpListener, view: View, security: HttpSecurity, users: Users) -> HttpServer {
    let view = Arc::new(view);
    let certificates = security.tls.as_ref().is_some_and(|t| t.client_certificates);
    let admission = Admission::new(security.token, certificates, security.open_probes, users);
    let app = Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics_text))
        .route("/v1/cluster", get(layout))
        .route("/v1/nodes", post(add_node))
        .route("/v1/nodes/{id}/remove", post(remove_node))
        .route("/v1/keyspaces", get(keyspaces).post(create_keyspace))
        .route("/v1/keyspaces/{name}", delete(drop_keyspace))
        .route("/v1/keyspaces/{name}/master", put(set_master_region))
        .route("/v1/manager/voters", put(set_voters))
        .with_state(view)
        .layer(axum::middleware::from_fn_with_state(admission, admission::check));
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let stopped = async {
            let _ = stopped.await;
        };
        let served = match security.tls {
            None => axum::serve(listener, app).with_graceful_shutdown(stopped).await,
            Some(https) => match tls::HttpsListener::new(listener, https.tls) {
                Ok(listener) => {
                    let app = app.into_make_service_with_connect_info::<tls::Caller>();
                    axum::serve(listener, app).with_graceful_shutdown(stopped).await
                }
                Err(e) => Err(e),
            },
        };
        if let Err(e) = served {
            error!("HTTP server failed: {e}");
        }
    });
    HttpServer { stop, task }
}

impl HttpServer {
    /// Stops accepting, lets in-flight requests finish for up to [`DRAIN_MAX`], then cuts off the rest.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(());
        let mut task = self.task;
        if tokio::time::timeout(DRAIN_MAX, &mut task).await.is_err() {
            task.abort();
            let _ = task.await;
        }
    }
}

async fn health(State(view): State<Arc<View>>) -> Json<Value> {
    Json(json!({ "status": "ok", "node": view.node.0 }))
}

/// 200 once the node serves clients (its RESP port listens), 503 before: what an orchestrator or a script
/// waits for. `/health` says only that the process is up.
async fn ready(State(view): State<Arc<View>>) -> (StatusCode, Json<Value>) {
    if *view.serving.borrow() {
        (StatusCode::OK, Json(json!({ "status": "ready", "node": view.node.0 })))
    } else {
        let why = "no cluster map that places this node yet; clients are refused until it has one";
        (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "status": "not ready", "node": view.node.0, "why": why })))
    }
}

/// 503 with the reason when the core cannot answer (it is stopping, or its input queue is full).
async fn layout(State(view): State<Arc<View>>) -> (StatusCode, Json<Value>) {
    let status = match view.core.submit(Request::Admin(Admin::Status)).await {
        Ok(Reply::Text(text)) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        Ok(Reply::Error(kind, msg)) => return unavailable(format!("{} {msg}", kind.code())),
        Ok(other) => return unavailable(format!("the core answered {other:?}")),
        Err(_) => return unavailable("the node is stopping".into()),
    };
    (StatusCode::OK, Json(json!({ "node": view.node.0, "config": view.config, "status": status })))
}

/// The Prometheus text format (`docs/metrics.md`): the core's families, if it answers, then the runner's.
async fn metrics_text(State(view): State<Arc<View>>) -> (StatusCode, [(header::HeaderName, &'static str); 1], String) {
    let core = match view.core.submit(Request::Admin(Admin::Metrics)).await {
        Ok(Reply::Text(text)) => Some(text),
        _ => None,
    };
    let runner = view.metrics.clone();
    let rendered = tokio::task::spawn_blocking(move || {
        let mut e = Exposition::new();
        let help = "1 if the protocol core answered this scrape; its families are missing otherwise.";
        e.single("meridian_core_up", MetricKind::Gauge, help, u8::from(core.is_some()));
        runner.render(&mut e);
        core.unwrap_or_default() + &e.into_text()
    })
    .await;
    let content_type = [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")];
    match rendered {
        Ok(text) => (StatusCode::OK, content_type, text),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, content_type, format!("metrics failed: {e}\n")),
    }
}

/// A node to add, as `POST /v1/nodes` takes it.
#[derive(Deserialize)]
struct NewNode {
    id: u32,
    peer_addr: String,
    #[serde(default)]
    resp_addr: String,
    http_addr: Option<String>,
    vnodes: Option<u32>,
    /// Where it runs; absent: region `default`.
    region: Option<String>,
    zone: Option<String>,
    rack: Option<String>,
}

async fn add_node(State(view): State<Arc<View>>, Json(n): Json<NewNode>) -> (StatusCode, Json<Value>) {
    let vnodes = n.vnodes.unwrap_or(view.config["vnodes"].as_u64().unwrap_or(1) as u32);
    let region = n.region.as_deref().unwrap_or(DEFAULT_REGION);
    let location = match Location::new(region, n.zone.as_deref(), n.rack.as_deref()) {
        Ok(location) => location,
        Err(why) => return (StatusCode::BAD_REQUEST, Json(json!({ "error": why.to_string() }))),
    };
    let admin = Admin::AddNode(Box::new(NodeToAdd {
        id: NodeId(n.id),
        peer_addr: n.peer_addr,
        resp_addr: n.resp_addr,
        http_addr: n.http_addr,
        vnodes,
        location,
    }));
    administer(&view, admin).await
}

async fn remove_node(State(view): State<Arc<View>>, Path(id): Path<u32>) -> (StatusCode, Json<Value>) {
    administer(&view, Admin::RemoveNode { id: NodeId(id) }).await
}

/// Hands an administration request to the core: 202 with what it said, or 503 with why it could not.
async fn administer(view: &View, admin: Admin) -> (StatusCode, Json<Value>) {
    match view.core.submit(Request::Admin(admin)).await {
        Ok(Reply::Text(text)) => (StatusCode::ACCEPTED, Json(json!({ "accepted": text }))),
        Ok(Reply::Error(kind, msg)) => unavailable(format!("{} {msg}", kind.code())),
        Ok(other) => unavailable(format!("the core answered {other:?}")),
        Err(_) => unavailable("the node is stopping".into()),
    }
}

async fn keyspaces(State(view): State<Arc<View>>) -> (StatusCode, Json<Value>) {
    match view.core.submit(Request::Admin(Admin::Keyspaces)).await {
        Ok(Reply::Text(text)) => (StatusCode::OK, Json(serde_json::from_str(&text).unwrap_or(Value::String(text)))),
        other => failed(other),
    }
}

/// A keyspace to create, as `POST /v1/keyspaces` takes it; `GET /v1/keyspaces` lists each keyspace in the same
/// shape, which is how SELECT copies `default`'s configuration to a new numbered database (`resp/databases.rs`).
#[derive(Deserialize)]
pub(crate) struct NewKeyspace {
    name: String,
    /// Head first.
    replicas: Vec<String>,
    /// `su` (the default), `ausi` or `au`.
    update: Option<String>,
    /// `tail` (the default), `mid` or `head`.
    read_from: Option<String>,
    /// `sync`, `group` or `async`; absent: each node's own `--durability`.
    durability: Option<String>,
    /// A cache keyspace's cap per node: bytes, as a number or a size such as `"256mb"`.
    maxmemory: Option<Value>,
    /// `chain` (the default), `quorum`, `lease` or `meteor`.
    protocol: Option<String>,
    /// A quorum keyspace's read and write consistency levels: `one`, `quorum` (the default), `all` or a count.
    read_quorum: Option<String>,
    write_quorum: Option<String>,
    /// A quorum keyspace's version stamps: `quorum` (ABD, the default) or `clock`.
    timestamps: Option<String>,
    /// A lease keyspace's lease length in milliseconds (default 60000).
    lease_ms: Option<u32>,
    /// A lease keyspace's write mode: `active` (the default) or `passive`.
    write_mode: Option<String>,
    /// A meteor keyspace's status interval (default 10) and clock bound ε (default 10), in milliseconds.
    status_interval_ms: Option<u32>,
    clock_bound_ms: Option<u32>,
    /// A meteor keyspace's θt: milliseconds (a number or its text) or `"auto"`; and whether a fixed one is
    /// applied even above its measured bound.
    theta_ms: Option<Value>,
    /// A meteor keyspace's statuses in a row that carry each change (default 2).
    redundancy: Option<u32>,
    /// Null as `keyspace list` shows it for other protocols: the listing of a keyspace reads back as its create.
    #[serde(rename = "unsafe")]
    unsafe_theta: Option<bool>,
    /// Replicas per region, the home region first: `[["eu", 2], ["us", 1]]`; absent or empty: spread.
    #[serde(default)]
    placement: Vec<(String, u32)>,
    /// Regions that hold none of its replicas.
    #[serde(default)]
    ban_regions: Vec<String>,
}

impl NewKeyspace {
    /// The configuration asked for, or why it is refused, as the answer's text.
    pub(crate) fn config(&self) -> Result<KeyspaceConfig, String> {
        let text = |e: UnknownName| e.to_string();
        let replicas =
            self.replicas.iter().map(|r| r.parse()).collect::<Result<Vec<ReplicaKind>, _>>().map_err(text)?;
        let mut config = KeyspaceConfig::with_replicas(replicas);
        if let Some(update) = &self.update {
            config.update = update.parse().map_err(text)?;
        }
        if let Some(read_from) = &self.read_from {
            config.read_from = read_from.parse().map_err(text)?;
        }
        config.durability = self.durability.as_deref().map(str::parse).transpose().map_err(text)?;
        config.maxmemory = match &self.maxmemory {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => Some(n.as_u64().ok_or("maxmemory must be a whole number of bytes")?),
            Some(Value::String(s)) => Some(parse_size(s).map_err(|e| e.to_string())?),
            Some(other) => return Err(format!("maxmemory must be bytes or a size such as \"256mb\", not {other}")),
        };
        let protocol = self.protocol.as_deref().map(str::parse).transpose().map_err(text)?;
        let theta = match &self.theta_ms {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            Some(other) => return Err(format!("theta_ms must be milliseconds or \"auto\", not {other}")),
        };
        let knobs = ProtocolKnobs {
            read: self.read_quorum.as_deref(),
            write: self.write_quorum.as_deref(),
            timestamps: self.timestamps.as_deref(),
            lease_ms: self.lease_ms,
            write_mode: self.write_mode.as_deref(),
            status_interval_ms: self.status_interval_ms,
            clock_bound_ms: self.clock_bound_ms,
            theta: theta.as_deref(),
            redundancy: self.redundancy,
            unsafe_theta: self.unsafe_theta.unwrap_or(false),
        };
        config.protocol =
            ProtocolConfig::from_options(protocol.unwrap_or_default(), &knobs).map_err(|e| e.to_string())?;
        config.placement = Placement { regions: self.placement.clone(), banned: self.ban_regions.clone() };
        config.validate().map_err(|e| e.to_string())?;
        Ok(config)
    }
}

async fn create_keyspace(State(view): State<Arc<View>>, Json(k): Json<NewKeyspace>) -> (StatusCode, Json<Value>) {
    let config = match k.config() {
        Ok(config) => config,
        Err(why) => return (StatusCode::BAD_REQUEST, Json(json!({ "error": why }))),
    };
    match view.core.submit(Request::Admin(Admin::CreateKeyspace { name: k.name, config: Box::new(config) })).await {
        Ok(Reply::Text(text)) => (StatusCode::CREATED, Json(json!({ "created": text }))),
        other => failed(other),
    }
}

async fn drop_keyspace(State(view): State<Arc<View>>, Path(name): Path<String>) -> (StatusCode, Json<Value>) {
    match view.core.submit(Request::Admin(Admin::DropKeyspace { name })).await {
        Ok(Reply::Text(text)) => (StatusCode::OK, Json(json!({ "dropped": text }))),
        other => failed(other),
    }
}

/// The body of `PUT /v1/keyspaces/{name}/master`: the keyspace's master region, or one key's if `key` is given.
#[derive(Deserialize)]
struct Master {
    region: String,
    key: Option<String>,
}

async fn set_master_region(
    State(view): State<Arc<View>>,
    Path(name): Path<String>,
    Json(Master { region, key }): Json<Master>,
) -> (StatusCode, Json<Value>) {
    let admin = match key {
        Some(key) => Admin::SetKeyMaster { name, key: key.into(), region },
        None => Admin::SetMasterRegion { name, region },
    };
    match view.core.submit(Request::Admin(admin)).await {
        Ok(Reply::Text(text)) => (StatusCode::OK, Json(json!({ "moved": text }))),
        other => failed(other),
    }
}

/// The body of `PUT /v1/manager/voters`: the node ids to vote, or none to let the manager choose.
#[derive(Deserialize)]
struct Voters {
    voters: Vec<u32>,
}

async fn set_voters(State(view): State<Arc<View>>, Json(Voters { voters }): Json<Voters>) -> (StatusCode, Json<Value>) {
    let voters = voters.into_iter().map(NodeId).collect();
    match view.core.submit(Request::Admin(Admin::SetVoters { voters })).await {
        Ok(Reply::Text(text)) => (StatusCode::OK, Json(json!({ "voters": text }))),
        other => failed(other),
    }
}

/// A keyspace request that did not succeed, with the status that says why.
fn failed<E>(answer: Result<Reply, E>) -> (StatusCode, Json<Value>) {
    let (status, why) = match answer {
        Ok(Reply::Error(kind, msg)) => {
            let status = match kind {
                ErrorKind::Invalid => StatusCode::BAD_REQUEST,
                ErrorKind::Timeout => StatusCode::GATEWAY_TIMEOUT,
                _ => StatusCode::SERVICE_UNAVAILABLE,
            };
            (status, msg)
        }
        Ok(other) => (StatusCode::SERVICE_UNAVAILABLE, format!("the core answered {other:?}")),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "the node is stopping".into()),
    };
    (status, Json(json!({ "error": why })))
}

fn unavailable(why: String) -> (StatusCode, Json<Value>) {
    (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "error": why })))
}

/// The configuration the node started from. Tokens and the fingerprint are u64 JSON numbers (exact in
/// serde_json; a JavaScript reader would need a big-integer parser for them).
fn config_json(cluster: &ClusterConfig) -> Value {
    json!({
        "nodes": cluster.nodes,
        "replication": cluster.replication,
        "default": cluster.default,
        "vnodes": cluster.vnodes,
        "fingerprint": cluster.fingerprint(),
    })
}
