//! `meridian bench join` end to end, briefly: real node processes under CPU quotas, a join under read load, the
//! table and the JSON, and nothing left behind. About 15 s.

use std::process::{Command, Stdio};

#[test]
fn bench_join_measures_every_node_through_a_join_and_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("join.json");
    let child = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["bench", "join", "--nodes", "3", "--keys", "2000", "--duration", "8", "--join-at", "3"])
        .args(["--clients", "6", "--dir"])
        .arg(dir.path())
        .arg("--json")
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run meridian bench join");
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "bench join failed:\n{stderr}");
    assert!(stdout.contains("meridian bench join: 3 nodes + node 4 joining"), "{stdout}");

    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let nodes = report["per_node"].as_array().unwrap();
    assert_eq!(nodes.iter().map(|n| n["id"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2, 3, 4]);
    assert_eq!(nodes[3]["role"], "joiner");
    for n in &nodes[..3] {
        // With three nodes and R=3 every node holds every chain, so the join copies from each of them.
        assert_eq!(n["role"], "source", "{n}");
        assert!(n["steady_reads_per_s"].as_f64().unwrap() > 0.0, "{n}");
        assert!(n["join_reads_per_s"].as_f64().unwrap() > 0.0, "{n}");
    }
    assert!(report["join"]["settled_s"].as_f64().is_some(), "the join settled: {}", report["join"]);
    assert!(report["join"]["chains_joined"].as_u64().unwrap() > 0);
    assert!(report["load"]["gets_found"].as_u64().unwrap() > 0);
    assert_eq!(report["load"]["gets_missing"], 0, "a preloaded key read back as nil");

    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, [std::ffi::OsString::from("join.json")], "the nodes' data is removed");
    for root in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup"] {
        let groups = std::fs::read_dir(root).into_iter().flatten().flatten();
        let prefix = format!("meridian-bench-{pid}-");
        let ours: Vec<_> = groups.filter(|g| g.file_name().to_string_lossy().starts_with(&prefix)).collect();
        assert!(ours.is_empty(), "cgroups left behind: {ours:?}");
    }
}
