//! Two nodes forwarding to each other over the peer transport, and the handshake refusing strangers.

use crate::kv_process::KvMsg;
use crate::resp_client::{encode, Client, Resp};
use crate::support::{cluster, owned_key, start_kv, within};
use meridian_core::wire::{self, Hello};
use meridian_core::{KeyspaceId, NodeId, Request, Write};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_node_serves_any_key_by_forwarding() {
    let cluster = cluster(2);
    let (n1, n2) = (start_kv(NodeId(1), &cluster).await, start_kv(NodeId(2), &cluster).await);
    let mine = owned_key(&cluster, NodeId(1), 0);
    let theirs = owned_key(&cluster, NodeId(2), 0);
    let mut c1 = Client::connect(n1.resp_addr()).await;
    let mut c2 = Client::connect(n2.resp_addr()).await;

    // Written through node 1, readable through node 2, which owns the key: the write went over the wire.
    assert_eq!(c1.cmd(&["SET", &theirs, "remote"]).await, Resp::ok());
    assert_eq!(c2.cmd(&["GET", &theirs]).await, Resp::bulk("remote"));
    assert_eq!(c2.cmd(&["SET", &mine, "local-to-1"]).await, Resp::ok());
    assert_eq!(c1.cmd(&["GET", &mine]).await, Resp::bulk("local-to-1"));
    assert_eq!(c1.cmd(&["SET", &theirs, "again", "NX"]).await, Resp::null());
    assert_eq!(c2.cmd(&["DEL", &mine, &theirs]).await, Resp::Int(2));
    assert_eq!(c1.cmd(&["EXISTS", &mine, &theirs]).await, Resp::Int(0));

    within("shutdown n1", n1.shutdown()).await;
    within("shutdown n2", n2.shutdown()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_replies_stay_in_order_when_some_are_forwarded() {
    let cluster = cluster(2);
    let (n1, n2) = (start_kv(NodeId(1), &cluster).await, start_kv(NodeId(2), &cluster).await);
    let keys: Vec<String> =
        (0..50).map(|i| owned_key(&cluster, if i % 2 == 0 { NodeId(1) } else { NodeId(2) }, i / 2)).collect();
    let mut c = Client::connect(n1.resp_addr()).await;
    let mut batch = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        batch.extend(encode(&["SET", key, &i.to_string()]));
        batch.extend(encode(&["GET", key]));
    }
    c.send_raw(&batch).await;
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(c.read().await, Resp::ok(), "SET {key}");
        assert_eq!(c.read().await, Resp::bulk(&i.to_string()), "GET {key}");
    }
    let mget: Vec<&str> = ["MGET"].into_iter().chain(keys.iter().map(String::as_str)).collect();
    let expected = (0..keys.len()).map(|i| Resp::bulk(&i.to_string())).collect();
    assert_eq!(c.cmd(&mget).await, Resp::Array(expected));
    within("shutdown n1", n1.shutdown()).await;
    within("shutdown n2", n2.shutdown()).await;
}

/// Opens a peer connection to `n1` as node 2 and sends a hello with `fingerprint`, then a forwarded
/// write of `key`. Returns whether the node closed the connection on us, saying why (`wire::refusal`).
async fn impersonate_node_2(peer: std::net::SocketAddr, fingerprint: u64, key: &str) -> bool {
    let mut frames = Vec::new();
    wire::encode(&Hello { node: NodeId(2), cluster: fingerprint, region: "default".into() }, &mut frames).unwrap();
    let req = Request::Write(Write::put(KeyspaceId::DEFAULT, key.to_string().into(), "smuggled".into()));
    wire::encode(&KvMsg::Forward { tag: 0, req }, &mut frames).unwrap();
    let mut stream = within("connect to peer port", TcpStream::connect(peer)).await.unwrap();
    stream.write_all(&frames).await.unwrap();
    let mut said = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_millis(500), stream.read_to_end(&mut said)).await;
    let why = wire::refusal_reason(&said);
    matches!(read, Ok(Ok(_))) && why.is_some_and(|why| why.contains("cluster config"))
}

#[tokio::test]
async fn a_peer_from_another_cluster_is_refused() {
    let cluster = cluster(2);
    let n1 = start_kv(NodeId(1), &cluster).await;
    let mut c = Client::connect(n1.resp_addr()).await;
    let key = owned_key(&cluster, NodeId(1), 0);

    assert!(impersonate_node_2(n1.peer_addr(), cluster.fingerprint() ^ 1, &key).await, "connection kept open");
    assert_eq!(c.cmd(&["GET", &key]).await, Resp::null(), "a refused peer's message was applied");

    // The same frames with the right fingerprint are accepted and applied, so the refusal above was
    // the fingerprint's doing.
    assert!(!impersonate_node_2(n1.peer_addr(), cluster.fingerprint(), &key).await, "member refused");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while c.cmd(&["GET", &key]).await != Resp::bulk("smuggled") {
        assert!(tokio::time::Instant::now() < deadline, "an admitted peer's message was not applied");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    within("shutdown", n1.shutdown()).await;
}
