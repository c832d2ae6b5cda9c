use super::*;
use crate::manager::map::tests::{addrs, bootstrap_cmd, bootstrapped, encoded};
use crate::manager::map::{Applied, MapCommand, MapError, NodeState};

/// splitmix64: a seeded generator, so every simulated run replays from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// A map driven through commands with every invariant checked after each one.
struct Sim {
    map: ClusterMap,
    limits: PlanLimits,
    /// Every command offered, refused ones included, and its result, to replay for determinism.
    log: Vec<(MapCommand, Result<Applied, MapError>)>,
    /// Step commands that applied: offering one again must be refused.
    applied_steps: Vec<MapCommand>,
}

impl Sim {
    fn new(map: ClusterMap, limits: PlanLimits) -> Sim {
        Sim { map, limits, log: Vec::new(), applied_steps: Vec::new() }
    }

    fn apply(&mut self, cmd: MapCommand) -> Result<Applied, MapError> {
        let before = self.map.clone();
        let result = self.map.apply(&cmd);
        match result {
            Ok(Applied::Changed) => assert_eq!(self.map.epoch, before.epoch + 1),
            _ => assert_eq!(self.map, before, "{cmd:?} -> {result:?} changed the map"),
        }
        if let Err(e) = self.map.check() {
            panic!("after {cmd:?}: {e}\n{:#?}", self.map);
        }
        keeps_a_live_replica(&before, &self.map, &cmd);
        let is_step = matches!(cmd, MapCommand::StepStarted { .. } | MapCommand::StepDone { .. })
            || matches!(cmd, MapCommand::StepAborted { .. });
        if result.is_ok() && is_step {
            self.applied_steps.push(cmd.clone());
        }
        self.log.push((cmd, result.clone()));
        result
    }

    fn start(&mut self, (chain, view, change): (ChainId, u64, ChainChange)) {
        let cmd = MapCommand::StepStarted { chain, expected_view: view, change };
        assert_eq!(self.apply(cmd), Ok(Applied::Changed), "a planned step must start");
    }

    fn planned(&self) -> Vec<(ChainId, u64, ChainChange)> {
        let steps = next_steps_with(&self.map, &self.limits);
        assert_within_limits(&self.map, &steps, self.limits.copies_per_node);
        steps
    }

    /// Completes every step in flight and starts every planned one until nothing is left to do.
    fn drain(&mut self) {
        for _ in 0..1000 {
            let in_flight: Vec<(ChainId, u64)> =
                self.map.chains.values().filter(|c| c.change.is_some()).map(|c| (c.id, c.view)).collect();
            for &(chain, expected_view) in &in_flight {
                assert_eq!(self.apply(MapCommand::StepDone { chain, expected_view }), Ok(Applied::Changed));
            }
            let steps = self.planned();
            if in_flight.is_empty() && steps.is_empty() {
                return;
            }
            steps.into_iter().for_each(|s| self.start(s));
        }
        panic!("the planner did not converge: {:#?}", self.map);
    }
}

/// A chain goes from some live member to none only when its members fail.
fn keeps_a_live_replica(before: &ClusterMap, after: &ClusterMap, cmd: &MapCommand) {
    for (id, b) in &before.chains {
        let had = b.members.iter().any(|&m| before.is_live(m));
        let has = after.chains[id].members.iter().any(|&m| after.is_live(m));
        let failure = matches!(cmd, MapCommand::NodeFailed { .. });
        assert!(!had || has || failure, "chain {id} lost its last live replica to {cmd:?}");
    }
}

/// A planned Add never brings a node above `limit` Adds, counting those in flight. (Steps a stale leader
/// started may already exceed it: the limit is the planner's policy, not a map invariant.)
fn assert_within_limits(map: &ClusterMap, steps: &[(ChainId, u64, ChainChange)], limit: usize) {
    let mut per_node: BTreeMap<NodeId, usize> = BTreeMap::new();
    let mut count = |chain: ChainId, change: &ChainChange| match *change {
        ChainChange::Add { node, .. } => [node, map.chains[&chain].tail().unwrap()].map(|n| {
            *per_node.entry(n).or_default() += 1;
            per_node[&n]
        }),
        ChainChange::Remove { .. } => [0, 0],
    };
    for c in map.chains.values() {
        if let Some(change) = &c.change {
            count(c.id, change);
        }
    }
    for (chain, _, change) in steps {
        let counts = count(*chain, change);
        assert!(counts.iter().all(|&n| n <= limit), "{change:?} on {chain} exceeds {limit} copies per node");
    }
}

fn sorted(nodes: &[NodeId]) -> Vec<NodeId> {
    let mut v = nodes.to_vec();
    v.sort();
    v
}

/// After a drain: every repairable chain holds its target set; nodes are settled unless an irreparable
/// chain or the lack of any placeable node holds them.
fn assert_converged(map: &ClusterMap) {
    let targets = map.targets();
    let broken = irreparable(map);
    for (id, c) in &map.chains {
        let target = &targets[id.0 as usize];
        if broken.contains(id) {
            assert!(c.members.iter().all(|&m| map.state(m) == Some(NodeState::Failed)));
        } else if target.is_empty() {
            assert_eq!(c.members.len(), 1, "chain {id} keeps one replica while nothing is placeable");
        } else {
            assert_eq!(sorted(&c.members), sorted(target), "chain {id} is not at its target");
        }
    }
    for (&id, n) in &map.nodes {
        let held = match n.state {
            NodeState::Active | NodeState::Removed => true,
            NodeState::Joining => {
                targets.iter().zip(&map.chains).any(|(t, (c, _))| t.contains(&id) && broken.contains(c))
            }
            NodeState::Leaving => targets.iter().all(|t| t.is_empty()),
            NodeState::Failed => broken.iter().any(|c| map.chains[c].contains(id)),
        };
        assert!(held, "node {id} is still {}", n.state);
    }
}

fn chains_at_full_target(map: &ClusterMap) -> bool {
    map.targets().iter().zip(map.chains.values()).all(|(t, c)| *t == c.members)
}

#[test]
fn nothing_is_planned_before_bootstrap() {
    assert!(next_steps(&ClusterMap::default()).is_empty());
    assert!(next_steps(&bootstrapped(4, 3, 64)).is_empty(), "a bootstrapped map is at its target");
}

#[test]
fn removal_kinds_follow_position_and_liveness() {
    let mut map = bootstrapped(3, 3, 1);
    let c = map.chains[&ChainId(0)].clone();
    let kinds = |map: &ClusterMap| c.members.iter().map(|&n| removal_kind(map, &c, n).unwrap()).collect::<Vec<_>>();
    assert_eq!(kinds(&map), [Removal::CrHead, Removal::CrMid, Removal::Truncate]);
    map.apply(&MapCommand::NodeFailed { id: c.members[2] }).unwrap();
    assert_eq!(kinds(&map), [Removal::CrHead, Removal::CrMid, Removal::CrTail]);
    assert_eq!(removal_kind(&map, &c, NodeId(9)), None);
}

/// A join only adds the joiner before the old tail and truncates the old replica (§2.5), so every chain
/// ends exactly at its target, order included, and never has fewer than R members.
#[test]
fn a_join_inserts_before_the_tail_then_truncates() {
    let mut sim = Sim::new(bootstrapped(4, 3, 64), PlanLimits::default());
    sim.apply(MapCommand::AddNode { id: NodeId(5), addrs: addrs(5), vnodes: 8 }).unwrap();
    let (mut adds, mut truncates) = (0, 0);
    while !chains_at_full_target(&sim.map) {
        let steps = sim.planned();
        assert!(!steps.is_empty());
        for (chain, view, change) in steps {
            let c = &sim.map.chains[&chain];
            match change {
                ChainChange::Add { node, position, .. } => {
                    assert!(node == NodeId(5) && position < c.members.len());
                    adds += 1;
                }
                ChainChange::Remove { node } => {
                    assert_eq!(removal_kind(&sim.map, c, node), Some(Removal::Truncate));
                    truncates += 1;
                }
            }
            sim.start((chain, view, change));
            let view = sim.map.chains[&chain].view;
            sim.apply(MapCommand::StepDone { chain, expected_view: view }).unwrap();
            assert!(sim.map.chains.values().all(|c| c.members.len() >= 3));
        }
    }
    assert_eq!(adds, truncates);
    assert_eq!(adds, sim.map.chains.values().filter(|c| c.contains(NodeId(5))).count());
    assert_eq!(sim.map.state(NodeId(5)), Some(NodeState::Active));
    assert!(next_steps(&sim.map).is_empty());
}

/// A leave adds the replacement first: no chain drops below R on the way.
#[test]
fn a_leave_drains_without_lowering_replication() {
    let mut sim = Sim::new(bootstrapped(5, 3, 64), PlanLimits { copies_per_node: 1 });
    sim.apply(MapCommand::RemoveNode { id: NodeId(3) }).unwrap();
    while sim.map.state(NodeId(3)) == Some(NodeState::Leaving) {
        for step in sim.planned() {
            let chain = step.0;
            sim.start(step);
            let view = sim.map.chains[&chain].view;
            sim.apply(MapCommand::StepDone { chain, expected_view: view }).unwrap();
            assert!(sim.map.chains.values().all(|c| c.members.len() >= 3));
        }
    }
    assert_eq!(sim.map.state(NodeId(3)), Some(NodeState::Removed));
    sim.drain();
    assert_converged(&sim.map);
}

/// §2.6: a failure first repairs every chain it was in, by position; replacements come after.
#[test]
fn a_failure_is_repaired_before_anything_is_added() {
    let mut sim = Sim::new(bootstrapped(5, 3, 16), PlanLimits::default());
    let failed = NodeId(2);
    sim.apply(MapCommand::NodeFailed { id: failed }).unwrap();
    let steps = sim.planned();
    let hit: Vec<ChainId> = sim.map.chains.values().filter(|c| c.contains(failed)).map(|c| c.id).collect();
    assert_eq!(steps.iter().map(|s| s.0).collect::<Vec<_>>(), hit);
    for (chain, _, change) in &steps {
        let c = &sim.map.chains[chain];
        assert_eq!(*change, ChainChange::Remove { node: failed });
        let expected = match c.position(failed) {
            Some(0) => Removal::CrHead,
            Some(p) if p + 1 == c.members.len() => Removal::CrTail,
            _ => Removal::CrMid,
        };
        assert_eq!(removal_kind(&sim.map, c, failed), Some(expected));
    }
    sim.drain();
    assert_eq!(sim.map.state(failed), Some(NodeState::Removed));
    assert_converged(&sim.map);
    assert!(sim.map.chains.values().all(|c| c.members.len() == 3));
}

#[test]
fn a_chain_whose_members_all_failed_is_irreparable() {
    let mut sim = Sim::new(bootstrapped(3, 1, 4), PlanLimits::default());
    let lost = sim.map.chains[&ChainId(0)].members[0];
    sim.apply(MapCommand::NodeFailed { id: lost }).unwrap();
    let broken: Vec<ChainId> = sim.map.chains.values().filter(|c| c.contains(lost)).map(|c| c.id).collect();
    assert_eq!(irreparable(&sim.map), broken);
    assert!(sim.planned().iter().all(|(c, _, _)| !broken.contains(c)));
    sim.drain();
    assert_eq!(sim.map.state(lost), Some(NodeState::Failed));
    assert_converged(&sim.map);
}

#[test]
fn adds_are_limited_per_node() {
    for copies_per_node in [1, 2, 3] {
        let mut sim = Sim::new(bootstrapped(4, 3, 64), PlanLimits { copies_per_node });
        for i in [5, 6] {
            sim.apply(MapCommand::AddNode { id: NodeId(i), addrs: addrs(i), vnodes: 8 }).unwrap();
        }
        let steps = sim.planned();
        let adds = steps.iter().filter(|s| matches!(s.2, ChainChange::Add { .. })).count();
        assert!(adds >= copies_per_node, "the limit still lets copies run concurrently");
        steps.into_iter().for_each(|s| sim.start(s));
        sim.drain();
        assert_converged(&sim.map);
    }
}

/// One random run: commands interleaved with planned steps, some stale, duplicated or aborted.
fn random_run(seed: u64) -> Sim {
    let mut rng = Rng(seed);
    let n = 1 + rng.below(6) as u32;
    let (r, p, v) = (1 + rng.below(3), [1, 4, 16, 64][rng.below(4)], 1 + rng.below(8) as u32);
    let mut sim = Sim::new(ClusterMap::default(), PlanLimits { copies_per_node: 1 + rng.below(3) });
    sim.apply(bootstrap_cmd(n, r, p, v)).unwrap();
    let mut next_id = n + 1;
    let mut snapshot = sim.map.clone();
    for _ in 0..80 + rng.below(80) {
        match rng.below(100) {
            0..=7 => offer_add(&mut sim, &mut rng, &mut next_id),
            8..=12 => offer_remove(&mut sim, &mut rng),
            13..=16 => offer_failure(&mut sim, &mut rng),
            17..=21 => replay_applied_step(&mut sim, &mut rng),
            22..=25 => plan_from(&mut sim, &snapshot),
            26..=28 => offer_arbitrary_step(&mut sim, &mut rng),
            29..=60 => start_some(&mut sim, &mut rng),
            _ => finish_one(&mut sim, &mut rng),
        }
        if rng.chance(10) {
            snapshot = sim.map.clone();
        }
    }
    sim.drain();
    assert_converged(&sim.map);
    sim
}

fn random_node(sim: &Sim, rng: &mut Rng) -> NodeId {
    let ids: Vec<NodeId> = sim.map.nodes.keys().copied().collect();
    ids[rng.below(ids.len())]
}

fn offer_add(sim: &mut Sim, rng: &mut Rng, next_id: &mut u32) {
    if rng.chance(60) && *next_id <= 12 {
        let id = NodeId(*next_id);
        *next_id += 1;
        let cmd = MapCommand::AddNode { id, addrs: addrs(id.0), vnodes: 1 + rng.below(8) as u32 };
        assert_eq!(sim.apply(cmd), Ok(Applied::Changed));
        return;
    }
    let id = random_node(sim, rng);
    let info = sim.map.nodes[&id].clone();
    if rng.chance(30) {
        let cmd = MapCommand::AddNode { id, addrs: addrs(99), vnodes: info.vnodes };
        assert_eq!(sim.apply(cmd), Err(MapError::IdClash(id)));
        return;
    }
    let expected = match info.state {
        NodeState::Joining | NodeState::Active => Ok(Applied::Unchanged),
        NodeState::Leaving | NodeState::Failed => Err(MapError::NodeBusy { id, state: info.state }),
        NodeState::Removed => Ok(Applied::Changed),
    };
    assert_eq!(sim.apply(MapCommand::AddNode { id, addrs: info.addrs, vnodes: info.vnodes }), expected);
}

fn offer_remove(sim: &mut Sim, rng: &mut Rng) {
    let id = random_node(sim, rng);
    let expected = if sim.map.nodes[&id].state.is_placeable() { Applied::Changed } else { Applied::Unchanged };
    assert_eq!(sim.apply(MapCommand::RemoveNode { id }), Ok(expected));
}

/// Failures that take a chain's last live replica are rare, so most runs stay repairable.
fn offer_failure(sim: &mut Sim, rng: &mut Rng) {
    let id = random_node(sim, rng);
    let last_replica =
        sim.map.chains.values().any(|c| c.contains(id) && !c.members.iter().any(|&m| m != id && sim.map.is_live(m)));
    if last_replica && !rng.chance(10) {
        return;
    }
    let expected = if sim.map.nodes[&id].state.is_live() { Applied::Changed } else { Applied::Unchanged };
    assert_eq!(sim.apply(MapCommand::NodeFailed { id }), Ok(expected));
}

/// A duplicated log entry or a late message from an executor: the view it names has moved on.
fn replay_applied_step(sim: &mut Sim, rng: &mut Rng) {
    if sim.applied_steps.is_empty() {
        return;
    }
    let cmd = sim.applied_steps[rng.below(sim.applied_steps.len())].clone();
    let result = sim.apply(cmd);
    assert!(matches!(result, Err(MapError::StaleView { .. })), "{result:?}");
}

/// A deposed leader acts on an old map: its steps may apply only where they are still valid.
fn plan_from(sim: &mut Sim, old: &ClusterMap) {
    for (chain, expected_view, change) in next_steps(old) {
        let _ = sim.apply(MapCommand::StepStarted { chain, expected_view, change });
    }
    for c in old.chains.values().filter(|c| c.change.is_some()) {
        let _ = sim.apply(MapCommand::StepDone { chain: c.id, expected_view: c.view });
    }
}

/// A buggy or confused executor: whatever the map accepts must keep every invariant.
fn offer_arbitrary_step(sim: &mut Sim, rng: &mut Rng) {
    let c = sim.map.chains[&ChainId(rng.below(sim.map.chains.len()) as u32)].clone();
    let node = random_node(sim, rng);
    let change = if rng.chance(50) {
        let flush = sim.map.next_flush - u64::from(rng.chance(20));
        ChainChange::Add { node, position: rng.below(c.members.len() + 1), flush }
    } else {
        ChainChange::Remove { node }
    };
    let _ = sim.apply(MapCommand::StepStarted { chain: c.id, expected_view: c.view, change });
}

fn start_some(sim: &mut Sim, rng: &mut Rng) {
    for (chain, view, change) in sim.planned() {
        if rng.chance(70) {
            let cmd = MapCommand::StepStarted { chain, expected_view: view, change };
            assert_eq!(sim.apply(cmd.clone()), Ok(Applied::Changed));
            if rng.chance(10) {
                assert!(matches!(sim.apply(cmd), Err(MapError::StaleView { .. })));
            }
        }
    }
}

fn finish_one(sim: &mut Sim, rng: &mut Rng) {
    let in_flight: Vec<(ChainId, u64)> =
        sim.map.chains.values().filter(|c| c.change.is_some()).map(|c| (c.id, c.view)).collect();
    if in_flight.is_empty() {
        return;
    }
    let (chain, expected_view) = in_flight[rng.below(in_flight.len())];
    let cmd = if rng.chance(80) {
        MapCommand::StepDone { chain, expected_view }
    } else {
        MapCommand::StepAborted { chain, expected_view }
    };
    assert_eq!(sim.apply(cmd.clone()), Ok(Applied::Changed));
    if rng.chance(10) {
        assert!(matches!(sim.apply(cmd), Err(MapError::StaleView { .. })));
    }
}

/// Replaying a run's log from an empty map gives the same answers and the same bytes.
fn assert_deterministic(sim: &Sim) {
    let mut map = ClusterMap::default();
    for (cmd, result) in &sim.log {
        assert_eq!(map.apply(cmd), *result, "{cmd:?}");
    }
    assert_eq!(encoded(&map), encoded(&sim.map));
}

#[test]
fn random_runs_keep_the_invariants_and_converge() {
    let (mut irreparable_runs, mut done, mut refused) = (0, 0, 0);
    for seed in 0..500 {
        let sim = random_run(seed);
        assert_deterministic(&sim);
        irreparable_runs += usize::from(!irreparable(&sim.map).is_empty());
        done += sim.log.iter().filter(|(c, r)| matches!(c, MapCommand::StepDone { .. }) && r.is_ok()).count();
        refused += sim.log.iter().filter(|(_, r)| matches!(r, Err(MapError::StaleView { .. }))).count();
    }
    assert!(done > 10_000 && refused > 1_000, "the runs did too little: {done} steps done, {refused} stale");
    assert!(irreparable_runs < 100, "{irreparable_runs} runs lost a chain: the runs test too little repair");
}
