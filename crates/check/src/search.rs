//! The Wing–Gong linearizability search with Lowe's improvements, as in Porcupine, for one key.
//!
//! Walking the [`Timeline`] from its head, each call event whose operation the register allows in the current
//! state is tentatively linearized: it is lifted out of the list and the walk restarts. Reaching a return event
//! means an operation that must already have taken effect has not, so the last choice is undone (backtracking).
//! A configuration (linearized set, register state) is explored at most once, since what can follow depends on
//! nothing else; one seen before and not on the current path has already failed.
//!
//! Operations with an unknown outcome have no return event, so nothing ever waits for them. Once the walk reaches
//! the end of the list, every operation with a return event has been linearized and the only ones left are
//! unknown-outcome writes, which are simply omitted: that is success. Porcupine instead gives such operations an
//! infinite return time and linearizes them at the very end, which equals omission for put and delete (nothing
//! observes the final state) but not for cas: an unknown cas whose expected value is not the final value could
//! not be placed last, and a history where it never applied would be wrongly rejected.
//!
//! Three reductions keep failing searches, which must exhaust every configuration, from exploding. Each only
//! discards orders when another order that is still explored completes whenever they do:
//!
//! - Eager gets ([`Search::arrive`]): a get that may take effect now is linearized without trying alternatives.
//! - Unknown writes must be observed at once ([`Search::allowed`]): an unknown write is only ever followed directly by an operation that
//!   observes its value (a get returning it, a cas expecting it). In any linearization, whatever directly follows
//!   an unknown write either observes its value or is a blind write (or nothing): anything else would see the
//!   wrong value. In the latter case the unknown write can be dropped without changing what anyone sees, and
//!   dropping is allowed for unknown outcomes. So an unknown write never sits in the linearized set "just in
//!   case", which would double the configurations for every one pending.
//! - Identical unknown writes are used in invocation order ([`twins`]): of two unknown operations with the same action, the
//!   later-invoked one may only be linearized once the earlier one is. Swapping them in any linearization keeps it
//!   valid (neither has a return time, and the earlier-invoked one has fewer operations that must precede it), so
//!   which of them took effect does not matter, only how many did. Without this, every unknown delete (all of which
//!   write "absent") would double the configurations for the rest of the history.

use crate::fingerprint::{op_key, state_key, Visited};
use crate::prepare::Call;
use crate::register::{Action, Value, ABSENT, UNOBSERVED};
use crate::timeline::{Event, Timeline};
use std::collections::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Linearizable,
    Violation,
    /// More than the allowed number of states was needed; nothing is known.
    Exhausted,
}

/// How a search ended and how many distinct configurations it explored.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Searched {
    pub(crate) outcome: Outcome,
    pub(crate) states: usize,
}

/// Decides whether `calls` can be linearized, exploring at most about `max_states` distinct configurations.
pub(crate) fn search(calls: &[Call], max_states: usize) -> Searched {
    let mut search = Search::new(calls, max_states);
    let outcome = search.walk().unwrap_or(Outcome::Exhausted);
    Searched { outcome, states: search.visited.len() }
}

/// The register as the search sees it.
#[derive(Clone, Copy)]
struct State {
    value: Value,
    /// The last operation was an unknown write, so the next must observe `value`.
    must_observe: bool,
}

/// A linearized call: its node in the timeline, the state before it, whether it was an eager get, and how many
/// operations the search had counted dead before it (see [`Search::dead_after`]).
struct Choice {
    node: usize,
    op: usize,
    before: State,
    eager: bool,
    dead_before: usize,
}

/// The search needed more configurations than allowed.
struct Exhausted;

/// Where the walk goes next.
enum Step {
    /// Continue scanning at this node, or succeed at the end of the list.
    Scan(Option<usize>),
    /// The current configuration cannot be completed.
    Backtrack,
}

struct Search<'a> {
    calls: &'a [Call],
    op_keys: Vec<u128>,
    timeline: Timeline,
    visited: Visited,
    max_states: usize,
    choices: Vec<Choice>,
    state: State,
    /// XOR of the keys of the linearized operations.
    linearized: u128,
    /// Which operations are linearized.
    done: Vec<bool>,
    /// For each unknown operation, the previous identical one, which must be linearized first.
    twin_before: Vec<Option<usize>>,
    /// By value: the unknown operations that observe it, if exactly one operation writes it.
    dead_after: Vec<Vec<usize>>,
    /// Unknown operations counted as linearized because they can no longer be, most recent last.
    dead: Vec<usize>,
}

impl<'a> Search<'a> {
    fn new(calls: &'a [Call], max_states: usize) -> Search<'a> {
        Search {
            calls,
            op_keys: (0..calls.len()).map(op_key).collect(),
            timeline: Timeline::new(calls),
            visited: Visited::default(),
            max_states,
            choices: Vec::new(),
            state: State { value: ABSENT, must_observe: false },
            linearized: 0,
            done: vec![false; calls.len()],
            twin_before: twins(calls),
            dead_after: dead_after(calls),
            dead: Vec::new(),
        }
    }

    fn walk(&mut self) -> Result<Outcome, Exhausted> {
        let mut step = self.arrive()?;
        loop {
            step = match step {
                Step::Scan(None) => return Ok(Outcome::Linearizable),
                Step::Scan(Some(node)) => self.visit(node)?,
                Step::Backtrack => match self.backtrack() {
                    Some(undone) => Step::Scan(self.timeline.next(undone)),
                    None => return Ok(Outcome::Violation),
                },
            };
        }
    }

    fn visit(&mut self, node: usize) -> Result<Step, Exhausted> {
        match self.timeline.event(node) {
            Event::Return => Ok(Step::Backtrack),
            Event::Call { op, .. } => {
                if self.allowed(op) && self.try_linearize(node, op, false)? {
                    self.arrive()
                } else {
                    Ok(Step::Scan(self.timeline.next(node)))
                }
            }
        }
    }

    /// Whether `op` may come next: only an observer of the current value right after an unknown write, and an
    /// unknown operation only after its identical twins invoked before it.
    fn allowed(&self, op: usize) -> bool {
        let observes = !self.state.must_observe || self.calls[op].action.observed() == Some(self.state.value);
        observes && self.twin_before[op].is_none_or(|twin| self.done[twin])
    }

    /// Entering a new configuration: linearize a get that may take effect now, if there is one, without trying
    /// alternatives. If any order completes the history, one starts with that get: the get leaves the register
    /// unchanged, observes whatever an unknown write just wrote, and nothing still pending must precede it in real
    /// time (its call comes before every remaining return), so it can be moved to the front. This removes the
    /// blow-up from concurrent gets, whose subsets would otherwise each be a distinct configuration.
    fn arrive(&mut self) -> Result<Step, Exhausted> {
        loop {
            let Some((node, op)) = self.enabled_read() else { return Ok(Step::Scan(self.timeline.first())) };
            // The get's successor was visited before and, as the search is still running, failed; then so does
            // this configuration, since it can only be completed through that successor.
            if !self.try_linearize(node, op, true)? {
                return Ok(Step::Backtrack);
            }
        }
    }

    /// The first get that may be linearized next and returned the register's current value.
    fn enabled_read(&self) -> Option<(usize, usize)> {
        let mut cursor = self.timeline.first();
        while let Some(node) = cursor {
            let Event::Call { op, .. } = self.timeline.event(node) else { return None };
            if matches!(self.calls[op].action, Action::Read(seen) if seen == self.state.value) {
                return Some((node, op));
            }
            cursor = self.timeline.next(node);
        }
        None
    }

    /// Linearizes `op` next if the register allows it and the resulting configuration is new.
    fn try_linearize(&mut self, node: usize, op: usize, eager: bool) -> Result<bool, Exhausted> {
        let call = self.calls[op];
        let Some(value) = call.action.apply(self.state.value) else { return Ok(false) };
        let after = State { value, must_observe: call.deadline.is_none() };
        let gone = self.state.value;
        let dying = if value != gone { self.dead_after.get(gone as usize).map_or(0, Vec::len) } else { 0 };
        let pending = |i: usize| Some(self.dead_after[gone as usize][i]).filter(|&d| d != op && !self.done[d]);
        let dead_keys = (0..dying).filter_map(pending).fold(0, |keys, d| keys ^ self.op_keys[d]);
        let linearized = self.linearized ^ self.op_keys[op] ^ dead_keys;
        if !self.visited.insert(linearized ^ state_key(after.value, after.must_observe)) {
            return Ok(false);
        }
        if self.visited.len() > self.max_states {
            return Err(Exhausted);
        }
        self.choices.push(Choice { node, op, before: self.state, eager, dead_before: self.dead.len() });
        self.state = after;
        self.linearized = linearized;
        self.done[op] = true;
        self.timeline.lift(node);
        for i in 0..dying {
            let d = self.dead_after[gone as usize][i];
            if d != op && !self.done[d] {
                self.done[d] = true;
                self.timeline.lift(self.timeline.call_of(d));
                self.dead.push(d);
            }
        }
        Ok(true)
    }

    /// Undoes choices up to and including the latest one made by scanning, and returns its node, from which the
    /// scan continues. Eager gets are undone without resuming their scan: their failure dooms the configuration
    /// they were taken in (see [`Search::arrive`]). `None` if no choice is left.
    fn backtrack(&mut self) -> Option<usize> {
        loop {
            let choice = self.choices.pop()?;
            // Relinked in the reverse order of lifting, so the list comes back exactly.
            while self.dead.len() > choice.dead_before {
                let d = self.dead.pop().expect("above the choice's mark");
                self.done[d] = false;
                self.linearized ^= self.op_keys[d];
                self.timeline.unlift(self.timeline.call_of(d));
            }
            self.state = choice.before;
            self.linearized ^= self.op_keys[choice.op];
            self.done[choice.op] = false;
            self.timeline.unlift(choice.node);
            if !choice.eager {
                return Some(choice.node);
            }
        }
    }
}

/// For each value written by exactly one operation (not [`ABSENT`], which every delete writes and the register
/// starts as, nor [`UNOBSERVED`]), the unknown operations that observe it. Once the register leaves such a value it
/// never holds it again, so those operations can never be linearized and constrain nothing (they have no return
/// event): the search counts them as linearized, so configurations that differ only in whether one of them took
/// effect while it could are one configuration. In a cache keyspace, where every value may vanish (an unknown
/// delete of it), that is the difference between 2^n configurations and one.
fn dead_after(calls: &[Call]) -> Vec<Vec<usize>> {
    let values = calls.iter().flat_map(|c| [c.action.written(), c.action.observed()]).flatten().max().unwrap_or(0);
    let mut writers = vec![0usize; values as usize + 1];
    calls.iter().filter_map(|c| c.action.written()).for_each(|v| writers[v as usize] += 1);
    let mut dead_after = vec![Vec::new(); values as usize + 1];
    for (op, call) in calls.iter().enumerate().filter(|(_, c)| c.deadline.is_none()) {
        let single = |v: &Value| *v != ABSENT && *v != UNOBSERVED && writers[*v as usize] == 1;
        if let Some(v) = call.action.observed().filter(single) {
            dead_after[v as usize].push(op);
        }
    }
    dead_after
}

/// Links each unknown operation to the previous unknown one (in invocation order) with the same action.
fn twins(calls: &[Call]) -> Vec<Option<usize>> {
    let mut unknown: Vec<usize> = (0..calls.len()).filter(|&op| calls[op].deadline.is_none()).collect();
    unknown.sort_by_key(|&op| (calls[op].invoke, op));
    let mut latest: HashMap<Action, usize> = HashMap::new();
    let mut twin_before = vec![None; calls.len()];
    for op in unknown {
        twin_before[op] = latest.insert(calls[op].action, op);
    }
    twin_before
}
