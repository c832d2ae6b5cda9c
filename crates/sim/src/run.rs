//! One simulated run: a cluster, a workload and a nemesis driven from one seed, ending in a history,
//! a trace hash and any invariant or liveness failure. The same seed and commit give the same run.

use crate::nemesis::{FaultKind, Nemesis, NemesisStats, ADMIN_CLIENT};
use crate::net::{NetParams, Network, Placement};
use crate::rng::SimRng;
use crate::workload::{Phases, Workload, WorkloadParams};
use crate::world::{DiskParams, Event, Hooks, World, WorldStats};
use meridian_check::History;
use meridian_core::topology::Topology;
use meridian_core::{NodeId, Process};
use meridian_proto::protocol::Capabilities;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct RunOptions {
    pub seed: u64,
    /// Nodes of the initial cluster, booted at the start.
    pub nodes: usize,
    /// Further nodes, started by the `join` nemesis.
    pub spares: usize,
    /// Affiliated nodes (seed 001 §4.1.4), booted at the start after the spares' ids, each joining as one of
    /// an initial node in turn, in its region.
    pub affiliates: usize,
    pub nemesis: Vec<FaultKind>,
    /// How long faults are injected; with `isolate` among them, at least twice the isolation time.
    pub faults: Duration,
    /// How long the `isolate` fault cuts a node off (see [`FaultKind::Isolate`]).
    pub isolation: Duration,
    /// After the faults end, how long the cluster gets to heal before every operation must succeed.
    pub grace: Duration,
    /// How long, once progress is required, every key may take to show a successful write and read.
    pub liveness: Duration,
    /// A run that handles more events than this is reported as a livelock.
    pub max_events: u64,
    /// How long a client waits for an answer before recording the outcome as unknown.
    pub client_timeout: Duration,
    /// The `default` keyspace is a cache keyspace: any value in it may be evicted.
    pub default_evicts: bool,
    /// What the `default` keyspace's protocol takes besides plain reads, puts and deletes: the workload sends
    /// no SET NX, time to live or SCAN that it would refuse.
    pub capabilities: Capabilities,
    /// Print every input each node handles, and every fault, to stderr.
    pub trace: bool,
    /// Regions and links to place the nodes in, in turn, instead of a network drawn from the seed.
    pub topology: Option<Arc<Topology>>,
    /// How many times apart faults come, and how much longer the fault phase lasts, than on a LAN: a cluster
    /// over a WAN runs a slower manager (`sweep::fit_timings`), which takes as much longer to recover from each
    /// fault, so at the LAN's pace it would spend the run in recovery and serve almost nothing.
    pub fault_pace: u32,
    /// The regions the `migrate` fault moves the `default` keyspace's master among (its placement's, when it is
    /// a lease keyspace).
    pub master_regions: Vec<String>,
    /// On a topology, clients of a region without nodes talk to the nearest region's nodes rather than any
    /// (`Workload::staying_near`).
    pub clients_near: bool,
}

impl RunOptions {
    pub fn new(seed: u64, nemesis: Vec<FaultKind>) -> RunOptions {
        RunOptions {
            seed,
            nodes: 3,
            spares: 0,
            affiliates: 0,
            nemesis,
            faults: Duration::from_secs(10),
            isolation: Duration::from_secs(15),
            grace: Duration::from_secs(3),
            liveness: Duration::from_secs(30),
            max_events: 5_000_000,
            client_timeout: Duration::from_secs(3),
            default_evicts: false,
            capabilities: Capabilities { conditional: true, expiry: true, scan: true },
            trace: false,
            topology: None,
            fault_pace: 1,
            master_regions: Vec::new(),
            clients_near: false,
        }
    }
}

#[derive(Debug)]
pub struct RunReport {
    pub seed: u64,
    pub trace_hash: u64,
    /// Virtual time the run lasted.
    pub elapsed_ns: u64,
    pub history: History,
    pub world: WorldStats,
    pub nemesis: NemesisStats,
    pub enabled: Vec<FaultKind>,
    /// The protocol's own counters summed over every node life (see [`Counters`](crate::world::Counters)).
    pub counters: BTreeMap<&'static str, u64>,
    /// An invariant breach, a node that could not recover, a livelock or a stall after healing.
    pub failure: Option<String>,
}

pub fn node_ids(n: usize) -> Vec<NodeId> {
    (1..=n as u32).map(NodeId).collect()
}

impl RunOptions {
    /// Every node of the run: the initial ones, the spares, then the affiliated ones.
    fn ids(&self) -> Vec<NodeId> {
        node_ids(self.nodes + self.spares + self.affiliates)
    }

    /// The host of each affiliated node: the initial nodes in turn.
    pub fn hosts(&self) -> BTreeMap<NodeId, NodeId> {
        let first = self.nodes + self.spares;
        let host = |i: usize| NodeId((i % self.nodes.max(1)) as u32 + 1);
        (0..self.affiliates).map(|i| (NodeId((first + i) as u32 + 1), host(i))).collect()
    }
}

/// Where the nodes sit this run: usually one zone, sometimes spread over zones or regions.
fn placements(ids: &[NodeId], rng: &mut SimRng) -> BTreeMap<NodeId, Placement> {
    let spread = rng.unit();
    ids.iter()
        .enumerate()
        .map(|(i, &id)| {
            let p = match spread {
                s if s < 0.7 => Placement { region: 0, zone: 0 },
                s if s < 0.9 => Placement { region: 0, zone: i as u32 },
                _ => Placement { region: i as u32, zone: 0 },
            };
            (id, p)
        })
        .collect()
}

/// The network a run's seed draws: its speeds and where every node sits.
pub fn topology(opts: &RunOptions) -> (NetParams, BTreeMap<NodeId, Placement>) {
    let mut topo = SimRng::new(opts.seed).derive("topology");
    let params = NetParams { topology: opts.topology.clone(), ..NetParams::random(&mut topo) };
    let ids = node_ids(opts.nodes + opts.spares);
    let mut placed = match &opts.topology {
        // Node k in region k mod n: every region gets nodes, and a chain of R ≤ n spans R regions.
        Some(t) => {
            let n = t.regions().len();
            let placed = ids.iter().enumerate().map(|(i, &id)| (id, Placement { region: (i % n) as u32, zone: 0 }));
            (params, placed.collect())
        }
        None => (params, placements(&ids, &mut topo)),
    };
    place_beside_hosts(&mut placed.1, &opts.hosts());
    placed
}

/// Places each affiliated node of `hosts` where its host is.
pub fn place_beside_hosts(placements: &mut BTreeMap<NodeId, Placement>, hosts: &BTreeMap<NodeId, NodeId>) {
    for (a, host) in hosts {
        placements.insert(*a, placements[host]);
    }
}

pub fn run<P: Process>(opts: &RunOptions, hooks: Hooks<P>) -> RunReport {
    let root = SimRng::new(opts.seed);
    let ids = opts.ids();
    let (params, placements) = topology(opts);
    let net = Network::new(params, placements, root.derive("net"));
    let disk = DiskParams::random(&mut root.derive("disk"));
    let mut world = World::new(&ids, net, disk, root.derive("world"), hooks);
    world.tracing = opts.trace;
    let ms = |d: Duration| d.as_nanos() as u64;
    let isolates = opts.nemesis.iter().any(|k| matches!(k, FaultKind::Isolate | FaultKind::Region));
    let paced = opts.faults * opts.fault_pace;
    let faults = if isolates { paced.max(opts.isolation * 2) } else { paced };
    let phases = Phases {
        faults_end: ms(faults),
        must_progress: ms(faults + opts.grace),
        deadline: ms(faults + opts.grace + opts.liveness),
    };
    let power_loss = opts.nemesis.iter().any(|k| k.is_power_loss());
    let mut params = WorkloadParams::random(&mut root.derive("workload-params"), opts.client_timeout, power_loss);
    params.default_evicts = opts.default_evicts;
    if opts.affiliates > 0 {
        // Affiliated nodes serve read-dominant loads (seed 001 §4.1.4): 70 to 94% reads rather than 20 to 80%.
        params.read_ratio = 0.7 + (params.read_ratio - 0.2) * 0.4;
    }
    let can = opts.capabilities;
    if !can.conditional {
        params.nx_ratio = 0.0;
    }
    if !can.expiry {
        params.ttl_ratio = 0.0;
    }
    if !can.scan {
        params.scan_ratio = 0.0;
    }
    let drain = phases.deadline + ms(params.timeout) + ms(Duration::from_secs(1));
    let mut workload = Workload::new(params, phases, root.derive("workload"), ids.clone());
    if let Some(t) = &opts.topology {
        workload.in_regions(t.regions().len() as u32);
        if opts.clients_near {
            workload.staying_near(t);
        }
        if opts.nemesis.contains(&FaultKind::Origins) {
            workload.writing_own_keys();
        }
    }
    let mut nemesis = Nemesis::new(&opts.nemesis, root.derive("nemesis"), opts.spares, opts.isolation, opts.fault_pace)
        .migrating(opts.master_regions.clone());
    ids[..opts.nodes].iter().chain(opts.hosts().keys()).for_each(|&id| world.boot(id));
    workload.start(&mut world);
    nemesis.start(&mut world, phases.faults_end);
    let mut failure = None;
    while let Some(event) = world.pop(drain) {
        if world.stats.events > opts.max_events {
            failure = Some(format!("livelock: more than {} events without finishing", opts.max_events));
            break;
        }
        match world.handle(event) {
            None => {}
            Some(Event::Client(e)) => workload.handle(e, &mut world),
            Some(Event::Response { client: ADMIN_CLIENT, .. }) => {}
            Some(Event::Response { client, op, reply }) => workload.on_response(client, op, reply, &mut world),
            Some(Event::Fault(f)) => {
                if opts.trace {
                    eprintln!("{} fault {f:?}", world.now() / 1_000);
                }
                nemesis.handle(f, &mut world)
            }
            Some(other) => unreachable!("node event escaped the world: {other:?}"),
        }
        if world.failure.is_some() || workload.done() {
            break;
        }
    }
    let failure = world.failure.take().or(failure).or(workload.failure());
    let failure = failure
        .map(|f| format!("{f}\nnetwork: {}\nnodes when the run stopped:\n{}", world.net.describe(), world.describe()));
    world.finish_counters();
    workload.set_aside(|keyspace, key| world.restored(keyspace, key));
    world.totals.extend(workload.keyspace_counters());
    RunReport {
        seed: opts.seed,
        trace_hash: world.trace_hash(),
        elapsed_ns: world.now(),
        history: workload.finish(),
        world: world.stats,
        nemesis: nemesis.stats,
        enabled: nemesis.enabled(),
        counters: std::mem::take(&mut world.totals),
        failure,
    }
}
