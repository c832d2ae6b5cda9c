//! The map's invariants, which the simulator and the tests check after every applied command.

use super::{ChainChange, ChainView, ClusterMap, NodeState};
use crate::map::placement::partitions_valid;
use meridian_core::keyspace::{validate_name, DEFAULT_KEYSPACE};
use meridian_core::{ChainId, KeyspaceId, NodeId, Protocol, Violation};
use std::collections::BTreeSet;

impl ClusterMap {
    /// The map's invariants; `Err` describes the first violation. The simulator runs this after every
    /// applied command.
    pub fn check(&self) -> Result<(), Violation> {
        if !self.is_bootstrapped() {
            return match self.nodes.is_empty() && self.chains.is_empty() {
                true => Ok(()),
                false => Err("nodes or chains before bootstrap".into()),
            };
        }
        ensure(partitions_valid(self.partitions), || format!("invalid partition count {}", self.partitions))?;
        self.check_keyspaces()?;
        let expected = self.keyspaces.keys().flat_map(|&k| (0..self.partitions).map(move |p| ChainId::new(k, p)));
        ensure(self.chains.keys().copied().eq(expected), || "chains do not match keyspaces × partitions".into())?;
        for (&id, c) in self.chains.iter() {
            ensure(c.id == id, || format!("chain {id} out of place"))?;
            self.check_chain(c)?;
        }
        self.check_step_ids()?;
        self.check_nodes().map_err(Violation)
    }

    fn check_keyspaces(&self) -> Result<(), String> {
        let default = self.keyspaces.get(&KeyspaceId::DEFAULT);
        ensure(default.is_some_and(|k| k.name == DEFAULT_KEYSPACE), || "no default keyspace".into())?;
        let names: BTreeSet<&str> = self.keyspaces.values().map(|k| k.name.as_str()).collect();
        ensure(names.len() == self.keyspaces.len(), || "two keyspaces share a name".into())?;
        for (id, k) in &self.keyspaces {
            ensure(id.0 < self.next_keyspace, || format!("keyspace {id} not below next_keyspace"))?;
            validate_name(&k.name).and_then(|()| k.config.validate()).map_err(|e| format!("keyspace {id}: {e}"))?;
        }
        self.check_key_masters()
    }

    fn check_key_masters(&self) -> Result<(), String> {
        for (id, masters) in &self.masters {
            let k = self.keyspaces.get(id).ok_or_else(|| format!("key masters of missing keyspace {id}"))?;
            ensure(k.config.protocol.protocol() == Protocol::Lease, || format!("key masters of {id}, not lease"))?;
            ensure(masters.pinned.len() <= super::masters::PINNED_MAX, || format!("{id} pins too many keys"))?;
            let newest = masters.pinned.values().map(|p| p.since).chain([masters.home_since]).max();
            ensure(newest <= Some(masters.epoch) && masters.epoch <= self.epoch, || {
                format!("keyspace {id}: key masters at epoch {} moved later, or past the map", masters.epoch)
            })?;
            let placed = |region: &str| k.config.placement.regions.iter().any(|(r, _)| r == region);
            if let Some(pin) = masters.pinned.values().find(|p| !placed(&p.region)) {
                return Err(format!("keyspace {id} pins a key to {:?}, outside its placement", pin.region));
            }
        }
        Ok(())
    }

    fn check_chain(&self, c: &ChainView) -> Result<(), String> {
        let id = c.id;
        ensure(c.view >= 1, || format!("chain {id} has view 0"))?;
        let tail_epoch_valid = (1..=self.epoch).contains(&c.tail_epoch);
        ensure(tail_epoch_valid, || format!("chain {id}: tail epoch {} outside 1..={}", c.tail_epoch, self.epoch))?;
        let view_epoch_valid = (c.tail_epoch..=self.epoch).contains(&c.view_epoch);
        ensure(view_epoch_valid, || format!("chain {id}: view epoch {} not in tail epoch..=epoch", c.view_epoch))?;
        ensure(!c.members.is_empty(), || format!("chain {id} is empty"))?;
        ensure(c.members.len() <= self.replication(id) + 1, || format!("chain {id} has more than R+1 members"))?;
        let distinct: BTreeSet<NodeId> = c.members.iter().copied().collect();
        ensure(distinct.len() == c.members.len(), || format!("chain {id} repeats a member: {:?}", c.members))?;
        for &m in &c.members {
            let state = self.state(m);
            ensure(state.is_some_and(|s| s != NodeState::Removed), || format!("chain {id}: member {m} is {state:?}"))?;
        }
        ensure(c.kinds.len() == c.members.len(), || format!("chain {id}: {} kinds for its members", c.kinds.len()))?;
        ensure(c.lost.keys().all(|&n| c.contains(n)), || format!("chain {id}: a lost replica of a non-member"))?;
        match c.change {
            None => Ok(()),
            Some(ChainChange::Add { node, position, inserted, .. }) => {
                self.check_add_in_flight(c, node, position, inserted)
            }
            Some(ChainChange::Remove { node, .. }) => self.check_remove_in_flight(c, node),
        }
    }

    fn check_add_in_flight(&self, c: &ChainView, node: NodeId, position: usize, inserted: bool) -> Result<(), String> {
        let id = c.id;
        ensure(self.is_live(node), || format!("chain {id}: adding {node}, which is {:?}", self.state(node)))?;
        ensure(c.contains(node) == inserted, || match inserted {
            true => format!("chain {id}: {node} is inserted but not a member"),
            false => format!("chain {id}: adding {node}, already a member"),
        })?;
        // The members the chain had when the step started.
        let before = c.members.len() - usize::from(inserted);
        ensure(position < before, || format!("chain {id}: adding {node} at or after the tail"))?;
        ensure(!inserted || c.members[position] == node, || format!("chain {id}: {node} is not at {position}"))?;
        ensure(before <= self.replication(id), || format!("chain {id}: add would exceed R+1"))?;
        // A quorum or lease partition brings a replacement in before it lets a failed member go
        // (`quorum/rules.rs`).
        let replaces = self.protocol_of(id.keyspace()).is_some_and(Protocol::replaces_before_removing);
        let live = c.members.iter().all(|&m| self.is_live(m));
        ensure(replaces || live, || format!("chain {id}: add with a failed member"))?;
        ensure(c.lost.is_empty(), || format!("chain {id}: add with a lost replica"))
    }

    fn check_remove_in_flight(&self, c: &ChainView, node: NodeId) -> Result<(), String> {
        let id = c.id;
        ensure(c.contains(node), || format!("chain {id}: removing {node}, not a member"))?;
        let other_live = c.members.iter().any(|&m| m != node && self.is_live(m));
        ensure(other_live, || format!("chain {id}: removing {node} would leave no live member"))
    }

    fn check_step_ids(&self) -> Result<(), String> {
        let mut seen = BTreeSet::new();
        for step in self.chains.values().filter_map(|c| c.change.as_ref()).map(ChainChange::step) {
            ensure(step < self.next_step, || format!("step {step} not below next_step {}", self.next_step))?;
            ensure(seen.insert(step), || format!("step {step} in flight twice"))?;
        }
        Ok(())
    }

    fn check_nodes(&self) -> Result<(), String> {
        let targets = self.targets();
        for (&id, n) in &self.nodes {
            let settled = match n.state {
                NodeState::Joining => !self.holds_targets(id, &targets),
                NodeState::Leaving | NodeState::Failed => self.involved(id),
                NodeState::Removed => !self.involved(id),
                NodeState::Active => true,
            };
            ensure(settled, || format!("node {id} should not be {}", n.state))?;
            ensure(!(n.departed && n.state.is_placeable()), || format!("node {id} departed but is {}", n.state))?;
        }
        for v in &self.manager_voters {
            ensure(self.nodes.contains_key(v), || format!("voter {v} is not a node"))?;
        }
        for l in &self.manager_learners {
            ensure(self.nodes.contains_key(l), || format!("learner {l} is not a node"))?;
            ensure(!self.manager_voters.contains(l), || format!("learner {l} is also a voter"))?;
        }
        self.check_affiliates()
    }

    fn check_affiliates(&self) -> Result<(), String> {
        for (&a, &host) in &self.hosts {
            ensure(self.nodes.contains_key(&a), || format!("affiliated node {a} is not a node"))?;
            ensure(self.nodes.contains_key(&host) && !self.hosts.contains_key(&host), || {
                format!("affiliated node {a} names {host}, which is not a standard node")
            })?;
            ensure(!self.involved(a), || format!("affiliated node {a} is in a chain"))?;
        }
        Ok(())
    }
}

fn ensure(ok: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(why())
    }
}
