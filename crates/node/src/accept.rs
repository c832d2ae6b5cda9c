//! The accept loop shared by the RESP and peer listeners.
//!
//! Connection tasks live in a [`JoinSet`] owned by the loop, so aborting the loop's task (node shutdown)
//! closes the listener and aborts every connection it accepted, with nothing left behind.
//!
//! A listener may cap the connections it serves at once ([`Cap`]): one accepted beyond the cap is sent
//! the cap's refusal and closed, as Redis does past `maxclients`, and the others are not disturbed. Listeners
//! given clones of one cap share it: the RESP and TLS client ports count their connections together.
//!
//! A listener given a [`DrainWatch`] stops at its signal without cutting anyone off: it closes the listening
//! socket, then waits up to [`DRAIN_MAX`] for its connections to finish (each watches the same signal and
//! winds itself down), and only then aborts the ones left.

use crate::drain::DrainWatch;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

/// A failed accept is usually resource exhaustion (too many open files); pausing lets connections
/// close instead of spinning on the error.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);
/// How long a closing connection (refused, or drained) is given to read what it was sent before it is
/// dropped.
const LINGER: Duration = Duration::from_secs(1);
/// Bytes a closing client may send while it lingers; past them it is dropped at once.
const LINGER_BYTES: usize = 64 << 10;
/// A lingering client that sends nothing for this long is taken to have stopped sending: an idle client
/// (a pooled connection) does not hold a shutdown up for the whole [`LINGER`].
const LINGER_IDLE: Duration = Duration::from_millis(100);
/// Refused connections lingering at once; past them a refusal is written without waiting and the
/// connection dropped, so a flood of connections cannot hold many sockets open through refusals.
const LINGERING_MAX: usize = 64;
/// How long a draining listener waits for its connections to finish before it aborts them.
pub(crate) const DRAIN_MAX: Duration = Duration::from_secs(5);

/// The most connections a listener serves at once, and what it writes to one past them.
#[derive(Clone, Debug)]
pub(crate) struct Cap {
    max: usize,
    refusal: &'static [u8],
    /// Connections refused so far.
    refused: Arc<AtomicU64>,
    /// Connections served now, by every listener sharing the cap.
    live: Counter,
}

impl Cap {
    pub(crate) fn new(max: usize, refusal: &'static [u8], refused: Arc<AtomicU64>) -> Self {
        Cap { max, refusal, refused, live: Counter::default() }
    }
}

/// Accepts connections, running `serve` for each on its own task; with a `cap`, refusing those beyond it.
/// Runs until aborted, or with a `drain`, until it drains.
pub(crate) async fn accept_loop<F, Fut>(
    listener: TcpListener,
    what: &'static str,
    cap: Option<Cap>,
    mut drain: Option<DrainWatch>,
    serve: F,
) where
    F: Fn(TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut connections = JoinSet::new();
    let live = cap.as_ref().map_or_else(Counter::default, |cap| cap.live.clone());
    let lingering = Counter::default();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = draining(&mut drain) => break,
        };
        match accepted {
            Ok((stream, addr)) => match &cap {
                Some(cap) if live.get() >= cap.max => {
                    debug!(%addr, max = cap.max, "refusing a {what} connection: at the connection limit");
                    cap.refused.fetch_add(1, Ordering::Relaxed);
                    refuse(&mut connections, &lingering, stream, cap.refusal);
                }
                _ => {
                    connections.spawn(live.counting(serve(stream, addr)));
                }
            },
            Err(e) => {
                warn!("cannot accept a {what} connection: {e}");
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
            }
        }
        // Reap finished connections so the set only holds live ones.
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    finish(connections, what).await;
}

async fn draining(drain: &mut Option<DrainWatch>) {
    match drain {
        Some(drain) => drain.started().await,
        None => std::future::pending().await,
    }
}

/// Waits up to [`DRAIN_MAX`] for the connections to end on their own, then aborts the rest.
async fn finish(mut connections: JoinSet<()>, what: &'static str) {
    // Connections that ended since the last accept are still in the set until reaped; they are not open.
    while connections.try_join_next().is_some() {}
    let open = connections.len();
    let all_ended = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(DRAIN_MAX, all_ended).await.is_ok() {
        info!(open, "{what} connections drained");
        return;
    }
    warn!(open, left = connections.len(), "{what} connections did not drain in {DRAIN_MAX:?}; closing them");
    connections.shutdown().await;
}

/// How many tasks of a kind are running.
#[derive(Clone, Debug, Default)]
struct Counter(Arc<AtomicUsize>);

impl Counter {
    fn get(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }

    /// `task`, counted from now until it ends or is dropped (an aborted task is dropped).
    fn counting(&self, task: impl Future<Output = ()>) -> impl Future<Output = ()> {
        self.0.fetch_add(1, Ordering::AcqRel);
        let guard = Counted(self.0.clone());
        async move {
            task.await;
            drop(guard);
        }
    }
}

struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Sends `refusal` and closes, lingering on the connection unless too many refusals already do.
fn refuse(connections: &mut JoinSet<()>, lingering: &Counter, stream: TcpStream, refusal: &'static [u8]) {
    if lingering.get() < LINGERING_MAX {
        connections.spawn(lingering.counting(refuse_and_linger(stream, refusal)));
    } else {
        // A fresh socket's send buffer is empty, so this short write goes through whole.
        let _ = stream.try_write(refusal);
    }
}

/// Writes the refusal and closes, lingering ([`linger`]) so the client gets to read it.
async fn refuse_and_linger(mut stream: TcpStream, refusal: &'static [u8]) {
    let refuse = async {
        stream.write_all(refusal).await?;
        stream.shutdown().await
    };
    match refuse.await {
        Ok(()) => linger(&mut stream).await,
        Err(e) => debug!("refused connection: {e}"),
    }
}

/// Reads and drops what a client still sends until it closes or goes quiet ([`LINGER_IDLE`]), for [`LINGER`]
/// or [`LINGER_BYTES`] at most.
/// Closing a socket with unread input resets it, and a reset can destroy what was written to the client
/// but not yet read by it (a refusal, or the last replies of a drained connection).
pub(crate) async fn linger(reader: &mut (impl AsyncRead + Unpin)) {
    let discard = async {
        let mut sink = [0u8; 4096];
        let mut drained = 0;
        while drained < LINGER_BYTES {
            match tokio::time::timeout(LINGER_IDLE, reader.read(&mut sink)).await {
                Ok(Ok(0)) | Err(_) => break,
                Ok(read) => drained += read?,
            }
        }
        Ok::<(), std::io::Error>(())
    };
    if let Ok(Err(e)) = tokio::time::timeout(LINGER, discard).await {
        debug!("lingering connection: {e}");
    }
}
