//! The examples in `examples/` run unchanged against a real node.

mod support;

use std::process::Command;

#[test]
fn the_python_quickstart_runs_against_a_node() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::Server::single(dir.path(), &[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/python/quickstart.py");
    let out = Command::new(support::python_with_redis())
        .args([script, "--host", &server.resp.ip().to_string(), "--port", &server.resp.port().to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.ends_with("all good\n"), "{stdout}");
}
