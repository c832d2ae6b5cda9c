//! Seeds that once failed, each run again with the configuration that found it. A seed's run changes whenever
//! the code it exercises does, so these are no proof on their own (each cause has a test of its own next to the
//! code it fixed); they keep the exact runs that exposed each bug passing.

use meridian_core::{KeyspaceConfig, ReplicaKind, UpdateMode};
use meridian_proto::node::NodeConfig;
use meridian_sim::parse_kinds;
use meridian_sim::sweep::{sweep_chain, ChainSweep, CheckModel};

/// The sweeps of the defects and stuck-chains issues: every fault the simulator has.
const EVERY_FAULT: &str = "crash,partition,pause,clock,join,leave,manager,kill,stop,isolate";

fn seed(seed: u64, nemesis: &str, default: KeyspaceConfig) -> ChainSweep {
    ChainSweep {
        seeds: seed..seed + 1,
        nemesis: parse_kinds(nemesis).unwrap(),
        check: CheckModel::claimed(&default),
        nodes: 3,
        spares: 2,
        affiliates: 0,
        default,
        vnodes: 4,
        node: NodeConfig::default(),
        threads: 1,
        trace: false,
        topology: None,
        staleness_bound: None,
        clients_near: false,
    }
}

fn passes(s: &ChainSweep) {
    for r in sweep_chain(s, &|_| {}) {
        assert!(r.failure.is_none(), "seed {}: {}", r.seed, r.failure.unwrap_or_default());
    }
}

/// Seed 160: a sync while a sync job was out skipped its fsync (`store: a sync while a sync job is out fsyncs
/// itself`).
#[test]
fn seed_160_a_sync_with_a_job_out() {
    passes(&seed(160, "crash,partition,pause,clock,join,leave,manager", KeyspaceConfig::durable(3)));
}

/// Seeds 500018 and 901013: a lost replica trusted again after a clean stop (`chain: a lost replica stays lost
/// across restarts`).
#[test]
fn seeds_500018_and_901013_a_lost_replica_forgotten() {
    for s in [500_018, 901_013] {
        passes(&seed(s, EVERY_FAULT, KeyspaceConfig::durable(3)));
    }
}

/// Seeds 930242, 930315, 930383, 930384 (a restore refused for a lost log member), 930394, 930555, 930746 (early
/// forwarding and draining that left no durable copy), 931742 (a restored replica left inactive), 9741457 (the
/// last whole log replica removed after the other was lost: `map: the last whole durable replica is never
/// removed`) and 1015072 (a departed node's only log copy given up), on `mem,log` and the default keyspace.
#[test]
fn memory_and_disk_chain_seeds() {
    let md = || KeyspaceConfig::with_replicas(vec![ReplicaKind::Mem, ReplicaKind::Log]);
    for s in [930_242, 930_315, 930_383, 930_384, 930_394, 930_555, 930_746, 931_742, 9_741_457] {
        passes(&seed(s, EVERY_FAULT, md()));
    }
    passes(&seed(1_015_072, EVERY_FAULT, KeyspaceConfig::durable(3)));
}

/// Seeds 940134 (the chain property), 940149 and 940447 (the checker gave up), 1402885 (a second flush that
/// dropped an update from memory) and 9402621 (a lost replica's drop not durable when the node forgot it was
/// lost: `node: a lost replica is forgotten only once its drop is durable`), on a cache keyspace.
#[test]
fn cache_seeds() {
    let cache = || KeyspaceConfig { maxmemory: Some(4096), update: UpdateMode::Su, ..KeyspaceConfig::durable(3) };
    for s in [940_134, 940_149, 940_447, 1_402_885, 9_402_621] {
        passes(&seed(s, EVERY_FAULT, cache()));
    }
}

/// The lease keyspace's seeds (docs/protocols/lease.md): 8 (a stale version of a failed write answered after the
/// master committed an older one), 43 (a late acknowledgement's lease never recorded), 93 (a restarted master's
/// confirmations continuing an old run), 10204287 (a mastery restarted without its records), 10404355 (a
/// replica taking back a version it had acknowledged), 10601952 and 10604917 (two runs of one master numbering
/// two writes alike), 22104513 (a cut-off master serving on its old majority's promises after two configuration
/// changes gave the partition a new master; fenced by the manager's lease); and 10100921, 10104301 (an old run's confirmations), 10800306 and 10804280 (a late commit
/// handing back a lease the replica had released), 21003606 (a master taking over again answering a copied
/// version while a replica's lease from its earlier mastery still served the one before) on `globlease-4`; and
/// with `region,migrate` there, 141 (a replica with no map released a push, then took a lease on the old value,
/// and the write committed without it), 694 without spares (a new master numbered below a version its
/// predecessor had pushed to a minority, which a later takeover preferred) and 36102868 without spares (a key
/// pinned to the domain it was in left a write-back pushing an older table, which every holder refused); with
/// every fault and `region,migrate`, 38100777 (a node standing in for a pinned region with no live holder got
/// no manager's lease); with `crash,partition,pause,clock,manager,kill,region,migrate,origins`, 54000108 (a
/// write-back that two of four holders released, by maps that lagged the master's, was never pushed again, and
/// its domain served nothing).
#[test]
fn lease_seeds() {
    use meridian_core::{Placement, Protocol, ProtocolConfig};
    let lease = |placement: Placement| KeyspaceConfig {
        protocol: ProtocolConfig::default_for(Protocol::Lease),
        replicas: vec![ReplicaKind::Log; placement.placed().unwrap() as usize],
        placement,
        ..KeyspaceConfig::durable(3)
    };
    let short = "crash,partition,pause,clock";
    let seeds = [(8, short), (43, short), (93, "crash,partition,pause,clock,isolate")];
    let every = [10_204_287, 10_404_355, 10_601_952, 10_604_917, 22_104_513, 25_103_278].map(|s| (s, EVERY_FAULT));
    for (s, nemesis) in seeds.into_iter().chain(every) {
        passes(&seed(s, nemesis, lease(Placement::per_region("default=3").unwrap())));
    }
    // As `sim --protocol lease --topology globlease-4` places it: a replica in each region, in the topology's order.
    let topology = std::sync::Arc::new(meridian_core::topology::Topology::load("globlease-4").unwrap());
    let regions: Vec<&str> = topology.regions().iter().map(|r| r.name.as_str()).collect();
    let placement = Placement::one_in_each(&regions.join(",")).unwrap();
    let nemesis = format!("{EVERY_FAULT},region");
    for s in [10_100_921, 10_104_301, 10_800_306, 10_804_280, 21_003_606] {
        let sweep = seed(s, &nemesis, lease(placement.clone()));
        passes(&ChainSweep { nodes: 4, topology: Some(topology.clone()), ..sweep });
    }
    for (s, spares) in [(141, 2), (694, 0), (36_102_868, 0)] {
        let sweep = seed(s, "region,migrate", lease(placement.clone()));
        passes(&ChainSweep { nodes: 4, spares, topology: Some(topology.clone()), ..sweep });
    }
    let sweep = seed(38_100_777, &format!("{nemesis},migrate"), lease(placement.clone()));
    passes(&ChainSweep { nodes: 4, topology: Some(topology.clone()), ..sweep });
    let faults = "crash,partition,pause,clock,manager,kill,region,migrate,origins";
    let sweep = seed(54_000_108, faults, lease(placement.clone()));
    passes(&ChainSweep { nodes: 4, topology: Some(topology.clone()), ..sweep });
}

/// The meteor keyspace's seeds on `globlease-4` (docs/protocols/meteor.md), each with its clock bound at the
/// simulator's clock spread: 3100405 (a write resent with its version was rejected by replicas that had taken it
/// in its first attempt and a newer one since, and failed though reads had returned it) and 3100225 (a restarted
/// node's statuses ignored because its new run was numbered below its old one: runs are numbered at random).
#[test]
fn meteor_seeds() {
    use meridian_core::{MeteorOptions, ProtocolConfig};
    let meteor = MeteorOptions { clock_bound_ms: 200, ..MeteorOptions::default() };
    let default = KeyspaceConfig { protocol: ProtocolConfig::Meteor(meteor), ..KeyspaceConfig::durable(3) };
    let topology = std::sync::Arc::new(meridian_core::topology::Topology::load("globlease-4").unwrap());
    for s in [3_100_405, 3_100_225] {
        let sweep = seed(s, "crash,partition,pause,clock,region", default.clone());
        passes(&ChainSweep { nodes: 4, topology: Some(topology.clone()), ..sweep });
    }
}

/// The quorum keyspace's seed 78000059 on `canopus-7` (ABD at QUORUM, every fault and `region`): a read's
/// write-back stored on 2 of a partition's 4 replicas while one of them was being removed, and gone once it was
/// (`Config::staying_need` in `quorum/mod.rs`: a store during a Remove also waits for the replicas that stay).
#[test]
fn quorum_seeds() {
    use meridian_core::{Level, ProtocolConfig, QuorumOptions, Stamps};
    let abd = QuorumOptions { read: Level::Quorum, write: Level::Quorum, timestamps: Stamps::Quorum };
    let default = KeyspaceConfig { protocol: ProtocolConfig::Quorum(abd), ..KeyspaceConfig::durable(3) };
    let topology = std::sync::Arc::new(meridian_core::topology::Topology::load("canopus-7").unwrap());
    let sweep = seed(78_000_059, &format!("{EVERY_FAULT},region"), default);
    passes(&ChainSweep { nodes: 7, topology: Some(topology), ..sweep });
}
