//! The Prometheus text exposition format (version 0.0.4), written by hand: a node's `/metrics` is
//! assembled from parts that live in different crates (the protocol core's chains and stores, the
//! runner's clients and fsyncs), and each part writes its families with this one writer so the escaping
//! and layout rules are kept in one place.
//!
//! A family is announced once with `# HELP` and `# TYPE` and its samples follow it directly, as the
//! format requires. Label values are escaped (`\\`, `\"`, `\n`); help text escapes `\\` and `\n`.

use std::fmt::{Display, Write};
use std::time::Duration;

/// A metric family's type, as `# TYPE` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    Counter,
    Gauge,
    Histogram,
}

impl MetricKind {
    fn name(self) -> &'static str {
        match self {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
            MetricKind::Histogram => "histogram",
        }
    }
}

/// Upper bounds of the buckets of every latency histogram Meridian exports, in microseconds: from a loopback
/// round trip to a stalled disk or a wait across the world.
pub const LATENCY_BOUNDS_US: [u64; 16] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000,
    10_000_000,
];

/// A latency histogram as Prometheus reads it, over [`LATENCY_BOUNDS_US`]: what a single-threaded core records
/// into, and what the node's shared histograms read as.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Latencies {
    /// Observations at or below each bound, cumulative.
    pub cumulative: [u64; LATENCY_BOUNDS_US.len()],
    /// Every observation, those beyond the last bound included.
    pub count: u64,
    pub sum_us: u64,
}

impl Latencies {
    /// The bucket `elapsed` falls in (the first whose bound holds it; `LATENCY_BOUNDS_US.len()` beyond them all),
    /// and `elapsed` in microseconds.
    pub fn bucket(elapsed: Duration) -> (usize, u64) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        (LATENCY_BOUNDS_US.partition_point(|&bound| bound < us), us)
    }

    pub fn record(&mut self, elapsed: Duration) {
        let (bucket, us) = Latencies::bucket(elapsed);
        self.cumulative[bucket..].iter_mut().for_each(|c| *c += 1);
        self.count += 1;
        self.sum_us = self.sum_us.saturating_add(us);
    }
}

/// Text being written in the exposition format.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    pub fn new() -> Exposition {
        Exposition::default()
    }

    /// Announces a family; its samples must follow before the next family.
    pub fn family(&mut self, name: &str, kind: MetricKind, help: &str) -> &mut Self {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = write!(self.out, "# HELP {name} {help}\n# TYPE {name} {}\n", kind.name());
        self
    }

    /// One sample: `name{labels} value`. For a histogram, `name` carries the `_bucket`, `_sum` or `_count`
    /// suffix.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) -> &mut Self {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (label, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{label}=\"{}\"", escape_label(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
        self
    }

    /// A family with a single unlabelled sample.
    pub fn single(&mut self, name: &str, kind: MetricKind, help: &str, value: impl Display) -> &mut Self {
        self.family(name, kind, help).sample(name, &[], value)
    }

    /// A histogram's samples under family `name`: cumulative buckets with `le` in seconds, `+Inf`, sum and count.
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], l: &Latencies) -> &mut Self {
        let bucket = format!("{name}_bucket");
        for (bound, count) in LATENCY_BOUNDS_US.iter().zip(l.cumulative) {
            let le = (*bound as f64 / 1e6).to_string();
            self.sample(&bucket, &[labels, &[("le", le.as_str())]].concat(), count);
        }
        self.sample(&bucket, &[labels, &[("le", "+Inf")]].concat(), l.count);
        self.sample(&format!("{name}_sum"), labels, l.sum_us as f64 / 1e6);
        self.sample(&format!("{name}_count"), labels, l.count)
    }

    pub fn into_text(self) -> String {
        self.out
    }
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_announce_themselves_before_their_samples() {
        let mut e = Exposition::new();
        e.family("meridian_things_total", MetricKind::Counter, "Things.")
            .sample("meridian_things_total", &[("kind", "a")], 3)
            .sample("meridian_things_total", &[("kind", "b"), ("x", "y")], 4);
        e.single("meridian_up", MetricKind::Gauge, "Up.", 1);
        assert_eq!(
            e.into_text(),
            "# HELP meridian_things_total Things.\n# TYPE meridian_things_total counter\n\
             meridian_things_total{kind=\"a\"} 3\nmeridian_things_total{kind=\"b\",x=\"y\"} 4\n\
             # HELP meridian_up Up.\n# TYPE meridian_up gauge\nmeridian_up 1\n"
        );
    }

    #[test]
    fn label_values_and_help_are_escaped() {
        let mut e = Exposition::new();
        e.family("m", MetricKind::Gauge, "a\\b\nc").sample("m", &[("k", "q\"\\\n")], 0.5);
        assert_eq!(e.into_text(), "# HELP m a\\\\b\\nc\n# TYPE m gauge\nm{k=\"q\\\"\\\\\\n\"} 0.5\n");
    }

    #[test]
    fn a_histogram_counts_each_observation_in_its_bucket_and_every_later_one() {
        let mut l = Latencies::default();
        for us in [0, 50, 51, 20_000_000] {
            l.record(Duration::from_micros(us));
        }
        assert_eq!((l.count, l.sum_us), (4, 20_000_101));
        assert_eq!(&l.cumulative[..3], &[2, 3, 3], "≤50 µs: 0 and 50; ≤100 µs: 51 as well");
        assert_eq!(l.cumulative[LATENCY_BOUNDS_US.len() - 1], 3, "20 s exceeds every bound: only the count holds it");
        let mut e = Exposition::new();
        e.histogram("w", &[("wait", "x")], &l);
        let text = e.into_text();
        assert!(text.starts_with("w_bucket{wait=\"x\",le=\"0.00005\"} 2\n"), "{text}");
        assert!(
            text.ends_with("w_bucket{wait=\"x\",le=\"+Inf\"} 4\nw_sum{wait=\"x\"} 20.000101\nw_count{wait=\"x\"} 4\n"),
            "{text}"
        );
    }
}
