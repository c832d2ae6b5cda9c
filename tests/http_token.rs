//! The HTTP API's token on real processes (docs/security.md, "The HTTP API's token"): without it, `meridian ctl`
//! is refused with a reason and changes nothing; with it (a flag, a file or MERIDIAN_TOKEN) it works; the probes
//! stay open only when the operator says so; a node joins only with the token.

mod support;

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;
use support::{free_port, Server};

fn token_file(dir: &std::path::Path) -> String {
    let file = dir.join("http-token");
    std::fs::write(&file, "t0ken-xyz\n").unwrap();
    file.display().to_string()
}

/// The status line of a GET of `path`.
fn status(server: &Server, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect_timeout(&server.http, Duration::from_secs(5)).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response.lines().next().unwrap_or_default().to_string()
}

#[test]
fn changes_need_the_token_and_probes_stay_open_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path());
    let server = Server::single(dir.path(), &["--http-token-file", &token, "--http-open-probes"]);

    let refused = server.ctl_fails(&["keyspace", "create", "orders", "--replicas", "log"]);
    assert!(refused.contains("HTTP 401") && refused.contains("needs its token"), "{refused}");
    let wrong = server.ctl_fails(&["--token", "nope", "keyspace", "list"]);
    assert!(wrong.contains("HTTP 401"), "{wrong}");
    let listed = server.ctl(&["--token-file", &token, "keyspace", "list"]);
    assert!(!listed.contains("orders"), "the refused create changed nothing: {listed}");
    server.ctl(&["--token", "t0ken-xyz", "keyspace", "create", "orders", "--replicas", "log"]);
    let by_env = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["ctl", "--addr", &server.http.to_string(), "keyspace", "list"])
        .env("MERIDIAN_TOKEN", "t0ken-xyz")
        .output()
        .unwrap();
    assert!(by_env.status.success(), "{}", String::from_utf8_lossy(&by_env.stderr));
    assert!(String::from_utf8_lossy(&by_env.stdout).contains("orders"));

    assert!(status(&server, "/health").contains("200"));
    assert!(status(&server, "/metrics").contains("200"));
    assert!(status(&server, "/v1/cluster").contains("401"), "the layout is not a probe");
}

#[test]
fn a_node_joins_only_with_the_token_and_closed_probes_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path());
    let server = Server::single(dir.path(), &["--http-token-file", &token]);
    assert!(status(&server, "/metrics").contains("401"));
    assert!(status(&server, "/ready").contains("401"));

    let ip = "127.0.0.2";
    let peer: SocketAddr = format!("{ip}:{}", free_port(ip)).parse().unwrap();
    let via = server.http.to_string();
    let mut without = Server::launch(2, ip, peer, &["--join".into(), via.clone()], dir.path());
    let exit = without.wait_exit(Duration::from_secs(20)).expect("a node without the token does not start");
    assert!(!exit.success());
    assert!(without.log().contains("needs its token"), "{}", without.log());

    let peer: SocketAddr = format!("{ip}:{}", free_port(ip)).parse().unwrap();
    let start = ["--join".to_string(), via, "--http-token-file".into(), token.clone()];
    let joined = Server::launch(3, ip, peer, &start, dir.path());
    joined.wait_ready(Duration::from_secs(20));
    let status = server.ctl(&["--token-file", &token, "--json", "status"]);
    assert!(status.contains("\"id\": 3"), "{status}");
}
