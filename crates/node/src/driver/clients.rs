//! The reply channels of the client requests a core has taken and not yet answered.
//!
//! Most requests are answered within the step that took them (every request of a keyspace this node serves
//! alone), so the newest one waits in a slot of its own and enters the map only if another request comes before
//! its answer: a hash insert and remove per request were about 2% of a pipelined SET's instructions. A request
//! stepped in its caller's task has no channel while its step runs: its answer, if the step gives one, is kept
//! for the caller ([`Clients::step_here`]).

use meridian_core::{Reply, RequestId};
use std::collections::HashMap;
use tokio::sync::oneshot::Sender;

#[derive(Default)]
pub(super) struct Clients {
    waiting: HashMap<RequestId, Sender<Reply>>,
    newest: Option<(RequestId, Sender<Reply>)>,
    /// The request being stepped in its caller's task, and its answer once given.
    here: Option<(RequestId, Option<Reply>)>,
}

impl Clients {
    /// Keeps the channel of request `id`, the newest one.
    pub(super) fn add(&mut self, id: RequestId, reply: Sender<Reply>) {
        if let Some((older, its_reply)) = self.newest.replace((id, reply)) {
            self.waiting.insert(older, its_reply);
        }
    }

    /// Marks request `id` as stepped in its caller's task: until [`Self::stepped_here`], its answer is kept
    /// rather than sent.
    pub(super) fn step_here(&mut self, id: RequestId) {
        self.here = Some((id, None));
    }

    /// The answer the step of the request marked by [`Self::step_here`] gave; None if it gave none, and the
    /// request then needs a channel ([`Self::add`]).
    pub(super) fn stepped_here(&mut self) -> Option<Reply> {
        self.here.take().and_then(|(_, reply)| reply)
    }

    /// Sends request `id` its answer. A missing id or a closed receiver means the client left; the answer has
    /// no one to go to.
    pub(super) fn answer(&mut self, id: RequestId, reply: Reply) {
        match &mut self.here {
            Some((here, kept)) if *here == id => *kept = Some(reply),
            _ => {
                if let Some(client) = self.take(id) {
                    let _ = client.send(reply);
                }
            }
        }
    }

    /// The channel of request `id`, given up; None if it was given up already or never kept.
    fn take(&mut self, id: RequestId) -> Option<Sender<Reply>> {
        match self.newest.take() {
            Some((newest, reply)) if newest == id => Some(reply),
            other => {
                self.newest = other;
                self.waiting.remove(&id)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    #[test]
    fn every_kept_channel_is_found_once_whenever_its_answer_comes() {
        let mut clients = Clients::default();
        let mut receivers = Vec::new();
        for id in 0..4 {
            let (tx, rx) = oneshot::channel();
            clients.add(RequestId(id), tx);
            receivers.push(rx);
        }
        // One in between while the newest waits in its slot, then the newest, the oldest, the last; each once.
        for id in [1, 3, 0, 2] {
            let reply = clients.take(RequestId(id)).expect("kept");
            reply.send(Reply::Integer(id as i64)).unwrap();
            assert!(clients.take(RequestId(id)).is_none(), "request {id} answered twice");
        }
        for (id, mut rx) in receivers.into_iter().enumerate() {
            assert_eq!(rx.try_recv().unwrap(), Reply::Integer(id as i64));
        }
        assert!(clients.take(RequestId(9)).is_none());
    }
}
