//! The simulator's checkers have teeth: deliberately broken variants of chain replication, compiled
//! only into tests, are caught on fixed seeds. Runs are deterministic, so "caught within these seeds"
//! is a stable fact of the commit, not a matter of luck.

use meridian_proto::chain::{ChainConfig, PlantedBug};
use meridian_sim::parse_kinds;
use meridian_sim::sweep::{sweep_chain, ChainSweep, CheckModel, SeedResult};

fn sweep(bug: PlantedBug, seeds: u64) -> Vec<SeedResult> {
    let s = ChainSweep {
        seeds: 0..seeds,
        nemesis: parse_kinds("crash,partition,pause,clock").unwrap(),
        check: CheckModel::Linearizable,
        nodes: 3,
        replication: 3,
        vnodes: 4,
        chain: ChainConfig { planted_bug: Some(bug), ..ChainConfig::default() },
        threads: 2,
    };
    sweep_chain(&s, &|_| {})
}

fn caught(results: &[SeedResult]) -> Vec<&SeedResult> {
    results.iter().filter(|r| r.failure.is_some()).collect()
}

#[test]
fn a_head_that_answers_before_the_tail_is_caught() {
    let results = sweep(PlantedBug::HeadAcksEarly, 20);
    let caught = caught(&results);
    assert!(caught.len() >= 10, "only {} of 20 seeds caught an early-acking head", caught.len());
    let report = caught[0].failure.as_deref().unwrap();
    assert!(report.contains("not linearizable"), "{report}");
}

/// The example of a broken variant: a tail that acknowledges before its write is durable.
/// Losing such a write needs a crash inside an fsync window, so it is rare per seed.
#[test]
fn a_tail_that_acks_before_its_write_is_durable_is_caught() {
    let results = sweep(PlantedBug::TailAcksEarly, 500);
    let caught = caught(&results);
    assert!(!caught.is_empty(), "no seed of 500 caught a tail that acks before syncing");
}

/// Liveness has teeth too: without resends, a chain that lost an update stays stuck after the heal.
#[test]
fn a_chain_that_never_resends_is_reported_stuck() {
    let results = sweep(PlantedBug::IgnoresSync, 20);
    let stuck: Vec<&SeedResult> =
        results.iter().filter(|r| r.failure.as_deref().is_some_and(|f| f.starts_with("no progress"))).collect();
    assert!(stuck.len() >= 5, "only {} of 20 seeds reported a stuck chain", stuck.len());
}
