//! Shrinking violations to the few operations involved, and how counterexamples read.

mod common;

use common::{delete, get, history, linearizable_history, put, Rng, Shape};
use meridian_check::{check, Budget, Counterexample, History, Op, Verdict};

fn counterexample(history: &History) -> Counterexample {
    match check(history, Budget::default()) {
        Verdict::Violation(counterexample) => counterexample,
        other => panic!("expected a violation, got {other}"),
    }
}

#[test]
fn planted_stale_read_among_unrelated_operations_shrinks_to_the_operations_involved() {
    for seed in 0..20 {
        let mut rng = Rng::new(seed);
        let mut planted = linearizable_history(&mut rng, Shape { processes: 5, ops_per_process: 40, keys: 3 });
        // In the middle of the history, so that unrelated operations on the same key overlap the planted ones.
        let mid = planted.ops[planted.ops.len() / 2].invoke_ns;
        let stale = get(9, "k0", Some("old"), (mid + 50, mid + 60));
        planted.ops.extend([put(7, "k0", "old", (mid + 10, mid + 20)), put(8, "k0", "new", (mid + 30, mid + 40))]);
        planted.ops.push(stale.clone());
        assert!(planted.ops.len() > 200);

        let counterexample = counterexample(&planted);
        assert_eq!(counterexample.key, "k0", "seed {seed}");
        assert!(counterexample.ops.len() <= 4, "seed {seed}: not shrunk:\n{counterexample}");
        assert!(counterexample.ops.contains(&stale), "seed {seed}: stale get missing:\n{counterexample}");
        assert!(counterexample.minimal, "seed {seed}");
    }
}

#[test]
fn stale_read_keeps_the_overwritten_write_and_the_overwriting_one() {
    let ops = vec![put(1, "x", "a", (0, 10)), put(1, "x", "b", (20, 30)), get(2, "x", Some("a"), (40, 50))];
    assert_eq!(counterexample(&history(ops.clone())).ops, ops);
}

#[test]
fn stale_read_of_an_absent_key_keeps_the_delete_it_could_have_read() {
    let ops = vec![
        put(1, "x", "a", (0, 10)),
        delete(2, "x", (20, 30)),
        get(3, "x", None, (40, 50)),
        put(1, "x", "b", (60, 70)),
        get(3, "x", None, (80, 90)),
    ];
    let shown = counterexample(&history(ops.clone())).ops;
    assert_eq!(shown, vec![ops[1].clone(), ops[3].clone(), ops[4].clone()]);
}

#[test]
fn value_nobody_wrote_shrinks_to_the_get_and_says_so() {
    let ops = vec![put(1, "x", "a", (0, 10)), get(2, "x", Some("a"), (20, 30)), get(2, "x", Some("zzz"), (40, 50))];
    let counterexample = counterexample(&history(ops));
    assert_eq!(counterexample.ops.len(), 1);
    assert_eq!(
        counterexample.explanation,
        "process 2's get returned \"zzz\", but no write of \"zzz\" on this key that could have taken effect began \
         before the get completed"
    );
}

#[test]
fn counterexample_is_sorted_by_invocation() {
    let ops: Vec<Op> = vec![get(2, "x", Some("a"), (40, 50)), put(1, "x", "b", (20, 30)), put(1, "x", "a", (0, 10))];
    let shown = counterexample(&history(ops));
    let invokes: Vec<u64> = shown.ops.iter().map(|op| op.invoke_ns).collect();
    assert_eq!(invokes, vec![0, 20, 40]);
}

#[test]
fn displays_one_line_per_operation_in_milliseconds() {
    let ops = vec![
        put(1, "x", "a", (0, 1_000_000)),
        put(1, "x", "b", (2_000_000, 3_500_000)),
        get(2, "x", Some("a"), (4_000_000, 4_250_100)),
    ];
    let expected = "\
key \"x\": 3 operations that are not linearizable
  process 1 put \"a\" ok=true [0.000 ms, 1.000 ms]
  process 1 put \"b\" ok=true [2.000 ms, 3.500 ms]
  process 2 get \"a\" ok=true [4.000 ms, 4.250 ms]
no order of these operations is consistent with a register and with real time; they include every write \
their reads could have read from, so the whole history is not linearizable either";
    assert_eq!(counterexample(&history(ops)).to_string(), expected);
}
