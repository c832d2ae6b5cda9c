//! The history format: what clients asked a key-value store to do, what they were told, and when.
//!
//! A history is a list of [`Op`]s, stored as JSON lines (one operation per line, see [`History::read_jsonl`]):
//!
//! ```text
//! {"process":P,"op":"put|get|present|delete|cas","key":K,"value":V|null,"ok":true|false|null,"invoke_ns":T,"complete_ns":T|null}
//! ```
//!
//! A `present` line is a read that learned only that the key held some value, not which (a SCAN page that listed
//! the key); its `value` is always `null`. A read that found the key absent is a `get` of `null`.
//!
//! A `cas` line carries one more field, `"expected":V|null`: the value that must be current for the cas to apply
//! (`null` = the key must be absent). Other operations omit it. The meaning of each outcome:
//!
//! - `ok:true`: the operation took effect (a get returned `value`; a cas applied).
//! - `ok:false`: the operation certainly did not take effect (for a cas: it did not apply, or failed).
//! - `ok:null` with `complete_ns:null`: the outcome is unknown (timeout, crash); the operation may take effect at
//!   any time after `invoke_ns`, or never.

use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

/// Which register operation a client invoked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    Put,
    Get,
    /// A read that found the key present, with a value it did not learn.
    Present,
    Delete,
    Cas,
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpKind::Put => "put",
            OpKind::Get => "get",
            OpKind::Present => "present",
            OpKind::Delete => "delete",
            OpKind::Cas => "cas",
        })
    }
}

/// One operation as a client saw it.
///
/// `value`, `ok` and `complete_ns` must be present in JSON even when null: a missing `ok` silently read as
/// "unknown" would make the checker ignore a get, weakening the check without anyone noticing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Op {
    pub process: u64,
    pub op: OpKind,
    pub key: String,
    /// Put and cas: the value written (a cas writing `None` deletes). Get: the value returned (`None` = absent).
    /// Present and delete: always `None`.
    #[serde(deserialize_with = "nullable")]
    pub value: Option<String>,
    /// Cas only: the value that must be current for the cas to apply (`None` = the key must be absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// `Some(true)` took effect, `Some(false)` certainly did not, `None` unknown.
    #[serde(deserialize_with = "nullable")]
    pub ok: Option<bool>,
    pub invoke_ns: u64,
    /// `None` exactly when the outcome is unknown.
    #[serde(deserialize_with = "nullable")]
    pub complete_ns: Option<u64>,
}

/// Reads an `Option` that must be present (possibly as `null`); serde's default would accept a missing field.
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(deserializer: D) -> Result<Option<T>, D::Error> {
    Option::deserialize(deserializer)
}

/// Why an operation is not a valid history entry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpError {
    #[error("complete_ns {complete} is before invoke_ns {invoke}")]
    CompletesBeforeInvoke { invoke: u64, complete: u64 },
    #[error("ok is {ok} but complete_ns is null; a known outcome needs a completion time")]
    KnownOutcomeWithoutCompletion { ok: bool },
    #[error("ok is null (outcome unknown) but complete_ns is {complete}; an unknown outcome has no completion time")]
    UnknownOutcomeWithCompletion { complete: u64 },
    #[error("put has value null; a put must write a value")]
    PutWithoutValue,
    #[error("delete has a value; a delete's value must be null")]
    DeleteWithValue,
    #[error("present has a value; a present read learns no value, so its value must be null")]
    PresentWithValue,
    #[error("{kind} has an \"expected\" field; only cas takes one")]
    ExpectedOnNonCas { kind: OpKind },
}

impl Op {
    /// Checks the invariants the format promises beyond its JSON shape.
    pub fn validate(&self) -> Result<(), OpError> {
        match (self.ok, self.complete_ns) {
            (Some(ok), None) => return Err(OpError::KnownOutcomeWithoutCompletion { ok }),
            (None, Some(complete)) => return Err(OpError::UnknownOutcomeWithCompletion { complete }),
            (_, Some(complete)) if complete < self.invoke_ns => {
                return Err(OpError::CompletesBeforeInvoke { invoke: self.invoke_ns, complete })
            }
            _ => {}
        }
        match self.op {
            OpKind::Put if self.value.is_none() => Err(OpError::PutWithoutValue),
            OpKind::Delete if self.value.is_some() => Err(OpError::DeleteWithValue),
            OpKind::Present if self.value.is_some() => Err(OpError::PresentWithValue),
            kind if kind != OpKind::Cas && self.expected.is_some() => Err(OpError::ExpectedOnNonCas { kind }),
            _ => Ok(()),
        }
    }
}

/// Every operation clients performed during one run, in no particular order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    pub ops: Vec<Op>,
}
