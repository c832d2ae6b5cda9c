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

use crate::dataflow::{observed, written};
use crate::history::{Op, OpKind};
use crate::register::{Action, Interner};
use std::collections::HashSet;

/// One operation as the search sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Call {
    /// Index of the operation in the slice passed to [`prepare`].
    pub(crate) source: usize,
    pub(crate) action: Action,
    pub(crate) invoke: u64,
    /// When the operation returned; `None` for an unknown outcome, which may be linearized late or never.
    pub(crate) deadline: Option<u64>,
}

/// The calls for one key's (already validated) operations.
pub(crate) fn prepare(ops: &[&Op]) -> Vec<Call> {
    let effective: Vec<usize> = (0..ops.len()).filter(|&i| may_take_effect(ops[i])).collect();
    let observed: HashSet<Option<&str>> = effective.iter().filter_map(|&i| observed(ops[i])).collect();
    let relevant = |op: &Op| op.ok.is_some() || written(op).is_some_and(|value| observed.contains(&value));
    let kept: Vec<usize> = effective.into_iter().filter(|&i| relevant(ops[i])).collect();
    let mut interner = Interner::new(observed);
    kept.into_iter()
        .filter_map(|source| {
            let op = ops[source];
            let action = action(op, &mut interner)?;
            Some(Call { source, action, invoke: op.invoke_ns, deadline: op.complete_ns })
        })
        .collect()
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
