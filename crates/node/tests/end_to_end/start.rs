//! Starting and stopping: errors are returned with clear messages, and shutdown releases the ports.

use crate::kv_process::KvNode;
use crate::resp_client::{Client, Resp};
use crate::support::{cluster, loopback, options, within};
use meridian_core::NodeId;
use meridian_node::{start_node, NodeError};

#[tokio::test]
async fn a_port_in_use_is_a_clear_error() {
    let cluster = cluster(1);
    let taken = std::net::TcpListener::bind(loopback(0)).unwrap();
    let mut opts = options(NodeId(1), &cluster);
    opts.resp_listen = Some(taken.local_addr().unwrap());
    let err = start_node(opts, KvNode::new(NodeId(1), &cluster)).await.err().expect("bind should fail");
    assert!(matches!(err, NodeError::Bind { what: "RESP", .. }));
    let message = err.to_string();
    let expected = format!("cannot bind RESP listener {}: ", taken.local_addr().unwrap());
    assert!(message.starts_with(&expected), "{message}");
}

#[tokio::test]
async fn shutdown_releases_the_ports() {
    let cluster = cluster(1);
    let node = start_node(options(NodeId(1), &cluster), KvNode::new(NodeId(1), &cluster)).await.unwrap();
    let resp = node.resp_addr();
    within("shutdown", node.shutdown()).await;

    let mut opts = options(NodeId(1), &cluster);
    opts.resp_listen = Some(resp);
    let again = start_node(opts, KvNode::new(NodeId(1), &cluster)).await.unwrap();
    let mut c = Client::connect(again.resp_addr()).await;
    assert_eq!(c.cmd(&["PING"]).await, Resp::Simple("PONG".into()));
    within("shutdown", again.shutdown()).await;
}
