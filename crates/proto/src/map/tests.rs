use super::*;
use bytes::Bytes;
use meridian_core::keyspace::KEYSPACES_MAX;
use meridian_core::wire;
use meridian_core::{Location, ReplicaKind};

pub(crate) fn addrs(i: u32) -> NodeAddrs {
    NodeAddrs { peer_addr: format!("h{i}:7000"), resp_addr: format!("h{i}:6379"), http_addr: Some(format!("h{i}:80")) }
}

pub(crate) fn bootstrap_cmd(n: u32, replication: usize, partitions: u32, vnodes: u32) -> MapCommand {
    MapCommand::Bootstrap {
        nodes: (1..=n).map(|i| (NodeId(i), addrs(i), Location::default())).collect(),
        default: KeyspaceConfig::durable(replication),
        partitions,
        vnodes,
        voters: (1..=n.min(3)).map(NodeId).collect(),
    }
}

pub(crate) fn bootstrapped(n: u32, replication: usize, partitions: u32) -> ClusterMap {
    let mut map = ClusterMap::default();
    assert_eq!(map.apply(&bootstrap_cmd(n, replication, partitions, 8)), Ok(Applied::Changed));
    map.check().unwrap();
    map
}

/// Postcard bytes of a map, as it would travel in a snapshot.
pub(crate) fn encoded(map: &ClusterMap) -> Vec<u8> {
    let mut out = Vec::new();
    wire::encode(map, &mut out).unwrap();
    out
}

/// Applies `cmd`, which must be refused with `err` and change nothing.
fn refused(map: &mut ClusterMap, cmd: MapCommand, err: MapError) {
    let before = map.clone();
    assert_eq!(map.apply(&cmd), Err(err), "{cmd:?}");
    assert_eq!(*map, before, "a refused command changed the map");
}

fn add(map: &mut ClusterMap, i: u32) -> Result<Applied, MapError> {
    map.apply(&MapCommand::AddNode { id: NodeId(i), addrs: addrs(i), vnodes: 8, location: Location::default() })
}

pub(crate) fn start(map: &mut ClusterMap, chain: u32, change: ChainChange) -> Result<Applied, MapError> {
    let view = map.chains[&ChainId(chain)].view;
    map.apply(&MapCommand::StepStarted { chain: ChainId(chain), expected_view: view, change })
}

/// An Add as `StepStarted` proposes it: not inserted yet.
pub(crate) fn joining(node: NodeId, position: usize, step: u64) -> ChainChange {
    ChainChange::Add { node, position, step, inserted: false, kind: ReplicaKind::Log }
}

pub(crate) fn inserted(chain: ChainId, step: u64) -> MapCommand {
    MapCommand::AddInserted { chain, step }
}

fn done(chain: ChainId, step: u64) -> MapCommand {
    MapCommand::StepDone { chain, step }
}

pub(crate) fn aborted(chain: ChainId, step: u64) -> MapCommand {
    MapCommand::StepAborted { chain, step }
}

/// `map` (one partition) with a new Joining node that is a target of chain 0.
pub(crate) fn with_joiner(map: &ClusterMap) -> (NodeId, ClusterMap) {
    (4..)
        .map(|i| {
            let mut probe = map.clone();
            assert_eq!(add(&mut probe, i), Ok(Applied::Changed));
            (NodeId(i), probe)
        })
        .find(|(id, probe)| probe.targets()[&ChainId(0)].contains(id))
        .unwrap()
}

/// Removes `node` from every chain it is a member of, one Remove step each.
fn remove_everywhere(map: &mut ClusterMap, node: NodeId) {
    let chains: Vec<ChainId> = map.chains.values().filter(|c| c.contains(node)).map(|c| c.id).collect();
    for id in chains {
        let step = map.next_step;
        assert_eq!(start(map, id.0, ChainChange::Remove { node, step }), Ok(Applied::Changed));
        assert_eq!(map.apply(&done(id, step)), Ok(Applied::Changed));
    }
}

#[test]
fn bootstrap_places_every_chain_at_its_target() {
    let map = bootstrapped(4, 3, 64);
    assert_eq!(map.epoch, 1);
    assert!(map.nodes.values().all(|n| n.state == NodeState::Active && n.vnodes == 8 && !n.departed));
    let targets = map.targets();
    for (id, c) in map.chains.iter() {
        assert_eq!((c.view, c.tail_epoch, &c.change, &c.members), (1, 1, &None, &targets[id]));
    }
    assert_eq!(map.manager_voters, vec![NodeId(1), NodeId(2), NodeId(3)]);
}

#[test]
fn bootstrap_is_validated() {
    let mut map = ClusterMap::default();
    refused(&mut map, MapCommand::RemoveNode { id: NodeId(1) }, MapError::NotBootstrapped);
    refused(&mut map, bootstrap_cmd(0, 3, 64, 8), MapError::BadBootstrap("no nodes"));
    refused(&mut map, bootstrap_cmd(3, 0, 64, 8), MapError::BadBootstrap("replication must be at least 1"));
    for partitions in [0, 48, 8192] {
        let cmd = bootstrap_cmd(3, 3, partitions, 8);
        assert!(matches!(map.apply(&cmd), Err(MapError::BadBootstrap(_))));
    }
    refused(&mut map, bootstrap_cmd(3, 3, 64, 0), MapError::BadVnodes(0));
    let mut cmd = bootstrap_cmd(3, 3, 64, 8);
    if let MapCommand::Bootstrap { nodes, voters, .. } = &mut cmd {
        nodes[2].1.resp_addr = nodes[0].1.peer_addr.clone();
        voters.push(NodeId(3));
    }
    assert!(matches!(map.apply(&cmd), Err(MapError::BadBootstrap(_))), "duplicate voter");
    if let MapCommand::Bootstrap { voters, .. } = &mut cmd {
        voters.pop();
    }
    refused(&mut map, cmd, MapError::AddrInUse { addr: "h1:7000".into(), by: NodeId(1) });
    assert_eq!(map, ClusterMap::default());
    let mut map = bootstrapped(1, 3, 1);
    refused(&mut map, bootstrap_cmd(1, 3, 1, 8), MapError::AlreadyBootstrapped);
}

#[test]
fn add_node_is_idempotent_and_refuses_clashes() {
    let mut map = bootstrapped(3, 3, 16);
    assert_eq!(add(&mut map, 4), Ok(Applied::Changed));
    assert_eq!(map.state(NodeId(4)), Some(NodeState::Joining));
    assert_eq!(add(&mut map, 4), Ok(Applied::Unchanged));
    assert_eq!(add(&mut map, 1), Ok(Applied::Unchanged));
    let clash = MapCommand::AddNode { id: NodeId(4), addrs: addrs(9), vnodes: 8, location: Location::default() };
    refused(&mut map, clash, MapError::IdClash(NodeId(4)));
    let heavier = MapCommand::AddNode { id: NodeId(4), addrs: addrs(4), vnodes: 9, location: Location::default() };
    refused(&mut map, heavier, MapError::IdClash(NodeId(4)));
    let stolen = MapCommand::AddNode { id: NodeId(5), addrs: addrs(2), vnodes: 8, location: Location::default() };
    refused(&mut map, stolen, MapError::AddrInUse { addr: "h2:7000".into(), by: NodeId(2) });
    refused(
        &mut map,
        MapCommand::AddNode { id: NodeId(5), addrs: addrs(5), vnodes: 0, location: Location::default() },
        MapError::BadVnodes(0),
    );
    map.check().unwrap();
}

#[test]
fn leave_and_failure_are_idempotent_and_a_failed_node_is_added_again_only_once_removed() {
    let mut map = bootstrapped(4, 3, 16);
    refused(&mut map, MapCommand::NodeFailed { id: NodeId(9) }, MapError::UnknownNode(NodeId(9)));
    assert_eq!(map.apply(&MapCommand::NodeFailed { id: NodeId(2) }), Ok(Applied::Changed));
    assert_eq!(map.apply(&MapCommand::NodeFailed { id: NodeId(2) }), Ok(Applied::Unchanged));
    refused(
        &mut map,
        MapCommand::AddNode { id: NodeId(2), addrs: addrs(2), vnodes: 8, location: Location::default() },
        MapError::NodeBusy { id: NodeId(2), state: NodeState::Failed },
    );
    // Removing a failed node records only that it departed.
    assert_eq!(map.apply(&MapCommand::RemoveNode { id: NodeId(2) }), Ok(Applied::Changed));
    assert_eq!(map.apply(&MapCommand::RemoveNode { id: NodeId(2) }), Ok(Applied::Unchanged));
    assert_eq!((map.state(NodeId(2)), map.nodes[&NodeId(2)].departed), (Some(NodeState::Failed), true));
    assert_eq!(map.apply(&MapCommand::RemoveNode { id: NodeId(3) }), Ok(Applied::Changed));
    assert_eq!(map.apply(&MapCommand::RemoveNode { id: NodeId(3) }), Ok(Applied::Unchanged));
    assert_eq!(map.state(NodeId(3)), Some(NodeState::Leaving));
    // Once the failed node is out of every chain it is Removed and may come back as a fresh joiner.
    remove_everywhere(&mut map, NodeId(2));
    assert_eq!(map.state(NodeId(2)), Some(NodeState::Removed));
    assert_eq!(add(&mut map, 2), Ok(Applied::Changed));
    assert_eq!((map.state(NodeId(2)), map.nodes[&NodeId(2)].departed), (Some(NodeState::Joining), false));
    map.check().unwrap();
}

#[test]
fn a_joiner_with_no_target_chain_is_active_at_once_and_a_leaver_in_no_chain_is_removed() {
    let map = bootstrapped(3, 3, 1);
    // A node whose VIDs do not take over the only partition's successors.
    let (id, mut map) = (4..)
        .map(|i| {
            let mut probe = map.clone();
            assert_eq!(add(&mut probe, i), Ok(Applied::Changed));
            (NodeId(i), probe)
        })
        .find(|(_, probe)| probe.targets() == map.targets())
        .unwrap();
    assert_eq!(map.state(id), Some(NodeState::Active));
    assert_eq!(map.apply(&MapCommand::RemoveNode { id }), Ok(Applied::Changed));
    assert_eq!(map.state(id), Some(NodeState::Removed));
    assert_eq!(map.epoch, 3);
}

fn affiliate(map: &mut ClusterMap, id: u32, host: u32) -> Result<Applied, MapError> {
    map.apply(&affiliate_cmd(id, host))
}

/// An affiliated node is Active at once and never a target of a chain, however many join; its host must be a
/// placeable standard node, and an id keeps its role.
#[test]
fn affiliated_nodes_hold_no_chain_and_name_a_standard_host() {
    let mut map = bootstrapped(3, 3, 4);
    let targets = map.targets();
    for id in 4..=9 {
        assert_eq!(affiliate(&mut map, id, 1 + id % 3), Ok(Applied::Changed));
        assert_eq!(map.state(NodeId(id)), Some(NodeState::Active));
    }
    assert_eq!(map.targets(), targets, "affiliated nodes take no share of the ring");
    assert_eq!(affiliate(&mut map, 4, 2), Ok(Applied::Unchanged), "the same join again");
    assert_eq!(map.affiliates_of(NodeId(2)).collect::<Vec<_>>(), [NodeId(4), NodeId(7)]);
    refused(&mut map, affiliate_cmd(10, 42), MapError::UnknownHost(NodeId(42)));
    refused(&mut map, affiliate_cmd(10, 4), MapError::NotAHost { host: NodeId(4), state: NodeState::Active });
    refused(&mut map, affiliate_cmd(4, 3), MapError::IdClash(NodeId(4)));
    refused(&mut map, affiliate_cmd(2, 1), MapError::IdClash(NodeId(2)));
    let standard = MapCommand::AddNode { id: NodeId(5), addrs: addrs(5), vnodes: 1, location: Location::default() };
    refused(&mut map, standard, MapError::IdClash(NodeId(5)));
    let add = start_cmd(&map, joining(NodeId(5), 1, map.next_step));
    refused(&mut map, add, MapError::NotPlaceable { id: NodeId(5), state: NodeState::Active });
    assert_eq!(map.apply(&MapCommand::RemoveNode { id: NodeId(4) }), Ok(Applied::Changed));
    assert_eq!(map.state(NodeId(4)), Some(NodeState::Removed));
    assert_eq!(map.affiliates_of(NodeId(2)).collect::<Vec<_>>(), [NodeId(7)]);
    map.check().unwrap();
}

fn affiliate_cmd(id: u32, host: u32) -> MapCommand {
    MapCommand::AddAffiliate { id: NodeId(id), addrs: addrs(id), location: Location::default(), host: NodeId(host) }
}

#[test]
fn steps_are_validated_against_the_chain() {
    let mut map = bootstrapped(4, 3, 8);
    add(&mut map, 5).unwrap();
    let c = map.chains[&ChainId(0)].clone();
    let outsider = (1..=4).map(NodeId).find(|n| !c.contains(*n)).unwrap();
    let id = ChainId(0);
    let remove_head = ChainChange::Remove { node: c.members[0], step: 1 };
    let stale = MapCommand::StepStarted { chain: id, expected_view: 7, change: remove_head.clone() };
    refused(&mut map, stale, MapError::StaleView { chain: id, expected: 7, actual: 1 });
    let unknown = MapCommand::StepStarted { chain: ChainId(8), expected_view: 1, change: remove_head.clone() };
    refused(&mut map, unknown, MapError::UnknownChain(ChainId(8)));
    let add_at = |node, position, step| MapCommand::StepStarted {
        chain: id,
        expected_view: 1,
        change: joining(node, position, step),
    };
    refused(&mut map, add_at(NodeId(9), 0, 1), MapError::UnknownNode(NodeId(9)));
    refused(&mut map, add_at(c.members[1], 0, 1), MapError::AlreadyMember { chain: id, node: c.members[1] });
    refused(&mut map, add_at(outsider, 3, 1), MapError::NeverTail { chain: id, position: 3 });
    refused(&mut map, add_at(outsider, 2, 0), MapError::StepReused { step: 0, next: 1 });
    let remove = |node, step| MapCommand::StepStarted {
        chain: id,
        expected_view: 1,
        change: ChainChange::Remove { node, step },
    };
    refused(&mut map, remove(outsider, 1), MapError::NotMember { chain: id, node: outsider });
    refused(&mut map, remove(c.members[0], 0), MapError::StepReused { step: 0, next: 1 });
    map.apply(&MapCommand::RemoveNode { id: outsider }).unwrap();
    let leaving = NodeState::Leaving;
    refused(&mut map, add_at(outsider, 0, 1), MapError::NotPlaceable { id: outsider, state: leaving });
    // A legal Add, which takes its id and leaves the view alone, then a second step on the same chain.
    assert_eq!(map.apply(&add_at(NodeId(5), 2, 4)), Ok(Applied::Changed));
    assert_eq!((map.next_step, map.chains[&id].view), (5, 1));
    refused(&mut map, remove(c.members[0], 5), MapError::StepInFlight(id));
    map.apply(&inserted(id, 4)).unwrap();
    map.apply(&done(id, 4)).unwrap();
    assert_eq!(map.chains[&id].members, vec![c.members[0], c.members[1], NodeId(5), c.members[2]]);
    add(&mut map, 6).unwrap();
    let full = MapCommand::StepStarted { chain: id, expected_view: 2, change: joining(NodeId(6), 0, 5) };
    refused(&mut map, full, MapError::TooManyReplicas(id));
    map.check().unwrap();
}

#[test]
fn the_last_live_replica_is_never_removed_and_a_failed_member_blocks_adds() {
    let mut map = bootstrapped(3, 2, 1);
    let c = map.chains[&ChainId(0)].clone();
    let spare = (1..=3).map(NodeId).find(|n| !c.contains(*n)).unwrap();
    map.apply(&MapCommand::NodeFailed { id: c.members[1] }).unwrap();
    let id = ChainId(0);
    let head = c.members[0];
    assert_eq!(
        start(&mut map, 0, ChainChange::Remove { node: head, step: 1 }),
        Err(MapError::LastReplica { chain: id, node: head })
    );
    assert_eq!(start(&mut map, 0, joining(spare, 0, 1)), Err(MapError::NeedsRepair(id)));
    assert_eq!(start(&mut map, 0, ChainChange::Remove { node: c.members[1], step: 1 }), Ok(Applied::Changed));
    map.apply(&done(id, 1)).unwrap();
    assert_eq!(map.chains[&id].members, vec![head]);
    assert_eq!(map.state(c.members[1]), Some(NodeState::Removed));
    assert_eq!(
        start(&mut map, 0, ChainChange::Remove { node: head, step: 2 }),
        Err(MapError::LastReplica { chain: id, node: head })
    );
    map.check().unwrap();
}

/// A keyspace that keeps a `log` replica never loses its last whole one to a Remove, even one planned before a
/// loss the map recorded since (sim seed 9741457: the tail went after the head's `log` replica was lost, and a
/// memory replica was left alone).
#[test]
fn the_last_whole_durable_replica_is_never_removed() {
    use ReplicaKind::{Log, Mem};
    let MapCommand::Bootstrap { nodes, partitions, vnodes, voters, .. } = bootstrap_cmd(3, 3, 1, 8) else {
        unreachable!("a bootstrap")
    };
    let default = KeyspaceConfig::with_replicas(vec![Log, Mem, Log]);
    let mut map = ClusterMap::default();
    map.apply(&MapCommand::Bootstrap { nodes, default, partitions, vnodes, voters }).unwrap();
    let c = map.chains[&ChainId(0)].clone();
    assert_eq!(c.kinds, vec![Log, Mem, Log]);
    let (head, tail) = (c.members[0], c.members[2]);
    map.apply(&MapCommand::ReplicaLost { chain: c.id, node: head, incarnation: 1 }).unwrap();
    let remove_tail = ChainChange::Remove { node: tail, step: 1 };
    let cmd = start_cmd(&map, remove_tail);
    refused(&mut map, cmd, MapError::LastDurable { chain: c.id, node: tail });
    assert_eq!(start(&mut map, 0, ChainChange::Remove { node: head, step: 1 }), Ok(Applied::Changed));
    map.check().unwrap();
}

fn start_cmd(map: &ClusterMap, change: ChainChange) -> MapCommand {
    MapCommand::StepStarted { chain: ChainId(0), expected_view: map.chains[&ChainId(0)].view, change }
}

/// The view names one member list: starting, finishing an Add and aborting a step that changed no
/// member leave it alone; inserting and removing a member move it by one.
#[test]
fn views_move_exactly_when_members_change() {
    let (joiner, mut map) = with_joiner(&bootstrapped(3, 3, 1));
    let id = ChainId(0);
    let members = map.chains[&id].members.clone();
    let view = |map: &ClusterMap| (map.chains[&id].view, map.chains[&id].members.clone());
    let step = map.next_step;
    assert_eq!(start(&mut map, 0, joining(joiner, 1, step)), Ok(Applied::Changed));
    assert_eq!((view(&map), map.next_step), ((1, members.clone()), step + 1));
    assert_eq!(map.apply(&inserted(id, step)), Ok(Applied::Changed));
    let with_joiner = [&members[..1], &[joiner], &members[1..]].concat();
    assert_eq!(view(&map), (2, with_joiner.clone()));
    assert_eq!(map.state(joiner), Some(NodeState::Joining), "no full replica before its FLUSH is done");
    assert_eq!(map.apply(&done(id, step)), Ok(Applied::Changed));
    assert_eq!((view(&map), &map.chains[&id].change), ((2, with_joiner.clone()), &None));
    assert_eq!(map.state(joiner), Some(NodeState::Active));
    // A Remove moves the view when it is done, not when it starts; an abort before then moves nothing.
    let head = with_joiner[0];
    assert_eq!(start(&mut map, 0, ChainChange::Remove { node: head, step: step + 1 }), Ok(Applied::Changed));
    assert_eq!(map.apply(&aborted(id, step + 1)), Ok(Applied::Changed));
    assert_eq!(view(&map), (2, with_joiner.clone()));
    assert_eq!(start(&mut map, 0, ChainChange::Remove { node: head, step: step + 2 }), Ok(Applied::Changed));
    assert_eq!(view(&map), (2, with_joiner.clone()));
    assert_eq!(map.apply(&done(id, step + 2)), Ok(Applied::Changed));
    assert_eq!(view(&map), (3, with_joiner[1..].to_vec()));
    // An Add aborted before its insertion moves nothing either.
    let spare = head;
    assert_eq!(start(&mut map, 0, joining(spare, 0, step + 3)), Ok(Applied::Changed));
    assert_eq!(map.apply(&aborted(id, step + 3)), Ok(Applied::Changed));
    assert_eq!(view(&map), (3, with_joiner[1..].to_vec()));
    map.check().unwrap();
}

/// Reports name their step by id: a report of a step that is not (or no longer) the chain's step in
/// flight, or of the wrong stage, is refused and changes nothing, epoch included.
#[test]
fn step_reports_with_wrong_or_stale_ids_are_refused() {
    let (joiner, mut map) = with_joiner(&bootstrapped(3, 3, 1));
    let id = ChainId(0);
    let s = map.next_step;
    for report in [inserted(id, s), done(id, s), aborted(id, s)] {
        refused(&mut map, report, MapError::NoStepInFlight(id));
    }
    let pre_inserted = ChainChange::Add { node: joiner, position: 0, step: s, inserted: true, kind: ReplicaKind::Log };
    let started_inserted = MapCommand::StepStarted { chain: id, expected_view: 1, change: pre_inserted };
    refused(&mut map, started_inserted, MapError::AlreadyInserted { chain: id, step: s });
    let start_add = MapCommand::StepStarted { chain: id, expected_view: 1, change: joining(joiner, 0, s) };
    assert_eq!(map.apply(&start_add), Ok(Applied::Changed));
    refused(&mut map, start_add.clone(), MapError::StepInFlight(id));
    refused(&mut map, inserted(id, s + 1), MapError::WrongStep { chain: id, step: s + 1, in_flight: s });
    refused(&mut map, done(id, s - 1), MapError::WrongStep { chain: id, step: s - 1, in_flight: s });
    refused(&mut map, aborted(id, s + 7), MapError::WrongStep { chain: id, step: s + 7, in_flight: s });
    refused(&mut map, inserted(ChainId(1), s), MapError::UnknownChain(ChainId(1)));
    refused(&mut map, done(id, s), MapError::NotInserted { chain: id, step: s });
    assert_eq!(map.apply(&inserted(id, s)), Ok(Applied::Changed));
    refused(&mut map, inserted(id, s), MapError::AlreadyInserted { chain: id, step: s });
    assert_eq!(map.apply(&done(id, s)), Ok(Applied::Changed));
    for report in [inserted(id, s), done(id, s), aborted(id, s)] {
        refused(&mut map, report, MapError::NoStepInFlight(id));
    }
    refused(&mut map, start_add, MapError::StaleView { chain: id, expected: 1, actual: 2 });
    // A Remove: no insertion to report; once aborted, neither its reports nor its start apply again.
    let remove = ChainChange::Remove { node: joiner, step: s + 1 };
    let start_remove = MapCommand::StepStarted { chain: id, expected_view: 2, change: remove };
    let reused = ChainChange::Remove { node: joiner, step: s };
    let start_reused = MapCommand::StepStarted { chain: id, expected_view: 2, change: reused };
    refused(&mut map, start_reused, MapError::StepReused { step: s, next: s + 1 });
    assert_eq!(map.apply(&start_remove), Ok(Applied::Changed));
    refused(&mut map, inserted(id, s + 1), MapError::NotAnAdd { chain: id, step: s + 1 });
    assert_eq!(map.apply(&aborted(id, s + 1)), Ok(Applied::Changed));
    refused(&mut map, aborted(id, s + 1), MapError::NoStepInFlight(id));
    refused(&mut map, start_remove, MapError::StepReused { step: s + 1, next: s + 2 });
    map.check().unwrap();
}

/// §2.5: a joiner whose FLUSH did not come back is not a valid replica, so an abort takes it out again (the
/// planner then redoes the addition: `manager::plan`'s tests).
#[test]
fn an_abort_after_insertion_takes_the_joiner_out() {
    let (joiner, mut map) = with_joiner(&bootstrapped(3, 3, 1));
    let id = ChainId(0);
    let members = map.chains[&id].members.clone();
    let s = map.next_step;
    start(&mut map, 0, joining(joiner, 1, s)).unwrap();
    map.apply(&inserted(id, s)).unwrap();
    assert_eq!(map.apply(&aborted(id, s)), Ok(Applied::Changed));
    let c = &map.chains[&id];
    assert_eq!((&c.members, c.view, c.tail_epoch, &c.change), (&members, 3, 1, &None));
    assert_eq!(map.state(joiner), Some(NodeState::Joining));
    map.check().unwrap();
}

/// A failure of a member or of the joiner aborts the Add; an inserted joiner goes out again (a new view),
/// one not yet inserted leaves the members and the view alone.
#[test]
fn a_failure_during_an_add_aborts_it_and_takes_an_inserted_joiner_out() {
    let (joiner, mut map) = with_joiner(&bootstrapped(3, 3, 1));
    let id = ChainId(0);
    let members = map.chains[&id].members.clone();
    let s = map.next_step;
    start(&mut map, 0, joining(joiner, 1, s)).unwrap();
    let mut before_insertion = map.clone();
    map.apply(&inserted(id, s)).unwrap();
    let mut after_insertion = map.clone();
    // A member fails: the joiner is out again, the failed member stays until it is repaired out.
    assert_eq!(after_insertion.apply(&MapCommand::NodeFailed { id: members[0] }), Ok(Applied::Changed));
    let c = &after_insertion.chains[&id];
    assert_eq!((&c.members, c.view, &c.change), (&members, 3, &None));
    assert_eq!(after_insertion.state(joiner), Some(NodeState::Joining));
    after_insertion.check().unwrap();
    // The joiner fails: it is out again and, in no other chain, Removed.
    assert_eq!(map.apply(&MapCommand::NodeFailed { id: joiner }), Ok(Applied::Changed));
    let c = &map.chains[&id];
    assert_eq!((&c.members, c.view, &c.change), (&members, 3, &None));
    assert_eq!(map.state(joiner), Some(NodeState::Removed));
    map.check().unwrap();
    refused(&mut map, done(id, s), MapError::NoStepInFlight(id));
    // Before the insertion nothing in the chain's members changed, so the view stays.
    assert_eq!(before_insertion.apply(&MapCommand::NodeFailed { id: members[2] }), Ok(Applied::Changed));
    let c = &before_insertion.chains[&id];
    assert_eq!((&c.members, c.view, &c.change), (&members, 1, &None));
    refused(&mut before_insertion, inserted(id, s), MapError::NoStepInFlight(id));
    before_insertion.check().unwrap();
}

/// A failure leaves alone the steps of chains the failed node has no part in.
#[test]
fn a_failure_aborts_only_the_steps_it_touches() {
    let mut map = bootstrapped(4, 2, 4);
    let mut started = Vec::new();
    for c in map.chains.clone().values() {
        let step = map.next_step;
        start(&mut map, c.id.0, ChainChange::Remove { node: c.members[0], step }).unwrap();
        started.push((c.id, c.members.clone()));
    }
    let failed = NodeId(1);
    map.apply(&MapCommand::NodeFailed { id: failed }).unwrap();
    for (id, members) in started {
        let c = &map.chains[&id];
        assert_eq!(c.change.is_none(), members.contains(&failed), "chain {id}");
        assert_eq!((c.view, &c.members), (1, &members));
    }
    map.check().unwrap();
}

#[test]
fn a_recovered_node_keeps_its_chains_and_rejoins_the_others() {
    let mut map = bootstrapped(4, 3, 16);
    let recovered = |id| MapCommand::NodeRecovered { id: NodeId(id) };
    refused(&mut map, recovered(9), MapError::UnknownNode(NodeId(9)));
    assert_eq!(map.apply(&recovered(1)), Ok(Applied::Unchanged), "live nodes are not recovered");
    // Still in every chain it was in: Active at once, no view moved.
    let chains = map.chains.clone();
    map.apply(&MapCommand::NodeFailed { id: NodeId(2) }).unwrap();
    assert_eq!(map.apply(&recovered(2)), Ok(Applied::Changed));
    assert_eq!((map.state(NodeId(2)), &map.chains), (Some(NodeState::Active), &chains));
    assert_eq!(map.apply(&recovered(2)), Ok(Applied::Unchanged));
    // Repaired out of one chain meanwhile: Joining until the planner adds it there again.
    map.apply(&MapCommand::NodeFailed { id: NodeId(2) }).unwrap();
    let one = map.chains.values().find(|c| c.contains(NodeId(2))).unwrap().id;
    let step = map.next_step;
    start(&mut map, one.0, ChainChange::Remove { node: NodeId(2), step }).unwrap();
    map.apply(&done(one, step)).unwrap();
    assert_eq!(map.apply(&recovered(2)), Ok(Applied::Changed));
    assert_eq!(map.state(NodeId(2)), Some(NodeState::Joining));
    assert!(map.chains.values().filter(|c| c.contains(NodeId(2))).count() > 1, "it keeps its other chains");
    // Repaired out of every chain: Removed, then a fresh joiner.
    map.apply(&MapCommand::NodeFailed { id: NodeId(2) }).unwrap();
    remove_everywhere(&mut map, NodeId(2));
    assert_eq!(map.state(NodeId(2)), Some(NodeState::Removed));
    assert_eq!(map.apply(&recovered(2)), Ok(Applied::Changed));
    assert_eq!(map.state(NodeId(2)), Some(NodeState::Joining));
    map.check().unwrap();
}

/// The failure detector never undoes the operator's RemoveNode.
#[test]
fn a_departed_node_is_not_recovered() {
    let mut map = bootstrapped(4, 3, 16);
    let recovered = MapCommand::NodeRecovered { id: NodeId(3) };
    map.apply(&MapCommand::RemoveNode { id: NodeId(3) }).unwrap();
    assert_eq!(map.apply(&recovered), Ok(Applied::Unchanged), "a Leaving node is live");
    // Failed while leaving: it comes back Leaving, to be drained as before.
    map.apply(&MapCommand::NodeFailed { id: NodeId(3) }).unwrap();
    assert_eq!(map.apply(&recovered), Ok(Applied::Changed));
    assert_eq!(map.state(NodeId(3)), Some(NodeState::Leaving));
    map.apply(&MapCommand::NodeFailed { id: NodeId(3) }).unwrap();
    remove_everywhere(&mut map, NodeId(3));
    assert_eq!(map.state(NodeId(3)), Some(NodeState::Removed));
    refused(&mut map, recovered.clone(), MapError::Departed(NodeId(3)));
    // AddNode brings it back and clears the mark.
    assert_eq!(add(&mut map, 3), Ok(Applied::Changed));
    assert!(!map.nodes[&NodeId(3)].departed);
    assert_eq!(map.apply(&recovered), Ok(Applied::Unchanged));
    map.check().unwrap();
}

/// `tail_epoch` is the epoch of the command that last changed the tail, and of no other command.
#[test]
fn tail_epoch_moves_only_with_the_tail() {
    let (joiner, mut map) = with_joiner(&bootstrapped(3, 3, 1));
    let id = ChainId(0);
    let members = map.chains[&id].members.clone();
    let tail_epoch = |map: &ClusterMap| map.chains[&id].tail_epoch;
    let s = map.next_step;
    start(&mut map, 0, joining(joiner, 2, s)).unwrap();
    map.apply(&inserted(id, s)).unwrap();
    map.apply(&done(id, s)).unwrap();
    let tail = members[2];
    map.apply(&MapCommand::NodeFailed { id: tail }).unwrap();
    assert_eq!((map.chains[&id].tail(), tail_epoch(&map)), (Some(tail), 1), "a failure changes no member");
    start(&mut map, 0, ChainChange::Remove { node: tail, step: s + 1 }).unwrap();
    assert_eq!(tail_epoch(&map), 1);
    map.apply(&done(id, s + 1)).unwrap();
    assert_eq!((map.chains[&id].tail(), tail_epoch(&map)), (Some(joiner), map.epoch));
    let moved = map.epoch;
    start(&mut map, 0, ChainChange::Remove { node: members[0], step: s + 2 }).unwrap();
    map.apply(&done(id, s + 2)).unwrap();
    assert_eq!((map.chains[&id].members.clone(), tail_epoch(&map)), (vec![members[1], joiner], moved));
    assert_eq!(map.apply(&MapCommand::NodeRecovered { id: tail }), Ok(Applied::Changed));
    assert_eq!(tail_epoch(&map), moved);
    map.check().unwrap();
}

/// Corrupts a map so that `check` must name what broke.
type Breaker<'a> = Box<dyn Fn(&mut ClusterMap) + 'a>;

fn set_change(m: &mut ClusterMap, id: ChainId, change: ChainChange) {
    m.chains.get_mut(&id).unwrap().change = Some(change);
}

#[test]
fn check_catches_broken_maps() {
    let good = bootstrapped(4, 2, 4);
    let id = ChainId(1);
    let spare = (1..=4).map(NodeId).find(|n| !good.chains[&id].contains(*n)).unwrap();
    let add_spare =
        |position, inserted| ChainChange::Add { node: spare, position, step: 0, inserted, kind: ReplicaKind::Log };
    let breakers: Vec<(&str, Breaker)> = vec![
        (
            "repeats a member",
            Box::new(|m| {
                let c = m.chains.get_mut(&id).unwrap();
                c.members.push(c.members[0]);
            }),
        ),
        ("view 0", Box::new(|m| m.chains.get_mut(&id).unwrap().view = 0)),
        ("tail epoch 2 outside 1..=1", Box::new(|m| m.chains.get_mut(&id).unwrap().tail_epoch = 2)),
        ("tail epoch 0", Box::new(|m| m.chains.get_mut(&id).unwrap().tail_epoch = 0)),
        ("is empty", Box::new(|m| m.chains.get_mut(&id).unwrap().members.clear())),
        ("R+1", Box::new(|m| m.chains.get_mut(&id).unwrap().members.extend([NodeId(7), NodeId(8)]))),
        (
            "is Some(Removed)",
            Box::new(|m| m.nodes.get_mut(&m.chains[&id].members[0]).unwrap().state = NodeState::Removed),
        ),
        ("do not match keyspaces", Box::new(|m| drop(m.chains.remove(&ChainId(3))))),
        ("no default keyspace", Box::new(|m| drop(m.keyspaces.remove(&KeyspaceId::DEFAULT)))),
        (
            "share a name",
            Box::new(|m| {
                m.apply(&create("other", 1)).unwrap();
                m.keyspaces.get_mut(&KeyspaceId(1)).unwrap().name = "default".into();
            }),
        ),
        ("not below next_keyspace", Box::new(|m| m.next_keyspace = 0)),
        ("voter", Box::new(|m| m.manager_voters.push(NodeId(9)))),
        ("learner n9 is not a node", Box::new(|m| m.manager_learners.push(NodeId(9)))),
        ("also a voter", Box::new(|m| m.manager_learners.push(m.manager_voters[0]))),
        ("should not be JOINING", Box::new(|m| m.nodes.get_mut(&NodeId(1)).unwrap().state = NodeState::Joining)),
        (
            "should not be LEAVING",
            Box::new(move |m| {
                m.nodes.get_mut(&spare).unwrap().state = NodeState::Leaving;
                for c in m.chains.values_mut() {
                    c.remove_member(1, spare);
                }
            }),
        ),
        ("departed but is ACTIVE", Box::new(|m| m.nodes.get_mut(&NodeId(1)).unwrap().departed = true)),
        (
            "already a member",
            Box::new(|m| {
                let node = m.chains[&id].members[0];
                set_change(
                    m,
                    id,
                    ChainChange::Add { node, position: 0, step: 0, inserted: false, kind: ReplicaKind::Log },
                );
            }),
        ),
        ("at or after the tail", Box::new(move |m| set_change(m, id, add_spare(2, false)))),
        ("inserted but not a member", Box::new(move |m| set_change(m, id, add_spare(0, true)))),
        (
            "is not at 1",
            Box::new(move |m| {
                m.chains.get_mut(&id).unwrap().insert_member(1, 0, spare, ReplicaKind::Log);
                set_change(m, id, add_spare(1, true));
            }),
        ),
        (
            // Inserted as tail.
            "at or after the tail",
            Box::new(move |m| {
                let c = m.chains.get_mut(&id).unwrap();
                c.insert_member(1, c.members.len(), spare, ReplicaKind::Log);
                set_change(m, id, add_spare(2, true));
            }),
        ),
        (
            "add with a failed member",
            Box::new(move |m| {
                let member = m.chains[&id].members[1];
                m.nodes.get_mut(&member).unwrap().state = NodeState::Failed;
                set_change(m, id, add_spare(1, false));
            }),
        ),
        (
            "not below",
            Box::new(move |m| {
                set_change(
                    m,
                    id,
                    ChainChange::Add { node: spare, position: 1, step: 1, inserted: false, kind: ReplicaKind::Log },
                );
            }),
        ),
        (
            "which is Some(Failed)",
            Box::new(move |m| {
                m.nodes.get_mut(&spare).unwrap().state = NodeState::Failed;
                set_change(m, id, add_spare(1, false));
            }),
        ),
        ("not a member", Box::new(move |m| set_change(m, id, ChainChange::Remove { node: spare, step: 0 }))),
        (
            "no live member",
            Box::new(|m| {
                let c = m.chains.get_mut(&id).unwrap();
                let node = c.members[0];
                c.members.truncate(1);
                c.kinds.truncate(1);
                c.change = Some(ChainChange::Remove { node, step: 0 });
            }),
        ),
        (
            "kinds for its members",
            Box::new(|m| {
                m.chains.get_mut(&id).unwrap().kinds.pop();
            }),
        ),
        (
            "a lost replica of a non-member",
            Box::new(move |m| {
                m.chains.get_mut(&id).unwrap().lost.insert(spare, 1);
            }),
        ),
        (
            "add with a lost replica",
            Box::new(move |m| {
                let member = m.chains[&id].members[0];
                m.chains.get_mut(&id).unwrap().lost.insert(member, 1);
                set_change(m, id, add_spare(1, false));
            }),
        ),
        (
            "step 1 in flight twice",
            Box::new(|m| {
                m.next_step = 2;
                for c in [ChainId(0), ChainId(1)] {
                    let node = m.chains[&c].members[0];
                    set_change(m, c, ChainChange::Remove { node, step: 1 });
                }
            }),
        ),
    ];
    for (what, breaker) in breakers {
        let mut map = good.clone();
        breaker(&mut map);
        let err = map.check().expect_err(what);
        assert!(err.0.contains(what), "{what}: {err}");
    }
    assert_eq!(ClusterMap::default().check(), Ok(()));
}

#[test]
fn maps_and_commands_round_trip_through_the_wire_format() {
    let (joiner, mut map) = with_joiner(&bootstrapped(3, 3, 1));
    start(&mut map, 0, joining(joiner, 0, 1)).unwrap();
    map.apply(&inserted(ChainId(0), 1)).unwrap();
    map.apply(&MapCommand::RemoveNode { id: NodeId(2) }).unwrap();
    let bytes = encoded(&map);
    let (decoded, used): (ClusterMap, usize) = wire::decode(&bytes).unwrap().unwrap();
    assert_eq!((decoded, used), (map, bytes.len()));
    let commands = [
        MapCommand::StepStarted { chain: ChainId(3), expected_view: 9, change: joining(NodeId(5), 1, 4) },
        MapCommand::NodeRecovered { id: NodeId(4) },
        inserted(ChainId(3), 4),
        done(ChainId(3), u64::MAX),
        aborted(ChainId(3), 4),
    ];
    for cmd in commands {
        let mut out = Vec::new();
        wire::encode(&cmd, &mut out).unwrap();
        assert_eq!(wire::decode::<MapCommand>(&out).unwrap().unwrap().0, cmd);
    }
}

#[test]
fn states_and_errors_print_as_ctl_shows_them() {
    let states = [NodeState::Joining, NodeState::Active, NodeState::Leaving, NodeState::Failed, NodeState::Removed];
    let shown: Vec<String> = states.iter().map(|s| s.to_string()).collect();
    assert_eq!(shown, ["JOINING", "ACTIVE", "LEAVING", "FAILED", "REMOVED"]);
    assert_eq!(
        MapError::NeverTail { chain: ChainId(2), position: 3 }.to_string(),
        "position 3 is not before the tail of chain c2"
    );
    assert_eq!(
        MapError::WrongStep { chain: ChainId(2), step: 5, in_flight: 4 }.to_string(),
        "chain c2 has step 4 in flight, not 5"
    );
}

fn create(name: &str, replication: usize) -> MapCommand {
    MapCommand::CreateKeyspace { name: name.into(), config: KeyspaceConfig::durable(replication) }
}

#[test]
fn a_keyspace_gets_its_own_chains_at_their_targets() {
    let mut map = bootstrapped(4, 3, 8);
    assert_eq!(map.keyspace_named("default").map(|(id, k)| (id, k.config.replication())), Some((KeyspaceId(0), 3)));
    assert_eq!(map.apply(&create("single", 1)), Ok(Applied::Changed));
    map.check().unwrap();
    let (id, _) = map.keyspace_named("single").unwrap();
    assert_eq!((id, map.chains.len()), (KeyspaceId(1), 16));
    let targets = map.targets();
    for p in 0..8 {
        let (ours, default) = (&map.chains[&ChainId::new(id, p)], &map.chains[&ChainId(p)]);
        assert_eq!((ours.view, &ours.members, ours.tail_epoch), (1, &targets[&ours.id], map.epoch));
        assert_eq!(ours.members, default.members[..1], "the same partition, the first R of its preference list");
    }
}

#[test]
fn keyspace_commands_are_validated() {
    let mut map = bootstrapped(3, 3, 4);
    map.apply(&create("a", 2)).unwrap();
    refused(&mut map, create("a", 1), MapError::KeyspaceExists("a".into()));
    refused(&mut map, create("default", 1), MapError::KeyspaceExists("default".into()));
    let bad_name = MapError::BadKeyspace(validate_name("a b").unwrap_err());
    refused(&mut map, create("a b", 1), bad_name);
    let bad_config = MapError::BadKeyspace(KeyspaceConfig::durable(0).validate().unwrap_err());
    refused(&mut map, create("b", 0), bad_config);
    refused(&mut map, MapCommand::DropKeyspace { name: "default".into() }, MapError::DefaultKeyspace);
    refused(&mut map, MapCommand::DropKeyspace { name: "zz".into() }, MapError::UnknownKeyspace("zz".into()));
    for i in map.keyspaces.len()..KEYSPACES_MAX {
        map.apply(&create(&format!("k{i}"), 1)).unwrap();
    }
    refused(&mut map, create("one-more", 1), MapError::TooManyKeyspaces);
    let mut wide = bootstrapped(3, 3, 4096);
    for i in 1..CHAINS_MAX / 4096 {
        wide.apply(&create(&format!("k{i}"), 1)).unwrap();
    }
    refused(&mut wide, create("one-more", 1), MapError::TooManyKeyspaces);
}

/// `db<n>` is refused while keyspace number n is one of another name, which `SELECT n` chooses: ordered here,
/// the refusal holds on a node whose map had not shown that keyspace when it asked.
#[test]
fn a_database_never_takes_the_number_of_a_keyspace_of_another_name() {
    let mut map = bootstrapped(3, 2, 4);
    let database = |number| MapCommand::CreateDatabase { number, config: KeyspaceConfig::durable(1) };
    map.apply(&create("orders", 1)).unwrap();
    refused(&mut map, database(1), MapError::NumberTaken { number: 1, name: "orders".into() });
    refused(&mut map, database(0), MapError::NumberTaken { number: 0, name: "default".into() });
    assert_eq!(map.apply(&database(5)), Ok(Applied::Changed), "number 5 is free: db5 takes number 2");
    assert_eq!(map.keyspace_named("db5").unwrap().0, KeyspaceId(2));
    assert_eq!(map.apply(&database(2)), Ok(Applied::Changed), "number 2 is db5's, which SELECT 2 does not choose");
    refused(&mut map, database(5), MapError::KeyspaceExists("db5".into()));
    map.check().unwrap();
    let refusal = MapError::NumberTaken { number: 1, name: "orders".into() }.to_string();
    assert!(refusal.contains("SELECT 1") && refusal.contains("db1"), "{refusal}");
}

#[test]
fn a_dropped_keyspace_takes_its_chains_and_its_id_is_never_reused() {
    let mut map = bootstrapped(3, 2, 4);
    map.apply(&create("a", 2)).unwrap();
    let a = ChainId::new(KeyspaceId(1), 0);
    let (node, step) = (map.chains[&a].members[0], map.next_step);
    start(&mut map, a.0, ChainChange::Remove { node, step }).unwrap();
    assert_eq!(map.apply(&MapCommand::DropKeyspace { name: "a".into() }), Ok(Applied::Changed));
    map.check().unwrap();
    assert!(map.chains.keys().all(|c| c.keyspace() == KeyspaceId::DEFAULT) && map.chains.len() == 4);
    map.apply(&create("a", 1)).unwrap();
    assert_eq!(map.keyspace_named("a").unwrap().0, KeyspaceId(2));
    map.check().unwrap();
}

/// A lease keyspace over three regions, on a node in each.
fn lease_map() -> ClusterMap {
    let nodes = ["eu", "us", "asia"].iter().zip(1..).map(|(r, i)| (NodeId(i), addrs(i), r.parse().unwrap())).collect();
    let mut map = ClusterMap::default();
    let boot = MapCommand::Bootstrap {
        nodes,
        default: KeyspaceConfig::durable(3),
        partitions: 4,
        vnodes: 8,
        voters: (1..=3).map(NodeId).collect(),
    };
    map.apply(&boot).unwrap();
    let config = KeyspaceConfig {
        protocol: meridian_core::ProtocolConfig::default_for(Protocol::Lease),
        placement: Placement::one_in_each("eu,us,asia").unwrap(),
        ..KeyspaceConfig::durable(3)
    };
    map.apply(&MapCommand::CreateKeyspace { name: "ll".into(), config }).unwrap();
    map
}

#[test]
fn a_master_region_move_moves_every_master_and_nothing_else() {
    let mut map = lease_map();
    let (id, _) = map.keyspace_named("ll").unwrap();
    let lease_chains = |map: &ClusterMap| -> Vec<ChainView> {
        map.chains.values().filter(|c| c.id.keyspace() == id).cloned().collect()
    };
    let before = lease_chains(&map);
    assert!(before.iter().all(|c| map.lease_master(c) == Some(NodeId(1))), "eu masters");
    let to_us = MapCommand::SetMasterRegion { name: "ll".into(), region: "us".into() };
    assert_eq!(map.apply(&to_us), Ok(Applied::Changed));
    map.check().unwrap();
    assert_eq!(lease_chains(&map), before, "members and views stay");
    assert!(lease_chains(&map).iter().all(|c| map.lease_master(c) == Some(NodeId(2))), "us masters");
    let regions: Vec<&str> = map.keyspaces[&id].config.placement.regions.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(regions, ["us", "eu", "asia"]);
    assert!(crate::manager::plan::next_steps(&map).is_empty(), "nothing for the planner to move");
    assert_eq!(map.apply(&to_us), Ok(Applied::Unchanged));
    let nowhere = MapCommand::SetMasterRegion { name: "ll".into(), region: "mars".into() };
    let not_placed =
        MapError::BadKeyspace(meridian_core::placement::PlacementError::HomeNotPlaced("mars".into()).into());
    refused(&mut map, nowhere, not_placed);
    let chain = MapCommand::SetMasterRegion { name: "default".into(), region: "us".into() };
    refused(&mut map, chain, MapError::NotLease("default".into()));
    let unknown = MapCommand::SetMasterRegion { name: "zz".into(), region: "us".into() };
    refused(&mut map, unknown, MapError::UnknownKeyspace("zz".into()));
}

#[test]
fn a_key_master_move_pins_one_key_and_survives_a_master_region_move() {
    let mut map = lease_map();
    let (id, _) = map.keyspace_named("ll").unwrap();
    let chains_before = map.chains.clone();
    let pin = |key: &str, region: &str| MapCommand::SetKeyMaster {
        name: "ll".into(),
        key: Bytes::copy_from_slice(key.as_bytes()),
        region: region.into(),
    };
    assert_eq!(map.apply(&pin("k", "us")), Ok(Applied::Changed));
    map.check().unwrap();
    assert_eq!(map.chains, chains_before, "members and views stay");
    let masters = map.key_masters(id).unwrap();
    assert_eq!((masters.epoch, masters.home_since), (map.epoch, 0));
    assert_eq!(masters.pinned[&Bytes::from_static(b"k")], Pin { region: "us".into(), since: map.epoch });
    let c = map.chain_of_key(id, b"k").unwrap().clone();
    assert!(map.leased_at(&c, NodeId(2)) && map.leased_at(&c, NodeId(1)), "us masters k, eu the rest");
    assert_eq!(map.apply(&pin("k", "us")), Ok(Applied::Unchanged));
    let mut us_down = map.clone();
    us_down.apply(&MapCommand::NodeFailed { id: NodeId(2) }).unwrap();
    let stand_in = us_down.lease_master_in(&c, Some("us")).unwrap();
    assert_ne!(stand_in, NodeId(2));
    assert!(us_down.leased_at(&c, stand_in), "the node standing in for us gets the manager's lease");
    let to_asia = MapCommand::SetMasterRegion { name: "ll".into(), region: "asia".into() };
    assert_eq!(map.apply(&to_asia), Ok(Applied::Changed));
    let masters = map.key_masters(id).unwrap();
    assert_eq!((masters.epoch, masters.home_since), (map.epoch, map.epoch), "every other key moved");
    assert_eq!(masters.pinned[&Bytes::from_static(b"k")].region, "us", "a pinned key stays");
    let not_placed =
        MapError::BadKeyspace(meridian_core::placement::PlacementError::HomeNotPlaced("mars".into()).into());
    refused(&mut map, pin("k", "mars"), not_placed);
    refused(&mut map, pin("", "us"), MapError::BadPinnedKey(0));
    refused(&mut map, pin(&"x".repeat(513), "us"), MapError::BadPinnedKey(513));
    let chain = MapCommand::SetKeyMaster { name: "default".into(), key: "k".into(), region: "us".into() };
    refused(&mut map, chain, MapError::NotLease("default".into()));
    for i in map.key_masters(id).unwrap().pinned.len()..crate::map::masters::PINNED_MAX {
        map.apply(&pin(&format!("key{i}"), "eu")).unwrap();
    }
    refused(&mut map, pin("one-more", "eu"), MapError::TooManyPins("ll".into()));
    assert_eq!(map.apply(&pin("k", "eu")), Ok(Applied::Changed), "a pinned key moves again");
    map.apply(&MapCommand::DropKeyspace { name: "ll".into() }).unwrap();
    assert!(map.key_masters(id).is_none(), "dropped with its keyspace");
}
