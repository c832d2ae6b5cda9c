//! How a key's value is kept in a datastore: a header that says what the value is and when it expires, then
//! the client's bytes. Datastores treat the whole as opaque bytes (seed 003 §5.3's storage interface knows
//! nothing of Redis); the chain layer wraps a value when its head orders a write and unwraps it when a member
//! answers a read or tracks expiry.
//!
//! ```text
//! flags:u8 | expires_ms:u64 (big-endian, only if flags & EXPIRES) | data
//! ```
//!
//! `flags` bit 7 says the value expires; bits 0–3 name the value's type (0: a string, 1: a hash, whose data is
//! its fields as [`crate::hash`] encodes them), room for the data types a later format adds; bits 4–6 are reserved and must be zero, so a value written by a newer format is refused
//! rather than misread. `expires_ms` is a Unix time in milliseconds, on the clock of the node that ordered the
//! write.

use bytes::{Buf, Bytes};
use serde::{Deserialize, Serialize};

const EXPIRES: u8 = 0x80;
const TYPE_MASK: u8 = 0x0f;
const RESERVED: u8 = 0x70;

/// What kind of value a key holds, as Redis' TYPE names them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    #[default]
    String = 0,
    Hash = 1,
}

/// A value as a datastore holds it, taken apart.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stored {
    /// The client's bytes (for a hash, its encoded fields).
    pub data: Bytes,
    /// When the key expires (Unix milliseconds), if it does.
    pub expires_ms: Option<u64>,
    pub kind: Kind,
}

/// Why a stored value cannot be read: damaged, or written by a newer format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    #[error("a stored value is empty: it lacks its header")]
    Empty,
    #[error("a stored value has an unknown header {0:#04x}")]
    UnknownHeader(u8),
    #[error("a stored value's expiry is cut short")]
    ExpiryCutShort,
}

impl Stored {
    /// The bytes a datastore keeps for a string value `data` expiring at `expires_ms`.
    pub fn wrap(data: &[u8], expires_ms: Option<u64>) -> Bytes {
        Stored::wrap_as(Kind::String, data, expires_ms)
    }

    /// The bytes a datastore keeps for a value of `kind` whose data is `data`, expiring at `expires_ms`.
    pub fn wrap_as(kind: Kind, data: &[u8], expires_ms: Option<u64>) -> Bytes {
        // A `Vec` filled to its capacity becomes a `Bytes` without the bookkeeping a `BytesMut` freezes with.
        let mut out = Vec::with_capacity(Stored::header_len(expires_ms) + data.len());
        match expires_ms {
            Some(at) => {
                out.push(kind as u8 | EXPIRES);
                out.extend_from_slice(&at.to_be_bytes());
            }
            None => out.push(kind as u8),
        }
        out.extend_from_slice(data);
        Bytes::from(out)
    }

    fn header_len(expires_ms: Option<u64>) -> usize {
        1 + expires_ms.map_or(0, |_| 8)
    }

    /// Takes a stored value apart; the data is `raw` past its header. An error describes a value this format
    /// cannot read (damaged, or written by a newer format).
    pub fn unwrap(mut raw: Bytes) -> Result<Stored, Unreadable> {
        let (kind, expires_ms) = Stored::header(&raw)?;
        // Advanced past the header rather than sliced: the first slice of a buffer made from a `Vec` allocates
        // its shared count, and a read's value is most often such a buffer, just copied out of the store.
        raw.advance(Stored::header_len(expires_ms));
        Ok(Stored { data: raw, expires_ms, kind })
    }

    /// What a stored value's header says: its kind and expiry. An error as for [`Self::unwrap`].
    pub fn header(raw: &[u8]) -> Result<(Kind, Option<u64>), Unreadable> {
        let flags = *raw.first().ok_or(Unreadable::Empty)?;
        let kind = match flags & TYPE_MASK {
            _ if flags & RESERVED != 0 => return Err(Unreadable::UnknownHeader(flags)),
            0 => Kind::String,
            1 => Kind::Hash,
            _ => return Err(Unreadable::UnknownHeader(flags)),
        };
        let expires_ms = if flags & EXPIRES != 0 {
            let at = raw.get(1..9).ok_or(Unreadable::ExpiryCutShort)?;
            Some(u64::from_be_bytes(at.try_into().expect("8 bytes")))
        } else {
            None
        };
        Ok((kind, expires_ms))
    }

    /// Only the expiry of a stored value (None for a value that does not expire or cannot be read).
    pub fn expiry_of(raw: &[u8]) -> Option<u64> {
        let at = raw.get(1..9).filter(|_| raw[0] & (EXPIRES | RESERVED) == EXPIRES)?;
        Some(u64::from_be_bytes(at.try_into().expect("8 bytes")))
    }

    /// How many of a stored value's bytes are the client's: what a memory cap counts.
    pub fn data_len(raw: &[u8]) -> usize {
        raw.len().saturating_sub(Stored::header_len(Stored::expiry_of(raw)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_with_and_without_expiry() {
        for expires_ms in [None, Some(0), Some(1_790_000_000_123), Some(u64::MAX)] {
            let raw = Stored::wrap(b"hello", expires_ms);
            let back = Stored::unwrap(raw.clone()).unwrap();
            assert_eq!((back.data.as_ref(), back.expires_ms), (&b"hello"[..], expires_ms));
            assert_eq!((Stored::expiry_of(&raw), Stored::data_len(&raw)), (expires_ms, 5));
        }
        assert_eq!(Stored::unwrap(Stored::wrap(b"", None)).unwrap().data.len(), 0);
    }

    #[test]
    fn damaged_or_newer_values_are_refused() {
        assert_eq!(Stored::unwrap(Bytes::new()).unwrap_err(), Unreadable::Empty);
        assert_eq!(Stored::unwrap(Bytes::from_static(&[0x80, 1, 2])).unwrap_err(), Unreadable::ExpiryCutShort);
        assert_eq!(Stored::unwrap(Bytes::from_static(&[0x10, b'x'])).unwrap_err(), Unreadable::UnknownHeader(0x10));
        let newer = Stored::unwrap(Bytes::from_static(&[0x02, b'x'])).unwrap_err();
        assert_eq!(newer.to_string(), "a stored value has an unknown header 0x02");
        let hash = Stored::unwrap(Stored::wrap_as(Kind::Hash, b"h", Some(5))).unwrap();
        assert_eq!((hash.kind, hash.expires_ms, hash.data.as_ref()), (Kind::Hash, Some(5), &b"h"[..]));
        assert_eq!(Stored::expiry_of(&[0x90, 0, 0, 0, 0, 0, 0, 0, 1]), None);
    }
}
