//! Redis' read-modify-write string commands: INCR, DECR, INCRBY, DECRBY, APPEND and GETDEL, and STRLEN. The
//! head of the key's chain evaluates each against the key's value as it orders it (`chain/decide.rs` in
//! meridian-proto), so each is atomic per key, as in Redis.

use super::commands::{integer_argument, Action, Session};
use super::frame::Frame;
use super::frontend::Frontend;
use super::kv::{failure, integer, read_of, returning_old, submit_one, value, write};
use bytes::Bytes;
use meridian_core::{Condition, Read, Reply, WriteOp};

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
