//! Redis' hash commands: HSET, HMSET, HSETNX, HDEL, HINCRBY, HINCRBYFLOAT (writes the chain's head decides
//! against the hash it holds, like INCR), and HGET, HMGET, HGETALL, HLEN, HEXISTS (one read of the whole hash at the key's query node, picked
//! apart here). A hash is one value, so each command is atomic on its key; a hash command on a string key, or a
//! string command on a hash, gets Redis' WRONGTYPE error.

use super::commands::{integer_argument, wrong_arity, Action, Session};
use super::frame::Frame;
use super::frontend::Frontend;
use super::kv::{failure, integer, read_of, submit_one, submit_picked, write};
use super::strings::float_argument;
use bytes::Bytes;
use meridian_core::{Condition, Read, Reply, WriteOp};

pub(super) fn hset(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    match pairs(args, "hset") {
        Ok(op) => submit_one(frontend, write(session, args[1].clone(), op, Condition::Always), session, integer),
        Err(frame) => frame.into(),
    }
}

pub(super) fn hmset(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    match pairs(args, "hmset") {
        Ok(op) => {
            submit_one(frontend, write(session, args[1].clone(), op, Condition::Always), session, |reply| match reply {
                Reply::Integer(_) => Frame::ok(),
                other => failure(other),
            })
        }
        Err(frame) => frame.into(),
    }
}

/// The field-value pairs after the key, as one write.
fn pairs(args: &[Bytes], command: &str) -> Result<WriteOp, Frame> {
    if !args.len().is_multiple_of(2) {
        return Err(wrong_arity(command));
    }
    Ok(WriteOp::HashSet(args[2..].chunks_exact(2).map(|fv| (fv[0].clone(), fv[1].clone())).collect()))
}

pub(super) fn hsetnx(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let op = WriteOp::HashSetNx(args[2].clone(), args[3].clone());
    submit_one(frontend, write(session, args[1].clone(), op, Condition::Always), session, integer)
}

pub(super) fn hincrby(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    match integer_argument(&args[3]) {
        Ok(by) => {
            let op = WriteOp::HashIncrBy(args[2].clone(), by);
            submit_one(frontend, write(session, args[1].clone(), op, Condition::Always), session, integer)
        }
        Err(frame) => frame.into(),
    }
}

pub(super) fn hincrbyfloat(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    if let Err(frame) = float_argument(&args[3]) {
        return frame.into();
    }
    let op = WriteOp::HashIncrByFloat(args[2].clone(), args[3].clone());
    submit_one(frontend, write(session, args[1].clone(), op, Condition::Always), session, super::kv::value)
}

pub(super) fn hdel(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let op = WriteOp::HashDel(args[2..].to_vec());
    submit_one(frontend, write(session, args[1].clone(), op, Condition::Always), session, integer)
}

pub(super) fn hget(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let field = args[2].clone();
    read_fields(session, frontend, &args[1], move |fields| field_value(&fields, &field))
}

pub(super) fn hmget(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let wanted = args[2..].to_vec();
    read_fields(session, frontend, &args[1], move |fields| {
        Frame::Array(wanted.iter().map(|f| field_value(&fields, f)).collect())
    })
}

pub(super) fn hgetall(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    read_fields(session, frontend, &args[1], |fields| {
        Frame::Map(fields.into_iter().map(|(f, v)| (Frame::Bulk(f), Frame::Bulk(v))).collect())
    })
}

pub(super) fn hlen(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    read_fields(session, frontend, &args[1], |fields| Frame::Integer(fields.len() as i64))
}

pub(super) fn hexists(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let field = args[2].clone();
    read_fields(session, frontend, &args[1], move |fields| {
        Frame::Integer(i64::from(fields.iter().any(|(f, _)| *f == field)))
    })
}

/// Reads the hash at `key` and answers with `shape` of its fields (none when the key is absent).
pub(super) fn read_fields(
    session: &mut Session,
    frontend: &Frontend,
    key: &Bytes,
    shape: impl Fn(Vec<(Bytes, Bytes)>) -> Frame + Send + 'static,
) -> Action {
    submit_picked(frontend, read_of(session, key.clone(), Read::Hash), session, move |reply| match reply {
        Reply::Fields(fields) => shape(fields),
        other => failure(other),
    })
}

fn field_value(fields: &[(Bytes, Bytes)], field: &Bytes) -> Frame {
    fields.iter().find(|(f, _)| f == field).map_or(Frame::Null, |(_, v)| Frame::Bulk(v.clone()))
}
