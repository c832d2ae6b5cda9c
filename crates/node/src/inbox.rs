//! The one channel into the core task: every peer message, and the client requests that find the core busy
//! (an idle core takes them in the connection's own task: `driver::CoreHandle`).
//!
//! It is a bounded tokio channel ([`INBOX_MAX`]): the core is a task on the same runtime as the connections
//! that feed it, so handing it a request is a queue push and, at most, a wake-up of a task rather than of an
//! OS thread. Client requests never wait for room: one that finds the inbox full is refused with `BUSY`
//! (certainly not applied). A peer connection waits for room, which stops it reading, so the pressure
//! travels back over TCP to the sender's bounded queue.

use meridian_core::{ErrorKind, NodeId, Reply, Request};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::mpsc::{channel as bounded, Receiver, Sender};
use tokio::sync::oneshot;

/// Inputs waiting for the core; enough for thousands of pipelining clients.
pub(crate) const INBOX_MAX: usize = 65_536;

pub(crate) enum Input<M> {
    Peer {
        from: NodeId,
        msg: M,
    },
    Client {
        req: Request,
        reply: oneshot::Sender<Reply>,
    },
    /// The requests of one connection's pipeline, in the order it read them: one push into the inbox and
    /// one take out of it for all of them, rather than one of each per request.
    Clients(Vec<ClientRequest>),
    Shutdown,
}

/// A client request and where its reply goes.
pub(crate) type ClientRequest = (Request, oneshot::Sender<Reply>);

/// Value bytes of the requests handed to the core in one [`Input::Clients`] at most. A batch stops taking inputs
/// once it holds `GROUP_BYTES_MAX` of values, so this bounds how far one input can carry it past that (a pipeline
/// of a thousand 1 MiB values would otherwise be one input).
pub(crate) const HANDOVER_BYTES_MAX: usize = 64 << 10;

/// The value bytes a client request asks to write: what a group commit's bound counts.
pub(crate) fn value_bytes(req: &Request) -> usize {
    match req {
        Request::Write(write) => write.value().map_or(0, |v| v.len()),
        _ => 0,
    }
}

/// Client requests gathered to go to the core together (a pipelining connection's: `resp/frontend.rs`).
#[derive(Default)]
pub(crate) struct Handover {
    reqs: Vec<ClientRequest>,
    bytes: usize,
}

impl Handover {
    /// Adds a request; true once the requests hold [`HANDOVER_BYTES_MAX`] of values and should go.
    pub(crate) fn push(&mut self, req: Request, reply: oneshot::Sender<Reply>) -> bool {
        self.bytes += value_bytes(&req);
        self.reqs.push((req, reply));
        self.bytes >= HANDOVER_BYTES_MAX
    }

    /// The requests gathered, if any, leaving none.
    pub(crate) fn take(&mut self) -> Option<Vec<ClientRequest>> {
        self.bytes = 0;
        Some(std::mem::take(&mut self.reqs)).filter(|reqs| !reqs.is_empty())
    }
}

/// The core's answer to one request: given already when the caller's task stepped the request and the step
/// answered it (no channel is made then), or still coming through a channel. Awaiting it gives the reply, or an
/// error if the core stopped with the request inside it.
#[derive(Debug)]
pub(crate) enum Answer {
    Given(Option<Reply>),
    Coming(oneshot::Receiver<Reply>),
}

impl Answer {
    /// True while awaiting the answer would wait.
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Answer::Given(reply) => reply.is_none(),
            Answer::Coming(rx) => rx.is_empty(),
        }
    }

    /// The answer if it is here, without waiting (from a core that stopped with the request inside, the error
    /// [`unanswered`]); `None` while it is on its way.
    pub(crate) fn try_recv(&mut self) -> Option<Reply> {
        match self {
            Answer::Given(reply) => reply.take(),
            Answer::Coming(rx) => match rx.try_recv() {
                Ok(reply) => Some(reply),
                Err(oneshot::error::TryRecvError::Empty) => None,
                Err(oneshot::error::TryRecvError::Closed) => Some(unanswered()),
            },
        }
    }
}

/// The answer to a request the core dropped unanswered: it stopped with the request inside, so whether the
/// request took effect is unknown.
pub(crate) fn unanswered() -> Reply {
    Reply::Error(ErrorKind::Timeout, "the node stopped before answering; the outcome is unknown".into())
}

impl Future for Answer {
    type Output = Result<Reply, oneshot::error::RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Answer::Given(reply) => Poll::Ready(Ok(reply.take().expect("an answer is taken once"))),
            Answer::Coming(rx) => Pin::new(rx).poll(cx),
        }
    }
}

pub(crate) fn channel<M>() -> (Sender<Input<M>>, Receiver<Input<M>>) {
    bounded(INBOX_MAX)
}

/// What the client front-ends and the node handle need from the core, without depending on the
/// process's message type.
pub(crate) trait CoreInbox: Send + Sync {
    /// Hands a request to the core. The answer always resolves: with the core's reply, with `BUSY`
    /// when the request was refused before reaching the core, or with an error when the core stopped.
    fn submit(&self, req: Request) -> Answer;
    /// Hands `reqs` to the core task's next batch through the inbox, to be stepped in order. Every sender is
    /// answered as [`Self::submit`]'s answer resolves.
    fn enqueue(&self, reqs: Vec<ClientRequest>);
    /// Asks the core to finish its batch and stop. Blocks while the inbox is full, so call it off the
    /// async runtime.
    fn request_shutdown(&self);
}

impl<M: Send> CoreInbox for Sender<Input<M>> {
    fn submit(&self, req: Request) -> Answer {
        let (tx, rx) = oneshot::channel();
        try_send(self, Input::Client { req, reply: tx });
        Answer::Coming(rx)
    }

    fn enqueue(&self, reqs: Vec<ClientRequest>) {
        try_send(self, Input::Clients(reqs));
    }

    fn request_shutdown(&self) {
        // An error means the core is already gone, which is what was asked for.
        let _ = self.blocking_send(Input::Shutdown);
    }
}

/// Queues a client input, or refuses its requests with `BUSY` if the inbox is full or closed.
fn try_send<M>(inbox: &Sender<Input<M>>, input: Input<M>) {
    let (input, why) = match inbox.try_send(input) {
        Ok(()) => return,
        Err(TrySendError::Full(input)) => (input, "the node's input queue is full; retry later"),
        Err(TrySendError::Closed(input)) => (input, "the node is shutting down"),
    };
    let refuse = |reply: oneshot::Sender<Reply>| {
        // A receiver dropped already (its connection closed) needs no answer.
        let _ = reply.send(Reply::Error(ErrorKind::Busy, why.to_string()));
    };
    match input {
        Input::Client { reply, .. } => refuse(reply),
        Input::Clients(reqs) => reqs.into_iter().for_each(|(_, reply)| refuse(reply)),
        Input::Peer { .. } | Input::Shutdown => {}
    }
}

/// The core has stopped; whoever was feeding it should stop too.
#[derive(Debug)]
pub(crate) struct CoreStopped;

/// Delivers a peer message, waiting (without blocking the runtime) while the inbox is full.
pub(crate) async fn deliver<M>(inbox: &Sender<Input<M>>, from: NodeId, msg: M) -> Result<(), CoreStopped> {
    inbox.send(Input::Peer { from, msg }).await.map_err(|_| CoreStopped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use meridian_core::{KeyspaceId, Read, Ttl, Write, WriteOp};

    fn set(len: usize) -> Request {
        let op = WriteOp::Put { value: Bytes::from(vec![b'v'; len]), ttl: Ttl::Clear };
        Request::Write(Write::new(KeyspaceId::DEFAULT, Bytes::from_static(b"k"), op))
    }

    /// Requests go together until their values reach the bound; taking them starts the count again.
    #[test]
    fn a_handover_is_due_once_its_values_reach_the_bound() {
        let mut handover = Handover::default();
        assert_eq!(handover.take().map(|reqs| reqs.len()), None, "nothing gathered, nothing to hand over");
        let get = Request::Get { keyspace: KeyspaceId::DEFAULT, key: Bytes::from_static(b"k"), read: Read::Value };
        assert!(!handover.push(get, oneshot::channel().0));
        assert!(!handover.push(set(HANDOVER_BYTES_MAX / 2), oneshot::channel().0));
        assert!(handover.push(set(HANDOVER_BYTES_MAX / 2), oneshot::channel().0), "due at the bound");
        assert_eq!(handover.take().map(|reqs| reqs.len()), Some(3));
        assert!(!handover.push(set(HANDOVER_BYTES_MAX / 2), oneshot::channel().0), "the count starts again");
    }
}
