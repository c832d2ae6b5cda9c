//! Helpers for real-process tests: start `meridian server` processes on 127.0.0.x and talk RESP.

#![allow(dead_code)] // each test binary uses its own subset of these helpers

pub mod certs;
pub mod load;
pub mod resp;
pub mod ycsb;

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// One node of a test cluster, restartable with the same arguments.
pub struct Server {
    pub id: u32,
    pub resp: SocketAddr,
    /// Its HTTP address (`/v1/cluster`, `meridian ctl`).
    pub http: SocketAddr,
    args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
}

/// A port on `ip` that is free right now, chosen below Linux's ephemeral range (32768+): a port the
/// kernel hands out for outgoing connections could be taken again by any client socket while a test
/// restarts the node that owned it.
pub fn free_port(ip: &str) -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let salt = std::process::id().wrapping_mul(7919);
    (0..2000)
        .map(|_| {
            10_000 + (salt.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed).wrapping_mul(104_729)) % 22_000) as u16
        })
        .find(|&p| TcpListener::bind((ip, p)).is_ok())
        .expect("a free port below the ephemeral range")
}

/// A Python that can import `module`: Debian's packages (`package`, which `.ci/run` installs) go to the system
/// Python, which a version manager's `python3` on the PATH may hide.
pub fn python_with(module: &str, package: &str) -> &'static str {
    ["/usr/bin/python3", "python3"]
        .into_iter()
        .find(|py| {
            Command::new(py).args(["-c", &format!("import {module}")]).output().is_ok_and(|o| o.status.success())
        })
        .unwrap_or_else(|| panic!("a python3 with {module} (apt-get install {package})"))
}

pub struct Cluster {
    pub servers: Vec<Server>,
}

impl Cluster {
    /// `n` nodes, node i on 127.0.0.i, data under `dir`.
    pub fn start(n: u32, dir: &Path) -> Cluster {
        let ips: Vec<String> = (1..=n).map(|i| format!("127.0.0.{i}")).collect();
        let peers: Vec<SocketAddr> = ips.iter().map(|ip| format!("{ip}:{}", free_port(ip)).parse().unwrap()).collect();
        let peer_list: Vec<String> = peers.iter().enumerate().map(|(i, a)| format!("{}={a}", i + 1)).collect();
        let servers = (1..=n)
            .map(|id| {
                let start = ["--peers".to_string(), peer_list.join(",")];
                Server::launch(id, &ips[id as usize - 1], peers[id as usize - 1], &start, dir)
            })
            .collect();
        let cluster = Cluster { servers };
        cluster.servers.iter().for_each(|s| s.wait_ready(Duration::from_secs(20)));
        cluster
    }

    /// A RESP connection to the `i`-th node (from 0).
    pub fn conn(&self, i: usize) -> resp::Conn {
        resp::Conn::connect(self.servers[i].resp, Duration::from_secs(5)).expect("connect to a test node")
    }
}

impl Server {
    /// Starts node `id` on `ip` with its peer listener at `peer`, its data under `dir`, and `start` saying
    /// which cluster it belongs to (`--peers …` or `--join …`).
    pub fn launch(id: u32, ip: &str, peer: SocketAddr, start: &[String], dir: &Path) -> Server {
        let resp: SocketAddr = format!("{ip}:{}", free_port(ip)).parse().unwrap();
        let http: SocketAddr = format!("{ip}:{}", free_port(ip)).parse().unwrap();
        let mut args: Vec<String> = vec!["server".into(), "--node-id".into(), id.to_string()];
        args.extend(["--listen".into(), resp.to_string(), "--peer-listen".into(), peer.to_string()]);
        args.extend(["--http".into(), http.to_string()]);
        args.extend(start.iter().cloned());
        args.extend(["--data-dir".into(), dir.join(format!("node{id}")).display().to_string()]);
        Server::run(id, resp, http, args, dir)
    }

    /// Starts `meridian ARGS` as node `id`, which answers RESP on `resp` and HTTP on `http`, its output in
    /// `dir`.
    pub fn run(id: u32, resp: SocketAddr, http: SocketAddr, args: Vec<String>, dir: &Path) -> Server {
        let mut s = Server { id, resp, http, args, log: dir.join(format!("node{id}.log")), child: None };
        s.spawn();
        s
    }

    /// A new node `id` on 127.0.0.`id` that joins the cluster through the node whose HTTP address is `via`.
    pub fn join(id: u32, via: SocketAddr, dir: &Path) -> Server {
        let ip = format!("127.0.0.{id}");
        let peer: SocketAddr = format!("{ip}:{}", free_port(&ip)).parse().unwrap();
        Server::launch(id, &ip, peer, &["--join".to_string(), via.to_string()], dir)
    }

    /// One node alone (`--replication 1`) on 127.0.0.1, data under `dir`, with `extra` flags; started and
    /// ready.
    pub fn single(dir: &Path, extra: &[&str]) -> Server {
        let ip = "127.0.0.1";
        let peer: SocketAddr = format!("{ip}:{}", free_port(ip)).parse().unwrap();
        let mut start = vec!["--replication".to_string(), "1".into(), "--peers".into(), format!("1={peer}")];
        start.extend(extra.iter().map(|a| a.to_string()));
        let server = Server::launch(1, ip, peer, &start, dir);
        server.wait_ready(Duration::from_secs(20));
        server
    }

    /// Where it listens for peers (`--peer-listen`).
    pub fn peer(&self) -> SocketAddr {
        let at = self.args.iter().position(|a| a == "--peer-listen").expect("a node with a peer listener");
        self.args[at + 1].parse().expect("a socket address")
    }

    pub fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_meridian"))
            .args(&self.args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start meridian server");
        self.child = Some(child);
    }

    /// SIGKILL: no shutdown path runs.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().expect("kill");
            c.wait().expect("reap");
        }
    }

    /// SIGTERM: the graceful shutdown path.
    pub fn terminate(&self) {
        self.signal("TERM");
    }

    /// Sends the running node the signal `name` (`HUP`, `TERM`, ...).
    pub fn signal(&self, name: &str) {
        let pid = self.child.as_ref().expect("a running node").id().to_string();
        assert!(
            Command::new("kill").args([&format!("-{name}"), &pid]).status().unwrap().success(),
            "kill -{name} {pid}"
        );
    }

    /// Waits up to `limit` for the node's process to exit on its own; its exit status if it did.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Some(status) = self.child.as_mut()?.try_wait().unwrap() {
                self.child = None;
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Waits until the node answers a read: it has the cluster map and the key's tail its lease (the
    /// manager needs an election and a heartbeat round after a cluster starts).
    pub fn wait_ready(&self, limit: Duration) {
        let start = Instant::now();
        // A node started with `--requirepass` serves nothing before AUTH.
        let password = self.args.iter().position(|a| a == "--requirepass").and_then(|i| self.args.get(i + 1));
        while start.elapsed() < limit {
            if let Ok(mut c) = resp::Conn::connect(self.resp, Duration::from_secs(1)) {
                if let Some(p) = password {
                    let _ = c.cmd(&["AUTH", p]);
                }
                if let Ok(resp::Resp::Bulk(_)) = c.cmd(&["GET", "meridian-test-ready"]) {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        panic!("node {} not ready on {} after {limit:?}; log:\n{log}", self.id, self.resp);
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The node's `/v1/cluster`.
    pub fn cluster_status(&self) -> serde_json::Value {
        serde_json::from_str(&self.http_get("/v1/cluster")).unwrap_or_default()
    }

    /// A protocol core's counter (`meridian_protocol_events_total{event=…}`) from the node's /metrics; 0 if absent.
    pub fn protocol_events(&self, event: &str) -> u64 {
        self.sample(&format!("meridian_protocol_events_total{{event=\"{event}\"}}"))
    }

    /// A protocol core's gauge (`meridian_protocol_gauge{gauge=…}`) from the node's /metrics; 0 if absent.
    pub fn protocol_gauge(&self, gauge: &str) -> u64 {
        self.sample(&format!("meridian_protocol_gauge{{gauge=\"{gauge}\"}}"))
    }

    /// How many of a protocol core's waits (`meridian_protocol_wait_seconds{wait=…}`) took at most `le` seconds
    /// (all of them with `+Inf`), from the node's /metrics; 0 if absent.
    pub fn protocol_waits(&self, wait: &str, le: &str) -> u64 {
        self.sample(&format!("meridian_protocol_wait_seconds_bucket{{wait=\"{wait}\",le=\"{le}\"}}"))
    }

    fn sample(&self, series: &str) -> u64 {
        let metrics = self.http_get("/metrics");
        let line = metrics.lines().find(|l| l.starts_with(series));
        line.and_then(|l| l.rsplit(' ').next()?.parse().ok()).unwrap_or(0)
    }

    /// The body of a GET of `path` from the node's HTTP server.
    pub fn http_get(&self, path: &str) -> String {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect_timeout(&self.http, Duration::from_secs(5)).expect("HTTP");
        write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response.split_once("\r\n\r\n").map_or(String::new(), |(_, b)| b.to_string())
    }

    /// A RESP connection to this node with `keyspace` selected by name.
    pub fn keyspace_conn(&self, keyspace: &str) -> resp::Conn {
        let mut c = resp::Conn::connect(self.resp, Duration::from_secs(5)).expect("connect to a test node");
        assert_eq!(c.cmd(&["KEYSPACE", keyspace]).unwrap(), resp::Resp::Simple("OK".into()));
        c
    }

    /// Runs `redis-cli -h <this node> -p <its RESP port> -n <db> <words>` and returns what it printed, trimmed.
    pub fn redis_cli(&self, db: u32, words: &[&str]) -> String {
        let (host, port) = (self.resp.ip().to_string(), self.resp.port().to_string());
        let out = Command::new("redis-cli")
            .args(["-h", &host, "-p", &port, "-n", &db.to_string()])
            .args(words)
            .output()
            .expect("redis-cli (apt-get install redis-tools)");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// Runs `meridian ctl --addr <this node's HTTP> <args>` and returns what it printed.
    pub fn ctl(&self, args: &[&str]) -> String {
        let out = self.run_ctl(args);
        assert!(out.status.success(), "meridian ctl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// `meridian ctl` against this node, which must fail: what it printed to stderr.
    pub fn ctl_fails(&self, args: &[&str]) -> String {
        let out = self.run_ctl(args);
        assert!(!out.status.success(), "meridian ctl {args:?} should have failed");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn run_ctl(&self, args: &[&str]) -> std::process::Output {
        let ctl = Command::new(env!("CARGO_BIN_EXE_meridian"))
            .args(["ctl", "--addr", &self.http.to_string()])
            .args(args)
            .output();
        ctl.expect("run meridian ctl")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}
