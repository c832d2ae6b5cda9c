//! `meridian demo` as a newcomer uses it: start it, SET through one node with redis-cli, GET through
//! another, stop it with a signal.

mod support;

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A base port whose demo ports (base+i, base+1000+i, base+2000+i) are all free right now, below
/// Linux's ephemeral range (32768+) so that no client socket can be handed one of them meanwhile.
fn free_base() -> u16 {
    let seed = std::process::id() as u16;
    (0..2000u16)
        .map(|i| 10_000 + (seed.wrapping_mul(7).wrapping_add(i.wrapping_mul(37))) % 20_000)
        .find(|&b| {
            (0..3).all(|i| {
                [b + i, b + 1000 + i, b + 2000 + i].iter().all(|&p| TcpListener::bind(("127.0.0.1", p)).is_ok())
            })
        })
        .expect("a free port range")
}

fn redis_cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .output()
        .expect("redis-cli is installed (apt-get install redis-tools)");
    assert!(out.status.success(), "redis-cli failed: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn demo_serves_redis_cli_and_stops_on_sigterm() {
    let base = free_base();
    let mut demo = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["demo", "--port", &base.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while redis_cli_ping(base + 2).is_none() {
        assert!(start.elapsed() < Duration::from_secs(30), "demo did not come up");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(redis_cli(base, &["SET", "k", "v"]), "OK");
    assert_eq!(redis_cli(base + 1, &["GET", "k"]), "v");
    assert_eq!(redis_cli(base + 2, &["DEL", "k"]), "1");
    assert_eq!(redis_cli(base, &["GET", "k"]), "");
    let status = Command::new("kill").args(["-TERM", &demo.id().to_string()]).status().unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(code) = demo.try_wait().unwrap() {
            assert!(code.success(), "demo exited with {code}");
            break;
        }
        assert!(Instant::now() < deadline, "demo did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn redis_cli_ping(port: u16) -> Option<()> {
    let mut c = support::resp::Conn::connect(([127, 0, 0, 1], port).into(), Duration::from_millis(500)).ok()?;
    c.cmd(&["PING"]).ok().map(|_| ())
}
