//! How stale reads are, for configurations that do not promise linearizability (seed 003 §5.3: reads from a
//! non-tail replica, asynchronous updates).
//!
//! A successful read of key k is **stale** when some write of k had been acknowledged before the read began, and
//! that write is certainly newer than every write the read's value could come from: the value's write completed
//! before the newer one was invoked. Its **staleness** is how long the newest such write had then been
//! acknowledged: `invoke(read) − complete(oldest newer write)`, the age of the news the read missed. A value no
//! write could have produced is reported separately: no configuration allows it.
//!
//! Values are matched to writes by equality, so writes should write distinct values (the simulator's do). A read
//! of "absent" may come from the initial state or from any delete invoked before the read completed; the most
//! recent candidate is taken, so such reads are judged generously. A present read may come from any write of a
//! value, judged the same way. Writes whose outcome is unknown may be the source of a value but never count as
//! newer news (they may never have happened).

use crate::dataflow::written;
use crate::history::{History, Op, OpKind};
use std::collections::BTreeMap;

/// What [`staleness`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Staleness {
    /// Successful reads judged.
    pub reads: usize,
    /// Of those, reads that missed an acknowledged newer write.
    pub stale: usize,
    /// The largest staleness of any read, in nanoseconds.
    pub max_ns: u64,
    /// Reads that returned a value no write of their key wrote, as `key=value`.
    pub invented: Vec<String>,
}

impl Staleness {
    /// The fraction of reads that were stale (0 when there were none).
    pub fn fraction(&self) -> f64 {
        if self.reads == 0 {
            0.0
        } else {
            self.stale as f64 / self.reads as f64
        }
    }
}

/// Several histories' figures together: reads and stale reads added up, the largest staleness of any.
impl std::iter::Sum for Staleness {
    fn sum<I: Iterator<Item = Staleness>>(iter: I) -> Staleness {
        iter.fold(Staleness::default(), |mut all, one| {
            all.reads += one.reads;
            all.stale += one.stale;
            all.max_ns = all.max_ns.max(one.max_ns);
            all.invented.extend(one.invented);
            all
        })
    }
}

/// Judges every successful read of `history` (see the module docs).
pub fn staleness(history: &History) -> Staleness {
    let mut found = Staleness::default();
    for (key, (writes, reads)) in by_key(history) {
        for read in reads {
            found.reads += 1;
            match source_completion(read, &writes) {
                None => found.invented.push(format!("{key}={}", shown(read))),
                Some(source_done) => {
                    if let Some(age) = missed(read, source_done, &writes) {
                        found.stale += 1;
                        found.max_ns = found.max_ns.max(age);
                    }
                }
            }
        }
    }
    found
}

/// The present reads of `history` that no linearization explains, each described: those no write of a value
/// could have produced, and those that missed an acknowledged delete which certainly followed every write of a
/// value begun before they completed. Sound but not complete: a present read that only some order of concurrent
/// operations rules out passes. [`crate::check`] leaves present reads out of its search (`prepare.rs` says why),
/// so a configuration that promises linearizability must also have none of these.
pub fn present_violations(history: &History) -> Vec<String> {
    let mut found = Vec::new();
    for (key, (writes, reads)) in by_key(history) {
        for read in reads.into_iter().filter(|read| read.op == OpKind::Present) {
            let at =
                format!("process {}'s present read of {key:?} at {} ns found it present", read.process, read.invoke_ns);
            match source_completion(read, &writes) {
                None => found.push(format!("{at}, but no write of a value began before it completed")),
                Some(source_done) => found.extend(missed(read, source_done, &writes).map(|age| {
                    format!("{at} {age} ns after a delete that followed every write of a value was acknowledged")
                })),
            }
        }
    }
    found
}

/// Each key's writes that may have taken effect, and its successful reads.
fn by_key(history: &History) -> BTreeMap<&str, (Vec<&Op>, Vec<&Op>)> {
    let mut keys: BTreeMap<&str, (Vec<&Op>, Vec<&Op>)> = BTreeMap::new();
    for op in history.ops.iter().filter(|o| o.ok != Some(false)) {
        let (writes, reads) = keys.entry(op.key.as_str()).or_default();
        match written(op) {
            Some(_) => writes.push(op),
            None if op.ok == Some(true) => reads.push(op),
            None => {}
        }
    }
    keys
}

/// When the write behind `read`'s value completed at the latest (`u64::MAX` if its outcome is unknown; 0 for the
/// initial state), or None if no write could have produced the value.
fn source_completion(read: &Op, writes: &[&Op]) -> Option<u64> {
    let done = |w: &Op| w.complete_ns.unwrap_or(u64::MAX);
    let read_done = read.complete_ns.unwrap_or(u64::MAX);
    if read.op == OpKind::Present {
        // Any write of a value begun by the read's completion (an equal instant counts as concurrent).
        return writes.iter().filter(|w| w.value.is_some() && w.invoke_ns <= read_done).map(|w| done(w)).max();
    }
    match &read.value {
        Some(v) => writes.iter().filter(|w| w.value.as_ref() == Some(v)).map(|w| done(w)).max(),
        // A delete, or a cas that deleted, invoked before the read completed; or the initial state.
        None => {
            writes.iter().filter(|w| w.value.is_none() && w.invoke_ns < read_done).map(|w| done(w)).max().or(Some(0))
        }
    }
}

/// What a read returned, as [`Staleness::invented`] lists it.
fn shown(read: &Op) -> &str {
    match (read.op, &read.value) {
        (OpKind::Present, _) => "(present)",
        (_, Some(value)) => value,
        (_, None) => "(absent)",
    }
}

/// How long the oldest acknowledged write certainly newer than the read's source had been acknowledged when
/// the read began, if there is one.
fn missed(read: &Op, source_done: u64, writes: &[&Op]) -> Option<u64> {
    writes
        .iter()
        .filter(|w| w.ok == Some(true) && w.invoke_ns > source_done)
        .filter_map(|w| w.complete_ns.filter(|&done| done < read.invoke_ns))
        .min()
        .map(|done| read.invoke_ns - done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(kind: OpKind, value: Option<&str>, ok: Option<bool>, invoke: u64, complete: Option<u64>) -> Op {
        Op {
            process: 0,
            op: kind,
            key: "k".into(),
            value: value.map(String::from),
            expected: None,
            ok,
            invoke_ns: invoke,
            complete_ns: complete,
        }
    }

    fn put(v: &str, invoke: u64, complete: u64) -> Op {
        op(OpKind::Put, Some(v), Some(true), invoke, Some(complete))
    }

    fn get(v: Option<&str>, invoke: u64, complete: u64) -> Op {
        op(OpKind::Get, v, Some(true), invoke, Some(complete))
    }

    fn judge(ops: Vec<Op>) -> Staleness {
        staleness(&History { ops })
    }

    #[test]
    fn fresh_reads_are_not_stale() {
        let s = judge(vec![put("a", 0, 10), get(Some("a"), 20, 30), put("b", 25, 40), get(Some("a"), 35, 45)]);
        assert_eq!((s.reads, s.stale, s.max_ns), (2, 0, 0), "a read concurrent with b may miss it");
    }

    #[test]
    fn a_read_that_misses_an_acknowledged_newer_write_is_stale_by_its_age() {
        let s = judge(vec![put("a", 0, 10), put("b", 20, 30), get(Some("a"), 100, 110), get(None, 50, 60)]);
        assert_eq!((s.reads, s.stale, s.max_ns), (2, 2, 70), "70 ns after b was acknowledged");
        assert!((s.fraction() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn unknown_writes_may_be_sources_but_are_never_news() {
        let unknown = op(OpKind::Put, Some("b"), None, 20, None);
        let s = judge(vec![put("a", 0, 10), unknown.clone(), get(Some("a"), 100, 110), get(Some("b"), 120, 130)]);
        assert_eq!((s.stale, s.invented.len()), (0, 0));
        let s = judge(vec![unknown, put("c", 200, 210), get(Some("b"), 300, 310)]);
        assert_eq!(s.stale, 0, "b's write may have taken effect after c");
    }

    #[test]
    fn absent_reads_follow_deletes_and_invented_values_are_reported() {
        let del = op(OpKind::Delete, None, Some(true), 20, Some(30));
        let s = judge(vec![put("a", 0, 10), del, get(None, 40, 50), get(Some("zz"), 60, 70)]);
        assert_eq!((s.reads, s.stale), (2, 0));
        assert_eq!(s.invented, vec!["k=zz".to_string()]);
    }

    fn present(invoke: u64, complete: u64) -> Op {
        op(OpKind::Present, None, Some(true), invoke, Some(complete))
    }

    fn delete(invoke: u64, complete: u64) -> Op {
        op(OpKind::Delete, None, Some(true), invoke, Some(complete))
    }

    #[test]
    fn a_present_read_after_an_acknowledged_delete_of_every_value_is_a_violation() {
        let late = History { ops: vec![put("a", 0, 10), delete(20, 30), present(40, 50)] };
        let found = present_violations(&late);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("10 ns after a delete"), "{found:?}");
        let none = History { ops: vec![present(0, 5)] };
        assert!(present_violations(&none)[0].contains("no write of a value"));
        let stale = staleness(&late);
        assert_eq!((stale.reads, stale.stale, stale.max_ns), (1, 1, 10));
    }

    #[test]
    fn present_reads_a_write_could_explain_pass() {
        let overlapping_delete = vec![put("a", 0, 10), delete(20, 45), present(40, 50)];
        let put_after_delete = vec![put("a", 0, 10), delete(20, 30), put("b", 35, 60), present(40, 50)];
        let unknown_put = vec![delete(0, 10), op(OpKind::Put, Some("b"), None, 15, None), present(40, 50)];
        for ops in [overlapping_delete, put_after_delete, unknown_put] {
            let history = History { ops };
            assert_eq!(present_violations(&history), Vec::<String>::new(), "{history:?}");
            assert_eq!(staleness(&history).stale, 0, "{history:?}");
        }
        let put_after_the_read = History { ops: vec![delete(0, 10), put("b", 60, 70), present(40, 50)] };
        assert_eq!(present_violations(&put_after_the_read).len(), 1, "a put begun after the read cannot explain it");
    }

    #[test]
    fn the_search_leaves_present_reads_out() {
        let history = History { ops: vec![put("a", 0, 10), delete(20, 30), present(40, 50), get(None, 60, 70)] };
        assert_eq!(crate::check(&history, crate::Budget::default()), crate::Verdict::Linearizable { keys: 1, ops: 3 });
    }
}
