use super::*;
use meridian_core::wire;

pub(crate) fn addrs(i: u32) -> NodeAddrs {
    NodeAddrs { peer_addr: format!("h{i}:7000"), resp_addr: format!("h{i}:6379"), http_addr: Some(format!("h{i}:80")) }
}

pub(crate) fn bootstrap_cmd(n: u32, replication: usize, partitions: u32, vnodes: u32) -> MapCommand {
    MapCommand::Bootstrap {
        nodes: (1..=n).map(|i| (NodeId(i), addrs(i))).collect(),
        replication,
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
    map.apply(&MapCommand::AddNode { id: NodeId(i), addrs: addrs(i), vnodes: 8 })
}

fn start(map: &mut ClusterMap, chain: u32, change: ChainChange) -> Result<Applied, MapError> {
    let view = map.chains[&ChainId(chain)].view;
    map.apply(&MapCommand::StepStarted { chain: ChainId(chain), expected_view: view, change })
}

#[test]
fn bootstrap_places_every_chain_at_its_target() {
    let map = bootstrapped(4, 3, 64);
    assert_eq!(map.epoch, 1);
    assert!(map.nodes.values().all(|n| n.state == NodeState::Active && n.vnodes == 8));
    let targets = map.targets();
    for (id, c) in &map.chains {
        assert_eq!((c.view, &c.change, &c.members), (1, &None, &targets[id.0 as usize]));
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
    let clash = MapCommand::AddNode { id: NodeId(4), addrs: addrs(9), vnodes: 8 };
    refused(&mut map, clash, MapError::IdClash(NodeId(4)));
    let heavier = MapCommand::AddNode { id: NodeId(4), addrs: addrs(4), vnodes: 9 };
    refused(&mut map, heavier, MapError::IdClash(NodeId(4)));
    let stolen = MapCommand::AddNode { id: NodeId(5), addrs: addrs(2), vnodes: 8 };
    refused(&mut map, stolen, MapError::AddrInUse { addr: "h2:7000".into(), by: NodeId(2) });
    refused(&mut map, MapCommand::AddNode { id: NodeId(5), addrs: addrs(5), vnodes: 0 }, MapError::BadVnodes(0));
    map.check().unwrap();
}

#[test]
fn leave_and_failure_are_idempotent_and_a_failed_node_rejoins_only_once_removed() {
    let mut map = bootstrapped(4, 3, 16);
    refused(&mut map, MapCommand::NodeFailed { id: NodeId(9) }, MapError::UnknownNode(NodeId(9)));
    assert_eq!(map.apply(&MapCommand::NodeFailed { id: NodeId(2) }), Ok(Applied::Changed));
    assert_eq!(map.apply(&MapCommand::NodeFailed { id: NodeId(2) }), Ok(Applied::Unchanged));
    assert_eq!(map.apply(&MapCommand::RemoveNode { id: NodeId(2) }), Ok(Applied::Unchanged));
    refused(&mut map, MapCommand::AddNode { id: NodeId(2), addrs: addrs(2), vnodes: 8 }, {
        MapError::NodeBusy { id: NodeId(2), state: NodeState::Failed }
    });
    assert_eq!(map.apply(&MapCommand::RemoveNode { id: NodeId(3) }), Ok(Applied::Changed));
    assert_eq!(map.apply(&MapCommand::RemoveNode { id: NodeId(3) }), Ok(Applied::Unchanged));
    assert_eq!(map.state(NodeId(3)), Some(NodeState::Leaving));
    // Once the failed node is out of every chain it is Removed and may come back as a fresh joiner.
    for c in map.chains.values_mut() {
        c.members.retain(|&m| m != NodeId(2));
    }
    map.settle();
    assert_eq!(map.state(NodeId(2)), Some(NodeState::Removed));
    assert_eq!(add(&mut map, 2), Ok(Applied::Changed));
    assert_eq!(map.state(NodeId(2)), Some(NodeState::Joining));
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

#[test]
fn steps_are_validated_against_the_chain() {
    let mut map = bootstrapped(4, 3, 8);
    add(&mut map, 5).unwrap();
    let c = map.chains[&ChainId(0)].clone();
    let outsider = (1..=4).map(NodeId).find(|n| !c.contains(*n)).unwrap();
    let id = ChainId(0);
    let stale =
        MapCommand::StepStarted { chain: id, expected_view: 7, change: ChainChange::Remove { node: c.members[0] } };
    refused(&mut map, stale, MapError::StaleView { chain: id, expected: 7, actual: 1 });
    let unknown = MapCommand::StepDone { chain: ChainId(8), expected_view: 1 };
    refused(&mut map, unknown, MapError::UnknownChain(ChainId(8)));
    refused(&mut map, MapCommand::StepDone { chain: id, expected_view: 1 }, MapError::NoStepInFlight(id));
    refused(&mut map, MapCommand::StepAborted { chain: id, expected_view: 1 }, MapError::NoStepInFlight(id));
    let add_at = |node, position, flush| MapCommand::StepStarted {
        chain: id,
        expected_view: 1,
        change: ChainChange::Add { node, position, flush },
    };
    refused(&mut map, add_at(NodeId(9), 0, 1), MapError::UnknownNode(NodeId(9)));
    refused(&mut map, add_at(c.members[1], 0, 1), MapError::AlreadyMember { chain: id, node: c.members[1] });
    refused(&mut map, add_at(outsider, 3, 1), MapError::NeverTail { chain: id, position: 3 });
    refused(&mut map, add_at(outsider, 2, 0), MapError::FlushReused { flush: 0, next: 1 });
    let remove = |node| MapCommand::StepStarted { chain: id, expected_view: 1, change: ChainChange::Remove { node } };
    refused(&mut map, remove(outsider), MapError::NotMember { chain: id, node: outsider });
    map.apply(&MapCommand::RemoveNode { id: outsider }).unwrap();
    let leaving = NodeState::Leaving;
    refused(&mut map, add_at(outsider, 0, 1), MapError::NotPlaceable { id: outsider, state: leaving });
    // A legal Add, then a second step on the same chain.
    assert_eq!(map.apply(&add_at(NodeId(5), 2, 4)), Ok(Applied::Changed));
    assert_eq!((map.next_flush, map.chains[&id].view), (5, 2));
    let second =
        MapCommand::StepStarted { chain: id, expected_view: 2, change: ChainChange::Remove { node: c.members[0] } };
    refused(&mut map, second, MapError::StepInFlight(id));
    assert_eq!(map.apply(&MapCommand::StepDone { chain: id, expected_view: 2 }), Ok(Applied::Changed));
    assert_eq!(map.chains[&id].members, vec![c.members[0], c.members[1], NodeId(5), c.members[2]]);
    add(&mut map, 6).unwrap();
    let full = ChainChange::Add { node: NodeId(6), position: 0, flush: 5 };
    refused(
        &mut map,
        MapCommand::StepStarted { chain: id, expected_view: 3, change: full },
        MapError::TooManyReplicas(id),
    );
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
        start(&mut map, 0, ChainChange::Remove { node: head }),
        Err(MapError::LastReplica { chain: id, node: head })
    );
    let add = ChainChange::Add { node: spare, position: 0, flush: 1 };
    assert_eq!(start(&mut map, 0, add), Err(MapError::NeedsRepair(id)));
    assert_eq!(start(&mut map, 0, ChainChange::Remove { node: c.members[1] }), Ok(Applied::Changed));
    map.apply(&MapCommand::StepDone { chain: id, expected_view: 2 }).unwrap();
    assert_eq!(map.chains[&id].members, vec![head]);
    assert_eq!(map.state(c.members[1]), Some(NodeState::Removed));
    assert_eq!(
        start(&mut map, 0, ChainChange::Remove { node: head }),
        Err(MapError::LastReplica { chain: id, node: head })
    );
    map.check().unwrap();
}

#[test]
fn a_failure_aborts_the_steps_it_touches_and_stale_completions_are_refused() {
    let mut map = bootstrapped(3, 2, 1);
    add(&mut map, 4).unwrap();
    let id = ChainId(0);
    let c = map.chains[&id].clone();
    let joiner = (1..=4).map(NodeId).find(|n| !c.contains(*n)).unwrap();
    start(&mut map, 0, ChainChange::Add { node: joiner, position: 1, flush: 1 }).unwrap();
    refused(
        &mut map,
        MapCommand::StepStarted {
            chain: id,
            expected_view: 2,
            change: ChainChange::Add { node: joiner, position: 0, flush: 2 },
        },
        MapError::StepInFlight(id),
    );
    assert_eq!(map.apply(&MapCommand::NodeFailed { id: joiner }), Ok(Applied::Changed));
    assert_eq!((map.chains[&id].view, &map.chains[&id].change), (3, &None));
    refused(
        &mut map,
        MapCommand::StepDone { chain: id, expected_view: 2 },
        MapError::StaleView { chain: id, expected: 2, actual: 3 },
    );
    // The joiner was in no chain yet: it is Removed at once.
    assert_eq!(map.state(joiner), Some(NodeState::Removed));
    map.check().unwrap();
}

#[test]
fn abort_keeps_members_and_moves_the_view() {
    let mut map = bootstrapped(3, 2, 1);
    let id = ChainId(0);
    let tail = map.chains[&id].tail().unwrap();
    start(&mut map, 0, ChainChange::Remove { node: tail }).unwrap();
    let members = map.chains[&id].members.clone();
    assert_eq!(map.apply(&MapCommand::StepAborted { chain: id, expected_view: 2 }), Ok(Applied::Changed));
    assert_eq!((map.chains[&id].view, &map.chains[&id].members), (3, &members));
    refused(
        &mut map,
        MapCommand::StepAborted { chain: id, expected_view: 2 },
        MapError::StaleView { chain: id, expected: 2, actual: 3 },
    );
}

/// Corrupts a map so that `check` must name what broke.
type Breaker<'a> = Box<dyn Fn(&mut ClusterMap) + 'a>;

#[test]
fn check_catches_broken_maps() {
    let good = bootstrapped(4, 2, 4);
    let id = ChainId(1);
    let spare = (1..=4).map(NodeId).find(|n| !good.chains[&id].contains(*n)).unwrap();
    let breakers: Vec<(&str, Breaker)> = vec![
        (
            "repeats a member",
            Box::new(|m| {
                let c = m.chains.get_mut(&id).unwrap();
                c.members.push(c.members[0]);
            }),
        ),
        ("view 0", Box::new(|m| m.chains.get_mut(&id).unwrap().view = 0)),
        ("is empty", Box::new(|m| m.chains.get_mut(&id).unwrap().members.clear())),
        ("R+1", Box::new(|m| m.chains.get_mut(&id).unwrap().members.extend([NodeId(7), NodeId(8)]))),
        (
            "is Some(Removed)",
            Box::new(|m| m.nodes.get_mut(&m.chains[&id].members[0]).unwrap().state = NodeState::Removed),
        ),
        ("3 chains", Box::new(|m| drop(m.chains.remove(&ChainId(3))))),
        ("voter", Box::new(|m| m.manager_voters.push(NodeId(9)))),
        ("should not be JOINING", Box::new(|m| m.nodes.get_mut(&NodeId(1)).unwrap().state = NodeState::Joining)),
        (
            "should not be LEAVING",
            Box::new(move |m| {
                m.nodes.get_mut(&spare).unwrap().state = NodeState::Leaving;
                for c in m.chains.values_mut() {
                    c.members.retain(|&n| n != spare);
                }
            }),
        ),
        (
            "already a member",
            Box::new(|m| {
                let node = m.chains[&id].members[0];
                m.chains.get_mut(&id).unwrap().change = Some(ChainChange::Add { node, position: 0, flush: 0 });
            }),
        ),
        (
            "at or after the tail",
            Box::new(move |m| {
                m.chains.get_mut(&id).unwrap().change = Some(ChainChange::Add { node: spare, position: 2, flush: 0 });
            }),
        ),
        (
            "not below",
            Box::new(move |m| {
                m.chains.get_mut(&id).unwrap().change = Some(ChainChange::Add { node: spare, position: 1, flush: 1 });
            }),
        ),
        (
            "which is Some(Failed)",
            Box::new(move |m| {
                m.nodes.get_mut(&spare).unwrap().state = NodeState::Failed;
                m.chains.get_mut(&id).unwrap().change = Some(ChainChange::Add { node: spare, position: 1, flush: 0 });
            }),
        ),
        (
            "not a member",
            Box::new(move |m| m.chains.get_mut(&id).unwrap().change = Some(ChainChange::Remove { node: spare })),
        ),
        (
            "no live member",
            Box::new(|m| {
                let c = m.chains.get_mut(&id).unwrap();
                let node = c.members[0];
                c.members.truncate(1);
                c.change = Some(ChainChange::Remove { node });
            }),
        ),
        (
            "twice",
            Box::new(|m| {
                m.next_flush = 2;
                for c in [ChainId(0), ChainId(1)] {
                    let node = (1..=4).map(NodeId).find(|n| !m.chains[&c].contains(*n)).unwrap();
                    m.chains.get_mut(&c).unwrap().change = Some(ChainChange::Add { node, position: 0, flush: 1 });
                }
            }),
        ),
    ];
    for (what, breaker) in breakers {
        let mut map = good.clone();
        breaker(&mut map);
        let err = map.check().expect_err(what);
        assert!(err.contains(what), "{what}: {err}");
    }
    assert_eq!(ClusterMap::default().check(), Ok(()));
}

#[test]
fn maps_and_commands_round_trip_through_the_wire_format() {
    let mut map = bootstrapped(4, 3, 16);
    add(&mut map, 5).unwrap();
    let bytes = encoded(&map);
    let (decoded, used): (ClusterMap, usize) = wire::decode(&bytes).unwrap().unwrap();
    assert_eq!((decoded, used), (map, bytes.len()));
    let cmd = MapCommand::StepStarted {
        chain: ChainId(3),
        expected_view: 9,
        change: ChainChange::Add { node: NodeId(5), position: 1, flush: 4 },
    };
    let mut out = Vec::new();
    wire::encode(&cmd, &mut out).unwrap();
    assert_eq!(wire::decode::<MapCommand>(&out).unwrap().unwrap().0, cmd);
}

#[test]
fn states_print_as_ctl_shows_them() {
    let states = [NodeState::Joining, NodeState::Active, NodeState::Leaving, NodeState::Failed, NodeState::Removed];
    let shown: Vec<String> = states.iter().map(|s| s.to_string()).collect();
    assert_eq!(shown, ["JOINING", "ACTIVE", "LEAVING", "FAILED", "REMOVED"]);
    assert_eq!(
        MapError::NeverTail { chain: ChainId(2), position: 3 }.to_string(),
        "position 3 is not before the tail of chain c2"
    );
}
