//! `/metrics` on a real three-node cluster: it parses with the Prometheus project's own text-format parser
//! (python3-prometheus-client), counts exactly the commands a client ran, and agrees with INFO.

mod support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::resp::{Conn, Resp};
use support::{Cluster, Server};

/// Parses the exposition with `prometheus_client.parser` and prints every sample as JSON.
const PARSE: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
samples = []
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        samples.append({"family": family.name, "type": family.type, "name": s.name, "labels": s.labels, "value": s.value})
print(json.dumps(samples))
"#;

/// One scrape: every sample by name, each with its labels and value.
struct Scrape(Vec<Value>);

impl Scrape {
    fn of(server: &Server) -> Scrape {
        let text = server.http_get("/metrics");
        let mut python = Command::new(support::python_with("prometheus_client", "python3-prometheus-client"))
            .args(["-c", PARSE])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        python.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let out = python.wait_with_output().unwrap();
        assert!(out.status.success(), "the parser refused /metrics: {}\n{text}", String::from_utf8_lossy(&out.stderr));
        Scrape(serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap())
    }

    /// The samples of `name` whose labels include every pair of `labels`.
    fn values(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        let matches = |s: &Value| labels.iter().all(|(k, v)| s["labels"][*k] == *v);
        self.0.iter().filter(|s| s["name"] == name && matches(s)).map(|s| s["value"].as_f64().unwrap()).collect()
    }

    /// The one sample of `name` with `labels`.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let values = self.values(name, labels);
        assert_eq!(values.len(), 1, "{name}{labels:?}: {values:?}");
        values[0]
    }

    fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.values(name, labels).iter().sum()
    }

    fn family_type(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|s| s["name"] == name).and_then(|s| s["type"].as_str())
    }
}

/// INFO's `cmdstat_<name>` lines: each command's `calls`, `usec` and `failed_calls`.
fn commandstats(conn: &mut Conn) -> BTreeMap<String, BTreeMap<String, f64>> {
    let Resp::Bulk(Some(text)) = conn.cmd(&["INFO", "commandstats"]).unwrap() else { panic!("INFO is a bulk string") };
    String::from_utf8(text)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .map(|l| {
            let (name, fields) = l.split_once(':').unwrap();
            let fields = fields.split(',').map(|f| f.split_once('=').unwrap());
            (name.to_string(), fields.map(|(k, v)| (k.to_string(), v.parse().unwrap())).collect())
        })
        .collect()
}

#[test]
fn metrics_parse_count_what_clients_did_and_agree_with_info() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dir.path());
    let node = &cluster.servers[0];
    // Readiness checks ran GETs here already.
    let before = Scrape::of(node);
    let get_figure = |m: &Scrape, name: &str| {
        let get = [("command", "get")];
        m.value(name, &get) - before.value(name, &get)
    };
    let mut c = cluster.conn(0);
    for i in 0..40 {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), "v"]).unwrap(), Resp::Simple("OK".into()));
    }
    for i in 0..25 {
        assert!(matches!(c.cmd(&["GET", &format!("k{i}")]).unwrap(), Resp::Bulk(Some(_))));
    }
    assert!(matches!(c.cmd(&["HGET", "k0", "f"]).unwrap(), Resp::Error(e) if e.starts_with("WRONGTYPE")));
    assert!(matches!(c.cmd(&["GET"]).unwrap(), Resp::Error(_)));
    node.ctl(&["keyspace", "create", "sessions", "--replicas", "mem,mem"]);
    assert_eq!(c.cmd(&["KEYSPACE", "sessions"]).unwrap(), Resp::Simple("OK".into()));
    assert_eq!(c.cmd(&["SET", "s", "1"]).unwrap(), Resp::Simple("OK".into()));

    let info = commandstats(&mut c);
    let m = Scrape::of(node);

    assert_eq!(m.value("meridian_core_up", &[]), 1.0);
    assert_eq!(m.value("meridian_commands_total", &[("command", "set")]), 41.0);
    assert_eq!(get_figure(&m, "meridian_commands_total"), 26.0, "the call without a key counts too");
    assert_eq!(get_figure(&m, "meridian_command_errors_total"), 1.0);
    assert_eq!(m.value("meridian_command_errors_total", &[("command", "hget")]), 1.0);
    for command in ["set", "get", "hget"] {
        let calls = m.value("meridian_commands_total", &[("command", command)]);
        assert_eq!(info[command]["calls"], calls, "INFO and /metrics count {command} alike");
        assert_eq!(info[command]["failed_calls"], m.value("meridian_command_errors_total", &[("command", command)]));
        let usec = m.value("meridian_command_duration_seconds_sum", &[("command", command)]) * 1e6;
        assert!((info[command]["usec"] - usec).abs() < 1.0, "{command}: INFO usec {} vs {usec}", info[command]["usec"]);
        check_histogram(&m, command, calls);
    }

    // The core's part: the map, this node's replicas, its requests by keyspace, its stores.
    assert_eq!(m.value("meridian_cluster_nodes", &[("state", "active")]), 3.0);
    assert_eq!(m.sum("meridian_chains", &[("keyspace", "default")]), 64.0);
    assert_eq!(m.sum("meridian_chains", &[("keyspace", "sessions")]), 64.0);
    assert_eq!(m.sum("meridian_replicas", &[("keyspace", "default")]), 64.0, "R = 3 on 3 nodes: every chain");
    assert!(m.value("meridian_keyspace_requests_total", &[("keyspace", "default"), ("kind", "write")]) >= 40.0);
    assert!(m.value("meridian_keyspace_requests_total", &[("keyspace", "default"), ("kind", "read")]) >= 25.0);
    assert_eq!(m.value("meridian_keyspace_requests_total", &[("keyspace", "sessions"), ("kind", "write")]), 1.0);
    assert!(m.value("meridian_store_log_bytes", &[("keyspace", "default"), ("replica", "log")]) > 0.0);
    assert!(m.value("meridian_data_dir_bytes", &[]) > 0.0);
    assert!(m.value("meridian_fsync_duration_seconds_count", &[]) > 0.0);
    assert!(m.value("meridian_connected_clients", &[]) >= 1.0);
    assert!(m.value("process_resident_memory_bytes", &[]) > 0.0);
    assert_eq!(m.family_type("meridian_replication_lag_updates"), Some("gauge"));

    // Once writes stop, every replica here catches up with its tail.
    let start = Instant::now();
    while Scrape::of(node).sum("meridian_replication_lag_updates", &[]) > 0.0 {
        assert!(start.elapsed() < Duration::from_secs(10), "replication lag stayed above zero");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `meridian_command_duration_seconds{command}`: cumulative buckets that never decrease, `+Inf` equal to the
/// count, and the count equal to the command's calls.
fn check_histogram(m: &Scrape, command: &str, calls: f64) {
    let buckets = m.values("meridian_command_duration_seconds_bucket", &[("command", command)]);
    assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{command}: buckets decrease: {buckets:?}");
    assert_eq!(m.value("meridian_command_duration_seconds_bucket", &[("command", command), ("le", "+Inf")]), calls);
    assert_eq!(m.value("meridian_command_duration_seconds_count", &[("command", command)]), calls);
    assert_eq!(m.family_type("meridian_command_duration_seconds_count"), Some("histogram"));
}
