//! The core task: runs one [`Process`] for real.
//!
//! The core is a task on the node's tokio runtime, beside the connections that feed it, rather than an OS
//! thread of its own: a request then reaches it, and its reply reaches the connection, as a queue push and a
//! task wake-up on the same runtime instead of a sleeping thread woken through the kernel, which on a small
//! machine cost more than the request itself. When the core is idle, a client request does not even take
//! that hop: the front-end steps the core in its own task ([`CoreHandle`]), and the core task is woken only
//! if the step left it something to do. The core's state is behind one lock, which the core task holds for a
//! whole batch and releases while it waits.
//!
//! The loop: wait until the first input, the next timer deadline, (async mode) the next fsync deadline or
//! the end of the fsync under way; take whatever else is waiting, letting the worker's other tasks run once
//! (or a few times, when concurrent writes could share the next fsync: `Driver::yields_allowed`) to queue
//! theirs, up to [`BATCH_MAX`] inputs and [`GROUP_BYTES_MAX`] bytes of client write values (in group mode
//! with a `max_wait`, waiting that long for more); fire the timers that are due; feed each to the process
//! with `now` read from the monotonic clock (nanoseconds since the driver started; see
//! `meridian_core::time`). Immediate effects are carried out as each step emits them (sends go to the peer
//! queues, replies to the waiting client). What happens to the `after_sync` effects depends on the
//! durability mode the step's writes were made under (`meridian_core::Dirt`: a keyspace's own mode, or the
//! node's default, [`SyncPolicy`]):
//!
//! - `group`: at the end of the batch the core begins a sync ([`Process::begin_sync`]): the process hands
//!   its writes to the OS and gives back the fsync as a job, which runs on the core's fsync thread
//!   (`driver/syncer.rs`) while the core goes on taking inputs. The batch's `after_sync` effects are carried
//!   out, in the order they were emitted, when the job has succeeded. Only one fsync is under way at a
//!   time: the writes made meanwhile wait for the next one, which begins as soon as a batch ends after it,
//!   so every write waits for at most the rest of one fsync and the whole of the next, and each fsync
//!   covers everything that arrived during the one before. This is the group commit allowed by the
//!   contract in `meridian_core::process`.
//! - `sync`: the step's writes are synced at the end of the step, and the core waits for it, so no fsync is
//!   shared.
//! - `async`: `after_sync` effects are carried out at once, like immediate ones, but only after
//!   [`Process::flush`] has handed the writes before them to the OS, so a process crash cannot lose an
//!   acknowledged write (a datastore may buffer appends in user space). The driver syncs
//!   `async_interval` after the oldest unsynced async write and at shutdown, and records how long that
//!   write's acknowledgement had been out (the loss window INFO reports).
//!
//! `after_sync` effects never overtake each other: once one waits for a sync, every later one waits too,
//! and while a `sync` or `group` write is unsynced, even those of steps that wrote nothing wait, since they
//! may speak for it. On a single-threaded runtime, as in tests, a sync's job runs in place when it begins.
//!
//! A failed sync or flush stops the whole OS process (fail-stop): after a failed fsync the state of the
//! file is unknown, so the node must not keep answering from it; it recovers from what is durable on
//! restart.
//! A panic in the core or in its fsync does the same, because a node whose core is gone could only refuse
//! requests.
//!
//! Messages a process sends to itself are delivered as inputs of the next step rather than through
//! the network. Replies for request ids the driver does not know (the client left) are ignored.

use crate::durability::{Persistence, BATCH_MAX, GROUP_BYTES_MAX};
use crate::inbox::{value_bytes, Answer, ClientRequest, CoreInbox, Input};
use crate::timers::Timers;
use crate::transport::PeerQueues;
use clients::Clients;
use meridian_core::acl::Access;
use meridian_core::{DurabilityMode, Effect, Effects, NodeId, Process, Reply, Request, RequestId, Time};
use std::collections::VecDeque;
use std::fmt::Display;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use syncer::{Outcome, Syncer};
use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::mpsc::{Receiver, Sender};
use tokio::sync::{oneshot, watch, Mutex, Notify};
use tokio::task::JoinHandle;
use tokio::time::timeout_at;
use tracing::error;

/// How many times a batch that owes a shared fsync yields to the worker's other tasks before it closes
/// (`Driver::yields_allowed`).
const LINGER_YIELDS: u32 = 16;

/// The exit code of a fail-stop (failed sync or core panic).
const FAIL_STOP_EXIT_CODE: i32 = 1;

type Fx<P> = Effects<<P as Process>::Msg, <P as Process>::Timer>;
type FxItem<P> = Effect<<P as Process>::Msg, <P as Process>::Timer>;

/// The core task: the inbox, and the core it steps, which callers may step in their own task ([`CoreHandle`]).
pub(crate) struct Driver<P: Process> {
    inbox: Receiver<Input<P::Msg>>,
    core: Arc<Mutex<Core<P>>>,
    /// The core's [`Core::wake`], waited on without holding the core.
    wake: Arc<Notify>,
}

/// The process and everything around it that a step touches.
pub(crate) struct Core<P: Process> {
    me: NodeId,
    process: P,
    peers: PeerQueues<P::Msg>,
    timers: Timers<P::Timer>,
    clients: Clients,
    next_request: u64,
    /// Messages the process sent to itself, delivered as the next inputs.
    loopback: VecDeque<P::Msg>,
    fx: Fx<P>,
    /// The `after_sync` effects waiting for the next sync to begin, in the order they were emitted.
    deferred: Vec<FxItem<P>>,
    /// The sync under way on the fsync thread.
    in_flight: Option<InFlight<P>>,
    /// When the oldest async write not yet covered by a sync was made: the start of the loss window.
    lazy_since: Option<Instant>,
    /// Whether a `sync` or `group` write is not yet covered by a sync: the next commit owes one.
    owes_sync: bool,
    /// Whether the process wrote since its last flush or sync. Only early releases read it: the others
    /// follow a sync, which flushes too.
    unflushed: bool,
    /// Value bytes of the client writes taken into the current batch.
    batch_bytes: usize,
    /// The node's durability policy, and the fsync figures reported to INFO.
    persistence: Arc<Persistence>,
    /// Zero of the monotonic clock the core sees.
    started: Instant,
    /// The thread that runs fsyncs, once the first one is due on a multi-threaded runtime.
    syncer: Option<Syncer>,
    /// Steps that wrote something owing an fsync since the last sync began.
    unsynced_writes: usize,
    /// Whether the last sync covered more than one step's writes: writers are concurrent.
    last_sync_shared: bool,
    /// Whether the core task has started the process and not yet stopped: only then may a caller step it.
    running: bool,
    /// A `sync` write was taken in a caller's task: the core task must make it durable before anything else.
    settle_owed: bool,
    /// Wakes the idle core task: a step taken elsewhere left it work (a sync owed, a self-sent message, an
    /// earlier deadline), or its fsync ended.
    wake: Arc<Notify>,
    /// What the core tells the node's listeners.
    published: Published,
}

/// What the core tells the node's listeners through the driver: whether it serves ([`Process::serving`], for the
/// client port and `GET /ready`, as of the end of the last batch) and the users client commands are checked
/// against ([`Process::access`], as of the last step).
pub(crate) struct Published {
    pub(crate) serving: watch::Sender<bool>,
    pub(crate) access: watch::Sender<Option<Arc<Access>>>,
    /// What `access` holds, compared without taking its lock.
    access_sent: Option<Arc<Access>>,
}

impl Published {
    pub(crate) fn new(serving: watch::Sender<bool>, access: watch::Sender<Option<Arc<Access>>>) -> Published {
        let access_sent = access.borrow().clone();
        Published { serving, access, access_sent }
    }

    /// Hands `access` to the client connections if it is not the one they have.
    fn access(&mut self, access: Option<&Arc<Access>>) {
        let same = match (access, &self.access_sent) {
            (Some(new), Some(sent)) => Arc::ptr_eq(new, sent),
            (new, sent) => new.is_none() && sent.is_none(),
        };
        if !same {
            self.access_sent = access.cloned();
            self.access.send_replace(access.cloned());
        }
    }
}

/// A sync whose job runs on the fsync thread.
struct InFlight<P: Process> {
    outcome: oneshot::Receiver<Outcome>,
    covered: Covered<P>,
}

/// What a sync releases when it ends.
struct Covered<P: Process> {
    /// The `after_sync` effects waiting for it, in order.
    effects: Vec<FxItem<P>>,
    /// When the oldest async write it covers was made.
    lazy_since: Option<Instant>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Stop,
}

/// What the next input turned out to be.
enum Next<M> {
    Input(Input<M>),
    /// Nothing more came in time.
    None,
    /// Every sender is gone.
    Closed,
}

/// Starts the core task on the current runtime. It stops after a shutdown input, or when every sender of the
/// inbox is gone; the handle resolves then.
pub(crate) fn spawn<P>(driver: Driver<P>) -> JoinHandle<()>
where
    P: Process + Send + 'static,
    P::Msg: Send,
    P::Timer: Send,
{
    let core = tokio::spawn(driver.run());
    tokio::spawn(async move {
        if core.await.is_err_and(|e| e.is_panic()) {
            core_panicked();
        }
    })
}

/// Stops the OS process after a panic in a step, wherever it ran: the core's state may be half-changed, and a
/// node whose core is gone could only refuse requests.
fn core_panicked() -> ! {
    error!("the protocol core panicked; stopping the node (fail-stop)");
    std::process::exit(FAIL_STOP_EXIT_CODE);
}

/// A request the process did not answer at once, which it leaves with the caller (`Process::write_at_once`).
fn declined(req: Option<Request>) -> Request {
    req.expect("a process took a request it did not answer at once")
}

/// Stops the OS process after a failed flush or sync: the state of the node's files is unknown.
fn fail_stop(what: &str, e: impl Display) -> ! {
    error!("{what} failed: {e}; stopping the node, since the state of its files is unknown (fail-stop)");
    std::process::exit(FAIL_STOP_EXIT_CODE);
}

/// The value bytes a client input asks to write; what [`GROUP_BYTES_MAX`] counts.
fn write_bytes<M>(input: &Input<M>) -> usize {
    match input {
        Input::Client { req, .. } => value_bytes(req),
        Input::Clients(reqs) => reqs.iter().map(|(req, _)| value_bytes(req)).sum(),
        Input::Peer { .. } | Input::Shutdown => 0,
    }
}

/// How many of a batch's [`BATCH_MAX`] inputs `input` counts for: a pipeline's requests count one each.
fn inputs_in<M>(input: &Input<M>) -> usize {
    match input {
        Input::Clients(reqs) => reqs.len(),
        _ => 1,
    }
}

/// The next input, waiting for one until `deadline` (without one, for as long as it takes).
async fn receive<M>(inbox: &mut Receiver<Input<M>>, deadline: Option<Instant>) -> Next<M> {
    let received = match deadline {
        Some(deadline) => match timeout_at(deadline.into(), inbox.recv()).await {
            Ok(received) => received,
            Err(_) => return Next::None,
        },
        None => inbox.recv().await,
    };
    received.map_or(Next::Closed, Next::Input)
}

/// The next input of a batch: one already waiting, or one arriving before `close`.
async fn next_in_batch<M>(inbox: &mut Receiver<Input<M>>, close: Option<Instant>) -> Next<M> {
    if close.is_some() {
        return receive(inbox, close).await;
    }
    match inbox.try_recv() {
        Ok(input) => Next::Input(input),
        Err(TryRecvError::Empty) => Next::None,
        Err(TryRecvError::Disconnected) => Next::Closed,
    }
}

impl<P: Process + Send + 'static> Driver<P> {
    pub(crate) fn new(
        me: NodeId,
        process: P,
        inbox: Receiver<Input<P::Msg>>,
        peers: PeerQueues<P::Msg>,
        persistence: Arc<Persistence>,
        published: Published,
    ) -> Self {
        let wake = Arc::new(Notify::new());
        let core = Core {
            me,
            process,
            peers,
            timers: Timers::new(),
            clients: Clients::default(),
            next_request: 0,
            loopback: VecDeque::new(),
            fx: Effects::new(),
            deferred: Vec::new(),
            in_flight: None,
            lazy_since: None,
            owes_sync: false,
            unflushed: false,
            batch_bytes: 0,
            persistence,
            started: Instant::now(),
            syncer: None,
            unsynced_writes: 0,
            last_sync_shared: false,
            running: false,
            settle_owed: false,
            wake: wake.clone(),
            published,
        };
        Driver { inbox, core: Arc::new(Mutex::new(core)), wake }
    }

    /// The way in for callers that may step the core in their own task when it is idle; `inbox` is the
    /// sender of this driver's inbox, which takes their requests otherwise.
    pub(crate) fn handle(&self, inbox: Sender<Input<P::Msg>>) -> CoreHandle<P> {
        CoreHandle { inbox, core: self.core.clone() }
    }

    pub(crate) async fn run(mut self) {
        let shared = self.core.clone();
        shared.lock().await.start();
        loop {
            let first = self.wait_for_input().await;
            let mut core = shared.lock().await;
            if core.batch(first, &mut self.inbox).await == Flow::Stop {
                // A clean shutdown loses no write, async ones included, and answers every write it took.
                core.settle().await;
                if let Err(e) = core.process.stopped() {
                    tracing::warn!("could not record the clean stop; the next start copies more: {e}");
                }
                core.running = false;
                return;
            }
        }
    }

    /// Waits, without holding the core, until an input arrives, the next timer or async fsync is due, or
    /// something wakes the core (the end of its fsync, a step taken elsewhere that left it work). Does not
    /// wait when self-sent messages are waiting, but lets the runtime's other tasks run first, since a core
    /// that keeps messaging itself must not starve them.
    async fn wait_for_input(&mut self) -> Next<P::Msg> {
        let (deadline, loopback) = {
            let core = self.core.lock().await;
            (core.next_deadline(), !core.loopback.is_empty())
        };
        if loopback {
            tokio::task::yield_now().await;
            return Next::None;
        }
        tokio::select! {
            next = receive(&mut self.inbox, deadline) => next,
            () = self.wake.notified() => Next::None,
        }
    }

    #[cfg(test)]
    fn core(&self) -> tokio::sync::MutexGuard<'_, Core<P>> {
        self.core.try_lock().expect("the core is idle")
    }
}

/// How a node's front-ends reach its core ([`CoreInbox`]): a request is stepped at once in the caller's task
/// when the core is idle, and goes through the inbox otherwise.
///
/// Handing a request to the core task and its reply back costs two task wake-ups, often across CPUs, which
/// on a small machine cost more than the step itself: a request answered within its step (every request of
/// a one-node keyspace) is served faster where it arrived. The core task is woken only when the step left it
/// something to do. While the core task is taking a batch it holds the core, and requests queue in the inbox
/// to join the batch, so group commits still gather every write that arrives during one.
pub(crate) struct CoreHandle<P: Process> {
    inbox: Sender<Input<P::Msg>>,
    core: Arc<Mutex<Core<P>>>,
}

impl<P> CoreInbox for CoreHandle<P>
where
    P: Process + Send + 'static,
    P::Msg: Send,
    P::Timer: Send,
{
    fn submit(&self, req: Request) -> Answer {
        match self.core.try_lock() {
            // The lock does not poison, so a panic here must not merely end the caller's task.
            Ok(mut core) if core.takes_requests() => {
                catch_unwind(AssertUnwindSafe(|| core.serve(req))).unwrap_or_else(|_| core_panicked())
            }
            _ => self.inbox.submit(req),
        }
    }

    fn enqueue(&self, reqs: Vec<ClientRequest>) {
        self.inbox.enqueue(reqs)
    }

    fn request_shutdown(&self) {
        self.inbox.request_shutdown()
    }
}

impl<P: Process + Send + 'static> Core<P> {
    /// The clocks as protocol cores see them, read before every input: the monotonic clock (time since this
    /// driver started) is returned, the wall clock handed to the core.
    fn now(&mut self) -> Time {
        self.set_wall_clock();
        self.monotonic()
    }

    fn set_wall_clock(&mut self) {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        self.process.set_wall_clock(wall);
    }

    fn monotonic(&self) -> Time {
        Time::from_nanos(self.started.elapsed().as_nanos() as u64)
    }

    /// Starts the process; from then on a caller may step it too.
    fn start(&mut self) {
        let now = self.now();
        self.process.start(now, &mut self.fx);
        self.absorb();
        self.commit();
        self.running = true;
    }

    /// One batch: `first` (what the wait brought), then the inputs that are waiting and the due timers, then
    /// a commit. A `sync` write taken in a caller's task is made durable first.
    async fn batch(&mut self, first: Next<P::Msg>, inbox: &mut Receiver<Input<P::Msg>>) -> Flow {
        if std::mem::take(&mut self.settle_owed) {
            self.settle().await;
        }
        self.land_if_ended();
        self.batch_bytes = 0;
        let (mut taken, mut yields) = (1, 0);
        let mut flow = match first {
            Next::Input(input) => {
                taken = inputs_in(&input);
                self.handle(input).await
            }
            Next::None => Flow::Continue,
            Next::Closed => Flow::Stop,
        };
        let close = self.batch_close();
        while flow == Flow::Continue && taken < BATCH_MAX && self.batch_bytes < GROUP_BYTES_MAX {
            flow = match next_in_batch(inbox, close).await {
                Next::Input(input) => {
                    taken += inputs_in(&input);
                    self.handle(input).await
                }
                // The inputs that this worker's other tasks (connections, peers) are about to queue get a turn
                // to join the batch: one batch, one commit and one round of wake-ups for all of them.
                Next::None if close.is_none() && yields < self.yields_allowed() => {
                    yields += 1;
                    tokio::task::yield_now().await;
                    continue;
                }
                Next::None => break,
                Next::Closed => Flow::Stop,
            };
        }
        self.fire_due_timers().await;
        self.deliver_loopback().await;
        self.commit();
        flow
    }

    /// How often a batch whose inbox ran dry lets the worker's other tasks run and looks again. Once, unless
    /// the batch owes an fsync and the last fsync was shared: under concurrent writes the inputs a node needs
    /// arrive over many polls of its worker (peers' messages, client requests), and an fsync costs this
    /// machine's CPU as much as a dozen writes, so waiting a few polls for more of them to share it saves more
    /// than it spends. A lone writer never lingers, so its latency is unchanged.
    fn yields_allowed(&self) -> u32 {
        if self.owes_sync && self.last_sync_shared {
            LINGER_YIELDS
        } else {
            1
        }
    }

    /// Until when a batch that has begun may wait for more inputs: only a node whose default is group commit
    /// with a non-zero `group_max_wait` waits, up to that wait, and never past the next timer. A zero wait
    /// takes only what is queued, without a timer: tokio's timers fire on whole milliseconds, so even a
    /// deadline of "now" would hold every batch up to a millisecond.
    fn batch_close(&self) -> Option<Instant> {
        let policy = self.persistence.policy;
        if policy.default != DurabilityMode::Group || policy.group_max_wait.is_zero() {
            return None;
        }
        let close = Instant::now().checked_add(policy.group_max_wait)?;
        Some(self.timers.next_deadline().map_or(close, |timer| timer.min(close)))
    }

    /// The earlier of the next timer and the next async fsync. While a sync is under way, its end wakes the
    /// core and the next can begin only then, so a due async fsync sets no deadline (it would spin the loop).
    fn next_deadline(&self) -> Option<Instant> {
        let lazy_since = self.lazy_since.filter(|_| self.in_flight.is_none());
        let fsync = lazy_since.and_then(|since| since.checked_add(self.persistence.policy.async_interval));
        [self.timers.next_deadline(), fsync].into_iter().flatten().min()
    }

    async fn handle(&mut self, input: Input<P::Msg>) -> Flow {
        self.batch_bytes += write_bytes(&input);
        match input {
            Input::Peer { from, msg } => {
                let now = self.now();
                self.process.on_message(now, from, msg, &mut self.fx);
            }
            Input::Client { req, reply } => {
                let now = self.now();
                self.request(now, req, reply);
            }
            Input::Clients(reqs) => {
                // Each is a step of its own, as if it had come alone, but they arrived together, so one clock
                // reading serves them all until a step waits for the disk.
                let mut now = self.now();
                for (req, reply) in reqs {
                    self.request(now, req, reply);
                    if self.step_done().await {
                        now = self.now();
                    }
                }
                return Flow::Continue;
            }
            Input::Shutdown => return Flow::Stop,
        }
        self.step_done().await;
        Flow::Continue
    }

    /// Steps a request taken through the inbox at `now`; its answer goes to `reply`.
    fn request(&mut self, now: Time, req: Request, reply: oneshot::Sender<Reply>) {
        let mut req = Some(req);
        let answer = match &req {
            Some(read) if read.is_read() => self.read_at_once(now, read),
            _ => self.write_at_once(now, &mut req),
        };
        if let Some(answer) = answer {
            // A closed receiver means the client left.
            let _ = reply.send(answer);
            return;
        }
        let id = self.next_id();
        self.clients.add(id, reply);
        self.process.on_request(now, id, declined(req), &mut self.fx);
    }

    fn next_id(&mut self) -> RequestId {
        self.next_request += 1;
        RequestId(self.next_request - 1)
    }

    /// The process's answer to the read `req` if it gives one at once ([`Process::read_at_once`]): only while the
    /// answer could leave at once as a reply effect too, with no write waiting to be made durable (`absorb`).
    fn read_at_once(&mut self, now: Time, req: &Request) -> Option<Reply> {
        if !self.answers_at_once() {
            return None;
        }
        let answer = self.process.read_at_once(now, req)?;
        // What it saw must reach the OS before it leaves, as for a reply effect (`absorb`).
        self.flush();
        Some(answer)
    }

    /// The same for any other request ([`Process::write_at_once`]), which the process takes when it answers.
    fn write_at_once(&mut self, now: Time, req: &mut Option<Request>) -> Option<Reply> {
        if !self.answers_at_once() {
            return None;
        }
        let answer = self.process.write_at_once(now, req)?;
        self.flush();
        Some(answer)
    }

    fn answers_at_once(&self) -> bool {
        !self.owes_sync && self.deferred.is_empty() && self.in_flight.is_none()
    }

    /// Whether a caller may step the core now: it is running, and nothing the core task must do first is
    /// waiting (a `sync` write to settle, self-sent messages, which go before new inputs).
    fn takes_requests(&self) -> bool {
        self.running && !self.settle_owed && self.loopback.is_empty()
    }

    /// Steps a request in the caller's task ([`CoreHandle`]), and wakes the core task if the step left it
    /// work: a sync or async fsync now owed, an earlier deadline, or self-sent messages. Syncs begin and land
    /// only in the core task, which gathers a batch's writes into one.
    fn serve(&mut self, req: Request) -> Answer {
        // The wall clock is read for a write or a full step, not for a read answered at once (see
        // `Process::read_at_once`). A read is only borrowed on its way, the common answer's path, so that it is
        // not copied (bench/instructions).
        let now = self.monotonic();
        if req.is_read() {
            if let Some(answer) = self.read_at_once(now, &req) {
                return Answer::Given(Some(answer));
            }
            self.set_wall_clock();
            return self.step_request(now, req);
        }
        self.set_wall_clock();
        let mut write = Some(req);
        if let Some(answer) = self.write_at_once(now, &mut write) {
            return Answer::Given(Some(answer));
        }
        self.step_request(now, declined(write))
    }

    /// [`Self::serve`]'s step of a request not answered at once.
    fn step_request(&mut self, now: Time, req: Request) -> Answer {
        let (owed_before, deadline_before) = (self.owes_sync, self.next_deadline());
        let id = self.next_id();
        self.clients.step_here(id);
        self.process.on_request(now, id, req, &mut self.fx);
        self.settle_owed = self.absorb() == Some(DurabilityMode::Sync);
        let answer = match self.clients.stepped_here() {
            Some(reply) => Answer::Given(Some(reply)),
            None => {
                let (tx, rx) = oneshot::channel();
                self.clients.add(id, tx);
                Answer::Coming(rx)
            }
        };
        // An async write owes an fsync by a deadline, which `earlier` covers.
        let earlier = match (self.next_deadline(), deadline_before) {
            (Some(after), Some(before)) => after < before,
            (after, _) => after.is_some(),
        };
        if (self.owes_sync && !owed_before) || self.settle_owed || earlier || !self.loopback.is_empty() {
            self.wake.notify_one();
        }
        answer
    }

    async fn fire_due_timers(&mut self) {
        for timer in self.timers.take_due(Instant::now()) {
            let now = self.now();
            self.process.on_timer(now, timer, &mut self.fx);
            self.step_done().await;
        }
    }

    /// Delivers the self-sent messages queued so far; any they cause wait for the next batch.
    async fn deliver_loopback(&mut self) {
        for msg in std::mem::take(&mut self.loopback) {
            let (now, me) = (self.now(), self.me);
            self.process.on_message(now, me, msg, &mut self.fx);
            self.step_done().await;
        }
    }

    /// Ends a step: takes its effects, and makes its writes durable before going on if it made a `sync`
    /// write. Returns whether it waited for that.
    async fn step_done(&mut self) -> bool {
        let settles = self.absorb() == Some(DurabilityMode::Sync);
        if settles {
            self.settle().await;
        }
        settles
    }

    /// Takes one step's effects: immediate ones are carried out now, `after_sync` ones after a flush if
    /// nothing before them waits for a sync, otherwise when the sync they wait for ends. Returns the
    /// durability the step's writes owe, if any: a `sync` write is for the caller to settle at once.
    fn absorb(&mut self) -> Option<DurabilityMode> {
        // Before the step's replies leave: a client told that its `ACL SETUSER` took finds it in force here.
        self.published.access(self.process.access());
        // Out of `self` while its effects are carried out, which takes `self`; nothing adds to it meanwhile.
        let mut fx = std::mem::take(&mut self.fx);
        let (items, dirt) = fx.drain();
        let owed = dirt.owed(self.persistence.policy.default);
        match owed {
            None => {}
            Some(DurabilityMode::Async) => _ = self.lazy_since.get_or_insert_with(Instant::now),
            Some(DurabilityMode::Group | DurabilityMode::Sync) => {
                self.owes_sync = true;
                self.unsynced_writes += 1;
            }
        }
        self.unflushed |= owed.is_some();
        for effect in items {
            if !effect.after_sync() {
                self.carry_out(effect);
            } else if self.owes_sync || !self.deferred.is_empty() {
                self.deferred.push(effect);
            } else if let Some(flight) = &mut self.in_flight {
                // It follows only writes the sync under way covers.
                flight.covered.effects.push(effect);
            } else {
                self.flush();
                self.carry_out(effect);
            }
        }
        self.fx = fx;
        owed
    }

    /// Ends a batch without waiting: lands the sync under way if it has ended, then begins the next one if a
    /// sync is owed now. (Deferred effects always wait for a sync that is owed: they are deferred only behind
    /// a `sync` or `group` write.)
    fn commit(&mut self) {
        self.land_if_ended();
        if self.in_flight.is_none() && self.sync_owed(Instant::now()) {
            self.begin_sync();
        }
        let serving = self.process.serving();
        self.published.serving.send_if_modified(|was| std::mem::replace(was, serving) != serving);
    }

    /// Lands the sync under way if its job has ended.
    fn land_if_ended(&mut self) {
        if let Some(flight) = &mut self.in_flight {
            match flight.outcome.try_recv() {
                Err(oneshot::error::TryRecvError::Empty) => {}
                Ok(outcome) => self.land(Some(outcome)),
                Err(oneshot::error::TryRecvError::Closed) => self.land(None),
            }
        }
    }

    /// Makes every write so far durable and carries out every effect waiting for that, waiting for the disk.
    async fn settle(&mut self) {
        self.wait_for_sync().await;
        if self.owes_sync || self.lazy_since.is_some() {
            self.begin_sync();
            self.wait_for_sync().await;
        }
    }

    /// Whether unsynced writes must be synced at `now`: `sync` and `group` writes always; async writes once
    /// they have waited out the interval.
    fn sync_owed(&self, now: Instant) -> bool {
        let interval = self.persistence.policy.async_interval;
        self.owes_sync || self.lazy_since.is_some_and(|since| now.saturating_duration_since(since) >= interval)
    }

    /// Begins a sync of every write so far, taking the effects that wait for it: its job goes to the fsync
    /// thread on a multi-threaded runtime, and runs in place otherwise (or there is no job: nothing needed
    /// an fsync).
    fn begin_sync(&mut self) {
        let started = Instant::now();
        let job = self.process.begin_sync().unwrap_or_else(|e| fail_stop("sync", e));
        self.last_sync_shared = self.unsynced_writes > 1;
        (self.owes_sync, self.unflushed, self.unsynced_writes) = (false, false, 0);
        let covered = Covered { effects: std::mem::take(&mut self.deferred), lazy_since: self.lazy_since.take() };
        let Some(job) = job else {
            return self.end_sync((Ok(Ok(())), started.elapsed()), covered);
        };
        match self.syncer() {
            Some(syncer) => self.in_flight = Some(InFlight { outcome: syncer.submit(job), covered }),
            None => self.end_sync((Ok(job()), started.elapsed()), covered),
        }
    }

    /// The core's fsync thread, started at the first fsync; none on a single-threaded runtime, where the
    /// fsync runs in place.
    fn syncer(&mut self) -> Option<&Syncer> {
        if Handle::try_current().map(|h| h.runtime_flavor()).ok() != Some(RuntimeFlavor::MultiThread) {
            return None;
        }
        Some(match &mut self.syncer {
            Some(syncer) => syncer,
            started => started.insert(
                Syncer::start(format!("fsync-{}", self.me), self.wake.clone())
                    .unwrap_or_else(|e| fail_stop("starting the fsync thread", e)),
            ),
        })
    }

    /// Waits for the sync under way, if any, and lands it.
    async fn wait_for_sync(&mut self) {
        if let Some(flight) = &mut self.in_flight {
            let outcome = (&mut flight.outcome).await;
            self.land(outcome.ok());
        }
    }

    /// Ends the sync under way with the outcome of its job (`None`: the fsync thread is gone).
    fn land(&mut self, outcome: Option<Outcome>) {
        let flight = self.in_flight.take().expect("a sync is under way");
        let outcome = outcome.unwrap_or_else(|| fail_stop("sync", "the fsync thread has stopped"));
        self.end_sync(outcome, flight.covered);
    }

    /// After a sync's job: stops the node if it failed (a panic goes on to the core's watcher), and otherwise
    /// lets the process finish the sync, records it and carries out the effects it released.
    fn end_sync(&mut self, (result, took): Outcome, covered: Covered<P>) {
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => fail_stop("sync", e),
            Err(panic) => std::panic::resume_unwind(panic),
        }
        self.process.end_sync();
        let window = covered.lazy_since.map(|since| since.elapsed());
        self.persistence.record_fsync(took, window);
        // Async writes made since the sync began may be among what these effects speak for.
        if self.lazy_since.is_some() {
            self.flush();
        }
        for effect in covered.effects {
            self.carry_out(effect);
        }
    }

    /// Hands every write so far to the OS if any is still in the process, or stops the node.
    fn flush(&mut self) {
        if !self.unflushed {
            return;
        }
        if let Err(e) = self.process.flush() {
            fail_stop("flush", e);
        }
        self.unflushed = false;
    }

    fn carry_out(&mut self, effect: FxItem<P>) {
        match effect {
            Effect::Send { to, msg, .. } if to == self.me => self.loopback.push_back(msg),
            Effect::Send { to, msg, .. } => self.peers.send(to, msg),
            Effect::Reply { id, reply, .. } => self.clients.answer(id, reply),
            Effect::SetTimer { timer, after } => self.timers.set(timer, Instant::now() + after),
            Effect::CancelTimer { timer } => self.timers.cancel(&timer),
            Effect::Address { node, addr } if node != self.me => self.peers.route(node, addr),
            Effect::Address { .. } => {}
        }
    }
}

mod clients;
mod syncer;
#[cfg(test)]
mod tests;
