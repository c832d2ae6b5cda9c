//! For each operation that observes the register (a get, a cas), the writes it could have read from.
//!
//! Shrinking never keeps an observer without these writes, which is what makes a shrunk counterexample
//! trustworthy: any linearization of the whole history restricted to the subset would still be one, so the subset
//! failing proves the whole history fails.
//!
//! The writes an observer `o` reads from in some linearization are among its *possible sources*: writes of the value
//! it observed that were invoked no later than `o` completed, and that no completed write was forced in between
//! (one invoked after the source completed and completing before `o` was invoked). Requiring every write of the
//! value would also be sound, but every delete writes "absent", so any get of an absent key would drag in every
//! delete of the history. The latest write of the value invoked before `o` completed is added even when it is not
//! a possible source, because it is what a stale read must be shown next to: without it a stale read would shrink
//! to the lone get.

use crate::dataflow::{observed, written};
use crate::history::Op;
use std::collections::HashMap;

/// `dependents[w]` lists the observers that must be removed along with write `w`; indices are into the key's ops.
pub(crate) struct Sources {
    dependents: Vec<Vec<usize>>,
}

impl Sources {
    /// Relates the `participants` (indices into `ops`: the operations that entered the search).
    pub(crate) fn new(ops: &[&Op], participants: &[usize]) -> Sources {
        let mut writers: HashMap<Option<&str>, Vec<usize>> = HashMap::new();
        for &w in participants {
            if let Some(value) = written(ops[w]) {
                writers.entry(value).or_default().push(w);
            }
        }
        let forced = ForcedWrites::new(ops, participants);
        let mut dependents = vec![Vec::new(); ops.len()];
        for &o in participants {
            let Some(candidates) = observed(ops[o]).and_then(|value| writers.get(&value)) else { continue };
            for w in sources_of(ops, o, candidates, &forced) {
                dependents[w].push(o);
            }
        }
        Sources { dependents }
    }

    pub(crate) fn dependents(&self, write: usize) -> &[usize] {
        &self.dependents[write]
    }
}

/// The possible sources of observer `o` among `candidates` (the writes of its value), plus the latest candidate.
fn sources_of(ops: &[&Op], o: usize, candidates: &[usize], forced: &ForcedWrites) -> Vec<usize> {
    let completed = ops[o].complete_ns.unwrap_or(u64::MAX);
    let overwritten_before = forced.latest_invoke_before(ops[o].invoke_ns);
    let before: Vec<usize> = candidates.iter().copied().filter(|&w| w != o && ops[w].invoke_ns <= completed).collect();
    let latest = before.iter().copied().max_by_key(|&w| (ops[w].invoke_ns, w));
    let possible = before
        .iter()
        .copied()
        .filter(|&w| ops[w].complete_ns.is_none_or(|c| overwritten_before.is_none_or(|x| c >= x)));
    possible.chain(latest).collect()
}

/// Completed writes, to find the latest invocation among those that completed before a given time: a write that
/// completed before that invocation is certainly overwritten by then.
struct ForcedWrites {
    /// (completion, latest invocation among writes completing at or before it), by completion.
    by_completion: Vec<(u64, u64)>,
}

impl ForcedWrites {
    fn new(ops: &[&Op], participants: &[usize]) -> ForcedWrites {
        let mut completed: Vec<(u64, u64)> = participants
            .iter()
            .filter(|&&w| written(ops[w]).is_some())
            .filter_map(|&w| ops[w].complete_ns.map(|complete| (complete, ops[w].invoke_ns)))
            .collect();
        completed.sort_unstable();
        let mut latest = 0;
        let by_completion = completed
            .into_iter()
            .map(|(complete, invoke)| {
                latest = latest.max(invoke);
                (complete, latest)
            })
            .collect();
        ForcedWrites { by_completion }
    }

    /// The latest invocation of a completed write that completed strictly before `time`, if any.
    fn latest_invoke_before(&self, time: u64) -> Option<u64> {
        let count = self.by_completion.partition_point(|&(complete, _)| complete < time);
        count.checked_sub(1).map(|last| self.by_completion[last].1)
    }
}
