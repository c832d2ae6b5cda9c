//! Certificates for tests, made by `meridian cert` as an operator makes them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `meridian ARGS`, which must succeed.
pub fn meridian(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_meridian")).args(args).output().expect("run meridian");
    assert!(out.status.success(), "meridian {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// A path as a command-line word.
pub fn s(path: &Path) -> String {
    path.display().to_string()
}

/// A CA: `dir/ca.crt`, `dir/ca.key`.
pub fn ca(dir: &Path) -> PathBuf {
    meridian(&["cert", "create-ca", "--certs-dir", &s(dir)]);
    dir.to_path_buf()
}

/// Node `id`'s certificates directory, `dir/nodeN-certs`, with `ca`'s certificate, and a node certificate for
/// 127.0.0.N signed by `ca`: what `--peer-certs-dir` takes.
pub fn node_certs(dir: &Path, ca: &Path, id: u32) -> PathBuf {
    let certs = dir.join(format!("node{id}-certs"));
    std::fs::create_dir_all(&certs).unwrap();
    std::fs::copy(ca.join("ca.crt"), certs.join("ca.crt")).unwrap();
    let (certs_dir, ca_key, node) = (s(&certs), s(&ca.join("ca.key")), id.to_string());
    let host = format!("127.0.0.{id}");
    meridian(&[
        "cert",
        "create-node",
        "--certs-dir",
        &certs_dir,
        "--ca-key",
        &ca_key,
        "--node-id",
        &node,
        "--host",
        &host,
    ]);
    certs
}

/// A client certificate for `user` signed by the CA in `ca`: `ca/client.USER.crt` and its key.
pub fn client_cert(ca: &Path, user: &str) -> (PathBuf, PathBuf) {
    meridian(&["cert", "create-client", user, "--certs-dir", &s(ca)]);
    (ca.join(format!("client.{user}.crt")), ca.join(format!("client.{user}.key")))
}
