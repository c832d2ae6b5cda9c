//! The evidence for a violation: a small set of operations on one key that no register could have produced.

use crate::dataflow::{observed, written};
use crate::history::{Op, OpKind};
use std::fmt;

/// Operations on `key` that are not linearizable, shrunk from the full history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counterexample {
    pub key: String,
    /// The shrunk subset, ordered by invocation time.
    pub ops: Vec<Op>,
    pub explanation: String,
    /// Whether shrinking completed, making `ops` 1-minimal; false if the shrink budget ran out first.
    pub minimal: bool,
}

impl Counterexample {
    /// Builds the counterexample for `ops` (in any order), explaining what is wrong with them.
    pub(crate) fn new(key: &str, mut ops: Vec<Op>, minimal: bool) -> Counterexample {
        ops.sort_by_key(|op| (op.invoke_ns, op.process, op.complete_ns));
        let mut explanation = explain(&ops);
        if !minimal {
            explanation.push_str(" (shrinking stopped at its budget, so a smaller subset may exist)");
        }
        Counterexample { key: key.to_string(), ops, explanation, minimal }
    }
}

/// Names a value nothing wrote when there is one, the most direct kind of violation; otherwise states the
/// general finding, which shrinking made trustworthy (see [`crate::shrink`]). The subset keeps the latest write of
/// every observed value begun before its observer completed, so a value without a writer here had none at all.
fn explain(ops: &[Op]) -> String {
    let writes: Vec<Option<&str>> = ops.iter().filter_map(written).collect();
    let unwritten = ops.iter().find_map(|op| match observed(op) {
        Some(Some(value)) if !writes.contains(&Some(value)) => Some((op, value)),
        _ => None,
    });
    match unwritten {
        Some((op, value)) => {
            let verb = if op.op == OpKind::Cas { "expected" } else { "returned" };
            format!(
                "process {}'s {} {verb} {value:?}, but no write of {value:?} on this key that could have taken effect \
                 began before the {} completed",
                op.process, op.op, op.op
            )
        }
        None => "no order of these operations is consistent with a register and with real time; they include every \
                 write their reads could have read from, so the whole history is not linearizable either"
            .to_string(),
    }
}

impl fmt::Display for Counterexample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "key {:?}: {} operations that are not linearizable", self.key, self.ops.len())?;
        for op in &self.ops {
            writeln!(f, "  {}", OpLine(op))?;
        }
        write!(f, "{}", self.explanation)
    }
}

/// One operation as a line: process, kind, value(s), outcome, and [invoke, complete] in milliseconds.
struct OpLine<'a>(&'a Op);

impl fmt::Display for OpLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = self.0;
        write!(f, "process {} {} {}", op.process, op.op, Nullable(op.value.as_deref()))?;
        if op.op == OpKind::Cas {
            write!(f, " expected {}", Nullable(op.expected.as_deref()))?;
        }
        let ok = op.ok.map_or("unknown".to_string(), |ok| ok.to_string());
        let complete = op.complete_ns.map_or("?".to_string(), millis);
        write!(f, " ok={ok} [{}, {complete}]", millis(op.invoke_ns))
    }
}

/// A value as in the JSON format: quoted, or `null`.
struct Nullable<'a>(Option<&'a str>);

impl fmt::Display for Nullable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(value) => write!(f, "{value:?}"),
            None => f.write_str("null"),
        }
    }
}

/// Nanoseconds as milliseconds with three decimals, in integer arithmetic so large times stay exact.
fn millis(ns: u64) -> String {
    format!("{}.{:03} ms", ns / 1_000_000, ns / 1_000 % 1_000)
}
