//! The HTTP API over TLS on real processes (docs/security.md, "The HTTP API"): `meridian ctl` reaches an HTTPS
//! port with `--cacert`, and is admitted with the token or with a client certificate of an ACL user who may
//! change users, and refused (changing nothing) with a certificate of another user or none; garbage and silent
//! connections on the port hold up no one; a node joins through an HTTPS port with its node certificate.

mod support;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;
use support::certs::{ca, client_cert, node_certs, s};
use support::{free_port, Server};

/// `meridian ctl --addr ADDR ARGS`.
fn ctl(addr: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_meridian")).args(["ctl", "--addr", addr]).args(args).output().unwrap()
}

fn succeeds(out: Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn fails(out: Output) -> String {
    assert!(!out.status.success(), "should have failed: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8(out.stderr).unwrap()
}

/// The flags that make node `id`'s HTTP port HTTPS with its certificate in `certs`, asking callers for one of
/// the same CA.
fn https_flags(certs: &Path) -> Vec<String> {
    let file = |name: &str| s(&certs.join(name));
    vec![
        "--http-tls-cert-file".into(),
        file("node.crt"),
        "--http-tls-key-file".into(),
        file("node.key"),
        "--http-tls-ca-cert-file".into(),
        file("ca.crt"),
    ]
}

#[test]
fn the_https_api_admits_the_token_or_the_certificate_of_a_user_who_may_change_users() {
    let dir = tempfile::tempdir().unwrap();
    let ca_dir = ca(&dir.path().join("ca"));
    let certs = node_certs(dir.path(), &ca_dir, 1);
    let token = dir.path().join("token");
    std::fs::write(&token, "t0ken\n").unwrap();
    let mut flags = https_flags(&certs);
    flags.extend(["--http-token-file".into(), s(&token)]);
    let server = Server::single(dir.path(), &flags.iter().map(String::as_str).collect::<Vec<_>>());
    let https = format!("https://{}", server.http);
    let cacert = s(&ca_dir.join("ca.crt"));

    let plain = fails(ctl(&server.http.to_string(), &["--token-file", &s(&token), "status"]));
    assert!(plain.contains("the port speaks TLS"), "{plain}");
    assert!(fails(ctl(&https, &["status"])).contains("https needs the CA"));
    let other_ca = ca(&dir.path().join("other-ca"));
    let untrusted = fails(ctl(&https, &["--cacert", &s(&other_ca.join("ca.crt")), "status"]));
    assert!(untrusted.contains("UnknownIssuer") || untrusted.contains("BadSignature"), "{untrusted}");
    let anonymous = fails(ctl(&https, &["--cacert", &cacert, "keyspace", "create", "a", "--replicas", "log"]));
    assert!(anonymous.contains("HTTP 401") && anonymous.contains("client certificate"), "{anonymous}");
    succeeds(ctl(&https, &["--cacert", &cacert, "--token-file", &s(&token), "status"]));

    // Garbage and a silent connection on the port hold up no one.
    let mut garbage = TcpStream::connect(server.http).unwrap();
    garbage.write_all(b"\x16\x03\x01\xff\xffnot a handshake").unwrap();
    let _silent = TcpStream::connect(server.http).unwrap();

    assert_eq!(server.redis_cli(0, &["ACL", "SETUSER", "admin", "on", ">pw", "+@all", "~*"]), "OK");
    assert_eq!(server.redis_cli(0, &["ACL", "SETUSER", "reader", "on", ">pw", "+@all", "-@admin", "~*"]), "OK");
    let users = ["admin", "reader", "stranger"].map(|user| (user, client_cert(&ca_dir, user)));
    let with = |user: &str, args: &[&str]| {
        let (_, (cert, key)) = users.iter().find(|(u, _)| *u == user).unwrap();
        ctl(&https, &[&["--cacert", &cacert, "--cert", &s(cert), "--key", &s(key)], args].concat())
    };
    let refused = fails(with("reader", &["keyspace", "create", "orders", "--replicas", "log"]));
    assert!(refused.contains("HTTP 403") && refused.contains("may not change users"), "{refused}");
    let stranger = fails(with("stranger", &["keyspace", "list"]));
    assert!(stranger.contains("neither a node (node-N) nor an ACL user"), "{stranger}");
    let listed = succeeds(with("admin", &["keyspace", "list"]));
    assert!(!listed.contains("orders") && !listed.contains(" a "), "refused creates changed nothing: {listed}");
    succeeds(with("admin", &["keyspace", "create", "orders", "--replicas", "log"]));
    assert!(succeeds(with("admin", &["keyspace", "list"])).contains("orders"));
}

#[test]
fn a_node_joins_through_an_https_port_with_its_node_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let ca_dir = ca(&dir.path().join("ca"));
    let first_certs = node_certs(dir.path(), &ca_dir, 1);
    let mut flags = https_flags(&first_certs);
    flags.extend(["--peer-certs-dir".into(), s(&first_certs)]);
    let first = Server::single(dir.path(), &flags.iter().map(String::as_str).collect::<Vec<_>>());
    let via = format!("https://{}", first.http);

    let peer = |id: u32| -> SocketAddr {
        let ip = format!("127.0.0.{id}");
        format!("{ip}:{}", free_port(&ip)).parse().unwrap()
    };
    // HTTPS of its own gives it the CA to check the port it joins through, but no certificate to present.
    let without = [vec!["--join".to_string(), via.clone()], https_flags(&node_certs(dir.path(), &ca_dir, 3))].concat();
    let mut refused = Server::launch(3, "127.0.0.3", peer(3), &without, dir.path());
    let exit = refused.wait_exit(Duration::from_secs(20)).expect("a node without a certificate does not start");
    assert!(!exit.success());
    assert!(refused.log().contains("HTTP 401"), "{}", refused.log());

    let second_certs = node_certs(dir.path(), &ca_dir, 2);
    let with = ["--join".to_string(), via, "--peer-certs-dir".into(), s(&second_certs)];
    let joined = Server::launch(2, "127.0.0.2", peer(2), &with, dir.path());
    joined.wait_ready(Duration::from_secs(30));
    let cacert = s(&ca_dir.join("ca.crt"));
    let (cert, key) = (s(&second_certs.join("node.crt")), s(&second_certs.join("node.key")));
    let https = format!("https://{}", first.http);
    let status = succeeds(ctl(&https, &["--cacert", &cacert, "--cert", &cert, "--key", &key, "--json", "status"]));
    assert!(status.contains("\"id\": 2"), "{status}");
}
