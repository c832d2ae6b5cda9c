//! The JSON-lines format and the recorder.

mod common;

use common::{cas, delete, failed, get, history, put, unknown};
use meridian_check::{History, HistoryError, OpKind, Recorder};

fn read(text: &str) -> Result<History, HistoryError> {
    History::read_jsonl(text.as_bytes())
}

fn error(text: &str) -> String {
    read(text).expect_err("malformed history accepted").to_string()
}

const PUT: &str = r#"{"process":1,"op":"put","key":"k","value":"a","ok":true,"invoke_ns":10,"complete_ns":20}"#;

#[test]
fn round_trips_every_kind_of_operation() {
    let original = history(vec![
        put(1, "k", "a", (10, 20)),
        get(2, "k", None, (5, 25)),
        delete(3, "k", (30, 40)),
        cas(1, "k", Some("a"), "b", true, (50, 60)),
        cas(1, "k", None, "c", false, (70, 80)),
        unknown(put(4, "other key", "quote \" and\nnewline", (90, 90))),
        failed(put(5, "k", "d", (100, 110))),
    ]);
    let mut bytes = Vec::new();
    original.write_jsonl(&mut bytes).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    assert_eq!(text.lines().count(), original.ops.len());
    assert_eq!(text.lines().next(), Some(PUT));
    assert_eq!(read(&text).unwrap(), original);
}

#[test]
fn writes_expected_only_for_cas() {
    let mut bytes = Vec::new();
    history(vec![put(1, "k", "a", (1, 2)), cas(1, "k", Some("a"), "b", true, (3, 4))]).write_jsonl(&mut bytes).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(!lines[0].contains("expected"), "{}", lines[0]);
    assert_eq!(
        lines[1],
        r#"{"process":1,"op":"cas","key":"k","value":"b","expected":"a","ok":true,"invoke_ns":3,"complete_ns":4}"#
    );
}

#[test]
fn reads_unknown_outcomes_and_skips_blank_lines() {
    let text = format!(
        "{PUT}\n\n{}\n",
        r#"{"process":2,"op":"delete","key":"k","value":null,"ok":null,"invoke_ns":30,"complete_ns":null}"#
    );
    let parsed = read(&text).unwrap();
    assert_eq!(parsed, history(vec![put(1, "k", "a", (10, 20)), unknown(delete(2, "k", (30, 30)))]));
}

#[test]
fn rejects_invalid_json_naming_the_line() {
    let message = error(&format!("{PUT}\n{{\"process\":1,"));
    assert!(message.starts_with("line 2, column "), "{message}");
    assert!(message.contains("EOF"), "{message}");
}

#[test]
fn rejects_unknown_operation_kind() {
    let message = error(&PUT.replace("\"put\"", "\"increment\""));
    assert!(message.starts_with("line 1, column "), "{message}");
    assert!(message.contains("unknown variant `increment`"), "{message}");
}

#[test]
fn rejects_missing_and_unknown_fields() {
    let missing_ok = error(&PUT.replace(r#""ok":true,"#, ""));
    assert!(missing_ok.contains("missing field `ok`"), "{missing_ok}");
    let missing_value = error(&PUT.replace(r#""value":"a","#, ""));
    assert!(missing_value.contains("missing field `value`"), "{missing_value}");
    let extra = error(&PUT.replace(r#""ok":true"#, r#""ok":true,"okay":true"#));
    assert!(extra.contains("unknown field `okay`"), "{extra}");
}

#[test]
fn rejects_completion_before_invocation() {
    let message = error(&format!("{PUT}\n{PUT}\n{}", PUT.replace(r#""complete_ns":20"#, r#""complete_ns":5"#)));
    assert_eq!(message, "line 3: complete_ns 5 is before invoke_ns 10");
}

#[test]
fn rejects_known_outcome_without_completion() {
    let message = error(&PUT.replace(r#""complete_ns":20"#, r#""complete_ns":null"#));
    assert_eq!(message, "line 1: ok is true but complete_ns is null; a known outcome needs a completion time");
}

#[test]
fn rejects_unknown_outcome_with_completion() {
    let message = error(&PUT.replace(r#""ok":true"#, r#""ok":null"#));
    assert!(message.starts_with("line 1: ok is null (outcome unknown) but complete_ns is 20"), "{message}");
}

#[test]
fn rejects_values_that_do_not_fit_the_kind() {
    let valueless_put = error(&PUT.replace(r#""value":"a""#, r#""value":null"#));
    assert_eq!(valueless_put, "line 1: put has value null; a put must write a value");
    let valued_delete = error(&PUT.replace("\"put\"", "\"delete\""));
    assert_eq!(valued_delete, "line 1: delete has a value; a delete's value must be null");
    let expecting_get = error(&PUT.replace("\"put\"", "\"get\"").replace(r#""ok""#, r#""expected":"z","ok""#));
    assert_eq!(expecting_get, "line 1: get has an \"expected\" field; only cas takes one");
}

#[test]
fn recorder_records_outcomes_and_leaves_pending_operations_unknown() {
    let mut recorder = Recorder::new();
    let write = recorder.invoke(1, OpKind::Put, "k", Some("a".to_string()), None, 10);
    let read = recorder.invoke(2, OpKind::Get, "k", None, None, 12);
    let swap = recorder.invoke(3, OpKind::Cas, "k", Some("b".to_string()), Some("a".to_string()), 14);
    let lost = recorder.invoke(4, OpKind::Delete, "k", None, None, 16);
    let pending = recorder.invoke(5, OpKind::Put, "k", Some("c".to_string()), None, 18);
    recorder.complete(read, Some(true), Some("a".to_string()), 22);
    recorder.complete(write, Some(true), None, 20);
    recorder.complete(swap, Some(false), None, 24);
    recorder.complete(lost, None, None, 26);
    assert_eq!(pending, 4);
    let expected = history(vec![
        put(1, "k", "a", (10, 20)),
        get(2, "k", Some("a"), (12, 22)),
        cas(3, "k", Some("a"), "b", false, (14, 24)),
        unknown(delete(4, "k", (16, 16))),
        unknown(put(5, "k", "c", (18, 18))),
    ]);
    assert_eq!(recorder.finish(), expected);
}

#[test]
#[should_panic(expected = "operation 0 completed twice")]
fn recorder_rejects_double_completion() {
    let mut recorder = Recorder::new();
    let op = recorder.invoke(1, OpKind::Get, "k", None, None, 10);
    recorder.complete(op, Some(true), None, 20);
    recorder.complete(op, Some(true), None, 30);
}
