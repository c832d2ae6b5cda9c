//! One client connection: a reader that parses and dispatches commands, and a writer that sends the
//! replies, joined by a bounded queue of pending replies.
//!
//! The reader does not wait for a reply before reading the next command, so a pipelining client has
//! many requests in the core at once; the writer takes the pending replies strictly in order, so the
//! replies come back in request order. The queue holds at most `pipeline_max` of them
//! ([`RespLimits`](super::RespLimits)); when it is full the reader stops reading and TCP pushes back on
//! the client. The writer flushes only when the next reply is not ready yet, so a burst of pipelined
//! replies leaves in few writes.
//!
//! A malformed frame gets `-ERR Protocol error: …` and closes this connection only, as in Redis; after
//! it the stream cannot be resynchronised. A well-formed command with an argument over the size limit
//! gets an `-ERR` naming the limit, and the connection goes on.

use super::commands::{dispatch, Action, Session};
use super::frame::{Frame, Protocol};
use super::frontend::Frontend;
use super::kv::failure;
use super::order::{key_order, Answered, KeyOrder};
use super::parser::{Command, Parser};
use super::pending::{receive, Pending};
use super::stats::CommandStats;
use crate::accept::{accept_loop, linger, Cap};
use bytes::BytesMut;
use meridian_core::Reply;
use std::io;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::oneshot;
use tracing::debug;

/// What a client past the connection limit is told before it is closed (Redis' words).
const TOO_MANY_CLIENTS: &[u8] = b"-ERR max number of clients reached\r\n";
const READ_CHUNK: usize = 64 << 10;
/// Reply bytes gathered before a write even when more replies are ready.
const WRITE_CHUNK: usize = 64 << 10;

/// Serves RESP clients until the node drains ([`Frontend::drain`]) and every connection has finished.
pub(crate) async fn serve(listener: TcpListener, frontend: Arc<Frontend>) {
    let refused = frontend.metrics.clients.rejected.clone();
    let cap = Cap { max: frontend.resp.connections_max, refusal: TOO_MANY_CLIENTS, refused };
    let drain = Some(frontend.drain.clone());
    accept_loop(listener, "RESP", Some(cap), drain, |stream, _| serve_client(stream, frontend.clone())).await
}

async fn serve_client(stream: TcpStream, frontend: Arc<Frontend>) {
    // Replies are small and latency-bound; batching already happens in the writer.
    if let Err(e) = stream.set_nodelay(true) {
        debug!("cannot set TCP_NODELAY on a client connection: {e}");
    }
    let _connected = frontend.metrics.clients.connect();
    let (reader, writer) = stream.into_split();
    let (tx, rx) = mpsc::channel(frontend.resp.pipeline_max);
    let (order, answered) = key_order();
    tokio::join!(read_commands(reader, tx, order, &frontend), write_replies(writer, rx, answered, &frontend));
}

/// Parses and dispatches commands until the client closes, sends QUIT or breaks the protocol.
/// A reply on its way to the writer.
struct Queued {
    reply: Pending,
    /// The protocol the connection spoke when the command ran (HELLO's own reply already comes in the
    /// protocol it chose).
    protocol: Protocol,
    /// The command's place in the table, if it is one, for its statistics.
    command: Option<usize>,
    /// When the command was parsed.
    parsed: Instant,
}

async fn read_commands(
    mut reader: OwnedReadHalf,
    replies: mpsc::Sender<Queued>,
    mut order: KeyOrder,
    frontend: &Frontend,
) {
    let mut parser = Parser::new(frontend.bulk_max());
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let mut session = Session::new(frontend.next_client_id());
    let mut drain = frontend.drain.clone();
    loop {
        loop {
            let parsed = Instant::now();
            let mut action = match parser.next(&mut buf) {
                Ok(Some(Command::Args(args))) => {
                    order.admit(&args).await;
                    session.pipelining = !buf.is_empty();
                    dispatch(&args, &mut session, frontend)
                }
                Ok(Some(Command::Oversized { len })) => {
                    order.queued_other();
                    oversized(len, frontend.bulk_max())
                }
                Ok(None) => break,
                Err(e) => {
                    order.queued_other();
                    Action::close_after(Frame::error(format!("ERR Protocol error: {e}")))
                }
            };
            if let Some(rx) = action.switch.take() {
                action.reply = Pending::Ready(switch_keyspace(rx, &mut session).await);
            }
            let queued = Queued { reply: action.reply, protocol: session.protocol, command: action.command, parsed };
            // A closed queue means the writer failed: the client is gone.
            if replies.send(queued).await.is_err() || action.close {
                return;
            }
        }
        buf.reserve(READ_CHUNK);
        // Draining: the commands read so far are answered (the writer finishes once this sender is dropped
        // and half-closes), and what arrives later is dropped unread.
        let read = tokio::select! {
            read = reader.read_buf(&mut buf) => read,
            () = drain.started() => {
                drop(replies);
                return linger(&mut reader).await;
            }
        };
        match read {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) => {
                debug!("client connection read failed: {e}");
                return;
            }
        }
    }
}

/// The refusal of a command with an argument longer than any key or value may be; its bytes were never
/// kept, so nothing of it ran.
fn oversized(len: usize, max: usize) -> Action {
    Frame::error(format!("ERR argument is {len} bytes; the limit is {max}")).into()
}

/// Moves the session to the keyspace the core named; an unknown one leaves it where it was.
async fn switch_keyspace(rx: oneshot::Receiver<Reply>, session: &mut Session) -> Frame {
    match receive(rx).await {
        Reply::Keyspace(id) => {
            session.keyspace = id;
            Frame::ok()
        }
        other => failure(other),
    }
}

async fn write_replies(
    mut writer: OwnedWriteHalf,
    mut replies: mpsc::Receiver<Queued>,
    answered: Answered,
    frontend: &Frontend,
) {
    if let Err(e) = pump_replies(&mut writer, &mut replies, &answered, &frontend.metrics.commands).await {
        debug!("client connection write failed: {e}");
    }
}

/// Writes the replies in order until the reader is done and every reply is out, then half-closes.
async fn pump_replies(
    writer: &mut OwnedWriteHalf,
    replies: &mut mpsc::Receiver<Queued>,
    answered: &Answered,
    stats: &CommandStats,
) -> io::Result<()> {
    let mut out = Vec::with_capacity(WRITE_CHUNK);
    loop {
        let queued = match replies.try_recv() {
            Ok(pending) => pending,
            Err(TryRecvError::Empty) => {
                flush(writer, &mut out).await?;
                match replies.recv().await {
                    Some(pending) => pending,
                    None => break,
                }
            }
            Err(TryRecvError::Disconnected) => break,
        };
        if !queued.reply.is_ready() {
            flush(writer, &mut out).await?;
        }
        let frame = queued.reply.resolve().await;
        if let Some(command) = queued.command {
            stats.record(command, queued.parsed.elapsed(), matches!(frame, Frame::Error(_)));
        }
        frame.encode(queued.protocol, &mut out);
        answered.one_more();
        if out.len() >= WRITE_CHUNK {
            flush(writer, &mut out).await?;
        }
    }
    flush(writer, &mut out).await?;
    writer.shutdown().await
}

async fn flush(writer: &mut OwnedWriteHalf, out: &mut Vec<u8>) -> io::Result<()> {
    if !out.is_empty() {
        writer.write_all(out).await?;
        out.clear();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accept::Drain;
    use crate::durability::{Persistence, SyncPolicy};
    use crate::inbox::CoreInbox;
    use crate::metrics::NodeMetrics;
    use meridian_core::{Limits, NodeId, Request};
    use std::sync::atomic::AtomicU64;
    use std::sync::Mutex;
    use std::time::Duration;
    use tokio::io::AsyncReadExt;

    /// A core that answers every request at once and notes how each reached it.
    #[derive(Default)]
    struct Noting(Mutex<Vec<&'static str>>);

    impl CoreInbox for Noting {
        fn submit(&self, req: Request) -> oneshot::Receiver<Reply> {
            self.0.lock().unwrap().push("submit");
            answered(req)
        }

        fn enqueue(&self, req: Request) -> oneshot::Receiver<Reply> {
            self.0.lock().unwrap().push("enqueue");
            answered(req)
        }

        fn request_shutdown(&self) {}
    }

    fn answered(req: Request) -> oneshot::Receiver<Reply> {
        let (tx, rx) = oneshot::channel();
        let reply = match req {
            Request::Write(_) => Reply::Written { applied: true, existed: false },
            _ => Reply::Value(None),
        };
        tx.send(reply).unwrap();
        rx
    }

    fn frontend(core: Arc<Noting>) -> Arc<Frontend> {
        let persistence = Arc::new(Persistence::new(SyncPolicy::default()));
        Arc::new(Frontend {
            core,
            limits: Limits::default(),
            resp: Default::default(),
            node: NodeId(1),
            resp_port: 0,
            cluster_nodes: 1,
            metrics: Arc::new(NodeMetrics::new(Arc::default(), persistence, None)),
            client_ids: AtomicU64::new(0),
            drain: Drain::switch().1,
        })
    }

    /// Sends `bytes` in one write and reads until `replies` bytes of answer have come back.
    async fn exchange(client: &mut TcpStream, bytes: &[u8], replies: usize) -> Vec<u8> {
        client.write_all(bytes).await.unwrap();
        let mut got = vec![0; replies];
        tokio::time::timeout(Duration::from_secs(10), client.read_exact(&mut got)).await.unwrap().unwrap();
        got
    }

    /// The commands of a pipeline already read go to the core task's batch; the last one read, and a lone
    /// command, may step an idle core at once.
    #[tokio::test]
    async fn a_pipelines_requests_queue_for_the_core_task_and_a_lone_command_does_not() {
        let core = Arc::new(Noting::default());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let served = tokio::spawn(serve_client(server, frontend(core.clone())));

        let pipeline = b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$3\r\nGET\r\n$1\r\nb\r\n";
        assert_eq!(exchange(&mut client, pipeline, 10).await, b"+OK\r\n$-1\r\n");
        assert_eq!(exchange(&mut client, b"*2\r\n$3\r\nGET\r\n$1\r\nc\r\n", 5).await, b"$-1\r\n");
        drop(client);
        served.await.unwrap();
        assert_eq!(*core.0.lock().unwrap(), ["enqueue", "submit", "submit"]);
    }
}
