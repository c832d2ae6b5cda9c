//! The driver's batching and its durability modes, with a probe core that logs every request and sync.

use super::*;
use crate::durability::SyncPolicy;
use crate::inbox::{self, CoreInbox};
use crate::transport::PeerQueues;
use bytes::Bytes;
use meridian_core::{KeyspaceId, Reply, Request, Write, WriteOp};
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;
use std::time::Duration;

type Log = Arc<Mutex<Vec<String>>>;
/// Holds each fsync job of the probe until the test sends it a go.
type Gate = Arc<Mutex<std::sync::mpsc::Receiver<()>>>;

/// Writes reply after sync and are announced to node 2 twice: at once (100 + n) and after sync (n). A write
/// of key `sync`, `group` or `async` is made in that durability mode, any other in the node's default.
/// A request for key `read` writes nothing and only replies after sync; one with the value `clock` also logs the
/// time it was stepped at. A GET is answered at once where the driver asks for that (`read_at_once`), and
/// otherwise like `read`; so is a write of key `at once`, which logs whether the driver gave the wall clock since
/// the last answer at once. A timer set at start sends a message
/// to itself; another is set and cancelled at once. Its fsync jobs log `sync` when they run, after waiting
/// for the gate if it has one.
struct Probe {
    log: Log,
    writes: u32,
    gate: Option<Gate>,
    /// The wall clock the driver last gave (`set_wall_clock`); 0 until it gives one, and once an answer at once
    /// has taken it.
    wall_ms: u64,
}

impl Process for Probe {
    type Msg = u32;
    type Timer = &'static str;

    fn start(&mut self, _: Time, out: &mut Effects<u32, &'static str>) {
        out.set_timer("tick", Duration::from_millis(1));
        out.set_timer("cancelled", Duration::from_millis(1));
        out.cancel_timer("cancelled");
    }

    fn on_message(&mut self, _: Time, from: NodeId, msg: u32, _: &mut Effects<u32, &'static str>) {
        self.log.lock().unwrap().push(format!("message {msg} from {from}"));
    }

    fn on_timer(&mut self, _: Time, timer: &'static str, out: &mut Effects<u32, &'static str>) {
        self.log.lock().unwrap().push(format!("timer {timer}"));
        out.send(NodeId(1), 7);
    }

    fn on_request(&mut self, now: Time, id: RequestId, req: Request, out: &mut Effects<u32, &'static str>) {
        self.log.lock().unwrap().push(format!("request {}", id.0));
        let Request::Write(write) = req else { return out.reply_after_sync(id, ABSENT) };
        if matches!(&write.op, WriteOp::Put { value, .. } if value == "clock") {
            self.log.lock().unwrap().push(format!("clock {}", now.as_nanos()));
        }
        if write.key == "read" {
            return out.reply_after_sync(id, WRITTEN);
        }
        out.mark_dirty_as(std::str::from_utf8(&write.key).ok().and_then(|k| k.parse().ok()));
        out.reply_after_sync(id, Reply::Written { applied: true, existed: false });
        out.send_after_sync(NodeId(2), self.writes);
        out.send(NodeId(2), 100 + self.writes);
        self.writes += 1;
    }

    fn read_at_once(&mut self, _: Time, req: &Request) -> Option<Reply> {
        std::mem::take(&mut self.wall_ms);
        let Request::Get { .. } = req else { return None };
        self.log.lock().unwrap().push("at once".into());
        Some(ABSENT)
    }

    fn write_at_once(&mut self, _: Time, req: &mut Option<Request>) -> Option<Reply> {
        // Each answer takes the wall clock it was given, so the next shows whether it was given one of its own.
        let wall_set = std::mem::take(&mut self.wall_ms) > 0;
        let Some(Request::Write(w)) = req.as_ref() else { return None };
        if w.key != "at once" {
            return None;
        }
        self.log.lock().unwrap().push(format!("write at once, wall clock set: {wall_set}"));
        req.take();
        Some(WRITTEN)
    }

    fn set_wall_clock(&mut self, unix_ms: u64) {
        self.wall_ms = unix_ms;
    }

    fn sync(&mut self) -> std::io::Result<()> {
        self.log.lock().unwrap().push("sync".into());
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.log.lock().unwrap().push("flush".into());
        Ok(())
    }

    fn begin_sync(&mut self) -> std::io::Result<Option<meridian_core::SyncJob>> {
        let (log, gate) = (self.log.clone(), self.gate.clone());
        Ok(Some(Box::new(move || {
            if let Some(gate) = gate {
                gate.lock().unwrap().recv().map_err(std::io::Error::other)?;
            }
            log.lock().unwrap().push("sync".into());
            Ok(())
        })))
    }
}

fn put() -> Request {
    put_value("v".into())
}

fn put_value(value: Bytes) -> Request {
    Request::Write(Write::put(KeyspaceId::DEFAULT, "k".into(), value))
}

fn put_value_at(key: &str) -> Request {
    Request::Write(Write::put(KeyspaceId::DEFAULT, key.to_owned().into(), "v".into()))
}

/// A write made in `mode` rather than the node's default.
fn put_as(mode: DurabilityMode) -> Request {
    Request::Write(Write::put(KeyspaceId::DEFAULT, mode.name().into(), "v".into()))
}

/// A write made in `mode` that logs the time it is stepped at.
fn timed_as(mode: DurabilityMode) -> Request {
    Request::Write(Write::put(KeyspaceId::DEFAULT, mode.name().into(), "clock".into()))
}

const WRITTEN: Reply = Reply::Written { applied: true, existed: false };
const ABSENT: Reply = Reply::Value(None);

type Inbox = tokio::sync::mpsc::Sender<Input<u32>>;

/// A driver over a fresh probe in `mode`, not yet running; with it come its inbox, a function that
/// takes what the probe has sent to node 2 so far, in order, and the fsync figures.
fn probe_driver(policy: SyncPolicy, log: &Log) -> (Driver<Probe>, Inbox, impl FnMut() -> Vec<u32>, Arc<Persistence>) {
    gated_probe_driver(policy, log, None)
}

/// A gate for the probe's fsync jobs, and the sender that lets one through per message.
fn gate() -> (std::sync::mpsc::Sender<()>, Option<Gate>) {
    let (go, gate) = std::sync::mpsc::channel();
    (go, Some(Arc::new(Mutex::new(gate))))
}

/// [`probe_driver`] with the probe's fsync jobs held by `gate`.
fn gated_probe_driver(
    policy: SyncPolicy,
    log: &Log,
    gate: Option<Gate>,
) -> (Driver<Probe>, Inbox, impl FnMut() -> Vec<u32>, Arc<Persistence>) {
    let (inbox_tx, inbox_rx) = inbox::channel();
    let started = Arc::new(Mutex::new(Vec::new()));
    let sink = started.clone();
    let mut queues = PeerQueues::new(Arc::new(AtomicU64::new(0)), move |q| sink.lock().unwrap().push(q));
    queues.route(NodeId(2), "127.0.0.1:2".into());
    let mut outbound = std::mem::take(&mut *started.lock().unwrap());
    let persistence = Arc::new(Persistence::new(policy));
    let probe = Probe { log: log.clone(), writes: 0, gate, wall_ms: 0 };
    let published = Published::new(watch::channel(false).0, watch::channel(None).0);
    let driver = Driver::new(NodeId(1), probe, inbox_rx, queues, persistence.clone(), published);
    let sent_to_n2 = move || std::iter::from_fn(|| outbound[0].rx.try_recv().ok()).collect();
    (driver, inbox_tx, sent_to_n2, persistence)
}

fn async_node(async_interval: Duration) -> SyncPolicy {
    SyncPolicy { async_interval, ..SyncPolicy::with_default(DurabilityMode::Async) }
}

/// Waits (boundedly) for a reply from a driver running as a task.
async fn await_reply(rx: &mut Answer) -> Reply {
    match tokio::time::timeout(Duration::from_secs(10), rx).await {
        Ok(Ok(reply)) => reply,
        other => panic!("no reply: {other:?}"),
    }
}

async fn wait_for_log(log: &Log, entry: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !log_has(log, entry) {
        assert!(Instant::now() < deadline, "{entry:?} never logged: {:?}", log.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Waits until the core task has let go of the core: the step that wrote a log entry may still hold it when a
/// test sees the entry, and a request submitted meanwhile would go to the inbox instead of being served in place.
async fn wait_until_idle<P: Process + Send + 'static>(handle: &CoreHandle<P>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while handle.core.try_lock().is_err() {
        assert!(Instant::now() < deadline, "the core task never let go of the core");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Asks the driver to stop, from inside the runtime.
async fn shut_down(inbox: &Inbox) {
    inbox.send(Input::Shutdown).await.map_err(|_| "the driver is gone").unwrap();
}

fn logged(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

/// The log without the probe's start-up timer and the message it sends, which land wherever the timer's
/// millisecond happens to end (on a loaded machine, inside a test's batches).
fn requests_and_syncs(log: &Log) -> Vec<String> {
    logged(log).into_iter().filter(|e| !e.starts_with("timer ") && !e.starts_with("message ")).collect()
}

fn log_has(log: &Log, entry: &str) -> bool {
    log.lock().unwrap().iter().any(|e| e == entry)
}

#[tokio::test]
async fn inputs_waiting_together_share_one_sync_and_after_sync_effects_follow_it() {
    one_sync_per_batch().await;
}

/// On worker threads each fsync runs on the core's fsync thread while the core waits for inputs: the same order,
/// the same effects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_worker_threads_the_fsync_runs_off_them_in_the_same_order() {
    one_sync_per_batch().await;
    one_sync_per_write().await;
}

/// While a sync's fsync runs on the fsync thread, the core goes on taking inputs. A step that wrote nothing
/// has its after-sync effects carried out with that fsync's; a write waits for the next fsync, which covers
/// it alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_core_takes_inputs_while_an_fsync_runs_and_new_writes_wait_for_the_next() {
    let log = Log::default();
    let (go, gate) = gate();
    let (driver, inbox_tx, mut sent_to_n2, persistence) = gated_probe_driver(SyncPolicy::default(), &log, gate);
    let task = tokio::spawn(driver.run());
    let mut first = inbox_tx.submit(put());
    wait_for_log(&log, "request 0").await;
    let mut read = inbox_tx.submit(put_value_at("read"));
    let mut second = inbox_tx.submit(put());
    wait_for_log(&log, "request 2").await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(first.try_recv().is_none() && read.try_recv().is_none(), "answered before the fsync ran");
    assert_eq!(sent_to_n2(), [100, 101], "only the immediate sends");

    go.send(()).unwrap();
    assert_eq!(await_reply(&mut first).await, WRITTEN);
    assert_eq!(await_reply(&mut read).await, WRITTEN, "the read goes out with the fsync it followed");
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(second.try_recv().is_none(), "the write taken during the fsync waits for one of its own");
    let mut after_sync = sent_to_n2();
    assert!(!after_sync.contains(&1), "the second write's after-sync send left before its fsync");

    go.send(()).unwrap();
    assert_eq!(await_reply(&mut second).await, WRITTEN);
    shut_down(&inbox_tx).await;
    task.await.unwrap();
    after_sync.extend(sent_to_n2());
    assert_eq!(after_sync, [0, 1]);
    assert_eq!(requests_and_syncs(&log), ["request 0", "request 1", "request 2", "sync", "sync"]);
    assert_eq!(persistence.read().fsyncs(), 2);
}

async fn one_sync_per_batch() {
    let log = Log::default();
    let (driver, inbox_tx, mut sent_to_n2, persistence) = probe_driver(SyncPolicy::default(), &log);
    let mut replies: Vec<_> = (0..5).map(|_| inbox_tx.submit(put())).collect();
    shut_down(&inbox_tx).await;
    driver.run().await;

    let requests: Vec<String> = (0..5).map(|i| format!("request {i}")).collect();
    let log = requests_and_syncs(&log);
    assert_eq!(log[..5], requests[..], "one batch, in arrival order");
    assert_eq!(log[5..], ["sync".to_string()], "one sync for the whole batch");
    for rx in &mut replies {
        assert_eq!(rx.try_recv().unwrap(), WRITTEN);
    }
    let sent = sent_to_n2();
    assert_eq!(sent, vec![100, 101, 102, 103, 104, 0, 1, 2, 3, 4], "immediate sends first, then after the sync");
    let reading = persistence.read();
    assert_eq!((reading.fsyncs(), reading.loss_window_max), (1, Duration::ZERO), "nothing acknowledged unsynced");
}

/// Writes that trickle in, one per turn of the runtime, share one fsync once an fsync has been shared: the
/// batch lets the writer run again and again instead of closing after one turn.
#[tokio::test]
async fn after_a_shared_fsync_a_batch_lingers_for_trickling_writes() {
    let log = Log::default();
    let (driver, inbox_tx, _sent, _) = probe_driver(SyncPolicy::default(), &log);
    let task = tokio::spawn(driver.run());
    let mut together: Vec<_> = (0..2).map(|_| inbox_tx.submit(put())).collect();
    for rx in &mut together {
        await_reply(rx).await;
    }
    let mut trickled = Vec::new();
    for _ in 0..6 {
        trickled.push(inbox_tx.submit(put()));
        tokio::task::yield_now().await;
    }
    for rx in &mut trickled {
        await_reply(rx).await;
    }
    shut_down(&inbox_tx).await;
    task.await.unwrap();
    let syncs = requests_and_syncs(&log).iter().filter(|e| *e == "sync").count();
    assert_eq!(syncs, 2, "the two writes queued together, then the six that trickled in: {:?}", logged(&log));
}

/// Only a batch that owes an fsync lingers, and only once fsyncs are shared: a lone writer's batch closes
/// as soon as its inbox is empty after one turn, so lingering never adds to its latency.
#[test]
fn only_a_batch_owing_a_shared_fsync_lingers() {
    let (driver, _inbox, _sent, _) = probe_driver(SyncPolicy::default(), &Log::default());
    let mut core = driver.core();
    for (owes_sync, shared, yields) in
        [(false, false, 1), (true, false, 1), (false, true, 1), (true, true, LINGER_YIELDS)]
    {
        (core.owes_sync, core.last_sync_shared) = (owes_sync, shared);
        assert_eq!(core.yields_allowed(), yields, "owes a sync: {owes_sync}, last one shared: {shared}");
    }
}

/// A due async fsync wakes an idle core, unless a sync is under way: its end wakes the core anyway, and a deadline
/// already past would only spin the loop until then.
#[test]
fn a_due_async_fsync_sets_no_deadline_while_a_sync_is_under_way() {
    let (driver, _inbox, _sent, _) = probe_driver(async_node(Duration::from_millis(1)), &Log::default());
    let mut core = driver.core();
    core.lazy_since = Some(Instant::now());
    assert!(core.next_deadline().is_some());
    let covered = Covered { effects: Vec::new(), lazy_since: None };
    core.in_flight = Some(InFlight { outcome: oneshot::channel().1, covered });
    assert_eq!(core.next_deadline(), None);
}

#[tokio::test]
async fn timers_fire_cancelled_ones_do_not_and_self_sends_loop_back() {
    let log = Log::default();
    let (driver, inbox_tx, _sent, _) = probe_driver(SyncPolicy::default(), &log);
    let task = tokio::spawn(driver.run());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !log_has(&log, "message 7 from n1") && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    shut_down(&inbox_tx).await;
    task.await.unwrap();
    assert_eq!(*log.lock().unwrap(), ["timer tick", "message 7 from n1"]);
}

#[tokio::test]
async fn a_client_that_left_does_not_disturb_the_core() {
    let log = Log::default();
    let (driver, inbox_tx, _sent, _) = probe_driver(SyncPolicy::default(), &log);
    drop(inbox_tx.submit(put()));
    let mut kept = inbox_tx.submit(put());
    shut_down(&inbox_tx).await;
    driver.run().await;
    assert_eq!(kept.try_recv().unwrap(), WRITTEN);
}

#[tokio::test]
async fn sync_mode_syncs_each_write_before_its_after_sync_effects() {
    one_sync_per_write().await;
}

async fn one_sync_per_write() {
    let log = Log::default();
    let (driver, inbox_tx, mut sent_to_n2, persistence) =
        probe_driver(SyncPolicy::with_default(DurabilityMode::Sync), &log);
    let mut replies: Vec<_> = (0..3).map(|_| inbox_tx.submit(put())).collect();
    shut_down(&inbox_tx).await;
    driver.run().await;

    let log = requests_and_syncs(&log);
    assert_eq!(log, ["request 0", "sync", "request 1", "sync", "request 2", "sync"], "no shared fsync");
    assert_eq!(sent_to_n2(), vec![100, 0, 101, 1, 102, 2], "each write's after-sync send follows it");
    for rx in &mut replies {
        assert_eq!(rx.try_recv().unwrap(), WRITTEN);
    }
    assert_eq!(persistence.read().fsyncs(), 3);
}

#[tokio::test]
async fn a_group_commit_closes_at_its_byte_bound() {
    let log = Log::default();
    let (driver, inbox_tx, _sent, _) = probe_driver(SyncPolicy::default(), &log);
    let half = Bytes::from(vec![b'x'; GROUP_BYTES_MAX / 2]);
    let _replies: Vec<_> = (0..5).map(|_| inbox_tx.submit(put_value(half.clone()))).collect();
    shut_down(&inbox_tx).await;
    driver.run().await;
    let expected = ["request 0", "request 1", "sync", "request 2", "request 3", "sync", "request 4", "sync"];
    assert_eq!(requests_and_syncs(&log), expected, "two half-bound writes fill a batch");
}

#[tokio::test]
async fn a_group_commit_with_a_max_wait_gathers_inputs_that_arrive_during_it() {
    let log = Log::default();
    let policy = SyncPolicy { group_max_wait: Duration::from_secs(1), ..SyncPolicy::default() };
    let (driver, inbox_tx, _sent, _) = probe_driver(policy, &log);
    // Let the start-up timer fire first, so the only batch in question is the writes'.
    let task = tokio::spawn(driver.run());
    wait_for_log(&log, "message 7 from n1").await;
    let mut first = inbox_tx.submit(put());
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut second = inbox_tx.submit(put());
    assert_eq!(await_reply(&mut first).await, WRITTEN);
    assert_eq!(await_reply(&mut second).await, WRITTEN);
    shut_down(&inbox_tx).await;
    task.await.unwrap();
    assert_eq!(logged(&log)[2..], ["request 0", "request 1", "sync"], "one fsync for both writes");
}

/// A batch closes on an empty inbox unless the node's group commit has a wait: a zero wait must not become a
/// timer, which tokio would fire only at its next whole millisecond (holding every batch up to 1 ms).
#[tokio::test]
async fn only_a_group_commit_with_a_max_wait_keeps_a_batch_open() {
    let log = Log::default();
    let waits = SyncPolicy { group_max_wait: Duration::from_secs(1), ..SyncPolicy::default() };
    let policies = [(SyncPolicy::default(), false), (waits, true), (async_node(Duration::from_secs(1)), false)];
    for (policy, open) in policies {
        let (driver, _inbox, _sent, _) = probe_driver(policy, &log);
        assert_eq!(driver.core().batch_close().is_some(), open, "{policy:?}");
    }
}

#[tokio::test]
async fn async_mode_acknowledges_before_the_sync_and_syncs_at_shutdown() {
    let log = Log::default();
    let (driver, inbox_tx, mut sent_to_n2, persistence) = probe_driver(async_node(Duration::from_secs(3600)), &log);
    let task = tokio::spawn(driver.run());
    let mut reply = inbox_tx.submit(put());
    assert_eq!(await_reply(&mut reply).await, WRITTEN);
    assert!(!log_has(&log, "sync"), "acknowledged without waiting for an fsync");
    assert_eq!(sent_to_n2(), vec![0, 100], "after-sync effects keep their order among the others");

    shut_down(&inbox_tx).await;
    task.await.unwrap();
    assert_eq!(logged(&log).last().map(String::as_str), Some("sync"), "a clean shutdown syncs");
    let reading = persistence.read();
    assert_eq!(reading.fsyncs(), 1);
    assert!(reading.loss_window_max > Duration::ZERO, "the acknowledged write waited for the shutdown's fsync");
}

#[tokio::test]
async fn async_mode_flushes_before_releasing_after_sync_effects() {
    let log = Log::default();
    let (driver, inbox_tx, mut sent_to_n2, _persistence) = probe_driver(async_node(Duration::from_secs(3600)), &log);
    let task = tokio::spawn(driver.run());
    for n in 0..2 {
        let mut reply = inbox_tx.submit(put());
        assert_eq!(await_reply(&mut reply).await, WRITTEN);
        // Timers may log too, so look for a flush anywhere after this write.
        let entries = logged(&log);
        let request = entries.iter().position(|e| *e == format!("request {n}")).unwrap();
        assert!(entries[request..].contains(&"flush".to_owned()), "write {n} acknowledged unflushed: {entries:?}");
    }
    assert_eq!(sent_to_n2(), vec![0, 100, 1, 101]);
    shut_down(&inbox_tx).await;
    task.await.unwrap();
}

#[tokio::test]
async fn async_mode_syncs_one_interval_after_the_oldest_unsynced_write() {
    let log = Log::default();
    let interval = Duration::from_millis(20);
    let (driver, inbox_tx, _sent, persistence) = probe_driver(async_node(interval), &log);
    let task = tokio::spawn(driver.run());
    let mut reply = inbox_tx.submit(put());
    assert_eq!(await_reply(&mut reply).await, WRITTEN);
    wait_for_log(&log, "sync").await;
    let reading = persistence.read();
    assert_eq!(reading.fsyncs(), 1);
    assert!(reading.loss_window_max >= interval, "synced before the interval: {:?}", reading.loss_window_max);
    shut_down(&inbox_tx).await;
    task.await.unwrap();
    assert_eq!(persistence.read().fsyncs(), 1, "nothing written since, so nothing to sync at shutdown");
}

#[tokio::test]
async fn a_keyspaces_own_mode_overrides_the_nodes() {
    let log = Log::default();
    let policy = SyncPolicy { async_interval: Duration::from_secs(3600), ..SyncPolicy::default() };
    let (driver, inbox_tx, mut sent_to_n2, persistence) = probe_driver(policy, &log);
    let task = tokio::spawn(driver.run());
    let mut reply = inbox_tx.submit(put_as(DurabilityMode::Async));
    assert_eq!(await_reply(&mut reply).await, WRITTEN);
    assert!(!log_has(&log, "sync"), "an async keyspace's write on a group node waits for no fsync");
    assert!(log_has(&log, "flush"), "but for a flush");
    assert_eq!(sent_to_n2(), vec![0, 100]);
    let mut reply = inbox_tx.submit(put_as(DurabilityMode::Sync));
    assert_eq!(await_reply(&mut reply).await, WRITTEN);
    assert!(log_has(&log, "sync"), "a sync keyspace's write waits for an fsync");
    shut_down(&inbox_tx).await;
    task.await.unwrap();
    assert_eq!(persistence.read().fsyncs(), 1, "the sync write's fsync covered the async one");
}

#[tokio::test]
async fn an_async_write_after_an_unsynced_group_write_waits_for_its_sync() {
    let log = Log::default();
    let (driver, inbox_tx, mut sent_to_n2, _) = probe_driver(SyncPolicy::default(), &log);
    let _replies: Vec<_> = [put(), put_as(DurabilityMode::Async)].map(|r| inbox_tx.submit(r)).into();
    shut_down(&inbox_tx).await;
    driver.run().await;
    assert_eq!(requests_and_syncs(&log), ["request 0", "request 1", "sync"]);
    assert_eq!(sent_to_n2(), vec![100, 101, 0, 1], "after-sync effects never overtake each other");
}

/// A running core over a fresh probe in `policy`, reached through a [`CoreHandle`], once it has started the
/// process and has no timer left (the probe's start-up timer has fired and its message come back), so that
/// only a wake-up from a step taken elsewhere can make the core task run; with it come its inbox, its task and
/// the fsync figures.
async fn idle_core(policy: SyncPolicy, log: &Log) -> (CoreHandle<Probe>, Inbox, JoinHandle<()>, Arc<Persistence>) {
    let (driver, inbox_tx, _sent, persistence) = probe_driver(policy, log);
    let handle = driver.handle(inbox_tx.clone());
    let task = tokio::spawn(driver.run());
    wait_for_log(log, "message 7 from n1").await;
    wait_until_idle(&handle).await;
    (handle, inbox_tx, task, persistence)
}

/// An idle core answers a request in the caller's task: the reply is there when `submit` returns, before the
/// core task has run again, and given without a channel. An async write owes an fsync, so the core task is woken
/// to take it on time.
#[tokio::test]
async fn an_idle_core_serves_a_request_in_the_callers_task_and_wakes_the_core_task_for_what_it_owes() {
    let log = Log::default();
    let (handle, inbox_tx, task, persistence) = idle_core(async_node(Duration::from_millis(1)), &log).await;
    let mut read = handle.submit(put_value_at("read"));
    assert!(matches!(read, Answer::Given(Some(_))), "answered within submit, without a channel: {read:?}");
    assert_eq!(read.try_recv().unwrap(), WRITTEN);
    let mut write = handle.submit(put());
    assert_eq!(write.try_recv().unwrap(), WRITTEN, "an async write is acknowledged once flushed");
    assert_eq!(requests_and_syncs(&log), ["request 0", "request 1", "flush"]);
    wait_for_log(&log, "sync").await;
    shut_down(&inbox_tx).await;
    task.await.unwrap();
    assert_eq!(persistence.read().fsyncs(), 1, "the async fsync, and nothing left for shutdown");
}

/// A request the process answers at once is answered so, in the caller's task or in the core task's batch, while
/// no write waits for an fsync; behind one that does, it is stepped as usual and its answer follows that fsync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_is_answered_at_once_only_while_no_write_waits_for_its_fsync() {
    let log = Log::default();
    let (go, gate) = gate();
    let (driver, inbox_tx, _sent, _) = gated_probe_driver(SyncPolicy::default(), &log, gate);
    let handle = driver.handle(inbox_tx.clone());
    let task = tokio::spawn(driver.run());
    let mut batched = inbox_tx.submit(get());
    assert_eq!(await_reply(&mut batched).await, ABSENT);
    wait_for_log(&log, "message 7 from n1").await;
    wait_until_idle(&handle).await;
    let mut here = handle.submit(get());
    assert!(matches!(here, Answer::Given(Some(_))), "answered within submit: {here:?}");
    assert_eq!(here.try_recv().unwrap(), ABSENT);

    let mut write = handle.submit(put());
    wait_for_log(&log, "request 0").await;
    let mut behind = handle.submit(get());
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(behind.try_recv().is_none(), "answered before the write it follows was durable");
    go.send(()).unwrap();
    assert_eq!(await_reply(&mut write).await, WRITTEN);
    assert_eq!(await_reply(&mut behind).await, ABSENT);
    shut_down(&inbox_tx).await;
    task.await.unwrap();
    assert_eq!(requests_and_syncs(&log), ["at once", "at once", "request 0", "request 1", "sync"]);
}

fn get() -> Request {
    Request::Get { keyspace: KeyspaceId::DEFAULT, key: "k".into(), read: meridian_core::Read::Value }
}

/// A write's outcome may depend on the wall clock (deadlines), so the driver gives it before asking about a write,
/// in the caller's task as in the core task's batch; a read asked about needs none.
#[tokio::test]
async fn a_write_is_asked_about_at_once_with_the_wall_clock_set() {
    let log = Log::default();
    let (handle, inbox_tx, task, _) = idle_core(SyncPolicy::default(), &log).await;
    let mut here = handle.submit(get());
    assert!(matches!(here, Answer::Given(Some(_))), "answered within submit: {here:?}");
    assert_eq!(here.try_recv().unwrap(), ABSENT);
    let mut write = handle.submit(put_value_at("at once"));
    assert!(matches!(write, Answer::Given(Some(_))), "answered within submit: {write:?}");
    assert_eq!(write.try_recv().unwrap(), WRITTEN);
    assert_eq!(await_reply(&mut inbox_tx.submit(put_value_at("at once"))).await, WRITTEN);
    shut_down(&inbox_tx).await;
    task.await.unwrap();
    let at_once = "write at once, wall clock set: true";
    assert_eq!(requests_and_syncs(&log), ["at once", at_once, at_once]);
}

/// A group-commit write taken in the caller's task is answered after the fsync the core task begins for it;
/// a `sync` write is made durable before the core task takes its next input.
#[tokio::test]
async fn the_core_task_syncs_what_a_step_in_the_callers_task_wrote() {
    let log = Log::default();
    let (handle, inbox_tx, task, _) = idle_core(SyncPolicy::default(), &log).await;
    let mut group = handle.submit(put());
    assert!(matches!(group, Answer::Coming(_)), "acknowledged before its fsync: {group:?}");
    assert!(group.try_recv().is_none(), "acknowledged before its fsync");
    assert_eq!(await_reply(&mut group).await, WRITTEN);

    let mut sync = handle.submit(put_as(DurabilityMode::Sync));
    let mut queued = inbox_tx.submit(put());
    assert_eq!(await_reply(&mut sync).await, WRITTEN);
    assert_eq!(await_reply(&mut queued).await, WRITTEN);
    shut_down(&inbox_tx).await;
    task.await.unwrap();
    assert_eq!(requests_and_syncs(&log), ["request 0", "sync", "request 1", "sync", "request 2", "sync"]);
}

/// Before the core task has started the process, a request waits in the inbox.
#[tokio::test]
async fn a_core_not_yet_started_takes_requests_through_its_inbox() {
    let log = Log::default();
    let (driver, inbox_tx, _sent, _) = probe_driver(SyncPolicy::default(), &log);
    let handle = driver.handle(inbox_tx.clone());
    let mut read = handle.submit(put_value_at("read"));
    assert!(read.try_recv().is_none() && logged(&log).is_empty(), "stepped before the process started");
    let task = tokio::spawn(driver.run());
    assert_eq!(await_reply(&mut read).await, WRITTEN);
    shut_down(&inbox_tx).await;
    task.await.unwrap();
}

/// A group write stepped in the caller's task while an async write waits for its (distant) fsync still wakes the
/// core task, which syncs both at once rather than at the async deadline.
#[tokio::test]
async fn a_group_write_after_an_unsynced_async_one_wakes_the_core_task() {
    let log = Log::default();
    let (handle, inbox_tx, task, _) = idle_core(async_node(Duration::from_secs(3600)), &log).await;
    let mut lazy = handle.submit(put());
    assert_eq!(lazy.try_recv().unwrap(), WRITTEN);
    // The core task takes the wake-up the async write's deadline gave it, and goes back to waiting.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut group = handle.submit(put_as(DurabilityMode::Group));
    assert_eq!(await_reply(&mut group).await, WRITTEN);
    shut_down(&inbox_tx).await;
    task.await.unwrap();
    assert_eq!(requests_and_syncs(&log), ["request 0", "flush", "request 1", "sync"]);
}

/// Requests handed over together are stepped at one clock reading, but one after a step that waited for the disk
/// (a `sync` write) reads the clock again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_handed_over_together_share_a_clock_reading_until_one_waits_for_the_disk() {
    let log = Log::default();
    let (go, gate) = gate();
    let (driver, inbox_tx, _sent, _) = gated_probe_driver(SyncPolicy::default(), &log, gate);
    let task = tokio::spawn(driver.run());
    let held = Duration::from_millis(30);
    let (reqs, replies): (Vec<_>, Vec<_>) = [DurabilityMode::Group, DurabilityMode::Sync, DurabilityMode::Group]
        .into_iter()
        .map(|mode| {
            let (tx, rx) = oneshot::channel();
            ((timed_as(mode), tx), rx)
        })
        .unzip();
    inbox_tx.enqueue(reqs);
    // The sync write's fsync is held a while after it began; the last write's is let through at once.
    let deadline = Instant::now() + Duration::from_secs(10);
    while logged(&log).iter().filter(|e| e.starts_with("clock ")).count() < 2 {
        assert!(Instant::now() < deadline, "the first two requests were never stepped: {:?}", logged(&log));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    std::thread::sleep(held);
    go.send(()).unwrap();
    go.send(()).unwrap();
    for rx in replies {
        assert_eq!(await_reply(&mut Answer::Coming(rx)).await, WRITTEN);
    }
    shut_down(&inbox_tx).await;
    task.await.unwrap();
    let clocks: Vec<u64> =
        logged(&log).iter().filter_map(|e| e.strip_prefix("clock ")).map(|n| n.parse().unwrap()).collect();
    assert_eq!(clocks.len(), 3, "{:?}", logged(&log));
    assert_eq!(clocks[0], clocks[1], "the first two were stepped at one reading");
    assert!(
        clocks[2] >= clocks[1] + held.as_nanos() as u64,
        "the last was stepped after the fsync it waited for: {clocks:?}"
    );
}
