//! Mutual TLS between nodes (`--peer-certs-dir`, docs/security.md) on real processes: a three-node cluster
//! over it serves reads and writes, a fourth node with a certificate of the cluster's CA joins, and nodes with
//! a certificate of another CA, an expired one or none at all are refused with the reason logged on both sides,
//! while the cluster keeps serving and its map gains no node. A node given another node's certificate does not
//! start.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::certs::{ca, node_certs, s};
use support::{free_port, resp::Resp, Server};

/// How long a refused joiner is given to be refused, on both sides.
const REFUSED_WITHIN: Duration = Duration::from_secs(20);

/// Replaces node `id`'s certificate in `certs` with one signed by `ca` that expired an hour ago: `meridian cert`
/// makes only certificates valid from now.
fn expire(certs: &Path, ca: &Path, id: u32) {
    let read = |p: PathBuf| std::fs::read_to_string(p).unwrap();
    let ca_key = rcgen::KeyPair::from_pem(&read(ca.join("ca.key"))).unwrap();
    let issuer = rcgen::Issuer::from_ca_cert_pem(&read(ca.join("ca.crt")), ca_key).unwrap();
    let mut params = rcgen::CertificateParams::new(vec![format!("127.0.0.{id}")]).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, format!("node-{id}"));
    let now = time::OffsetDateTime::now_utc();
    (params.not_before, params.not_after) = (now - time::Duration::days(2), now - time::Duration::hours(1));
    params.extended_key_usages =
        vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth, rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    std::fs::write(certs.join("node.crt"), cert.pem()).unwrap();
    std::fs::write(certs.join("node.key"), key.serialize_pem()).unwrap();
}

fn peer_addr(id: u32) -> SocketAddr {
    let ip = format!("127.0.0.{id}");
    format!("{ip}:{}", free_port(&ip)).parse().unwrap()
}

/// Nodes 1..=3 on 127.0.0.N, each with its certificates from `ca`; ready.
fn secure_cluster(dir: &Path, ca: &Path) -> Vec<Server> {
    let peers: Vec<SocketAddr> = (1..=3).map(peer_addr).collect();
    let list: Vec<String> = peers.iter().zip(1..).map(|(a, id)| format!("{id}={a}")).collect();
    let servers: Vec<Server> = (1..=3u32)
        .map(|id| {
            let certs = s(&node_certs(dir, ca, id));
            let start = ["--peers".to_string(), list.join(","), "--peer-certs-dir".into(), certs];
            Server::launch(id, &format!("127.0.0.{id}"), peers[id as usize - 1], &start, dir)
        })
        .collect();
    servers.iter().for_each(|s| s.wait_ready(Duration::from_secs(30)));
    servers
}

/// Node `id` joining through `via`, with `certs` as its --peer-certs-dir if any.
fn joiner(id: u32, via: &Server, certs: Option<&Path>, dir: &Path) -> Server {
    let mut start = vec!["--join".to_string(), via.http.to_string()];
    start.extend(certs.map(|c| ["--peer-certs-dir".to_string(), s(c)]).into_iter().flatten());
    Server::launch(id, &format!("127.0.0.{id}"), peer_addr(id), &start, dir)
}

/// The node ids of the cluster map, as node 1 shows it.
fn map_ids(server: &Server) -> Vec<u64> {
    let status = server.cluster_status();
    status["status"]["nodes"].as_array().into_iter().flatten().filter_map(|n| n["id"].as_u64()).collect()
}

/// Writes and reads back `key` through every node.
fn serves(servers: &[Server], key: &str) {
    for (i, server) in servers.iter().enumerate() {
        let mut conn = support::resp::Conn::connect(server.resp, Duration::from_secs(5)).unwrap();
        let value = format!("v{i}");
        assert_eq!(conn.cmd(&["SET", key, &value]).unwrap(), Resp::Simple("OK".into()), "node {}", server.id);
        assert_eq!(conn.cmd(&["GET", key]).unwrap(), Resp::Bulk(Some(value.into_bytes())), "node {}", server.id);
    }
}

/// Waits until the joiner's log has `theirs` and some cluster node's has `ours`; then stops the joiner.
fn refused(mut joiner: Server, cluster: &[Server], theirs: &str, ours: &str) {
    let start = Instant::now();
    let seen = |joiner: &Server| {
        joiner.log().contains(theirs)
            && cluster.iter().any(|s| s.log().contains(&format!("refusing peer connection: {ours}")))
    };
    while !seen(&joiner) && start.elapsed() < REFUSED_WITHIN {
        std::thread::sleep(Duration::from_millis(100));
    }
    let logs: Vec<String> = cluster.iter().map(Server::log).collect();
    assert!(
        seen(&joiner),
        "joiner {}: {theirs:?}, cluster: {ours:?}\njoiner:\n{}\ncluster:\n{}",
        joiner.id,
        joiner.log(),
        logs.join("\n")
    );
    joiner.kill();
}

#[test]
fn a_cluster_over_mutual_tls_admits_only_nodes_with_a_certificate_of_its_ca() {
    let dir = tempfile::tempdir().unwrap();
    let ca = ca(&dir.path().join("ca"));
    let cluster = secure_cluster(dir.path(), &ca);
    serves(&cluster, "before");
    assert!(cluster[0].log().contains("connected to peer over mutual TLS"), "{}", cluster[0].log());

    let foreign = ca_certs_of_another_ca(dir.path());
    refused(
        joiner(5, &cluster[0], Some(&foreign), dir.path()),
        &cluster,
        "not signed by this node's CA",
        "TLS handshake failed",
    );
    let expired = node_certs(dir.path(), &ca, 6);
    expire(&expired, &ca, 6);
    refused(joiner(6, &cluster[0], Some(&expired), dir.path()), &cluster, "CertificateExpired", "TLS handshake failed");
    refused(
        joiner(7, &cluster[0], None, dir.path()),
        &cluster,
        "the peer refused: it speaks plain TCP, and this node's peer port needs mutual TLS",
        "it speaks plain TCP",
    );
    serves(&cluster, "after-refusals");
    assert_eq!(map_ids(&cluster[0]), vec![1, 2, 3], "refused nodes are not in the map");
    let metrics = cluster.iter().map(|s| s.http_get("/metrics")).collect::<Vec<_>>().join("\n");
    assert!(metrics.contains("meridian_peer_tls_failures_total{reason=\"plain\"}"), "{metrics}");

    let fourth = joiner(4, &cluster[0], Some(&node_certs(dir.path(), &ca, 4)), dir.path());
    fourth.wait_ready(Duration::from_secs(30));
    assert_eq!(map_ids(&cluster[0]), vec![1, 2, 3, 4]);
    serves(std::slice::from_ref(&fourth), "joined");
}

/// Node 5's certificates directory under a CA of its own.
fn ca_certs_of_another_ca(dir: &Path) -> PathBuf {
    let other = ca(&dir.join("other-ca"));
    node_certs(dir, &other, 5)
}

#[test]
fn a_node_given_another_nodes_certificate_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let ca = ca(&dir.path().join("ca"));
    let certs = s(&node_certs(dir.path(), &ca, 3));
    let peer = peer_addr(1);
    let start = ["--peers".to_string(), format!("1={peer}"), "--replication".into(), "1".into()];
    let mut server =
        Server::launch(1, "127.0.0.1", peer, &[&start[..], &["--peer-certs-dir".into(), certs]].concat(), dir.path());
    let exit = server.wait_exit(Duration::from_secs(20)).expect("a node with another node's certificate stops");
    assert!(!exit.success());
    assert!(server.log().contains("is node 3's certificate, not this node's (1)"), "{}", server.log());
}
