//! Replies written at the end of the worker's turn, all connections' together, as Redis writes the replies of
//! an event-loop turn just before it waits for more (`beforeSleep`).
//!
//! A connection that wrote each reply the moment it had it spread one turn's replies over the whole turn, so the
//! client's event loop woke once for each of a few of them instead of once for many: on the 2-core machine the
//! client's extra wake-ups came off the server's share of the CPU (`docs/performance-history.md`, section 25). Now
//! a connection hands its encoded replies to the node's [`Outbox`] and goes on; the outbox's task is woken when the
//! first connection of a turn lists itself, yields once so that every task ready in this turn runs first
//! (`tokio::task::yield_now` puts it behind them), and then writes every listed connection's bytes with one
//! non-blocking write each.
//!
//! A socket that does not take all of its bytes at once (a slow reader, a large reply) is handed back: the
//! outbox marks it stalled and wakes its connection, which writes the rest itself and waits for the socket as
//! it always did, so a client that does not read still stops the server reading from it. A connection also
//! writes itself when it has a chunk's worth of replies and when it closes.

use super::stream::ClientWriter;
use std::future::poll_fn;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use tokio::io::AsyncWriteExt;

/// The connections with replies to write at the end of this turn.
#[derive(Default)]
pub(crate) struct Outbox(Mutex<Listed>);

#[derive(Default)]
struct Listed {
    unsent: Vec<Arc<Unsent>>,
    /// The outbox task, while it waits for a connection to list itself.
    task: Option<Waker>,
}

impl Outbox {
    /// Writes the listed connections' replies once in each turn in which one listed itself; runs until the
    /// node's RESP server stops it.
    pub(crate) async fn run(&self) {
        let mut unsent = Vec::new();
        loop {
            poll_fn(|cx| self.wait_for_one(cx)).await;
            tokio::task::yield_now().await;
            std::mem::swap(&mut unsent, &mut lock(&self.0).unsent);
            for connection in unsent.drain(..) {
                connection.write_now();
            }
        }
    }

    fn wait_for_one(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut listed = lock(&self.0);
        if listed.unsent.is_empty() {
            set_waker(&mut listed.task, cx);
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }

    fn list(&self, connection: Arc<Unsent>) {
        let task = {
            let mut listed = lock(&self.0);
            listed.unsent.push(connection);
            listed.task.take()
        };
        if let Some(task) = task {
            task.wake();
        }
    }
}

/// What [`Unsent::keep`] did with the bytes handed over.
enum Kept {
    /// Nothing: the connection writes them itself.
    Stalled,
    /// Kept them; the connection is not on the outbox's list yet.
    List,
    /// Kept them for the write already listed.
    Listed,
}

/// One connection's replies not yet written, and its socket's write half.
pub(crate) struct Unsent {
    state: Mutex<State>,
    /// Set when the outbox could not write everything (or the write failed): the connection writes the rest
    /// itself. Changed only under the lock, but read without it by the connection's every wait for input.
    stalled: AtomicBool,
}

struct State {
    bytes: Vec<u8>,
    /// The write half, while the outbox may write; the connection holds it while it writes itself.
    half: Option<ClientWriter>,
    /// On the outbox's list for this turn.
    listed: bool,
    /// The connection's task as of its last hand-over, which is the task a stall wakes: a connection is one
    /// task, and its waker does not change.
    connection: Option<Waker>,
}

impl Unsent {
    /// Starts with no buffer of its own: the first hand-over swaps in the connection's, and from then on the two
    /// change places at each hand-over. The empty one the connection gets first grows only as far as its replies
    /// need, so an idle connection does not hold a second chunk.
    pub(crate) fn new(half: ClientWriter) -> Arc<Self> {
        let state = State { bytes: Vec::new(), half: Some(half), listed: false, connection: None };
        Arc::new(Unsent { state: Mutex::new(state), stalled: AtomicBool::new(false) })
    }

    /// Hands `out` to the outbox for the end of this turn, leaving it empty. A connection the outbox has stalled
    /// writes everything itself instead, waiting for the socket to take it.
    pub(crate) async fn hand_over(self: &Arc<Self>, out: &mut Vec<u8>, outbox: &Outbox) -> io::Result<()> {
        match poll_fn(|cx| Poll::Ready(self.keep(out, cx))).await {
            Kept::Stalled => self.write_all(out).await,
            Kept::List => {
                outbox.list(self.clone());
                Ok(())
            }
            Kept::Listed => Ok(()),
        }
    }

    fn keep(&self, out: &mut Vec<u8>, cx: &Context<'_>) -> Kept {
        let mut state = lock(&self.state);
        if self.stalled.load(Ordering::Relaxed) {
            return Kept::Stalled;
        }
        set_waker(&mut state.connection, cx);
        if state.bytes.is_empty() {
            std::mem::swap(&mut state.bytes, out);
        } else {
            state.bytes.append(out);
        }
        if std::mem::replace(&mut state.listed, true) {
            Kept::Listed
        } else {
            Kept::List
        }
    }

    /// Ready once the outbox has handed the rest of the replies back to the connection, which it then wakes with
    /// the waker of the hand-over.
    pub(crate) fn poll_stalled(&self) -> Poll<()> {
        if self.stalled.load(Ordering::Acquire) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Writes what the outbox holds and then `out`, and flushes what the stream buffers (TLS records), waiting
    /// for the socket to take it all.
    pub(crate) async fn write_all(&self, out: &mut Vec<u8>) -> io::Result<()> {
        let (mut bytes, mut half) = {
            let mut state = lock(&self.state);
            state.bytes.append(out);
            let half = state.half.take().expect("only the connection writes itself, and it puts the half back");
            (std::mem::take(&mut state.bytes), half)
        };
        let written = async {
            half.write_all(&bytes).await?;
            half.flush().await
        }
        .await;
        bytes.clear();
        let mut state = lock(&self.state);
        (state.bytes, state.half) = (bytes, Some(half));
        self.stalled.store(false, Ordering::Release);
        written
    }

    /// The write half, once the connection has written everything: it closes it.
    pub(crate) fn take_half(&self) -> ClientWriter {
        lock(&self.state).half.take().expect("the connection is not writing")
    }

    /// The outbox's one write: whatever the socket does not take now is handed back to the connection.
    fn write_now(&self) {
        let mut state = lock(&self.state);
        state.listed = false;
        let State { bytes, half: Some(half), connection, .. } = &mut *state else { return };
        if bytes.is_empty() || self.stalled.load(Ordering::Relaxed) {
            return;
        }
        // Would block, or failed: the connection's own write waits for the socket, or meets the error and
        // reports it.
        if !half.write_now(bytes) {
            self.stalled.store(true, Ordering::Release);
            if let Some(connection) = connection {
                connection.wake_by_ref();
            }
        }
    }
}

fn set_waker(slot: &mut Option<Waker>, cx: &Context<'_>) {
    match slot {
        Some(waker) if waker.will_wake(cx.waker()) => {}
        _ => *slot = Some(cx.waker().clone()),
    }
}

/// The locks are held for a few instructions and never across an await; a panic while one is held leaves
/// nothing half-done that matters more than going on.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::time::Duration;
    use tokio::net::TcpListener;

    /// An outbox with its task running, and one connection's write half with a blocking client at the other end.
    async fn connected() -> (Arc<Outbox>, Arc<Unsent>, std::net::TcpStream) {
        let outbox = Arc::new(Outbox::default());
        tokio::spawn({
            let outbox = outbox.clone();
            async move { outbox.run().await }
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let (_, half) = server.into_split();
        (outbox, Unsent::new(ClientWriter::Plain(half)), client)
    }

    /// On the runtime's one thread, the outbox's task cannot run before this task waits: what is handed over is
    /// still unwritten then, and written once it has waited.
    #[tokio::test]
    async fn what_is_handed_over_is_written_after_the_running_task_waits() {
        let (outbox, unsent, mut client) = connected().await;
        unsent.hand_over(&mut b"+OK\r\n".to_vec(), &outbox).await.unwrap();
        unsent.hand_over(&mut b":1\r\n".to_vec(), &outbox).await.unwrap();
        client.set_nonblocking(true).unwrap();
        let mut got = [0; 16];
        assert_eq!(client.read(&mut got).unwrap_err().kind(), io::ErrorKind::WouldBlock, "nothing written yet");

        tokio::time::sleep(Duration::from_millis(20)).await;
        client.set_nonblocking(false).unwrap();
        client.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut got = [0; 9];
        client.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"+OK\r\n:1\r\n");
    }

    /// A client that does not read: the outbox writes what the socket takes and hands the rest back, the
    /// connection is woken to write it itself, and every byte arrives once, in order.
    #[tokio::test]
    async fn what_the_socket_does_not_take_is_handed_back_and_arrives_in_order() {
        let (outbox, unsent, client) = connected().await;
        let sent: Vec<u8> = (0..48 << 20).map(|i: u32| (i % 251) as u8).collect();
        let (first, last) = sent.split_at(sent.len() - 1000);
        unsent.hand_over(&mut first.to_vec(), &outbox).await.unwrap();
        let stalled = tokio::time::timeout(Duration::from_secs(10), poll_fn(|_| unsent.poll_stalled()));
        stalled.await.expect("more than the socket's buffers was handed over: the outbox hands some back");

        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            client.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            (&client).take(48 << 20).read_to_end(&mut got).unwrap();
            got
        });
        unsent.hand_over(&mut last.to_vec(), &outbox).await.unwrap();
        assert!(unsent.poll_stalled().is_pending(), "the connection wrote everything and took the socket back");
        assert!(reader.join().unwrap() == sent, "every byte once, in order");
    }
}
