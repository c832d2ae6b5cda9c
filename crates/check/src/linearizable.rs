//! The checker's entry point: is a history linearizable, treating each key as an independent register?
//!
//! Linearizability is compositional (Herlihy and Wing), so a history is linearizable exactly when each key's
//! sub-history is; checking keys separately keeps the search small. Keys are checked in sorted order so the verdict
//! and counterexample are deterministic.

use crate::counterexample::Counterexample;
use crate::history::{History, Op};
use crate::prepare::{prepare, Call};
use crate::search::{search, Outcome};
use crate::shrink::shrink;
use std::collections::BTreeMap;
use std::fmt;

/// How much work the checker may do before giving up with [`Verdict::Inconclusive`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Distinct search states (linearized set and register value) one key may explore; each costs about 16 to 40
    /// bytes of memory.
    pub states_per_key: usize,
    /// States all the trial checks of shrinking one counterexample may explore together.
    pub shrink_states: usize,
}

impl Default for Budget {
    /// Enough for thousands of operations per key from about ten concurrent processes, with room to spare.
    fn default() -> Budget {
        Budget { states_per_key: 4_000_000, shrink_states: 20_000_000 }
    }
}

/// The result of [`check`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every key is linearizable. `ops` counts the operations that constrained the check: all but `ok:false`
    /// ones, unknown-outcome gets, unknown-outcome writes whose value nothing observed, and present reads.
    Linearizable { keys: usize, ops: usize },
    /// A key is not linearizable; the first such key in sorted order, shrunk.
    Violation(Counterexample),
    /// No key is known to be violated, but `key` (the first in sorted order) could not be decided: its search
    /// exceeded the budget, or one of its operations is malformed.
    Inconclusive { key: String, reason: String },
}

impl Verdict {
    pub fn is_linearizable(&self) -> bool {
        matches!(self, Verdict::Linearizable { .. })
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Linearizable { keys, ops } => write!(f, "linearizable: {ops} operations on {keys} keys"),
            Verdict::Violation(counterexample) => write!(f, "not linearizable: {counterexample}"),
            Verdict::Inconclusive { key, reason } => write!(f, "inconclusive on key {key:?}: {reason}"),
        }
    }
}

/// Checks every key of `history` against the register model.
///
/// Every key is checked even after one turns out inconclusive, because a violation elsewhere is the more useful
/// answer; the first violation ends the check.
pub fn check(history: &History, budget: Budget) -> Verdict {
    if let Some((key, reason)) = malformed(history) {
        return Verdict::Inconclusive { key, reason };
    }
    let keys = by_key(history);
    let mut inconclusive = None;
    let mut checked = 0;
    for (key, ops) in &keys {
        let calls = prepare(ops);
        let searched = search(&calls, budget.states_per_key);
        match searched.outcome {
            Outcome::Linearizable => checked += calls.len(),
            Outcome::Violation => return Verdict::Violation(counterexample(key, ops, &calls, budget)),
            Outcome::Exhausted => {
                let reason = format!("search exceeded {} states", budget.states_per_key);
                inconclusive.get_or_insert(Verdict::Inconclusive { key: key.to_string(), reason });
            }
        }
    }
    inconclusive.unwrap_or(Verdict::Linearizable { keys: keys.len(), ops: checked })
}

/// The key of the first operation that breaks the format, and why: that key is undecidable rather than checked
/// under a guess.
pub(crate) fn malformed(history: &History) -> Option<(String, String)> {
    history.ops.iter().enumerate().find_map(|(index, op)| {
        op.validate().err().map(|err| (op.key.clone(), format!("operation {index} is malformed: {err}")))
    })
}

/// Each key's operations, keys in sorted order.
pub(crate) fn by_key(history: &History) -> BTreeMap<&str, Vec<&Op>> {
    let mut keys: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in &history.ops {
        keys.entry(op.key.as_str()).or_default().push(op);
    }
    keys
}

/// Shrinks the operations that took part in the failed search, in invocation order.
fn counterexample(key: &str, ops: &[&Op], calls: &[Call], budget: Budget) -> Counterexample {
    let mut start: Vec<usize> = calls.iter().flat_map(|call| std::iter::once(call.source).chain(call.fused)).collect();
    start.sort_by_key(|&source| (ops[source].invoke_ns, source));
    let shrunk = shrink(ops, start, budget);
    let kept = shrunk.kept.iter().map(|&source| ops[source].clone()).collect();
    Counterexample::new(key, kept, shrunk.minimal)
}
