//! The Prometheus text exposition format (version 0.0.4), written by hand: a node's `/metrics` is
//! assembled from parts that live in different crates (the protocol core's chains and stores, the
//! runner's clients and fsyncs), and each part writes its families with this one writer so the escaping
//! and layout rules are kept in one place.
//!
//! A family is announced once with `# HELP` and `# TYPE` and its samples follow it directly, as the
//! format requires. Label values are escaped (`\\`, `\"`, `\n`); help text escapes `\\` and `\n`.

use std::fmt::{Display, Write};

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
}
