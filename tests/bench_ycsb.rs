//! `meridian bench ycsb` end to end against real servers: a one-node `meridian server`, redis-server when it is
//! installed (`.ci/run` installs it), and memcached over its text protocol when it is installed (CI does not
//! install it). Each target gets a tiny bounded load and run of three workloads: strings closed loop with
//! pipelining (A), hashes (strings for memcached) open loop with inserts (D), read-modify-writes (F); every count
//! adds up, nothing fails, every read finds its record, and the JSON and CSV parse. About 20 s.

mod support;

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::ycsb::{phase, ycsb};
use support::Server;

const RECORDS: u64 = 1000;
const REDIS_SERVER: &str = "/usr/bin/redis-server";
const MEMCACHED: &str = "/usr/bin/memcached";

fn names(ops: &[(String, u64)]) -> Vec<&str> {
    ops.iter().map(|(n, _)| n.as_str()).collect()
}

/// The three workloads against `addr`, which holds none of their keys yet and speaks `protocol`.
fn workloads_against(addr: SocketAddr, dir: &Path, protocol: &str) {
    let records = RECORDS.to_string();
    let speak = ["--protocol", protocol];
    // A: load the records as strings, then read and update them, closed loop, two in flight per connection.
    let a_args = ["--workload", "a", "--records", &records, "--duration", "2", "--clients", "4", "--pipeline", "2"];
    let a = ycsb(addr, &[&a_args[..], &speak].concat(), dir);
    let (load, inserts) = phase(&a, "load");
    assert_eq!(inserts, [("INSERT".to_string(), RECORDS)], "{load:#}");
    let (run, ops) = phase(&a, "run");
    assert_eq!(names(&ops), ["READ", "UPDATE"]);
    assert!(ops.iter().all(|(_, n)| *n > 100), "{run:#}");
    assert_eq!(run["pacing"], "closed");

    // F on the same records: every read-modify-write is a GET and then a SET, timed as one.
    let f_args = ["--workload", "f", "--phase", "run", "--records", &records, "--operations", "2000"];
    let f = ycsb(addr, &[&f_args[..], &speak].concat(), dir);
    let (_, ops) = phase(&f, "run");
    assert_eq!(names(&ops), ["READ", "READ-MODIFY-WRITE"]);
    assert_eq!(ops.iter().map(|(_, n)| n).sum::<u64>(), 2000);

    // D as hashes of three fields (strings over memcache, whose items hold one value) under their own keys
    // (user0, user1, …), open loop: 500 operations a second for 2 s is exactly 1000 on the schedule, reads of
    // the latest records and inserts of new ones.
    let fields = if protocol == "memcache" { "1" } else { "3" };
    let records_of = ["--field-count", fields, "-p", "insertorder=ordered"];
    let open = ["--records", &records, "--rate", "500", "--duration", "2", "--clients", "2"];
    let d = ycsb(addr, &[&["--workload", "d"], &records_of[..], &open[..], &speak].concat(), dir);
    let (run, ops) = phase(&d, "run");
    assert_eq!(names(&ops), ["INSERT", "READ"]);
    assert_eq!(
        (run["pacing"].as_str(), run["unsent"].as_u64(), run["operations"].as_u64()),
        (Some("open"), Some(0), Some(1000))
    );
}

#[test]
fn bench_ycsb_drives_a_meridian_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::single(dir.path(), &[]);
    workloads_against(server.resp, dir.path(), "resp");
}

/// `--db N` selects database N on every connection first: in Meridian the keyspace `dbN`, which holds the
/// records afterwards while the default keyspace holds none.
#[test]
fn bench_ycsb_selects_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::single(dir.path(), &[]);
    let load = ["--db", "3", "--phase", "load", "--records", "50", "--clients", "2"];
    let (_, inserts) = phase(&ycsb(server.resp, &load, dir.path()), "load");
    assert_eq!(inserts, [("INSERT".to_string(), 50)]);
    let mut conn = support::resp::Conn::connect(server.resp, Duration::from_secs(5)).unwrap();
    assert_eq!(conn.cmd(&["DBSIZE"]).unwrap(), support::resp::Resp::Int(0), "nothing in the default keyspace");
    assert_eq!(conn.cmd(&["SELECT", "3"]).unwrap(), support::resp::Resp::Simple("OK".into()));
    assert_eq!(conn.cmd(&["DBSIZE"]).unwrap(), support::resp::Resp::Int(50));
    let refused = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["bench", "ycsb", "--protocol", "memcache", "--db", "1", "--phase", "load"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("memcached's text protocol has none"));
}

/// A server process, killed when dropped.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `program` with `args` on a free loopback port (`args` give it `{port}`) once it is installed, and
/// waits until the port takes connections; `None`, with a note, if it is not installed.
fn daemon(program: &str, package: &str, args: &[&str]) -> Option<(Daemon, SocketAddr)> {
    if !Path::new(program).exists() {
        eprintln!("skipped: no {program} (apt-get install {package})");
        return None;
    }
    let port = support::free_port("127.0.0.1").to_string();
    let child = Command::new(program)
        .args(args.iter().map(|a| a.replace("{port}", &port)))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {program}: {e}"));
    let daemon = Daemon(child);
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let start = Instant::now();
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        assert!(start.elapsed() < Duration::from_secs(10), "{program} did not start on {addr}");
        std::thread::sleep(Duration::from_millis(50));
    }
    Some((daemon, addr))
}

#[test]
fn bench_ycsb_drives_redis_server() {
    let dir = tempfile::tempdir().unwrap();
    let dir_arg = dir.path().to_str().unwrap();
    let no_persistence = ["--bind", "127.0.0.1", "--port", "{port}", "--save", "", "--appendonly", "no"];
    let args = [&no_persistence[..], &["--dir", dir_arg]].concat();
    let Some((_redis, addr)) = daemon(REDIS_SERVER, "redis-server", &args) else { return };
    workloads_against(addr, dir.path(), "resp");
}

#[test]
fn bench_ycsb_drives_memcached() {
    let dir = tempfile::tempdir().unwrap();
    // `-u root`: memcached refuses to run as root without being told to, and tests may run as root.
    let args = ["-l", "127.0.0.1", "-p", "{port}", "-U", "0", "-m", "64", "-t", "1", "-u", "root"];
    let Some((_memcached, addr)) = daemon(MEMCACHED, "memcached", &args) else { return };
    workloads_against(addr, dir.path(), "memcache");
}
