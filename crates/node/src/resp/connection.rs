//! One client connection: one task that parses and dispatches commands and writes their replies in order.
//!
//! The connection does not wait for a reply before reading the next command, so a pipelining client has many
//! requests in the core at once; it keeps the replies still to write in a queue and writes them strictly in
//! order. While the oldest reply is on its way it also reads more commands, so a client that streams a
//! pipeline keeps the core's batch full. The queue holds at most `pipeline_max` replies
//! ([`RespLimits`](super::RespLimits)); when it is full the connection stops reading and TCP pushes back on the
//! client. Replies are gathered until the next one is not ready yet and then handed to the node's outbox, which
//! writes every connection's replies at the end of the worker's turn ([`super::outbox`]); a connection writes
//! itself only when it has a chunk's worth, when the outbox hands back what a full socket did not take, and when
//! it closes.
//!
//! Reading and writing are one task, not a reader and a writer joined by a channel: for an unpipelined request,
//! the common case, the hand-over between the two cost 1.5–2.5 µs of CPU per request in a minimal server
//! (`docs/performance-history.md`, section 15).
//!
//! The plain RESP port and the TLS port serve their clients with this same code, over either stream
//! ([`ClientStream`]); a TLS client's handshake runs first, on its connection's own task ([`crate::tls`]), and
//! with `--tls-auth-clients-user CN` its certificate may name the user the connection starts as.
//!
//! A malformed frame gets `-ERR Protocol error: …` and closes this connection only, as in Redis; after
//! it the stream cannot be resynchronised. A well-formed command with an argument over the size limit
//! gets an `-ERR` naming the limit, and the connection goes on.

use super::commands::{self, dispatch, Action, Session, COMMANDS};
use super::frame::{Frame, Protocol};
use super::frontend::Frontend;
use super::kv::failure;
use super::order::KeyOrder;
use super::outbox::Unsent;
use super::parser::{Command, Parser};
use super::pending::{receive, Pending};
use super::stream::{ClientReader, ClientStream};
use crate::accept::{accept_loop, linger, Cap};
use crate::inbox::Answer;
use crate::tls::{self, TlsConfig};
use bytes::BytesMut;
use meridian_core::Reply;
use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::debug;

/// What a client past the connection limit is told before it is closed (Redis' words).
const TOO_MANY_CLIENTS: &[u8] = b"-ERR max number of clients reached\r\n";
const READ_CHUNK: usize = 64 << 10;
/// Reply bytes gathered before a write even when more replies are ready.
const WRITE_CHUNK: usize = 64 << 10;

/// The node's client ports, listening: the plain RESP port and the TLS one; either may be off.
pub(crate) struct ClientListeners {
    pub(crate) plain: Option<TcpListener>,
    pub(crate) tls: Option<(TcpListener, TlsConfig)>,
}

/// Serves RESP clients on both ports until the node drains ([`Frontend::drain`]) and every connection has
/// finished.
pub(crate) async fn serve(listeners: ClientListeners, frontend: Arc<Frontend>) {
    let refused = frontend.metrics.clients.rejected.clone();
    // One cap for both ports: `--max-connections` counts every client.
    let cap = Cap::new(frontend.resp.connections_max, TOO_MANY_CLIENTS, refused);
    let outbox = tokio::spawn(write_replies(frontend.clone()));
    let plain = async {
        let Some(listener) = listeners.plain else { return };
        let drain = Some(frontend.drain.watch());
        let serve = |stream, _| serve_client(ClientStream::Plain(stream), None, frontend.clone());
        accept_loop(listener, "RESP", Some(cap.clone()), drain, serve).await
    };
    let tls = async {
        let Some((listener, config)) = listeners.tls else { return };
        let drain = Some(frontend.drain.watch());
        let serve = |stream, _| serve_tls_client(stream, config.clone(), frontend.clone());
        accept_loop(listener, "TLS", Some(cap.clone()), drain, serve).await
    };
    tokio::join!(plain, tls);
    outbox.abort();
}

async fn write_replies(frontend: Arc<Frontend>) {
    frontend.outbox.run().await
}

/// Serves a TLS client once its handshake succeeds; the handshake counts against the connection cap, as the
/// connection it becomes does.
async fn serve_tls_client(stream: TcpStream, config: TlsConfig, frontend: Arc<Frontend>) {
    if let Some(stream) = tls::handshake(&config.acceptor(), stream, &frontend.metrics).await {
        let cert_user = config.cert_user(&stream);
        serve_client(ClientStream::Tls(Box::new(stream)), cert_user, frontend).await
    }
}

/// Serves a client; `cert_user` is the user its TLS certificate names, if the port takes users from them.
async fn serve_client(stream: ClientStream, cert_user: Option<String>, frontend: Arc<Frontend>) {
    stream.no_delay();
    let _connected = frontend.metrics.clients.connect();
    let (mut reader, writer) = stream.split();
    let mut connection = Connection::new(&frontend, Unsent::new(writer));
    if let Some(user) = cert_user {
        connection.session.guard.start_as_certified(user, &frontend);
    }
    if let Err(e) = connection.serve(&mut reader).await {
        debug!("client connection failed: {e}");
    }
}

/// A reply waiting for its turn to be written.
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

/// Why the connection stops reading.
enum Stop {
    /// The client closed its side, sent QUIT or broke the protocol: what it sent is answered.
    Done,
    /// The node drains: what was read is answered, and what arrives later is dropped unread.
    Draining,
}

/// Where running the commands read so far stopped.
#[derive(PartialEq)]
enum Parsed {
    /// Every whole command read has run; the next needs more input.
    NeedInput,
    /// The queue of replies is full; more commands may be read already.
    Full,
    /// The last command run closes the connection after its reply (QUIT, a protocol error).
    Closing,
}

struct Connection<'a> {
    frontend: &'a Frontend,
    parser: Parser,
    /// Bytes read and not yet parsed.
    buf: BytesMut,
    session: Session,
    order: KeyOrder,
    /// Replies not yet written, oldest first.
    queue: VecDeque<Queued>,
    /// Encoded replies not yet handed to the outbox.
    out: Vec<u8>,
    /// Replies handed over and not yet written, and the socket's write half.
    unsent: Arc<Unsent>,
    /// When the replies in `out` were answered: those written together share one clock reading.
    answered_at: Option<Instant>,
}

impl<'a> Connection<'a> {
    fn new(frontend: &'a Frontend, unsent: Arc<Unsent>) -> Self {
        Connection {
            frontend,
            parser: Parser::new(frontend.bulk_max()),
            buf: BytesMut::with_capacity(READ_CHUNK),
            session: Session::for_client(frontend.next_client_id(), frontend),
            order: KeyOrder::default(),
            queue: VecDeque::new(),
            out: Vec::with_capacity(WRITE_CHUNK),
            unsent,
            answered_at: None,
        }
    }

    /// Runs commands and answers them until the client is done or the node drains, then answers what is left
    /// and half-closes.
    async fn serve(&mut self, reader: &mut ClientReader) -> io::Result<()> {
        let stop = self.run(reader).await?;
        while !self.queue.is_empty() {
            self.answer_oldest().await?;
        }
        self.write_out().await?;
        self.unsent.take_half().shutdown().await?;
        if let Stop::Draining = stop {
            linger(reader).await;
        }
        Ok(())
    }

    async fn run(&mut self, reader: &mut ClientReader) -> io::Result<Stop> {
        let mut drain = self.frontend.drain.watch();
        loop {
            let parsed = self.run_commands().await?;
            if parsed == Parsed::Closing {
                return Ok(Stop::Done);
            }
            while self.queue.front().is_some_and(|q| q.reply.is_ready()) {
                self.answer_oldest().await?;
            }
            if parsed == Parsed::Full && self.queue.len() < self.frontend.resp.pipeline_max {
                // More commands may be read already: run them before reading again.
                continue;
            }
            self.flush().await?;
            self.buf.reserve(READ_CHUNK);
            let may_read = self.queue.len() < self.frontend.resp.pipeline_max;
            let oldest = self.queue.front_mut().map(|q| &mut q.reply);
            let unsent = &self.unsent;
            // In this order, not tokio's random one (a random number per wait): a drain is seen even by a
            // connection that always has input, replies the outbox could not write are written before more is
            // read, and so is a reply that is here.
            let read = tokio::select! {
                biased;
                () = drain.started() => return Ok(Stop::Draining),
                () = poll_fn(|_| unsent.poll_stalled()) => {
                    self.write_out().await?;
                    continue;
                }
                frame = async { oldest.expect("a reply is queued").take().await }, if oldest.is_some() => {
                    self.answered(frame);
                    continue;
                }
                read = reader.read_buf(&mut self.buf), if may_read => read?,
            };
            if read == 0 {
                return Ok(Stop::Done);
            }
        }
    }

    /// Parses and dispatches the commands read so far, as many as the queue has room for, then hands the core
    /// the requests the pipeline queued meanwhile (`Frontend::submit`).
    async fn run_commands(&mut self) -> io::Result<Parsed> {
        let parsed = self.dispatch_read().await;
        self.frontend.flush(&mut self.session);
        parsed
    }

    async fn dispatch_read(&mut self) -> io::Result<Parsed> {
        // The commands read so far arrived together; one clock reading times them all.
        let parsed = Instant::now();
        while self.queue.len() < self.frontend.resp.pipeline_max {
            let mut action = match self.parser.next(&mut self.buf) {
                Ok(Some(Command::Args(mut args))) => {
                    let index = commands::position(&args[0]);
                    if let Some(position) = self.order.admit(index.map(|i| &COMMANDS[i]), &args) {
                        self.frontend.flush(&mut self.session);
                        self.answer_up_to(position).await?;
                    }
                    self.session.pipelining = !self.buf.is_empty();
                    let action = dispatch(index, &mut args, &mut self.session, self.frontend);
                    self.parser.recycle(args);
                    action
                }
                Ok(Some(Command::Oversized { len })) => {
                    self.order.queued_other();
                    oversized(len, self.frontend.bulk_max())
                }
                Ok(None) => return Ok(Parsed::NeedInput),
                Err(e) => {
                    self.order.queued_other();
                    Action::close_after(Frame::error(format!("ERR Protocol error: {e}")))
                }
            };
            if let Some(rx) = action.switch.take() {
                self.frontend.flush(&mut self.session);
                action.reply = Pending::Ready(switch_keyspace(rx, &mut self.session, self.frontend).await);
            }
            let protocol = self.session.protocol;
            self.queue.push_back(Queued { reply: action.reply, protocol, command: action.command, parsed });
            if action.close {
                return Ok(Parsed::Closing);
            }
        }
        Ok(Parsed::Full)
    }

    /// Answers the queued replies up to `position` (counted from the connection's first), so a command on a key
    /// they touch sees their effect.
    async fn answer_up_to(&mut self, position: u64) -> io::Result<()> {
        while self.order.answered() < position {
            self.answer_oldest().await?;
        }
        Ok(())
    }

    /// Waits for the oldest reply and encodes it, first handing over what is encoded if it has to wait.
    async fn answer_oldest(&mut self) -> io::Result<()> {
        let frame = match self.queue.front_mut().expect("a reply is queued").reply.try_take() {
            Some(frame) => frame,
            None => {
                if !self.queue.front().expect("a reply is queued").reply.is_ready() {
                    self.flush().await?;
                }
                self.queue.front_mut().expect("a reply is queued").reply.take().await
            }
        };
        self.answered(frame);
        if self.out.len() >= WRITE_CHUNK {
            self.write_out().await?;
        }
        Ok(())
    }

    /// Hands the encoded replies to the outbox, to be written at the end of this turn.
    async fn flush(&mut self) -> io::Result<()> {
        if !self.out.is_empty() {
            self.unsent.hand_over(&mut self.out, &self.frontend.outbox).await?;
            self.answered_at = None;
        }
        Ok(())
    }

    /// Writes the encoded replies and those handed over, waiting for the socket to take them.
    async fn write_out(&mut self) -> io::Result<()> {
        self.unsent.write_all(&mut self.out).await?;
        self.answered_at = None;
        Ok(())
    }

    /// Encodes the oldest reply, now taken, and counts it.
    fn answered(&mut self, frame: Frame) {
        let queued = self.queue.pop_front().expect("a reply is queued");
        if let Some(command) = queued.command {
            let failed = matches!(frame, Frame::Error(_));
            let now = *self.answered_at.get_or_insert_with(Instant::now);
            self.frontend.metrics.commands.record(command, now.saturating_duration_since(queued.parsed), failed);
        }
        frame.encode(queued.protocol, &mut self.out);
        self.order.one_more();
    }
}

/// The refusal of a command with an argument longer than any key or value may be; its bytes were never
/// kept, so nothing of it ran.
fn oversized(len: usize, max: usize) -> Action {
    Frame::error(format!("ERR argument is {len} bytes; the limit is {max}")).into()
}

/// Moves the session to the keyspace the core named, if its user may select it; an unknown one, or a forbidden
/// one, leaves it where it was.
pub(super) async fn switch_keyspace(mut rx: Answer, session: &mut Session, frontend: &Frontend) -> Frame {
    match receive(&mut rx).await {
        Reply::Keyspace(id) => match session.guard.may_select(id, frontend) {
            Ok(()) => {
                session.keyspace = id;
                session.guard.moved();
                Frame::ok()
            }
            Err(refused) => refused,
        },
        other => failure(other),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::frontend;
    use super::*;
    use crate::inbox::{ClientRequest, CoreInbox};
    use meridian_core::Request;
    use std::sync::Mutex;
    use std::time::Duration;
    use tokio::io::AsyncReadExt;
    use tokio::sync::oneshot;

    /// A core that answers every request at once and notes how each reached it: `submit`, or `enqueue N` for N
    /// requests handed over together.
    #[derive(Default)]
    struct Noting(Mutex<Vec<String>>);

    impl CoreInbox for Noting {
        fn submit(&self, req: Request) -> Answer {
            self.0.lock().unwrap().push("submit".into());
            Answer::Coming(answered(req))
        }

        fn enqueue(&self, reqs: Vec<ClientRequest>) {
            self.0.lock().unwrap().push(format!("enqueue {}", reqs.len()));
            for (req, reply) in reqs {
                reply.send(answered(req).try_recv().unwrap()).unwrap();
            }
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

    /// A core that keeps every request unanswered until the test answers it.
    #[derive(Default)]
    struct Holding(Mutex<Vec<(Request, oneshot::Sender<Reply>)>>);

    impl CoreInbox for Holding {
        fn submit(&self, req: Request) -> Answer {
            let (tx, rx) = oneshot::channel();
            self.0.lock().unwrap().push((req, tx));
            Answer::Coming(rx)
        }

        fn enqueue(&self, reqs: Vec<ClientRequest>) {
            self.0.lock().unwrap().extend(reqs);
        }

        fn request_shutdown(&self) {}
    }

    impl Holding {
        /// Waits until `n` requests have reached the core.
        async fn holds(&self, n: usize) {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            while self.0.lock().unwrap().len() < n {
                assert!(tokio::time::Instant::now() < deadline, "{n} requests never reached the core");
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }

        /// Answers the request at `index` as if it ran on an empty store.
        fn answer(&self, index: usize) {
            let (req, tx) = self.0.lock().unwrap().remove(index);
            tx.send(answered(req).try_recv().unwrap()).unwrap();
        }
    }

    /// Connects a client to a connection served over `core`.
    async fn connected(core: Arc<dyn CoreInbox>) -> (TcpStream, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let frontend = frontend(core);
        tokio::spawn(write_replies(frontend.clone()));
        (client, tokio::spawn(serve_client(ClientStream::Plain(server), None, frontend)))
    }

    /// Reads exactly `len` bytes of reply.
    async fn replies(client: &mut TcpStream, len: usize) -> Vec<u8> {
        let mut got = vec![0; len];
        tokio::time::timeout(Duration::from_secs(10), client.read_exact(&mut got)).await.unwrap().unwrap();
        got
    }

    /// Sends `bytes` in one write and reads until `len` bytes of answer have come back.
    async fn exchange(client: &mut TcpStream, bytes: &[u8], len: usize) -> Vec<u8> {
        client.write_all(bytes).await.unwrap();
        replies(client, len).await
    }

    /// The commands of a pipeline already read go to the core task's batch, handed over together and before the
    /// last one read, which (like a lone command) may step an idle core at once.
    #[tokio::test]
    async fn a_pipelines_requests_queue_for_the_core_task_and_a_lone_command_does_not() {
        let core = Arc::new(Noting::default());
        let (mut client, served) = connected(core.clone()).await;

        let pipeline =
            b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$3\r\nGET\r\n$1\r\nb\r\n*2\r\n$3\r\nGET\r\n$1\r\nd\r\n";
        assert_eq!(exchange(&mut client, pipeline, 15).await, b"+OK\r\n$-1\r\n$-1\r\n");
        assert_eq!(exchange(&mut client, b"*2\r\n$3\r\nGET\r\n$1\r\nc\r\n", 5).await, b"$-1\r\n");
        drop(client);
        served.await.unwrap();
        assert_eq!(*core.0.lock().unwrap(), ["enqueue 2", "submit", "submit"]);
    }

    /// A queued request reaches the core before the connection waits for its reply: a command on the same key
    /// waits for it (session order), and a pipeline that ends in a command sending nothing to the core still
    /// hands over what it queued. Without either handover the connection would wait forever.
    #[tokio::test]
    async fn queued_requests_reach_the_core_before_anything_waits_for_them() {
        let core = Arc::new(Noting::default());
        let (mut client, served) = connected(core.clone()).await;

        let pipeline = b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$3\r\nGET\r\n$1\r\na\r\n*1\r\n$4\r\nPING\r\n";
        assert_eq!(exchange(&mut client, pipeline, 17).await, b"+OK\r\n$-1\r\n+PONG\r\n");
        drop(client);
        served.await.unwrap();
        assert_eq!(*core.0.lock().unwrap(), ["enqueue 1", "enqueue 1"]);
    }

    /// A client that streams its pipeline keeps the core busy: commands read while the oldest reply is still on
    /// its way are submitted at once, and the replies still come back in request order.
    #[tokio::test]
    async fn commands_are_read_and_submitted_while_the_oldest_reply_waits() {
        let core = Arc::new(Holding::default());
        let (mut client, served) = connected(core.clone()).await;
        client.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n").await.unwrap();
        core.holds(1).await;
        client.write_all(b"*2\r\n$3\r\nGET\r\n$1\r\nb\r\n").await.unwrap();
        core.holds(2).await;
        core.answer(1);
        core.answer(0);
        assert_eq!(replies(&mut client, 10).await, b"+OK\r\n$-1\r\n");
        drop(client);
        served.await.unwrap();
    }

    /// Session order: a command on a key whose earlier command is unanswered reaches the core only after that
    /// answer, while the connection goes on writing replies.
    #[tokio::test]
    async fn a_command_on_a_key_still_unanswered_waits_for_its_answer() {
        let core = Arc::new(Holding::default());
        let (mut client, served) = connected(core.clone()).await;
        client.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n1\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n").await.unwrap();
        core.holds(1).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(core.0.lock().unwrap().len(), 1, "GET k waits for SET k's answer");
        core.answer(0);
        assert_eq!(replies(&mut client, 5).await, b"+OK\r\n");
        core.holds(1).await;
        core.answer(0);
        assert_eq!(replies(&mut client, 5).await, b"$-1\r\n");
        drop(client);
        served.await.unwrap();
    }
}
