//! One writer appending puts back to back with a single fsync at the end: the log store's sequential
//! put bandwidth, to set beside the disk's raw sequential bandwidth.

use crate::puts::key;
use crate::Limits;
use bytes::Bytes;
use meridian_store::{Body, Datastore, Record};
use std::io;
use std::time::{Duration, Instant};

pub(crate) struct SequentialRun {
    pub(crate) puts: u64,
    /// Keys and values.
    pub(crate) payload_bytes: u64,
    /// What the store wrote, record framing included: the figure to compare with the raw bandwidth.
    pub(crate) store_bytes: u64,
    /// Appends and the final fsync.
    pub(crate) elapsed: Duration,
}

pub(crate) fn run(store: &mut dyn Datastore, value: &Bytes, limits: &Limits) -> io::Result<SequentialRun> {
    let before = store.stats().log_bytes;
    let start = Instant::now();
    let (mut puts, mut payload_bytes) = (0, 0);
    while start.elapsed() < limits.duration {
        let key = key(0, puts);
        let cost = (key.len() + value.len()) as u64;
        if payload_bytes + cost > limits.max_bytes {
            break;
        }
        let record = Record { chain: 0, seq: puts + 1, key, body: Body::Value(value.clone()) };
        store.append(&record).map_err(io::Error::other)?;
        puts += 1;
        payload_bytes += cost;
    }
    store.sync().map_err(io::Error::other)?;
    let elapsed = start.elapsed();
    Ok(SequentialRun { puts, payload_bytes, store_bytes: store.stats().log_bytes - before, elapsed })
}
