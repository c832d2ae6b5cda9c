//! Redis' read-modify-write string commands: INCR, DECR, INCRBY, DECRBY, INCRBYFLOAT, APPEND, SETRANGE, GETDEL
//! and GETEX, and STRLEN. The head of the key's chain evaluates each against the key's value as it orders it
//! (`ops/decide.rs` in meridian-proto), so each is atomic per key, as in Redis.

use super::commands::{integer_argument, syntax_error, Action, Session};
use super::expiry::deadline;
use super::frame::Frame;
use super::frontend::Frontend;
use super::kv::{failure, integer, read_of, returning_old, submit_one, value, write};
use bytes::Bytes;
use meridian_core::{Condition, ExpireWhen, Read, Reply, WriteOp};

pub(super) fn incr(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    incr_by(session, frontend, &args[1], 1)
}

pub(super) fn decr(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    incr_by(session, frontend, &args[1], -1)
}

pub(super) fn incrby(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    match integer_argument(&args[2]) {
        Ok(by) => incr_by(session, frontend, &args[1], by),
        Err(frame) => frame.into(),
    }
}

pub(super) fn decrby(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    match integer_argument(&args[2]).map(i64::checked_neg) {
        Ok(Some(by)) => incr_by(session, frontend, &args[1], by),
        Ok(None) => Frame::error("ERR decrement would overflow").into(),
        Err(frame) => frame.into(),
    }
}

fn incr_by(session: &mut Session, frontend: &Frontend, key: &Bytes, by: i64) -> Action {
    submit_one(frontend, write(session, key.clone(), WriteOp::IncrBy(by), Condition::Always), session, integer)
}

pub(super) fn append(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    submit_one(
        frontend,
        write(session, args[1].clone(), WriteOp::Append(args[2].clone()), Condition::Always),
        session,
        integer,
    )
}

pub(super) fn getdel(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    submit_one(
        frontend,
        returning_old(write(session, args[1].clone(), WriteOp::Delete, Condition::Always)),
        session,
        value,
    )
}

pub(super) fn strlen(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    submit_one(frontend, read_of(session, args[1].clone(), Read::Value), session, |reply| match reply {
        Reply::Value(v) => Frame::Integer(v.map_or(0, |v| v.len() as i64)),
        other => failure(other),
    })
}

pub(super) fn incrbyfloat(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    if let Err(frame) = float_argument(&args[2]) {
        return frame.into();
    }
    let op = WriteOp::IncrByFloat(args[2].clone());
    submit_one(frontend, write(session, args[1].clone(), op, Condition::Always), session, value)
}

/// A number argument as INCRBYFLOAT reads one: decimal or exponent form, no spaces, not NaN or infinite.
pub(super) fn float_argument(arg: &[u8]) -> Result<f64, Frame> {
    let text = std::str::from_utf8(arg).ok().filter(|t| !t.starts_with(char::is_whitespace));
    let n = text.and_then(|t| t.parse::<f64>().ok()).filter(|n| n.is_finite());
    n.ok_or_else(|| Frame::error("ERR value is not a valid float"))
}

pub(super) fn setrange(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let offset = match integer_argument(&args[2]).map(u64::try_from) {
        Ok(Ok(offset)) => offset,
        Ok(Err(_)) => return Frame::error("ERR offset is out of range").into(),
        Err(frame) => return frame.into(),
    };
    let op = WriteOp::SetRange(offset, args[3].clone());
    submit_one(frontend, write(session, args[1].clone(), op, Condition::Always), session, integer)
}

/// GETEX: the value, and, with an option, a new expiry (EX, PX, EXAT, PXAT) or none (PERSIST), set by the head
/// as it reads the value. Without one it is a GET.
pub(super) fn getex(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let deadline = match &args[2..] {
        [] => return submit_one(frontend, read_of(session, args[1].clone(), Read::Value), session, value),
        [persist] if persist.eq_ignore_ascii_case(b"PERSIST") => None,
        [unit, amount] => {
            let name = String::from_utf8_lossy(unit).to_ascii_uppercase();
            if !matches!(name.as_str(), "EX" | "PX" | "EXAT" | "PXAT") {
                return syntax_error().into();
            }
            match deadline(&name, amount, "getex", false) {
                Ok(at) => Some(at),
                Err(frame) => return frame.into(),
            }
        }
        _ => return syntax_error().into(),
    };
    let op = WriteOp::Expire { deadline, when: ExpireWhen::Always };
    submit_one(frontend, returning_old(write(session, args[1].clone(), op, Condition::Always)), session, value)
}
