//! What a write does to its key and what its client is told, as `decide.rs` works them out from the
//! key's state: the [`Change`] every replica applies, and the [`Outcome`] (an [`Answer`], or a [`Refusal`])
//! that becomes the client's [`Reply`]. The chain carries both in its updates and re-exports them from
//! `chain::msg`; the encoding does not name where a type lives.

use bytes::Bytes;
use meridian_core::{ErrorKind, Reply};
use serde::{Deserialize, Serialize};

/// What an update does to its key; a put's value is as the datastore keeps it ([`meridian_core::Stored`]). `Skip` consumes a sequence number without changing data: a
/// conditional write whose condition failed still travels the chain, so its "not applied" answer comes
/// from the tail like every other write (answering from the head could expose an order the tail has
/// not committed yet).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Change {
    Put(Bytes),
    Delete,
    Skip,
}

/// The result the head computed when it ordered the write; the tail returns it to the client. It travels
/// with the update because only the head sees the key's state before the write: a member that becomes the
/// tail answers again from what it holds, which already includes the write.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub applied: bool,
    pub existed: bool,
    pub answer: Answer,
}

/// What the client is told besides whether the write applied.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Answer {
    /// Only the outcome (SET, DEL, EXPIRE, …).
    #[default]
    Outcome,
    /// The key's value before the write (SET … GET, GETDEL).
    Old(Option<Bytes>),
    /// INCR's new value, APPEND's new length.
    Integer(i64),
    /// The write was refused against the key's value, and changed nothing.
    Refused(Refusal),
    /// INCRBYFLOAT's new value, as written.
    Bulk(Bytes),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refusal {
    NotAnInteger,
    Overflow,
    /// APPEND or HSET would make the value longer than the node's value limit.
    TooLong {
        limit: u64,
    },
    /// A string command on a hash, or a hash command on a string.
    WrongType,
    /// The key's stored hash cannot be decoded.
    Damaged,
    /// INCRBYFLOAT of a value that is not a number.
    NotAFloat,
    /// HINCRBY of a field that is not an integer.
    FieldNotAnInteger,
    /// HINCRBYFLOAT of a field that is not a number.
    FieldNotAFloat,
    /// INCRBYFLOAT or HINCRBYFLOAT would make the value infinite or not a number.
    NanOrInfinity,
    /// RENAME or RENAMENX of an absent key.
    NoSuchKey,
}

impl Refusal {
    pub fn kind(self) -> ErrorKind {
        match self {
            Refusal::WrongType => ErrorKind::WrongType,
            Refusal::Damaged => ErrorKind::Storage,
            Refusal::NotAnInteger
            | Refusal::Overflow
            | Refusal::TooLong { .. }
            | Refusal::NotAFloat
            | Refusal::FieldNotAnInteger
            | Refusal::FieldNotAFloat
            | Refusal::NanOrInfinity
            | Refusal::NoSuchKey => ErrorKind::Invalid,
        }
    }
}

impl Outcome {
    /// The answer a client gets for a write with this outcome.
    pub fn reply(&self) -> Reply {
        match &self.answer {
            Answer::Outcome => Reply::Written { applied: self.applied, existed: self.existed },
            Answer::Old(value) => Reply::Value(value.clone()),
            Answer::Integer(n) => Reply::Integer(*n),
            Answer::Refused(why) => Reply::Error(why.kind(), why.to_string()),
            Answer::Bulk(value) => Reply::Value(Some(value.clone())),
        }
    }
}

impl std::fmt::Display for Refusal {
    /// Worded as Redis words them, after the `ERR` prefix.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NotAnInteger => f.write_str("value is not an integer or out of range"),
            Refusal::Overflow => f.write_str("increment or decrement would overflow"),
            Refusal::TooLong { limit } => write!(f, "string exceeds maximum allowed size ({limit} bytes)"),
            Refusal::WrongType => f.write_str("Operation against a key holding the wrong kind of value"),
            Refusal::Damaged => f.write_str("the key's stored hash is damaged"),
            Refusal::NotAFloat => f.write_str("value is not a valid float"),
            Refusal::FieldNotAnInteger => f.write_str("hash value is not an integer"),
            Refusal::FieldNotAFloat => f.write_str("hash value is not a float"),
            Refusal::NanOrInfinity => f.write_str("increment would produce NaN or Infinity"),
            Refusal::NoSuchKey => f.write_str("no such key"),
        }
    }
}
