//! What a run measured: each phase's operations by type, with HDR latency percentiles, as a table, CSV
//! (`--csv`) and JSON (`--json`).

use super::distribution::OpKind;
use super::ops::Outcome;
use super::protocol::Protocol;
use super::workload::{Distribution, Workload};
use crate::latency::Latency;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::time::Duration;

/// A phase's operations as they complete, shared by its connections.
pub(super) struct Tally {
    ops: BTreeMap<OpKind, OpTally>,
    /// How long after its intended start each operation was sent: in an open loop, the wait for a free slot
    /// (behind a slow server) and the timer's lateness, which its latency includes.
    send_lag: Latency,
}

struct OpTally {
    /// Operations answered without an error (found or not), from their intended start to their answer.
    latency: Latency,
    errors: u64,
    missing: u64,
    first_error: Option<String>,
}

impl Tally {
    pub(super) fn new() -> Tally {
        Tally { ops: BTreeMap::new(), send_lag: Latency::new() }
    }

    pub(super) fn sent_late(&mut self, lag: Duration) {
        self.send_lag.record(lag);
    }

    pub(super) fn record(&mut self, op: OpKind, outcome: Outcome, took: Duration) {
        let t = self.ops.entry(op).or_insert_with(|| OpTally {
            latency: Latency::new(),
            errors: 0,
            missing: 0,
            first_error: None,
        });
        match outcome {
            Outcome::Done => t.latency.record(took),
            Outcome::Missing => {
                t.latency.record(took);
                t.missing += 1;
            }
            Outcome::Failed(e) => {
                t.errors += 1;
                t.first_error.get_or_insert(e);
            }
        }
    }
}

/// The figures of a whole run.
#[derive(Clone, Debug, Serialize)]
pub struct YcsbReport {
    /// The servers measured, connections spread evenly over them.
    pub addrs: Vec<String>,
    pub protocol: Protocol,
    /// The database every connection selected, if one was.
    pub db: Option<u32>,
    pub workload: Workload,
    /// Commands each connection keeps in flight at most.
    pub pipeline: usize,
    /// Threads of the load generator's runtime.
    pub threads: usize,
    pub phases: Vec<PhaseFigures>,
}

/// One phase: `load` or `run`.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseFigures {
    pub phase: &'static str,
    /// `closed` (each connection sends when a reply frees a slot) or `open` (at fixed times, `target_ops_per_s`).
    pub pacing: &'static str,
    pub target_ops_per_s: Option<f64>,
    pub clients: usize,
    /// From the first operation's intended start to the last answer.
    pub seconds: f64,
    /// Operations answered without error, and those that failed.
    pub operations: u64,
    pub errors: u64,
    /// Open loop: operations of the schedule never sent, because the run's time ran out (the target rate was
    /// more than the server could take).
    pub unsent: u64,
    pub ops_per_s: f64,
    /// How long after their intended start operations were sent (zero in a closed loop, where an operation
    /// starts when it is sent): the part of an open loop's latencies spent before the server saw the operation.
    pub send_lag_p50_us: f64,
    pub send_lag_p99_us: f64,
    pub send_lag_max_us: f64,
    pub ops: Vec<OpFigures>,
}

/// One operation type of a phase.
#[derive(Clone, Debug, Serialize)]
pub struct OpFigures {
    pub op: &'static str,
    /// Answered without error; `missing` of them were reads of a record not there.
    pub count: u64,
    pub missing: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub ops_per_s: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// The whole latency distribution, as (microseconds, operations), fastest first (JSON only).
    pub histogram_us: Vec<(f64, u64)>,
}

/// How a phase was paced and what it took, beside its tally.
pub(super) struct PhaseRun {
    pub phase: &'static str,
    pub target_ops_per_s: Option<f64>,
    pub clients: usize,
    pub took: Duration,
    pub unsent: u64,
}

impl PhaseFigures {
    pub(super) fn new(run: PhaseRun, tally: Tally) -> PhaseFigures {
        let per_s = |n: u64| crate::per_second(n, run.took);
        let ops: Vec<OpFigures> = tally
            .ops
            .iter()
            .map(|(op, t)| OpFigures {
                op: op.name(),
                count: t.latency.count(),
                missing: t.missing,
                errors: t.errors,
                first_error: t.first_error.clone(),
                ops_per_s: per_s(t.latency.count()),
                p50_us: t.latency.micros(50.0),
                p90_us: t.latency.micros(90.0),
                p99_us: t.latency.micros(99.0),
                p999_us: t.latency.micros(99.9),
                max_us: t.latency.micros(100.0),
                histogram_us: t.latency.recorded(),
            })
            .collect();
        let operations = ops.iter().map(|o| o.count).sum();
        PhaseFigures {
            phase: run.phase,
            pacing: if run.target_ops_per_s.is_some() { "open" } else { "closed" },
            target_ops_per_s: run.target_ops_per_s,
            clients: run.clients,
            seconds: run.took.as_secs_f64(),
            operations,
            errors: ops.iter().map(|o| o.errors).sum(),
            unsent: run.unsent,
            ops_per_s: per_s(operations),
            send_lag_p50_us: tally.send_lag.micros(50.0),
            send_lag_p99_us: tally.send_lag.micros(99.0),
            send_lag_max_us: tally.send_lag.micros(100.0),
            ops,
        }
    }
}

const CSV_HEADER: &str = "phase,op,count,missing,errors,ops_per_s,p50_us,p90_us,p99_us,p999_us,max_us";

impl YcsbReport {
    /// One line per phase and operation type, after a header.
    pub fn csv(&self) -> String {
        let mut out = format!("{CSV_HEADER}\n");
        for p in &self.phases {
            for o in &p.ops {
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1}",
                    p.phase,
                    o.op,
                    o.count,
                    o.missing,
                    o.errors,
                    o.ops_per_s,
                    o.p50_us,
                    o.p90_us,
                    o.p99_us,
                    o.p999_us,
                    o.max_us
                );
            }
        }
        out
    }

    /// Operations that failed in any phase, and the first reason given.
    pub fn errors(&self) -> (u64, Option<&str>) {
        let ops = self.phases.iter().flat_map(|p| &p.ops);
        let first = ops.clone().find_map(|o| o.first_error.as_deref());
        (ops.map(|o| o.errors).sum(), first)
    }
}

impl fmt::Display for YcsbReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = &self.workload;
        let p = &w.proportions;
        writeln!(
            f,
            "meridian bench ycsb: {addrs} ({protocol}{db}), workload {preset} (read {:.2} update {:.2} insert {:.2} \
             read-modify-write {:.2}, {dist}), {records} records of {fields} × {len} B ({kind}), pipeline {pipe}, \
             {threads} runtime thread(s)",
            p.read,
            p.update,
            p.insert,
            p.read_modify_write,
            addrs = self.addrs.join(", "),
            protocol = self.protocol.name(),
            db = self.db.map_or(String::new(), |n| format!(", database {n}")),
            preset = w.preset,
            dist = match w.distribution {
                Distribution::Uniform => w.distribution.name().to_string(),
                _ => format!("{} {}", w.distribution.name(), w.zipfian_constant),
            },
            records = w.record_count,
            fields = w.field_count,
            len = w.field_length,
            kind = if w.is_hash() { "hash" } else { "string" },
            pipe = self.pipeline,
            threads = self.threads,
        )?;
        for phase in &self.phases {
            let target = phase.target_ops_per_s.map_or(String::new(), |r| format!(" at {r:.0} ops/s"));
            writeln!(
                f,
                "\n{}: {} clients, {} loop{target}: {} ops in {:.2} s, {:.0} ops/s, {} errors{}",
                phase.phase,
                phase.clients,
                phase.pacing,
                phase.operations,
                phase.seconds,
                phase.ops_per_s,
                phase.errors,
                if phase.unsent > 0 { format!(", {} scheduled but never sent", phase.unsent) } else { String::new() },
            )?;
            if phase.pacing == "open" {
                writeln!(
                    f,
                    "  sent after their intended start by p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs (in the latencies)",
                    phase.send_lag_p50_us, phase.send_lag_p99_us, phase.send_lag_max_us
                )?;
            }
            writeln!(
                f,
                "  {:<18} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}",
                "op", "count", "ops/s", "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs", "missing", "errors"
            )?;
            for o in &phase.ops {
                writeln!(
                    f,
                    "  {:<18} {:>10} {:>10.0} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>8} {:>8}",
                    o.op, o.count, o.ops_per_s, o.p50_us, o.p90_us, o.p99_us, o.p999_us, o.max_us, o.missing, o.errors
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_counts_answers_misses_and_errors_apart() {
        let mut tally = Tally::new();
        (0..98).for_each(|_| tally.record(OpKind::Read, Outcome::Done, Duration::from_micros(100)));
        tally.record(OpKind::Read, Outcome::Missing, Duration::from_millis(10));
        tally.record(OpKind::Update, Outcome::Failed("ERR x".into()), Duration::from_millis(1));
        tally.record(OpKind::Update, Outcome::Done, Duration::from_millis(2));
        let run =
            PhaseRun { phase: "run", target_ops_per_s: None, clients: 2, took: Duration::from_secs(2), unsent: 0 };
        let phase = PhaseFigures::new(run, tally);
        assert_eq!((phase.operations, phase.errors, phase.ops_per_s, phase.pacing), (100, 1, 50.0, "closed"));
        let read = &phase.ops[0];
        assert_eq!((read.op, read.count, read.missing, read.errors), ("READ", 99, 1, 0));
        assert!((read.p50_us - 100.0).abs() < 1.0 && (read.max_us - 10_000.0).abs() < 10.0);
        assert_eq!((phase.ops[1].op, phase.ops[1].first_error.as_deref()), ("UPDATE", Some("ERR x")));

        let report = YcsbReport {
            addrs: vec!["127.0.0.1:6379".into()],
            protocol: Protocol::Resp,
            db: None,
            workload: Workload::preset('a').unwrap(),
            pipeline: 1,
            threads: 1,
            phases: vec![phase],
        };
        let csv = report.csv();
        assert_eq!(csv.lines().next(), Some(CSV_HEADER));
        assert!(csv.lines().nth(1).unwrap().starts_with("run,READ,99,1,0,49.5,"), "{csv}");
        assert_eq!(report.errors(), (1, Some("ERR x")));
        assert!(report.to_string().lines().any(|l| l.trim_start().starts_with("UPDATE")), "{report}");
    }
}
