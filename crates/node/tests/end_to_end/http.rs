//! The HTTP endpoints, fetched with a plain HTTP/1.1 request.

use crate::support::{cluster, start_kv, within};
use meridian_core::NodeId;
use serde_json::Value;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The status code and JSON body of `GET path`.
async fn get(addr: SocketAddr, path: &str) -> (u16, Value) {
    let mut stream = within("connect", TcpStream::connect(addr)).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    within("read response", stream.read_to_string(&mut response)).await.unwrap();
    let status = response.split(' ').nth(1).unwrap().parse().unwrap();
    let body = response.split_once("\r\n\r\n").unwrap().1;
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

#[tokio::test]
async fn health_and_cluster_layout() {
    let cluster = cluster(3);
    let node = start_kv(NodeId(2), &cluster).await;
    let http = node.http_addr().unwrap();

    let (status, health) = get(http, "/health").await;
    assert_eq!(status, 200);
    assert_eq!(health, serde_json::json!({ "status": "ok", "node": 2 }));

    let (status, layout) = get(http, "/v1/cluster").await;
    assert_eq!(status, 200);
    assert_eq!(layout["node"], 2);
    assert_eq!(layout["config"]["fingerprint"].as_u64(), Some(cluster.fingerprint()));
    assert_eq!(layout["config"]["replication"], 1);
    assert_eq!(layout["config"]["vnodes"], 8);
    assert_eq!(layout["config"]["nodes"][2]["id"], 3);
    assert_eq!(layout["config"]["nodes"][2]["peer_addr"], cluster.nodes[2].peer_addr.as_str());
    assert_eq!(layout["status"], serde_json::json!({ "keys": 0 }), "what the core reports, as JSON");

    let (status, _) = get(http, "/nowhere").await;
    assert_eq!(status, 404);
    within("shutdown", node.shutdown()).await;
}
