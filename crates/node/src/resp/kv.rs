//! The key-value commands, translated into core [`Request`]s.
//!
//! Every request is checked against the node's [`Limits`](meridian_core::Limits) before anything is
//! submitted, so an oversized key or value changes nothing anywhere. Multi-key commands (DEL, UNLINK,
//! EXISTS, MGET, MSET) submit one request per key and answer once all have answered: each key is read or
//! written independently, so MSET is atomic per key, not across keys, and if some of its keys fail
//! the others may still have been written (the reply is then the first error). A command of more than
//! [`MULTI_KEY_WINDOW`] keys keeps that many of its requests in the core at once and submits the next as
//! the oldest is answered, so one command cannot flood the queues to the other nodes.

use super::commands::{syntax_error, wrong_arity, Action, Session};
use super::expiry::deadline;
use super::frame::Frame;
use super::frontend::Frontend;
use super::pending::{receive, Pending};
use crate::inbox::{Answer, CoreInbox, Handover};
use bytes::Bytes;
use meridian_core::{Condition, ErrorKind, KeyExpiry, Kind, Read, Reply, Request, Ttl, Write, WriteOp};
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::oneshot;

pub(super) fn get(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    submit_one(frontend, read(session, std::mem::take(&mut args[1])), session, value)
}

pub(super) fn set(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let options = set_options(&args[3..]);
    let (key, data) = (std::mem::take(&mut args[1]), std::mem::take(&mut args[2]));
    match options {
        Ok(SetOptions { cond, ttl, get: false }) => {
            let op = WriteOp::Put { value: data, ttl };
            submit_one(frontend, write(session, key, op, cond), session, written_or_null)
        }
        Ok(SetOptions { cond, ttl, get: true }) => {
            let op = WriteOp::Put { value: data, ttl };
            submit_one(frontend, returning_old(write(session, key, op, cond)), session, value)
        }
        Err(frame) => frame.into(),
    }
}

/// DEL, and UNLINK: Redis' UNLINK frees a value's memory off its one thread, but a Meridian delete is a
/// tombstone ordered by the key's chain either way, so the two are one command.
pub(super) fn del(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let delete = |key: &mut Bytes| write(session, std::mem::take(key), WriteOp::Delete, Condition::Always);
    let deletes = args[1..].iter_mut().map(delete).collect();
    submit_many(frontend, deletes, session, count_existed)
}

/// EXISTS asks for each key's expiry, which every kind of value has, rather than its value, which a hash
/// would refuse.
pub(super) fn exists(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let reads = args[1..].iter_mut().map(|key| read_of(session, std::mem::take(key), Read::Expiry)).collect();
    submit_many(frontend, reads, session, count_present)
}

/// TYPE: `string`, `hash`, or `none` for an absent key, as Redis names them.
pub(super) fn key_type(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    submit_one(frontend, read_of(session, std::mem::take(&mut args[1]), Read::Kind), session, |reply| match reply {
        Reply::Kind(None) => Frame::Simple("none"),
        Reply::Kind(Some(Kind::String)) => Frame::Simple("string"),
        Reply::Kind(Some(Kind::Hash)) => Frame::Simple("hash"),
        other => failure(other),
    })
}

pub(super) fn mget(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    submit_many(frontend, args[1..].iter_mut().map(|key| read(session, std::mem::take(key))).collect(), session, values)
}

pub(super) fn mset(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    if args.len().is_multiple_of(2) {
        return wrong_arity("mset").into();
    }
    let put = |kv: &mut [Bytes]| {
        let op = WriteOp::Put { value: std::mem::take(&mut kv[1]), ttl: Ttl::Clear };
        write(session, std::mem::take(&mut kv[0]), op, Condition::Always)
    };
    let writes = args[1..].chunks_exact_mut(2).map(put).collect();
    submit_many(frontend, writes, session, all_written)
}

/// What SET's options ask for.
#[derive(Debug, PartialEq, Eq)]
struct SetOptions {
    cond: Condition,
    ttl: Ttl,
    /// GET: answer with the key's previous value.
    get: bool,
}

/// SET's options: NX or XX, one of EX, PX, EXAT, PXAT and KEEPTTL, and GET; anything else, or two options of a
/// kind, is a syntax error, as in Redis.
fn set_options(options: &[Bytes]) -> Result<SetOptions, Frame> {
    let mut set = SetOptions { cond: Condition::Always, ttl: Ttl::Clear, get: false };
    let mut words = options.iter();
    while let Some(option) = words.next() {
        let name = String::from_utf8_lossy(option).to_ascii_uppercase();
        match (name.as_str(), set.cond, set.ttl) {
            ("NX", Condition::Always, _) => set.cond = Condition::IfAbsent,
            ("XX", Condition::Always, _) => set.cond = Condition::IfPresent,
            ("KEEPTTL", _, Ttl::Clear) => set.ttl = Ttl::Keep,
            ("EX" | "PX" | "EXAT" | "PXAT", _, Ttl::Clear) => {
                let amount = words.next().ok_or_else(syntax_error)?;
                set.ttl = Ttl::Expire(deadline(&name, amount, "set", false)?);
            }
            ("GET", ..) if !set.get => set.get = true,
            _ => return Err(syntax_error()),
        }
    }
    Ok(set)
}

pub(super) fn read_of(session: &Session, key: Bytes, read: Read) -> Request {
    Request::Get { keyspace: session.keyspace, key, read }
}

fn read(session: &Session, key: Bytes) -> Request {
    read_of(session, key, Read::Value)
}

pub(super) fn write(session: &Session, key: Bytes, op: WriteOp, cond: Condition) -> Request {
    Request::Write(Write { cond, ..Write::new(session.keyspace, key, op) })
}

/// The same write, answered with the value its key had before it (SET … GET, GETDEL).
pub(super) fn returning_old(req: Request) -> Request {
    match req {
        Request::Write(w) => Request::Write(Write { get_old: true, ..w }),
        other => other,
    }
}

/// The request goes before the session in the arguments so that it can be made from the session first.
pub(super) fn submit_one(
    frontend: &Frontend,
    req: Request,
    session: &mut Session,
    shape: fn(Reply) -> Frame,
) -> Action {
    if let Err(why) = frontend.limits.check(&req) {
        return Frame::error(format!("ERR {why}")).into();
    }
    Pending::One { rx: frontend.submit(session, req), shape }.into()
}

/// [`submit_one`] for a reply shaped by what the command asked (HGET's field).
pub(super) fn submit_picked(
    frontend: &Frontend,
    req: Request,
    session: &mut Session,
    pick: impl Fn(Reply) -> Frame + Send + 'static,
) -> Action {
    if let Err(why) = frontend.limits.check(&req) {
        return Frame::error(format!("ERR {why}")).into();
    }
    Pending::Picked { rx: frontend.submit(session, req), pick: Box::new(pick) }.into()
}

/// Requests of one multi-key command in the core at once. Most of them go to other nodes, whose queues hold
/// a few thousand messages (`PEER_QUEUE_MAX`): an MSET of 8,000 keys submitted at once through one node of
/// three overflowed them, and the writes that were dropped timed out.
pub(crate) const MULTI_KEY_WINDOW: usize = 512;

/// Submits every request, or none if any is over the limits: all at once up to [`MULTI_KEY_WINDOW`] of them,
/// a window at a time beyond.
fn submit_many(
    frontend: &Frontend,
    reqs: Vec<Request>,
    session: &mut Session,
    fold: fn(Vec<Reply>) -> Frame,
) -> Action {
    if let Some(why) = reqs.iter().find_map(|req| frontend.limits.check(req).err()) {
        return Frame::error(format!("ERR {why}")).into();
    }
    if reqs.len() > MULTI_KEY_WINDOW {
        // A walk starts in its turn, once every earlier command of the connection is answered, and later
        // commands on its keys wait for it (`order.rs`): the connection's order holds as if it went at once.
        return Pending::Walk(Box::pin(windowed(frontend.core.clone(), reqs, fold))).into();
    }
    Pending::many(reqs.into_iter().map(|req| frontend.submit(session, req)).collect(), fold).into()
}

/// Keeps at most [`MULTI_KEY_WINDOW`] of `reqs` in the core, topping the window up once half of it is
/// answered, and folds the replies in order.
pub(super) async fn windowed(core: Arc<dyn CoreInbox>, reqs: Vec<Request>, fold: fn(Vec<Reply>) -> Frame) -> Frame {
    let mut replies = Vec::with_capacity(reqs.len());
    let mut todo = reqs.into_iter().peekable();
    let mut in_flight: VecDeque<Answer> = VecDeque::with_capacity(MULTI_KEY_WINDOW);
    loop {
        if in_flight.len() <= MULTI_KEY_WINDOW / 2 && todo.peek().is_some() {
            let mut handover = Handover::default();
            for req in todo.by_ref().take(MULTI_KEY_WINDOW - in_flight.len()) {
                let (tx, rx) = oneshot::channel();
                if handover.push(req, tx) {
                    handover.take().into_iter().for_each(|batch| core.enqueue(batch));
                }
                in_flight.push_back(Answer::Coming(rx));
            }
            handover.take().into_iter().for_each(|batch| core.enqueue(batch));
        }
        let Some(mut rx) = in_flight.pop_front() else { return fold(replies) };
        replies.push(receive(&mut rx).await);
    }
}

/// EXPIRE, PERSIST, SETNX: 1 when the write applied, 0 when it did not (no key, no expiry, a key already there).
pub(super) fn applied(reply: Reply) -> Frame {
    match reply {
        Reply::Written { applied, .. } => Frame::Integer(i64::from(applied)),
        other => failure(other),
    }
}

/// INCR, APPEND and the hash writes: their numeric result.
pub(super) fn integer(reply: Reply) -> Frame {
    match reply {
        Reply::Integer(n) => Frame::Integer(n),
        other => failure(other),
    }
}

pub(super) fn value(reply: Reply) -> Frame {
    match reply {
        Reply::Value(Some(v)) => Frame::Bulk(v),
        Reply::Value(None) => Frame::Null,
        other => failure(other),
    }
}

/// SET: `+OK` when the write applied, a null bulk when its NX/XX condition did not hold.
pub(super) fn written_or_null(reply: Reply) -> Frame {
    match reply {
        Reply::Written { applied: true, .. } => Frame::ok(),
        Reply::Written { applied: false, .. } => Frame::Null,
        other => failure(other),
    }
}

fn count_existed(replies: Vec<Reply>) -> Frame {
    let mut count = 0;
    for reply in replies {
        match reply {
            Reply::Written { existed, .. } => count += i64::from(existed),
            other => return failure(other),
        }
    }
    Frame::Integer(count)
}

fn count_present(replies: Vec<Reply>) -> Frame {
    let mut count = 0;
    for reply in replies {
        match reply {
            Reply::Expiry(e) => count += i64::from(e != KeyExpiry::Absent),
            other => return failure(other),
        }
    }
    Frame::Integer(count)
}

/// MGET: a key that is not a string reads as absent, as in Redis.
fn values(replies: Vec<Reply>) -> Frame {
    let mut frames = Vec::with_capacity(replies.len());
    for reply in replies {
        match reply {
            Reply::Value(v) => frames.push(v.map_or(Frame::Null, Frame::Bulk)),
            Reply::Error(ErrorKind::WrongType, _) => frames.push(Frame::Null),
            other => return failure(other),
        }
    }
    Frame::Array(frames)
}

fn all_written(replies: Vec<Reply>) -> Frame {
    match replies.into_iter().find(|r| !matches!(r, Reply::Written { applied: true, .. })) {
        Some(other) => failure(other),
        None => Frame::ok(),
    }
}

/// An error reply, or a reply of the wrong kind for the request (a bug in the protocol core, reported
/// rather than hidden).
pub(super) fn failure(reply: Reply) -> Frame {
    match reply {
        Reply::Error(kind, msg) => Frame::error(format!("{} {msg}", kind.code())),
        other => Frame::error(format!("ERR internal error: the protocol core answered {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::super::commands::args as opts;
    use super::*;

    #[test]
    fn set_options_follow_redis() {
        use meridian_core::Deadline;
        let set_of = |cond, ttl, get| SetOptions { cond, ttl, get };
        assert_eq!(set_options(&opts(&[])), Ok(set_of(Condition::Always, Ttl::Clear, false)));
        assert_eq!(set_options(&opts(&["nx"])), Ok(set_of(Condition::IfAbsent, Ttl::Clear, false)));
        assert_eq!(set_options(&opts(&["XX", "keepttl"])), Ok(set_of(Condition::IfPresent, Ttl::Keep, false)));
        assert_eq!(
            set_options(&opts(&["ex", "10", "NX"])),
            Ok(set_of(Condition::IfAbsent, Ttl::Expire(Deadline::In(10_000)), false))
        );
        assert_eq!(
            set_options(&opts(&["PX", "5"])),
            Ok(set_of(Condition::Always, Ttl::Expire(Deadline::In(5)), false))
        );
        assert_eq!(
            set_options(&opts(&["pxat", "77"])),
            Ok(set_of(Condition::Always, Ttl::Expire(Deadline::At(77)), false))
        );
        assert_eq!(
            set_options(&opts(&["EXAT", "7"])),
            Ok(set_of(Condition::Always, Ttl::Expire(Deadline::At(7_000)), false))
        );
        for bad in [&["NX", "XX"][..], &["bogus"], &["EX"], &["EX", "1", "PX", "1"], &["KEEPTTL", "EX", "1"]] {
            assert_eq!(set_options(&opts(bad)), Err(syntax_error()), "{bad:?}");
        }
        let invalid = Frame::error("ERR invalid expire time in 'set' command");
        assert_eq!(set_options(&opts(&["EX", "0"])), Err(invalid.clone()));
        assert_eq!(set_options(&opts(&["PX", "-5"])), Err(invalid.clone()));
        assert_eq!(set_options(&opts(&["EX", "9223372036854775807"])), Err(invalid));
        let nan = set_options(&opts(&["EX", "soon"]));
        assert_eq!(nan, Err(Frame::error("ERR value is not an integer or out of range")));
        assert_eq!(set_options(&opts(&["get", "NX"])), Ok(set_of(Condition::IfAbsent, Ttl::Clear, true)));
        assert_eq!(set_options(&opts(&["GET", "get"])), Err(syntax_error()));
    }

    #[test]
    fn replies_map_to_redis_shapes() {
        assert_eq!(written_or_null(Reply::Written { applied: false, existed: true }), Frame::Null);
        assert_eq!(value(Reply::Error(ErrorKind::Busy, "full".into())), Frame::error("BUSY full"));
        let del =
            vec![Reply::Written { applied: true, existed: true }, Reply::Written { applied: true, existed: false }];
        assert_eq!(count_existed(del), Frame::Integer(1));
        let mget = vec![Reply::Value(None), Reply::Value(Some(Bytes::from_static(b"v")))];
        assert_eq!(values(mget), Frame::Array(vec![Frame::Null, Frame::Bulk(Bytes::from_static(b"v"))]));
        let partial =
            vec![Reply::Written { applied: true, existed: false }, Reply::Error(ErrorKind::Timeout, "t".into())];
        assert_eq!(all_written(partial), Frame::error("TIMEOUT t"));
        assert!(
            matches!(value(Reply::Written { applied: true, existed: true }), Frame::Error(e) if e.contains("internal"))
        );
    }
}
