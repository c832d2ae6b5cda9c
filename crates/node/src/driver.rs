//! The core thread: runs one [`Process`] for real.
//!
//! The core gets its own OS thread rather than a tokio task so that a blocking fsync in
//! [`Process::sync`] never stalls networking, and so that everything that arrives during one fsync is
//! waiting in the inbox when it returns and forms the next group commit.
//!
//! The loop: block until the first input or the next timer deadline; take whatever else is waiting,
//! without blocking, up to [`BATCH_MAX`] inputs in all; fire the timers that are due; feed each to the
//! process with `now` read from the wall clock (nanoseconds since the UNIX epoch). Immediate effects are carried out as each step emits them (sends go to the peer
//! queues, replies to the waiting client). If any step of the batch wrote to the datastore, the batch
//! ends with one [`Process::sync`]; only then are the batch's `after_sync` effects carried out, in the
//! order they were emitted. This is the group commit allowed by the contract in `meridian_core::process`.
//!
//! A failed sync stops the whole OS process (fail-stop): after a failed fsync the state of the file is
//! unknown, so the node must not keep answering from it; it recovers from what is durable on restart.
//! A panic in the core does the same, because a node whose core is gone could only refuse requests.
//!
//! Messages a process sends to itself are delivered as inputs of the next step rather than through
//! the network. Replies for request ids the driver does not know (the client left) are ignored.

use crate::inbox::Input;
use crate::timers::Timers;
use crate::transport::PeerQueues;
use meridian_core::{Effect, Effects, NodeId, Process, Reply, RequestId, Time};
use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::oneshot;
use tracing::error;

/// Inputs handled per batch (and so per sync) at most; bounds the latency a batch adds to its first
/// input and the memory held by its `after_sync` effects.
pub(crate) const BATCH_MAX: usize = 1024;
/// The exit code of a fail-stop (failed sync or core panic).
const FAIL_STOP_EXIT_CODE: i32 = 1;

type Fx<P> = Effects<<P as Process>::Msg, <P as Process>::Timer>;
type FxItem<P> = Effect<<P as Process>::Msg, <P as Process>::Timer>;

pub(crate) struct Driver<P: Process> {
    me: NodeId,
    process: P,
    inbox: Receiver<Input<P::Msg>>,
    peers: PeerQueues<P::Msg>,
    timers: Timers<P::Timer>,
    clients: HashMap<RequestId, oneshot::Sender<Reply>>,
    next_request: u64,
    /// Messages the process sent to itself, delivered as the next inputs.
    loopback: VecDeque<P::Msg>,
    fx: Fx<P>,
    /// The batch's `after_sync` effects, in the order they were emitted.
    deferred: Vec<FxItem<P>>,
    /// Whether a step of the current batch wrote to the datastore.
    dirty: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Stop,
}

/// Starts the core thread. It stops after a shutdown input, or when every sender of the inbox is gone.
pub(crate) fn spawn<P: Process + Send + 'static>(driver: Driver<P>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(format!("meridian-core-{}", driver.me.0)).spawn(move || {
        if catch_unwind(AssertUnwindSafe(|| driver.run())).is_err() {
            error!("the protocol core panicked; stopping the node (fail-stop)");
            std::process::exit(FAIL_STOP_EXIT_CODE);
        }
    })
}

/// The wall clock as protocol cores see it; a clock before 1970 reads as zero rather than failing.
fn wall_clock() -> Time {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    Time::from_nanos(nanos)
}

impl<P: Process> Driver<P> {
    pub(crate) fn new(me: NodeId, process: P, inbox: Receiver<Input<P::Msg>>, peers: PeerQueues<P::Msg>) -> Self {
        Driver {
            me,
            process,
            inbox,
            peers,
            timers: Timers::new(),
            clients: HashMap::new(),
            next_request: 0,
            loopback: VecDeque::new(),
            fx: Effects::new(),
            deferred: Vec::new(),
            dirty: false,
        }
    }

    pub(crate) fn run(mut self) {
        self.process.start(wall_clock(), &mut self.fx);
        self.absorb();
        self.commit();
        while self.batch() == Flow::Continue {}
    }

    /// One group commit: wait, take a batch of inputs and due timers, sync, release `after_sync` effects.
    fn batch(&mut self) -> Flow {
        let mut flow = self.wait_for_input();
        let mut taken = 1;
        while flow == Flow::Continue && taken < BATCH_MAX {
            flow = match self.inbox.try_recv() {
                Ok(input) => self.handle(input),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => Flow::Stop,
            };
            taken += 1;
        }
        self.fire_due_timers();
        self.deliver_loopback();
        self.commit();
        flow
    }

    /// Blocks until an input arrives (and handles it) or the next timer is due. Does not block when
    /// self-sent messages are waiting.
    fn wait_for_input(&mut self) -> Flow {
        if !self.loopback.is_empty() {
            return Flow::Continue;
        }
        let received = match self.timers.next_deadline() {
            Some(deadline) => match self.inbox.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(input) => Some(input),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return Flow::Stop,
            },
            None => match self.inbox.recv() {
                Ok(input) => Some(input),
                Err(_) => return Flow::Stop,
            },
        };
        received.map_or(Flow::Continue, |input| self.handle(input))
    }

    fn handle(&mut self, input: Input<P::Msg>) -> Flow {
        match input {
            Input::Peer { from, msg } => self.process.on_message(wall_clock(), from, msg, &mut self.fx),
            Input::Client { req, reply } => {
                let id = RequestId(self.next_request);
                self.next_request += 1;
                self.clients.insert(id, reply);
                self.process.on_request(wall_clock(), id, req, &mut self.fx);
            }
            Input::Shutdown => return Flow::Stop,
        }
        self.absorb();
        Flow::Continue
    }

    fn fire_due_timers(&mut self) {
        for timer in self.timers.take_due(Instant::now()) {
            self.process.on_timer(wall_clock(), timer, &mut self.fx);
            self.absorb();
        }
    }

    /// Delivers the self-sent messages queued so far; any they cause wait for the next batch.
    fn deliver_loopback(&mut self) {
        for msg in std::mem::take(&mut self.loopback) {
            self.process.on_message(wall_clock(), self.me, msg, &mut self.fx);
            self.absorb();
        }
    }

    /// Takes one step's effects: immediate ones are carried out now, `after_sync` ones wait for the
    /// batch's sync.
    fn absorb(&mut self) {
        let (items, dirty) = self.fx.drain();
        self.dirty |= dirty;
        for effect in items {
            if effect.after_sync() {
                self.deferred.push(effect);
            } else {
                self.carry_out(effect);
            }
        }
    }

    /// Ends a batch: syncs if anything was written, then releases the `after_sync` effects in order.
    fn commit(&mut self) {
        if std::mem::take(&mut self.dirty) {
            if let Err(e) = self.process.sync() {
                error!("sync failed: {e}; stopping the node, since the state of its files is unknown (fail-stop)");
                std::process::exit(FAIL_STOP_EXIT_CODE);
            }
        }
        for effect in std::mem::take(&mut self.deferred) {
            self.carry_out(effect);
        }
    }

    fn carry_out(&mut self, effect: FxItem<P>) {
        match effect {
            Effect::Send { to, msg, .. } if to == self.me => self.loopback.push_back(msg),
            Effect::Send { to, msg, .. } => self.peers.send(to, msg),
            Effect::Reply { id, reply, .. } => {
                // A missing id or a closed receiver means the client left; the reply has no one to go to.
                if let Some(client) = self.clients.remove(&id) {
                    let _ = client.send(reply);
                }
            }
            Effect::SetTimer { timer, after } => self.timers.set(timer, Instant::now() + after),
            Effect::CancelTimer { timer } => self.timers.cancel(&timer),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inbox::{self, CoreInbox};
    use crate::transport::peer_queues;
    use meridian_core::{ClusterConfig, Condition, NodeSpec, Request, Write};
    use std::sync::atomic::AtomicU64;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    type Log = Arc<Mutex<Vec<String>>>;

    /// Writes reply after sync and are announced to node 2 twice: at once (100 + n) and after sync (n).
    /// A timer set at start sends a message to itself; another is set and cancelled at once.
    struct Probe {
        log: Log,
        writes: u32,
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

        fn on_request(&mut self, _: Time, id: RequestId, _: Request, out: &mut Effects<u32, &'static str>) {
            self.log.lock().unwrap().push(format!("request {}", id.0));
            out.mark_dirty();
            out.reply_after_sync(id, Reply::Written { applied: true, existed: false });
            out.send_after_sync(NodeId(2), self.writes);
            out.send(NodeId(2), 100 + self.writes);
            self.writes += 1;
        }

        fn sync(&mut self) -> std::io::Result<()> {
            self.log.lock().unwrap().push("sync".into());
            Ok(())
        }
    }

    fn cluster() -> ClusterConfig {
        let nodes = (1..=2).map(|i| NodeSpec { id: NodeId(i), peer_addr: format!("127.0.0.1:{i}") }).collect();
        ClusterConfig::new(nodes, 2, 1).unwrap()
    }

    fn put() -> Request {
        Request::Write(Write { key: "k".into(), value: Some("v".into()), cond: Condition::Always })
    }

    fn log_has(log: &Log, entry: &str) -> bool {
        log.lock().unwrap().iter().any(|e| e == entry)
    }

    #[test]
    fn inputs_waiting_together_share_one_sync_and_after_sync_effects_follow_it() {
        let log = Log::default();
        let (inbox_tx, inbox_rx) = inbox::channel();
        let (queues, mut outbound) = peer_queues(NodeId(1), &cluster(), Arc::new(AtomicU64::new(0)));
        let mut replies: Vec<_> = (0..5).map(|_| inbox_tx.submit(put())).collect();
        inbox_tx.request_shutdown();
        Driver::new(NodeId(1), Probe { log: log.clone(), writes: 0 }, inbox_rx, queues).run();

        let requests: Vec<String> = (0..5).map(|i| format!("request {i}")).collect();
        let log = log.lock().unwrap();
        assert_eq!(log[..5], requests[..], "one batch, in arrival order");
        assert_eq!(log[5..], ["sync".to_string()], "one sync for the whole batch");
        for rx in &mut replies {
            assert_eq!(rx.try_recv().unwrap(), Reply::Written { applied: true, existed: false });
        }
        let mut rx = outbound.remove(0).rx;
        let sent: Vec<u32> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert_eq!(sent, vec![100, 101, 102, 103, 104, 0, 1, 2, 3, 4], "immediate sends first, then after the sync");
    }

    #[test]
    fn timers_fire_cancelled_ones_do_not_and_self_sends_loop_back() {
        let log = Log::default();
        let (inbox_tx, inbox_rx) = inbox::channel();
        let (queues, _outbound) = peer_queues(NodeId(1), &cluster(), Arc::new(AtomicU64::new(0)));
        let driver = Driver::new(NodeId(1), Probe { log: log.clone(), writes: 0 }, inbox_rx, queues);
        let thread = std::thread::spawn(move || driver.run());
        let deadline = Instant::now() + Duration::from_secs(10);
        while !log_has(&log, "message 7 from n1") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        inbox_tx.request_shutdown();
        thread.join().unwrap();
        assert_eq!(*log.lock().unwrap(), ["timer tick", "message 7 from n1"]);
    }

    #[test]
    fn a_client_that_left_does_not_disturb_the_core() {
        let log = Log::default();
        let (inbox_tx, inbox_rx) = inbox::channel();
        let (queues, _outbound) = peer_queues(NodeId(1), &cluster(), Arc::new(AtomicU64::new(0)));
        drop(inbox_tx.submit(put()));
        let mut kept = inbox_tx.submit(put());
        inbox_tx.request_shutdown();
        Driver::new(NodeId(1), Probe { log, writes: 0 }, inbox_rx, queues).run();
        assert_eq!(kept.try_recv().unwrap(), Reply::Written { applied: true, existed: false });
    }
}
