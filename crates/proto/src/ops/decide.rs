//! What a write does to its key, decided once by the head against the key's state when it orders the write.
//! Every member then applies the resulting [`Change`], so read-modify-write commands (INCR, APPEND, SET … GET,
//! GETDEL) are atomic per key and replicate as plain puts and deletes: the chain never re-evaluates them. Nothing
//! here depends on the chain: any protocol that orders a key's writes in one place can decide them this way.

mod keys;
mod more;

pub(crate) use keys::{decide_keys, KeysDecision};

use super::outcome::{Answer, Change, Outcome, Refusal};
use meridian_core::{hash, Condition, Kind, Stored, Ttl, Write, WriteOp};

/// The head's decision on one write.
#[derive(Debug)]
pub(crate) struct Decision {
    pub change: Change,
    pub outcome: Outcome,
}

/// What the head knows of a key when it decides a write on it: its value, or, for a write that
/// [`needs_value`] says depends only on whether the key exists, just that, or, for a [`blind`] write, nothing.
#[derive(Debug)]
pub(crate) enum Current {
    /// The decision's `existed` is false until the head learns it as it logs the write.
    Unknown,
    Absent,
    Exists,
    Value(Stored),
}

impl From<Option<Stored>> for Current {
    fn from(stored: Option<Stored>) -> Current {
        stored.map_or(Current::Absent, Current::Value)
    }
}

/// Whether deciding `write` needs the key's value. A plain SET (no GET, no KEEPTTL) and a DEL need only to
/// know whether the key exists; looking its value up for them would copy it out of the store for nothing.
pub(crate) fn needs_value(write: &Write) -> bool {
    write.get_old || !matches!(write.op, WriteOp::Delete | WriteOp::Put { ttl: Ttl::Clear | Ttl::Expire(_), .. })
}

/// Whether `write`'s change is the same whatever the key holds: an unconditional plain SET or DEL. Only its
/// reply says whether the key existed, which the head learns as it logs the write, so deciding it looks
/// nothing up.
pub(crate) fn blind(write: &Write) -> bool {
    write.cond == Condition::Always && !needs_value(write)
}

/// Decides `write` against the key's current state `current` (its value if [`needs_value`]), at wall-clock
/// time `now_ms`; `max_value` bounds what an APPEND or HSET may grow a value to. A deadline already past
/// deletes the key, as Redis does.
pub(crate) fn decide(write: Write, current: impl Into<Current>, now_ms: u64, max_value: usize) -> Decision {
    let (existed, current) = match current.into() {
        Current::Unknown | Current::Absent => (false, None),
        Current::Exists => (true, None),
        Current::Value(stored) => (true, Some(stored)),
    };
    debug_assert!(existed == current.is_some() || !needs_value(&write), "{write:?} was decided without its value");
    let old = write.get_old.then(|| current.as_ref().map(|c| (c.kind, c.data.clone())));
    let decided = match old {
        Some(Some((Kind::Hash, _))) => Err(Refusal::WrongType),
        _ if !write.cond.holds(existed) => Ok((Change::Skip, false, Answer::Outcome)),
        _ => apply(write.op, current, now_ms, max_value),
    };
    let (change, applied, answer) = decided.unwrap_or_else(|why| (Change::Skip, false, Answer::Refused(why)));
    let answer = match (old, &answer) {
        (_, Answer::Refused(_)) | (None, _) => answer,
        (Some(old), _) => Answer::Old(old.map(|(_, data)| data)),
    };
    Decision { change, outcome: Outcome { applied, existed, answer } }
}

pub(super) type Applied = (Change, bool, Answer);

/// What a key becomes with `data` of `kind` and a deadline: gone if the deadline has passed at `now_ms`.
pub(super) fn keep(kind: Kind, data: &[u8], expires_ms: Option<u64>, now_ms: u64) -> Change {
    match expires_ms {
        Some(at) if at <= now_ms => Change::Delete,
        _ => Change::Put(Stored::wrap_as(kind, data, expires_ms)),
    }
}

fn apply(op: WriteOp, current: Option<Stored>, now_ms: u64, max_value: usize) -> Result<Applied, Refusal> {
    let keep = |kind: Kind, data: &[u8], expires_ms: Option<u64>| keep(kind, data, expires_ms, now_ms);
    let expires = current.as_ref().and_then(|c| c.expires_ms);
    Ok(match (op, current) {
        (WriteOp::Put { value, ttl }, _) => {
            let expires_ms = match ttl {
                Ttl::Clear => None,
                Ttl::Keep => expires,
                Ttl::Expire(d) => Some(d.at(now_ms)),
            };
            (keep(Kind::String, &value, expires_ms), true, Answer::Outcome)
        }
        (WriteOp::Delete, _) => (Change::Delete, true, Answer::Outcome),
        (WriteOp::Expire { .. }, None) => (Change::Skip, false, Answer::Outcome),
        (WriteOp::Expire { deadline: None, .. }, Some(c)) if c.expires_ms.is_none() => {
            (Change::Skip, false, Answer::Outcome)
        }
        (WriteOp::Expire { deadline, when }, Some(c)) => {
            let at = deadline.map(|d| d.at(now_ms));
            match at {
                Some(at) if !when.admits(c.expires_ms, at) => (Change::Skip, false, Answer::Outcome),
                _ => (keep(c.kind, &c.data, at), true, Answer::Outcome),
            }
        }
        (WriteOp::IncrBy(by), current) => {
            let now = string_of(current.as_ref())?.map_or(Ok(0), integer)?;
            let next = now.checked_add(by).ok_or(Refusal::Overflow)?;
            (keep(Kind::String, next.to_string().as_bytes(), expires), true, Answer::Integer(next))
        }
        (WriteOp::Append(tail), current) => {
            let mut data = string_of(current.as_ref())?.map(<[u8]>::to_vec).unwrap_or_default();
            if data.len() + tail.len() > max_value {
                return Err(Refusal::TooLong { limit: max_value as u64 });
            }
            data.extend_from_slice(&tail);
            let len = i64::try_from(data.len()).expect("bounded by the value limit");
            (keep(Kind::String, &data, expires), true, Answer::Integer(len))
        }
        (WriteOp::HashSet(set), current) => {
            let mut fields = fields_of(current.as_ref())?;
            let new = set.into_iter().filter(|(f, v)| fields.insert(f.clone(), v.clone()).is_none()).count();
            let data = hash::encode(&fields);
            if data.len() > max_value {
                return Err(Refusal::TooLong { limit: max_value as u64 });
            }
            (keep(Kind::Hash, &data, expires), true, Answer::Integer(new as i64))
        }
        (WriteOp::HashDel(gone), current) => {
            let mut fields = fields_of(current.as_ref())?;
            let removed = gone.iter().filter(|f| fields.remove(*f).is_some()).count();
            let change = match (removed, fields.is_empty()) {
                (0, _) => Change::Skip,
                (_, true) => Change::Delete,
                (_, false) => keep(Kind::Hash, &hash::encode(&fields), expires),
            };
            (change, removed > 0, Answer::Integer(removed as i64))
        }
        (op, current) => more::apply(op, current.as_ref(), now_ms, max_value)?,
    })
}

/// A string key's bytes (None if absent); a hash is the wrong type.
pub(super) fn string_of(current: Option<&Stored>) -> Result<Option<&[u8]>, Refusal> {
    match current {
        Some(Stored { kind: Kind::Hash, .. }) => Err(Refusal::WrongType),
        other => Ok(other.map(|c| c.data.as_ref())),
    }
}

/// A hash key's fields (none if absent); a string is the wrong type.
pub(crate) fn fields_of(current: Option<&Stored>) -> Result<hash::Fields, Refusal> {
    match current {
        None => Ok(hash::Fields::new()),
        Some(Stored { kind: Kind::String, .. }) => Err(Refusal::WrongType),
        Some(c) => hash::decode(&c.data).map_err(|_| Refusal::Damaged),
    }
}

/// A value as INCR reads it: the decimal form of a signed 64-bit integer exactly as Redis writes one (an
/// optional minus, no plus, no leading zeros, no spaces), so that what INCR accepts it also writes back.
fn integer(data: &[u8]) -> Result<i64, Refusal> {
    let text = std::str::from_utf8(data).map_err(|_| Refusal::NotAnInteger)?;
    let digits = text.strip_prefix('-').unwrap_or(text);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" && text == "0" || !digits.starts_with('0'));
    if !canonical {
        return Err(Refusal::NotAnInteger);
    }
    text.parse().map_err(|_| Refusal::NotAnInteger)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use meridian_core::{Deadline, ExpireWhen, KeyspaceId};

    fn write(op: WriteOp) -> Write {
        Write::new(KeyspaceId::DEFAULT, Bytes::from_static(b"k"), op)
    }

    fn stored(data: &str, expires_ms: Option<u64>) -> Option<Stored> {
        Some(Stored { data: Bytes::from(data.to_string()), expires_ms, kind: Kind::String })
    }

    /// A write decided from the key's existence alone must come out exactly as if its value were known.
    #[test]
    fn writes_that_need_no_value_decide_the_same_from_existence() {
        let value = Bytes::from_static(b"v");
        let hash = Stored { data: hash::encode(&hash::Fields::new()), expires_ms: None, kind: Kind::Hash };
        let states = [None, stored("old", None), stored("old", Some(5)), stored("old", Some(50)), Some(hash)];
        let ops = [
            WriteOp::Put { value: value.clone(), ttl: Ttl::Clear },
            WriteOp::Put { value: value.clone(), ttl: Ttl::Expire(Deadline::In(10)) },
            WriteOp::Delete,
        ];
        let mut checked = 0;
        for op in ops {
            for cond in [Condition::Always, Condition::IfAbsent, Condition::IfPresent] {
                let w = Write { cond, ..write(op.clone()) };
                assert!(!needs_value(&w), "{w:?}");
                for state in &states {
                    let exists = if state.is_some() { Current::Exists } else { Current::Absent };
                    let known = decide(w.clone(), state.clone(), 20, 100);
                    let existence = decide(w.clone(), exists, 20, 100);
                    assert_eq!(format!("{known:?}"), format!("{existence:?}"), "{w:?} on {state:?}");
                    // Blind, only `existed` is left to learn.
                    assert_eq!(blind(&w), cond == Condition::Always, "{w:?}");
                    if blind(&w) {
                        let mut unknown = decide(w.clone(), Current::Unknown, 20, 100);
                        unknown.outcome.existed = state.is_some();
                        assert_eq!(format!("{known:?}"), format!("{unknown:?}"), "{w:?} on {state:?}");
                    }
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 45);
        let keep = write(WriteOp::Put { value, ttl: Ttl::Keep });
        let get = Write { get_old: true, ..write(WriteOp::Delete) };
        for w in
            [keep, get, write(WriteOp::IncrBy(1)), write(WriteOp::Expire { deadline: None, when: ExpireWhen::Always })]
        {
            assert!(needs_value(&w), "{w:?}");
        }
    }

    #[test]
    fn integers_are_read_as_redis_writes_them() {
        for good in ["0", "7", "-7", "9223372036854775807", "-9223372036854775808"] {
            assert_eq!(integer(good.as_bytes()).unwrap().to_string(), good);
        }
        for bad in ["", "-", "+1", "01", "-0", " 1", "1 ", "1.5", "9223372036854775808", "x"] {
            assert_eq!(integer(bad.as_bytes()), Err(Refusal::NotAnInteger), "{bad:?}");
        }
    }

    #[test]
    fn incrby_counts_from_zero_keeps_the_expiry_and_refuses_what_it_cannot_count() {
        let d = decide(write(WriteOp::IncrBy(5)), None, 0, 100);
        assert_eq!((d.change, d.outcome.answer), (Change::Put(Stored::wrap(b"5", None)), Answer::Integer(5)));
        let d = decide(write(WriteOp::IncrBy(-10)), stored("5", Some(99)), 0, 100);
        assert_eq!((d.change, d.outcome.answer), (Change::Put(Stored::wrap(b"-5", Some(99))), Answer::Integer(-5)));
        let d = decide(write(WriteOp::IncrBy(1)), stored("abc", None), 0, 100);
        assert_eq!((d.change, d.outcome.answer), (Change::Skip, Answer::Refused(Refusal::NotAnInteger)));
        let d = decide(write(WriteOp::IncrBy(1)), stored(&i64::MAX.to_string(), None), 0, 100);
        assert_eq!((d.change, d.outcome.answer), (Change::Skip, Answer::Refused(Refusal::Overflow)));
    }

    #[test]
    fn append_grows_the_value_up_to_the_limit() {
        let d = decide(write(WriteOp::Append(Bytes::from_static(b"cd"))), stored("ab", None), 0, 4);
        assert_eq!((d.change, d.outcome.answer), (Change::Put(Stored::wrap(b"abcd", None)), Answer::Integer(4)));
        let d = decide(write(WriteOp::Append(Bytes::from_static(b"cde"))), stored("ab", None), 0, 4);
        assert_eq!((d.change, d.outcome.answer), (Change::Skip, Answer::Refused(Refusal::TooLong { limit: 4 })));
    }

    #[test]
    fn hash_writes_count_fields_refuse_strings_and_drop_an_emptied_key() {
        let pairs = |kv: &[(&'static str, &'static str)]| kv.iter().map(|&(f, v)| (f.into(), v.into())).collect();
        let d = decide(write(WriteOp::HashSet(pairs(&[("a", "1"), ("b", "2")]))), None, 0, 100);
        assert_eq!(d.outcome.answer, Answer::Integer(2));
        let Change::Put(raw) = d.change else { panic!("a put") };
        let hash = Stored::unwrap(raw).unwrap();
        assert_eq!(hash.kind, Kind::Hash);
        let d = decide(write(WriteOp::HashSet(pairs(&[("b", "3"), ("c", "4")]))), Some(hash.clone()), 0, 100);
        assert_eq!(d.outcome.answer, Answer::Integer(1));
        let d = decide(write(WriteOp::HashSet(pairs(&[("c", "a long value")]))), Some(hash.clone()), 0, 20);
        assert_eq!(d.outcome.answer, Answer::Refused(Refusal::TooLong { limit: 20 }));
        let d = decide(write(WriteOp::HashDel(vec!["a".into(), "zz".into()])), Some(hash.clone()), 0, 100);
        assert!(matches!((d.change, d.outcome.answer), (Change::Put(_), Answer::Integer(1))));
        let d = decide(write(WriteOp::HashDel(vec!["a".into(), "b".into()])), Some(hash.clone()), 0, 100);
        assert_eq!((d.change, d.outcome.answer), (Change::Delete, Answer::Integer(2)));
        let d = decide(write(WriteOp::HashDel(vec!["a".into()])), None, 0, 100);
        assert_eq!((d.change, d.outcome.applied, d.outcome.answer), (Change::Skip, false, Answer::Integer(0)));
        let d = decide(write(WriteOp::HashSet(pairs(&[("f", "v")]))), stored("s", None), 0, 100);
        assert_eq!((d.change, d.outcome.answer), (Change::Skip, Answer::Refused(Refusal::WrongType)));
        for op in [WriteOp::IncrBy(1), WriteOp::Append("x".into())] {
            let d = decide(write(op), Some(hash.clone()), 0, 100);
            assert_eq!((d.change, d.outcome.answer), (Change::Skip, Answer::Refused(Refusal::WrongType)));
        }
        let getdel = Write { get_old: true, ..write(WriteOp::Delete) };
        assert_eq!(decide(getdel, Some(hash.clone()), 0, 100).outcome.answer, Answer::Refused(Refusal::WrongType));
        let d = decide(
            write(WriteOp::Expire { deadline: Some(meridian_core::Deadline::At(50)), when: ExpireWhen::Always }),
            Some(hash),
            0,
            100,
        );
        let Change::Put(raw) = d.change else { panic!("a put") };
        assert_eq!(Stored::unwrap(raw).unwrap().kind, Kind::Hash, "EXPIRE keeps the kind");
    }

    #[test]
    fn get_old_answers_the_previous_value_whether_or_not_the_write_applied() {
        let set_get =
            |cond| Write { cond, get_old: true, ..write(WriteOp::Put { value: "new".into(), ttl: Ttl::Clear }) };
        let d = decide(set_get(Condition::Always), stored("old", None), 0, 100);
        assert_eq!((d.outcome.applied, d.outcome.answer), (true, Answer::Old(Some("old".into()))));
        let d = decide(set_get(Condition::IfAbsent), stored("old", None), 0, 100);
        assert_eq!((d.change, d.outcome.answer), (Change::Skip, Answer::Old(Some("old".into()))));
        let getdel = Write { get_old: true, ..write(WriteOp::Delete) };
        let d = decide(getdel, None, 0, 100);
        assert_eq!((d.change, d.outcome.answer), (Change::Delete, Answer::Old(None)));
    }
}
