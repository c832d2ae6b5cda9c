//! `meridian bench ycsb` run as a child process, and its JSON report checked.

use serde_json::Value;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

/// Runs `meridian bench ycsb --addr ADDR ARGS` and returns its JSON report, after checking its CSV has a
/// line per phase and operation type.
pub fn ycsb(addr: SocketAddr, args: &[&str], dir: &Path) -> Value {
    let (json, csv) = (dir.join("ycsb.json"), dir.join("ycsb.csv"));
    let out = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["bench", "ycsb", "--addr", &addr.to_string()])
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg("--csv")
        .arg(&csv)
        .output()
        .expect("run meridian bench ycsb");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "bench ycsb {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("meridian bench ycsb:"), "{stdout}");
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let lines = report["phases"].as_array().unwrap().iter().map(|p| p["ops"].as_array().unwrap().len()).sum::<usize>();
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(csv.lines().count(), 1 + lines, "{csv}");
    report
}

/// The phase named `name`, checked: no errors, no read of a missing record, and its operation counts sum to
/// its total; returns its operations by name.
pub fn phase<'a>(report: &'a Value, name: &str) -> (&'a Value, Vec<(String, u64)>) {
    let phase = report["phases"].as_array().unwrap().iter().find(|p| p["phase"] == name).expect(name);
    assert_eq!(phase["errors"], 0, "{phase:#}");
    let ops: Vec<(String, u64)> = phase["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["op"].as_str().unwrap().into(), o["count"].as_u64().unwrap()))
        .collect();
    assert_eq!(ops.iter().map(|(_, n)| n).sum::<u64>(), phase["operations"].as_u64().unwrap(), "{phase:#}");
    for op in phase["ops"].as_array().unwrap() {
        assert_eq!(op["missing"], 0, "{op:#}");
        assert!(op["p50_us"].as_f64().unwrap() > 0.0 && op["max_us"].as_f64() >= op["p99_us"].as_f64(), "{op:#}");
    }
    (phase, ops)
}
