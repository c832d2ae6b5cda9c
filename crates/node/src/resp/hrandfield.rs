//! HRANDFIELD key [count [WITHVALUES]]: random fields of a hash, picked here from one read of the whole hash,
//! by Redis 7's rules. Without a count: one field, or nil for a missing key. A positive count: that many
//! distinct fields (all of them if the hash has no more). A negative count: that many picks, which may repeat.
//! Zero, or a missing key: an empty array. WITHVALUES follows each field with its value (in RESP3, each pair is
//! an array of its own).

use super::commands::{integer_argument, syntax_error, Action, Session};
use super::frame::{Frame, Protocol};
use super::frontend::Frontend;
use super::hashes::read_fields;
use super::made_replies::{cost, too_large, MADE_REPLY_MAX};
use bytes::Bytes;
use meridian_core::splitmix::SplitMix64;
use std::hash::{BuildHasher, RandomState};

/// What HRANDFIELD's arguments ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Asked {
    /// No count: one field, as a bulk string.
    One,
    /// A count, and whether values come with the fields.
    Count { count: i64, values: bool },
}

pub(super) fn hrandfield(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let asked = match asked(args) {
        Ok(asked) => asked,
        Err(frame) => return frame.into(),
    };
    let protocol = session.protocol;
    read_fields(session, frontend, &args[1], move |fields| picked(asked, &fields, protocol, &mut seeded()))
}

/// Parses the count and WITHVALUES as Redis 7.0 does, in its order: the count first (any i64 but the one whose
/// negation overflows), then the option, then, with WITHVALUES, a count whose pairs would overflow.
fn asked(args: &[Bytes]) -> Result<Asked, Frame> {
    let Some(count) = args.get(2) else { return Ok(Asked::One) };
    let count = integer_argument(count)?;
    if count == i64::MIN {
        let range = format!("between -{max} and {max}", max = i64::MAX);
        return Err(Frame::error(format!("ERR value is out of range, value must {range}")));
    }
    let values = match &args[3..] {
        [] => false,
        [option] if option.eq_ignore_ascii_case(b"withvalues") => true,
        _ => return Err(syntax_error()),
    };
    if values && count.unsigned_abs() > (i64::MAX / 2) as u64 {
        return Err(Frame::error("ERR value is out of range"));
    }
    Ok(Asked::Count { count, values })
}

/// A generator for one command's picks: they need not be reproducible, only differ from call to call, which
/// std's per-instance random hash keys give.
fn seeded() -> SplitMix64 {
    SplitMix64::new(RandomState::new().hash_one(0u8))
}

/// The answer to `asked` from the hash's `fields` (none: a missing key).
fn picked(asked: Asked, fields: &[(Bytes, Bytes)], protocol: Protocol, rng: &mut SplitMix64) -> Frame {
    let (count, values) = match asked {
        Asked::One if fields.is_empty() => return Frame::Null,
        Asked::One => return Frame::Bulk(fields[rng.below(fields.len())].0.clone()),
        Asked::Count { count, values } => (count, values),
    };
    if fields.is_empty() || count == 0 {
        return Frame::Array(Vec::new());
    }
    let chosen = if count > 0 {
        distinct(fields.len(), count.unsigned_abs(), rng)
    } else {
        match repeated(fields, count.unsigned_abs(), values, rng) {
            Some(chosen) => chosen,
            None => return too_large("HRANDFIELD", "ask for fewer fields"),
        }
    };
    shaped(chosen.into_iter().map(|i| &fields[i]), values, protocol)
}

/// `count` distinct places of `len`: all of them in order if there are no more, else a random choice in random
/// order (the first `count` steps of a Fisher-Yates shuffle).
fn distinct(len: usize, count: u64, rng: &mut SplitMix64) -> Vec<usize> {
    let mut places: Vec<usize> = (0..len).collect();
    let Ok(count) = usize::try_from(count).map(|c| c.min(len)) else { return places };
    if count == len {
        return places;
    }
    for i in 0..count {
        places.swap(i, i + rng.below(len - i));
    }
    places.truncate(count);
    places
}

/// `count` places drawn independently, or None if a reply of that many of the hash's largest entries could be
/// past [`MADE_REPLY_MAX`] (decided before drawing, so the same hash and count always get the same answer).
fn repeated(fields: &[(Bytes, Bytes)], count: u64, values: bool, rng: &mut SplitMix64) -> Option<Vec<usize>> {
    let entry = |(f, v): &(Bytes, Bytes)| if values { cost(f.len()) + cost(v.len()) } else { cost(f.len()) };
    let largest = fields.iter().map(entry).max().unwrap_or(0) as u64;
    if count.saturating_mul(largest) > MADE_REPLY_MAX as u64 {
        return None;
    }
    Some((0..count).map(|_| rng.below(fields.len())).collect())
}

/// The picked fields as an array: fields alone, or each followed by its value (flat in RESP2, pairs in RESP3).
fn shaped<'a>(picks: impl Iterator<Item = &'a (Bytes, Bytes)>, values: bool, protocol: Protocol) -> Frame {
    let pair = |(f, v): &(Bytes, Bytes)| [Frame::Bulk(f.clone()), Frame::Bulk(v.clone())];
    Frame::Array(match (values, protocol) {
        (false, _) => picks.map(|(f, _)| Frame::Bulk(f.clone())).collect(),
        (true, Protocol::Resp2) => picks.flat_map(pair).collect(),
        (true, Protocol::Resp3) => picks.map(|p| Frame::Array(pair(p).into())).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::commands::args;
    use super::*;
    use std::collections::BTreeSet;

    fn parsed(words: &[&str]) -> Result<Asked, Frame> {
        asked(&args(&[&["HRANDFIELD", "h"], words].concat()))
    }

    fn hash(n: usize) -> Vec<(Bytes, Bytes)> {
        (0..n).map(|i| (Bytes::from(format!("f{i}")), Bytes::from(format!("v{i}")))).collect()
    }

    fn texts(frame: &Frame) -> Vec<String> {
        let Frame::Array(items) = frame else { panic!("not an array: {frame:?}") };
        items
            .iter()
            .map(|item| match item {
                Frame::Bulk(b) => String::from_utf8(b.to_vec()).unwrap(),
                Frame::Array(pair) => format!("{:?}", pair),
                other => panic!("unexpected {other:?}"),
            })
            .collect()
    }

    #[test]
    fn arguments_are_parsed_and_refused_as_redis_7_does() {
        assert_eq!(parsed(&[]), Ok(Asked::One));
        assert_eq!(parsed(&["3"]), Ok(Asked::Count { count: 3, values: false }));
        assert_eq!(parsed(&["-2", "WithValues"]), Ok(Asked::Count { count: -2, values: true }));
        assert_eq!(parsed(&["0", "withvalues"]), Ok(Asked::Count { count: 0, values: true }));
        let near = i64::MAX / 2;
        assert_eq!(parsed(&[&(-near).to_string(), "WITHVALUES"]), Ok(Asked::Count { count: -near, values: true }));
        let not_integer = Frame::error("ERR value is not an integer or out of range");
        assert_eq!(parsed(&["x"]), Err(not_integer.clone()));
        assert_eq!(parsed(&["x", "bogus"]), Err(not_integer), "the count is read first");
        let min =
            Frame::error("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807");
        assert_eq!(parsed(&["-9223372036854775808"]), Err(min.clone()));
        assert_eq!(parsed(&["-9223372036854775808", "bogus"]), Err(min));
        assert_eq!(parsed(&["1", "bogus"]), Err(syntax_error()));
        assert_eq!(parsed(&["1", "withvalues", "x"]), Err(syntax_error()));
        let out_of_range = Frame::error("ERR value is out of range");
        for count in ["4611686018427387904", "-4611686018427387904", "-9223372036854775807"] {
            assert_eq!(parsed(&[count, "withvalues"]), Err(out_of_range.clone()), "{count}");
            assert!(parsed(&[count]).is_ok(), "{count} without WITHVALUES");
        }
    }

    #[test]
    fn no_count_is_one_field_or_nil() {
        let mut rng = SplitMix64::new(1);
        assert_eq!(picked(Asked::One, &[], Protocol::Resp2, &mut rng), Frame::Null);
        let fields = hash(3);
        let one = |rng: &mut SplitMix64| match picked(Asked::One, &fields, Protocol::Resp2, rng) {
            Frame::Bulk(field) => String::from_utf8(field.to_vec()).unwrap(),
            other => panic!("not a bulk string: {other:?}"),
        };
        let seen: BTreeSet<String> = (0..100).map(|_| one(&mut rng)).collect();
        assert_eq!(seen, ["f0", "f1", "f2"].map(String::from).into(), "every field comes up, and nothing else");
    }

    #[test]
    fn a_positive_count_gives_distinct_fields_and_at_most_all() {
        let fields = hash(5);
        let mut rng = SplitMix64::new(7);
        for _ in 0..50 {
            let three = texts(&picked(Asked::Count { count: 3, values: false }, &fields, Protocol::Resp2, &mut rng));
            assert_eq!(three.len(), 3);
            assert_eq!(three.iter().collect::<BTreeSet<_>>().len(), 3, "distinct: {three:?}");
        }
        let all = picked(Asked::Count { count: i64::MAX, values: false }, &fields, Protocol::Resp2, &mut rng);
        assert_eq!(texts(&all), ["f0", "f1", "f2", "f3", "f4"], "the whole hash, in its order");
    }

    #[test]
    fn a_negative_count_may_repeat_and_zero_or_no_key_is_empty() {
        let fields = hash(2);
        let mut rng = SplitMix64::new(3);
        let ten = texts(&picked(Asked::Count { count: -10, values: false }, &fields, Protocol::Resp2, &mut rng));
        assert_eq!(ten.len(), 10);
        assert!(ten.iter().collect::<BTreeSet<_>>().len() <= 2, "{ten:?}");
        let empty = Frame::Array(Vec::new());
        assert_eq!(picked(Asked::Count { count: 0, values: true }, &fields, Protocol::Resp2, &mut rng), empty);
        assert_eq!(picked(Asked::Count { count: -3, values: false }, &[], Protocol::Resp2, &mut rng), empty);
        assert_eq!(picked(Asked::Count { count: 3, values: true }, &[], Protocol::Resp3, &mut rng), empty);
    }

    #[test]
    fn values_follow_their_fields_flat_in_resp2_and_paired_in_resp3() {
        let fields = hash(1);
        let mut rng = SplitMix64::new(5);
        let asked = Asked::Count { count: -2, values: true };
        let flat = ["f0", "v0", "f0", "v0"].map(Frame::bulk).to_vec();
        assert_eq!(picked(asked, &fields, Protocol::Resp2, &mut rng), Frame::Array(flat));
        let pair = Frame::Array(vec![Frame::bulk("f0"), Frame::bulk("v0")]);
        assert_eq!(picked(asked, &fields, Protocol::Resp3, &mut rng), Frame::Array(vec![pair.clone(), pair]));
    }

    #[test]
    fn a_negative_count_past_the_reply_bound_is_refused() {
        let fields = hash(2);
        let mut rng = SplitMix64::new(9);
        let refused = too_large("HRANDFIELD", "ask for fewer fields");
        let huge = Asked::Count { count: -(i64::MAX / 2), values: true };
        assert_eq!(picked(huge, &fields, Protocol::Resp2, &mut rng), refused);
        let at_most = (MADE_REPLY_MAX / cost(2)) as i64;
        let fits = picked(Asked::Count { count: -at_most, values: false }, &fields, Protocol::Resp2, &mut rng);
        assert!(matches!(fits, Frame::Array(ref a) if a.len() as i64 == at_most));
        let over = Asked::Count { count: -(at_most + 1), values: false };
        assert_eq!(picked(over, &fields, Protocol::Resp2, &mut rng), refused);
    }
}
