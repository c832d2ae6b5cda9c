//! Real processes: three `meridian server`s on 127.0.0.1-3, concurrent clients writing and reading
//! through every node, one node SIGKILLed and restarted mid-run. The recorded history must be
//! linearizable and every acknowledged write must be readable at the end.

mod support;

use meridian_check::{check, Budget, OpKind, Recorder, Verdict};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::resp::{Conn, Resp};
use support::Cluster;

const HOT_KEYS: u64 = 5;
const CLIENTS: usize = 6;

struct Shared {
    recorder: Mutex<Recorder>,
    start: Instant,
    stop: AtomicBool,
    /// Unique keys whose single write was acknowledged, with their values.
    acked: Mutex<Vec<(String, String)>>,
}

impl Shared {
    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
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

fn client(shared: Arc<Shared>, addrs: Vec<SocketAddr>, process: u64) {
    let mut rng = Rng(process * 7919 + 1);
    let mut conns: Vec<Option<Conn>> = addrs.iter().map(|_| None).collect();
    let mut n = 0;
    while !shared.stop.load(Ordering::Relaxed) {
        n += 1;
        let node = rng.next(addrs.len() as u64) as usize;
        let hot = format!("hot{}", rng.next(HOT_KEYS));
        let value = format!("c{process}-{n}");
        let op = match rng.next(10) {
            0..=3 => (OpKind::Get, hot, None),
            4..=6 => (OpKind::Put, hot, Some(value)),
            7 => (OpKind::Delete, hot, None),
            _ => (OpKind::Put, format!("u-{value}"), Some(value)),
        };
        let unique = op.1.starts_with("u-").then(|| (op.1.clone(), op.2.clone().unwrap()));
        if run_op(&shared, &mut conns[node], addrs[node], process, op).is_some() {
            if let Some(kv) = unique {
                shared.acked.lock().unwrap().push(kv);
            }
        }
    }
}

#[test]
fn sigkill_and_restart_keeps_history_linearizable_and_acked_writes() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(3, dir.path());
    let addrs: Vec<SocketAddr> = cluster.servers.iter().map(|s| s.resp).collect();
    let shared = Arc::new(Shared {
        recorder: Mutex::new(Recorder::new()),
        start: Instant::now(),
        stop: AtomicBool::new(false),
        acked: Mutex::new(Vec::new()),
    });
    let clients: Vec<_> = (0..CLIENTS as u64)
        .map(|p| {
            let (shared, addrs) = (shared.clone(), addrs.clone());
            std::thread::spawn(move || client(shared, addrs, p))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    cluster.servers[1].kill();
    std::thread::sleep(Duration::from_secs(2));
    cluster.servers[1].spawn();
    cluster.servers[1].wait_ready(Duration::from_secs(20));
    std::thread::sleep(Duration::from_secs(4));
    shared.stop.store(true, Ordering::Relaxed);
    clients.into_iter().for_each(|c| c.join().unwrap());

    // Final reads: every hot key through every node, recorded; every acknowledged unique key, asserted.
    let mut conn = None;
    for key in (0..HOT_KEYS).map(|k| format!("hot{k}")) {
        for &addr in &addrs {
            run_op(&shared, &mut conn, addr, 100, (OpKind::Get, key.clone(), None));
            conn = None;
        }
    }
    let acked = shared.acked.lock().unwrap().clone();
    assert!(acked.len() > 100, "too few acknowledged writes to mean anything: {}", acked.len());
    let mut lost = Vec::new();
    for (i, (key, value)) in acked.iter().enumerate() {
        let mut c = Conn::connect(addrs[i % addrs.len()], Duration::from_secs(5)).unwrap();
        match c.cmd(&["GET", key]).unwrap() {
            Resp::Bulk(Some(v)) if v == value.as_bytes() => {}
            other => lost.push(format!("{key}: expected {value}, got {other:?}")),
        }
    }
    assert!(lost.is_empty(), "acknowledged writes lost:\n{}", lost.join("\n"));

    let shared = Arc::try_unwrap(shared).ok().expect("clients are done");
    let history = shared.recorder.into_inner().unwrap().finish();
    let path = dir.path().join("history.jsonl");
    history.write_jsonl(std::fs::File::create(&path).unwrap()).unwrap();
    let ok = history.ops.iter().filter(|o| o.ok == Some(true)).count();
    let unknown = history.ops.iter().filter(|o| o.ok.is_none()).count();
    eprintln!("history: {} ops, {ok} ok, {unknown} unknown, {} acked unique writes", history.ops.len(), acked.len());
    match check(&history, Budget::default()) {
        Verdict::Linearizable { .. } => {}
        other => {
            let logs: Vec<String> = cluster.servers.iter().map(|s| s.log()).collect();
            let _ = dir.keep();
            panic!("{other:?}\nhistory at {}\nlogs:\n{}", path.display(), logs.join("\n---\n"));
        }
    }
}
