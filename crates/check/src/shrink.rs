//! Shrinks a non-linearizable set of operations on one key to a small subset that is still not linearizable.
//!
//! Removal is greedy, in chunks of halving size (delta debugging) so long histories lose large irrelevant stretches
//! in few checks, and ends with single-operation passes repeated until none succeeds, so the result is 1-minimal:
//! removing any one remaining operation, together with the operations that depend on it, makes it linearizable.
//!
//! Removing a write also removes every operation that could have read from it (see [`crate::sources`]). Without
//! that, a stale read would shrink to the lone get, "wrong" only because its write was removed. With it, the subset
//! always contains every write its operations could have read from, so any linearization of the full history would
//! restrict to one of the subset: the subset being non-linearizable proves the full history is not linearizable
//! either.

use crate::history::Op;
use crate::linearizable::Budget;
use crate::prepare::prepare;
use crate::search::{search, Outcome};
use crate::sources::Sources;

/// The operations kept (indices into the key's operations) and whether shrinking finished within its budget.
pub(crate) struct Shrunk {
    pub(crate) kept: Vec<usize>,
    pub(crate) minimal: bool,
}

/// Shrinks `start` (indices into `ops`, ordered by invocation, together not linearizable).
pub(crate) fn shrink(ops: &[&Op], start: Vec<usize>, budget: Budget) -> Shrunk {
    let sources = Sources::new(ops, &start);
    let mut shrinker =
        Shrinker { ops, sources, per_trial: budget.states_per_key, remaining: budget.shrink_states, minimal: true };
    let kept = shrinker.run(start);
    Shrunk { kept, minimal: shrinker.minimal }
}

struct Shrinker<'a> {
    ops: &'a [&'a Op],
    sources: Sources,
    per_trial: usize,
    /// States the remaining trials may explore in total.
    remaining: usize,
    /// False once a trial was cut short or skipped, so an allowed removal may have been missed.
    minimal: bool,
}

impl Shrinker<'_> {
    fn run(&mut self, mut kept: Vec<usize>) -> Vec<usize> {
        let mut chunk = (kept.len() / 2).max(1);
        loop {
            let changed = self.pass(&mut kept, chunk);
            if self.remaining == 0 {
                self.minimal = false;
                return kept;
            }
            if chunk == 1 && !changed {
                return kept;
            }
            chunk = (chunk / 2).max(1);
        }
    }

    /// Tries removing each run of `chunk` consecutive operations in turn; returns whether any removal stuck.
    fn pass(&mut self, kept: &mut Vec<usize>, chunk: usize) -> bool {
        let mut changed = false;
        let mut start = 0;
        while start < kept.len() && self.remaining > 0 {
            let end = (start + chunk).min(kept.len());
            let candidate = self.without(kept, &kept[start..end]);
            if self.still_violates(&candidate) {
                *kept = candidate;
                changed = true;
            } else {
                start = end;
            }
        }
        changed
    }

    /// `kept` without `chunk` and, transitively, without every observer that depends on a removed write.
    fn without(&self, kept: &[usize], chunk: &[usize]) -> Vec<usize> {
        let mut removed = vec![false; self.ops.len()];
        let mut pending = chunk.to_vec();
        while let Some(op) = pending.pop() {
            if !std::mem::replace(&mut removed[op], true) {
                pending.extend_from_slice(self.sources.dependents(op));
            }
        }
        kept.iter().copied().filter(|&i| !removed[i]).collect()
    }

    fn still_violates(&mut self, subset: &[usize]) -> bool {
        let ops: Vec<&Op> = subset.iter().map(|&i| self.ops[i]).collect();
        let searched = search(&prepare(&ops), self.per_trial.min(self.remaining));
        self.remaining = self.remaining.saturating_sub(searched.states);
        match searched.outcome {
            Outcome::Violation => true,
            Outcome::Linearizable => false,
            Outcome::Exhausted => {
                self.minimal = false;
                false
            }
        }
    }
}
