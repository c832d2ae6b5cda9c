//! The HTTP endpoints, fetched with a plain HTTP/1.1 request.

use crate::support::{cluster, start_kv, within};
use meridian_core::{NodeId, Ring};
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
    assert_eq!(layout["cluster"]["fingerprint"].as_u64(), Some(cluster.fingerprint()));
    assert_eq!(layout["cluster"]["replication"], 1);
    assert_eq!(layout["cluster"]["vnodes"], 8);
    assert_eq!(layout["cluster"]["nodes"][2]["id"], 3);
    assert_eq!(layout["cluster"]["nodes"][2]["peer_addr"], cluster.nodes[2].peer_addr.as_str());
    let ring = Ring::new(&cluster);
    let chains = layout["chains"].as_array().unwrap();
    assert_eq!(chains.len(), ring.chains().len());
    for (json, chain) in chains.iter().zip(ring.chains()) {
        assert_eq!(json["id"], chain.id.0);
        assert_eq!(json["end"].as_u64(), Some(chain.end));
        let members: Vec<u64> = json["members"].as_array().unwrap().iter().map(|m| m.as_u64().unwrap()).collect();
        assert_eq!(members, chain.members.iter().map(|m| u64::from(m.0)).collect::<Vec<_>>());
    }

    let (status, _) = get(http, "/nowhere").await;
    assert_eq!(status, 404);
    within("shutdown", node.shutdown()).await;
}
