//! The node processes: `meridian server` on 127.0.0.i, each in its own CPU cgroup if given a budget, stopped
//! with SIGTERM (then SIGKILL) and their cgroups removed when the cluster is dropped, whichever way the bench
//! ends. A node can also be SIGKILLed and started again with the same addresses and data directory.

use super::cgroup::{CpuBudget, Group};
use super::procfs;
use super::resp::{Conn, Reply};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::OpenOptions;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a node may take to shut down after SIGTERM before it is killed: its HTTP server alone may
/// drain for 2 s.
const STOP_WAIT: Duration = Duration::from_secs(10);
/// How long a node may take to serve its first read: the manager needs an election and a map, and the
/// node runs on a fraction of a core.
const READY_WAIT: Duration = Duration::from_secs(60);
/// How much of a node's log an error quotes.
const LOG_TAIL_BYTES: usize = 4_000;

/// How every node is started.
#[derive(Clone, Debug)]
pub(crate) struct Setup {
    /// The `meridian` binary.
    pub exe: PathBuf,
    /// Data directories and logs go here.
    pub dir: PathBuf,
    pub replication: usize,
    pub vnodes: usize,
    pub migration_mb_per_s: u64,
}

/// One `meridian server` process.
pub(crate) struct Node {
    pub id: u32,
    pub resp: SocketAddr,
    pub http: SocketAddr,
    data: PathBuf,
    log: PathBuf,
    /// The binary and its arguments, kept to start the node again as the same node.
    exe: PathBuf,
    args: Vec<OsString>,
    child: Option<Child>,
    /// Dropped after `child` is reaped (fields drop after `Drop::drop`), when the group is empty.
    cgroup: Option<Group>,
}

pub(crate) struct Cluster {
    pub nodes: Vec<Node>,
    setup: Setup,
    /// `None` once a group could not be made: the nodes then share the machine's CPUs.
    budget: Option<CpuBudget>,
}

impl Cluster {
    /// Starts nodes `1..=n` as one cluster and waits until each serves reads. `warn` hears why nodes
    /// share CPUs, if they do.
    pub(crate) fn start(
        setup: Setup,
        n: u32,
        budget: Option<CpuBudget>,
        warn: &mut dyn FnMut(&str),
    ) -> Result<Cluster, String> {
        let peers: Vec<SocketAddr> = (1..=n).map(free_addr).collect::<Result<_, _>>()?;
        let peer_list: Vec<String> = peers.iter().zip(1..).map(|(a, id)| format!("{id}={a}")).collect();
        let start = ["--peers".to_string(), peer_list.join(","), "--replication".into(), setup.replication.to_string()];
        let mut cluster = Cluster { nodes: Vec::new(), setup, budget };
        for (id, &peer) in (1..=n).zip(&peers) {
            cluster.launch(id, peer, &start, warn)?;
        }
        for node in &cluster.nodes {
            node.wait_ready()?;
        }
        Ok(cluster)
    }

    /// Starts node `id`, which joins through the first node's HTTP address; does not wait for it.
    pub(crate) fn join(&mut self, id: u32, warn: &mut dyn FnMut(&str)) -> Result<(), String> {
        let via = self.nodes.first().ok_or("no node to join through")?.http;
        self.launch(id, free_addr(id)?, &["--join".to_string(), via.to_string()], warn)
    }

    fn launch(
        &mut self,
        id: u32,
        peer: SocketAddr,
        start: &[String],
        warn: &mut dyn FnMut(&str),
    ) -> Result<(), String> {
        let (resp, http) = (free_addr(id)?, free_addr(id)?);
        let data = self.setup.dir.join(format!("node{id}"));
        let mut args: Vec<OsString> = ["server", "--node-id", &id.to_string(), "--listen", &resp.to_string()]
            .into_iter()
            .chain(["--peer-listen", &peer.to_string(), "--http", &http.to_string()])
            .map(OsString::from)
            .collect();
        args.extend(start.iter().map(OsString::from));
        args.extend(["--vnodes".into(), self.setup.vnodes.to_string().into()]);
        args.extend(["--migration-mb-per-s".into(), self.setup.migration_mb_per_s.to_string().into()]);
        args.extend(["--data-dir".into(), data.clone().into_os_string()]);
        let cgroup = self.group(id, warn)?;
        let log = self.setup.dir.join(format!("node{id}.log"));
        let exe = self.setup.exe.clone();
        self.nodes.push(Node { id, resp, http, data, log, exe, args, child: None, cgroup });
        self.nodes.last_mut().expect("just pushed").spawn()
    }

    /// Node `id`'s CPU cgroup. If the first one cannot be made, the bench goes on without any and says so.
    fn group(&mut self, id: u32, warn: &mut dyn FnMut(&str)) -> Result<Option<Group>, String> {
        let Some(budget) = &self.budget else { return Ok(None) };
        let name = format!("meridian-bench-{}-n{id}", std::process::id());
        match budget.group(&name) {
            Ok(group) => Ok(Some(group)),
            Err(e) if self.nodes.is_empty() => {
                warn(&format!(
                    "warning: cannot make a CPU cgroup ({} {name}: {e}): the nodes share this machine's CPUs, so one \
                     node's work takes CPU from the others and the figures are not per-node",
                    budget.version().name()
                ));
                self.budget = None;
                Ok(None)
            }
            Err(e) => Err(format!("cannot make cgroup {name} for node {id}: {e}")),
        }
    }

    /// Each node's RESP address, by node id.
    pub(crate) fn resp_addrs(&self) -> BTreeMap<u32, SocketAddr> {
        self.nodes.iter().map(|n| (n.id, n.resp)).collect()
    }

    /// The budget every node runs under, if any.
    pub(crate) fn budget(&self) -> Option<&CpuBudget> {
        self.budget.as_ref()
    }

    /// An error naming the first node whose process has exited, with the end of its log.
    pub(crate) fn check_alive(&mut self) -> Result<(), String> {
        for node in &mut self.nodes {
            if let Some(status) = node.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                return Err(format!("node {} exited ({status}); its log ends:\n{}", node.id, node.log_tail()));
            }
        }
        Ok(())
    }
}

impl Drop for Cluster {
    /// SIGTERM to every node at once, then each is reaped (or killed) within one shared deadline.
    fn drop(&mut self) {
        self.nodes.iter_mut().for_each(Node::terminate);
        let deadline = Instant::now() + STOP_WAIT;
        self.nodes.iter_mut().for_each(|n| n.reap(deadline));
    }
}

impl Node {
    /// Waits until the node answers a read: it has the cluster map and the key's tail holds its lease.
    pub(crate) fn wait_ready(&self) -> Result<(), String> {
        let start = Instant::now();
        while start.elapsed() < READY_WAIT {
            let answered = Conn::connect(self.resp).and_then(|mut c| c.call(&[b"GET", b"meridian-bench-ready"]));
            if let Ok(Reply::Bulk(_)) = answered {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!("node {} did not serve reads within {READY_WAIT:?}; its log ends:\n{}", self.id, self.log_tail()))
    }

    /// Starts the node's process (again, after [`Node::kill`]: the same node, addresses and data directory),
    /// appending to its log; does not wait for it to serve.
    pub(crate) fn spawn(&mut self) -> Result<(), String> {
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("cannot open {}: {e}", self.log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(&self.exe)
            .args(&self.args)
            // Nodes log events, not requests; warnings are what a failed run needs.
            .env("RUST_LOG", "warn")
            // Its own process group: a Ctrl-C at the terminal reaches the bench, which stops the nodes itself.
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {} server on {}: {e}", self.exe.display(), self.resp.ip()))?;
        let pid = child.id();
        self.child = Some(child);
        if let Some(group) = &self.cgroup {
            group.add(pid).map_err(|e| format!("cannot move node {} (pid {pid}) into its cgroup: {e}", self.id))?;
        }
        Ok(())
    }

    /// SIGKILLs the node's process and reaps it: a crash, with whatever it had not written to disk lost.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// CPU seconds the node's process has used so far.
    pub(crate) fn cpu_seconds(&self) -> Option<f64> {
        procfs::cpu_seconds(self.child.as_ref()?.id())
    }

    /// The node process's resident memory in bytes; `None` if it is not running.
    pub(crate) fn rss_bytes(&self) -> Option<u64> {
        procfs::rss_bytes(self.child.as_ref()?.id())
    }

    /// Bytes in the node's chain log (its datastore), on disk now.
    pub(crate) fn store_bytes(&self) -> u64 {
        let files = std::fs::read_dir(self.data.join("chain")).into_iter().flatten().flatten();
        files.filter_map(|f| f.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum()
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read(&self.log).unwrap_or_default();
        String::from_utf8_lossy(&log[log.len().saturating_sub(LOG_TAIL_BYTES)..]).into_owned()
    }

    fn terminate(&mut self) {
        // The child has not been reaped yet (it is still in `self.child`), so its pid cannot name another process.
        if let Some(pid) = self.child.as_ref().and_then(|c| rustix::process::Pid::from_raw(c.id() as i32)) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }

    /// Waits for the process to exit until `deadline`, then kills it.
    fn reap(&mut self, deadline: Instant) {
        let Some(mut child) = self.child.take() else { return };
        while Instant::now() < deadline {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.terminate();
        self.reap(Instant::now() + STOP_WAIT);
    }
}

/// An address on 127.0.0.`id` with a port that is free right now, below Linux's ephemeral range (32768+) so
/// that no outgoing connection can be handed the port before the node binds it.
fn free_addr(id: u32) -> Result<SocketAddr, String> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ip = format!("127.0.0.{id}");
    let salt = std::process::id().wrapping_mul(7919);
    (0..2000)
        .map(|_| 10_000 + (salt.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed).wrapping_mul(104_729)) % 22_000))
        .map(|port| format!("{ip}:{port}").parse::<SocketAddr>().expect("an IPv4 address"))
        .find(|&addr| TcpListener::bind(addr).is_ok())
        .ok_or_else(|| format!("no free port on {ip} below 32768"))
}
