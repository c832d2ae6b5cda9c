//! Latency recording: an HDR histogram of nanoseconds, read out in microseconds.

use hdrhistogram::Histogram;
use std::time::Duration;

/// The slowest operation a histogram can hold; anything slower is recorded as this.
const HIGHEST: Duration = Duration::from_secs(60);
/// Significant decimal digits kept: enough to tell p99.9 apart from p99 at any magnitude.
const SIGNIFICANT_DIGITS: u8 = 3;

#[derive(Clone, Debug)]
pub(crate) struct Latency(Histogram<u64>);

impl Latency {
    pub(crate) fn new() -> Latency {
        let highest = HIGHEST.as_nanos() as u64;
        Latency(Histogram::new_with_bounds(1, highest, SIGNIFICANT_DIGITS).expect("valid histogram bounds"))
    }

    pub(crate) fn record(&mut self, d: Duration) {
        self.0.saturating_record(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1));
    }

    pub(crate) fn merge(&mut self, other: &Latency) {
        self.0.add(&other.0).expect("histograms with the same bounds merge");
    }

    pub(crate) fn count(&self) -> u64 {
        self.0.len()
    }

    /// Every latency recorded, as (microseconds, how many), fastest first: each value stands for the
    /// histogram's bucket (within 0.1% of the latencies it counts), so any CDF or share can be read from it.
    pub(crate) fn recorded(&self) -> Vec<(f64, u64)> {
        let bucket = |v: hdrhistogram::iterators::IterationValue<u64>| {
            (self.0.highest_equivalent(v.value_iterated_to()) as f64 / 1e3, v.count_at_value())
        };
        self.0.iter_recorded().map(bucket).collect()
    }

    /// The latency at `percentile` (0–100) in microseconds; zero when nothing was recorded.
    pub(crate) fn micros(&self, percentile: f64) -> f64 {
        self.0.value_at_percentile(percentile) as f64 / 1e3
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_out_in_microseconds_and_merge() {
        let mut a = Latency::new();
        let mut b = Latency::new();
        (1..=99).for_each(|_| a.record(Duration::from_micros(10)));
        b.record(Duration::from_millis(5));
        a.merge(&b);
        assert_eq!(a.count(), 100);
        assert!((a.micros(50.0) - 10.0).abs() < 0.1);
        assert!((a.micros(100.0) - 5000.0).abs() < 5.0);
        assert_eq!(Latency::new().micros(99.0), 0.0);
        let recorded = a.recorded();
        assert_eq!(recorded.iter().map(|&(_, n)| n).sum::<u64>(), 100);
        assert_eq!(recorded[0].1, 99);
        assert!((recorded[0].0 - 10.0).abs() < 0.1 && (recorded[1].0 - 5000.0).abs() < 5.0, "{recorded:?}");
    }
}
