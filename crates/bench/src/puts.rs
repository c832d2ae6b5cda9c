//! Concurrent puts through the committer: `writers` threads, each with one put outstanding at a time (as
//! a client connection without pipelining), each timing its puts from hand-over to acknowledgement.

use crate::committer::{self, Commits, Put};
use crate::latency::Latency;
use crate::Limits;
use bytes::Bytes;
use meridian_node::SyncPolicy;
use meridian_store::Datastore;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::time::{Duration, Instant};

/// What one run of concurrent puts measured.
pub(crate) struct PutRun {
    /// Puts acknowledged per writer; writer `w`'s keys are `key(w, 0..n)`.
    pub(crate) per_writer: Vec<u64>,
    pub(crate) latency: Latency,
    /// From the first put to the last acknowledgement.
    pub(crate) elapsed: Duration,
    pub(crate) commits: Commits,
}

impl PutRun {
    pub(crate) fn puts(&self) -> u64 {
        self.per_writer.iter().sum()
    }
}

/// Writer `w`'s `n`-th key.
pub(crate) fn key(writer: usize, n: u64) -> Bytes {
    Bytes::from(format!("w{writer:03}-{n:010}"))
}

/// Runs `writers` writers against `store` for the limits' duration or byte budget, whichever ends first.
pub(crate) fn run(
    store: &mut dyn Datastore,
    policy: SyncPolicy,
    writers: usize,
    value: &Bytes,
    limits: &Limits,
) -> io::Result<PutRun> {
    let budget = AtomicU64::new(limits.max_bytes);
    let (put_tx, put_rx) = sync_channel(writers);
    let (ack_txs, ack_rxs): (Vec<_>, Vec<_>) = (0..writers).map(|_| sync_channel(1)).unzip();
    std::thread::scope(|s| {
        let committer = s.spawn(move || committer::run(store, policy, put_rx, ack_txs));
        let start = Instant::now();
        let deadline = start + limits.duration;
        let handles: Vec<_> = ack_rxs
            .into_iter()
            .enumerate()
            .map(|(w, acks)| {
                let (puts, budget) = (put_tx.clone(), &budget);
                s.spawn(move || writer(w, puts, acks, value, deadline, budget))
            })
            .collect();
        drop(put_tx);
        let results: Vec<(u64, Latency)> = handles.into_iter().map(|h| h.join().expect("writer thread")).collect();
        let elapsed = start.elapsed();
        let commits = committer.join().expect("committer thread")?;
        let mut latency = Latency::new();
        results.iter().for_each(|(_, l)| latency.merge(l));
        Ok(PutRun { per_writer: results.iter().map(|(n, _)| *n).collect(), latency, elapsed, commits })
    })
}

/// Puts until `deadline` or until the shared byte budget runs out; stops early if the committer fails.
fn writer(
    id: usize,
    puts: SyncSender<Put>,
    acks: Receiver<()>,
    value: &Bytes,
    deadline: Instant,
    budget: &AtomicU64,
) -> (u64, Latency) {
    let mut latency = Latency::new();
    let mut n = 0;
    while Instant::now() < deadline {
        let key = key(id, n);
        let cost = (key.len() + value.len()) as u64;
        if budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| b.checked_sub(cost)).is_err() {
            break;
        }
        let put = Put { writer: id, key, value: value.clone() };
        let started = Instant::now();
        if puts.send(put).is_err() || acks.recv().is_err() {
            break;
        }
        latency.record(started.elapsed());
        n += 1;
    }
    (n, latency)
}
