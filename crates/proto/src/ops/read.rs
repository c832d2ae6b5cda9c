//! Reads as Redis answers them, whatever protocol found the value: a stored value taken apart
//! ([`decoded`]), the reply to GET and its kin ([`reply_for`]), and what a read covers ([`Span`]).

use super::decide::fields_of;
use super::outcome::Refusal;
use bytes::Bytes;
use meridian_core::ring::key_token;
use meridian_core::{KeyExpiry, Kind, Read, Reply, Stored, Unreadable};
use meridian_store::StoreError;
use std::ops::RangeInclusive;

/// A value as the store holds it, taken apart; one that does not parse is a corrupt store.
pub(crate) fn decoded(raw: Bytes) -> Result<Stored, StoreError> {
    Stored::unwrap(raw).map_err(corrupt)
}

pub(crate) fn corrupt(reason: Unreadable) -> StoreError {
    StoreError::Corrupt { offset: 0, reason: reason.to_string() }
}

/// The answer to a read of a key whose value is `stored`, on a wall clock reading `now_ms`.
/// Inlined into every protocol's read: as a call of its own, its stored value and its reply were each moved once
/// more on every GET (bench/instructions).
#[inline(always)]
pub(crate) fn reply_for(read: Read, stored: Option<Stored>, now_ms: u64) -> Reply {
    let wrong_type = || Reply::Error(Refusal::WrongType.kind(), Refusal::WrongType.to_string());
    match (read, stored) {
        (Read::Value, Some(Stored { kind: Kind::Hash, .. })) => wrong_type(),
        (Read::Value, stored) => Reply::Value(stored.map(|s| s.data)),
        (Read::Hash, stored) => match fields_of(stored.as_ref()) {
            Ok(fields) => Reply::Fields(fields.into_iter().collect()),
            Err(why) => Reply::Error(why.kind(), why.to_string()),
        },
        (Read::Kind, stored) => Reply::Kind(stored.map(|s| s.kind)),
        (Read::Expiry, None) => Reply::Expiry(KeyExpiry::Absent),
        (Read::Expiry, Some(Stored { expires_ms: None, .. })) => Reply::Expiry(KeyExpiry::Never),
        (Read::Expiry, Some(Stored { expires_ms: Some(at), .. })) => {
            Reply::Expiry(KeyExpiry::In(at.saturating_sub(now_ms)))
        }
        (Read::Deadline, None) => Reply::Expiry(KeyExpiry::Absent),
        (Read::Deadline, Some(Stored { expires_ms, .. })) => {
            Reply::Expiry(expires_ms.map_or(KeyExpiry::Never, KeyExpiry::At))
        }
    }
}

/// What a read covers: one key (a GET and its kin) or a range of ring tokens (a SCAN page).
pub(crate) enum Span<'a> {
    Key(&'a [u8]),
    Tokens(RangeInclusive<u64>),
}

impl Span<'_> {
    pub(crate) fn holds(&self, key: &[u8]) -> bool {
        match self {
            Span::Key(k) => *k == key,
            Span::Tokens(range) => range.contains(&key_token(key)),
        }
    }
}
