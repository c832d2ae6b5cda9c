//! The driver carries out `after_sync` effects only after `sync()` has returned: a client's reply and
//! a message to another node, both marked after-sync, must not be seen before the sync that covers the
//! write. The test core makes each sync slow, so a driver that released them early would be caught.
//! In async mode the opposite holds: the reply is released at once and the sync comes later.

use crate::resp_client::{Client, Resp};
use crate::support::{cluster, options, within};
use meridian_core::DurabilityMode;
use meridian_core::{Effects, NodeId, Process, Reply, Request, RequestId, Time};
use meridian_node::{start_node, SyncPolicy};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Journal = Arc<Mutex<Vec<String>>>;

/// On a write: records it, marks the store dirty, replies after sync and tells `peer` after sync.
struct Recorder {
    me: NodeId,
    peer: NodeId,
    journal: Journal,
}

impl Recorder {
    fn note(&self, event: String) {
        self.journal.lock().unwrap().push(format!("{}: {event}", self.me));
    }
}

type Out = Effects<String, ()>;

impl Process for Recorder {
    type Msg = String;
    type Timer = ();

    fn start(&mut self, _: Time, _: &mut Out) {}

    fn on_message(&mut self, _: Time, from: NodeId, msg: String, _: &mut Out) {
        self.note(format!("received {msg} from {from}"));
    }

    fn on_timer(&mut self, _: Time, _: (), _: &mut Out) {}

    fn on_request(&mut self, _: Time, id: RequestId, req: Request, out: &mut Out) {
        let Request::Write(write) = req else {
            out.reply(id, Reply::Value(None));
            return;
        };
        let key = String::from_utf8_lossy(&write.key).into_owned();
        self.note(format!("wrote {key}"));
        out.mark_dirty();
        out.reply_after_sync(id, Reply::Written { applied: true, existed: false });
        out.send_after_sync(self.peer, key);
    }

    fn sync(&mut self) -> std::io::Result<()> {
        std::thread::sleep(Duration::from_millis(50));
        self.note("synced".into());
        Ok(())
    }

    // Nothing is buffered: the writes live only in the notes.
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn position(journal: &Journal, event: &str) -> Option<usize> {
    journal.lock().unwrap().iter().position(|e| e == event)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_sync_effects_wait_for_the_sync() {
    let cluster = cluster(2);
    let journal = Journal::default();
    let recorder = |me: u32, peer: u32| Recorder { me: NodeId(me), peer: NodeId(peer), journal: journal.clone() };
    let n1 = start_node(options(NodeId(1), &cluster), recorder(1, 2)).await.unwrap();
    let n2 = start_node(options(NodeId(2), &cluster), recorder(2, 1)).await.unwrap();
    let mut c = Client::connect(n1.resp_addr()).await;

    assert_eq!(c.cmd(&["SET", "k", "v"]).await, Resp::ok());
    let synced = position(&journal, "n1: synced").expect("the reply arrived before the sync");
    assert!(position(&journal, "n1: wrote k").unwrap() < synced);

    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let received = loop {
        if let Some(at) = position(&journal, "n2: received k from n1") {
            break at;
        }
        assert!(tokio::time::Instant::now() < deadline, "the after-sync message never arrived");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert!(synced < received, "the message left before the sync: {:?}", journal.lock().unwrap());
    within("shutdown n1", n1.shutdown()).await;
    within("shutdown n2", n2.shutdown()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_mode_replies_before_the_sync_and_syncs_at_shutdown() {
    let cluster = cluster(2);
    let journal = Journal::default();
    let mut opts = options(NodeId(1), &cluster);
    opts.durability =
        SyncPolicy { async_interval: Duration::from_secs(3600), ..SyncPolicy::with_default(DurabilityMode::Async) };
    let recorder = Recorder { me: NodeId(1), peer: NodeId(2), journal: journal.clone() };
    let n1 = start_node(opts, recorder).await.unwrap();
    let mut c = Client::connect(n1.resp_addr()).await;

    assert_eq!(c.cmd(&["SET", "k", "v"]).await, Resp::ok());
    assert!(position(&journal, "n1: wrote k").is_some());
    assert_eq!(position(&journal, "n1: synced"), None, "the reply waited for a sync");
    within("shutdown n1", n1.shutdown()).await;
    assert!(position(&journal, "n1: synced").is_some(), "shutdown left an acknowledged write unsynced");
}
