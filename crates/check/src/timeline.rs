//! The call and return events of one key's operations, ordered by time, as a doubly linked list from which the
//! search can unlink an operation and later relink it in O(1) (Lowe's "lift" and "unlift").
//!
//! Events at equal times are ordered calls first, so an operation that returns at the instant another is invoked
//! counts as concurrent with it: real-time order requires `complete_ns < invoke_ns` strictly. An operation without
//! a deadline has no return event, so it never forces the search to backtrack.

use crate::prepare::Call;

/// The end of the list (and the head sentinel's missing predecessor).
const NIL: usize = usize::MAX;
const HEAD: usize = 0;

#[derive(Clone, Copy, Debug)]
pub(crate) enum Event {
    /// Operation `op` (an index into the calls) is invoked; `ret` is the node of its return event, if it has one.
    Call {
        op: usize,
        ret: Option<usize>,
    },
    Return,
}

/// Node 0 is the head sentinel; node `i > 0` is `events[i - 1]`.
pub(crate) struct Timeline {
    events: Vec<Event>,
    next: Vec<usize>,
    prev: Vec<usize>,
    /// The node of each operation's call event.
    calls: Vec<usize>,
}

impl Timeline {
    pub(crate) fn new(calls: &[Call]) -> Timeline {
        let events = ordered_events(calls);
        let len = events.len();
        let next = (0..=len).map(|node| if node < len { node + 1 } else { NIL }).collect();
        // The head has no predecessor; wrapping makes it NIL.
        let prev = (0..=len).map(|node| node.wrapping_sub(1)).collect();
        let mut call_nodes = vec![NIL; calls.len()];
        for (i, event) in events.iter().enumerate() {
            if let Event::Call { op, .. } = *event {
                call_nodes[op] = i + 1;
            }
        }
        Timeline { events, next, prev, calls: call_nodes }
    }

    /// The node of operation `op`'s call event.
    pub(crate) fn call_of(&self, op: usize) -> usize {
        self.calls[op]
    }

    pub(crate) fn first(&self) -> Option<usize> {
        self.link(self.next[HEAD])
    }

    pub(crate) fn next(&self, node: usize) -> Option<usize> {
        self.link(self.next[node])
    }

    pub(crate) fn event(&self, node: usize) -> Event {
        self.events[node - 1]
    }

    /// Removes a call event and its return event from the list.
    pub(crate) fn lift(&mut self, call: usize) {
        self.unlink(call);
        if let Event::Call { ret: Some(ret), .. } = self.event(call) {
            self.unlink(ret);
        }
    }

    /// Undoes [`Timeline::lift`]; relinking in the reverse order of unlinking restores the exact list.
    pub(crate) fn unlift(&mut self, call: usize) {
        if let Event::Call { ret: Some(ret), .. } = self.event(call) {
            self.relink(ret);
        }
        self.relink(call);
    }

    fn link(&self, node: usize) -> Option<usize> {
        (node != NIL).then_some(node)
    }

    fn unlink(&mut self, node: usize) {
        let (prev, next) = (self.prev[node], self.next[node]);
        self.next[prev] = next;
        if next != NIL {
            self.prev[next] = prev;
        }
    }

    fn relink(&mut self, node: usize) {
        let (prev, next) = (self.prev[node], self.next[node]);
        self.next[prev] = node;
        if next != NIL {
            self.prev[next] = node;
        }
    }
}

/// Sorts events by (time, calls before returns, operation) and links each call to its return's node.
fn ordered_events(calls: &[Call]) -> Vec<Event> {
    let mut stamps: Vec<(u64, bool, usize)> = Vec::with_capacity(calls.len() * 2);
    for (op, call) in calls.iter().enumerate() {
        stamps.push((call.invoke, false, op));
        if let Some(deadline) = call.deadline {
            stamps.push((deadline, true, op));
        }
    }
    stamps.sort_unstable();
    let mut ret_node = vec![None; calls.len()];
    for (position, &(_, is_return, op)) in stamps.iter().enumerate() {
        if is_return {
            ret_node[op] = Some(position + 1);
        }
    }
    stamps
        .iter()
        .map(|&(_, is_return, op)| if is_return { Event::Return } else { Event::Call { op, ret: ret_node[op] } })
        .collect()
}
