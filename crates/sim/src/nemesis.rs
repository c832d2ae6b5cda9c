//! Faults, swarm-randomised per seed: each run enables a random subset of the requested fault kinds,
//! each at its own random rate, so that over many seeds both rare combinations and dense storms occur.
//! All faults here are inside the chain protocol's fault model (crash-restart with a durable disk,
//! lost messages, partitions, pauses, clock offsets and drift, membership changes, manager failover);
//! none corrupts synced data. Keyspaces in `async` durability are outside it for power losses (`crash`,
//! `manager`), which may take back their acknowledged writes; `kill` is their fault model.

use crate::clock::WALL_ERROR_MS;
use crate::rng::SimRng;
use crate::world::{Event, World};
use meridian_core::keyspace::DEFAULT_KEYSPACE;
use meridian_core::{Admin, NodeId, Process, Request};
use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    /// Power loss on a node, restart later from what its disk kept.
    Crash,
    /// Symmetric splits, one-node isolation, one-way cuts and connection resets.
    Partition,
    /// The node stops handling events for a while (GC pause, SIGSTOP), then catches up.
    Pause,
    /// Initial offsets and drift per node, and changes of a node's drift (see `clock.rs`).
    Clock,
    /// A spare node starts and asks to join the cluster.
    Join,
    /// An operator asks the manager to drain a node and remove it (at most as many as there are spares).
    Leave,
    /// The node leading the cluster manager crashes (power loss) and restarts later.
    Manager,
    /// A process crash (SIGKILL, OOM kill): the node restarts later from what it handed to the OS, which
    /// survives in the page cache whether synced or not.
    Kill,
    /// A clean shutdown (SIGTERM) and a restart later: every write is made durable and what waited for that is
    /// carried out before the node stops; the power may then go while it is down.
    Stop,
    /// A live node is cut off from every other node, though not from clients, for longer than the manager takes
    /// to declare it failed, move its chains on and grant their new tails leases (the run's isolation time). It
    /// is the fault tail leases exist for: a tail removed without knowing keeps getting clients' reads. No other
    /// partition starts or heals meanwhile.
    Isolate,
    /// Every node of one region is cut off from every node of the others, both ways, and the cut heals later
    /// (a transatlantic fibre cut, a region's uplink failing). Clients still reach every node.
    Region,
    /// An operator moves the `default` keyspace's master, or one of its keys' (half the time each), to another
    /// of its regions (`ctl keyspace master`), when it is a lease keyspace over several regions
    /// ([`Nemesis::migrating`]); nothing otherwise.
    Migrate,
    /// An operator asks for other manager voters (`ctl manager voters --set`): three of the nodes started so far,
    /// or one, or the manager's own choice again; a node among them may be down, or gone.
    Voters,
    /// Not a fault but a bias of the workload: on a topology, each client writes its own region's key four
    /// times in five, so that lease masters move keys to the region their writes come from by themselves
    /// (`lease/origins.rs`). The nemesis injects nothing for it.
    Origins,
}

impl FaultKind {
    /// Whether the fault loses the page cache: what async durability does not protect against.
    pub fn is_power_loss(self) -> bool {
        matches!(self, FaultKind::Crash | FaultKind::Manager)
    }
}

/// The client id under which the nemesis sends administration requests; their answers are ignored.
pub const ADMIN_CLIENT: usize = usize::MAX;

/// A name in a nemesis list that is not one of the fault kinds.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "unknown nemesis {0:?}; expected crash, partition, pause, clock, join, leave, manager, kill, stop, isolate, region, \
     migrate, voters or origins"
)]
pub struct UnknownFault(pub String);

impl FromStr for FaultKind {
    type Err = UnknownFault;

    fn from_str(s: &str) -> Result<Self, UnknownFault> {
        match s.trim() {
            "crash" => Ok(FaultKind::Crash),
            "partition" => Ok(FaultKind::Partition),
            "pause" => Ok(FaultKind::Pause),
            "clock" => Ok(FaultKind::Clock),
            "join" => Ok(FaultKind::Join),
            "leave" => Ok(FaultKind::Leave),
            "manager" => Ok(FaultKind::Manager),
            "kill" => Ok(FaultKind::Kill),
            "stop" => Ok(FaultKind::Stop),
            "isolate" => Ok(FaultKind::Isolate),
            "region" => Ok(FaultKind::Region),
            "migrate" => Ok(FaultKind::Migrate),
            "voters" => Ok(FaultKind::Voters),
            "origins" => Ok(FaultKind::Origins),
            other => Err(UnknownFault(other.into())),
        }
    }
}

/// Parses a comma-separated nemesis list such as `crash,partition,pause,clock` (empty: none).
pub fn parse_kinds(list: &str) -> Result<Vec<FaultKind>, UnknownFault> {
    list.split(',').filter(|s| !s.trim().is_empty()).map(FaultKind::from_str).collect()
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    Inject(FaultKind),
    Restart(NodeId),
    Resume(NodeId),
    Heal,
    /// Faults stop: heal the network, resume paused nodes, restart crashed ones.
    End,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct NemesisStats {
    pub crashes: u64,
    pub partitions: u64,
    pub pauses: u64,
    pub drift_changes: u64,
    pub wall_steps: u64,
    pub joins: u64,
    pub leaves: u64,
    pub manager_crashes: u64,
    pub kills: u64,
    pub stops: u64,
    pub isolations: u64,
    pub region_cuts: u64,
    pub migrations: u64,
    pub key_moves: u64,
    pub voter_moves: u64,
}

pub struct Nemesis {
    /// Enabled kinds and the mean gap between two of them.
    rates: BTreeMap<FaultKind, Duration>,
    rng: SimRng,
    active: bool,
    /// Leaves still allowed, so the cluster never shrinks below its initial size.
    leave_budget: usize,
    /// How long `isolate` cuts a node off.
    isolation: Duration,
    /// Virtual time until which an isolation holds: no other partition starts or heals before it.
    isolated_until: u64,
    /// The regions `migrate` moves the `default` keyspace's master among.
    master_regions: Vec<String>,
    pub stats: NemesisStats,
}

impl Nemesis {
    /// Draws which of the `requested` kinds this run injects and how often, each mean gap `pace` times the
    /// LAN's (`RunOptions::fault_pace`).
    pub fn new(
        requested: &[FaultKind],
        mut rng: SimRng,
        leave_budget: usize,
        isolation: Duration,
        pace: u32,
    ) -> Nemesis {
        let requested: Vec<FaultKind> = requested.iter().copied().filter(|&k| k != FaultKind::Origins).collect();
        let mut rates = BTreeMap::new();
        let gap = |rng: &mut SimRng| rng.duration(Duration::from_millis(150), Duration::from_secs(3)) * pace;
        for &kind in &requested {
            if rng.chance(0.8) {
                rates.insert(kind, gap(&mut rng));
            }
        }
        if rates.is_empty() && !requested.is_empty() {
            let kind = requested[rng.index(requested.len())];
            rates.insert(kind, gap(&mut rng));
        }
        Nemesis {
            rates,
            rng,
            active: true,
            leave_budget,
            isolation,
            isolated_until: 0,
            master_regions: Vec::new(),
            stats: NemesisStats::default(),
        }
    }

    /// Lets `migrate` move the `default` keyspace's master among `regions` (a lease keyspace's placement).
    pub fn migrating(mut self, regions: Vec<String>) -> Nemesis {
        self.master_regions = regions;
        self
    }

    pub fn enabled(&self) -> Vec<FaultKind> {
        self.rates.keys().copied().collect()
    }

    pub fn start<P: Process>(&mut self, world: &mut World<P>, faults_end: u64) {
        if self.rates.contains_key(&FaultKind::Clock) {
            for id in world.node_ids() {
                let offset = self.rng.range(0, 20_000_000_000);
                let drift = self.drift();
                *world.clock_mut(id) = crate::clock::Clock::new(offset, drift);
                let wall = self.wall_error();
                world.clock_mut(id).step_wall(wall);
            }
        }
        let rates: Vec<(FaultKind, Duration)> = self.rates.iter().map(|(&k, &d)| (k, d)).collect();
        for (kind, mean) in rates {
            let at = world.now() + self.rng.exp(mean).as_nanos() as u64;
            world.schedule(at, Event::Fault(Fault::Inject(kind)));
        }
        world.schedule(faults_end, Event::Fault(Fault::End));
    }

    pub fn handle<P: Process>(&mut self, fault: Fault, world: &mut World<P>) {
        match fault {
            Fault::Inject(kind) if self.active => {
                self.inject(kind, world);
                let at = world.now() + self.rng.exp(self.rates[&kind]).as_nanos() as u64;
                world.schedule(at, Event::Fault(Fault::Inject(kind)));
            }
            Fault::Inject(_) => {}
            Fault::Restart(node) => {
                if !world.is_up(node) {
                    world.boot(node);
                }
            }
            Fault::Resume(node) => world.resume(node),
            Fault::Heal if world.now() >= self.isolated_until => world.net.heal_all(),
            Fault::Heal => {}
            Fault::End => self.end(world),
        }
    }

    fn end<P: Process>(&mut self, world: &mut World<P>) {
        self.active = false;
        world.net.heal_all();
        for id in world.node_ids() {
            if world.is_paused(id) {
                world.resume(id);
            }
            if !world.is_up(id) && world.was_started(id) {
                world.boot(id);
            }
        }
    }

    /// A clock rate error within ±500 ppm.
    fn drift(&mut self) -> i64 {
        self.rng.range(0, 1001) as i64 - 500
    }

    /// A wall clock error within ±[`WALL_ERROR_MS`].
    fn wall_error(&mut self) -> i64 {
        self.rng.range(0, 2 * WALL_ERROR_MS + 1) as i64 - WALL_ERROR_MS as i64
    }

    fn later(&mut self, world: &World<impl Process>, lo: Duration, hi: Duration) -> u64 {
        world.now() + self.rng.duration(lo, hi).as_nanos() as u64
    }

    fn inject<P: Process>(&mut self, kind: FaultKind, world: &mut World<P>) {
        let ids = world.node_ids();
        let node = ids[self.rng.index(ids.len())];
        match kind {
            FaultKind::Crash if world.is_up(node) => {
                self.crash(node, world);
                self.stats.crashes += 1;
            }
            FaultKind::Kill if world.is_up(node) => {
                world.kill(node);
                self.restart_later(node, world);
                self.stats.kills += 1;
            }
            FaultKind::Stop if world.is_up(node) && !world.is_paused(node) => {
                world.stop_cleanly(node);
                self.restart_later(node, world);
                self.stats.stops += 1;
            }
            FaultKind::Manager => {
                if let Some(&leader) = world.leaders().first() {
                    self.crash(leader, world);
                    self.stats.manager_crashes += 1;
                }
            }
            FaultKind::Join => {
                if let Some(spare) = ids.iter().copied().find(|&id| !world.was_started(id)) {
                    world.boot(spare);
                    self.stats.joins += 1;
                }
            }
            FaultKind::Leave if self.leave_budget > 0 && world.is_up(node) => {
                self.leave_budget -= 1;
                let to = ids[self.rng.index(ids.len())];
                world.client_send(ADMIN_CLIENT, 0, to, Request::Admin(Admin::RemoveNode { id: node }));
                self.stats.leaves += 1;
            }
            FaultKind::Pause if world.is_up(node) && !world.is_paused(node) => {
                world.pause(node);
                self.stats.pauses += 1;
                let at = self.later(world, Duration::from_millis(5), Duration::from_millis(1500));
                world.schedule(at, Event::Fault(Fault::Resume(node)));
            }
            FaultKind::Partition if world.now() >= self.isolated_until => {
                self.partition(&ids, world);
                self.stats.partitions += 1;
                let at = self.later(world, Duration::from_millis(50), Duration::from_secs(3));
                world.schedule(at, Event::Fault(Fault::Heal));
            }
            FaultKind::Clock if self.rng.unit() < 0.5 => {
                let (now, drift) = (world.now(), self.drift());
                world.clock_mut(node).set_drift(now, drift);
                self.stats.drift_changes += 1;
            }
            FaultKind::Clock => {
                let wall = self.wall_error();
                world.clock_mut(node).step_wall(wall);
                self.stats.wall_steps += 1;
            }
            FaultKind::Region if world.now() >= self.isolated_until => {
                self.cut_region(node, &ids, world);
                self.stats.region_cuts += 1;
            }
            FaultKind::Migrate if self.master_regions.len() > 1 => {
                let region = self.master_regions[self.rng.index(self.master_regions.len())].clone();
                let name = DEFAULT_KEYSPACE.to_string();
                let admin = if self.rng.chance(0.5) {
                    self.stats.migrations += 1;
                    Admin::SetMasterRegion { name, region }
                } else {
                    // The workload's keys are k0, k1, ... (fewer than six).
                    self.stats.key_moves += 1;
                    let key = format!("k{}", self.rng.index(6)).into();
                    Admin::SetKeyMaster { name, key, region }
                };
                world.client_send(ADMIN_CLIENT, 0, node, Request::Admin(admin));
            }
            FaultKind::Voters => {
                let voters = self.voters(&ids, world);
                world.client_send(ADMIN_CLIENT, 0, node, Request::Admin(Admin::SetVoters { voters }));
                self.stats.voter_moves += 1;
            }
            FaultKind::Isolate if world.is_up(node) && world.now() >= self.isolated_until => {
                world.net.heal_all();
                isolate(node, &ids, world);
                self.isolated_until = world.now() + self.isolation.as_nanos() as u64;
                world.schedule(self.isolated_until, Event::Fault(Fault::Heal));
                self.stats.isolations += 1;
            }
            FaultKind::Crash
            | FaultKind::Kill
            | FaultKind::Stop
            | FaultKind::Pause
            | FaultKind::Leave
            | FaultKind::Partition
            | FaultKind::Isolate
            | FaultKind::Region
            | FaultKind::Migrate
            | FaultKind::Origins => {}
        }
    }

    /// The voters `voters` asks for: none (the manager's choice) a quarter of the time, else three of the nodes
    /// started so far (one where fewer, and one time in five).
    fn voters<P: Process>(&mut self, ids: &[NodeId], world: &World<P>) -> Vec<NodeId> {
        if self.rng.chance(0.25) {
            return Vec::new();
        }
        let mut started: Vec<NodeId> = ids.iter().copied().filter(|&id| world.was_started(id)).collect();
        let count = if started.len() >= 3 && self.rng.chance(0.8) { 3 } else { 1 };
        (0..count).map(|_| started.swap_remove(self.rng.index(started.len()))).collect()
    }

    /// Cuts `node`'s region off from the others until a heal between a fraction of a second and the run's
    /// isolation time (long enough for the manager to declare the region's nodes failed and repair around them).
    fn cut_region<P: Process>(&mut self, node: NodeId, ids: &[NodeId], world: &mut World<P>) {
        world.net.heal_all();
        let region = world.net.region_of(node);
        let (inside, outside): (Vec<NodeId>, Vec<NodeId>) =
            ids.iter().partition(|&&o| world.net.region_of(o) == region);
        for (&a, &b) in inside.iter().flat_map(|a| outside.iter().map(move |b| (a, b))) {
            world.net.cut(a, b);
            world.net.cut(b, a);
        }
        let longest = self.isolation.max(Duration::from_secs(1));
        let at = self.later(world, Duration::from_millis(200), longest);
        world.schedule(at, Event::Fault(Fault::Heal));
    }

    fn crash<P: Process>(&mut self, node: NodeId, world: &mut World<P>) {
        world.crash(node);
        self.restart_later(node, world);
    }

    fn restart_later<P: Process>(&mut self, node: NodeId, world: &mut World<P>) {
        let at = self.later(world, Duration::from_millis(10), Duration::from_secs(2));
        world.schedule(at, Event::Fault(Fault::Restart(node)));
    }

    /// Replaces any current partition with a new one of a random shape.
    fn partition<P: Process>(&mut self, ids: &[NodeId], world: &mut World<P>) {
        world.net.heal_all();
        let pick = |rng: &mut SimRng| ids[rng.index(ids.len())];
        match self.rng.index(4) {
            0 => {
                let lone = pick(&mut self.rng);
                isolate(lone, ids, world);
            }
            1 => {
                let side: Vec<bool> = ids.iter().map(|_| self.rng.chance(0.5)).collect();
                for (i, &a) in ids.iter().enumerate() {
                    for (j, &b) in ids.iter().enumerate() {
                        if side[i] != side[j] {
                            world.net.cut(a, b);
                        }
                    }
                }
            }
            2 => {
                let (a, b) = (pick(&mut self.rng), pick(&mut self.rng));
                if a != b {
                    world.net.cut(a, b);
                }
            }
            _ => {
                let (a, b) = (pick(&mut self.rng), pick(&mut self.rng));
                world.net.break_link(a, b);
            }
        }
    }
}

/// Cuts `lone` off from every other node, both ways.
fn isolate<P: Process>(lone: NodeId, ids: &[NodeId], world: &mut World<P>) {
    for &o in ids.iter().filter(|&&o| o != lone) {
        world.net.cut(lone, o);
        world.net.cut(o, lone);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nemesis_lists() {
        assert_eq!(parse_kinds("crash, pause").unwrap(), vec![FaultKind::Crash, FaultKind::Pause]);
        assert!(parse_kinds("").unwrap().is_empty());
        assert_eq!(parse_kinds("crash, meteor "), Err(UnknownFault("meteor".into())));
    }

    #[test]
    fn swarm_enables_at_least_one_requested_kind() {
        for seed in 0..50 {
            let n = Nemesis::new(&[FaultKind::Crash, FaultKind::Clock], SimRng::new(seed), 0, Duration::ZERO, 1);
            let enabled = n.enabled();
            assert!(!enabled.is_empty());
            assert!(enabled.iter().all(|k| matches!(k, FaultKind::Crash | FaultKind::Clock)));
        }
    }
}
