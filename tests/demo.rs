//! `meridian demo` as a newcomer uses it: start it, SET through one node with redis-cli, GET through
//! another, stop it with a signal.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// A base port whose demo ports (base+i, base+1000+i, base+2000+i) are all free right now, below
/// Linux's ephemeral range (32768+) so that no client socket can be handed one of them meanwhile. Each call
/// starts its search 3,001 ports after the last one's, so tests running at once do not pick the same range
/// before either demo has bound it.
fn free_base() -> u16 {
    static CALLS: AtomicU16 = AtomicU16::new(0);
    let seed = (std::process::id() as u16).wrapping_mul(7).wrapping_add(CALLS.fetch_add(1, SeqCst).wrapping_mul(3001));
    (0..2000u16)
        .map(|i| 10_000 + (seed.wrapping_add(i.wrapping_mul(37))) % 20_000)
        .find(|&b| {
            (0..3).all(|i| {
                [b + i, b + 1000 + i, b + 2000 + i].iter().all(|&p| TcpListener::bind(("127.0.0.1", p)).is_ok())
            })
        })
        .expect("a free port range")
}

/// The JSON body of `GET path` on 127.0.0.1:`port`.
fn http_get_json(port: u16, path: &str) -> serde_json::Value {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    serde_json::from_str(response.split_once("\r\n\r\n").unwrap().1).unwrap()
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

/// The demo process, SIGKILLed if the test fails before it stops, so a failure leaves nothing running.
struct Demo(Child);

impl Demo {
    /// `meridian demo` with `args`, its output piped to the test.
    fn start(args: &[&str]) -> Demo {
        let child = Command::new(env!("CARGO_BIN_EXE_meridian"))
            .arg("demo")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Demo(child)
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[test]
fn demo_serves_redis_cli_and_stops_on_sigterm() {
    let base = free_base();
    let mut guard = Demo::start(&["--port", &base.to_string()]);
    let demo = &mut guard.0;
    // The demo prints its addresses once the cluster answers; a newcomer starts typing then.
    let mut stdout = BufReader::new(demo.stdout.take().unwrap()).lines().map_while(Result::ok);
    let printed: Vec<String> = stdout.by_ref().take_while(|l| !l.starts_with("Try:")).collect();
    assert!(printed.iter().any(|l| l.contains(&format!("RESP 127.0.0.1:{base}"))), "demo printed: {printed:?}");
    // Keep reading, so the demo's farewell does not meet a closed pipe.
    let drain = std::thread::spawn(move || stdout.count());
    assert_eq!(redis_cli(base, &["SET", "k", "v"]), "OK");
    assert_eq!(redis_cli(base + 1, &["GET", "k"]), "v");
    assert_eq!(redis_cli(base + 2, &["DEL", "k"]), "1");
    assert_eq!(redis_cli(base, &["GET", "k"]), "");
    let cluster = http_get_json(base + 2000, "/v1/cluster");
    let status = &cluster["status"];
    assert_eq!(status["nodes"].as_array().unwrap().len(), 3, "{cluster}");
    assert!(status["nodes"].as_array().unwrap().iter().all(|n| n["state"] == "ACTIVE"), "{cluster}");
    let chains = status["chains"].as_array().unwrap();
    assert_eq!(chains.len(), status["partitions"].as_u64().unwrap() as usize);
    assert!(chains.iter().all(|c| c["members"].as_array().unwrap().len() == 3), "every chain has R members");
    let status = Command::new("kill").args(["-TERM", &demo.id().to_string()]).status().unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(code) = demo.try_wait().unwrap() {
            assert!(code.success(), "demo exited with {code}");
            drain.join().unwrap();
            break;
        }
        assert!(Instant::now() < deadline, "demo did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The commands a one-node demo suggests name only its own port, and work as printed.
#[test]
fn a_one_node_demo_suggests_commands_on_its_own_port() {
    let base = free_base();
    let mut guard = Demo::start(&["--nodes", "1", "--store", "mem", "--port", &base.to_string()]);
    let mut stdout = BufReader::new(guard.0.stdout.take().unwrap()).lines().map_while(Result::ok);
    let hint = stdout.by_ref().find(|l| l.starts_with("Try:")).expect("the demo prints what to try");
    std::thread::spawn(move || stdout.count());
    let words: Vec<&str> = hint.split_whitespace().collect();
    let ports: Vec<u16> = words.windows(2).filter(|w| w[0] == "-p").map(|w| w[1].parse().unwrap()).collect();
    assert_eq!(ports, [base, base], "{hint}");
    assert_eq!(redis_cli(base, &["SET", "k", "v"]), "OK");
    assert_eq!(redis_cli(base, &["GET", "k"]), "v");
}
