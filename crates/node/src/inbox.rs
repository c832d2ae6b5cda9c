//! The one channel into the core thread.
//!
//! It is a bounded std channel ([`INBOX_MAX`]) because its receiver is a plain OS thread that must block
//! with a timeout (the next timer deadline), which tokio channels cannot do. Async senders therefore never
//! block on it: a client request that finds it full is refused with `BUSY` (certainly not applied), and
//! a peer connection pauses reading until there is room, so the pressure travels back over TCP to the
//! sender's bounded queue.

use meridian_core::{ErrorKind, NodeId, Reply, Request};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::time::Duration;
use tokio::sync::oneshot;

/// Inputs waiting for the core; enough for thousands of pipelining clients.
pub(crate) const INBOX_MAX: usize = 65_536;
/// How long a peer connection waits before retrying a full inbox.
const FULL_INBOX_PAUSE: Duration = Duration::from_millis(1);

pub(crate) enum Input<M> {
    Peer { from: NodeId, msg: M },
    Client { req: Request, reply: oneshot::Sender<Reply> },
    Shutdown,
}

pub(crate) fn channel<M>() -> (SyncSender<Input<M>>, Receiver<Input<M>>) {
    sync_channel(INBOX_MAX)
}

/// What the client front-ends and the node handle need from the core, without depending on the
/// process's message type.
pub(crate) trait CoreInbox: Send + Sync {
    /// Hands a request to the core. The receiver always resolves: with the core's reply, with `BUSY`
    /// when the request was refused before reaching the core, or with an error when the core stopped.
    fn submit(&self, req: Request) -> oneshot::Receiver<Reply>;
    /// Asks the core to finish its batch and stop. Blocks while the inbox is full, so call it off the
    /// async runtime.
    fn request_shutdown(&self);
}

impl<M: Send> CoreInbox for SyncSender<Input<M>> {
    fn submit(&self, req: Request) -> oneshot::Receiver<Reply> {
        let (tx, rx) = oneshot::channel();
        let (input, why) = match self.try_send(Input::Client { req, reply: tx }) {
            Ok(()) => return rx,
            Err(TrySendError::Full(input)) => (input, "the node's input queue is full; retry later"),
            Err(TrySendError::Disconnected(input)) => (input, "the node is shutting down"),
        };
        if let Input::Client { reply, .. } = input {
            // The receiver is still held by us, so this send cannot fail.
            let _ = reply.send(Reply::Error(ErrorKind::Busy, why.to_string()));
        }
        rx
    }

    fn request_shutdown(&self) {
        // An error means the core is already gone, which is what was asked for.
        let _ = self.send(Input::Shutdown);
    }
}

/// The core thread has stopped; whoever was feeding it should stop too.
#[derive(Debug)]
pub(crate) struct CoreStopped;

/// Delivers a peer message, waiting (without blocking the runtime) while the inbox is full.
pub(crate) async fn deliver<M>(inbox: &SyncSender<Input<M>>, from: NodeId, msg: M) -> Result<(), CoreStopped> {
    let mut input = Input::Peer { from, msg };
    loop {
        match inbox.try_send(input) {
            Ok(()) => return Ok(()),
            Err(TrySendError::Full(back)) => input = back,
            Err(TrySendError::Disconnected(_)) => return Err(CoreStopped),
        }
        tokio::time::sleep(FULL_INBOX_PAUSE).await;
    }
}
