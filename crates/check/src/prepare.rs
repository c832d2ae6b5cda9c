//! Turns one key's recorded operations into the calls the search must (or may) linearize.
//!
//! - `ok:false` operations certainly had no effect, so they are dropped.
//! - `ok:null` gets are dropped: their result is unknown, so they constrain nothing.
//! - Present reads are left out of the search. One could be satisfied by any write of a value, so every unknown
//!   write of a value nothing else observes would have to stay in the search for it, which multiplies the
//!   configurations a failing search must exhaust by the number of such writes (past a 4 M-state budget in a
//!   5,000-operation history with 7% present reads). [`crate::present_violations`] judges them instead.
//! - `ok:null` writes (put, delete, cas) get no deadline: each may be linearized anywhere after its invocation, or
//!   left out entirely (see [`crate::search`] for how omission is modelled).
//! - An `ok:null` write whose value no remaining operation observes (no get returned it, no cas expected it) is
//!   dropped as well. Omitting it is always allowed, and it can never help: in any linearization that includes it,
//!   nothing between it and the next write reads its value, so removing it leaves every other operation seeing
//!   the same value. Dropping it keeps the search from doubling its states for every such write.
//! - An `ok:null` write of a value that one other `ok:null` operation alone observes, a cas from that value, is
//!   fused with it ([`fuse`]): the pair becomes one unknown write of the cas's new value, invoked when the later
//!   of the two was. In a cache keyspace every put stands beside an unknown delete of its value (an eviction);
//!   unfused, each unknown put is kept for its eviction's sake and doubles the configurations.

use crate::dataflow::{observed, written};
use crate::history::{Op, OpKind};
use crate::register::{Action, Interner, Value, ABSENT};
use std::collections::{BTreeMap, HashSet};

/// One operation as the search sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Call {
    /// Index of the operation in the slice passed to [`prepare`].
    pub(crate) source: usize,
    pub(crate) action: Action,
    pub(crate) invoke: u64,
    /// When the operation returned; `None` for an unknown outcome, which may be linearized late or never.
    pub(crate) deadline: Option<u64>,
    /// The source of the operation this call was fused with ([`fuse`]), if any.
    pub(crate) fused: Option<usize>,
}

/// The calls for one key's (already validated) operations.
pub(crate) fn prepare(ops: &[&Op]) -> Vec<Call> {
    let effective: Vec<usize> = (0..ops.len()).filter(|&i| may_take_effect(ops[i])).collect();
    let observed: HashSet<Option<&str>> = effective.iter().filter_map(|&i| observed(ops[i])).collect();
    let relevant = |op: &Op| op.ok.is_some() || written(op).is_some_and(|value| observed.contains(&value));
    let kept: Vec<usize> = effective.into_iter().filter(|&i| relevant(ops[i])).collect();
    let mut interner = Interner::new(observed);
    let calls = kept
        .into_iter()
        .filter_map(|source| {
            let op = ops[source];
            let action = action(op, &mut interner)?;
            Some(Call { source, action, invoke: op.invoke_ns, deadline: op.complete_ns, fused: None })
        })
        .collect();
    fuse(calls)
}

/// Fuses each unknown write `w` of a value `v` (`v` not absent) with the unknown cas `c` from `v` that is the only
/// operation observing `v`, when `w` is the only one writing it. In any linearization where `c` takes effect, `w`
/// comes right before it: the register holds `v` only after `w`, nothing but `c` can tell, and any other write in
/// between would leave `c` unable to apply. So `w; c` is one write of `c`'s new value where `c` stands, which may be
/// anywhere after both were invoked. Where `c` does not take effect, `w` writes a value nothing observes, which
/// changes nothing anyone sees (as for the writes dropped above). A fused write that leaves the value it requires
/// (a cas from absent fused with a delete) changes nothing and goes too.
fn fuse(mut calls: Vec<Call>) -> Vec<Call> {
    let mut writers: BTreeMap<Value, Vec<usize>> = BTreeMap::new();
    let mut observers: BTreeMap<Value, Vec<usize>> = BTreeMap::new();
    for (i, call) in calls.iter().enumerate() {
        call.action.written().into_iter().for_each(|v| writers.entry(v).or_default().push(i));
        call.action.observed().into_iter().for_each(|v| observers.entry(v).or_default().push(i));
    }
    let mut gone = vec![false; calls.len()];
    for (&v, watching) in observers.iter().filter(|(&v, w)| v != ABSENT && w.len() == 1) {
        let (c, Some(&[w])) = (watching[0], writers.get(&v).map(Vec::as_slice)) else { continue };
        let Action::Cas { new, .. } = calls[c].action else { continue };
        // Each call takes part in one fusion at most: chains of them stay as they are.
        let taken = |i: usize| gone[i] || calls[i].fused.is_some();
        if w == c || calls[c].deadline.is_some() || calls[w].deadline.is_some() || taken(w) || taken(c) {
            continue;
        }
        let (invoke, source) = (calls[c].invoke, calls[c].source);
        let fused = &mut calls[w];
        fused.action = fused.action.with_written(new);
        fused.invoke = fused.invoke.max(invoke);
        fused.fused = Some(source);
        gone[c] = true;
        gone[w] = fused.action.observed() == Some(new);
    }
    calls.into_iter().zip(gone).filter(|(_, gone)| !gone).map(|(call, _)| call).collect()
}

/// Whether the operation may have taken effect and, if it did, whether we know what it did.
fn may_take_effect(op: &Op) -> bool {
    let unknown_get = op.ok.is_none() && op.op == OpKind::Get;
    op.ok != Some(false) && !unknown_get
}

/// What the operation does to the register, or `None` for a present read, which the search leaves out.
fn action<'a>(op: &'a Op, interner: &mut Interner<'a>) -> Option<Action> {
    let value = interner.intern(op.value.as_deref());
    Some(match op.op {
        OpKind::Put | OpKind::Delete => Action::Write(value),
        OpKind::Get => Action::Read(value),
        OpKind::Cas => Action::Cas { expected: interner.intern(op.expected.as_deref()), new: value },
        OpKind::Present => return None,
    })
}
