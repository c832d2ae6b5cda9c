//! The HTTP server (axum): `GET /health` for liveness probes and `GET /v1/cluster` for tools that need
//! the cluster layout — this node's id, the cluster config with its fingerprint, and the ring's chains
//! (id, end token, members head to tail). The layout is static for a node's lifetime, so its JSON is
//! built once at start.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use meridian_core::{ClusterConfig, NodeId, Ring};
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
    cluster: Value,
}

/// A running HTTP server.
pub(crate) struct HttpServer {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

pub(crate) fn spawn(listener: TcpListener, node: NodeId, cluster: &ClusterConfig) -> HttpServer {
    let view = Arc::new(View { node, cluster: cluster_json(node, cluster) });
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

async fn layout(State(view): State<Arc<View>>) -> Json<Value> {
    Json(view.cluster.clone())
}

/// Tokens and the fingerprint are u64 JSON numbers (exact in serde_json; a JavaScript reader would need
/// a big-integer parser for them).
fn cluster_json(node: NodeId, cluster: &ClusterConfig) -> Value {
    json!({
        "node": node.0,
        "cluster": {
            "nodes": cluster.nodes,
            "replication": cluster.replication,
            "vnodes": cluster.vnodes,
            "fingerprint": cluster.fingerprint(),
        },
        "chains": Ring::new(cluster).chains(),
    })
}
