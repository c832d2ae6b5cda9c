//! `--log-format json`: every line a node writes to stderr is one JSON object a log collector can parse.

mod support;

#[test]
fn json_logs_are_one_object_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::Server::single(dir.path(), &["--log-format", "json"]);
    let log = server.log();
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "the node logged nothing");
    for line in &lines {
        let event: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(event["level"].is_string() && event["fields"].is_object(), "{line}");
    }
    assert!(lines.iter().any(|l| l.contains("\"serving\"")), "the start-up line is there: {log}");
}
