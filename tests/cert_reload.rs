//! Certificates reloaded without a restart (docs/security.md, "Reloading certificates"): a node serving its
//! client TLS port, its HTTPS port and its peer port with certificates of one CA is moved to another CA's by
//! replacing the files and sending SIGHUP; clients that trust only the new CA are refused before and served
//! after, without the node restarting. Files that no longer load are refused on SIGHUP and the node goes on
//! with the certificates it has.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::certs::{ca, node_certs, s};
use support::{free_port, Server};

/// `redis-cli --tls --cacert CA -p PORT PING`: what it printed, trimmed.
fn tls_ping(port: u16, ca: &Path) -> String {
    let out = Command::new("timeout")
        .args(["20", "redis-cli", "--tls", "--cacert", &s(ca), "-h", "127.0.0.1", "-p", &port.to_string(), "PING"])
        .output()
        .expect("redis-cli (apt-get install redis-tools)");
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)).trim().to_string()
}

/// `meridian ctl --addr https://ADDR --cacert CA status` succeeded.
fn ctl_status(server: &Server, ca: &Path) -> bool {
    let https = format!("https://{}", server.http);
    let out = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["ctl", "--addr", &https, "--cacert", &s(ca), "status"])
        .output()
        .unwrap();
    out.status.success()
}

/// Waits until the node's log has `text` `times` times.
fn logged(server: &Server, text: &str, times: usize) {
    let start = Instant::now();
    while server.log().matches(text).count() < times {
        assert!(start.elapsed() < Duration::from_secs(20), "no {text:?} in the log:\n{}", server.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sighup_moves_every_port_to_the_new_certificates_and_refuses_broken_files() {
    let dir = tempfile::tempdir().unwrap();
    let old_ca = ca(&dir.path().join("old-ca"));
    let certs = node_certs(dir.path(), &old_ca, 1);
    let tls_port = free_port("127.0.0.1");
    let (cert, key) = (s(&certs.join("node.crt")), s(&certs.join("node.key")));
    let tls = format!("127.0.0.1:{tls_port}");
    let flags = [
        "--tls-port",
        &tls,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--http-tls-cert-file",
        &cert,
        "--http-tls-key-file",
        &key,
        "--peer-certs-dir",
        &s(&certs),
    ];
    let server = Server::single(dir.path(), &flags);
    let (old, new) = (old_ca.join("ca.crt"), dir.path().join("new-ca").join("ca.crt"));
    assert_eq!(tls_ping(tls_port, &old), "PONG");

    // The rotation: a new CA trusted beside the old one, and the node's certificate reissued under it.
    let new_ca = ca(&dir.path().join("new-ca"));
    let reissued = node_certs(&dir.path().join("reissued"), &new_ca, 1);
    std::fs::copy(reissued.join("node.crt"), certs.join("node.crt")).unwrap();
    std::fs::copy(reissued.join("node.key"), certs.join("node.key")).unwrap();
    let both = [std::fs::read_to_string(&old).unwrap(), std::fs::read_to_string(&new).unwrap()].concat();
    std::fs::write(certs.join("ca.crt"), both).unwrap();
    assert_ne!(tls_ping(tls_port, &new), "PONG", "the node serves its old certificate until told");
    assert!(!ctl_status(&server, &new));

    server.signal("HUP");
    logged(&server, "certificates reloaded", 1);
    assert_eq!(tls_ping(tls_port, &new), "PONG");
    assert_ne!(tls_ping(tls_port, &old), "PONG", "the old certificate is gone");
    assert!(ctl_status(&server, &new), "the HTTPS port serves the new certificate");

    std::fs::write(certs.join("node.key"), "not a key").unwrap();
    server.signal("HUP");
    logged(&server, "certificates not reloaded", 1);
    assert!(server.log().contains("node.key"), "the error names the file:\n{}", server.log());
    assert_eq!(tls_ping(tls_port, &new), "PONG", "the node goes on with what it had");
    assert!(ctl_status(&server, &new));
}
