//! The head's decisions for the read-modify-write commands beyond INCR and APPEND: INCRBYFLOAT, HINCRBY,
//! HINCRBYFLOAT, HSETNX and SETRANGE, each answered and refused as Redis answers and refuses it.

use super::{fields_of, integer, keep, string_of, Applied};
use crate::ops::outcome::{Answer, Change, Refusal};
use bytes::Bytes;
use meridian_core::{hash, Kind, Stored, WriteOp};

/// Decides `op`, one of the commands above (the others are [`super::apply`]'s), against the key's state.
pub(super) fn apply(op: WriteOp, current: Option<&Stored>, now_ms: u64, max_value: usize) -> Result<Applied, Refusal> {
    let expires = current.and_then(|c| c.expires_ms);
    Ok(match op {
        WriteOp::IncrByFloat(by) => {
            let now = string_of(current)?.map_or(Ok(0.0), |data| float(data, Refusal::NotAFloat))?;
            let text = sum(now, &by)?;
            (keep(Kind::String, text.as_bytes(), expires, now_ms), true, Answer::Bulk(text.into()))
        }
        WriteOp::HashIncrBy(field, by) => {
            let read =
                |value: Option<&Bytes>| value.map_or(Ok(0), |v| integer(v).map_err(|_| Refusal::FieldNotAnInteger));
            let mut fields = fields_of(current)?;
            let next = read(fields.get(&field))?.checked_add(by).ok_or(Refusal::Overflow)?;
            fields.insert(field, next.to_string().into());
            (hash_of(&fields, expires, now_ms, max_value)?, true, Answer::Integer(next))
        }
        WriteOp::HashIncrByFloat(field, by) => {
            let mut fields = fields_of(current)?;
            let now = fields.get(&field).map_or(Ok(0.0), |v| float(v, Refusal::FieldNotAFloat))?;
            let text = sum(now, &by)?;
            fields.insert(field, Bytes::from(text.clone()));
            (hash_of(&fields, expires, now_ms, max_value)?, true, Answer::Bulk(text.into()))
        }
        WriteOp::HashSetNx(field, value) => {
            let mut fields = fields_of(current)?;
            match fields.entry(field) {
                std::collections::btree_map::Entry::Occupied(_) => (Change::Skip, false, Answer::Integer(0)),
                std::collections::btree_map::Entry::Vacant(slot) => {
                    slot.insert(value);
                    (hash_of(&fields, expires, now_ms, max_value)?, true, Answer::Integer(1))
                }
            }
        }
        WriteOp::SetRange(offset, bytes) => set_range(string_of(current)?, offset, &bytes, expires, now_ms, max_value)?,
        other => unreachable!("{other:?} is decided by decide::apply or decide_keys"),
    })
}

/// A hash of `fields` as the key's new state, refused past the value limit.
fn hash_of(fields: &hash::Fields, expires: Option<u64>, now_ms: u64, max_value: usize) -> Result<Change, Refusal> {
    let data = hash::encode(fields);
    if data.len() > max_value {
        return Err(Refusal::TooLong { limit: max_value as u64 });
    }
    Ok(keep(Kind::Hash, &data, expires, now_ms))
}

/// SETRANGE: `bytes` written at `offset` into the value (zero bytes fill any gap); nothing to write changes
/// nothing, and creates no key.
fn set_range(
    data: Option<&[u8]>,
    offset: u64,
    bytes: &[u8],
    expires: Option<u64>,
    now_ms: u64,
    max_value: usize,
) -> Result<Applied, Refusal> {
    let current = data.unwrap_or_default();
    if bytes.is_empty() {
        return Ok((Change::Skip, false, Answer::Integer(current.len() as i64)));
    }
    let end = usize::try_from(offset).ok().and_then(|o| o.checked_add(bytes.len())).filter(|&end| end <= max_value);
    let end = end.ok_or(Refusal::TooLong { limit: max_value as u64 })?;
    let mut value = current.to_vec();
    value.resize(value.len().max(end), 0);
    value[end - bytes.len()..end].copy_from_slice(bytes);
    Ok((keep(Kind::String, &value, expires, now_ms), true, Answer::Integer(value.len() as i64)))
}

/// A stored number as INCRBYFLOAT reads it: a decimal or exponent form, no spaces, not NaN; `refusal` otherwise.
fn float(data: &[u8], refusal: Refusal) -> Result<f64, Refusal> {
    let text = std::str::from_utf8(data).map_err(|_| refusal)?;
    match text.parse::<f64>() {
        Ok(n) if !n.is_nan() && !text.starts_with(char::is_whitespace) => Ok(n),
        _ => Err(refusal),
    }
}

/// `now` plus the increment `by` (its text, checked by the front-end), as Redis writes the result: refused if
/// it is infinite or not a number.
fn sum(now: f64, by: &[u8]) -> Result<String, Refusal> {
    let next = now + float(by, Refusal::NotAFloat)?;
    if !next.is_finite() {
        return Err(Refusal::NanOrInfinity);
    }
    Ok(float_text(next))
}

/// A number as Redis writes INCRBYFLOAT's result: plain decimal, no exponent, no trailing zeros. Redis adds in
/// 80-bit long doubles and prints 17 digits, so `0.1 + 0.2` comes out `0.3`; adding in 64 bits and rounding to 15
/// significant digits (what a `double` holds exactly) gives the same text for such sums.
pub(super) fn float_text(n: f64) -> String {
    let rounded: f64 = format!("{n:.14e}").parse().expect("a formatted float parses");
    let text = format!("{rounded}");
    if text == "-0" {
        "0".into()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::Stored;

    fn string(data: &str) -> Option<Stored> {
        Some(Stored { data: Bytes::copy_from_slice(data.as_bytes()), expires_ms: Some(1_000), kind: Kind::String })
    }

    fn hash_with(fields: &[(&str, &str)]) -> Option<Stored> {
        let fields: hash::Fields = fields
            .iter()
            .map(|(f, v)| (Bytes::copy_from_slice(f.as_bytes()), Bytes::copy_from_slice(v.as_bytes())))
            .collect();
        Some(Stored { data: hash::encode(&fields), expires_ms: None, kind: Kind::Hash })
    }

    fn run(op: WriteOp, current: Option<Stored>) -> Result<Applied, Refusal> {
        apply(op, current.as_ref(), 0, 64)
    }

    #[test]
    fn incrbyfloat_adds_writes_as_redis_and_keeps_the_deadline() {
        let (change, applied, answer) = run(WriteOp::IncrByFloat("0.1".into()), string("10.50")).unwrap();
        assert_eq!((applied, answer), (true, Answer::Bulk("10.6".into())));
        assert_eq!(change, Change::Put(Stored::wrap(b"10.6", Some(1_000))), "the key keeps its deadline");
        assert_eq!(run(WriteOp::IncrByFloat("0.2".into()), string("0.1")).unwrap().2, Answer::Bulk("0.3".into()));
        assert_eq!(run(WriteOp::IncrByFloat("2.0e2".into()), string("5.0e3")).unwrap().2, Answer::Bulk("5200".into()));
        assert_eq!(run(WriteOp::IncrByFloat("-3".into()), None).unwrap().2, Answer::Bulk("-3".into()));
        assert_eq!(run(WriteOp::IncrByFloat("1".into()), string("abc")), Err(Refusal::NotAFloat));
        assert_eq!(run(WriteOp::IncrByFloat("1".into()), string(" 1")), Err(Refusal::NotAFloat));
        assert_eq!(run(WriteOp::IncrByFloat("1e308".into()), string("1e308")), Err(Refusal::NanOrInfinity));
        assert_eq!(run(WriteOp::IncrByFloat("1".into()), hash_with(&[])), Err(Refusal::WrongType));
    }

    #[test]
    fn hash_fields_count_and_are_set_once() {
        let h = || hash_with(&[("n", "5"), ("f", "1.5"), ("s", "x")]);
        assert_eq!(run(WriteOp::HashIncrBy("n".into(), 3), h()).unwrap().2, Answer::Integer(8));
        assert_eq!(run(WriteOp::HashIncrBy("new".into(), -2), h()).unwrap().2, Answer::Integer(-2));
        assert_eq!(run(WriteOp::HashIncrBy("s".into(), 1), h()), Err(Refusal::FieldNotAnInteger));
        assert_eq!(run(WriteOp::HashIncrBy("n".into(), i64::MAX), h()), Err(Refusal::Overflow));
        assert_eq!(
            run(WriteOp::HashIncrByFloat("f".into(), "0.25".into()), h()).unwrap().2,
            Answer::Bulk("1.75".into())
        );
        assert_eq!(run(WriteOp::HashIncrByFloat("s".into(), "1".into()), h()), Err(Refusal::FieldNotAFloat));
        let (change, applied, answer) = run(WriteOp::HashSetNx("n".into(), "9".into()), h()).unwrap();
        assert_eq!((change, applied, answer), (Change::Skip, false, Answer::Integer(0)));
        assert_eq!(run(WriteOp::HashSetNx("m".into(), "9".into()), h()).unwrap().2, Answer::Integer(1));
        assert_eq!(run(WriteOp::HashSetNx("m".into(), "9".into()), string("x")), Err(Refusal::WrongType));
    }

    #[test]
    fn setrange_overwrites_pads_and_respects_the_limit() {
        let range = |offset, bytes: &str, current| {
            run(WriteOp::SetRange(offset, Bytes::copy_from_slice(bytes.as_bytes())), current)
        };
        let (change, _, answer) = range(6, "Redis", string("Hello World")).unwrap();
        assert_eq!((change, answer), (Change::Put(Stored::wrap(b"Hello Redis", Some(1_000))), Answer::Integer(11)));
        let (change, _, answer) = range(3, "ab", None).unwrap();
        assert_eq!((change, answer), (Change::Put(Stored::wrap(b"\0\0\0ab", None)), Answer::Integer(5)));
        assert_eq!(range(3, "", None).unwrap(), (Change::Skip, false, Answer::Integer(0)), "no key is made");
        assert_eq!(range(63, "ab", None), Err(Refusal::TooLong { limit: 64 }));
    }

    #[test]
    fn float_results_are_written_without_exponent_or_trailing_zeros() {
        assert_eq!(float_text(5200.0), "5200");
        assert_eq!(float_text(0.1 + 0.2), "0.3");
        assert_eq!(float_text(-0.0), "0");
        assert_eq!(float_text(1e21), "1000000000000000000000");
        assert_eq!(float_text(3.0e-5), "0.00003");
    }
}
