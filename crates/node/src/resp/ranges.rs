//! GETRANGE and its old name SUBSTR: one read of the key's value, sliced here by Redis' index rules. A missing
//! key reads as the empty string, a hash gets WRONGTYPE, and indexes that are not integers are refused before
//! anything is read, as in Redis.

use super::commands::{integer_argument, Action, Session};
use super::frame::Frame;
use super::frontend::Frontend;
use super::kv::{failure, read_of, submit_picked};
use bytes::Bytes;
use meridian_core::{Read, Reply};
use std::ops::Range;

/// GETRANGE key start end (and SUBSTR key start end).
pub(super) fn getrange(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let (start, end) = match (integer_argument(&args[2]), integer_argument(&args[3])) {
        (Ok(start), Ok(end)) => (start, end),
        (Err(frame), _) | (_, Err(frame)) => return frame.into(),
    };
    let read = read_of(session, std::mem::take(&mut args[1]), Read::Value);
    submit_picked(frontend, read, session, move |reply| match reply {
        Reply::Value(value) => {
            let value = value.unwrap_or_default();
            Frame::Bulk(value.slice(byte_range(value.len(), start, end)))
        }
        other => failure(other),
    })
}

/// The bytes `start..=end` of a value of `len` bytes selects, by Redis 7's `getrangeCommand`: negative indexes
/// count from the end, both are clamped into the value, and a range that ends before it starts is empty.
fn byte_range(len: usize, start: i64, end: i64) -> Range<usize> {
    // Both from the end, the start after the end: empty before clamping could make them meet at 0.
    if start < 0 && end < 0 && start > end {
        return 0..0;
    }
    // i128: a value's length plus any i64 cannot overflow.
    let from_end = |i: i64| if i < 0 { len as i128 + i128::from(i) } else { i128::from(i) };
    let start = from_end(start).max(0);
    let end = from_end(end).max(0).min(len as i128 - 1);
    if start > end {
        return 0..0;
    }
    start as usize..end as usize + 1
}

#[cfg(test)]
mod tests {
    use super::super::commands::Session;
    use super::super::testing::Scripted;
    use super::*;
    use meridian_core::ErrorKind;

    /// `value[start..=end]` by [`byte_range`], as text.
    fn sliced(value: &str, start: i64, end: i64) -> &str {
        &value[byte_range(value.len(), start, end)]
    }

    /// Each case as redis-server 7.0.15 answered it.
    #[test]
    fn indexes_follow_redis_rules() {
        let cases: [(i64, i64, &str); 19] = [
            (0, -1, "hello"),
            (0, 0, "h"),
            (1, 3, "ell"),
            (-3, -1, "llo"),
            (-1, -1, "o"),
            (4, -1, "o"),
            (5, -1, ""),
            (1, 0, ""),
            (3, 1, ""),
            (-1, -5, ""),
            (-2, -3, ""),
            (-5, -6, ""),
            (2, -4, ""),
            (10, 20, ""),
            (-100, 100, "hello"),
            (0, i64::MAX, "hello"),
            (i64::MIN, i64::MIN, "h"),
            (0, i64::MIN, "h"),
            (i64::MAX, -1, ""),
        ];
        for (start, end, want) in cases {
            assert_eq!(sliced("hello", start, end), want, "GETRANGE hello {start} {end}");
        }
        assert_eq!(sliced("", 0, -1), "");
        assert_eq!(sliced("", -1, 0), "");
        assert_eq!(sliced("", 0, 0), "");
    }

    #[tokio::test]
    async fn getrange_reads_the_value_and_slices_it() {
        let core = Scripted::new(|_| Reply::Value(Some(Bytes::from_static(b"hello world"))));
        let mut session = Session::new(1);
        assert_eq!(core.run(&mut session, &["GETRANGE", "k", "0", "4"]).await, Frame::bulk("hello"));
        assert_eq!(core.run(&mut session, &["substr", "k", "-5", "-1"]).await, Frame::bulk("world"));
        let missing = Scripted::new(|_| Reply::Value(None));
        assert_eq!(missing.run(&mut session, &["GETRANGE", "k", "0", "-1"]).await, Frame::bulk(""));
        let hash = Scripted::new(|_| Reply::Error(ErrorKind::WrongType, "wrong kind".into()));
        assert_eq!(hash.run(&mut session, &["GETRANGE", "h", "0", "1"]).await, Frame::error("WRONGTYPE wrong kind"));
    }

    #[tokio::test]
    async fn indexes_that_are_not_integers_are_refused_before_any_read() {
        let core = Scripted::new(|_| Reply::Value(None));
        let not_an_integer = Frame::error("ERR value is not an integer or out of range");
        for words in [["GETRANGE", "k", "x", "1"], ["GETRANGE", "k", "0", "1.5"], ["SUBSTR", "k", "+1", "2"]] {
            assert_eq!(core.run(&mut Session::new(1), &words).await, not_an_integer, "{words:?}");
        }
        assert!(core.asked().is_empty());
    }
}
