//! The closed and open loops: one tokio task per connection, each keeping up to `depth` operations in flight.
//!
//! Both loops share one schedule that hands out operations. Closed loop: an operation's start is when a
//! connection has a free slot, so a slow server slows the load down. Open loop: operation `i` is due at
//! `start + i / rate`, fixed before the run; a free connection takes the next operation, waits for its time and
//! sends it, and its latency is measured from that intended time, not from when it was sent. When the server
//! stalls, every connection fills its slots, later operations are taken late, and the time they waited for a slot
//! is in their latency: the stall is counted once for every operation it delayed, as a user would have seen it,
//! rather than once in all (coordinated omission).

use super::distribution::{KeyChooser, OpKind};
use super::keys::KeySpace;
use super::ops::{Ops, Outcome, Stage};
use super::protocol::Protocol;
use super::report::{PhaseFigures, PhaseRun, Tally};
use super::tls::TlsClient;
use super::workload::Workload;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// How long a connection waits for a reply before it gives up on what it has in flight: longer than any
/// server's own request timeout (Meridian's is 2 s), short enough that a hung server ends the run.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes read from a connection at a time at least.
const READ_CHUNK: usize = 64 << 10;

/// When operations start.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Pacing {
    /// As soon as a connection has a free slot.
    Closed,
    /// At `start + i / per_second`, whatever the server does.
    Open { per_second: f64 },
}

impl std::fmt::Display for Pacing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pacing::Closed => write!(f, "closed loop"),
            Pacing::Open { per_second } => write!(f, "open loop at {per_second} operations/s"),
        }
    }
}

/// One phase to run: where, how, and its bounds.
pub(super) struct Plan<'a> {
    pub phase: &'static str,
    /// Connection `i` goes to `addrs[i % addrs.len()]`.
    pub addrs: &'a [SocketAddr],
    pub protocol: Protocol,
    /// The database each connection selects before its first operation.
    pub db: Option<u32>,
    pub clients: usize,
    pub depth: usize,
    pub pacing: Pacing,
    /// Operations at most, and the time after which none starts.
    pub operations: u64,
    pub duration: Duration,
    pub seed: u64,
    /// Connections go over TLS with this client, if given.
    pub tls: Option<&'a TlsClient>,
}

/// A connection to a server: plain TCP, or TLS over it.
enum Link {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// Hands out operations' intended start times, shared by a phase's connections.
struct Schedule {
    start: Instant,
    pacing: Pacing,
    operations: u64,
    end: Instant,
    /// Operations handed out (`taken`, which may overshoot `operations` as connections find the end), and those
    /// sent.
    taken: AtomicU64,
    sent: AtomicU64,
}

impl Schedule {
    fn new(pacing: Pacing, operations: u64, duration: Duration) -> Schedule {
        let start = Instant::now();
        let (taken, sent) = (AtomicU64::new(0), AtomicU64::new(0));
        Schedule { start, pacing, operations, end: start + duration, taken, sent }
    }

    /// The intended start of the next operation; `None` once the phase has had every operation it may have.
    /// The open loop hands out every operation due before the end, however late; one still waiting
    /// `REPLY_TIMEOUT` after the end is left unsent, so an overloaded server cannot hold the run for ever.
    fn take(&self) -> Option<Instant> {
        let i = self.taken.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let due = match self.pacing {
            Pacing::Closed => Some(now).filter(|&now| now < self.end),
            Pacing::Open { per_second } => Some(self.start + Duration::from_secs_f64(i as f64 / per_second))
                .filter(|&due| due < self.end && now < self.end + REPLY_TIMEOUT),
        };
        due.filter(|_| i < self.operations)
    }

    /// An operation taken went out (one taken by a connection that broke before its time never does).
    fn sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    /// Open loop: operations due before the end that were never sent.
    fn unsent(&self) -> u64 {
        let Pacing::Open { per_second } = self.pacing else { return 0 };
        let due = ((self.end - self.start).as_secs_f64() * per_second).ceil() as u64;
        due.min(self.operations).saturating_sub(self.sent.load(Ordering::Relaxed))
    }
}

/// What a phase's connections share.
struct Shared {
    schedule: Schedule,
    tally: Mutex<Tally>,
    keys: Arc<KeySpace>,
    depth: usize,
    protocol: Protocol,
}

impl Shared {
    /// Counts `pending`'s operation as finished now with `outcome`; an insert's record is then acknowledged.
    fn finish(&self, tally: &mut Tally, pending: Pending, outcome: Outcome, now: Instant) {
        if pending.op == OpKind::Insert {
            self.keys.ack(pending.record);
        }
        tally.record(pending.op, outcome, now.saturating_duration_since(pending.intended));
        tally.sent_late(pending.sent.saturating_duration_since(pending.intended));
    }
}

/// Runs one phase of `workload` on a runtime: connects `plan.clients` connections, then drives them until the
/// schedule is done and every reply is in.
pub(super) fn run(
    runtime: &tokio::runtime::Runtime,
    plan: &Plan,
    workload: &Arc<Workload>,
    keys: &Arc<KeySpace>,
    chooser: &KeyChooser,
) -> Result<PhaseFigures, String> {
    runtime.block_on(async {
        let mut streams = Vec::with_capacity(plan.clients);
        for addr in plan.addrs.iter().cycle().take(plan.clients) {
            streams.push(connect(*addr, plan.db, plan.tls).await?);
        }
        let shared = Arc::new(Shared {
            schedule: Schedule::new(plan.pacing, plan.operations, plan.duration),
            tally: Mutex::new(Tally::new()),
            keys: keys.clone(),
            depth: plan.depth,
            protocol: plan.protocol,
        });
        let tasks: Vec<_> = (0..)
            .zip(streams)
            .map(|(i, stream)| {
                let seed = plan.seed ^ (i << 32) ^ i;
                let ops = Ops::new(workload.clone(), plan.protocol, keys.clone(), chooser.clone(), seed);
                tokio::spawn(Connection::new(shared.clone(), ops).drive(stream))
            })
            .collect();
        for task in tasks {
            task.await.map_err(|e| format!("a connection's task failed: {e}"))?;
        }
        let took = shared.schedule.start.elapsed();
        let unsent = shared.schedule.unsent();
        let target_ops_per_s = match plan.pacing {
            Pacing::Open { per_second } => Some(per_second),
            Pacing::Closed => None,
        };
        let shared = Arc::into_inner(shared).ok_or("a connection outlived its task")?;
        let tally = shared.tally.into_inner().map_err(|_| "a connection panicked while counting")?;
        let run = PhaseRun { phase: plan.phase, target_ops_per_s, clients: plan.clients, took, unsent };
        Ok(PhaseFigures::new(run, tally))
    })
}

async fn connect(addr: SocketAddr, db: Option<u32>, tls: Option<&TlsClient>) -> Result<Link, String> {
    let connecting = async {
        let stream = TcpStream::connect(addr).await?;
        // Each command goes out when it is due, not when Nagle's algorithm would let it.
        stream.set_nodelay(true)?;
        match tls {
            Some(tls) => Ok(Link::Tls(Box::new(tls.connect(addr, stream).await?))),
            None => Ok::<_, std::io::Error>(Link::Plain(stream)),
        }
    };
    let mut link = tokio::time::timeout(CONNECT_TIMEOUT, connecting)
        .await
        .map_err(|_| format!("cannot connect to {addr}: no answer within {CONNECT_TIMEOUT:?}"))?
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    if let Some(db) = db {
        let selected = match &mut link {
            Link::Plain(stream) => select(stream, db).await,
            Link::Tls(stream) => select(stream.as_mut(), db).await,
        };
        selected.map_err(|e| format!("{addr}: SELECT {db}: {e}"))?;
    }
    Ok(link)
}

/// Selects database `db` on a fresh connection and waits for the server's `+OK`.
async fn select<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, db: u32) -> Result<(), String> {
    let n = db.to_string();
    let command = format!("*2\r\n$6\r\nSELECT\r\n${}\r\n{n}\r\n", n.len());
    stream.write_all(command.as_bytes()).await.map_err(|e| e.to_string())?;
    let mut reply = Vec::new();
    while !reply.ends_with(b"\r\n") {
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(REPLY_TIMEOUT, stream.read(&mut byte)).await;
        match read.map_err(|_| format!("no answer within {REPLY_TIMEOUT:?}"))?.map_err(|e| e.to_string())? {
            0 => return Err("the server closed the connection".into()),
            _ => reply.push(byte[0]),
        }
    }
    match reply.as_slice() {
        b"+OK\r\n" => Ok(()),
        other => Err(String::from_utf8_lossy(other).trim_end().to_string()),
    }
}

/// A command sent and not answered yet: one per operation in flight (a read-modify-write's update replaces
/// its read).
struct Pending {
    op: OpKind,
    stage: Stage,
    record: u64,
    intended: Instant,
    /// When its first command was put out.
    sent: Instant,
}

struct Connection {
    shared: Arc<Shared>,
    ops: Ops,
    /// In the order sent, which is the order of the replies.
    pending: VecDeque<Pending>,
    input: Vec<u8>,
    output: Vec<u8>,
}

impl Connection {
    fn new(shared: Arc<Shared>, ops: Ops) -> Connection {
        Connection { shared, ops, pending: VecDeque::new(), input: Vec::new(), output: Vec::new() }
    }

    /// Runs the connection to the end of the schedule; if it breaks, what it had in flight failed.
    async fn drive(mut self, link: Link) {
        let ran = match link {
            Link::Plain(mut stream) => {
                let (reader, writer) = stream.split();
                self.run(reader, writer).await
            }
            // A TLS session is one state for both directions: its halves share it under a lock.
            Link::Tls(stream) => {
                let (reader, writer) = tokio::io::split(*stream);
                self.run(reader, writer).await
            }
        };
        if let Err(e) = ran {
            let now = Instant::now();
            let mut tally = self.shared.tally.lock().expect("no panics while counting");
            for pending in self.pending.drain(..) {
                self.shared.finish(&mut tally, pending, Outcome::Failed(e.clone()), now);
            }
        }
    }

    async fn run<R, W>(&mut self, mut reader: R, mut writer: W) -> Result<(), String>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        // An operation taken but not yet due; it waits here, its slot kept free for it.
        let mut next: Option<Instant> = None;
        let mut done = false;
        // The timers are made once and moved: a timer made for every operation costs a wake-up of the runtime's
        // driver each time. The reply timeout moves only when it fires early, as replies keep coming.
        let due = tokio::time::sleep(Duration::ZERO);
        let reply_timeout = tokio::time::sleep(REPLY_TIMEOUT);
        tokio::pin!(due, reply_timeout);
        let mut waiting_since = Instant::now();
        loop {
            done = done || self.send_due(&mut next);
            if !self.output.is_empty() {
                // Written whole before reading on: the server keeps reading while it answers, and a connection has
                // at most `depth` operations in its buffers.
                writer.write_all(&self.output).await.map_err(|e| format!("sending: {e}"))?;
                self.output.clear();
            }
            if self.pending.is_empty() {
                if done {
                    return Ok(());
                }
                waiting_since = Instant::now();
            }
            if let Some(at) = next {
                due.as_mut().reset(at.into());
            }
            self.input.reserve(READ_CHUNK);
            tokio::select! {
                read = reader.read_buf(&mut self.input), if !self.pending.is_empty() => {
                    match read.map_err(|e| format!("receiving: {e}"))? {
                        0 => return Err("the server closed the connection".into()),
                        _ => self.take_replies()?,
                    }
                    waiting_since = Instant::now();
                }
                () = &mut due, if next.is_some() => {}
                () = &mut reply_timeout, if !self.pending.is_empty() => {
                    let deadline = waiting_since + REPLY_TIMEOUT;
                    if Instant::now() >= deadline {
                        return Err(format!("no reply within {REPLY_TIMEOUT:?}"));
                    }
                    reply_timeout.as_mut().reset(deadline.into());
                }
            }
        }
    }

    /// Puts every operation that is due into the output while a slot is free; true once the schedule is done.
    fn send_due(&mut self, next: &mut Option<Instant>) -> bool {
        while self.pending.len() < self.shared.depth {
            let Some(due) = next.take().or_else(|| self.shared.schedule.take()) else { return true };
            // Compared with the time after taking it: a closed loop's operation is due the moment it is taken.
            let now = Instant::now();
            if due > now {
                *next = Some(due);
                break;
            }
            self.shared.schedule.sent();
            let (op, record) = self.ops.next(&mut self.output);
            let stage = if op == OpKind::Insert || op == OpKind::Update { Stage::Write } else { Stage::Read };
            self.pending.push_back(Pending { op, stage, record, intended: due, sent: now });
        }
        false
    }

    /// Counts every whole reply read so far; a read-modify-write's read is followed by its update.
    fn take_replies(&mut self) -> Result<(), String> {
        let now = Instant::now();
        let mut used = 0;
        let mut tally = self.shared.tally.lock().expect("no panics while counting");
        while let Some((reply, len)) = self.shared.protocol.parse(&self.input[used..])? {
            used += len;
            let pending = self.pending.pop_front().ok_or("a reply to no command")?;
            let outcome = self.ops.outcome(pending.stage, &reply);
            let failed = matches!(outcome, Outcome::Failed(_));
            if pending.op == OpKind::ReadModifyWrite && pending.stage == Stage::Read && !failed {
                self.ops.modify(&mut self.output, pending.record);
                self.pending.push_back(Pending { stage: Stage::Write, ..pending });
            } else {
                self.shared.finish(&mut tally, pending, outcome, now);
            }
        }
        self.input.drain(..used);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ycsb::resp::parse;
    use tokio::net::TcpListener;

    /// A RESP server on loopback for one connection at a time: GET gets a value, anything else `+OK`; the
    /// `stall_at`-th command (from 1) is answered only after `stall`, as a server pausing (a compaction, a
    /// fsync, a lost packet) would answer it.
    async fn fake_server(stall_at: u64, stall: Duration) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let mut seen = 0;
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut input = Vec::new();
                loop {
                    input.reserve(READ_CHUNK);
                    if stream.read_buf(&mut input).await.unwrap_or(0) == 0 {
                        break;
                    }
                    let mut used = 0;
                    while let Some((_, len)) = parse(&input[used..]).unwrap() {
                        seen += 1;
                        if seen == stall_at {
                            tokio::time::sleep(stall).await;
                        }
                        let get = input[used..].starts_with(b"*2\r\n$3\r\nGET\r\n");
                        stream.write_all(if get { b"$3\r\nabc\r\n" } else { b"+OK\r\n" }).await.unwrap();
                        used += len;
                    }
                    input.drain(..used);
                }
            }
        });
        addr
    }

    /// Runs `workload` against a fake server stalling as told, on one thread.
    fn against_fake(workload: Workload, plan: Plan, stall_at: u64, stall: Duration) -> PhaseFigures {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let addr = runtime.block_on(fake_server(stall_at, stall));
        let keys = Arc::new(KeySpace::new(workload.record_count));
        let chooser = KeyChooser::new(&workload, 0);
        run(&runtime, &Plan { addrs: &[addr], ..plan }, &Arc::new(workload), &keys, &chooser).unwrap()
    }

    fn updates_only() -> Workload {
        let mut w = Workload::preset('a').unwrap();
        w.proportions.read = 0.0;
        w.proportions.update = 1.0;
        w
    }

    /// Against no server yet: `against_fake` gives it its fake's address.
    fn plan(pacing: Pacing, clients: usize, depth: usize, operations: u64) -> Plan<'static> {
        let (addrs, protocol, duration) = (&[][..], Protocol::Resp, Duration::from_secs(20));
        Plan {
            phase: "run",
            addrs,
            protocol,
            db: None,
            clients,
            depth,
            pacing,
            operations,
            duration,
            seed: 7,
            tls: None,
        }
    }

    const STALL: Duration = Duration::from_millis(300);

    #[test]
    fn the_open_loop_counts_a_stall_in_every_operation_it_delayed() {
        // 1000 updates at 1000/s through one connection; the server stalls 300 ms on the 100th. The operations
        // due during the stall are sent late and their latency counts from when they were due: about 300 of
        // them wait, from 300 ms down to nothing, so the slowest tenth waited about 200 ms or more.
        let open = Pacing::Open { per_second: 1000.0 };
        let figures = against_fake(updates_only(), plan(open, 1, 1, 1000), 100, STALL);
        let update = &figures.ops[0];
        assert_eq!((figures.operations, figures.errors, figures.unsent), (1000, 0, 0));
        assert_eq!(figures.pacing, "open");
        assert!(update.max_us >= 290_000.0, "the stalled operation: {update:?}");
        assert!(update.p90_us >= 150_000.0, "the operations queued behind it: {update:?}");
        assert!(figures.send_lag_max_us >= 250_000.0, "they waited before being sent: {figures:?}");
        assert!(figures.seconds >= 0.99, "the schedule is fixed: {}", figures.seconds);
    }

    #[test]
    fn the_closed_loop_sees_the_same_stall_once() {
        // The contrast: a closed loop waits out the stall and sends nothing meanwhile, so one operation in a
        // thousand is slow: the coordinated omission the open loop avoids.
        let figures = against_fake(updates_only(), plan(Pacing::Closed, 1, 1, 1000), 100, STALL);
        let update = &figures.ops[0];
        assert_eq!((figures.operations, figures.errors), (1000, 0));
        assert!(update.max_us >= 290_000.0, "{update:?}");
        assert!(update.p99_us < 50_000.0, "only the stalled operation is slow: {update:?}");
        assert!(figures.send_lag_max_us < 1000.0, "a closed loop's operation starts when it is sent: {figures:?}");
    }

    #[test]
    fn pipelined_connections_complete_every_operation_and_read_modify_write_in_order() {
        let figures = against_fake(Workload::preset('f').unwrap(), plan(Pacing::Closed, 3, 8, 3000), 0, STALL);
        let by_op: Vec<(&str, u64)> = figures.ops.iter().map(|o| (o.op, o.count)).collect();
        assert_eq!(figures.errors, 0, "{:?}", figures.ops);
        assert_eq!(figures.operations, 3000, "{by_op:?}");
        assert!(by_op.iter().all(|&(_, n)| n > 1200), "about half each: {by_op:?}");
    }

    #[test]
    fn the_open_loop_sends_exactly_what_its_duration_schedules() {
        // 1000/s for 0.2 s is 200 operations, whatever the operation budget leaves room for.
        let open = Pacing::Open { per_second: 1000.0 };
        let plan = Plan { duration: Duration::from_millis(200), ..plan(open, 2, 1, 10_000) };
        let figures = against_fake(updates_only(), plan, 0, STALL);
        assert_eq!((figures.operations, figures.errors, figures.unsent), (200, 0, 0));
    }
}
