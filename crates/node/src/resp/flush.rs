//! FLUSHDB and FLUSHALL: delete every key of the connection's keyspace, or of every keyspace. Each walks its
//! keyspace's ring as KEYS does (`keys.rs`), and deletes the keys of each answer as a DEL of them would, a window
//! at a time (`kv.rs`), before it asks for the next range.
//!
//! What it guarantees (docs/resp.md, "FLUSHDB and FLUSHALL"): every key present throughout the command is gone
//! when it answers `+OK`, and this connection's commands after it see none of them (they wait for it, as for a
//! SCAN: `order.rs`). It is not one atomic step as in Redis: the ranges are flushed one after another, so a
//! reader elsewhere may find some ranges flushed and others not yet, and a key another client writes meanwhile
//! may or may not survive. A failure (an unreachable chain, a timeout) stops the walk with that error, and
//! whatever was deleted so far stays deleted; the command may be sent again. `ASYNC` and `SYNC` are accepted and
//! mean the same: the answer comes once the keys are deleted.

use super::commands::{syntax_error, Action, Session};
use super::databases::keyspaces;
use super::frame::Frame;
use super::frontend::Frontend;
use super::kv::{failure, windowed};
use super::pending::Pending;
use super::scan::ask;
use crate::inbox::CoreInbox;
use bytes::Bytes;
use meridian_core::{KeyspaceId, Reply, Request, Scan, ScanWant, Write, SCAN_COUNT_MAX};
use std::sync::Arc;

pub(super) fn flushdb(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    flush(args, Some(session.keyspace), frontend)
}

pub(super) fn flushall(args: &mut [Bytes], _: &mut Session, frontend: &Frontend) -> Action {
    flush(args, None, frontend)
}

/// Flushes `keyspace`, or every keyspace for None.
fn flush(args: &[Bytes], keyspace: Option<KeyspaceId>, frontend: &Frontend) -> Action {
    match &args[1..] {
        [] => {}
        [mode] if mode.eq_ignore_ascii_case(b"async") || mode.eq_ignore_ascii_case(b"sync") => {}
        _ => return syntax_error().into(),
    }
    Pending::Walk(Box::pin(flush_walk(frontend.core.clone(), keyspace))).into()
}

async fn flush_walk(core: Arc<dyn CoreInbox>, keyspace: Option<KeyspaceId>) -> Frame {
    let all = match keyspace {
        Some(keyspace) => vec![keyspace],
        None => match keyspaces(core.as_ref()).await {
            Ok(listed) => listed.iter().map(|k| k.id).collect(),
            Err(refused) => return failure(refused),
        },
    };
    for keyspace in all {
        if let Err(failed) = flush_keyspace(&core, keyspace).await {
            return failed;
        }
    }
    Frame::ok()
}

/// Around `keyspace`'s ring, deleting the keys of each answer before asking for the next range.
async fn flush_keyspace(core: &Arc<dyn CoreInbox>, keyspace: KeyspaceId) -> Result<(), Frame> {
    let mut scan = Scan { keyspace, from: 0, want: ScanWant::Keys(SCAN_COUNT_MAX), pattern: None, kind: None };
    loop {
        let answer = ask(core.as_ref(), scan.clone()).await?;
        let deletes = answer.keys.into_iter().map(|key| Request::Write(Write::delete(keyspace, key))).collect();
        let deleted = windowed(core.clone(), deletes, all_written).await;
        if deleted != Frame::ok() {
            return Err(deleted);
        }
        match answer.next {
            Some(next) => scan.from = next,
            None => return Ok(()),
        }
    }
}

/// `+OK` if every delete was carried out, else the first failure.
fn all_written(replies: Vec<Reply>) -> Frame {
    replies.into_iter().find(|r| !matches!(r, Reply::Written { .. })).map_or_else(Frame::ok, failure)
}

#[cfg(test)]
mod tests {
    use super::super::commands::Session;
    use super::super::testing::Scripted;
    use super::*;
    use meridian_core::{ErrorKind, Scanned, WriteOp};
    use std::collections::BTreeSet;
    use std::sync::Mutex;

    /// A keyspace of three ranges (from 0, 100 and 200) holding two keys each, which deletes take away.
    fn store() -> (Arc<Scripted>, Arc<Mutex<BTreeSet<String>>>) {
        let keys: BTreeSet<String> = (0..3).flat_map(|r| (0..2).map(move |i| format!("{r}-{i}"))).collect();
        let keys = Arc::new(Mutex::new(keys));
        let held = keys.clone();
        let core = Scripted::new(move |req| match req {
            Request::Scan(scan) => {
                let range = (scan.from / 100).to_string();
                let listed: Vec<Bytes> = held
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|k| k.starts_with(&range))
                    .map(|k| Bytes::from(k.clone()))
                    .collect();
                let next = (scan.from < 200).then_some(scan.from + 100);
                let n = listed.len() as u64;
                Reply::Scanned(Scanned { keys: listed, matched: n, examined: n, next })
            }
            Request::Write(Write { key, op: WriteOp::Delete, .. }) => {
                let existed = held.lock().unwrap().remove(std::str::from_utf8(key).unwrap());
                Reply::Written { applied: existed, existed }
            }
            other => panic!("a flush sends no {other:?}"),
        });
        (core, keys)
    }

    #[tokio::test]
    async fn flushdb_deletes_every_key_of_every_range() {
        let (core, keys) = store();
        assert_eq!(core.run(&mut Session::new(1), &["FLUSHDB"]).await, Frame::ok());
        assert!(keys.lock().unwrap().is_empty());
        assert_eq!(core.run(&mut Session::new(1), &["FLUSHDB", "async"]).await, Frame::ok(), "and again, empty");
    }

    #[tokio::test]
    async fn a_flush_with_an_unknown_mode_is_refused_and_deletes_nothing() {
        let (core, keys) = store();
        assert_eq!(core.run(&mut Session::new(1), &["FLUSHDB", "LATER"]).await, syntax_error());
        assert_eq!(core.run(&mut Session::new(1), &["FLUSHALL", "SYNC", "SYNC"]).await, syntax_error());
        assert_eq!(keys.lock().unwrap().len(), 6);
    }

    #[tokio::test]
    async fn a_failed_delete_stops_the_flush_with_its_error() {
        let core = Scripted::new(|req| match req {
            Request::Scan(_) => {
                Reply::Scanned(Scanned { keys: vec![Bytes::from("k")], matched: 1, examined: 1, next: None })
            }
            _ => Reply::Error(ErrorKind::Timeout, "no answer".into()),
        });
        assert_eq!(core.run(&mut Session::new(1), &["FLUSHDB"]).await, Frame::error("TIMEOUT no answer"));
    }
}
