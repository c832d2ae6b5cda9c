//! The HTTP server (axum): `GET /health` for liveness probes and `GET /v1/cluster` for tools that need
//! the cluster as this node sees it — its id, the configuration it started from (with its fingerprint),
//! and what its protocol core reports (`Admin::Status`: for a Meridian node, the cluster map's nodes and
//! chains, the manager, and this node's replicas with their copy progress).

use crate::inbox::CoreInbox;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use meridian_core::{Admin, ClusterConfig, NodeId, Reply, Request};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::error;

/// How long shutdown lets in-flight HTTP requests finish before cutting them off.
const DRAIN_MAX: Duration = Duration::from_secs(2);

struct View {
    node: NodeId,
    config: Value,
    core: Arc<dyn CoreInbox>,
}

/// A running HTTP server.
pub(crate) struct HttpServer {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

pub(crate) fn spawn(
    listener: TcpListener,
    node: NodeId,
    cluster: &ClusterConfig,
    core: Arc<dyn CoreInbox>,
) -> HttpServer {
    let view = Arc::new(View { node, config: config_json(cluster), core });
    let app = Router::new().route("/health", get(health)).route("/v1/cluster", get(layout)).with_state(view);
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let server = axum::serve(listener, app).with_graceful_shutdown(async {
            let _ = stopped.await;
        });
        if let Err(e) = server.await {
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

fn unavailable(why: String) -> (StatusCode, Json<Value>) {
    (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "error": why })))
}

/// The configuration the node started from. Tokens and the fingerprint are u64 JSON numbers (exact in
/// serde_json; a JavaScript reader would need a big-integer parser for them).
fn config_json(cluster: &ClusterConfig) -> Value {
    json!({
        "nodes": cluster.nodes,
        "replication": cluster.replication,
        "vnodes": cluster.vnodes,
        "fingerprint": cluster.fingerprint(),
    })
}
