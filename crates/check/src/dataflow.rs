//! Which value a recorded operation writes and which it observes, before interning.
//!
//! Preparation uses this to find the values nothing observes, shrinking to find the writes each observation could
//! have read from, and the explanation to spot a value nothing wrote. `Some(None)` is the absent value.

use crate::history::{Op, OpKind};

/// The value the operation stores if it takes effect, or `None` for a read.
pub(crate) fn written(op: &Op) -> Option<Option<&str>> {
    match op.op {
        OpKind::Put | OpKind::Cas => Some(op.value.as_deref()),
        OpKind::Delete => Some(None),
        OpKind::Get | OpKind::Present => None,
    }
}

/// The one value the register must hold for the operation to take effect, or `None` for a blind write and for a
/// present read (which any value but absent satisfies).
pub(crate) fn observed(op: &Op) -> Option<Option<&str>> {
    match op.op {
        OpKind::Get => Some(op.value.as_deref()),
        OpKind::Cas => Some(op.expected.as_deref()),
        OpKind::Put | OpKind::Delete | OpKind::Present => None,
    }
}
