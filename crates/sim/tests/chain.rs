//! Chain replication in the simulator: fixed seeds under every fault kind, determinism, and the
//! checker's power against deliberately broken variants lives in the root crate's tests.

use meridian_proto::chain::ChainConfig;
use meridian_sim::sweep::{run_chain_seed, sweep_chain, ChainSweep, CheckModel};
use meridian_sim::{parse_kinds, FaultKind};

fn sweep(seeds: std::ops::Range<u64>, nemesis: &str) -> ChainSweep {
    ChainSweep {
        seeds,
        nemesis: parse_kinds(nemesis).unwrap(),
        check: CheckModel::Linearizable,
        nodes: 3,
        replication: 3,
        vnodes: 4,
        chain: ChainConfig::default(),
        threads: 2,
    }
}

#[test]
fn chain_is_linearizable_under_all_faults() {
    let s = sweep(0..40, "crash,partition,pause,clock");
    let results = sweep_chain(&s, &|_| {});
    let failures: Vec<String> =
        results.iter().filter_map(|r| r.failure.as_ref().map(|f| format!("seed {}: {f}", r.seed))).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let reads: usize = results.iter().map(|r| r.reads).sum();
    let crashes: u64 = results.iter().map(|r| r.crashes).sum();
    assert!(reads > 1000, "the workload must actually read: {reads}");
    assert!(crashes > 10, "the nemesis must actually crash nodes: {crashes}");
}

#[test]
fn same_seed_same_trace() {
    let s = sweep(7..8, "crash,partition,pause,clock");
    let a = run_chain_seed(&s, 7);
    let b = run_chain_seed(&s, 7);
    assert_eq!(a.trace_hash, b.trace_hash);
    assert_eq!(a.history.ops.len(), b.history.ops.len());
    let c = run_chain_seed(&s, 8);
    assert_ne!(a.trace_hash, c.trace_hash);
}

#[test]
fn without_faults_every_operation_succeeds() {
    let s = sweep(0..1, "");
    let report = run_chain_seed(&s, 3);
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert!(report.history.ops.iter().all(|o| o.ok == Some(true)), "no faults, no failures");
    assert!(report.enabled.is_empty());
    let _ = FaultKind::Crash;
}
