//! Helpers for real-process tests: start `meridian server` processes on 127.0.0.x and talk RESP.

#![allow(dead_code)] // each test binary uses its own subset of these helpers

pub mod resp;

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One node of a test cluster, restartable with the same arguments.
pub struct Server {
    pub id: u32,
    pub resp: SocketAddr,
    args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
}

/// A free port on `ip`; the listener is dropped, so a rare race with another process is possible.
fn free_port(ip: &str) -> u16 {
    TcpListener::bind((ip, 0)).expect("bind a free port").local_addr().unwrap().port()
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
                let ip = &ips[id as usize - 1];
                let resp: SocketAddr = format!("{ip}:{}", free_port(ip)).parse().unwrap();
                let args = vec![
                    "server".into(),
                    "--node-id".into(),
                    id.to_string(),
                    "--listen".into(),
                    resp.to_string(),
                    "--peer-listen".into(),
                    peers[id as usize - 1].to_string(),
                    "--peers".into(),
                    peer_list.join(","),
                    "--data-dir".into(),
                    dir.join(format!("node{id}")).display().to_string(),
                ];
                let mut s = Server { id, resp, args, log: dir.join(format!("node{id}.log")), child: None };
                s.spawn();
                s
            })
            .collect();
        let cluster = Cluster { servers };
        cluster.servers.iter().for_each(|s| s.wait_ready(Duration::from_secs(20)));
        cluster
    }
}

impl Server {
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

    pub fn wait_ready(&self, limit: Duration) {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok(mut c) = resp::Conn::connect(self.resp, Duration::from_secs(1)) {
                if c.cmd(&["PING"]).is_ok() {
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
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}
