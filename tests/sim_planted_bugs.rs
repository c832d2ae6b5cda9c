//! The simulator's checkers have teeth: deliberately broken variants of chain replication, switched on only in
//! builds with the `planted-bugs` feature (`crates/proto/src/chain/planted.rs`), are caught on fixed seeds. Runs are deterministic, so "caught within these seeds"
//! is a stable fact of the commit, not a matter of luck.

use meridian_check::Staleness;
use meridian_core::{DurabilityMode, KeyspaceConfig, QueryNode, ReplicaKind, UpdateMode};
use meridian_proto::chain::{ChainConfig, PlantedBug};
use meridian_proto::node::{NodeConfig, ProtocolConfigs};
use meridian_sim::parse_kinds;
use meridian_sim::sweep::{sweep_chain, ChainSweep, CheckModel, SeedResult};

fn sweep(bug: PlantedBug, seeds: u64) -> Vec<SeedResult> {
    sweep_with(bug, seeds, "crash,partition,pause,clock")
}

fn sweep_with(bug: PlantedBug, seeds: u64, nemesis: &str) -> Vec<SeedResult> {
    sweep_checking(Some(bug), seeds, nemesis, CheckModel::Linearizable)
}

fn sweep_checking(bug: Option<PlantedBug>, seeds: u64, nemesis: &str, check: CheckModel) -> Vec<SeedResult> {
    sweep_config(bug, seeds, nemesis, check, KeyspaceConfig::durable(3))
}

fn sweep_config(
    bug: Option<PlantedBug>,
    seeds: u64,
    nemesis: &str,
    check: CheckModel,
    default: KeyspaceConfig,
) -> Vec<SeedResult> {
    let chain = ChainConfig { planted_bug: bug, ..ChainConfig::default() };
    sweep_nodes(seeds, nemesis, check, default, ProtocolConfigs { chain, ..ProtocolConfigs::default() })
}

/// Seeds `0..seeds` of three nodes (and two spares) whose protocol cores run `protocols`.
fn sweep_nodes(
    seeds: u64,
    nemesis: &str,
    check: CheckModel,
    default: KeyspaceConfig,
    protocols: ProtocolConfigs,
) -> Vec<SeedResult> {
    sweep_seeds(0..seeds, nemesis, check, default, protocols)
}

/// [`sweep_nodes`] over the seeds `seeds`.
fn sweep_seeds(
    seeds: std::ops::Range<u64>,
    nemesis: &str,
    check: CheckModel,
    default: KeyspaceConfig,
    protocols: ProtocolConfigs,
) -> Vec<SeedResult> {
    sweep_chain(&three_nodes(seeds, nemesis, check, default, protocols), &|_| {})
}

/// Seeds `seeds` of three nodes and two spares on a network drawn per seed, under `nemesis`.
fn three_nodes(
    seeds: std::ops::Range<u64>,
    nemesis: &str,
    check: CheckModel,
    default: KeyspaceConfig,
    protocols: ProtocolConfigs,
) -> ChainSweep {
    ChainSweep {
        seeds,
        nemesis: parse_kinds(nemesis).unwrap(),
        check,
        nodes: 3,
        spares: 2,
        affiliates: 0,
        default,
        vnodes: 4,
        node: NodeConfig { protocols, ..NodeConfig::default() },
        threads: 2,
        trace: false,
        topology: None,
        staleness_bound: None,
        clients_near: false,
    }
}

fn caught(results: &[SeedResult]) -> Vec<&SeedResult> {
    results.iter().filter(|r| r.failure.is_some()).collect()
}

/// The seeds that caught the bug, which must be at least `min` of them.
fn caught_at_least<'a>(results: &'a [SeedResult], min: usize, what: &str) -> Vec<&'a SeedResult> {
    let caught = caught(results);
    assert!(caught.len() >= min, "only {} of {} seeds caught {what}", caught.len(), results.len());
    caught
}

#[test]
fn a_head_that_answers_before_the_tail_is_caught() {
    let results = sweep(PlantedBug::HeadAcksEarly, 20);
    let caught = caught_at_least(&results, 10, "an early-acking head");
    let report = caught[0].failure.as_deref().unwrap();
    assert!(report.contains("not linearizable"), "{report}");
}

/// The example of a broken variant: a tail that acknowledges before its write is durable.
/// Losing such a write needs a crash inside an fsync window, so it is rare per seed.
#[test]
fn a_tail_that_acks_before_its_write_is_durable_is_caught() {
    let results = sweep(PlantedBug::TailAcksEarly, 500);
    caught_at_least(&results, 1, "a tail that acks before syncing");
}

/// The simulator takes a node's syncs in the driver's two halves (`Process::begin_sync`, then the job when the
/// simulated fsync completes): a sync that makes nothing durable releases acknowledgements a power loss takes back.
#[test]
fn a_sync_without_an_fsync_is_caught() {
    let results = sweep_with(PlantedBug::SkipsFsync, 40, "crash");
    caught_at_least(&results, 5, "syncs that skip the fsync");
}

/// A head whose store has lost a key is seen only by a conditional write, which the head decides from its own
/// store (reads go to the tail, and a member after the head gets a lost write resent): the workload's SET NX
/// applies over a value the history says is there.
#[test]
fn a_head_whose_store_forgets_keys_is_caught_by_set_nx() {
    let results = sweep(PlantedBug::HeadStoreForgets, 20);
    let caught = caught_at_least(&results, 5, "a head whose store forgets keys");
    let report = caught[0].failure.as_deref().unwrap();
    assert!(report.contains("cas"), "the violation is a SET NX that applied: {report}");
}

/// An update of several keys that members after the head log only in part: the workload's MSETNX of a key and
/// its buddy applies, and a read of the buddy at the tail finds it absent.
#[test]
fn a_member_that_logs_part_of_an_update_of_several_keys_is_caught() {
    let results = sweep(PlantedBug::LogsFirstKeyOnly, 40);
    let caught = caught_at_least(&results, 3, "a member that logs half an MSETNX");
    let report = caught[0].failure.as_deref().unwrap();
    assert!(report.contains("not linearizable"), "{report}");
}

/// Liveness has teeth too: without resends, a chain that lost an update stays stuck after the heal.
#[test]
fn a_chain_that_never_resends_is_reported_stuck() {
    let results = sweep(PlantedBug::IgnoresSync, 20);
    let stuck: Vec<&SeedResult> =
        results.iter().filter(|r| r.failure.as_deref().is_some_and(|f| f.starts_with("no progress"))).collect();
    assert!(stuck.len() >= 5, "only {} of 20 seeds reported a stuck chain", stuck.len());
}

/// The lease is what keeps a tail that was removed without hearing of it from answering: without it, two
/// nodes answer as tail of one chain, which the simulator's invariant (or the history) exposes.
#[test]
fn a_tail_that_answers_without_a_lease_is_caught() {
    let results = sweep_with(PlantedBug::IgnoresLease, 40, "crash,partition,pause,clock,join,leave,manager");
    caught_at_least(&results, 4, "a tail answering without a lease");
}

/// The fast path answers a read within the step the request arrives in, without asking `serving`: the state
/// invariant alone cannot see it answer without a lease, so the invariant also holds each node to the reads it
/// actually answered (`ChainNode::answered`). A tail cut off from the others (`isolate`) until the manager has
/// moved its chains on keeps getting clients' reads, and answering them beside the new tail is caught.
#[test]
fn a_fast_path_read_without_a_lease_is_caught() {
    let results = sweep_with(PlantedBug::FastReadIgnoresLease, 40, "isolate");
    let caught = caught_at_least(&results, 10, "a fast-path read without a lease");
    let report = caught[0].failure.as_deref().unwrap();
    assert!(report.contains("both serve as tail") || report.contains("serves reads at view"), "{report}");
}

/// The fast path logs and answers a write within its step only as the only member of a chain in memory, with
/// nothing to make durable. One that also answers writes to a log before their fsync loses them to a power loss.
#[test]
fn a_fast_path_write_answered_before_its_fsync_is_caught() {
    let bug = Some(PlantedBug::FastWriteSkipsSync);
    let results = sweep_config(bug, 200, "crash", CheckModel::Linearizable, KeyspaceConfig::durable(1));
    let caught = caught_at_least(&results, 5, "a fast-path write answered before its fsync");
    let report = caught[0].failure.as_deref().unwrap();
    assert!(report.contains("not linearizable"), "{report}");
}

/// A joiner that takes part without flushing what changed after its pre-copy breaks the chain.
#[test]
fn a_joiner_that_skips_its_flush_is_caught() {
    let results = sweep_with(PlantedBug::SkipsFlush, 40, "crash,partition,pause,clock,join,leave,manager");
    caught_at_least(&results, 4, "a joiner skipping its flush");
}

/// A node that trusts a memory replica after a restart serves (or passes on) a state that lost acknowledged
/// writes. Only runs whose extra keyspaces keep replicas in memory can show it.
#[test]
fn a_node_that_trusts_a_replica_lost_to_its_restart_is_caught() {
    let results = sweep_with(PlantedBug::TrustsLostReplicas, 100, "crash,partition,pause,clock,join,leave,manager");
    caught_at_least(&results, 5, "a node trusting a lost replica");
}

/// A head that passed updates on before its fsync and trusts its log after a power loss would order new writes
/// from a history shorter than its successors': the chain property catches it first (a successor ahead of it).
#[test]
fn a_head_that_trusts_its_log_after_passing_updates_on_early_is_caught() {
    let results = sweep(PlantedBug::TrustsEarlyHead, 130);
    let caught = caught_at_least(&results, 3, "a head trusting its log");
    let report = caught[0].failure.as_deref().unwrap();
    assert!(report.contains("but its predecessor"), "{report}");
}

/// The staleness check measures what the linearizability check only rejects: a correct chain has no stale read
/// at all, and a head that answers before the tail has the write shows some (a read at the tail misses it).
#[test]
fn the_staleness_check_finds_stale_reads_only_where_they_are() {
    let nemesis = "crash,partition,pause,clock,join,leave,manager";
    let total = |results: Vec<SeedResult>| results.into_iter().filter_map(|r| r.staleness).sum::<Staleness>();
    let correct = total(sweep_checking(None, 40, nemesis, CheckModel::Staleness));
    assert!(correct.reads > 1000 && correct.stale == 0, "{correct:?}");
    let broken = total(sweep_checking(Some(PlantedBug::HeadAcksEarly), 20, nemesis, CheckModel::Staleness));
    assert!(broken.stale > 0 && broken.max_ns > 0, "{broken:?}");
}

/// Reads from the head are linearizable only because a key with a write the tail has not acknowledged is read
/// at the tail: a head that answers such reads itself returns writes that may never commit. Only a write lost
/// with its head (a memory head restarting before forwarding it) shows it, so it is rare per seed (2 of these 400,
/// and 3 of the first 600, at the time of writing; crashes and pauses alone make it likeliest); the unit test
/// `a_head_that_answers_reads_sends_keys_with_tentative_writes_to_the_tail` checks the mechanism directly.
#[test]
fn a_head_that_reads_tentative_writes_is_caught() {
    let replicas = vec![ReplicaKind::Mem, ReplicaKind::Log, ReplicaKind::Log];
    let config = KeyspaceConfig { read_from: QueryNode::Head, ..KeyspaceConfig::with_replicas(replicas) };
    let nemesis = "crash,pause";
    let results = sweep_config(Some(PlantedBug::ReadsTentative), 400, nemesis, CheckModel::Linearizable, config);
    caught_at_least(&results, 1, "a head reading tentative writes");
}

/// Under `ausi` a read at the head must not show a write before every member holds its invalidation: a member
/// after the head would still answer the older value afterwards.
#[test]
fn an_ausi_head_that_shows_a_write_before_its_invalidations_is_caught() {
    let config = KeyspaceConfig { update: UpdateMode::Ausi, ..KeyspaceConfig::durable(3) };
    let results =
        sweep_config(Some(PlantedBug::ShowsUninvalidated), 40, "pause,clock", CheckModel::Linearizable, config);
    caught_at_least(&results, 4, "an ausi head showing a write early");
}

/// Keys' expiry: a head that deletes keys a second before their deadline (by its wall clock, which the clock
/// nemesis steps within its error bound) makes reads miss values the history says must still be there. Half the
/// runs give no put a time to live, and some only short ones, so it takes a few dozen seeds.
#[test]
fn a_head_that_expires_keys_early_is_caught() {
    let results = sweep_with(PlantedBug::ExpiresEarly, 60, "crash,partition,pause,clock");
    let caught = caught_at_least(&results, 6, "early expiry");
    let report = caught[0].failure.as_deref().unwrap();
    assert!(report.contains("not linearizable"), "{report}");
}

/// Cache mode: a tail that evicts on its own, instead of the head ordering evictions through the chain, drops
/// keys the members before it keep, and a key it dropped comes back when one of them becomes the tail.
#[test]
fn a_tail_that_evicts_on_its_own_is_caught() {
    let config = KeyspaceConfig { maxmemory: Some(1 << 10), ..KeyspaceConfig::durable(3) };
    let nemesis = "crash,partition,pause,clock,join,leave,manager";
    let results = sweep_config(Some(PlantedBug::EvictsLocally), 100, nemesis, CheckModel::Linearizable, config);
    caught_at_least(&results, 2, "a tail evicting on its own");
}

/// Async durability acknowledges a write before it is on disk, so a power loss may take it: the simulator
/// models that window (the checkers find lost writes, a chain whose members' logs went backwards, or a chain
/// stuck behind a tail whose log went back below what it had acknowledged, whose updates no member holds any
/// more, when whole machines crash), while a process crash that keeps the disk — the fault model async claims —
/// loses nothing.
#[test]
fn async_durability_loses_writes_to_power_loss_but_not_to_process_crashes() {
    let config = KeyspaceConfig { durability: Some(DurabilityMode::Async), ..KeyspaceConfig::durable(3) };
    let lost = sweep_config(None, 40, "crash,partition,pause,clock", CheckModel::Linearizable, config.clone());
    let lost = caught(&lost);
    assert!(lost.len() >= 2, "only {} of 40 seeds lost an async write to a power loss", lost.len());
    let report = lost[0].failure.as_deref().unwrap();
    let shows = ["not linearizable", "invariant broken", "no progress"];
    assert!(shows.iter().any(|s| report.contains(s)), "{report}");
    let kept = sweep_config(None, 40, "kill,partition,pause,clock", CheckModel::Linearizable, config);
    let failures: Vec<_> = caught(&kept).iter().map(|r| (r.seed, r.failure.clone())).collect();
    assert!(failures.is_empty(), "{failures:?}");
}

/// SCAN pages are checked like GETs (a key a page covers and leaves out is a read of nothing): a tail cut off
/// from the others (`isolate`) that answers pages without a lease after the manager moved its chains on answers
/// from a store the chain has left behind, beside the new tail.
#[test]
fn a_scan_page_without_a_lease_is_caught() {
    let results = sweep_with(PlantedBug::ScanIgnoresLease, 40, "isolate");
    caught_at_least(&results, 5, "a scan page without a lease");
}

/// A page that also lists keys whose latest record is a delete is caught by the present reads alone: the GETs,
/// and the keys pages leave out, see nothing wrong.
#[test]
fn a_scan_page_that_lists_deleted_keys_is_caught() {
    let results = sweep(PlantedBug::ScanShowsTombstones, 20);
    let caught = caught_at_least(&results, 4, "a page listing deleted keys");
    for report in caught.iter().filter_map(|r| r.failure.as_deref()) {
        assert!(report.contains("SCAN page's process"), "{report}");
    }
}

/// A page that leaves out the keys on its first token, while its answer says it covered them, is caught by the
/// history alone: the workload starts a third of its pages at a key's token, and records that key absent.
#[test]
fn a_scan_page_that_skips_its_first_token_is_caught() {
    let results = sweep(PlantedBug::ScanSkipsFirstToken, 20);
    let caught = caught_at_least(&results, 10, "a page that skips its first token");
    let report = caught[0].failure.as_deref().unwrap();
    assert!(report.contains("not linearizable"), "{report}");
}

/// Keys' expiry, the other way: a member that answers a key past its deadline from its store, before the head's
/// delete reaches it, returns values the history still allows (the delete may come after the read) but Redis never
/// would; the workload holds reads to their puts' deadlines (`crates/sim/src/deadlines.rs`). A delete is late
/// enough to show it only when a fault holds it up, so it takes a few dozen seeds.
#[test]
fn a_member_that_answers_past_a_deadline_is_caught() {
    let results = sweep_with(PlantedBug::ReadsPastDeadline, 120, "crash,partition,pause,clock");
    let caught = caught_at_least(&results, 3, "reads past a deadline");
    let report = caught[0].failure.as_deref().unwrap();
    assert!(report.contains("past its deadline"), "{report}");
}

/// A quorum keyspace (docs/protocols/quorum.md) whose read and write quorums need not meet (R + W ≤ N): a read
/// may miss an acknowledged write, which the linearizability check catches; the same keyspace with quorums that
/// meet passes the same seeds.
#[test]
fn quorums_that_need_not_meet_are_caught() {
    use meridian_core::{Level, ProtocolConfig, QuorumOptions, Stamps};
    let quorum = |read, write| {
        let options = QuorumOptions { read, write, timestamps: Stamps::Quorum };
        KeyspaceConfig { protocol: ProtocolConfig::Quorum(options), ..KeyspaceConfig::durable(3) }
    };
    let nemesis = "crash,partition,pause";
    let planted = sweep_config(None, 20, nemesis, CheckModel::Linearizable, quorum(Level::One, Level::One));
    let report = caught_at_least(&planted, 5, "R + W ≤ N")[0].failure.as_deref().unwrap();
    assert!(report.contains("not linearizable"), "{report}");
    let sound = sweep_config(None, 20, nemesis, CheckModel::Linearizable, quorum(Level::Quorum, Level::Quorum));
    assert!(caught(&sound).is_empty(), "{:?}", caught(&sound).first().map(|r| &r.failure));
}

/// The sequential-consistency check (`meridian_check::check_sequential`) on whole runs: a quorum keyspace at
/// ONE reads from any replica, so a client can miss its own write or read back in time, which the check
/// catches; linearizable configurations (ABD at QUORUM, a chain) pass the same seeds, as they must.
#[test]
fn reads_at_one_are_caught_going_back_in_time() {
    use meridian_core::{Level, ProtocolConfig, QuorumOptions, Stamps};
    let quorum = |level| {
        let options = QuorumOptions { read: level, write: level, timestamps: Stamps::Clock };
        KeyspaceConfig { protocol: ProtocolConfig::Quorum(options), ..KeyspaceConfig::durable(3) }
    };
    let nemesis = "crash,partition,pause";
    let planted = sweep_config(None, 20, nemesis, CheckModel::Sequential, quorum(Level::One));
    let report = caught_at_least(&planted, 5, "reads at ONE")[0].failure.as_deref().unwrap();
    assert!(report.contains("not sequentially consistent"), "{report}");
    let abd = QuorumOptions { read: Level::Quorum, write: Level::Quorum, timestamps: Stamps::Quorum };
    let abd = KeyspaceConfig { protocol: ProtocolConfig::Quorum(abd), ..KeyspaceConfig::durable(3) };
    for sound in [abd, KeyspaceConfig::durable(3)] {
        let results = sweep_config(None, 20, nemesis, CheckModel::Sequential, sound);
        assert!(caught(&results).is_empty(), "{:?}", caught(&results).first().map(|r| &r.failure));
    }
}

/// A lease keyspace (docs/protocols/lease.md) with a planted bug, swept like the chain's above.
fn sweep_lease(
    bug: Option<meridian_proto::lease::LeasePlantedBug>,
    seeds: u64,
    nemesis: &str,
    check: CheckModel,
) -> Vec<SeedResult> {
    use meridian_core::{Placement, Protocol, ProtocolConfig};
    let lease = meridian_proto::lease::LeaseConfig { planted_bug: bug, ..Default::default() };
    let placement = Placement::per_region("default=3").unwrap();
    let protocol = ProtocolConfig::default_for(Protocol::Lease);
    let default = KeyspaceConfig { protocol, placement, ..KeyspaceConfig::durable(3) };
    sweep_nodes(seeds, nemesis, check, default, ProtocolConfigs { lease, ..ProtocolConfigs::default() })
}

/// A lease master that commits writes at a majority without the replicas answering reads under a lease leaves
/// them answering the old value: caught as stale reads by the linearizability check and, when a client reads
/// back in time, by the sequential-consistency check; the sound core passes the same seeds under both.
#[test]
fn a_lease_write_that_skips_lease_holders_is_caught() {
    use meridian_proto::lease::LeasePlantedBug;
    let nemesis = "crash,partition,pause,clock";
    for (check, min, says) in
        [(CheckModel::Linearizable, 2, "not linearizable"), (CheckModel::Sequential, 1, "not sequentially consistent")]
    {
        let planted = sweep_lease(Some(LeasePlantedBug::IgnoresLeases), 100, nemesis, check);
        let report = caught_at_least(&planted, min, "writes skipping lease holders")[0].failure.as_deref().unwrap();
        assert!(report.contains(says), "{report}");
        let sound = sweep_lease(None, 20, nemesis, check);
        assert!(caught(&sound).is_empty(), "{:?}", caught(&sound).first().map(|r| &r.failure));
    }
}

/// The lease protocol assumes clocks within the drift bound (docs/protocols/lease.md, "Clocks"). A replica whose
/// clock runs far slower counts the master's confirmations too long and answers under its leases after the
/// master wrote past it: beyond the bound the guarantee breaks, and the check says so.
#[test]
fn a_lease_replica_clock_beyond_the_drift_bound_is_caught() {
    use meridian_proto::lease::LeasePlantedBug;
    let nemesis = "crash,partition,pause,clock,isolate";
    let planted = sweep_lease(Some(LeasePlantedBug::ClockBeyondBound), 40, nemesis, CheckModel::Linearizable);
    let report = caught_at_least(&planted, 1, "a clock beyond the bound")[0].failure.as_deref().unwrap();
    assert!(report.contains("not linearizable"), "{report}");
}

/// Sweeps `bug` planted in the lease core with `sweep`: at least one seed must fail, the first saying it is not
/// linearizable, and the sound core must pass the same seeds.
fn lease_bug_caught_on_seeds_the_sound_core_passes(
    bug: meridian_proto::lease::LeasePlantedBug,
    what: &str,
    sweep: impl Fn(Option<meridian_proto::lease::LeasePlantedBug>) -> Vec<SeedResult>,
) {
    let planted = sweep(Some(bug));
    let report = caught_at_least(&planted, 1, what)[0].failure.as_deref().unwrap();
    assert!(report.contains("not linearizable"), "{report}");
    let sound = sweep(None);
    assert!(caught(&sound).is_empty(), "{:?}", caught(&sound).first().map(|r| &r.failure));
}

/// Seeds `seeds` of one node in each region of globlease-4, under `nemesis`.
fn globlease_4(
    seeds: std::ops::Range<u64>,
    nemesis: &str,
    check: CheckModel,
    default: KeyspaceConfig,
    protocols: ProtocolConfigs,
) -> ChainSweep {
    let topology = meridian_core::topology::Topology::load("globlease-4").unwrap();
    ChainSweep {
        nodes: 4,
        spares: 0,
        topology: Some(std::sync::Arc::new(topology)),
        ..three_nodes(seeds, nemesis, check, default, protocols)
    }
}

/// Seeds `seeds` of a lease keyspace with a replica in each region of globlease-4, one node each, and
/// `affiliates` affiliated nodes.
fn sweep_lease_wan(
    bug: Option<meridian_proto::lease::LeasePlantedBug>,
    seeds: std::ops::Range<u64>,
    nemesis: &str,
    affiliates: usize,
) -> Vec<SeedResult> {
    use meridian_core::{Placement, Protocol, ProtocolConfig};
    let regions = ["or", "va", "ir", "tk"].map(|r| (r.to_string(), 1)).to_vec();
    let placement = Placement { regions, banned: Vec::new() };
    let protocol = ProtocolConfig::default_for(Protocol::Lease);
    let default = KeyspaceConfig { protocol, placement, ..KeyspaceConfig::durable(4) };
    let lease = meridian_proto::lease::LeaseConfig { planted_bug: bug, ..Default::default() };
    let protocols = ProtocolConfigs { lease, ..ProtocolConfigs::default() };
    let s = ChainSweep { affiliates, ..globlease_4(seeds, nemesis, CheckModel::Linearizable, default, protocols) };
    sweep_chain(&s, &|_| {})
}

/// A key's new master must not serve it while its old master may still do so: a member that promises the new
/// master's domain before its promises to the old one ran out lets both answer, and a read of the old master
/// misses a write the new one acknowledged. The window is narrow (the old master must be cut off as the key
/// moves, and read there): with keys also moving by write origin (`origins`), the bug reads stale on 3 of seeds
/// 0..8000 (5241, 6227, 6915; none below 2000), of which these seeds keep 6227; the sound core passes the same seeds.
#[test]
fn a_moved_key_served_by_two_masters_is_caught() {
    use meridian_proto::lease::LeasePlantedBug;
    let nemesis = "region,migrate,origins";
    let planted = sweep_lease_wan(Some(LeasePlantedBug::PromisesMovedKeysEarly), 6225..6230, nemesis, 0);
    let report = caught_at_least(&planted, 1, "keys served by two masters")[0].failure.as_deref().unwrap();
    assert!(report.contains("not linearizable"), "{report}");
    let sound = sweep_lease_wan(None, 6225..6230, nemesis, 0);
    assert!(caught(&sound).is_empty(), "{:?}", caught(&sound).first().map(|r| &r.failure));
}

/// An affiliated node answers a key only while no write of it can have succeeded: a host that acknowledges a
/// push (or, as master, commits a write) without revoking the key's secondary leases first leaves an affiliated
/// node it cannot reach answering the old value. The window is narrow (its next pull, 200 ms at most, drops the
/// key otherwise): with `partition` and 12 affiliated nodes the bug reads stale on 6 of seeds 0..1200 (259,
/// 488, 592, ...), of which these seeds keep 592; the sound core passes the same seeds.
#[test]
fn an_affiliated_node_answering_a_key_written_since_is_caught() {
    use meridian_proto::lease::LeasePlantedBug;
    let sweep = |bug| sweep_lease_wan(bug, 585..600, "partition", 12);
    lease_bug_caught_on_seeds_the_sound_core_passes(LeasePlantedBug::AcksBeforeRevoking, "kept secondaries", sweep);
}

/// A replica that sends its client's write to the master withholds its lease on the key until the write's push
/// arrives, and the master leaves it out of the write: one that says so and goes on answering under the lease
/// answers the old value after the write succeeded. Links are FIFO, so the push comes first unless a link breaks
/// between the push and the answer: with `partition` the bug reads stale on 5 of seeds 0..1500 (402 the first),
/// which these seeds keep; the sound core passes the same seeds.
#[test]
fn a_replica_answering_over_its_own_write_is_caught() {
    use meridian_proto::lease::LeasePlantedBug;
    let sweep = |bug| sweep_lease_wan(bug, 395..410, "partition", 0);
    lease_bug_caught_on_seeds_the_sound_core_passes(LeasePlantedBug::IgnoresItsOwnWrite, "a withheld lease", sweep);
}

/// A replica parks a read of a key with a write under way only while it holds a lease on the key: every write
/// that succeeded before the read arrived then waited for it, so the version its store held is at least that
/// write's. One that parks without a lease may answer that version after a newer one succeeded without it. The
/// bug reads stale with `partition,region,migrate,origins` on globlease-4 on seed 466 of 0..3000, which these
/// seeds keep (none of the sweeps tried before: 0..600 of `partition` and of `crash,partition,pause,clock` on three
/// nodes, 0..1500 of those and of `partition,region,migrate` on globlease-4); the sound core passes the same seeds.
#[test]
fn a_read_parked_without_a_lease_is_caught() {
    use meridian_proto::lease::LeasePlantedBug;
    let sweep = |bug| sweep_lease_wan(bug, 463..468, "partition,region,migrate,origins", 0);
    lease_bug_caught_on_seeds_the_sound_core_passes(LeasePlantedBug::ParksWithoutLease, "a parked read", sweep);
}

/// A read that arrives while a write of the replica's own client is on its way waits for that write's push as
/// well as for a commit: the write may succeed without this replica, so what its store held when the read
/// arrived may be older than a write that succeeded. One that counts from the store alone reads stale with
/// `partition` on globlease-4 on seed 787 of 0..1500 (none of `crash,partition,pause,clock`), which these seeds
/// keep; the sound core passes the same seeds.
#[test]
fn a_read_parked_past_its_own_write_is_caught() {
    use meridian_proto::lease::LeasePlantedBug;
    let sweep = |bug| sweep_lease_wan(bug, 780..790, "partition", 0);
    lease_bug_caught_on_seeds_the_sound_core_passes(LeasePlantedBug::ParksPastItsOwnWrite, "own write", sweep);
}

/// Seeds `seeds` of a meteor keyspace of three log replicas (three nodes, two spares) whose clock bound is
/// `clock_bound_ms`, under `nemesis`, checked for sequential consistency.
fn sweep_meteor(
    bug: Option<meridian_proto::meteor::MeteorPlantedBug>,
    seeds: std::ops::Range<u64>,
    nemesis: &str,
    clock_bound_ms: u32,
) -> Vec<SeedResult> {
    use meridian_core::{MeteorOptions, ProtocolConfig};
    let protocol = ProtocolConfig::Meteor(MeteorOptions { clock_bound_ms, ..MeteorOptions::default() });
    let default = KeyspaceConfig { protocol, ..KeyspaceConfig::durable(3) };
    let meteor = meridian_proto::meteor::MeteorConfig { planted_bug: bug };
    let protocols = ProtocolConfigs { meteor, ..ProtocolConfigs::default() };
    sweep_seeds(seeds, nemesis, CheckModel::Sequential, default, protocols)
}

/// The simulator's wall clocks keep within ±100 ms of true time, so within 200 ms of each other.
const SIM_CLOCK_SPREAD_MS: u32 = 200;

/// A meteor read that counts a peer's status however old (not only one sent after the read arrived) answers
/// from majorities that predate writes its own client saw succeed: caught by the sequential-consistency check
/// (`partition` catches it on seeds 0, 5 and 6 of 0..7, and on 20 of 0..60); the sound core passes the same seeds.
#[test]
fn a_meteor_read_counting_stale_statuses_is_caught() {
    use meridian_proto::meteor::MeteorPlantedBug;
    let sweep = |bug| sweep_meteor(bug, 0..7, "partition", SIM_CLOCK_SPREAD_MS);
    let planted = sweep(Some(MeteorPlantedBug::CountsStaleStatuses));
    let report = caught_at_least(&planted, 1, "reads counting stale statuses")[0].failure.as_deref().unwrap();
    assert!(report.contains("not sequentially consistent"), "{report}");
    let sound = sweep(None);
    assert!(caught(&sound).is_empty(), "{:?}", caught(&sound).first().map(|r| &r.failure));
}

/// Clocks further apart than a meteor keyspace's bound break its guarantee: with the bound at 0 and the `clock`
/// nemesis stepping wall clocks up to 100 ms off, a read counts statuses sent before it arrived (3 of seeds
/// 0..200 fail the sequential-consistency check, 12 the first); with the bound at the clocks' real spread, the
/// same seed passes.
#[test]
fn a_meteor_keyspace_whose_clocks_leave_their_bound_is_caught() {
    let nemesis = "clock,partition,pause";
    let beyond = sweep_meteor(None, 12..13, nemesis, 0);
    let report = caught_at_least(&beyond, 1, "clocks beyond their bound")[0].failure.as_deref().unwrap();
    assert!(report.contains("not sequentially consistent"), "{report}");
    let within = sweep_meteor(None, 12..13, nemesis, SIM_CLOCK_SPREAD_MS);
    assert!(caught(&within).is_empty(), "{:?}", caught(&within).first().map(|r| &r.failure));
}

/// θt above the bound measured round trips make safe lets reads miss writes that succeeded longer ago than the
/// least one-way trip between replicas, which the staleness bound of `auto` keeps under. On globlease-4 with ε =
/// 2 ms (no `clock` nemesis), the widest-spread three replicas (or, ir, tk) are at least 100 ms apart, so `auto`
/// counts statuses up to 0.45 × 100 − 2 = 43 ms old: a forced θt of 500 ms misses a write 47 ms old on seed 6,
/// and `auto` stays within the bound on the same seed.
#[test]
fn a_meteor_theta_above_its_bound_is_caught_by_the_staleness_bound() {
    use meridian_core::{MeteorOptions, ProtocolConfig, Theta};
    let sweep = |theta, unsafe_theta| {
        let m = MeteorOptions { clock_bound_ms: 2, theta, unsafe_theta, ..MeteorOptions::default() };
        let default = KeyspaceConfig { protocol: ProtocolConfig::Meteor(m), ..KeyspaceConfig::durable(3) };
        let s = globlease_4(6..7, "", CheckModel::Sequential, default, ProtocolConfigs::default());
        sweep_chain(&ChainSweep { staleness_bound: Some(std::time::Duration::from_millis(43)), ..s }, &|_| {})
    };
    let forced = sweep(Theta::Fixed(500), true);
    let report = caught_at_least(&forced, 1, "θt above its bound")[0].failure.as_deref().unwrap();
    assert!(report.contains("beyond the bound of 43 ms"), "{report}");
    let auto = sweep(Theta::Auto, false);
    assert!(caught(&auto).is_empty(), "{:?}", caught(&auto).first().map(|r| &r.failure));
    assert!(auto[0].staleness.as_ref().is_some_and(|s| s.stale > 0), "auto counts statuses older than the read");
}
