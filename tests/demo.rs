//! `meridian demo` as a newcomer uses it: start it, SET through one node with redis-cli, GET through
//! another, stop it with a signal; with `--secure`, paste the lines it prints.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU16, Ordering::SeqCst};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A base port whose demo ports (base+i, base+1000+i, base+2000+i) are all free right now, below
/// Linux's ephemeral range (32768+) so that no client socket can be handed one of them meanwhile. Each call
/// starts its search 3,001 ports after the last one's, so tests running at once do not pick the same range
/// before either demo has bound it.
fn free_base(nodes: u16) -> u16 {
    static CALLS: AtomicU16 = AtomicU16::new(0);
    let seed = (std::process::id() as u16).wrapping_mul(7).wrapping_add(CALLS.fetch_add(1, SeqCst).wrapping_mul(3001));
    (0..2000u16)
        .map(|i| 10_000 + (seed.wrapping_add(i.wrapping_mul(37))) % 20_000)
        .find(|&b| {
            (0..nodes).all(|i| {
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
    let base = free_base(3);
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
    let base = free_base(3);
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

/// `demo --topology globlease-4`: one node in each of `or`, `va`, `ir` and `tk`, numbered in that order, with the
/// WAN between them emulated. A write through node 1 to a chain whose head runs in another region waits at least
/// the round trip to that region; a read through node 1 of a key whose tail (the query node) is node 1 crosses
/// no WAN at all.
#[test]
fn a_demo_over_a_wan_pays_round_trips_for_remote_writes_and_none_for_local_reads() {
    let base = free_base(4);
    let mut guard = Demo::start(&["--topology", "globlease-4", "--port", &base.to_string()]);
    let mut stdout = BufReader::new(guard.0.stdout.take().unwrap()).lines().map_while(Result::ok);
    let printed: Vec<String> = stdout.by_ref().take_while(|l| !l.starts_with("Try:")).collect();
    for (i, region) in ["or", "va", "ir", "tk"].iter().enumerate() {
        let line = format!("node {}: RESP 127.0.0.1:{}", i + 1, base + i as u16);
        assert!(printed.iter().any(|l| l.contains(&line) && l.ends_with(&format!("region {region}"))), "{printed:?}");
    }
    let _drain = std::thread::spawn(move || stdout.count());
    // Round trips from `or` (node 1) in globlease-4, by node.
    let rtt_from_or = [0.0, 80.0, 154.0, 100.0];
    let status = http_get_json(base + 2000, "/v1/cluster")["status"].clone();
    let partitions = status["partitions"].as_u64().unwrap() as u128;
    let members = |key: &str| -> Vec<u64> {
        let partition = (u128::from(meridian_core::ring::key_token(key.as_bytes())) * partitions) >> 64;
        let chain = status["chains"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["keyspace"] == 0 && u128::from(c["partition"].as_u64().unwrap()) == partition);
        chain.unwrap()["members"].as_array().unwrap().iter().map(|m| m.as_u64().unwrap()).collect()
    };
    let key = (0..10_000)
        .map(|i| format!("k{i}"))
        .find(|k| members(k).first() != Some(&1) && members(k).last() == Some(&1))
        .expect("a key with its tail on node 1 and its head elsewhere");
    let head = members(&key)[0];
    let timed = |args: &[&str]| {
        let start = Instant::now();
        let answer = redis_cli(base, args);
        (answer, start.elapsed())
    };
    let (answer, write) = timed(&["SET", &key, "v"]);
    assert_eq!(answer, "OK");
    let rtt = Duration::from_secs_f64(rtt_from_or[head as usize - 1] / 1000.0);
    assert!(write >= rtt, "a write to a chain headed in another region took {write:?}, less than its {rtt:?}");
    // The fastest of a few reads: redis-cli's own start-up is not the store's latency.
    let read = (0..5).map(|_| timed(&["GET", &key])).inspect(|(v, _)| assert_eq!(v, "v")).map(|(_, t)| t).min();
    let local = Duration::from_millis(40);
    assert!(
        read.unwrap() < local,
        "a read at its tail's node took {read:?}: it crossed the WAN (the nearest region is 80 ms away)"
    );
}

/// A lease keyspace over `demo --topology globlease-4` (docs/protocols/lease.md), mastered in `va`: after one
/// read through `tk` has fetched a lease, the next reads through `tk` answer locally, with no round trip to `va`
/// (the nearest region to `tk` is 100 ms away).
#[test]
fn a_lease_keyspace_reads_locally_in_tk_once_a_read_fetched_a_lease() {
    let base = free_base(4);
    let mut guard = Demo::start(&["--topology", "globlease-4", "--port", &base.to_string()]);
    let mut stdout = BufReader::new(guard.0.stdout.take().unwrap()).lines().map_while(Result::ok);
    let _printed: Vec<String> = stdout.by_ref().take_while(|l| !l.starts_with("Try:")).collect();
    let _drain = std::thread::spawn(move || stdout.count());
    let ctl = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["ctl", "--addr", &format!("127.0.0.1:{}", base + 2000), "keyspace", "create", "pages"])
        .args(["--protocol", "lease", "--regions", "va,or,ir,tk"])
        .output()
        .unwrap();
    assert!(ctl.status.success(), "{ctl:?}");
    let tk = base + 3;
    let start = Instant::now();
    while redis_cli(base, &["-n", "1", "SET", "page", "v"]) != "OK" {
        assert!(start.elapsed() < Duration::from_secs(20), "the lease keyspace never took a write");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(redis_cli(tk, &["-n", "1", "GET", "page"]), "v", "the first read, which renews at va");
    let timed = || {
        let start = Instant::now();
        assert_eq!(redis_cli(tk, &["-n", "1", "GET", "page"]), "v");
        start.elapsed()
    };
    let read = (0..5).map(|_| timed()).min().unwrap();
    assert!(read < Duration::from_millis(40), "a read through tk under its lease took {read:?}: it crossed the WAN");
}

/// What a command printed on stdout and stderr, trimmed.
fn printed(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)).trim().to_string()
}

/// `line` run by the shell, as a user pasting it would, bounded by coreutils' `timeout`.
fn sh(line: &str) -> Output {
    Command::new("timeout").args(["20", "sh", "-c", line]).output().unwrap()
}

/// `demo --secure` (docs/security.md): every line it prints works pasted into a shell (redis-cli SET through
/// node 1 and GET through node 3, redis-py, `meridian ctl` with the token), and nothing gets in without what
/// those lines carry: a plain client on the TLS port, redis-cli --tls without a client certificate, ctl without
/// the token and a plain peer are all refused.
#[test]
fn a_secure_demo_serves_the_lines_it_prints_and_refuses_the_rest() {
    let base = free_base(3);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().display().to_string();
    let mut guard = Demo::start(&["--secure", "--port", &base.to_string(), "--data-dir", &data]);
    let stdout = guard.0.stdout.take().unwrap();
    // Lines through a channel, so waiting for them is bounded; the thread keeps reading to the end so that the
    // demo never meets a closed pipe.
    let (lines, rx) = mpsc::channel();
    std::thread::spawn(move || BufReader::new(stdout).lines().map_while(Result::ok).for_each(|l| _ = lines.send(l)));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut shown: Vec<String> = Vec::new();
    while !shown.last().is_some_and(|l| l.ends_with("(Ctrl-C stops)")) {
        let line = rx.recv_timeout(deadline.saturating_duration_since(Instant::now()));
        shown.push(line.unwrap_or_else(|e| panic!("no complete how-to within 60 s ({e}); printed: {shown:?}")));
    }
    for i in 0..3 {
        let node = format!("node {}: RESP over TLS 127.0.0.1:{}", i + 1, base + i);
        assert!(shown.iter().any(|l| l.contains(&node)), "{shown:?}");
    }
    let howto: Vec<&str> = shown
        .iter()
        .skip_while(|l| !l.starts_with("Try:"))
        .map(|l| l.trim_start_matches("Try:").trim_end_matches("(Ctrl-C stops)").trim())
        .collect();
    let [set, get, python, ctl] = howto[..] else { panic!("four lines to try: {shown:?}") };
    assert!(set.starts_with("redis-cli --tls ") && set.ends_with(&format!("-p {base} SET k v")), "{set}");
    assert!(get.ends_with(&format!("-p {} GET k", base + 2)), "{get}");
    assert_eq!(printed(&sh(set)), "OK", "{set}");
    assert_eq!(printed(&sh(get)), "v", "{get}");
    // The python3 on PATH may lack redis-py; the line is run by one that has it.
    let python = python.replacen("python3", support::python_with("redis", "python3-redis"), 1);
    assert_eq!(printed(&sh(&python)), "b'v'", "{python}");
    let ctl = ctl.replacen("meridian", env!("CARGO_BIN_EXE_meridian"), 1);
    let status = sh(&ctl);
    assert!(status.status.success() && printed(&status).contains("ACTIVE"), "{ctl}: {}", printed(&status));

    let tokenless = sh(&format!("{} status", ctl.split(" --token-file").next().unwrap()));
    assert!(printed(&tokenless).contains("HTTP 401"), "ctl without the token: {}", printed(&tokenless));
    let plain = printed(&sh(&format!("redis-cli -p {base} PING")));
    assert!(plain.starts_with("Error"), "a plain client on the TLS port: {plain}");
    let ca = dir.path().join("certs/ca.crt").display().to_string();
    let certless = printed(&sh(&format!("redis-cli --tls --cacert {ca} -p {base} PING")));
    assert!(certless.starts_with("Error"), "redis-cli --tls without a client certificate: {certless}");
    // A peer port answers a caller that does not open with a TLS handshake with why, in plain text.
    let mut peer = TcpStream::connect(("127.0.0.1", base + 1000)).unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    peer.write_all(b"not TLS\n").unwrap();
    let mut answer = Vec::new();
    let _ = peer.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.contains("needs mutual TLS"), "a plain peer was told: {answer:?}");
}
