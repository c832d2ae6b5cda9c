//! SET's older forms, as Redis 7 defines them in terms of SET: SETNX (SET NX answered 1 or 0), SETEX and PSETEX
//! (SET EX and SET PX) and GETSET (SET … GET). Each is one put, ordered by its key's chain head like SET.

use super::commands::{Action, Session};
use super::expiry::deadline;
use super::frontend::Frontend;
use super::kv::{applied, returning_old, submit_one, value, write, written_or_null};
use bytes::Bytes;
use meridian_core::{Condition, Ttl, WriteOp};

/// SETNX key value: 1 if the key was absent and is now set, 0 if it was there (whatever its kind), as SET NX.
pub(super) fn setnx(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let op = put(&mut args[2], Ttl::Clear);
    submit_one(frontend, write(session, std::mem::take(&mut args[1]), op, Condition::IfAbsent), session, applied)
}

/// SETEX key seconds value.
pub(super) fn setex(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    put_expiring(args, session, frontend, "EX", "setex")
}

/// PSETEX key milliseconds value.
pub(super) fn psetex(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    put_expiring(args, session, frontend, "PX", "psetex")
}

/// GETSET key value: the value the key had (nil if none), as SET … GET; a hash gets WRONGTYPE and stays.
pub(super) fn getset(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let op = put(&mut args[2], Ttl::Clear);
    let req = returning_old(write(session, std::mem::take(&mut args[1]), op, Condition::Always));
    submit_one(frontend, req, session, value)
}

/// SETEX and PSETEX: SET with EX or PX (`unit`); a time that is not positive is refused in Redis' words,
/// naming `command`, before anything is written.
fn put_expiring(args: &mut [Bytes], session: &mut Session, frontend: &Frontend, unit: &str, command: &str) -> Action {
    match deadline(unit, &args[2], command, false) {
        Ok(at) => {
            let op = put(&mut args[3], Ttl::Expire(at));
            let req = write(session, std::mem::take(&mut args[1]), op, Condition::Always);
            submit_one(frontend, req, session, written_or_null)
        }
        Err(frame) => frame.into(),
    }
}

fn put(value: &mut Bytes, ttl: Ttl) -> WriteOp {
    WriteOp::Put { value: std::mem::take(value), ttl }
}

#[cfg(test)]
mod tests {
    use super::super::frame::Frame;
    use super::super::testing::Scripted;
    use super::*;
    use meridian_core::{Deadline, Reply};

    fn put_of(value: &str, ttl: Ttl) -> WriteOp {
        WriteOp::Put { value: Bytes::copy_from_slice(value.as_bytes()), ttl }
    }

    #[tokio::test]
    async fn setnx_is_a_put_if_absent_answered_one_or_zero() {
        for (applied, answer) in [(true, 1), (false, 0)] {
            let core = Scripted::new(move |_| Reply::Written { applied, existed: !applied });
            assert_eq!(core.run(&mut Session::new(1), &["SETNX", "k", "v"]).await, Frame::Integer(answer));
            let w = core.written();
            assert_eq!((w.cond, w.op, w.get_old), (Condition::IfAbsent, put_of("v", Ttl::Clear), false));
        }
    }

    #[tokio::test]
    async fn setex_and_psetex_are_puts_with_a_deadline() {
        let core = Scripted::new(|_| Reply::Written { applied: true, existed: false });
        assert_eq!(core.run(&mut Session::new(1), &["SETEX", "k", "10", "v"]).await, Frame::ok());
        assert_eq!(core.written().op, put_of("v", Ttl::Expire(Deadline::In(10_000))));
        let core = Scripted::new(|_| Reply::Written { applied: true, existed: false });
        assert_eq!(core.run(&mut Session::new(1), &["psetex", "k", "5", "v"]).await, Frame::ok());
        assert_eq!(
            (core.written().op, core.written().cond),
            (put_of("v", Ttl::Expire(Deadline::In(5))), Condition::Always)
        );
    }

    #[tokio::test]
    async fn setex_refuses_a_time_redis_refuses_and_writes_nothing() {
        let core = Scripted::new(|_| Reply::Written { applied: true, existed: false });
        let mut session = Session::new(1);
        for (words, error) in [
            (["SETEX", "k", "0", "v"], "ERR invalid expire time in 'setex' command"),
            (["SETEX", "k", "-1", "v"], "ERR invalid expire time in 'setex' command"),
            (["SETEX", "k", "9223372036854775807", "v"], "ERR invalid expire time in 'setex' command"),
            (["PSETEX", "k", "0", "v"], "ERR invalid expire time in 'psetex' command"),
            (["SETEX", "k", "soon", "v"], "ERR value is not an integer or out of range"),
        ] {
            assert_eq!(core.run(&mut session, &words).await, Frame::error(error), "{words:?}");
        }
        assert!(core.asked().is_empty());
    }

    #[tokio::test]
    async fn getset_is_a_put_answered_with_the_old_value() {
        let core = Scripted::new(|_| Reply::Value(Some(Bytes::from_static(b"old"))));
        assert_eq!(core.run(&mut Session::new(1), &["GETSET", "k", "new"]).await, Frame::bulk("old"));
        let w = core.written();
        assert_eq!((w.cond, w.op, w.get_old), (Condition::Always, put_of("new", Ttl::Clear), true));
    }
}
