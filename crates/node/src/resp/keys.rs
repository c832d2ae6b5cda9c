//! KEYS pattern: every key of the connection's keyspace that the pattern matches, as one array. It walks the
//! ring as SCAN does (`scan.rs`), with requests of the largest COUNT a chain answers and the pattern applied by
//! each chain's query node, so what comes back is only matching keys. The walk is refused once its keys would
//! cost more than [`MADE_REPLY_MAX`](super::made_replies::MADE_REPLY_MAX): SCAN reads a keyspace of any size.
//! Like SCAN's, the reply is not a snapshot: a key present throughout is listed once, one added or deleted
//! meanwhile may or may not be.

use super::commands::{Action, Session};
use super::frame::Frame;
use super::frontend::Frontend;
use super::made_replies::{cost, too_large, MADE_REPLY_MAX};
use super::pending::Pending;
use super::scan::ask;
use crate::inbox::CoreInbox;
use bytes::Bytes;
use meridian_core::{Request, Scan, ScanWant, SCAN_COUNT_MAX};
use std::sync::Arc;

pub(super) fn keys(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let pattern = std::mem::take(&mut args[1]);
    // `*` matches every key: no filter to apply at all, as in SCAN.
    let pattern = (pattern.as_ref() != b"*").then_some(pattern);
    let first = Scan { keyspace: session.keyspace, from: 0, want: ScanWant::Keys(SCAN_COUNT_MAX), pattern, kind: None };
    if let Err(why) = frontend.limits.check(&Request::Scan(first.clone())) {
        return Frame::error(format!("ERR {why}")).into();
    }
    Pending::Walk(Box::pin(keys_walk(frontend.core.clone(), first))).into()
}

/// Around the ring from `first`, gathering the keys each answer lists.
async fn keys_walk(core: Arc<dyn CoreInbox>, first: Scan) -> Frame {
    let (mut keys, mut spent) = (Vec::new(), 0usize);
    let mut scan = first;
    loop {
        let answer = match ask(core.as_ref(), scan.clone()).await {
            Ok(answer) => answer,
            Err(frame) => return frame,
        };
        spent += answer.keys.iter().map(|key| cost(key.len())).sum::<usize>();
        if spent > MADE_REPLY_MAX {
            return too_large("KEYS", "use SCAN");
        }
        keys.extend(answer.keys.into_iter().map(Frame::Bulk));
        match answer.next {
            Some(next) => scan.from = next,
            None => return Frame::Array(keys),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::commands::Session;
    use super::super::testing::Scripted;
    use super::*;
    use meridian_core::{ErrorKind, Reply, Scanned};

    /// The ring position after `from` on a ring of three partitions, starting at 0, 100 and 200.
    fn after(from: u64) -> Option<u64> {
        match from {
            0 => Some(100),
            100 => Some(200),
            200 => None,
            other => panic!("a cursor no answer gave: {other}"),
        }
    }

    /// A ring of three partitions, each answering with `per` keys named after it.
    fn ring(per: usize) -> Arc<Scripted> {
        Scripted::new(move |req| {
            let Request::Scan(scan) = req else { panic!("KEYS only scans") };
            let keys = (0..per).map(|i| Bytes::from(format!("{}-{i}", scan.from / 100))).collect();
            Reply::Scanned(Scanned { keys, matched: per as u64, examined: per as u64, next: after(scan.from) })
        })
    }

    #[tokio::test]
    async fn keys_walks_the_whole_ring_with_the_pattern() {
        let core = ring(2);
        let reply = core.run(&mut Session::new(1), &["KEYS", "*-?"]).await;
        let want = ["0-0", "0-1", "1-0", "1-1", "2-0", "2-1"].map(Frame::bulk).to_vec();
        assert_eq!(reply, Frame::Array(want));
        let scans: Vec<Scan> =
            core.asked().into_iter().map(|r| if let Request::Scan(s) = r { s } else { unreachable!() }).collect();
        assert_eq!(scans.iter().map(|s| s.from).collect::<Vec<_>>(), [0, 100, 200]);
        assert!(scans.iter().all(|s| s.pattern.as_deref() == Some(b"*-?") && s.want == ScanWant::Keys(SCAN_COUNT_MAX)));
        let every = ring(1);
        every.run(&mut Session::new(1), &["KEYS", "*"]).await;
        assert!(every.asked().iter().all(|r| matches!(r, Request::Scan(Scan { pattern: None, .. }))), "no filter");
    }

    #[tokio::test]
    async fn keys_past_the_reply_bound_are_refused() {
        // Each partition answers with one key of 30 MiB (the same bytes each time, so the test holds them once).
        let key = Bytes::from(vec![b'k'; 30 << 20]);
        let core = Scripted::new(move |req| {
            let Request::Scan(scan) = req else { panic!("KEYS only scans") };
            Reply::Scanned(Scanned { keys: vec![key.clone()], matched: 1, examined: 1, next: after(scan.from) })
        });
        assert_eq!(core.run(&mut Session::new(1), &["KEYS", "*"]).await, too_large("KEYS", "use SCAN"));
        assert_eq!(core.asked().len(), 3, "refused once the third answer took it past the bound");
    }

    #[tokio::test]
    async fn a_chain_that_fails_fails_the_command() {
        let core = Scripted::new(|_| Reply::Error(ErrorKind::Timeout, "no answer".into()));
        assert_eq!(core.run(&mut Session::new(1), &["KEYS", "*"]).await, Frame::error("TIMEOUT no answer"));
        let long = "x".repeat(5000);
        let refused = core.run(&mut Session::new(1), &["KEYS", &long]).await;
        assert_eq!(refused, Frame::error("ERR pattern is 5000 bytes; the limit is 4096"));
    }
}
