//! The front-end role every node plays (seed 003 §2.1, §2.4): it accepts a client request, forwards it
//! to the chain that owns the key and hands the answer back, or gives up after a timeout with an
//! "outcome unknown" error. [`RequestTable`] keeps the requests it waits on, each named on the wire by its
//! [`Origin`]. Timeouts count ticks, so a paused node expires its requests by its own progress rather than all
//! at once.
//!
//! A request that a head or tail bounces (it is not the head or tail in its view, or not a valid replica
//! yet) was certainly not applied, so the front-end sends it again at its next tick, routed by its map as it
//! is then: membership changes cost clients latency, not errors.
//!
//! None of this depends on how a keyspace is replicated, so it lives beside the protocols rather than in
//! `chain` (which re-exports `Origin` from `chain::msg`); the node owns the table ([`crate::host::Host`]).

use meridian_core::{NodeId, Request, RequestId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Who is waiting for the answer: the front-end node, its incarnation (the seed's fe-view-id: answers meant
/// for a previous run of that node are never handed to a new client) and its request id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    pub node: NodeId,
    pub incarnation: u64,
    pub id: RequestId,
}

#[derive(Debug)]
struct Pending {
    /// The tick the request was accepted at.
    accepted: u64,
    /// A write's outcome is unknown when it times out; a read's or scan's changed nothing.
    write: bool,
    /// The request, kept only while another node has it: that node's bounce names nothing but the origin. A
    /// request this node serves itself is not copied (a clone and a drop per request, about 2% of a pipelined
    /// one's instructions): if it bounces here, it is handed back ([`RequestTable::bounce_here`]).
    req: Option<Request>,
    /// Bounced: send again at the next tick.
    retry: bool,
}

/// The requests this node accepted as a front-end and still waits on (named apart from the RESP server's
/// `Frontend`, which is what a node's client connections share).
#[derive(Debug)]
pub struct RequestTable {
    me: NodeId,
    incarnation: u64,
    pending: BTreeMap<RequestId, Pending>,
    /// The request of the step under way, until [`RequestTable::settle`] files it under `pending`. Most requests
    /// to a node that serves their key themselves are answered within the step that took them, and then never
    /// need the map (an insert and a remove were 2–3% of a pipelined SET's samples).
    fresh: Option<(RequestId, Pending)>,
}

impl RequestTable {
    pub fn new(me: NodeId, incarnation: u64) -> RequestTable {
        RequestTable { me, incarnation, pending: BTreeMap::new(), fresh: None }
    }

    /// Takes request `id` (a write or not) for the step under way; [`RequestTable::settle`] must end that step.
    pub fn track(&mut self, id: RequestId, write: bool, tick: u64) -> Origin {
        self.settle();
        self.fresh = Some((id, Pending { accepted: tick, write, req: None, retry: false }));
        self.origin(id)
    }

    /// Files the step's request, if it is still unanswered, with the others waiting.
    pub fn settle(&mut self) {
        if let Some((id, p)) = self.fresh.take() {
            self.pending.insert(id, p);
        }
    }

    fn take(&mut self, id: RequestId) -> Option<Pending> {
        match self.fresh.take() {
            Some((fresh, p)) if fresh == id => Some(p),
            other => {
                self.fresh = other;
                self.pending.remove(&id)
            }
        }
    }

    /// The request `origin` names, if it is ours and still waiting.
    fn waiting(&mut self, origin: &Origin) -> Option<&mut Pending> {
        if !self.is_ours(origin) {
            return None;
        }
        let fresh = self.fresh.as_mut().filter(|(id, _)| *id == origin.id).map(|(_, p)| p);
        fresh.or_else(|| self.pending.get_mut(&origin.id))
    }

    fn origin(&self, id: RequestId) -> Origin {
        Origin { node: self.me, incarnation: self.incarnation, id }
    }

    /// The request an answer belongs to, if it is ours and still waiting.
    pub fn complete(&mut self, origin: &Origin) -> Option<RequestId> {
        if !self.is_ours(origin) {
            return None;
        }
        self.take(origin.id).map(|_| origin.id)
    }

    fn is_ours(&self, origin: &Origin) -> bool {
        origin.node == self.me && origin.incarnation == self.incarnation
    }

    /// The copy kept of a request of ours that went to another node.
    pub fn kept(&mut self, origin: &Origin) -> Option<&Request> {
        self.waiting(origin)?.req.as_ref()
    }

    /// Keeps a copy of a request of ours that goes to another node, for when that node bounces it.
    pub fn keep(&mut self, origin: &Origin, req: Request) {
        if let Some(p) = self.waiting(origin) {
            p.req = Some(req);
        }
    }

    /// This node bounced its own request `req`: it is sent again at the next tick.
    pub fn bounce_here(&mut self, origin: &Origin, req: Request) {
        if let Some(p) = self.waiting(origin) {
            p.req = Some(req);
            p.retry = true;
        }
    }

    /// Another node bounced a request of ours, which is sent again at the next tick from the copy kept of it.
    /// Without a copy (every path that sends a request elsewhere keeps one, so this would be a bug) it cannot be
    /// sent again: it is removed and returned with whether it is a write, to be answered at once rather than
    /// left to time out.
    pub fn bounced(&mut self, origin: &Origin) -> Option<(RequestId, bool)> {
        let p = self.waiting(origin)?;
        if p.req.is_some() {
            p.retry = true;
            return None;
        }
        self.take(origin.id).map(|p| (origin.id, p.write))
    }

    /// The bounced requests to send again, with their origins. Each is taken out of its entry: sending it keeps
    /// a new copy if it goes to another node, and a bounce here hands it back.
    pub fn take_retries(&mut self) -> Vec<(Origin, Request)> {
        self.settle();
        let mut due = Vec::new();
        for (&id, p) in self.pending.iter_mut().filter(|(_, p)| p.retry) {
            p.retry = false;
            due.extend(p.req.take().map(|req| (id, req)));
        }
        due.into_iter().map(|(id, req)| (self.origin(id), req)).collect()
    }

    /// Removes and returns the requests accepted at or before `tick - timeout_ticks`, each with whether it
    /// was a write (whose outcome is then unknown; a read's or scan's changed nothing).
    pub fn expire(&mut self, tick: u64, timeout_ticks: u64) -> Vec<(RequestId, bool)> {
        self.settle();
        let expired: Vec<(RequestId, bool)> = self
            .pending
            .iter()
            .filter(|(_, p)| tick.saturating_sub(p.accepted) >= timeout_ticks)
            .map(|(&id, p)| (id, p.write))
            .collect();
        for (id, _) in &expired {
            self.pending.remove(id);
        }
        expired
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn get() -> Request {
        Request::Get {
            keyspace: meridian_core::KeyspaceId::DEFAULT,
            key: Bytes::from_static(b"k"),
            read: meridian_core::Read::Value,
        }
    }

    #[test]
    fn answers_from_another_incarnation_are_ignored() {
        let mut fe = RequestTable::new(NodeId(1), 7);
        let origin = fe.track(RequestId(5), false, 0);
        let stale = Origin { incarnation: 6, ..origin };
        assert_eq!(fe.complete(&stale), None);
        assert_eq!(fe.complete(&origin), Some(RequestId(5)));
        assert_eq!(fe.complete(&origin), None, "a duplicate answer is dropped");
    }

    #[test]
    fn expiry_counts_ticks() {
        let mut fe = RequestTable::new(NodeId(1), 0);
        let first = fe.track(RequestId(1), false, 0);
        let second = fe.track(RequestId(2), false, 3);
        assert_eq!(fe.expire(4, 4), vec![(RequestId(1), false)]);
        assert_eq!(fe.complete(&first), None, "an expired request takes no answer");
        assert_eq!(fe.complete(&second), Some(RequestId(2)));
    }

    #[test]
    fn the_steps_request_is_answered_bounced_or_filed_like_any_other() {
        let mut fe = RequestTable::new(NodeId(1), 0);
        let answered = fe.track(RequestId(1), false, 0);
        assert_eq!(fe.complete(&answered), Some(RequestId(1)));
        fe.settle();
        assert!(fe.pending.is_empty(), "answered within its step, never filed");

        let bounced = fe.track(RequestId(2), false, 0);
        fe.bounce_here(&bounced, get());
        fe.settle();
        assert_eq!(fe.take_retries(), vec![(bounced, get())]);

        let waiting = fe.track(RequestId(3), false, 1);
        let next = fe.track(RequestId(4), false, 2);
        assert_eq!(fe.complete(&waiting), Some(RequestId(3)), "filed when the next step took another");
        let expired = fe.expire(6, 4);
        assert_eq!(expired, vec![(RequestId(2), false), (RequestId(4), false)], "the step's request expires too");
        assert_eq!(fe.complete(&next), None);
    }

    #[test]
    fn bounced_requests_are_retried_once_per_bounce() {
        let mut fe = RequestTable::new(NodeId(1), 0);
        let origin = fe.track(RequestId(1), false, 0);
        assert!(fe.take_retries().is_empty());
        fe.bounce_here(&origin, get());
        let retries = fe.take_retries();
        assert_eq!(retries, vec![(origin, get())]);
        assert!(fe.take_retries().is_empty());
    }

    #[test]
    fn a_request_bounced_elsewhere_is_sent_again_from_its_copy_or_given_up() {
        let mut fe = RequestTable::new(NodeId(1), 0);
        let kept = fe.track(RequestId(1), false, 0);
        fe.keep(&kept, get());
        let lost = fe.track(RequestId(2), true, 0);
        assert_eq!(fe.bounced(&kept), None, "sent again");
        assert_eq!(fe.bounced(&lost), Some((RequestId(2), true)), "no copy: answered at once, as a write");
        assert_eq!(fe.take_retries(), vec![(kept, get())]);
        assert_eq!(fe.bounced(&kept), Some((RequestId(1), false)), "the copy went with the retry");
        assert_eq!(fe.complete(&lost), None);
        assert!(fe.expire(100, 1).is_empty(), "both are gone");
    }
}
