use super::*;
use crate::map::tests::{aborted, addrs, bootstrap_cmd, bootstrapped, encoded, inserted, joining, start, with_joiner};
use crate::map::{Applied, MapCommand, MapError, NodeInfo, NodeState};
use meridian_core::Location;

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
    /// Inserted joiners taken out again by an abort or a failure.
    joiners_out: usize,
}

impl Sim {
    fn new(map: ClusterMap, limits: PlanLimits) -> Sim {
        Sim { map, limits, log: Vec::new(), applied_steps: Vec::new(), joiners_out: 0 }
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
        keeps_a_durable_replica(&before, &self.map, &cmd);
        views_follow_members(&before, &self.map, &cmd);
        if !matches!(cmd, MapCommand::StepDone { .. }) {
            let shrank = |b: &&ChainView| self.map.chains.get(&b.id).is_some_and(|a| a.members.len() < b.members.len());
            self.joiners_out += before.chains.values().filter(shrank).count();
        }
        if result.is_ok() && is_step(&cmd) {
            self.applied_steps.push(cmd.clone());
        }
        self.log.push((cmd, result.clone()));
        result
    }

    fn start(&mut self, (chain, view, change): (ChainId, u64, ChainChange)) {
        let cmd = MapCommand::StepStarted { chain, expected_view: view, change };
        assert_eq!(self.apply(cmd), Ok(Applied::Changed), "a planned step must start");
    }

    /// Drives the step in flight on `chain` to its end: an Add through AddInserted, then StepDone.
    fn finish(&mut self, chain: ChainId) {
        let change = self.map.chains[&chain].change.clone().expect("a step in flight");
        if let ChainChange::Add { step, inserted: false, .. } = change {
            assert_eq!(self.apply(MapCommand::AddInserted { chain, step }), Ok(Applied::Changed));
        }
        assert_eq!(self.apply(MapCommand::StepDone { chain, step: change.step() }), Ok(Applied::Changed));
    }

    /// A `ReplicaRestored` for every chain the map would accept one for.
    fn restorable(&self) -> Vec<MapCommand> {
        let restore = |c: &ChainView| {
            let (&node, &incarnation) = c.lost.iter().find(|(&n, &i)| self.map.restorable(c.id, n, i).is_ok())?;
            Some(MapCommand::ReplicaRestored { chain: c.id, node, incarnation })
        };
        self.map.chains.values().filter_map(restore).collect()
    }

    fn in_flight(&self) -> Vec<ChainId> {
        self.map.chains.values().filter(|c| c.change.is_some()).map(|c| c.id).collect()
    }

    fn planned(&self) -> Vec<(ChainId, u64, ChainChange)> {
        let steps = next_steps_with(&self.map, &self.limits);
        assert_within_limits(&self.map, &steps, self.limits.copies_per_node);
        assert_ids_follow(&self.map, &steps);
        steps
    }

    /// Completes every step in flight and starts every planned one until nothing is left to do, restoring
    /// chains with no whole replica as the manager's leader would.
    fn drain(&mut self) {
        for _ in 0..1000 {
            let in_flight = self.in_flight();
            in_flight.iter().for_each(|&chain| self.finish(chain));
            let restores = self.restorable();
            restores.iter().for_each(|cmd| assert_eq!(self.apply(cmd.clone()), Ok(Applied::Changed)));
            let steps = self.planned();
            if in_flight.is_empty() && steps.is_empty() && restores.is_empty() {
                return;
            }
            steps.into_iter().for_each(|s| self.start(s));
        }
        panic!("the planner did not converge: {:#?}", self.map);
    }
}

fn is_step(cmd: &MapCommand) -> bool {
    matches!(
        cmd,
        MapCommand::StepStarted { .. }
            | MapCommand::AddInserted { .. }
            | MapCommand::StepDone { .. }
            | MapCommand::StepAborted { .. }
    )
}

/// The view moves by one exactly when the members change or the chain is restored, and `tail_epoch` becomes the command's epoch
/// exactly when the tail changes.
fn views_follow_members(before: &ClusterMap, after: &ClusterMap, cmd: &MapCommand) {
    // A dropped keyspace's chains are gone, not changed.
    for (id, b) in before.chains.iter().filter(|(id, _)| after.chains.contains_key(id)) {
        let a = &after.chains[id];
        // A restore starts the chain afresh from one replica: a new view even if that was the only member.
        let restored =
            after.epoch != before.epoch && matches!(cmd, MapCommand::ReplicaRestored { chain, .. } if chain == id);
        let moved = u64::from(a.members != b.members || restored);
        assert_eq!(a.view, b.view + moved, "chain {id}: view of {:?} -> {:?} by {cmd:?}", b.members, a.members);
        let tail_epoch = if a.tail() == b.tail() { b.tail_epoch } else { after.epoch };
        assert_eq!(a.tail_epoch, tail_epoch, "chain {id}: tail epoch after {cmd:?}");
    }
}

/// Planned steps take consecutive ids from `next_step`, so any of them can be started in order.
fn assert_ids_follow(map: &ClusterMap, steps: &[(ChainId, u64, ChainChange)]) {
    let ids: Vec<u64> = steps.iter().map(|(_, _, change)| change.step()).collect();
    let expected: Vec<u64> = (map.next_step..).take(steps.len()).collect();
    assert_eq!(ids, expected);
    assert!(steps.iter().all(|(_, _, c)| !matches!(c, ChainChange::Add { inserted: true, .. })));
}

/// A chain of a keyspace configured with a kind that survives a restart, once it holds a whole replica of such a
/// kind, keeps one through every step, unless it was a joiner not yet flushed (which holds nothing the chain
/// relies on) or a fault took it: draining nodes out never leaves such a keyspace with only memory
/// replicas.
fn keeps_a_durable_replica(before: &ClusterMap, after: &ClusterMap, cmd: &MapCommand) {
    let wants_durable = |id: &ChainId| {
        let config = after.keyspaces.get(&id.keyspace()).map(|k| &k.config.replicas);
        config.is_some_and(|kinds| kinds.iter().any(|k| k.survives_restart()))
    };
    for (id, b) in before.chains.iter().filter(|(id, _)| after.chains.contains_key(id) && wants_durable(id)) {
        let durable = |c: &ChainView| {
            let kept =
                |(&m, k): (&NodeId, &ReplicaKind)| (k.survives_restart() && !c.lost.contains_key(&m)).then_some(m);
            c.members.iter().zip(&c.kinds).filter_map(kept).collect::<Vec<_>>()
        };
        let (had, has) = (durable(b), durable(&after.chains[id]));
        let joiner = |m: NodeId| matches!(b.change, Some(ChainChange::Add { node, .. }) if node == m);
        // A replica's loss is a fault, not a step; restoring settles a chain with no whole replica left.
        let fault = matches!(cmd, MapCommand::ReplicaLost { .. } | MapCommand::ReplicaRestored { .. });
        assert!(
            had.is_empty() || !has.is_empty() || fault || had.iter().all(|&m| joiner(m)),
            "chain {id} lost its last durable replica to {cmd:?}: {b:?} -> {:?}; {:?}",
            after.chains[id],
            before.nodes
        );
    }
}

/// A chain goes from some live member to none only when its members fail.
fn keeps_a_live_replica(before: &ClusterMap, after: &ClusterMap, cmd: &MapCommand) {
    for (id, b) in before.chains.iter().filter(|(id, _)| after.chains.contains_key(id)) {
        let had = b.members.iter().any(|&m| before.is_live(m));
        let has = after.chains[id].members.iter().any(|&m| after.is_live(m));
        let failure = matches!(cmd, MapCommand::NodeFailed { .. });
        assert!(!had || has || failure, "chain {id} lost its last live replica to {cmd:?}");
    }
}

/// A planned Add never brings a node above `limit` Adds, as joiner or copy source (the tail while the joiner
/// pre-copies, its successor once inserted), counting those in flight. (Steps a stale leader
/// started may already exceed it: the limit is the planner's policy, not a map invariant.)
fn assert_within_limits(map: &ClusterMap, steps: &[(ChainId, u64, ChainChange)], limit: usize) {
    let mut per_node: BTreeMap<NodeId, usize> = BTreeMap::new();
    let mut count = |chain: ChainId, change: &ChainChange| match *change {
        ChainChange::Add { node, .. } => [node, super::copy_source(map, &map.chains[&chain], node).unwrap()].map(|n| {
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
    for (id, c) in map.chains.iter() {
        let target = &targets[id];
        if broken.contains(id) {
            let waits = |m: &NodeId| map.state(*m) == Some(NodeState::Failed) || c.lost.contains_key(m);
            assert!(c.members.iter().any(waits), "chain {id} is irreparable with every member whole");
        } else if target.is_empty() {
            assert_eq!(c.members.len(), 1, "chain {id} keeps one replica while nothing is placeable");
        } else {
            assert_eq!(sorted(&c.members), sorted(target), "chain {id} is not at its target: {c:?} {:?}", map.nodes);
        }
    }
    for (&id, n) in &map.nodes {
        let held = match n.state {
            NodeState::Active | NodeState::Removed => true,
            NodeState::Joining => targets.iter().any(|(c, t)| t.contains(&id) && broken.contains(c)),
            NodeState::Leaving | NodeState::Failed if broken.iter().any(|c| map.chains[c].contains(id)) => true,
            NodeState::Leaving => targets.values().all(|t| t.is_empty()),
            NodeState::Failed => false,
        };
        assert!(held, "node {id} is still {}", n.state);
    }
}

fn chains_at_full_target(map: &ClusterMap) -> bool {
    map.targets().iter().all(|(id, t)| *t == map.chains[id].members)
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
    sim.apply(MapCommand::AddNode { id: NodeId(5), addrs: addrs(5), vnodes: 8, location: Location::default() })
        .unwrap();
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
                ChainChange::Remove { node, .. } => {
                    assert_eq!(removal_kind(&sim.map, c, node), Some(Removal::Truncate));
                    truncates += 1;
                }
            }
            sim.start((chain, view, change));
            sim.finish(chain);
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
            sim.finish(chain);
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
        assert!(matches!(*change, ChainChange::Remove { node, .. } if node == failed), "{change:?}");
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
            sim.apply(MapCommand::AddNode { id: NodeId(i), addrs: addrs(i), vnodes: 8, location: Location::default() })
                .unwrap();
        }
        let steps = sim.planned();
        let adds = steps.iter().filter(|s| matches!(s.2, ChainChange::Add { .. })).count();
        assert!(adds >= copies_per_node, "the limit still lets copies run concurrently");
        steps.into_iter().for_each(|s| sim.start(s));
        sim.drain();
        assert_converged(&sim.map);
    }
}

/// An Add holds its copy slots from its start to its StepDone, inserted or not: the FLUSH still streams
/// the gap from the tail into the joiner.
#[test]
fn an_add_counts_as_a_copy_until_it_is_done() {
    let mut sim = Sim::new(bootstrapped(4, 3, 64), PlanLimits { copies_per_node: 1 });
    sim.apply(MapCommand::AddNode { id: NodeId(5), addrs: addrs(5), vnodes: 8, location: Location::default() })
        .unwrap();
    let is_add = |s: &(ChainId, u64, ChainChange)| matches!(s.2, ChainChange::Add { .. });
    let add = sim.planned().into_iter().find(is_add).expect("the joiner is added somewhere");
    let (chain, step) = (add.0, add.2.step());
    sim.start(add);
    assert!(!sim.planned().iter().any(is_add), "node 5 copies once at a time");
    sim.apply(MapCommand::AddInserted { chain, step }).unwrap();
    assert!(!sim.planned().iter().any(is_add), "an inserted Add still copies");
    sim.apply(MapCommand::StepDone { chain, step }).unwrap();
    assert!(sim.planned().iter().any(is_add));
}

/// Any of the planned steps can be started, in order, whichever were left out before it.
#[test]
fn planned_steps_start_in_order_whatever_is_left_out() {
    let mut map = bootstrapped(5, 3, 16);
    map.apply(&MapCommand::AddNode { id: NodeId(6), addrs: addrs(6), vnodes: 8, location: Location::default() })
        .unwrap();
    map.apply(&MapCommand::NodeFailed { id: NodeId(2) }).unwrap();
    let steps = next_steps(&map);
    assert!(steps.len() > 4, "{steps:?}");
    for keep in [1, 2, 3] {
        let mut sim = Sim::new(map.clone(), PlanLimits::default());
        for step in steps.iter().skip(keep - 1).step_by(keep) {
            sim.start(step.clone());
        }
    }
}

/// An aborted step is planned again under a new id; an inserted joiner goes out and is added again.
#[test]
fn an_aborted_add_is_redone() {
    let mut sim = Sim::new(bootstrapped(4, 3, 16), PlanLimits::default());
    sim.apply(MapCommand::AddNode { id: NodeId(5), addrs: addrs(5), vnodes: 8, location: Location::default() })
        .unwrap();
    let (chain, view, add) = next_steps(&sim.map).into_iter().find(|s| s.2.node() == NodeId(5)).unwrap();
    sim.start((chain, view, add.clone()));
    sim.apply(MapCommand::AddInserted { chain, step: add.step() }).unwrap();
    sim.apply(MapCommand::StepAborted { chain, step: add.step() }).unwrap();
    let (_, redo_view, redo) = next_steps(&sim.map).into_iter().find(|s| s.0 == chain).unwrap();
    let ChainChange::Add { node, position, step, inserted: false, kind: ReplicaKind::Log } = redo else {
        panic!("{redo:?}")
    };
    assert!(matches!(add, ChainChange::Add { position: p, .. } if p == position));
    assert_eq!((node, redo_view), (NodeId(5), view + 2));
    assert!(step > add.step());
    sim.drain();
    assert_converged(&sim.map);
}

/// A failed member that is heard from again before its repair stays in its chains: nothing is planned
/// for it. One heard from after its repair is added back like a joiner.
#[test]
fn a_recovered_node_is_kept_or_added_back() {
    let mut sim = Sim::new(bootstrapped(5, 3, 16), PlanLimits::default());
    let before = sim.map.chains.clone();
    sim.apply(MapCommand::NodeFailed { id: NodeId(2) }).unwrap();
    sim.apply(MapCommand::NodeRecovered { id: NodeId(2) }).unwrap();
    assert!(next_steps(&sim.map).is_empty() && sim.map.chains == before);
    sim.apply(MapCommand::NodeFailed { id: NodeId(2) }).unwrap();
    sim.drain();
    assert_eq!(sim.map.state(NodeId(2)), Some(NodeState::Removed));
    sim.apply(MapCommand::NodeRecovered { id: NodeId(2) }).unwrap();
    let steps = next_steps(&sim.map);
    assert!(steps.iter().any(|(_, _, c)| matches!(*c, ChainChange::Add { node, .. } if node == NodeId(2))));
    sim.drain();
    assert_converged(&sim.map);
    assert_eq!(sim.map.state(NodeId(2)), Some(NodeState::Active));
}

/// One random run: commands interleaved with planned steps driven through their lifecycle, some stale,
/// duplicated or aborted, with failures and recoveries.
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
            17..=20 => offer_recovery(&mut sim, &mut rng),
            21..=24 => replay_applied_step(&mut sim, &mut rng),
            25..=27 => plan_from(&mut sim, &snapshot),
            28..=31 => offer_arbitrary_step(&mut sim, &mut rng),
            32..=58 => start_some(&mut sim, &mut rng),
            59..=61 => offer_keyspace(&mut sim, &mut rng),
            62..=64 => offer_lost(&mut sim, &mut rng),
            _ => advance_one(&mut sim, &mut rng),
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
        let cmd = MapCommand::AddNode {
            id,
            addrs: addrs(id.0),
            vnodes: 1 + rng.below(8) as u32,
            location: Location::default(),
        };
        assert_eq!(sim.apply(cmd), Ok(Applied::Changed));
        return;
    }
    let id = random_node(sim, rng);
    let info = sim.map.nodes[&id].clone();
    if rng.chance(30) {
        let cmd = MapCommand::AddNode { id, addrs: addrs(99), vnodes: info.vnodes, location: Location::default() };
        assert_eq!(sim.apply(cmd), Err(MapError::IdClash(id)));
        return;
    }
    let expected = match info.state {
        NodeState::Joining | NodeState::Active => Ok(Applied::Unchanged),
        NodeState::Leaving | NodeState::Failed => Err(MapError::NodeBusy { id, state: info.state }),
        NodeState::Removed => Ok(Applied::Changed),
    };
    assert_eq!(
        sim.apply(MapCommand::AddNode { id, addrs: info.addrs, vnodes: info.vnodes, location: Location::default() }),
        expected
    );
    assert!(!sim.map.nodes[&id].departed || expected.is_err());
}

/// A new keyspace of random replication beside `default`, or the drop of it: one at a time is enough to mix
/// replication factors, and keeps the runs quick.
fn offer_keyspace(sim: &mut Sim, rng: &mut Rng) {
    let others: Vec<String> = sim.map.keyspaces.values().map(|k| k.name.clone()).filter(|n| n != "default").collect();
    if others.is_empty() {
        let name = format!("k{}", sim.map.next_keyspace);
        let kinds = meridian_core::ReplicaKind::ALL;
        let replicas = (0..1 + rng.below(3)).map(|_| kinds[rng.below(kinds.len())]).collect();
        let config = meridian_core::KeyspaceConfig::with_replicas(replicas);
        let placeable = sim.map.nodes.values().any(|n| n.state.is_placeable());
        let expected = if placeable { Ok(Applied::Changed) } else { Err(MapError::NoPlaceableNode) };
        assert_eq!(sim.apply(MapCommand::CreateKeyspace { name, config }), expected);
    } else {
        let name = others[rng.below(others.len())].clone();
        assert_eq!(sim.apply(MapCommand::DropKeyspace { name }), Ok(Applied::Changed));
    }
}

/// A member of a random chain restarts without its replica (in any kind: the map does not care which), or a
/// lost member asks to be restored, which the map accepts only when nothing whole is left.
fn offer_lost(sim: &mut Sim, rng: &mut Rng) {
    let chains: Vec<&ChainView> = sim.map.chains.values().collect();
    let c = chains[rng.below(chains.len())].clone();
    let node = c.members[rng.below(c.members.len())];
    if rng.chance(70) {
        let incarnation = rng.below(3) as u64;
        let expected = if c.lost.get(&node) == Some(&incarnation) { Applied::Unchanged } else { Applied::Changed };
        assert_eq!(sim.apply(MapCommand::ReplicaLost { chain: c.id, node, incarnation }), Ok(expected));
        assert!(sim.map.chains[&c.id].change.is_none(), "a lost replica stops the step in flight");
    } else if let Some(&incarnation) = c.lost.get(&node) {
        let expected = sim.map.restorable(c.id, node, incarnation).map(|()| Applied::Changed);
        assert_eq!(sim.apply(MapCommand::ReplicaRestored { chain: c.id, node, incarnation }), expected);
    }
}

fn offer_remove(sim: &mut Sim, rng: &mut Rng) {
    let id = random_node(sim, rng);
    let expected = if sim.map.nodes[&id].departed { Applied::Unchanged } else { Applied::Changed };
    assert_eq!(sim.apply(MapCommand::RemoveNode { id }), Ok(expected));
    assert!(sim.map.nodes[&id].departed && !sim.map.nodes[&id].state.is_placeable());
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

/// Mostly a node that can be recovered, sometimes any node.
fn offer_recovery(sim: &mut Sim, rng: &mut Rng) {
    let recoverable = |n: &NodeInfo| n.state == NodeState::Failed || (n.state == NodeState::Removed && !n.departed);
    let down: Vec<NodeId> = sim.map.nodes.iter().filter(|(_, n)| recoverable(n)).map(|(&id, _)| id).collect();
    let id = if !down.is_empty() && rng.chance(80) { down[rng.below(down.len())] } else { random_node(sim, rng) };
    let info = sim.map.nodes[&id].clone();
    let (expected, state) = match info.state {
        NodeState::Joining | NodeState::Active | NodeState::Leaving => (Ok(Applied::Unchanged), Some(info.state)),
        NodeState::Removed if info.departed => (Err(MapError::Departed(id)), Some(NodeState::Removed)),
        NodeState::Failed if info.departed => (Ok(Applied::Changed), Some(NodeState::Leaving)),
        NodeState::Failed | NodeState::Removed => (Ok(Applied::Changed), None),
    };
    assert_eq!(sim.apply(MapCommand::NodeRecovered { id }), expected);
    let now = sim.map.nodes[&id].state;
    assert!(state.map_or(now.is_placeable(), |s| s == now), "{id} recovered from {} to {now}", info.state);
}

/// A duplicated log entry or a late message from an executor: the step id or view it names has moved on.
fn replay_applied_step(sim: &mut Sim, rng: &mut Rng) {
    if sim.applied_steps.is_empty() {
        return;
    }
    let cmd = sim.applied_steps[rng.below(sim.applied_steps.len())].clone();
    let started = matches!(cmd, MapCommand::StepStarted { .. });
    let result = sim.apply(cmd);
    let stale_report = matches!(
        result,
        Err(MapError::NoStepInFlight(_)
            | MapError::WrongStep { .. }
            | MapError::AlreadyInserted { .. }
            | MapError::UnknownChain(_))
    );
    assert!(stale_report || (started && result.is_err()), "{result:?}");
}

/// A deposed leader acts on an old map: its commands may apply only where they are still valid.
fn plan_from(sim: &mut Sim, old: &ClusterMap) {
    for (chain, expected_view, change) in next_steps(old) {
        let _ = sim.apply(MapCommand::StepStarted { chain, expected_view, change });
    }
    for c in old.chains.values() {
        match c.change {
            Some(ChainChange::Add { step, inserted: false, .. }) => {
                let _ = sim.apply(MapCommand::AddInserted { chain: c.id, step });
            }
            Some(ref change) => {
                let _ = sim.apply(MapCommand::StepDone { chain: c.id, step: change.step() });
            }
            None => {}
        }
    }
}

/// A buggy or confused executor: whatever the map accepts must keep every invariant.
fn offer_arbitrary_step(sim: &mut Sim, rng: &mut Rng) {
    let chains: Vec<&ChainView> = sim.map.chains.values().collect();
    let c = chains[rng.below(chains.len())].clone();
    let node = random_node(sim, rng);
    let step = sim.map.next_step - u64::from(rng.chance(20));
    let cmd = match rng.below(5) {
        0 => {
            let (position, inserted) = (rng.below(c.members.len() + 1), rng.chance(10));
            MapCommand::StepStarted {
                chain: c.id,
                expected_view: c.view,
                change: ChainChange::Add { node, position, step, inserted, kind: ReplicaKind::Log },
            }
        }
        1 => MapCommand::StepStarted { chain: c.id, expected_view: c.view, change: ChainChange::Remove { node, step } },
        kind => {
            // Some step in flight anywhere, or an id that is not.
            let in_flight: Vec<u64> =
                sim.map.chains.values().filter_map(|c| c.change.as_ref()).map(|c| c.step()).collect();
            let step =
                if !in_flight.is_empty() && rng.chance(80) { in_flight[rng.below(in_flight.len())] } else { step };
            match kind {
                2 => MapCommand::AddInserted { chain: c.id, step },
                3 => MapCommand::StepDone { chain: c.id, step },
                _ => MapCommand::StepAborted { chain: c.id, step },
            }
        }
    };
    let _ = sim.apply(cmd);
}

fn start_some(sim: &mut Sim, rng: &mut Rng) {
    for (chain, view, change) in sim.planned() {
        if rng.chance(70) {
            let cmd = MapCommand::StepStarted { chain, expected_view: view, change };
            assert_eq!(sim.apply(cmd.clone()), Ok(Applied::Changed));
            if rng.chance(10) {
                assert_eq!(sim.apply(cmd), Err(MapError::StepInFlight(chain)));
            }
        }
    }
}

/// Moves one step in flight to its next stage, or aborts it.
fn advance_one(sim: &mut Sim, rng: &mut Rng) {
    let in_flight = sim.in_flight();
    if in_flight.is_empty() {
        return;
    }
    let chain = in_flight[rng.below(in_flight.len())];
    let change = sim.map.chains[&chain].change.clone().expect("in flight");
    let step = change.step();
    let cmd = match change {
        _ if rng.chance(20) => MapCommand::StepAborted { chain, step },
        ChainChange::Add { inserted: false, .. } => MapCommand::AddInserted { chain, step },
        _ => MapCommand::StepDone { chain, step },
    };
    assert_eq!(sim.apply(cmd.clone()), Ok(Applied::Changed));
    if rng.chance(10) {
        let result = sim.apply(cmd);
        assert!(matches!(result, Err(MapError::NoStepInFlight(_) | MapError::AlreadyInserted { .. })), "{result:?}");
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

/// How often each kind of command changed the map (`true`) or not (`false`) over many runs.
#[derive(Default, Debug)]
struct Tally {
    commands: BTreeMap<(&'static str, bool), usize>,
    joiners_out: usize,
}

impl Tally {
    fn count(&mut self, sim: &Sim) {
        for (cmd, result) in &sim.log {
            let kind = match cmd {
                MapCommand::StepStarted { .. } => "started",
                MapCommand::AddInserted { .. } => "inserted",
                MapCommand::StepDone { .. } => "done",
                MapCommand::StepAborted { .. } => "aborted",
                MapCommand::NodeRecovered { .. } => "recovered",
                _ => continue,
            };
            *self.commands.entry((kind, *result == Ok(Applied::Changed))).or_default() += 1;
        }
        self.joiners_out += sim.joiners_out;
    }

    fn get(&self, kind: &'static str, changed: bool) -> usize {
        self.commands.get(&(kind, changed)).copied().unwrap_or(0)
    }
}

#[test]
fn random_runs_keep_the_invariants_and_converge() {
    let (mut irreparable_runs, mut tally) = (0, Tally::default());
    for seed in 0..500 {
        let sim = random_run(seed);
        assert_deterministic(&sim);
        irreparable_runs += usize::from(!irreparable(&sim.map).is_empty());
        tally.count(&sim);
    }
    let changed = [("started", 20_000), ("inserted", 8_000), ("done", 15_000), ("aborted", 1_000), ("recovered", 300)];
    let refused = [("started", 2_000), ("inserted", 500), ("done", 1_000), ("aborted", 300)];
    let did_enough = changed.iter().all(|&(kind, least)| tally.get(kind, true) >= least)
        && refused.iter().all(|&(kind, least)| tally.get(kind, false) >= least)
        && tally.joiners_out >= 200;
    assert!(did_enough, "the runs did too little: {tally:?}");
    assert!(irreparable_runs < 100, "{irreparable_runs} runs lost a chain: the runs test too little repair");
}

/// Seed 003 §5.3: a chain of a `mem,log` keyspace repairs a member that lost its memory replica like a failed
/// one (out, then back with a fresh copy of the same kind), but waits for a failed `log` member rather than
/// go on with memory alone.
#[test]
fn lost_replicas_are_repaired_and_the_only_log_replica_is_waited_for() {
    use meridian_core::{KeyspaceConfig, KeyspaceId, ReplicaKind::*};
    let mut sim = Sim::new(bootstrapped(2, 2, 1), PlanLimits::default());
    let config = KeyspaceConfig::with_replicas(vec![Mem, Log]);
    sim.apply(MapCommand::CreateKeyspace { name: "md".into(), config }).unwrap();
    let id = ChainId::new(KeyspaceId(1), 0);
    let c = sim.map.chains[&id].clone();
    let (m, d) = (c.members[0], c.members[1]);
    assert_eq!(c.kinds, [Mem, Log]);
    sim.apply(MapCommand::ReplicaLost { chain: id, node: m, incarnation: 7 }).unwrap();
    let (_, _, step) = next_steps(&sim.map).into_iter().find(|s| s.0 == id).unwrap();
    assert!(matches!(step, ChainChange::Remove { node, .. } if node == m), "{step:?}");
    sim.drain();
    let c = &sim.map.chains[&id];
    assert_eq!((&c.members, &c.kinds), (&vec![m, d], &vec![Mem, Log]));
    assert!(c.lost.is_empty());
    sim.apply(MapCommand::NodeFailed { id: d }).unwrap();
    assert!(next_steps(&sim.map).iter().all(|s| s.0 != id), "the chain waits for its log replica");
    assert!(irreparable(&sim.map).contains(&id));
    sim.apply(MapCommand::ReplicaLost { chain: id, node: m, incarnation: 8 }).unwrap();
    let refusal = MapError::WholeReplica { chain: id, node: d };
    assert_eq!(sim.map.restorable(id, m, 8), Err(refusal), "a failed log member comes back whole");
    sim.apply(MapCommand::NodeRecovered { id: d }).unwrap();
    sim.drain();
    assert_converged(&sim.map);
}

/// A chain whose members all lost their replicas is restored from one of them, whichever kinds they are: a
/// `log` member recorded lost (a head that passed updates on before its fsync and then lost power) does not come
/// back whole, so it is no reason to wait. Sim seed 930384 (`mem,log`, full nemesis) stuck a chain of a lost
/// `log` head and a lost memory tail for good: the leader picked the memory one, and the map refused it for the
/// `log` one's sake.
#[test]
fn a_chain_whose_log_member_is_lost_too_is_restored() {
    use meridian_core::{KeyspaceConfig, KeyspaceId, ReplicaKind::*};
    let mut sim = Sim::new(bootstrapped(2, 2, 1), PlanLimits::default());
    let config = KeyspaceConfig::with_replicas(vec![Log, Mem]);
    sim.apply(MapCommand::CreateKeyspace { name: "dm".into(), config }).unwrap();
    let id = ChainId::new(KeyspaceId(1), 0);
    let (d, m) = (sim.map.chains[&id].members[0], sim.map.chains[&id].members[1]);
    sim.apply(MapCommand::ReplicaLost { chain: id, node: d, incarnation: 7 }).unwrap();
    sim.apply(MapCommand::ReplicaLost { chain: id, node: m, incarnation: 8 }).unwrap();
    assert_eq!(sim.map.restorable(id, m, 8), Ok(()), "the lost log replica is no whole one");
    assert_eq!(sim.map.restorable(id, d, 7), Ok(()));
    sim.apply(MapCommand::ReplicaRestored { chain: id, node: m, incarnation: 8 }).unwrap();
    assert_eq!(sim.map.chains[&id].members, vec![m]);
    sim.drain();
    assert_converged(&sim.map);
}

/// §2.5: once an Add whose joiner was inserted is aborted (its FLUSH never came back), the planner redoes the
/// addition under a new step id.
#[test]
fn an_addition_aborted_after_insertion_is_planned_again() {
    let (joiner, mut map) = with_joiner(&bootstrapped(3, 3, 1));
    let id = ChainId(0);
    let s = map.next_step;
    start(&mut map, 0, joining(joiner, 1, s)).unwrap();
    map.apply(&inserted(id, s)).unwrap();
    map.apply(&aborted(id, s)).unwrap();
    let redo = next_steps(&map);
    let redone = |c, v, change: &ChainChange| (c, v, change.node(), change.step()) == (id, 3, joiner, s + 1);
    assert!(matches!(redo[..], [(c, v, ref change @ ChainChange::Add { .. })] if redone(c, v, change)), "{redo:?}");
}

/// A map of `n` nodes whose `default` keyspace is a quorum keyspace of three replicas.
fn quorum_map(n: u32, partitions: u32) -> ClusterMap {
    let MapCommand::Bootstrap { nodes, partitions, vnodes, voters, .. } = bootstrap_cmd(n, 3, partitions, 8) else {
        unreachable!("a bootstrap")
    };
    let quorum = meridian_core::ProtocolConfig::default_for(meridian_core::Protocol::Quorum);
    let default = meridian_core::KeyspaceConfig { protocol: quorum, ..meridian_core::KeyspaceConfig::durable(3) };
    let mut map = ClusterMap::default();
    map.apply(&MapCommand::Bootstrap { nodes, default, partitions, vnodes, voters }).unwrap();
    map
}

/// A quorum partition replaces a failed or leaving replica before it lets it go, so it never has fewer than R
/// members; one with no node to replace it keeps its failed member, which its quorums tolerate.
#[test]
fn a_quorum_partition_adds_a_replacement_before_it_removes_a_replica() {
    let mut sim = Sim::new(quorum_map(5, 16), PlanLimits::default());
    sim.apply(MapCommand::NodeFailed { id: NodeId(2) }).unwrap();
    sim.apply(MapCommand::RemoveNode { id: NodeId(4) }).unwrap();
    let mut adds = 0;
    while sim.map.chains.values().any(|c| c.contains(NodeId(2)) || c.contains(NodeId(4))) {
        let steps = sim.planned();
        assert!(!steps.is_empty(), "stuck: {:?}", sim.map.chains);
        for (chain, view, change) in steps {
            let c = &sim.map.chains[&chain];
            match change {
                ChainChange::Add { position, .. } => {
                    assert_eq!((c.members.len(), position), (3, 0), "an Add brings a fourth replica");
                    adds += 1;
                }
                ChainChange::Remove { node, .. } => {
                    assert!(c.members.len() == 4 && [NodeId(2), NodeId(4)].contains(&node), "{c:?}");
                }
            }
            sim.start((chain, view, change));
            sim.finish(chain);
            assert!(sim.map.chains.values().all(|c| c.members.len() >= 3));
        }
    }
    assert!(adds > 0);

    let mut small = Sim::new(quorum_map(3, 4), PlanLimits::default());
    small.apply(MapCommand::NodeFailed { id: NodeId(1) }).unwrap();
    assert!(small.planned().is_empty(), "no replacement: the failed member stays");
}

/// A joiner pre-copies from the member nearest it among those after its place: the tail while every member is
/// as near (one region), a member in its own region (or zone) otherwise, never one before its place.
#[test]
fn a_joiner_copies_from_the_nearest_member_after_its_place() {
    let mut map = bootstrapped(4, 3, 64);
    let place = |map: &mut ClusterMap, node: u32, at: &str| {
        let mut parts = at.split('/');
        let region = parts.next().unwrap();
        let location = Location::new(region, parts.next(), None).unwrap();
        map.nodes.get_mut(&NodeId(node)).unwrap().location = location;
    };
    let c = map.chains.values().find(|c| c.members.len() == 3).unwrap().clone();
    let [head, mid, tail] = [c.members[0], c.members[1], c.members[2]];
    let joiner = (1..=4).map(NodeId).find(|n| !c.contains(*n)).unwrap();
    assert_eq!(map.precopy_source(&c, joiner, 1), Some(tail), "one region: the tail");
    for (node, at) in [(head.0, "eu"), (mid.0, "us/a"), (tail.0, "asia"), (joiner.0, "us/b")] {
        place(&mut map, node, at);
    }
    assert_eq!(map.precopy_source(&c, joiner, 1), Some(mid), "the member in its region");
    assert_eq!(map.precopy_source(&c, joiner, 2), Some(tail), "inserted after the member in its region");
    place(&mut map, head.0, "us/b");
    assert_eq!(map.precopy_source(&c, joiner, 0), Some(head), "its zone before its region");
    assert_eq!(map.precopy_source(&c, joiner, 1), Some(mid), "never a member before its place");
    place(&mut map, tail.0, "us/c");
    assert_eq!(map.precopy_source(&c, joiner, 1), Some(tail), "equally near: the one nearer the tail");
}
