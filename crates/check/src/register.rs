//! The sequential specification every key must satisfy: a register that starts absent, where put sets a value,
//! delete clears it, get returns the current value and cas replaces it only if it equals the expected value.
//!
//! Values are interned to small integers so the search compares and hashes register states as integers.

use std::collections::{HashMap, HashSet};

/// An interned register value; [`ABSENT`] is the empty register.
pub(crate) type Value = u32;

pub(crate) const ABSENT: Value = 0;

/// Every value that no operation observes (no get returned it, no cas expected it). Nothing can tell such values
/// apart, since every get and cas fails on all of them alike, so merging them loses nothing and makes orders of
/// writes that differ only in which unobserved value they leave behind reach the same state.
pub(crate) const UNOBSERVED: Value = 1;

/// Assigns each distinct observed string a [`Value`], with `None` mapped to [`ABSENT`].
pub(crate) struct Interner<'a> {
    observed: HashSet<Option<&'a str>>,
    ids: HashMap<&'a str, Value>,
}

impl<'a> Interner<'a> {
    pub(crate) fn new(observed: HashSet<Option<&'a str>>) -> Interner<'a> {
        Interner { observed, ids: HashMap::new() }
    }

    pub(crate) fn intern(&mut self, value: Option<&'a str>) -> Value {
        let Some(text) = value else { return ABSENT };
        if !self.observed.contains(&value) {
            return UNOBSERVED;
        }
        let next = Value::try_from(self.ids.len() + 2).expect("fewer than 2^32 distinct values per key");
        *self.ids.entry(text).or_insert(next)
    }
}

/// What an operation does to the register when it is linearized.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    /// Put (`Write(v)`) or delete (`Write(ABSENT)`).
    Write(Value),
    /// A get that returned this value.
    Read(Value),
    /// A cas that applies (and can only be linearized) where the register holds `expected`.
    Cas { expected: Value, new: Value },
}

impl Action {
    /// The register's state after this action, or `None` if the action cannot happen in `state`.
    pub(crate) fn apply(self, state: Value) -> Option<Value> {
        match self {
            Action::Write(new) => Some(new),
            Action::Read(seen) => (seen == state).then_some(state),
            Action::Cas { expected, new } => (expected == state).then_some(new),
        }
    }

    /// The value this action leaves in the register when it applies, if it writes one.
    pub(crate) fn written(self) -> Option<Value> {
        match self {
            Action::Write(new) | Action::Cas { new, .. } => Some(new),
            Action::Read(_) => None,
        }
    }

    /// The same action writing `value` instead (a write's or a cas's new value); a read is unchanged.
    pub(crate) fn with_written(self, value: Value) -> Action {
        match self {
            Action::Write(_) => Action::Write(value),
            Action::Cas { expected, .. } => Action::Cas { expected, new: value },
            read @ Action::Read(_) => read,
        }
    }

    /// The value this action requires the register to hold, if any.
    pub(crate) fn observed(self) -> Option<Value> {
        match self {
            Action::Write(_) => None,
            Action::Read(seen) => Some(seen),
            Action::Cas { expected, .. } => Some(expected),
        }
    }
}
