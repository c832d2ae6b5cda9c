//! The commands that change several keys in one step: RENAME, RENAMENX, COPY and MSETNX. Each is one write, of
//! its first key, that the chain's head decides against every key it names and logs as one update
//! (`ops::decide::decide_keys`), so no reader ever sees some of its changes without the rest. That takes all of
//! its keys in one chain: keys of different chains are refused with Redis Cluster's `-CROSSSLOT` (by the head,
//! which knows the map), and Redis' hash tags put keys in one chain on purpose (docs/resp.md, "Atomic
//! commands of several keys").

use super::commands::{syntax_error, wrong_arity, Action, Session};
use super::frame::Frame;
use super::frontend::Frontend;
use super::kv::{applied, failure, submit_one, write};
use bytes::Bytes;
use meridian_core::{Condition, Reply, WriteOp};

/// RENAME key newkey: `+OK`; an absent key is `-ERR no such key`.
pub(super) fn rename(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let op = WriteOp::Rename { to: std::mem::take(&mut args[2]), replace: true };
    let req = write(session, std::mem::take(&mut args[1]), op, Condition::Always);
    submit_one(frontend, req, session, |reply| match reply {
        Reply::Written { .. } => Frame::ok(),
        other => failure(other),
    })
}

/// RENAMENX key newkey: 1 if renamed, 0 if `newkey` exists; an absent key is `-ERR no such key`.
pub(super) fn renamenx(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let op = WriteOp::Rename { to: std::mem::take(&mut args[2]), replace: false };
    submit_one(frontend, write(session, std::mem::take(&mut args[1]), op, Condition::Always), session, applied)
}

/// COPY source destination [REPLACE]: 1 if copied, 0 if the source is absent or the destination exists (without
/// REPLACE). `DB` is refused: each database is a keyspace of its own, with chains of its own.
pub(super) fn copy(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let mut replace = false;
    let mut options = args[3..].iter();
    while let Some(option) = options.next() {
        match option.to_ascii_uppercase().as_slice() {
            b"REPLACE" => replace = true,
            b"DB" if options.next().is_some() => {
                return Frame::error("ERR COPY to another database is not supported: each is a keyspace of its own")
                    .into()
            }
            _ => return syntax_error().into(),
        }
    }
    if args[1] == args[2] {
        return Frame::error("ERR source and destination objects are the same").into();
    }
    let op = WriteOp::Copy { to: std::mem::take(&mut args[2]), replace };
    submit_one(frontend, write(session, std::mem::take(&mut args[1]), op, Condition::Always), session, applied)
}

/// MSETNX key value [key value …]: 1 if every key was absent and all are set, 0 if any existed and none is. A
/// key named twice takes its last value, as in Redis.
pub(super) fn msetnx(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    if args.len().is_multiple_of(2) {
        return wrong_arity("msetnx").into();
    }
    let mut pairs: Vec<(Bytes, Bytes)> = Vec::with_capacity(args.len() / 2);
    for kv in args[1..].chunks_exact_mut(2) {
        let (key, value) = (std::mem::take(&mut kv[0]), std::mem::take(&mut kv[1]));
        match pairs.iter_mut().find(|(k, _)| *k == key) {
            Some(pair) => pair.1 = value,
            None => pairs.push((key, value)),
        }
    }
    let key = pairs[0].0.clone();
    submit_one(frontend, write(session, key, WriteOp::SetAllAbsent(pairs), Condition::Always), session, applied)
}

#[cfg(test)]
mod tests {
    use super::super::testing::Scripted;
    use super::*;
    use meridian_core::ErrorKind;

    fn b(s: &'static str) -> Bytes {
        Bytes::from_static(s.as_bytes())
    }

    #[tokio::test]
    async fn rename_and_renamenx_are_one_write_of_both_keys() {
        let core = Scripted::new(|_| Reply::Written { applied: true, existed: true });
        assert_eq!(core.run(&mut Session::new(1), &["RENAME", "a", "b"]).await, Frame::ok());
        let w = core.written();
        assert_eq!((w.key, w.op), (b("a"), WriteOp::Rename { to: b("b"), replace: true }));
        let core = Scripted::new(|_| Reply::Written { applied: false, existed: true });
        assert_eq!(core.run(&mut Session::new(1), &["renamenx", "a", "b"]).await, Frame::Integer(0));
        assert_eq!(core.written().op, WriteOp::Rename { to: b("b"), replace: false });
    }

    #[tokio::test]
    async fn refusals_come_back_in_redis_words() {
        let core = Scripted::new(|_| Reply::Error(ErrorKind::Invalid, "no such key".into()));
        assert_eq!(core.run(&mut Session::new(1), &["RENAME", "a", "b"]).await, Frame::error("ERR no such key"));
        let slot = "Keys in request don't hash to the same slot";
        let core = Scripted::new(move |_| Reply::Error(ErrorKind::CrossSlot, slot.into()));
        let got = core.run(&mut Session::new(1), &["MSETNX", "a", "1", "b", "2"]).await;
        assert_eq!(got, Frame::error(format!("CROSSSLOT {slot}")));
    }

    #[tokio::test]
    async fn copy_takes_replace_and_refuses_what_it_cannot_do_before_writing() {
        let core = Scripted::new(|_| Reply::Written { applied: true, existed: false });
        let mut session = Session::new(1);
        assert_eq!(core.run(&mut session, &["COPY", "a", "b", "replace"]).await, Frame::Integer(1));
        assert_eq!(core.written().op, WriteOp::Copy { to: b("b"), replace: true });
        let core = Scripted::new(|_| Reply::Written { applied: true, existed: false });
        for (words, error) in [
            (&["COPY", "a", "a"][..], "ERR source and destination objects are the same"),
            (
                &["COPY", "a", "b", "DB", "1"],
                "ERR COPY to another database is not supported: each is a keyspace of its own",
            ),
            (&["COPY", "a", "b", "DB"], "ERR syntax error"),
            (&["COPY", "a", "b", "NOW"], "ERR syntax error"),
        ] {
            assert_eq!(core.run(&mut session, words).await, Frame::error(error), "{words:?}");
        }
        assert!(core.asked().is_empty());
    }

    #[tokio::test]
    async fn msetnx_names_each_key_once_with_its_last_value() {
        let core = Scripted::new(|_| Reply::Written { applied: true, existed: false });
        let got = core.run(&mut Session::new(1), &["MSETNX", "a", "1", "b", "2", "a", "3"]).await;
        assert_eq!(got, Frame::Integer(1));
        let w = core.written();
        assert_eq!((w.key, w.op), (b("a"), WriteOp::SetAllAbsent(vec![(b("a"), b("3")), (b("b"), b("2"))])));
        let got = core.run(&mut Session::new(1), &["MSETNX", "a", "1", "b"]).await;
        assert_eq!(got, Frame::error("ERR wrong number of arguments for 'msetnx' command"));
    }
}
