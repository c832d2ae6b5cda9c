//! The whole store benchmark at a tiny scale: every measurement runs, measures real operations, stays
//! within its byte budget and cleans up after itself. No speed is asserted.

use meridian_bench::{Limits, StoreBench, StoreKind};
use std::time::Duration;

#[test]
fn a_small_run_fills_every_cell_and_leaves_no_files() {
    let dir = tempfile::tempdir().unwrap();
    let bench = StoreBench {
        dir: dir.path().join("bench"),
        writers: 4,
        value_sizes: vec![100, 1024],
        limits: Limits { duration: Duration::from_millis(100), max_bytes: 256 << 10 },
    };
    let mut lines = Vec::new();
    let report = meridian_bench::run(&bench, &mut |line| lines.push(line.to_string())).unwrap();

    assert!(report.disk.seq_write_bytes > 0 && report.disk.seq_write_bytes <= 256 << 10);
    assert!(report.disk.fsync_samples > 0);
    assert_eq!(report.puts.len(), 10, "mem once, log in three modes and buffered once, per value size");
    for p in &report.puts {
        assert!(p.puts > 0, "{p:?}");
        assert!(p.puts * p.value_bytes as u64 <= bench.limits.max_bytes, "over the byte budget: {p:?}");
        assert_eq!(p.fsyncs.is_some(), p.store == StoreKind::Log);
        assert_eq!(p.loss_window_max_ms.is_some(), p.durability.as_deref() == Some("async"));
    }
    assert_eq!(report.gets.len(), 6, "mem, log and buffered, per value size");
    assert!(report.gets.iter().all(|g| g.gets > 0));
    assert_eq!(report.sequential.len(), 2);
    for s in &report.sequential {
        assert_eq!(s.rounds, 5, "{s:?}");
        assert!(s.puts_per_s > 0.0 && s.raw_mb_s > 0.0, "{s:?}");
        assert!(s.fraction_min <= s.fraction_of_raw && s.fraction_of_raw <= s.fraction_max, "{s:?}");
    }
    assert_eq!(report.group_over_sync.len(), 2);
    let c = &report.compaction;
    assert!(c.passes > 0 && c.gets_during > 0, "{c:?}");
    assert!(c.log_bytes_after < c.log_bytes_before && c.live_bytes_after <= c.log_bytes_after, "{c:?}");
    assert_eq!(lines.len(), 1 + 2 * 6 + 1, "one progress line per measurement");

    let table = report.to_string();
    for heading in
        ["disk: sequential write", "puts:", "gets:", "sequential puts:", "compaction:", "group commit over sync"]
    {
        assert!(table.contains(heading), "{heading} missing from\n{table}");
    }
    let left: Vec<_> = std::fs::read_dir(&bench.dir).unwrap().collect();
    assert!(left.is_empty(), "measurements left files behind: {left:?}");
}

#[test]
fn nonsense_settings_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits { duration: Duration::from_millis(10), max_bytes: 1024 };
    let bench = StoreBench { dir: dir.path().to_path_buf(), writers: 0, value_sizes: vec![100], limits };
    let err = meridian_bench::run(&bench, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("writers"), "{err}");
}
