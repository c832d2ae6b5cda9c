//! The log store's sequential put bandwidth against the disk's raw sequential bandwidth, measured fairly:
//! both sides write the same number of bytes to a fresh file and end with one `fdatasync`, and the two run
//! back to back in pairs, several times, with the order swapped every round. This VM's disk swings 3×
//! from one minute to the next, so a raw figure taken once at the start of the run cannot judge a store
//! measured a minute later; the median of per-pair ratios can.

use crate::puts::key;
use crate::stores::StoreKind;
use crate::{disk, mb_per_s, Limits};
use bytes::Bytes;
use meridian_store::{Body, Record};
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

/// Pairs per value size.
pub(crate) const ROUNDS: usize = 5;
/// Bytes each side of a pair writes at most (also bounded by `--max-bytes` and the duration).
const ROUND_BYTES_MAX: u64 = 64 << 20;
/// Puts between two looks at the clock.
const CLOCK_EVERY: usize = 256;

/// One pair: a fresh log store and a fresh raw file, each written with [`ROUND_BYTES_MAX`] bytes (the store
/// overshoots by less than one record).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pair {
    pub(crate) puts: u64,
    /// Keys and values.
    pub(crate) payload_bytes: u64,
    /// What the store wrote, record framing included.
    pub(crate) store_bytes: u64,
    /// Appends and the final fsync.
    pub(crate) log_elapsed: Duration,
    pub(crate) raw_bytes: u64,
    pub(crate) raw_elapsed: Duration,
}

impl Pair {
    pub(crate) fn log_mb_s(&self) -> f64 {
        mb_per_s(self.store_bytes, self.log_elapsed)
    }

    pub(crate) fn raw_mb_s(&self) -> f64 {
        mb_per_s(self.raw_bytes, self.raw_elapsed)
    }

    /// The log store's bandwidth as a fraction of the raw bandwidth measured beside it.
    pub(crate) fn fraction(&self) -> f64 {
        self.log_mb_s() / self.raw_mb_s().max(f64::MIN_POSITIVE)
    }
}

/// Runs [`ROUNDS`] pairs in `dir`, each with a fresh store and a fresh raw file, removed afterwards.
pub(crate) fn run(dir: &Path, value: &Bytes, limits: &Limits) -> io::Result<Vec<Pair>> {
    let budget = limits.max_bytes.min(ROUND_BYTES_MAX);
    (0..ROUNDS)
        .map(|round| {
            let store_dir = dir.join(format!("log-{round}"));
            let raw_path = dir.join(format!("raw-{round}.bin"));
            // Alternate which side goes first, so neither always inherits the other's writeback.
            let (pair, (raw_bytes, raw_elapsed)) = if round % 2 == 0 {
                let pair = log_side(&store_dir, value, budget, limits.duration)?;
                (pair, disk::sequential_write(&raw_path, budget, limits.duration)?)
            } else {
                let raw = disk::sequential_write(&raw_path, budget, limits.duration)?;
                (log_side(&store_dir, value, budget, limits.duration)?, raw)
            };
            std::fs::remove_dir_all(&store_dir)?;
            std::fs::remove_file(&raw_path)?;
            Ok(Pair { raw_bytes, raw_elapsed, ..pair })
        })
        .collect()
}

/// One writer appending puts back to back into a fresh log store until it has written `store_bytes` (or
/// `duration` passed), then one `sync`. The records are built before the clock starts, so the figure is the
/// store's, not the benchmark's key formatting.
fn log_side(dir: &Path, value: &Bytes, store_bytes: u64, duration: Duration) -> io::Result<Pair> {
    let records = records(value, store_bytes);
    let mut store = StoreKind::Log.open(dir)?;
    let before = store.stats().log_bytes;
    let start = Instant::now();
    let (mut puts, mut payload_bytes) = (0, 0);
    for (n, record) in records.iter().enumerate() {
        // Reading the clock costs as much as a small put, so look at it every so often.
        if n % CLOCK_EVERY == 0 && start.elapsed() >= duration {
            break;
        }
        store.append(record).map_err(io::Error::other)?;
        payload_bytes += (record.key.len() + value.len()) as u64;
        puts += 1;
    }
    store.sync().map_err(io::Error::other)?;
    let log_elapsed = start.elapsed();
    let store_bytes = store.stats().log_bytes - before;
    Ok(Pair { puts, payload_bytes, store_bytes, log_elapsed, raw_bytes: 0, raw_elapsed: Duration::ZERO })
}

/// Puts whose encoded records add up to at least `store_bytes`.
fn records(value: &Bytes, store_bytes: u64) -> Vec<Record> {
    let mut encoded = 0;
    (0..)
        .map(|n| Record { chain: 0, seq: n + 1, key: key(0, n), body: Body::Value(value.clone()) })
        .take_while(|r| {
            let more = encoded < store_bytes;
            encoded += r.encoded_len() as u64;
            more
        })
        .collect()
}
