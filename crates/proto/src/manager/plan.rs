//! The reconciliation planner: from the current chains and their targets, the single next membership
//! step of every chain that has none in flight. This is the seed's `restore_replication_factor`
//! (Listing 2) generalised from "one joining node" to "any difference between current and target".
//!
//! Rules, in priority order, for a chain with no step in flight:
//! 1. **Repair** (§2.6): a Failed member, or one whose replica is lost (its node restarted without a whole
//!    replica), is removed first (CR_HEAD / CR_MID / CR_TAIL by position, see [`removal_kind`]), provided
//!    another live member with a whole replica keeps the data. If every member failed the chain is
//!    irreparable ([`irreparable`]): there is nothing to copy from, and nothing is invented. If the live
//!    members all lost their replicas, the manager's leader keeps the best of them (`ReplicaRestored`).
//!    A Failed member that keeps the chain's only `log` replica is not removed, even when an operator asked to
//!    remove its node: the chain waits for it rather than go on with replicas a crash would empty.
//! 2. **Add** (§2.5): if a target node is missing and the chain has at most R members, add the first
//!    missing one (pre-copy from the tail, then FLUSH), placed right after its nearest target predecessor
//!    that is a member, but never as tail: at most just before the current tail. This covers both a
//!    short chain (after a repair) and a chain of R that must swap a member (a leave or a join's
//!    rebalancing): the swap adds first, so the chain never drops below R on the way. The joiner's replica
//!    kind is one the staying members lack ([`crate::map::kinds`]).
//! 3. **Remove surplus**: otherwise, a member that is not in the target is removed, unless it is the last
//!    member: the one nearest the tail whose kind the chain has more of than its configuration wants, else
//!    the one nearest the tail. With a new node inserted before the old tail this is the seed's TRUNCATE of
//!    the surplus tail (R+1 → R). A member that keeps the chain's only replica surviving a restart stays until
//!    the chain has another (rule 4 makes room for it), so draining nodes never leaves a keyspace configured
//!    with a `log` replica without one.
//! 4. **Retype**: a chain whose members are its target but whose kinds are not the configured ones (targets
//!    moved in the middle of a swap) removes the member nearest the tail of a kind it has too many of; rule
//!    2 then adds it back, copied afresh into a kind the chain lacks.
//!
//! A planned step is a `StepStarted`; the executor then drives it through the map's lifecycle
//! ([`crate::map`]): an Add through `AddInserted` (pre-copy done) and `StepDone` (FLUSH done), a Remove
//! through `StepDone`, either possibly through `StepAborted`. An aborted step's chain has no step in
//! flight again, so the next plan redoes it under a new step id.
//!
//! Each step moves one member toward the target and targets do not change while no command arrives, so
//! planning and executing repeatedly converges: every chain's member *set* equals its target (the
//! order may differ where an Add could not go to its target position behind the tail; reordering would
//! cost extra copies and buys only balance of head and tail roles).
//!
//! Steps on different chains are independent and may run concurrently. Adds are limited per node
//! ([`PlanLimits`]): pre-copy streams a partition from the chain's tail into the joiner, the expensive
//! part of a join (§4: the pre-copying nodes lose a third of their throughput at full load), so no node
//! takes part in more than `copies_per_node` Adds at once, as joiner or as source. An Add counts until
//! its `StepDone`, inserted or not: the FLUSH still streams the gap from the tail. Removes are never
//! limited: they copy nothing, and a repair must not wait behind a copy.

use crate::map::{kinds, ChainChange, ChainView, ClusterMap};
use meridian_core::config::DEFAULT_REPLICATION;
use meridian_core::ReplicaKind;
use meridian_core::{ChainId, NodeId, Protocol};
use std::collections::BTreeMap;

/// Concurrent Adds one node may take part in, unless configured otherwise. The seed's join (§2.5)
/// pre-copies the R chains a new VID enters in parallel, so R streams into one node is its load point.
pub const DEFAULT_COPIES_PER_NODE: usize = DEFAULT_REPLICATION;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanLimits {
    /// In-flight Adds a node may take part in as joiner or as pre-copy source; at least 1.
    pub copies_per_node: usize,
}

impl Default for PlanLimits {
    fn default() -> Self {
        PlanLimits { copies_per_node: DEFAULT_COPIES_PER_NODE }
    }
}

/// How the chain is told to drop a member (Listing 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// The head goes: its successor becomes head.
    CrHead,
    /// A middle member goes: its predecessor links to its successor and resends what it may have missed.
    CrMid,
    /// A failed tail goes: its predecessor becomes tail and answers pending puts.
    CrTail,
    /// A live surplus tail goes: TRUNCATE to its predecessor, which forwards it to the old tail.
    Truncate,
}

/// The protocol step that removes `node` from `chain`, by its position; `None` if it is not a member.
pub fn removal_kind(map: &ClusterMap, chain: &ChainView, node: NodeId) -> Option<Removal> {
    let position = chain.position(node)?;
    Some(if position + 1 == chain.members.len() {
        if map.is_live(node) {
            Removal::Truncate
        } else {
            Removal::CrTail
        }
    } else if position == 0 {
        Removal::CrHead
    } else {
        Removal::CrMid
    })
}

/// The chains the planner cannot repair until a node comes back: no live member holds a whole replica (every
/// member failed, or lost its replica to a restart, which `ReplicaRestored` may settle), or a Failed member
/// keeps the chain's only `log` replica.
pub fn irreparable(map: &ClusterMap) -> Vec<ChainId> {
    let stuck = |c: &&ChainView| {
        let whole = |m: NodeId| map.holds_whole(c, m);
        let waits = |m: NodeId| last_durable(map, c, m);
        !c.members.iter().any(|&m| whole(m)) || c.members.iter().any(|&m| waits(m))
    };
    map.chains.values().filter(stuck).map(|c| c.id).collect()
}

/// [`next_steps_with`] under the default limits.
pub fn next_steps(map: &ClusterMap) -> Vec<(ChainId, u64, ChainChange)> {
    next_steps_with(map, &PlanLimits::default())
}

/// The next step of every chain that has none in flight, as `(chain, view planned against, change)`: the
/// fields of a `MapCommand::StepStarted`. The steps take consecutive ids from `map.next_step`, so any of
/// them can be started, in the order given.
pub fn next_steps_with(map: &ClusterMap, limits: &PlanLimits) -> Vec<(ChainId, u64, ChainChange)> {
    if !map.is_bootstrapped() {
        return Vec::new();
    }
    let targets = map.targets();
    let mut copies = Copies::in_flight(map);
    let mut step = map.next_step;
    let mut steps = Vec::new();
    for (id, c) in map.chains.iter().filter(|(_, c)| c.change.is_none()) {
        let protocol = map.keyspaces.get(&id.keyspace()).map(|k| k.config.protocol.protocol());
        let change = match protocol {
            Some(Protocol::Quorum | Protocol::Lease | Protocol::Meteor) => {
                crate::quorum::rules::next_change(map, c, &targets[id], step)
            }
            _ => next_change(map, c, &targets[id], step),
        };
        let Some(change) = change else {
            continue;
        };
        if let ChainChange::Add { node, position, .. } = change {
            let source = map.precopy_source(c, node, position).expect("an Add needs a member");
            if !copies.admit(node, source, limits.copies_per_node) {
                continue;
            }
        }
        step += 1;
        steps.push((*id, c.view, change));
    }
    steps
}

/// `node` failed and keeps the chain's only replica that survives a restart: the chain waits for it to come
/// back rather than go on with replicas a crash would empty. So does a node an operator asked to remove: if it
/// comes back it resumes its leave (`NodeRecovered`), and until then it holds the only durable copy of writes
/// the chain acknowledged (sim seed 1015072 lost them when the planner gave such a node up).
fn last_durable(map: &ClusterMap, c: &ChainView, node: NodeId) -> bool {
    let durable = |m: NodeId| c.kind_of(m).is_some_and(ReplicaKind::survives_restart);
    let failed = !map.is_live(node);
    // Another member of a durable kind counts only if its replica is whole: a lost `log` replica may miss
    // acknowledged writes, and a failed one may never come back.
    failed && durable(node) && !c.members.iter().any(|&m| m != node && map.holds_whole_durable(c, m))
}

/// Rules 1–4 of the module docs for one chain; the change gets id `step`.
fn next_change(map: &ClusterMap, c: &ChainView, target: &[NodeId], step: u64) -> Option<ChainChange> {
    let whole = |m: NodeId| map.holds_whole(c, m);
    if let Some(&broken) = c.members.iter().find(|&&m| !whole(m)) {
        let other = c.members.iter().any(|&m| m != broken && whole(m));
        return (other && !last_durable(map, c, broken)).then_some(ChainChange::Remove { node: broken, step });
    }
    let config = &map.keyspaces.get(&c.id.keyspace())?.config.replicas;
    let wanted = kinds::wanted(config, target.len());
    let too_many = kinds::missing(&c.kinds, &wanted);
    let missing = target.iter().copied().find(|&n| !c.contains(n));
    // Members not in the target, nearest the tail first.
    let surplus: Vec<usize> = (0..c.members.len()).rev().filter(|&i| !target.contains(&c.members[i])).collect();
    let remove = |i: usize| Some(ChainChange::Remove { node: c.members[i], step });
    // A configuration with a kind that survives a restart never runs without one (`kinds.rs`).
    let durable = |k: &ReplicaKind| k.survives_restart();
    let keeps_durable = |i: usize| {
        let other = |(j, &m): (usize, &NodeId)| j != i && map.holds_whole_durable(c, m);
        !config.iter().any(durable) || c.members.iter().enumerate().any(other)
    };
    let retype = || {
        let extra = |&i: &usize| too_many.contains(&c.kinds[i]) && keeps_durable(i);
        (0..c.members.len()).rev().find(extra).and_then(remove)
    };
    match missing {
        Some(node) if c.members.len() <= map.replication(c.id) => {
            let staying: Vec<ReplicaKind> =
                (0..c.members.len()).filter(|&i| target.contains(&c.members[i])).map(|i| c.kinds[i]).collect();
            let index = target.iter().position(|&n| n == node).expect("a target");
            let kind = kinds::joiner_kind(&wanted, &staying, index);
            let position = insert_position(c, target, node);
            Some(ChainChange::Add { node, position, step, inserted: false, kind })
        }
        _ if c.members.len() <= 1 => None,
        _ if !surplus.is_empty() => {
            let extra = surplus.iter().copied().find(|&i| too_many.contains(&c.kinds[i]));
            let leaving = extra.unwrap_or(surplus[0]);
            // The last durable member leaves only once a staying member holds that kind, copied afresh.
            if keeps_durable(leaving) {
                remove(leaving)
            } else {
                retype()
            }
        }
        None => retype(),
        Some(_) => None,
    }
}

/// Right after the nearest member that precedes `node` in the target (the head if none), but before the
/// tail: a node never joins directly as tail (§2.5).
fn insert_position(c: &ChainView, target: &[NodeId], node: NodeId) -> usize {
    let t = target.iter().position(|&n| n == node).expect("node is a target");
    let after = target[..t].iter().rev().find_map(|&n| c.position(n)).map_or(0, |p| p + 1);
    after.min(c.members.len() - 1)
}

/// Where `joiner` copies from: the nearest member after its place while it pre-copies
/// ([`ClusterMap::precopy_source`]), its successor once inserted (the flush).
pub(crate) fn copy_source(map: &ClusterMap, c: &ChainView, joiner: NodeId) -> Option<NodeId> {
    match (c.position(joiner), map.pre_copy(c)) {
        (Some(i), _) => c.members.get(i + 1).copied(),
        (None, Some((node, _, source))) if node == joiner => Some(source),
        (None, _) => c.tail(),
    }
}

/// In-flight Adds per node, as joiner or as copy source.
struct Copies(BTreeMap<NodeId, usize>);

impl Copies {
    fn in_flight(map: &ClusterMap) -> Copies {
        let mut copies = Copies(BTreeMap::new());
        for c in map.chains.values() {
            if let Some(ChainChange::Add { node, .. }) = &c.change {
                if let Some(source) = copy_source(map, c, *node) {
                    copies.admit(*node, source, usize::MAX);
                }
            }
        }
        copies
    }

    /// Counts a copy from `source` into `joiner` if both are below `limit`.
    fn admit(&mut self, joiner: NodeId, source: NodeId, limit: usize) -> bool {
        let count = |n| self.0.get(&n).copied().unwrap_or(0);
        if count(joiner) >= limit || count(source) >= limit {
            return false;
        }
        *self.0.entry(joiner).or_default() += 1;
        *self.0.entry(source).or_default() += 1;
        true
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
