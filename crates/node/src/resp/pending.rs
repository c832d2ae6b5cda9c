//! A reply that may still be on its way from the core.
//!
//! A connection answers these in request order, which is what keeps pipelined replies in order while many
//! requests of the connection are in the core at once. The shape of the final RESP reply is mostly a plain
//! function of the core's [`Reply`]s, which needs neither boxing nor a task of its own; only a walk (SCAN,
//! DBSIZE), whose next request depends on the last answer, is a boxed future. The connection polls it only in
//! its turn, so a walk starts once every earlier command of the connection has been answered.

use super::frame::Frame;
use crate::inbox::{unanswered, Answer};
use meridian_core::Reply;
use std::future::Future;
use std::pin::Pin;

pub(crate) enum Pending {
    Ready(Frame),
    One {
        rx: Answer,
        shape: fn(Reply) -> Frame,
    },
    /// A reply shaped by what the command asked (HGET's field): the one kind that needs a closure.
    Picked {
        rx: Answer,
        pick: Box<dyn Fn(Reply) -> Frame + Send>,
    },
    /// A multi-key command: one core request per key, answered together.
    Many {
        rxs: Vec<Answer>,
        /// The answers received so far, of the first `rxs`.
        replies: Vec<Reply>,
        fold: fn(Vec<Reply>) -> Frame,
    },
    /// A command whose requests depend on earlier answers (SCAN, DBSIZE follow the ring from answer to answer):
    /// the walk itself, run by the connection in its turn.
    Walk(Pin<Box<dyn Future<Output = Frame> + Send>>),
}

impl Pending {
    pub(crate) fn many(rxs: Vec<Answer>, fold: fn(Vec<Reply>) -> Frame) -> Pending {
        Pending::Many { replies: Vec::with_capacity(rxs.len()), rxs, fold }
    }

    /// True when taking the reply will not wait.
    pub(crate) fn is_ready(&self) -> bool {
        match self {
            Pending::Ready(_) => true,
            Pending::One { rx, .. } | Pending::Picked { rx, .. } => !rx.is_empty(),
            Pending::Many { rxs, replies, .. } => rxs[replies.len()..].iter().all(|rx| !rx.is_empty()),
            Pending::Walk(_) => false,
        }
    }

    /// Takes the reply if it is here, leaving this pending spent; `None` if it is not, or if it is one only
    /// [`Self::take`] assembles (several answers, a walk). Unlike awaiting, it registers no waker and spends
    /// none of the task's budget, which for a pipeline's replies, mostly here by the time their turn comes,
    /// costs more than building the reply.
    pub(crate) fn try_take(&mut self) -> Option<Frame> {
        match self {
            Pending::Ready(frame) => Some(std::mem::take(frame)),
            Pending::One { rx, shape } => rx.try_recv().map(*shape),
            Pending::Picked { rx, pick } => rx.try_recv().map(pick),
            Pending::Many { .. } | Pending::Walk(_) => None,
        }
    }

    /// Waits for the reply and takes it, leaving this pending spent. A wait broken off (the connection races it
    /// against its next read) loses nothing: each answer received is kept here until the reply is whole.
    pub(crate) async fn take(&mut self) -> Frame {
        match self {
            Pending::Ready(frame) => std::mem::take(frame),
            Pending::One { rx, shape } => shape(receive(rx).await),
            Pending::Picked { rx, pick } => {
                // Awaited before `pick` is borrowed for the call: a `&Box<dyn Fn>` held across the await would
                // need `Sync`, and the connection's future would not be `Send`.
                let reply = receive(rx).await;
                pick(reply)
            }
            Pending::Many { rxs, replies, fold } => {
                // The core answers each request on its own; awaiting them in turn waits no longer than
                // the slowest.
                while let Some(rx) = rxs.get_mut(replies.len()) {
                    replies.push(receive(rx).await);
                }
                fold(std::mem::take(replies))
            }
            Pending::Walk(walk) => walk.as_mut().await,
        }
    }
}

/// The core's reply; a dropped sender means the core stopped with the request inside it.
pub(crate) async fn receive(rx: &mut Answer) -> Reply {
    rx.await.unwrap_or_else(|_| unanswered())
}

#[cfg(test)]
mod tests {
    use super::super::kv::integer;
    use super::*;
    use tokio::sync::oneshot;

    fn one(rx: oneshot::Receiver<Reply>) -> Pending {
        Pending::One { rx: Answer::Coming(rx), shape: integer }
    }

    #[tokio::test]
    async fn a_reply_is_taken_without_waiting_once_it_is_here_and_not_before() {
        let (tx, rx) = oneshot::channel();
        let mut pending = one(rx);
        assert_eq!(pending.try_take(), None, "nothing is here yet");
        assert!(!pending.is_ready());
        tx.send(Reply::Integer(7)).unwrap();
        assert!(pending.is_ready());
        assert_eq!(pending.try_take(), Some(Frame::Integer(7)));

        let (tx, rx) = oneshot::channel::<Reply>();
        let mut stopped = one(rx);
        drop(tx);
        assert!(matches!(stopped.try_take(), Some(Frame::Error(e)) if e.contains("outcome is unknown")));

        let mut ready = Pending::Ready(Frame::Integer(1));
        assert_eq!(ready.try_take(), Some(Frame::Integer(1)));
        let mut many = Pending::many(vec![Answer::Given(Some(Reply::Integer(2)))], |_| Frame::Null);
        assert_eq!(many.try_take(), None, "several answers are assembled by awaiting them");
        assert_eq!(many.take().await, Frame::Null);
    }
}
