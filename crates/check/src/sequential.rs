//! Per-key sequential consistency, with the session guarantees it implies: is there, for each key, one total
//! order of its writes that every process's operations on that key respect in the process's own order?
//!
//! That is the guarantee lease keyspaces promise (seed 001 §4.1: reads served locally under a lease see a
//! master's writes in the master's order, never going back). It is weaker than linearizability: a read may
//! return an older value than one another process already read, as long as no process sees writes out of order.
//! In terms of sessions, it includes read-your-writes (after its write, a process reads that write or a later
//! one) and monotonic reads (a process never reads a write older than one it read before).
//!
//! Writes of a key carry distinct values (the simulator's and the tests' workloads make them so), so every read
//! names the write it read from and the check is a cycle search, not a search over interleavings. Between two
//! consecutive operations `a` and `b` of a process on a key, with `pos(op)` the write an operation is (a write)
//! or read from (a read), an order must have `pos(a) ≤ pos(b)`, strictly when `b` writes (its write comes after
//! everything the process did before). The writes, the start of the key (absent) before all of them, and those
//! constraints form a graph: an order exists exactly when the graph has no cycle (a topological order of the
//! writes, with each read placed right after the write it read from, is one).
//!
//! What is left out, so the check can only miss violations, never invent one:
//! - reads of an absent key when the key has deletes that may have taken effect (which delete, or the start,
//!   they read from is not known), present reads (no value), and reads and writes that failed or whose outcome is
//!   unknown, except that a write of unknown outcome that some read observed took effect: it must come after
//!   what its process did before it (it may land any time after its invocation, so nothing after it is bound);
//! - a cas's adjacency (no write between the value it expected and its own): it counts as a read of the
//!   expected value followed by a write.

use crate::dataflow::{observed, written};
use crate::history::{History, Op, OpKind};
use crate::linearizable::{by_key, malformed};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

/// The result of [`check_sequential`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SequentialVerdict {
    /// Every key has an order. `ops` counts the operations that constrained the check.
    Consistent { keys: usize, ops: usize },
    /// The first key in sorted order that has none.
    Violation(SequentialViolation),
    /// A key whose writes repeat a value (its reads do not say which write they read from), or an operation
    /// that breaks the history format.
    Inconclusive { key: String, reason: String },
}

impl SequentialVerdict {
    pub fn is_consistent(&self) -> bool {
        matches!(self, SequentialVerdict::Consistent { .. })
    }
}

/// Why a key has no order: a cycle of constraints, each from two consecutive operations of one process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SequentialViolation {
    pub key: String,
    /// The constraints around the cycle, in order: each an earlier and a later operation of one process, and the
    /// guarantee that orders the writes they are or read from.
    pub cycle: Vec<(Op, Op, &'static str)>,
}

impl fmt::Display for SequentialViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "key {:?}: no order of its writes fits every process ({} constraints in a cycle):",
            self.key,
            self.cycle.len()
        )?;
        for (a, b, why) in &self.cycle {
            writeln!(f, "  process {} ({why}): {} then {}", a.process, describe(a), describe(b))?;
        }
        Ok(())
    }
}

impl fmt::Display for SequentialVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SequentialVerdict::Consistent { keys, ops } => {
                write!(f, "sequentially consistent: {ops} operations on {keys} keys")
            }
            SequentialVerdict::Violation(v) => write!(f, "not sequentially consistent: {v}"),
            SequentialVerdict::Inconclusive { key, reason } => write!(f, "inconclusive on key {key:?}: {reason}"),
        }
    }
}

fn describe(op: &Op) -> String {
    let value = |v: &Option<String>| v.as_deref().map_or("absent".to_string(), |v| format!("{v:?}"));
    let at = format!("at {} ns", op.invoke_ns);
    match op.op {
        OpKind::Get => format!("read {} {at}", value(&op.value)),
        OpKind::Put => format!("wrote {} {at}", value(&op.value)),
        OpKind::Delete => format!("deleted {at}"),
        OpKind::Cas => format!("cas {} to {} {at}", value(&op.expected), value(&op.value)),
        OpKind::Present => format!("found present {at}"),
    }
}

/// Checks every key of `history` for a total order of its writes that each process respects.
pub fn check_sequential(history: &History) -> SequentialVerdict {
    if let Some((key, reason)) = malformed(history) {
        return SequentialVerdict::Inconclusive { key, reason };
    }
    let keys = by_key(history);
    let mut ops = 0;
    for (key, key_ops) in &keys {
        match Graph::build(key_ops) {
            Err(reason) => return SequentialVerdict::Inconclusive { key: key.to_string(), reason },
            Ok(graph) => match graph.cycle() {
                Some(cycle) => {
                    let cycle = cycle.into_iter().map(|(a, b, why)| (key_ops[a].clone(), key_ops[b].clone(), why));
                    return SequentialVerdict::Violation(SequentialViolation {
                        key: key.to_string(),
                        cycle: cycle.collect(),
                    });
                }
                None => ops += graph.constrained,
            },
        }
    }
    SequentialVerdict::Consistent { keys: keys.len(), ops }
}

/// The start of the key, before every write: node 0.
const START: usize = 0;

/// One key's writes (node i + 1 is write `writes[i]`) and the order constraints between them.
struct Graph {
    nodes: usize,
    /// `from → to` (from comes first), with the two operations (indices into the key's operations) that made it
    /// and the guarantee it stands for.
    edges: Vec<(usize, usize, usize, usize, &'static str)>,
    constrained: usize,
}

/// Where an operation sits in the write order: the write it is, or the write it read from; `Free` when the
/// check leaves it out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pos {
    Write(usize),
    /// A write of unknown outcome that a read observed: after its process's earlier operations, and nothing
    /// more.
    Late(usize),
    Read(usize),
    Free,
}

impl Graph {
    fn build(ops: &[&Op]) -> Result<Graph, String> {
        let took_effect = |op: &Op| op.ok == Some(true) || (op.ok.is_none() && written(op).is_some());
        let mut by_value: HashMap<&str, usize> = HashMap::new();
        let mut node_of = vec![None; ops.len()];
        let mut nodes = 1;
        let mut deletes = false;
        for (i, op) in ops.iter().enumerate().filter(|(_, op)| took_effect(op)) {
            match written(op) {
                Some(Some(value)) => {
                    if by_value.insert(value, nodes).is_some() {
                        return Err(format!("the value {value:?} is written twice"));
                    }
                    node_of[i] = Some(nodes);
                    nodes += 1;
                }
                Some(None) => {
                    deletes = true;
                    node_of[i] = Some(nodes);
                    nodes += 1;
                }
                None => {}
            }
        }
        let read_node = |value: Option<&str>| match value {
            Some(v) => by_value.get(v).copied(),
            None if deletes => None,
            None => Some(START),
        };
        let observed_values: HashSet<&str> =
            ops.iter().filter(|op| op.ok == Some(true)).filter_map(|op| observed(op).flatten()).collect();
        let seen = |op: &Op| op.value.as_deref().is_some_and(|v| observed_values.contains(v));
        let pos = |(i, op): (usize, &&Op)| -> Pos {
            match (op.op, op.ok) {
                (OpKind::Get, Some(true)) => read_node(op.value.as_deref()).map_or(Pos::Free, Pos::Read),
                (OpKind::Put | OpKind::Delete | OpKind::Cas, Some(true)) => node_of[i].map_or(Pos::Free, Pos::Write),
                (OpKind::Put | OpKind::Cas, None) if seen(op) => node_of[i].map_or(Pos::Free, Pos::Late),
                _ => Pos::Free,
            }
        };
        let positions: Vec<Pos> = ops.iter().enumerate().map(pos).collect();
        // A cas that applied is first a read of the value it expected.
        let expected =
            |op: &&Op| (op.op == OpKind::Cas && op.ok == Some(true)).then(|| read_node(op.expected.as_deref()));
        let expects: Vec<Option<usize>> = ops.iter().map(|op| expected(op).flatten()).collect();
        let mut graph = Graph { nodes, edges: Vec::new(), constrained: 0 };
        // The start precedes every write.
        (1..nodes).for_each(|n| graph.edges.push((START, n, usize::MAX, usize::MAX, "the start of the key")));
        let mut processes: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        for (i, op) in ops.iter().enumerate() {
            processes.entry(op.process).or_default().push(i);
        }
        for order in processes.values_mut() {
            order.sort_by_key(|&i| (ops[i].invoke_ns, i));
            graph.constrain(order, &positions, &expects);
        }
        Ok(graph)
    }

    /// Adds the constraints of one process's operations, in its `order`, given where each operation sits
    /// (`positions`) and, for a cas that applied, the write it expected (`expects`).
    fn constrain(&mut self, order: &[usize], positions: &[Pos], expects: &[Option<usize>]) {
        // The last operation that bounds what follows: its index, the node it sits at, and whether it wrote.
        let mut last: Option<(usize, usize, bool)> = None;
        for &i in order {
            if let Some(n) = expects[i] {
                self.link(last, i, n, false);
                last = Some((i, n, false));
            }
            let (n, strict, bounds) = match positions[i] {
                Pos::Free => continue,
                Pos::Late(n) => (n, true, false),
                Pos::Write(n) => (n, true, true),
                Pos::Read(n) => (n, false, true),
            };
            self.link(last, i, n, strict);
            self.constrained += 1;
            if bounds {
                last = Some((i, n, strict));
            }
        }
    }

    /// `last`'s node must come before `n` (operation `i`'s), or be it when not `strict`.
    fn link(&mut self, last: Option<(usize, usize, bool)>, i: usize, n: usize, strict: bool) {
        let Some((j, m, wrote)) = last else { return };
        if m == n && !strict {
            return;
        }
        let why = match (wrote, strict) {
            (_, true) => "program order: a write comes after what its process did before",
            (true, false) => "read your writes",
            (false, false) => "monotonic reads",
        };
        self.edges.push((m, n, j, i, why));
    }

    /// A cycle of constraints, as (earlier operation, later operation, guarantee) around it, if there is one.
    fn cycle(&self) -> Option<Vec<(usize, usize, &'static str)>> {
        let mut out: Vec<Vec<usize>> = vec![Vec::new(); self.nodes];
        for (e, &(from, ..)) in self.edges.iter().enumerate() {
            out[from].push(e);
        }
        // Iterative depth-first search; `state` 1 = on the stack, 2 = done.
        let mut state = vec![0u8; self.nodes];
        for root in 0..self.nodes {
            if state[root] != 0 {
                continue;
            }
            let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
            let mut via: Vec<usize> = Vec::new();
            state[root] = 1;
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                let Some(&e) = out[node].get(*next) else {
                    state[node] = 2;
                    stack.pop();
                    via.pop();
                    continue;
                };
                *next += 1;
                let to = self.edges[e].1;
                match state[to] {
                    0 => {
                        state[to] = 1;
                        stack.push((to, 0));
                        via.push(e);
                    }
                    1 => {
                        let start = stack.iter().position(|&(n, _)| n == to).expect("on the stack");
                        let mut cycle: Vec<usize> = via[start..].to_vec();
                        cycle.push(e);
                        return Some(self.describe(&cycle));
                    }
                    _ => {}
                }
            }
        }
        None
    }

    /// The operations behind a cycle's edges, leaving out the start's edges (which no process made).
    fn describe(&self, cycle: &[usize]) -> Vec<(usize, usize, &'static str)> {
        let made = cycle.iter().map(|&e| self.edges[e]).filter(|&(.., a, _, _)| a != usize::MAX);
        made.map(|(_, _, a, b, why)| (a, b, why)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(process: u64, kind: OpKind, value: Option<&str>, at: u64) -> Op {
        Op {
            process,
            op: kind,
            key: "k".into(),
            value: value.map(Into::into),
            expected: None,
            ok: Some(true),
            invoke_ns: at,
            complete_ns: Some(at + 1),
        }
    }

    fn put(p: u64, v: &str, at: u64) -> Op {
        op(p, OpKind::Put, Some(v), at)
    }

    fn get(p: u64, v: Option<&str>, at: u64) -> Op {
        op(p, OpKind::Get, v, at)
    }

    fn verdict(ops: Vec<Op>) -> SequentialVerdict {
        check_sequential(&History { ops })
    }

    /// A stale read that linearizability forbids: process 2 reads the old value after process 1 read the new
    /// one, in real time. Each process alone sees the writes in order, so one order fits both.
    #[test]
    fn a_stale_read_in_real_time_is_sequentially_consistent() {
        let ops = vec![put(1, "a", 0), put(1, "b", 10), get(1, Some("b"), 20), get(2, Some("a"), 30)];
        assert!(verdict(ops).is_consistent());
    }

    #[test]
    fn reading_back_in_time_breaks_monotonic_reads() {
        let ops = vec![put(1, "a", 0), put(1, "b", 10), get(2, Some("b"), 20), get(2, Some("a"), 30)];
        let SequentialVerdict::Violation(v) = verdict(ops) else { panic!("not caught") };
        assert!(v.cycle.iter().any(|(.., why)| *why == "monotonic reads"), "{v}");
        assert!(v.to_string().contains("program order"), "{v}");
    }

    #[test]
    fn missing_ones_own_write_breaks_read_your_writes() {
        // Reading another's write after one's own is fine when that write may come later...
        assert!(verdict(vec![put(1, "a", 0), put(2, "b", 10), get(2, Some("a"), 20)]).is_consistent());
        // ...but not when the process had read it before its own write.
        let ops = vec![put(1, "a", 0), get(2, Some("a"), 5), put(2, "b", 10), get(2, Some("a"), 20)];
        let SequentialVerdict::Violation(v) = verdict(ops) else { panic!("not caught") };
        assert!(v.cycle.iter().any(|(.., why)| *why == "read your writes"), "{v}");
    }

    /// Two processes that each see the other's write last disagree on the order of the two writes.
    #[test]
    fn two_processes_that_see_the_writes_in_opposite_orders_have_no_order() {
        let ops = vec![
            put(1, "a", 0),
            put(2, "b", 0),
            get(3, Some("a"), 10),
            get(3, Some("b"), 20),
            get(4, Some("b"), 10),
            get(4, Some("a"), 20),
        ];
        assert!(matches!(verdict(ops), SequentialVerdict::Violation(_)));
    }

    #[test]
    fn a_read_of_absent_after_a_value_goes_back_to_the_start() {
        let ops = vec![put(1, "a", 0), get(2, Some("a"), 10), get(2, None, 20)];
        assert!(matches!(verdict(ops), SequentialVerdict::Violation(_)));
        let deleted = vec![put(1, "a", 0), op(1, OpKind::Delete, None, 5), get(2, Some("a"), 10), get(2, None, 20)];
        assert!(verdict(deleted).is_consistent(), "a delete may be what it read");
    }

    /// A write whose outcome is unknown may land after its process moved on: reading an older value later is no
    /// violation, but once some read saw it, its process's earlier reads bound it.
    #[test]
    fn a_write_of_unknown_outcome_binds_only_what_came_before_it() {
        let mut late = put(1, "b", 10);
        (late.ok, late.complete_ns) = (None, None);
        let ops = vec![put(1, "a", 0), late.clone(), get(1, Some("a"), 20), get(2, Some("b"), 30)];
        assert!(verdict(ops).is_consistent());
        let ops = vec![put(2, "c", 0), get(1, Some("c"), 5), late, get(3, Some("c"), 40), get(3, Some("b"), 50)];
        assert!(verdict(ops).is_consistent());
    }

    #[test]
    fn a_value_written_twice_is_inconclusive() {
        let ops = vec![put(1, "a", 0), put(2, "a", 5), get(3, Some("a"), 10)];
        assert!(matches!(verdict(ops), SequentialVerdict::Inconclusive { .. }));
    }
}
