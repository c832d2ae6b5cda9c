//! The accept loop shared by the RESP and peer listeners.
//!
//! Connection tasks live in a [`JoinSet`] owned by the loop, so aborting the loop's task (node shutdown)
//! closes the listener and aborts every connection it accepted, with nothing left behind.
//!
//! A listener may cap the connections it serves at once ([`Cap`]): one accepted beyond the cap is sent
//! the cap's refusal and closed, as Redis does past `maxclients`, and the others are not disturbed.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tracing::{debug, warn};

/// A failed accept is usually resource exhaustion (too many open files); pausing lets connections
/// close instead of spinning on the error.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);
/// How long a refused connection is given to take its refusal before it is dropped.
const REFUSAL_LINGER: Duration = Duration::from_secs(1);
/// Bytes a refused client may send while its refusal lingers; past them it is dropped at once.
const REFUSAL_DRAIN_MAX: usize = 64 << 10;
/// Refused connections lingering at once; past them a refusal is written without waiting and the
/// connection dropped, so a flood of connections cannot hold many sockets open through refusals.
const LINGERING_MAX: usize = 64;

/// The most connections a listener serves at once, and what it writes to one past them.
#[derive(Clone, Debug)]
pub(crate) struct Cap {
    pub(crate) max: usize,
    pub(crate) refusal: &'static [u8],
    /// Connections refused so far.
    pub(crate) refused: Arc<AtomicU64>,
}

/// Accepts connections forever, running `serve` for each on its own task; with a `cap`, refusing those
/// beyond it.
pub(crate) async fn accept_loop<F, Fut>(listener: TcpListener, what: &'static str, cap: Option<Cap>, serve: F)
where
    F: Fn(TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut connections = JoinSet::new();
    let (live, lingering) = (Counter::default(), Counter::default());
    loop {
        match listener.accept().await {
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
}

/// How many tasks of a kind are running.
#[derive(Clone, Default)]
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

/// Writes the refusal and closes. Closing a socket with unread input resets it, which can destroy the
/// refusal before the client reads it, so what the client sends meanwhile is read and dropped until it
/// closes, or briefly at most.
async fn refuse_and_linger(mut stream: TcpStream, refusal: &'static [u8]) {
    let linger = async {
        stream.write_all(refusal).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut drained = 0;
        while drained < REFUSAL_DRAIN_MAX {
            match stream.read(&mut sink).await? {
                0 => break,
                n => drained += n,
            }
        }
        Ok::<(), std::io::Error>(())
    };
    if let Ok(Err(e)) = tokio::time::timeout(REFUSAL_LINGER, linger).await {
        debug!("refused connection: {e}");
    }
}
