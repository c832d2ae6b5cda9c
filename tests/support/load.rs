//! Concurrent clients for real-process tests: each reads, writes and deletes a few hot keys and writes unique
//! keys through random nodes, recording every operation in a history for the linearizability checker. At the
//! end, every hot key is read through every node, and every acknowledged unique write must read back.

use super::resp::{Conn, Resp};
use meridian_check::{check, Budget, History, OpKind, Recorder, Verdict};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const HOT_KEYS: u64 = 5;

struct Shared {
    recorder: Mutex<Recorder>,
    start: Instant,
    stop: AtomicBool,
    /// Unique keys whose single write was acknowledged, with their values.
    acked: Mutex<Vec<(String, String)>>,
    /// The nodes clients talk to; a test adds nodes as they join.
    nodes: Mutex<Vec<SocketAddr>>,
}

impl Shared {
    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

/// Clients running against a cluster until [`Load::finish`].
pub struct Load {
    shared: Arc<Shared>,
    clients: Vec<JoinHandle<()>>,
}

/// A tiny deterministic generator, so a failing run's choices can be reasoned about.
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

impl Load {
    /// Starts `clients` clients spread over `nodes`.
    pub fn start(nodes: Vec<SocketAddr>, clients: usize) -> Load {
        let shared = Arc::new(Shared {
            recorder: Mutex::new(Recorder::new()),
            start: Instant::now(),
            stop: AtomicBool::new(false),
            acked: Mutex::new(Vec::new()),
            nodes: Mutex::new(nodes),
        });
        let clients = (0..clients as u64)
            .map(|p| {
                let shared = shared.clone();
                std::thread::spawn(move || client(shared, p))
            })
            .collect();
        Load { shared, clients }
    }

    /// Clients use `node` too from now on.
    pub fn add_node(&self, node: SocketAddr) {
        self.shared.nodes.lock().unwrap().push(node);
    }

    /// Clients stop using `node` (it is about to be killed; what was in flight to it stays unknown).
    pub fn drop_node(&self, node: SocketAddr) {
        self.shared.nodes.lock().unwrap().retain(|&n| n != node);
    }

    pub fn acked(&self) -> usize {
        self.shared.acked.lock().unwrap().len()
    }

    /// Stops the clients, reads every hot key through every node and asserts every acknowledged unique write
    /// reads back; returns the history, whose check is [`assert_linearizable`]'s.
    pub fn finish(self, nodes: &[SocketAddr]) -> History {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.clients.into_iter().for_each(|c| c.join().unwrap());
        for key in (0..HOT_KEYS).map(|k| format!("hot{k}")) {
            for &addr in nodes {
                run_op(&self.shared, &mut None, addr, 100, (OpKind::Get, key.clone(), None));
            }
        }
        let acked = self.shared.acked.lock().unwrap().clone();
        assert!(acked.len() > 100, "too few acknowledged writes to mean anything: {}", acked.len());
        let mut lost = Vec::new();
        for (i, (key, value)) in acked.iter().enumerate() {
            let mut c = Conn::connect(nodes[i % nodes.len()], Duration::from_secs(5)).unwrap();
            match c.cmd(&["GET", key]).unwrap() {
                Resp::Bulk(Some(v)) if v == value.as_bytes() => {}
                other => lost.push(format!("{key}: expected {value}, got {other:?}")),
            }
        }
        assert!(lost.is_empty(), "acknowledged writes lost:\n{}", lost.join("\n"));
        let shared = Arc::try_unwrap(self.shared).ok().expect("clients are done");
        shared.recorder.into_inner().unwrap().finish()
    }
}

/// Checks `history`; on a violation, keeps `dir` (history and logs) and fails with `logs`.
pub fn assert_linearizable(history: &History, dir: tempfile::TempDir, logs: impl FnOnce() -> Vec<String>) {
    let path = dir.path().join("history.jsonl");
    history.write_jsonl(std::fs::File::create(&path).unwrap()).unwrap();
    let ok = history.ops.iter().filter(|o| o.ok == Some(true)).count();
    let unknown = history.ops.iter().filter(|o| o.ok.is_none()).count();
    eprintln!("history: {} ops, {ok} ok, {unknown} unknown", history.ops.len());
    match check(history, Budget::default()) {
        Verdict::Linearizable { .. } => {}
        other => {
            let logs = logs().join("\n---\n");
            let _ = dir.keep();
            panic!("{other:?}\nhistory at {}\nlogs:\n{logs}", path.display());
        }
    }
}

/// Runs one command and records it; returns the reply when it is certain.
fn run_op(
    shared: &Shared,
    conn: &mut Option<Conn>,
    addr: SocketAddr,
    process: u64,
    op: (OpKind, String, Option<String>),
) -> Option<Resp> {
    let (kind, key, value) = op;
    let idx = shared.recorder.lock().unwrap().invoke(process, kind, key.clone(), value.clone(), None, shared.now());
    if conn.is_none() {
        *conn = Conn::connect(addr, Duration::from_secs(5)).ok();
    }
    let reply = conn.as_mut().map(|c| match (kind, &value) {
        (OpKind::Get, _) => c.cmd(&["GET", &key]),
        (OpKind::Put, Some(v)) => c.cmd(&["SET", &key, v]),
        _ => c.cmd(&["DEL", &key]),
    });
    let now = shared.now();
    let mut rec = shared.recorder.lock().unwrap();
    match reply {
        Some(Ok(Resp::Bulk(v))) if kind == OpKind::Get => {
            rec.complete(idx, Some(true), v.map(|b| String::from_utf8(b).unwrap()), now);
        }
        Some(Ok(r @ (Resp::Simple(_) | Resp::Int(_)))) if kind != OpKind::Get => {
            rec.complete(idx, Some(true), None, now);
            return Some(r);
        }
        Some(Ok(Resp::Error(e))) if !e.starts_with("TIMEOUT") => rec.complete(idx, Some(false), None, now),
        Some(Ok(Resp::Error(_))) => {}
        Some(Ok(other)) => panic!("{kind:?} {key}: unexpected reply {other:?}"),
        Some(Err(_)) | None => *conn = None,
    }
    None
}

fn client(shared: Arc<Shared>, process: u64) {
    let mut rng = Rng(process * 7919 + 1);
    let mut conns: Vec<(SocketAddr, Option<Conn>)> = Vec::new();
    let mut n = 0;
    while !shared.stop.load(Ordering::Relaxed) {
        n += 1;
        let nodes = shared.nodes.lock().unwrap().clone();
        conns.retain(|(a, _)| nodes.contains(a));
        let addr = nodes[rng.next(nodes.len() as u64) as usize];
        let slot = match conns.iter().position(|(a, _)| *a == addr) {
            Some(i) => i,
            None => {
                conns.push((addr, None));
                conns.len() - 1
            }
        };
        let hot = format!("hot{}", rng.next(HOT_KEYS));
        let value = format!("c{process}-{n}");
        let op = match rng.next(10) {
            0..=3 => (OpKind::Get, hot, None),
            4..=6 => (OpKind::Put, hot, Some(value)),
            7 => (OpKind::Delete, hot, None),
            _ => (OpKind::Put, format!("u-{value}"), Some(value)),
        };
        let unique = op.1.starts_with("u-").then(|| (op.1.clone(), op.2.clone().unwrap()));
        if run_op(&shared, &mut conns[slot].1, addr, process, op).is_some() {
            if let Some(kv) = unique {
                shared.acked.lock().unwrap().push(kv);
            }
        }
    }
}
