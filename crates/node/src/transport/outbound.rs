//! Sending to peers: one bounded queue and one task per peer. The task dials the peer (retrying with
//! exponential backoff), sends the `Hello`, then writes whatever is queued, several frames per write.
//! The connection is send-only; the task still watches it for reads so a peer that hangs up is noticed
//! at once rather than at the next write. With mutual TLS (`mutual_tls.rs`) the task runs the TLS handshake
//! after the dial; the rest is the same code, generic over the connection's halves.

use super::mutual_tls::PeerTls;
use super::Gate;
use meridian_core::wire::{self, Hello};
use meridian_core::NodeId;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

/// Messages waiting for one peer; beyond this they are dropped (and counted), since a peer that far
/// behind is better served by the protocol's own retransmission than by an ever-growing backlog.
pub(crate) const PEER_QUEUE_MAX: usize = 4096;
/// How many bytes of frames one write may carry.
const WRITE_BATCH_BYTES: usize = 256 << 10;
/// A dial to an unreachable host would otherwise wait for the kernel's timeout (minutes).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Starts the sender task of a new peer queue.
type Start<M> = Box<dyn FnMut(OutboundQueue<M>) + Send>;

/// The core's side of the outbound queues: non-blocking, so the core never waits on the network. Peers
/// are added (and moved) at run time as the core learns their addresses.
pub(crate) struct PeerQueues<M> {
    queues: BTreeMap<NodeId, (String, mpsc::Sender<M>)>,
    dropped: Arc<AtomicU64>,
    start: Start<M>,
}

/// One peer's queue, to be drained by its sender task.
pub(crate) struct OutboundQueue<M> {
    to: NodeId,
    addr: String,
    /// Crate-visible so the driver's tests can see what the core queued.
    pub(crate) rx: mpsc::Receiver<M>,
}

impl<M> PeerQueues<M> {
    /// No peers yet; `start` launches the sender task of each queue [`Self::route`] creates.
    pub(crate) fn new(dropped: Arc<AtomicU64>, start: impl FnMut(OutboundQueue<M>) + Send + 'static) -> Self {
        PeerQueues { queues: BTreeMap::new(), dropped, start: Box::new(start) }
    }

    /// Sends to `to` at `addr` from now on. A new or changed address gets a fresh queue and sender; the old
    /// sender, if any, stops once its queue is dropped (what was queued for the old address is lost, as on a
    /// broken connection).
    pub(crate) fn route(&mut self, to: NodeId, addr: String) {
        if self.queues.get(&to).is_some_and(|(a, _)| *a == addr) {
            return;
        }
        let (tx, rx) = mpsc::channel(PEER_QUEUE_MAX);
        self.queues.insert(to, (addr.clone(), tx));
        (self.start)(OutboundQueue { to, addr, rx });
    }

    /// Queues `msg` for `to`, or drops and counts it when the queue is full or `to` has no known address.
    pub(crate) fn send(&self, to: NodeId, msg: M) {
        let Some((_, queue)) = self.queues.get(&to) else {
            warn!(%to, "dropping a message to a node whose address is not known");
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if queue.try_send(msg).is_err() {
            debug!(%to, "peer queue full; message dropped");
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What starts sender tasks for real: each on `runtime`, introducing itself with the gate's hello, over
/// mutual TLS with `tls`.
pub(crate) fn spawner<M: Serialize + Send + 'static>(
    gate: Gate,
    runtime: Handle,
    tls: Option<PeerTls>,
) -> impl FnMut(OutboundQueue<M>) + Send {
    move |queue| {
        runtime.spawn(run_sender(gate.hello(), queue, tls.clone()));
    }
}

/// Connects, pumps, reconnects; returns once the core has dropped its side of the queue.
async fn run_sender<M: Serialize>(hello: Hello, mut queue: OutboundQueue<M>, tls: Option<PeerTls>) {
    let mut backoff = Backoff::new();
    while !queue.rx.is_closed() {
        match connect(&queue.addr).await {
            Ok(stream) => {
                let opened = Instant::now();
                match connected(stream, queue.to, tls.as_ref(), &hello, &mut queue.rx).await {
                    Ok(()) => return,
                    Err(e) => warn!(peer = %queue.to, addr = %queue.addr, "peer connection lost: {e}; reconnecting"),
                }
                // A connection that lived a while was healthy; one the peer keeps closing at once (a
                // refused handshake) must not be redialled at full speed.
                if opened.elapsed() >= BACKOFF_MAX {
                    backoff.reset();
                }
            }
            Err(e) => debug!(peer = %queue.to, addr = %queue.addr, "cannot connect to peer: {e}"),
        }
        tokio::time::sleep(backoff.next()).await;
    }
}

/// Runs a dialled connection to `to`: plain, or after a TLS handshake with `tls`.
async fn connected<M: Serialize>(
    stream: TcpStream,
    to: NodeId,
    tls: Option<&PeerTls>,
    hello: &Hello,
    rx: &mut mpsc::Receiver<M>,
) -> io::Result<()> {
    match tls {
        None => {
            info!(peer = %to, "connected to peer");
            let (reader, writer) = stream.into_split();
            pump(reader, writer, hello, rx).await
        }
        Some(tls) => {
            let stream = tls.connect(to, stream).await?;
            info!(peer = %to, "connected to peer over mutual TLS");
            let (reader, writer) = tokio::io::split(stream);
            pump(reader, writer, hello, rx).await
        }
    }
}

async fn connect(addr: &str) -> io::Result<TcpStream> {
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Sends the hello, then queued messages until the queue closes (`Ok`) or the connection fails.
async fn pump<M, R, W>(mut reader: R, mut writer: W, hello: &Hello, rx: &mut mpsc::Receiver<M>) -> io::Result<()>
where
    M: Serialize,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = Vec::new();
    wire::encode(hello, &mut buf).map_err(io::Error::other)?;
    writer.write_all(&buf).await?;
    // A TLS writer holds what it encrypted until flushed; a TCP one has nothing to flush.
    writer.flush().await?;
    let mut probe = [0u8; 1];
    loop {
        buf.clear();
        tokio::select! {
            msg = rx.recv() => {
                let Some(msg) = msg else { return Ok(()) };
                encode_batch(msg, rx, &mut buf);
                writer.write_all(&buf).await?;
                writer.flush().await?;
            }
            read = reader.read(&mut probe) => return Err(hang_up(read, &mut reader, probe[0]).await),
        }
    }
}

/// Encodes `first` and whatever else is already queued, up to [`WRITE_BATCH_BYTES`].
fn encode_batch<M: Serialize>(first: M, rx: &mut mpsc::Receiver<M>, buf: &mut Vec<u8>) {
    encode_or_drop(&first, buf);
    while buf.len() < WRITE_BATCH_BYTES {
        let Ok(msg) = rx.try_recv() else { break };
        encode_or_drop(&msg, buf);
    }
}

fn encode_or_drop<M: Serialize>(msg: &M, buf: &mut Vec<u8>) {
    if let Err(e) = wire::encode(msg, buf) {
        warn!("dropping a peer message that cannot be sent: {e}");
    }
}

/// Bytes of a peer's refusal read back at most (`wire::refusal`).
const REFUSAL_MAX: usize = 4096;

/// What a read on a send-only connection means: the peer closed it, it failed, it refused this node (and
/// wrote why, starting with `first`), or it broke the protocol by talking back.
async fn hang_up<R: AsyncRead + Unpin>(read: io::Result<usize>, reader: &mut R, first: u8) -> io::Error {
    match read {
        Ok(0) => io::Error::new(io::ErrorKind::ConnectionAborted, "the peer closed the connection"),
        Ok(_) => {
            let mut said = vec![first];
            let mut rest = reader.take(REFUSAL_MAX as u64);
            // Whatever arrives in time; a refusal is one short line and the peer closes after it.
            let _ = tokio::time::timeout(CONNECT_TIMEOUT, rest.read_to_end(&mut said)).await;
            match wire::refusal_reason(&said) {
                Some(reason) => io::Error::new(io::ErrorKind::PermissionDenied, format!("the peer refused: {reason}")),
                None => io::Error::new(io::ErrorKind::InvalidData, "the peer sent data on a send-only connection"),
            }
        }
        Err(e) => e,
    }
}

struct Backoff {
    next: Duration,
}

impl Backoff {
    fn new() -> Backoff {
        Backoff { next: BACKOFF_MIN }
    }

    fn reset(&mut self) {
        self.next = BACKOFF_MIN;
    }

    fn next(&mut self) -> Duration {
        let now = self.next;
        self.next = (now * 2).min(BACKOFF_MAX);
        now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap_and_resets() {
        let mut b = Backoff::new();
        let seq: Vec<u64> = (0..7).map(|_| b.next().as_millis() as u64).collect();
        assert_eq!(seq, vec![50, 100, 200, 400, 800, 1000, 1000]);
        b.reset();
        assert_eq!(b.next(), BACKOFF_MIN);
    }

    #[test]
    fn full_queues_and_unknown_nodes_drop_and_count() {
        let dropped = Arc::new(AtomicU64::new(0));
        let started = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = started.clone();
        let mut queues = PeerQueues::<u32>::new(dropped.clone(), move |q| sink.lock().unwrap().push(q));
        queues.route(NodeId(2), "127.0.0.1:2".into());
        queues.route(NodeId(2), "127.0.0.1:2".into());
        assert_eq!(started.lock().unwrap().len(), 1, "the same address keeps its queue");
        for i in 0..PEER_QUEUE_MAX as u32 + 5 {
            queues.send(NodeId(2), i);
        }
        queues.send(NodeId(7), 0);
        assert_eq!(dropped.load(Ordering::Relaxed), 6);
    }
}
