//! The reply channels of the client requests a core has taken and not yet answered.
//!
//! Most requests are answered within the step that took them (every request of a keyspace this node serves
//! alone), so the newest one waits in a slot of its own and enters the map only if another request comes before
//! its answer: a hash insert and remove per request were about 2% of a pipelined SET's instructions.

use meridian_core::{Reply, RequestId};
use std::collections::HashMap;
use tokio::sync::oneshot::Sender;

#[derive(Default)]
pub(super) struct Clients {
    waiting: HashMap<RequestId, Sender<Reply>>,
    newest: Option<(RequestId, Sender<Reply>)>,
}

impl Clients {
    /// Keeps the channel of request `id`, the newest one.
    pub(super) fn add(&mut self, id: RequestId, reply: Sender<Reply>) {
        if let Some((older, its_reply)) = self.newest.replace((id, reply)) {
            self.waiting.insert(older, its_reply);
        }
    }

    /// The channel of request `id`, given up; None if it was given up already or never kept.
    pub(super) fn take(&mut self, id: RequestId) -> Option<Sender<Reply>> {
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
