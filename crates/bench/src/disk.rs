//! The disk's own figures, the yardstick for the stores: sequential write bandwidth, and the latency of
//! a small append followed by an fsync. Both use the calls the log store makes (appends to a file opened
//! for appending, then `fdatasync`), in the directory the stores are measured in.

use crate::latency::Latency;
use crate::Limits;
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// One sequential write call.
const SEQ_CHUNK: usize = 1 << 20;
/// Bytes the sequential test writes at most (also bounded by `--max-bytes`).
const SEQ_BYTES_MAX: u64 = 256 << 20;
/// The append before each timed fsync: one page.
const FSYNC_APPEND: usize = 4096;
/// Timed fsyncs at most (also bounded by the cell duration).
const FSYNC_SAMPLES_MAX: usize = 500;

#[derive(Clone, Debug, Serialize)]
pub struct DiskFigures {
    pub seq_write_bytes: u64,
    /// Writing and the final fsync together.
    pub seq_write_seconds: f64,
    /// Megabytes (10^6 bytes) per second.
    pub seq_write_mb_s: f64,
    pub fsync_samples: u64,
    pub fsync_p50_us: f64,
    pub fsync_p99_us: f64,
}

pub(crate) fn measure(dir: &Path, limits: &Limits) -> io::Result<DiskFigures> {
    let path = dir.join("raw-sequential.bin");
    let (written, took) = sequential_write(&path, limits.max_bytes.min(SEQ_BYTES_MAX), limits.duration)?;
    std::fs::remove_file(&path)?;
    let path = dir.join("raw-fsync.bin");
    let fsyncs = fsync_latency(&path, limits.duration)?;
    std::fs::remove_file(&path)?;
    Ok(DiskFigures {
        seq_write_bytes: written,
        seq_write_seconds: took.as_secs_f64(),
        seq_write_mb_s: crate::mb_per_s(written, took),
        fsync_samples: fsyncs.count(),
        fsync_p50_us: fsyncs.micros(50.0),
        fsync_p99_us: fsyncs.micros(99.0),
    })
}

fn open_for_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// Writes up to `bytes` in [`SEQ_CHUNK`] calls (stopping early after `duration`), then fsyncs; returns
/// the bytes written and the time both took.
pub(crate) fn sequential_write(path: &Path, bytes: u64, duration: Duration) -> io::Result<(u64, Duration)> {
    let chunk = crate::incompressible(SEQ_CHUNK);
    let mut file = open_for_append(path)?;
    let start = Instant::now();
    let mut written = 0;
    while written < bytes && start.elapsed() < duration {
        let n = chunk.len().min((bytes - written) as usize);
        file.write_all(&chunk[..n])?;
        written += n as u64;
    }
    file.sync_data()?;
    Ok((written, start.elapsed()))
}

/// Times up to [`FSYNC_SAMPLES_MAX`] rounds of a [`FSYNC_APPEND`]-byte append and its fsync.
fn fsync_latency(path: &Path, duration: Duration) -> io::Result<Latency> {
    let page = crate::incompressible(FSYNC_APPEND);
    let mut file = open_for_append(path)?;
    let mut latency = Latency::new();
    let start = Instant::now();
    for _ in 0..FSYNC_SAMPLES_MAX {
        if start.elapsed() >= duration {
            break;
        }
        let t = Instant::now();
        file.write_all(&page)?;
        file.sync_data()?;
        latency.record(t.elapsed());
    }
    Ok(latency)
}
