//! The front-end role every node plays (seed 003 §2.1, §2.4): it accepts a client request, forwards it
//! to the chain that owns the key and hands the answer back, or gives up after a timeout with an
//! "outcome unknown" error. Timeouts count ticks rather than wall-clock time, so a clock step can
//! neither expire every request at once nor keep one alive forever.

use super::msg::Origin;
use meridian_core::{NodeId, RequestId};
use std::collections::BTreeMap;

#[derive(Debug)]
pub struct FrontEnd {
    me: NodeId,
    incarnation: u64,
    /// Request → the tick it was accepted at.
    pending: BTreeMap<RequestId, u64>,
}

impl FrontEnd {
    pub fn new(me: NodeId, incarnation: u64) -> FrontEnd {
        FrontEnd { me, incarnation, pending: BTreeMap::new() }
    }

    pub fn track(&mut self, id: RequestId, tick: u64) -> Origin {
        self.pending.insert(id, tick);
        Origin { node: self.me, incarnation: self.incarnation, id }
    }

    /// The request an answer belongs to, if it is ours and still waiting.
    pub fn complete(&mut self, origin: &Origin) -> Option<RequestId> {
        if origin.node != self.me || origin.incarnation != self.incarnation {
            return None;
        }
        self.pending.remove(&origin.id).map(|_| origin.id)
    }

    /// Removes and returns the requests accepted at or before `tick - timeout_ticks`.
    pub fn expire(&mut self, tick: u64, timeout_ticks: u64) -> Vec<RequestId> {
        let expired: Vec<RequestId> =
            self.pending.iter().filter(|(_, &t)| tick.saturating_sub(t) >= timeout_ticks).map(|(&id, _)| id).collect();
        for id in &expired {
            self.pending.remove(id);
        }
        expired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_from_another_incarnation_are_ignored() {
        let mut fe = FrontEnd::new(NodeId(1), 7);
        let origin = fe.track(RequestId(5), 0);
        let stale = Origin { incarnation: 6, ..origin };
        assert_eq!(fe.complete(&stale), None);
        assert_eq!(fe.complete(&origin), Some(RequestId(5)));
        assert_eq!(fe.complete(&origin), None, "a duplicate answer is dropped");
    }

    #[test]
    fn expiry_counts_ticks() {
        let mut fe = FrontEnd::new(NodeId(1), 0);
        let first = fe.track(RequestId(1), 0);
        let second = fe.track(RequestId(2), 3);
        assert_eq!(fe.expire(4, 4), vec![RequestId(1)]);
        assert_eq!(fe.complete(&first), None, "an expired request takes no answer");
        assert_eq!(fe.complete(&second), Some(RequestId(2)));
    }
}
