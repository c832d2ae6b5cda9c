//! Redis' expiry commands: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, PERSIST, TTL, PTTL, EXPIRETIME and PEXPIRETIME,
//! and the deadlines of
//! SET's EX, PX, EXAT and PXAT. A key's deadline is fixed by the front-end's wall clock and judged by its
//! chain's head, which deletes the key through the chain once it passes (docs/keyspaces.md, "Expiry").

use super::commands::{integer_argument, Action, Session};
use super::frame::Frame;
use super::frontend::Frontend;
use super::kv::{applied, failure, read_of, submit_one, write};
use bytes::Bytes;
use meridian_core::{Condition, Deadline, ExpireWhen, KeyExpiry, Read, Reply, WriteOp};

pub(super) fn expire(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let command = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    // Redis reads the options before the time, so a bad option is the error a command with both gets.
    let parsed = expire_when(&args[3..]).and_then(|when| Ok((when, deadline(&command, &args[2], &command, true)?)));
    match parsed {
        Ok((when, at)) => {
            let op = WriteOp::Expire { deadline: Some(at), when };
            submit_one(frontend, write(session, args[1].clone(), op, Condition::Always), session, applied)
        }
        Err(frame) => frame.into(),
    }
}

/// EXPIRE's options as Redis 7 reads them: NX, XX, GT and LT in any case and order; NX with any other, or GT with
/// LT, is refused, and so is anything else, each with Redis' words.
fn expire_when(options: &[Bytes]) -> Result<ExpireWhen, Frame> {
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for option in options {
        match String::from_utf8_lossy(option).to_ascii_uppercase().as_str() {
            "NX" => nx = true,
            "XX" => xx = true,
            "GT" => gt = true,
            "LT" => lt = true,
            _ => return Err(Frame::error(format!("ERR Unsupported option {}", String::from_utf8_lossy(option)))),
        }
    }
    match (nx, xx, gt, lt) {
        (true, false, false, false) => Ok(ExpireWhen::Nx),
        (true, ..) => Err(Frame::error("ERR NX and XX, GT or LT options at the same time are not compatible")),
        (_, _, true, true) => Err(Frame::error("ERR GT and LT options at the same time are not compatible")),
        (_, _, true, false) => Ok(ExpireWhen::Gt),
        (_, true, false, true) => Ok(ExpireWhen::XxLt),
        (_, false, false, true) => Ok(ExpireWhen::Lt),
        (_, true, false, false) => Ok(ExpireWhen::Xx),
        (_, false, false, false) => Ok(ExpireWhen::Always),
    }
}

pub(super) fn persist(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let op = WriteOp::Expire { deadline: None, when: ExpireWhen::Always };
    submit_one(frontend, write(session, args[1].clone(), op, Condition::Always), session, applied)
}

pub(super) fn ttl(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    submit_one(frontend, read_of(session, args[1].clone(), Read::Expiry), session, |reply| remaining(reply, 1_000))
}

pub(super) fn pttl(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    submit_one(frontend, read_of(session, args[1].clone(), Read::Expiry), session, |reply| remaining(reply, 1))
}

pub(super) fn expiretime(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    submit_one(frontend, read_of(session, args[1].clone(), Read::Deadline), session, |reply| unix_time(reply, 1_000))
}

pub(super) fn pexpiretime(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    submit_one(frontend, read_of(session, args[1].clone(), Read::Deadline), session, |reply| unix_time(reply, 1))
}

/// EXPIRETIME and PEXPIRETIME: -2 for no key, -1 for a key that does not expire, otherwise its deadline as a Unix
/// time in `unit_ms` (truncated, as Redis divides).
fn unix_time(reply: Reply, unit_ms: u64) -> Frame {
    match reply {
        Reply::Expiry(KeyExpiry::At(ms)) => Frame::Integer(i64::try_from(ms / unit_ms).unwrap_or(i64::MAX)),
        other => remaining(other, unit_ms),
    }
}

/// The deadline an expiry option or command names: `unit` is its name (EX, PX, EXAT, PXAT, or the command
/// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT), `amount` its argument. SET refuses an amount that is not positive;
/// the EXPIRE commands take it as a deadline already past, which deletes the key. As in Redis, an amount whose
/// milliseconds, or whose deadline from now, would not fit a signed 64-bit count is refused, in Redis' words.
pub(super) fn deadline(unit: &str, amount: &[u8], command: &str, past_ok: bool) -> Result<Deadline, Frame> {
    deadline_from(unit, amount, command, past_ok, wall_ms())
}

/// [`deadline`] on a wall clock reading of `now_ms`, which a relative deadline must fit after.
fn deadline_from(unit: &str, amount: &[u8], command: &str, past_ok: bool, now_ms: i64) -> Result<Deadline, Frame> {
    let unit = unit.to_ascii_uppercase();
    let ms_per_unit = if unit.starts_with('P') { 1 } else { 1_000 };
    let absolute = unit.ends_with("AT");
    let amount = integer_argument(amount)?;
    let invalid = || Frame::error(format!("ERR invalid expire time in '{command}' command"));
    if amount <= 0 && !past_ok {
        return Err(invalid());
    }
    let ms = amount.checked_mul(ms_per_unit).ok_or_else(invalid)?;
    if !absolute && ms > i64::MAX - now_ms {
        return Err(invalid());
    }
    // A deadline already past is the same to every key, whenever it was: the key goes.
    let ms = u64::try_from(ms).unwrap_or(0);
    Ok(if absolute { Deadline::At(ms) } else { Deadline::In(ms) })
}

/// This node's wall clock, in Unix milliseconds.
fn wall_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
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
        let now = 1_700_000_000_000;
        let at = |unit: &str, amount: &[u8]| deadline_from(unit, amount, &unit.to_ascii_lowercase(), true, now);
        assert_eq!(at("expire", b"10"), Ok(Deadline::In(10_000)));
        assert_eq!(at("pexpire", b"-3"), Ok(Deadline::In(0)));
        assert_eq!(at("expireat", b"1700000000"), Ok(Deadline::At(1_700_000_000_000)));
        assert_eq!(at("pexpireat", b"5"), Ok(Deadline::At(5)));
        let invalid = |command: &str| Err(Frame::error(format!("ERR invalid expire time in '{command}' command")));
        // Seconds whose milliseconds overflow, either way; a relative deadline past the end of time.
        assert_eq!(at("expire", b"9223372036854776"), invalid("expire"));
        assert_eq!(at("expire", b"-9223372036854776"), invalid("expire"), "Redis keeps the key");
        assert_eq!(at("pexpire", b"9223372036854775000"), invalid("pexpire"));
        // An absolute one is not added to anything: Redis takes it.
        assert_eq!(at("pexpireat", b"9223372036854770000"), Ok(Deadline::At(9_223_372_036_854_770_000)));
        assert_eq!(at("expireat", b"-5"), Ok(Deadline::At(0)), "long past");
        let garbage = at("expire", b"1.5");
        assert_eq!(garbage, Err(Frame::error("ERR value is not an integer or out of range")));
    }

    #[test]
    fn expire_options_are_read_as_redis_reads_them() {
        let when =
            |options: &[&str]| expire_when(&options.iter().map(|o| Bytes::from(o.to_string())).collect::<Vec<_>>());
        assert_eq!(when(&[]), Ok(ExpireWhen::Always));
        assert_eq!(when(&["nx"]), Ok(ExpireWhen::Nx));
        assert_eq!(when(&["XX", "gt"]), Ok(ExpireWhen::Gt));
        assert_eq!(when(&["lt", "xx"]), Ok(ExpireWhen::XxLt));
        assert_eq!(when(&["LT"]), Ok(ExpireWhen::Lt));
        let refused = |why: &str| Err(Frame::error(why.to_string()));
        assert_eq!(when(&["NX", "GT"]), refused("ERR NX and XX, GT or LT options at the same time are not compatible"));
        assert_eq!(when(&["gt", "LT"]), refused("ERR GT and LT options at the same time are not compatible"));
        assert_eq!(when(&["Soon"]), refused("ERR Unsupported option Soon"));
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
