//! Hand-written histories the checker must accept or reject.

mod common;

use common::{cas, delete, failed, get, history, put, unknown};
use meridian_check::{check, Budget, Op, Verdict};

fn verdict(ops: Vec<Op>) -> Verdict {
    check(&history(ops), Budget::default())
}

fn assert_accepts(ops: Vec<Op>) {
    let verdict = verdict(ops);
    assert!(verdict.is_linearizable(), "expected linearizable, got {verdict}");
}

fn assert_rejects(ops: Vec<Op>) {
    let verdict = verdict(ops);
    assert!(matches!(verdict, Verdict::Violation(_)), "expected a violation, got {verdict}");
}

#[test]
fn empty_history_is_linearizable() {
    assert_eq!(verdict(vec![]), Verdict::Linearizable { keys: 0, ops: 0 });
}

#[test]
fn accepts_sequential_history_on_several_keys() {
    let ops = vec![
        get(1, "x", None, (0, 1)),
        put(1, "x", "a", (2, 3)),
        put(2, "y", "b", (2, 3)),
        get(2, "x", Some("a"), (4, 5)),
        put(1, "x", "c", (6, 7)),
        get(2, "x", Some("c"), (8, 9)),
        delete(1, "x", (10, 11)),
        get(2, "x", None, (12, 13)),
        get(1, "y", Some("b"), (14, 15)),
    ];
    assert_eq!(verdict(ops), Verdict::Linearizable { keys: 2, ops: 9 });
}

#[test]
fn get_overlapping_a_put_may_see_either_value() {
    let before = || vec![put(1, "x", "a", (0, 10)), put(1, "x", "b", (20, 40))];
    assert_accepts([before(), vec![get(2, "x", Some("a"), (25, 35))]].concat());
    assert_accepts([before(), vec![get(2, "x", Some("b"), (25, 35))]].concat());
}

#[test]
fn concurrent_puts_may_take_effect_in_either_order() {
    let puts = || vec![put(1, "x", "a", (0, 10)), put(2, "x", "b", (0, 10))];
    assert_accepts([puts(), vec![get(3, "x", Some("a"), (11, 12)), get(3, "x", Some("a"), (13, 14))]].concat());
    assert_accepts([puts(), vec![get(3, "x", Some("b"), (11, 12)), get(3, "x", Some("b"), (13, 14))]].concat());
}

#[test]
fn rejects_reads_that_flip_after_concurrent_puts_completed() {
    let ops = vec![
        put(1, "x", "a", (0, 10)),
        put(2, "x", "b", (0, 10)),
        get(3, "x", Some("a"), (11, 12)),
        get(3, "x", Some("b"), (13, 14)),
    ];
    assert_rejects(ops);
}

#[test]
fn equal_times_count_as_concurrent() {
    assert_accepts(vec![put(1, "x", "a", (0, 10)), get(2, "x", None, (10, 20))]);
    assert_rejects(vec![put(1, "x", "a", (0, 10)), get(2, "x", None, (11, 20))]);
}

#[test]
fn accepts_unknown_write_that_takes_effect_later() {
    let ops = vec![
        unknown(put(1, "x", "a", (0, 0))),
        get(2, "x", None, (100, 110)),
        get(2, "x", Some("a"), (1_000, 1_010)),
        get(2, "x", Some("a"), (2_000, 2_010)),
    ];
    assert_accepts(ops);
}

#[test]
fn accepts_unknown_writes_that_never_take_effect() {
    let ops = vec![
        put(1, "x", "a", (0, 10)),
        unknown(put(2, "x", "b", (20, 20))),
        unknown(delete(3, "x", (20, 20))),
        get(1, "x", Some("a"), (30, 40)),
    ];
    assert_accepts(ops);
}

#[test]
fn unknown_write_cannot_be_undone() {
    let ops = vec![unknown(put(1, "x", "a", (0, 0))), get(2, "x", Some("a"), (10, 20)), get(2, "x", None, (30, 40))];
    assert_rejects(ops);
}

#[test]
fn unknown_delete_takes_effect_at_most_once() {
    let prefix = || vec![put(1, "x", "a", (0, 10)), unknown(delete(1, "x", (20, 20)))];
    assert_accepts([prefix(), vec![get(2, "x", Some("a"), (30, 40)), get(2, "x", None, (50, 60))]].concat());
    let flip_back = vec![get(2, "x", None, (30, 40)), get(2, "x", Some("a"), (50, 60))];
    assert_rejects([prefix(), flip_back].concat());
}

#[test]
fn unknown_cas_that_never_applied_is_accepted_even_when_it_could_not_apply_at_the_end() {
    let ops = vec![
        put(1, "x", "a", (0, 10)),
        unknown(cas(2, "x", Some("a"), "b", true, (20, 20))),
        put(1, "x", "c", (30, 40)),
        get(1, "x", Some("c"), (50, 60)),
    ];
    assert_accepts(ops);
}

#[test]
fn unknown_cas_applies_only_where_its_expected_value_is_current() {
    let prefix = || vec![put(1, "x", "a", (0, 10)), unknown(cas(2, "x", Some("a"), "b", true, (20, 20)))];
    assert_accepts([prefix(), vec![get(1, "x", Some("a"), (30, 40)), get(1, "x", Some("b"), (50, 60))]].concat());
    let after_overwrite = vec![put(1, "x", "c", (30, 40)), get(1, "x", Some("b"), (50, 60))];
    assert_rejects([prefix(), after_overwrite].concat());
}

#[test]
fn unknown_get_is_ignored() {
    assert_accepts(vec![put(1, "x", "a", (0, 10)), unknown(get(2, "x", Some("never written"), (20, 30)))]);
}

#[test]
fn rejects_stale_read() {
    let ops = vec![put(1, "x", "a", (0, 10)), put(1, "x", "b", (20, 30)), get(2, "x", Some("a"), (40, 50))];
    assert_rejects(ops);
}

#[test]
fn rejects_lost_write() {
    let ops = vec![
        put(1, "x", "a", (0, 10)),
        get(2, "x", Some("a"), (15, 18)),
        put(1, "x", "b", (20, 30)),
        get(2, "x", Some("a"), (40, 50)),
        get(3, "x", Some("a"), (60, 70)),
    ];
    assert_rejects(ops);
}

#[test]
fn rejects_value_never_written() {
    assert_rejects(vec![put(1, "x", "a", (0, 10)), get(2, "x", Some("z"), (5, 15))]);
    assert_rejects(vec![get(2, "x", Some("z"), (5, 15))]);
}

#[test]
fn failed_write_has_no_effect() {
    let prefix = || vec![put(1, "x", "a", (0, 10)), failed(put(1, "x", "b", (20, 30)))];
    assert_accepts([prefix(), vec![get(2, "x", Some("a"), (40, 50))]].concat());
    assert_rejects([prefix(), vec![get(2, "x", Some("b"), (40, 50))]].concat());
}

#[test]
fn cas_applies_only_when_expected_value_is_current() {
    assert_accepts(vec![cas(1, "x", None, "a", true, (0, 10)), get(2, "x", Some("a"), (20, 30))]);
    assert_accepts(vec![
        put(1, "x", "a", (0, 10)),
        cas(1, "x", Some("a"), "b", true, (20, 30)),
        get(2, "x", Some("b"), (40, 50)),
    ]);
    assert_rejects(vec![put(1, "x", "a", (0, 10)), cas(1, "x", Some("z"), "b", true, (20, 30))]);
    assert_rejects(vec![cas(1, "x", Some("a"), "b", true, (0, 10))]);
}

#[test]
fn failed_cas_is_ignored() {
    let ops = vec![
        put(1, "x", "a", (0, 10)),
        cas(1, "x", Some("z"), "b", false, (20, 30)),
        cas(1, "x", Some("a"), "c", false, (40, 50)),
        get(2, "x", Some("a"), (60, 70)),
    ];
    assert_accepts(ops);
}

#[test]
fn rejects_read_of_old_value_after_cas_completed() {
    let ops =
        vec![put(1, "x", "a", (0, 10)), cas(1, "x", Some("a"), "b", true, (20, 30)), get(2, "x", Some("a"), (40, 50))];
    assert_rejects(ops);
}

#[test]
fn concurrent_cas_operations_on_the_same_value_cannot_both_apply() {
    let ops = vec![
        put(1, "x", "a", (0, 10)),
        cas(1, "x", Some("a"), "b", true, (20, 30)),
        cas(2, "x", Some("a"), "c", true, (20, 30)),
    ];
    assert_rejects(ops);
}

#[test]
fn keys_are_independent() {
    let ops = vec![
        put(1, "x", "a", (0, 10)),
        put(1, "y", "b", (20, 30)),
        get(2, "y", Some("b"), (40, 50)),
        get(2, "x", Some("a"), (40, 50)),
    ];
    assert_accepts(ops);
}

#[test]
fn reports_the_violating_key() {
    let ops = vec![
        put(1, "a", "1", (0, 10)),
        get(1, "a", Some("1"), (20, 30)),
        put(1, "b", "1", (0, 10)),
        get(1, "b", Some("2"), (20, 30)),
    ];
    let Verdict::Violation(counterexample) = verdict(ops) else { panic!("expected a violation") };
    assert_eq!(counterexample.key, "b");
}

#[test]
fn malformed_operation_makes_the_check_inconclusive() {
    let mut backwards = put(1, "x", "a", (10, 10));
    backwards.complete_ns = Some(5);
    let Verdict::Inconclusive { key, reason } = verdict(vec![backwards]) else { panic!("expected inconclusive") };
    assert_eq!(key, "x");
    assert!(reason.contains("complete_ns 5 is before invoke_ns 10"), "{reason}");
}

#[test]
fn exhausted_budget_is_inconclusive_not_linearizable() {
    let ops = vec![put(1, "x", "a", (0, 10)), get(2, "x", Some("a"), (20, 30)), put(3, "y", "b", (0, 10))];
    let verdict = check(&history(ops), Budget { states_per_key: 1, shrink_states: 1 });
    let Verdict::Inconclusive { key, reason } = verdict else { panic!("expected inconclusive, got {verdict}") };
    assert_eq!(key, "x");
    assert!(reason.contains("exceeded 1 states"), "{reason}");
}
