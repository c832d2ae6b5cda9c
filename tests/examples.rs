//! The examples in `examples/` run unchanged against a real node.

mod support;

use std::process::Command;

/// A Python with redis-py: Debian's `python3-redis` (what `.ci/run` installs) is in the system Python, which a
/// version manager's `python3` on the PATH may hide.
fn python_with_redis() -> &'static str {
    ["/usr/bin/python3", "python3"]
        .into_iter()
        .find(|py| Command::new(py).args(["-c", "import redis"]).output().is_ok_and(|o| o.status.success()))
        .expect("a python3 with redis-py (apt-get install python3-redis)")
}

#[test]
fn the_python_quickstart_runs_against_a_node() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::Server::single(dir.path(), &[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/python/quickstart.py");
    let out = Command::new(python_with_redis())
        .args([script, "--host", &server.resp.ip().to_string(), "--port", &server.resp.port().to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.ends_with("all good\n"), "{stdout}");
}
