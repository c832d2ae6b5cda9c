//! Shared test helpers: operation builders, a splitmix64 PRNG, and a generator of histories produced by a real
//! linearizable register under random concurrent timing.

#![allow(dead_code)] // Each test binary uses a different subset of these helpers.

use meridian_check::{History, Op, OpKind};
use std::collections::HashMap;

/// A deterministic PRNG (splitmix64), so failures reproduce from the seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[low, high]`.
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.next_u64() % (high - low + 1)
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.range(1, 100) <= percent
    }
}

pub fn op(process: u64, kind: OpKind, key: &str, value: Option<&str>, ok: Option<bool>, span: (u64, u64)) -> Op {
    Op {
        process,
        op: kind,
        key: key.to_string(),
        value: value.map(str::to_string),
        expected: None,
        ok,
        invoke_ns: span.0,
        complete_ns: ok.map(|_| span.1),
    }
}

pub fn put(process: u64, key: &str, value: &str, span: (u64, u64)) -> Op {
    op(process, OpKind::Put, key, Some(value), Some(true), span)
}

pub fn get(process: u64, key: &str, value: Option<&str>, span: (u64, u64)) -> Op {
    op(process, OpKind::Get, key, value, Some(true), span)
}

pub fn delete(process: u64, key: &str, span: (u64, u64)) -> Op {
    op(process, OpKind::Delete, key, None, Some(true), span)
}

pub fn cas(process: u64, key: &str, expected: Option<&str>, new: &str, ok: bool, span: (u64, u64)) -> Op {
    Op { expected: expected.map(str::to_string), ..op(process, OpKind::Cas, key, Some(new), Some(ok), span) }
}

/// The same operation with an unknown outcome.
pub fn unknown(op: Op) -> Op {
    Op { ok: None, complete_ns: None, ..op }
}

/// The same operation reported as certainly not taking effect.
pub fn failed(op: Op) -> Op {
    Op { ok: Some(false), ..op }
}

pub fn history(ops: Vec<Op>) -> History {
    History { ops }
}

/// Shape of a generated history.
#[derive(Clone, Copy)]
pub struct Shape {
    pub processes: u64,
    pub ops_per_process: usize,
    pub keys: usize,
}

/// A history from a linearizable register: every operation that takes effect does so at a random instant within
/// its interval (unknown writes: at a random later instant, or never), in that order, on a real register.
pub fn linearizable_history(rng: &mut Rng, shape: Shape) -> History {
    let mut planned = Vec::new();
    let mut writes_per_key: HashMap<String, Vec<String>> = HashMap::new();
    for process in 0..shape.processes {
        let mut now = rng.range(0, 1_000);
        for _ in 0..shape.ops_per_process {
            let plan = plan_op(rng, process, now, shape.keys, &mut writes_per_key, planned.len());
            now = plan.op.complete_ns.unwrap_or(plan.op.invoke_ns + 500_000) + rng.range(0, 20_000);
            planned.push(plan);
        }
    }
    execute(&mut planned);
    History { ops: planned.into_iter().map(|plan| plan.op).collect() }
}

/// An operation and the instant it takes effect, if it does.
struct Planned {
    op: Op,
    effect_ns: Option<u64>,
}

fn plan_op(
    rng: &mut Rng,
    process: u64,
    now: u64,
    keys: usize,
    writes_per_key: &mut HashMap<String, Vec<String>>,
    serial: usize,
) -> Planned {
    let key = format!("k{}", rng.range(0, keys as u64 - 1));
    let invoke = now;
    let complete = invoke + rng.range(1, 100_000);
    let kind = match rng.range(1, 100) {
        1..=35 => OpKind::Put,
        36..=75 => OpKind::Get,
        76..=83 => OpKind::Delete,
        _ => OpKind::Cas,
    };
    let written = writes_per_key.entry(key.clone()).or_default();
    let value = matches!(kind, OpKind::Put | OpKind::Cas).then(|| format!("v{serial}"));
    let expected = (kind == OpKind::Cas).then(|| pick_expected(rng, written)).flatten();
    written.extend(value.clone());
    let mut op =
        Op { process, op: kind, key, value, expected, ok: Some(true), invoke_ns: invoke, complete_ns: Some(complete) };
    let effect_ns = match rng.range(1, 100) {
        1..=85 => Some(rng.range(invoke, complete)),
        86..=90 => {
            op.ok = Some(false);
            None
        }
        _ => {
            op.ok = None;
            op.complete_ns = None;
            rng.chance(50).then(|| invoke + rng.range(0, 1_000_000))
        }
    };
    Planned { op, effect_ns }
}

/// A recent value of the key, or absent, so a fair share of cas operations apply.
fn pick_expected(rng: &mut Rng, written: &[String]) -> Option<String> {
    if written.is_empty() || rng.chance(20) {
        return None;
    }
    let back = rng.range(1, written.len().min(3) as u64) as usize;
    Some(written[written.len() - back].clone())
}

/// Runs the operations that take effect in effect order on a real register, filling in results.
fn execute(planned: &mut [Planned]) {
    let mut order: Vec<usize> = (0..planned.len()).filter(|&i| planned[i].effect_ns.is_some()).collect();
    order.sort_by_key(|&i| (planned[i].effect_ns, i));
    let mut register: HashMap<String, Option<String>> = HashMap::new();
    for i in order {
        let op = &mut planned[i].op;
        let current = register.entry(op.key.clone()).or_default();
        match op.op {
            OpKind::Put => *current = op.value.clone(),
            OpKind::Delete => *current = None,
            OpKind::Get => op.value = current.clone(),
            // Not generated: the search leaves present reads out (`staleness.rs` judges them).
            OpKind::Present => {}
            OpKind::Cas if *current == op.expected => *current = op.value.clone(),
            // A cas that finds another value fails; an unknown one simply stays unknown.
            OpKind::Cas => op.ok = op.ok.map(|_| false),
        }
    }
    for plan in planned.iter_mut().filter(|plan| plan.op.op == OpKind::Get && plan.effect_ns.is_none()) {
        plan.op.value = None;
    }
}

/// Adds a get that returns a value after a later write to its key has completed, which no register allows.
/// Returns the planted get, or `None` if the history has no two writes in real-time order on one key.
pub fn plant_stale_read(history: &mut History, rng: &mut Rng) -> Option<Op> {
    let (first, second) = stale_pair(history, rng)?;
    let overwritten = &history.ops[first];
    let after = history.ops[second].complete_ns.expect("a completed write");
    let stale = get(1_000_000, &overwritten.key, overwritten.value.as_deref(), (after + 1, after + 1_000));
    history.ops.push(stale.clone());
    Some(stale)
}

/// A completed write of a value, and a completed write to the same key invoked after the first completed.
fn stale_pair(history: &History, rng: &mut Rng) -> Option<(usize, usize)> {
    let completed_write = |op: &Op| op.ok == Some(true) && op.op != OpKind::Get;
    let seconds: Vec<usize> = (0..history.ops.len()).filter(|&i| completed_write(&history.ops[i])).collect();
    let offset = rng.next_u64() as usize;
    (0..seconds.len()).map(|n| seconds[(offset + n) % seconds.len()]).find_map(|second| {
        let later = &history.ops[second];
        let firsts: Vec<usize> = (0..history.ops.len())
            .filter(|&i| {
                let op = &history.ops[i];
                completed_write(op)
                    && op.value.is_some()
                    && op.key == later.key
                    && op.complete_ns < Some(later.invoke_ns)
            })
            .collect();
        (!firsts.is_empty()).then(|| (firsts[rng.range(0, firsts.len() as u64 - 1) as usize], second))
    })
}
