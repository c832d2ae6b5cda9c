//! Building a [`History`] while operations run: record the invocation, then its completion when (if) it arrives.

use crate::history::{History, Op, OpKind};

/// Accumulates operations; anything never completed ends up with an unknown outcome.
#[derive(Debug, Default)]
pub struct Recorder {
    ops: Vec<Op>,
    completed: Vec<bool>,
}

impl Recorder {
    pub fn new() -> Recorder {
        Recorder::default()
    }

    /// Records that `process` invoked an operation at `now_ns`; returns the handle to pass to [`Recorder::complete`].
    ///
    /// `value` is the value to write (put, cas) and is ignored for a get, whose value comes from its completion.
    /// `expected` is the cas precondition and must be `None` for other kinds.
    pub fn invoke(
        &mut self,
        process: u64,
        kind: OpKind,
        key: impl Into<String>,
        value: Option<String>,
        expected: Option<String>,
        now_ns: u64,
    ) -> usize {
        let value = if kind == OpKind::Get { None } else { value };
        let op =
            Op { process, op: kind, key: key.into(), value, expected, ok: None, invoke_ns: now_ns, complete_ns: None };
        self.ops.push(op);
        self.completed.push(false);
        self.ops.len() - 1
    }

    /// Records the outcome of operation `idx`.
    ///
    /// `ok: None` means the client gave up without learning the outcome; the operation stays unknown and `now_ns`
    /// is not recorded, because an unknown operation may still take effect later. `value_for_get` is what a get
    /// returned and is ignored for other kinds.
    ///
    /// # Panics
    /// If `idx` was not returned by [`Recorder::invoke`] or was already completed: both are harness bugs that
    /// would otherwise produce a history that misstates what happened.
    pub fn complete(&mut self, idx: usize, ok: Option<bool>, value_for_get: Option<String>, now_ns: u64) {
        assert!(!std::mem::replace(&mut self.completed[idx], true), "operation {idx} completed twice");
        let op = &mut self.ops[idx];
        if op.op == OpKind::Get {
            op.value = value_for_get;
        }
        op.ok = ok;
        op.complete_ns = ok.map(|_| now_ns);
    }

    /// The value operation `idx` writes (a put, a cas), or a get returned.
    pub fn value_of(&self, idx: usize) -> Option<&str> {
        self.ops[idx].value.as_deref()
    }

    /// The history so far; operations still pending have unknown outcomes.
    pub fn finish(self) -> History {
        History { ops: self.ops }
    }
}
