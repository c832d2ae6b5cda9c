//! Redis' expiry commands: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, PERSIST, TTL and PTTL, and the deadlines of
//! SET's EX, PX, EXAT and PXAT. A key's deadline is fixed by the front-end's wall clock and judged by its
//! chain's head, which deletes the key through the chain once it passes (docs/keyspaces.md, "Expiry").

use super::commands::{integer_argument, Action, Session};
use super::frame::Frame;
use super::frontend::Frontend;
use super::kv::{failure, read_of, submit_one, write};
use bytes::Bytes;
use meridian_core::{Condition, Deadline, KeyExpiry, Read, Reply, WriteOp};

pub(super) fn expire(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let command = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    if let Some(option) = args.get(3) {
        let name = String::from_utf8_lossy(option).to_ascii_uppercase();
        return Frame::error(format!("ERR {} option '{name}' is not supported", command.to_ascii_uppercase())).into();
    }
    match deadline(&command, &args[2], &command, true) {
        Ok(at) => submit_one(
            frontend,
            write(session, args[1].clone(), WriteOp::Expire(Some(at)), Condition::Always),
            session,
            applied,
        ),
        Err(frame) => frame.into(),
    }
}

pub(super) fn persist(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    submit_one(frontend, write(session, args[1].clone(), WriteOp::Expire(None), Condition::Always), session, applied)
}

pub(super) fn ttl(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    submit_one(frontend, read_of(session, args[1].clone(), Read::Expiry), session, |reply| remaining(reply, 1_000))
}

pub(super) fn pttl(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    submit_one(frontend, read_of(session, args[1].clone(), Read::Expiry), session, |reply| remaining(reply, 1))
}

/// The deadline an expiry option or command names: `unit` is its name (EX, PX, EXAT, PXAT, or the command
/// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT), `amount` its argument. SET refuses an amount that is not positive;
/// the EXPIRE commands take it as a deadline already past, which deletes the key. Errors are worded as Redis'.
pub(super) fn deadline(unit: &str, amount: &[u8], command: &str, past_ok: bool) -> Result<Deadline, Frame> {
    let unit = unit.to_ascii_uppercase();
    let ms_per_unit = if unit.starts_with('P') { 1 } else { 1_000 };
    let absolute = unit.ends_with("AT");
    let amount = integer_argument(amount)?;
    let invalid = || Frame::error(format!("ERR invalid expire time in '{command}' command"));
    if amount <= 0 && !past_ok {
        return Err(invalid());
    }
    let ms = amount.max(0).checked_mul(ms_per_unit).filter(|ms| *ms < i64::MAX / 2).ok_or_else(invalid)? as u64;
    Ok(if absolute { Deadline::At(ms) } else { Deadline::In(ms) })
}

/// EXPIRE and PERSIST: 1 when the key's expiry changed, 0 when it did not (no key; for PERSIST, no expiry).
fn applied(reply: Reply) -> Frame {
    match reply {
        Reply::Written { applied, .. } => Frame::Integer(i64::from(applied)),
        other => failure(other),
    }
}

/// TTL and PTTL: -2 for no key, -1 for a key that does not expire, otherwise the time left in `unit_ms`
/// (rounded, as Redis rounds TTL's seconds).
fn remaining(reply: Reply, unit_ms: u64) -> Frame {
    match reply {
        Reply::Expiry(KeyExpiry::Absent) => Frame::Integer(-2),
        Reply::Expiry(KeyExpiry::Never) => Frame::Integer(-1),
        Reply::Expiry(KeyExpiry::In(ms)) => Frame::Integer(((ms + unit_ms / 2) / unit_ms) as i64),
        other => failure(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expire_commands_take_past_deadlines_and_refuse_garbage() {
        assert_eq!(deadline("expire", b"10", "expire", true), Ok(Deadline::In(10_000)));
        assert_eq!(deadline("pexpire", b"-3", "pexpire", true), Ok(Deadline::In(0)));
        assert_eq!(deadline("expireat", b"1700000000", "expireat", true), Ok(Deadline::At(1_700_000_000_000)));
        assert_eq!(deadline("pexpireat", b"5", "pexpireat", true), Ok(Deadline::At(5)));
        let overflow = deadline("expire", b"9223372036854775", "expire", true);
        assert_eq!(overflow, Err(Frame::error("ERR invalid expire time in 'expire' command")));
        let garbage = deadline("expire", b"1.5", "expire", true);
        assert_eq!(garbage, Err(Frame::error("ERR value is not an integer or out of range")));
    }

    #[test]
    fn ttl_replies_follow_redis() {
        assert_eq!(remaining(Reply::Expiry(KeyExpiry::Absent), 1_000), Frame::Integer(-2));
        assert_eq!(remaining(Reply::Expiry(KeyExpiry::Never), 1), Frame::Integer(-1));
        assert_eq!(remaining(Reply::Expiry(KeyExpiry::In(1_499)), 1_000), Frame::Integer(1));
        assert_eq!(remaining(Reply::Expiry(KeyExpiry::In(1_500)), 1_000), Frame::Integer(2));
        assert_eq!(remaining(Reply::Expiry(KeyExpiry::In(1_499)), 1), Frame::Integer(1_499));
        assert_eq!(applied(Reply::Written { applied: false, existed: true }), Frame::Integer(0));
    }
}
