//! SCAN and DBSIZE over the connection's keyspace, across every chain of it (docs/resp.md, "SCAN and DBSIZE").
//!
//! A SCAN cursor is a position on the token ring: the chain owning it answers with keys from there on and the
//! position to go on from ([`meridian_core::Scan`], `chain/scan.rs` in meridian-proto), which is the cursor
//! handed back, or 0 once the walk has passed the ring's end. A cursor therefore holds no state on any node and
//! stays valid across nodes, restarts and membership changes. One SCAN asks again from where the last answer
//! stopped until COUNT keys were examined, so a sparse range does not cost the client a round trip per
//! partition, but at most [`SCAN_REQUESTS_MAX`] times.
//!
//! DBSIZE walks the ring the same way with count-only requests, about one per chain, and adds up the counts:
//! each chain is counted at a different moment, so it is not a snapshot of the keyspace.

use super::commands::{integer_argument, syntax_error, Action, Session};
use super::frame::Frame;
use super::frontend::Frontend;
use super::kv::failure;
use super::pending::{receive, Pending};
use crate::inbox::CoreInbox;
use bytes::Bytes;
use meridian_core::{KeyspaceId, Kind, Reply, Request, Scan, ScanWant, Scanned, SCAN_COUNT_MAX, SCAN_REPLY_BYTES};
use std::sync::Arc;

/// Requests one SCAN sends at most before answering with the cursor it reached: a cluster's default partition
/// count (meridian-proto's `DEFAULT_PARTITIONS`, a crate this one does not depend on), so that in such a cluster
/// even an empty keyspace takes a single SCAN.
const SCAN_REQUESTS_MAX: usize = 64;
/// Redis' COUNT default.
const COUNT_DEFAULT: usize = 10;

/// What TYPE asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TypeFilter {
    Any,
    Only(Kind),
    /// A Redis type Meridian does not store (list, set, zset, stream): no key has it.
    Absent,
}

/// SCAN's arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ScanArgs {
    cursor: u64,
    count: usize,
    pattern: Option<Bytes>,
    kind: TypeFilter,
}

pub(super) fn scan(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let parsed = match scan_args(args) {
        Ok(parsed) => parsed,
        Err(frame) => return frame.into(),
    };
    let kind = match parsed.kind {
        TypeFilter::Absent => return page(None, Vec::new()).into(),
        TypeFilter::Any => None,
        TypeFilter::Only(kind) => Some(kind),
    };
    let (count, from) = (parsed.count, parsed.cursor);
    let first = Scan { keyspace: session.keyspace, from, want: ScanWant::Keys(count), pattern: parsed.pattern, kind };
    if let Err(why) = frontend.limits.check(&Request::Scan(first.clone())) {
        return Frame::error(format!("ERR {why}")).into();
    }
    Pending::Walk(Box::pin(scan_walk(frontend.core.clone(), first, count))).into()
}

pub(super) fn dbsize(_: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    Pending::Walk(Box::pin(count_walk(frontend.core.clone(), session.keyspace))).into()
}

/// Parses `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]` as Redis does: options in any order, the
/// last of a kind winning, errors worded as Redis words them.
fn scan_args(args: &[Bytes]) -> Result<ScanArgs, Frame> {
    let cursor = std::str::from_utf8(&args[1])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Frame::error("ERR invalid cursor"))?;
    let mut parsed = ScanArgs { cursor, count: COUNT_DEFAULT, pattern: None, kind: TypeFilter::Any };
    let mut options = args[2..].iter();
    while let Some(option) = options.next() {
        let value = options.next().ok_or_else(syntax_error)?;
        match option.to_ascii_uppercase().as_slice() {
            b"COUNT" => parsed.count = count(value)?,
            // `*` matches every key: no filter to apply at all, as in Redis.
            b"MATCH" => parsed.pattern = (value.as_ref() != b"*").then(|| value.clone()),
            b"TYPE" => parsed.kind = type_filter(value)?,
            _ => return Err(syntax_error()),
        }
    }
    Ok(parsed)
}

/// COUNT: an integer, and at least 1 (Redis answers a syntax error for less); above [`SCAN_COUNT_MAX`] it is
/// taken as that.
fn count(value: &[u8]) -> Result<usize, Frame> {
    match usize::try_from(integer_argument(value)?) {
        Ok(n) if n >= 1 => Ok(n.min(SCAN_COUNT_MAX)),
        _ => Err(syntax_error()),
    }
}

/// TYPE names a Redis type, in any case; an unknown name is refused (as Redis 8 does; Redis 7 matched nothing).
fn type_filter(name: &[u8]) -> Result<TypeFilter, Frame> {
    match name.to_ascii_lowercase().as_slice() {
        b"string" => Ok(TypeFilter::Only(Kind::String)),
        b"hash" => Ok(TypeFilter::Only(Kind::Hash)),
        b"list" | b"set" | b"zset" | b"stream" => Ok(TypeFilter::Absent),
        _ => Err(Frame::error(format!("ERR unknown type name '{}'", String::from_utf8_lossy(name)))),
    }
}

/// SCAN's reply: the cursor to go on from (0: done) and the keys.
fn page(next: Option<u64>, keys: Vec<Bytes>) -> Frame {
    let cursor = Frame::bulk(next.unwrap_or(0).to_string());
    Frame::Array(vec![cursor, Frame::Array(keys.into_iter().map(Frame::Bulk).collect())])
}

/// One SCAN: requests from `first.from` on until `count` keys were examined, the ring's end was passed,
/// [`SCAN_REPLY_BYTES`] of keys were gathered or [`SCAN_REQUESTS_MAX`] requests were sent.
async fn scan_walk(core: Arc<dyn CoreInbox>, first: Scan, count: usize) -> Frame {
    let (mut keys, mut examined, mut bytes) = (Vec::new(), 0, 0);
    let mut scan = first;
    for _ in 0..SCAN_REQUESTS_MAX {
        let answer = match ask(core.as_ref(), scan.clone()).await {
            Ok(answer) => answer,
            Err(frame) => return frame,
        };
        examined += answer.examined as usize;
        bytes += answer.keys.iter().map(Bytes::len).sum::<usize>();
        keys.extend(answer.keys);
        match answer.next {
            Some(next) if examined < count && bytes < SCAN_REPLY_BYTES => {
                scan = Scan { from: next, want: ScanWant::Keys(count - examined), ..scan };
            }
            next => return page(next, keys),
        }
    }
    page(Some(scan.from), keys)
}

/// DBSIZE: count-only requests around the ring, added up.
async fn count_walk(core: Arc<dyn CoreInbox>, keyspace: KeyspaceId) -> Frame {
    let (mut total, mut from) = (0, Some(0));
    while let Some(at) = from {
        let scan = Scan { keyspace, from: at, want: ScanWant::Count, pattern: None, kind: None };
        match ask(core.as_ref(), scan).await {
            Ok(answer) => (total, from) = (total + answer.matched, answer.next),
            Err(frame) => return frame,
        }
    }
    Frame::Integer(total as i64)
}

/// One request of a walk, and the chain's answer to it.
pub(super) async fn ask(core: &dyn CoreInbox, scan: Scan) -> Result<Scanned, Frame> {
    match receive(&mut core.submit(Request::Scan(scan))).await {
        Reply::Scanned(answer) => Ok(answer),
        other => Err(failure(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::commands::args;
    use super::*;

    fn parsed(words: &[&str]) -> Result<ScanArgs, Frame> {
        scan_args(&args(&[&["SCAN"], words].concat()))
    }

    fn scan_of(cursor: u64, count: usize, pattern: Option<&'static str>, kind: TypeFilter) -> ScanArgs {
        ScanArgs { cursor, count, pattern: pattern.map(|p| Bytes::from_static(p.as_bytes())), kind }
    }

    #[test]
    fn scan_arguments_follow_redis() {
        assert_eq!(parsed(&["0"]), Ok(scan_of(0, 10, None, TypeFilter::Any)));
        assert_eq!(
            parsed(&["18446744073709551615", "match", "k*", "COUNT", "5", "type", "HASH"]),
            Ok(scan_of(u64::MAX, 5, Some("k*"), TypeFilter::Only(Kind::Hash)))
        );
        assert_eq!(
            parsed(&["7", "MATCH", "a", "MATCH", "*", "COUNT", "1", "COUNT", "3"]),
            Ok(scan_of(7, 3, None, TypeFilter::Any))
        );
        assert_eq!(parsed(&["0", "COUNT", "1000000"]), Ok(scan_of(0, SCAN_COUNT_MAX, None, TypeFilter::Any)));
        assert_eq!(parsed(&["0", "TYPE", "zset"]), Ok(scan_of(0, 10, None, TypeFilter::Absent)));
        assert_eq!(parsed(&["0", "TYPE", "String"]), Ok(scan_of(0, 10, None, TypeFilter::Only(Kind::String))));
    }

    #[test]
    fn bad_scan_arguments_get_redis_errors() {
        let invalid_cursor = Frame::error("ERR invalid cursor");
        for cursor in ["-1", "abc", "18446744073709551616", "1.5", ""] {
            assert_eq!(parsed(&[cursor]), Err(invalid_cursor.clone()), "{cursor:?}");
        }
        let not_integer = Frame::error("ERR value is not an integer or out of range");
        assert_eq!(parsed(&["0", "COUNT", "many"]), Err(not_integer));
        for bad in
            [&["0", "COUNT", "0"][..], &["0", "COUNT", "-3"], &["0", "MATCH"], &["0", "COUNT"], &["0", "LIMIT", "1"]]
        {
            assert_eq!(parsed(bad), Err(syntax_error()), "{bad:?}");
        }
        assert_eq!(parsed(&["0", "TYPE", "blob"]), Err(Frame::error("ERR unknown type name 'blob'")));
    }

    #[test]
    fn a_page_is_a_cursor_and_keys() {
        let keys = vec![Bytes::from_static(b"a")];
        assert_eq!(page(Some(42), keys), Frame::Array(vec![Frame::bulk("42"), Frame::Array(vec![Frame::bulk("a")])]));
        assert_eq!(page(None, Vec::new()), Frame::Array(vec![Frame::bulk("0"), Frame::Array(Vec::new())]));
    }
}
