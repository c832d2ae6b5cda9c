//! Gets from a filled store on one thread, as the node's core serves them: each a lookup in the
//! in-memory index and, for the log store, one read of the record from the log. The data was just
//! written, so the log's pages are in the page cache: this measures the store's read path, not the disk.

use crate::latency::Latency;
use crate::puts::key;
use crate::Limits;
use bytes::Bytes;
use meridian_core::splitmix::SplitMix64;
use meridian_store::Datastore;
use std::io;
use std::time::{Duration, Instant};

/// Keys drawn in advance, so drawing and formatting them stays out of the measured loop.
const KEY_SAMPLE: usize = 1 << 16;
/// Gets per run at most (also bounded by the duration).
const GETS_MAX: u64 = 50_000_000;

pub(crate) struct GetRun {
    pub(crate) gets: u64,
    pub(crate) latency: Latency,
    pub(crate) elapsed: Duration,
}

/// Gets keys written by a [`crate::puts`] run (`per_writer[w]` keys by writer `w`), uniformly at random.
pub(crate) fn run(store: &dyn Datastore, per_writer: &[u64], limits: &Limits) -> io::Result<GetRun> {
    let keys = sample(per_writer);
    let mut latency = Latency::new();
    let start = Instant::now();
    let mut gets = 0;
    if keys.is_empty() {
        return Ok(GetRun { gets, latency, elapsed: start.elapsed() });
    }
    while gets < GETS_MAX && start.elapsed() < limits.duration {
        let key = &keys[gets as usize % keys.len()];
        let t = Instant::now();
        let found = store.get(key).map_err(io::Error::other)?;
        latency.record(t.elapsed());
        if found.is_none() {
            return Err(io::Error::other(format!("key {key:?} was written but is missing")));
        }
        gets += 1;
    }
    Ok(GetRun { gets, latency, elapsed: start.elapsed() })
}

/// [`KEY_SAMPLE`] keys drawn uniformly from everything written (none if nothing was).
fn sample(per_writer: &[u64]) -> Vec<Bytes> {
    // ends[w]: how many keys writers 0..=w wrote together.
    let ends: Vec<u64> = per_writer
        .iter()
        .scan(0, |sum, n| {
            *sum += n;
            Some(*sum)
        })
        .collect();
    let total = ends.last().copied().unwrap_or(0);
    if total == 0 {
        return Vec::new();
    }
    let mut rng = SplitMix64::new(total);
    (0..KEY_SAMPLE)
        .map(|_| {
            let i = rng.next_u64() % total;
            let writer = ends.partition_point(|&end| end <= i);
            key(writer, i - (ends[writer] - per_writer[writer]))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampled_keys_are_keys_that_were_written() {
        let per_writer = [3, 0, 2];
        let written: Vec<Bytes> = [(0, 0), (0, 1), (0, 2), (2, 0), (2, 1)].iter().map(|&(w, n)| key(w, n)).collect();
        let keys = sample(&per_writer);
        assert_eq!(keys.len(), KEY_SAMPLE);
        assert!(keys.iter().all(|k| written.contains(k)));
        assert!(written.iter().all(|k| keys.contains(k)), "every written key can be drawn");
        assert!(sample(&[0, 0]).is_empty());
    }
}
