//! A latency histogram cheap enough to record every command of every connection: fixed buckets of atomic
//! counters, no lock and no allocation, read as Prometheus' cumulative buckets.
//!
//! The count is the sum of the buckets, read in the same pass, so a snapshot's `_count`, its `+Inf` bucket
//! and any total derived from it (INFO's `calls`) always agree with one another.

use meridian_core::exposition::{Latencies, LATENCY_BOUNDS_US};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[derive(Debug)]
pub(crate) struct Histogram {
    /// One per bound, and a last one for what exceeds them all.
    buckets: [AtomicU64; LATENCY_BOUNDS_US.len() + 1],
    sum_us: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { buckets: std::array::from_fn(|_| AtomicU64::new(0)), sum_us: AtomicU64::new(0) }
    }
}

impl Histogram {
    pub(crate) fn record(&self, elapsed: Duration) {
        let (bucket, us) = Latencies::bucket(elapsed);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Latencies {
        let mut cumulative = [0; LATENCY_BOUNDS_US.len()];
        let mut count = 0;
        for (i, bucket) in self.buckets.iter().enumerate() {
            count += bucket.load(Ordering::Relaxed);
            if let Some(c) = cumulative.get_mut(i) {
                *c = count;
            }
        }
        Latencies { cumulative, count, sum_us: self.sum_us.load(Ordering::Relaxed) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_that_holds_them() {
        let h = Histogram::default();
        for us in [0, 50, 51, 100, 20_000_000] {
            h.record(Duration::from_micros(us));
        }
        let s = h.snapshot();
        assert_eq!(s.count, 5);
        assert_eq!(s.sum_us, 20_000_201);
        assert_eq!(&s.cumulative[..3], &[2, 4, 4], "≤50 µs: 0 and 50; ≤100 µs: 51 and 100 as well");
        assert_eq!(s.cumulative[LATENCY_BOUNDS_US.len() - 1], 4, "20 s exceeds every bound: only the count holds it");
    }
}
