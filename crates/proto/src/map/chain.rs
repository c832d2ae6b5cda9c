//! One chain as the map keeps it: its members and their replica kinds, its view, the membership step in
//! flight, and which members lost their replica to a restart.

use meridian_core::{ChainId, NodeId, ReplicaKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A membership step in flight on one chain. `step` is its id, unique in the map forever.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChainChange {
    /// Pre-copy from the tail, then FLUSH (§2.5), which carries `step` as its sequence number. Once the
    /// pre-copy is done `AddInserted` sets `inserted` and puts `node` into the members at `position`,
    /// always before the tail (a node never joins directly as tail); `StepDone` follows the FLUSH. The
    /// joiner keeps its replica in a datastore of `kind`.
    Add { node: NodeId, position: usize, step: u64, inserted: bool, kind: ReplicaKind },
    /// Take `node` out: CR_HEAD / CR_MID / CR_TAIL after a failure or for a leave, TRUNCATE of a surplus
    /// live tail (see [`crate::manager::plan::removal_kind`]).
    Remove { node: NodeId, step: u64 },
}

impl ChainChange {
    pub fn node(&self) -> NodeId {
        match *self {
            ChainChange::Add { node, .. } | ChainChange::Remove { node, .. } => node,
        }
    }

    pub fn step(&self) -> u64 {
        match *self {
            ChainChange::Add { step, .. } | ChainChange::Remove { step, .. } => step,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainView {
    pub id: ChainId,
    /// Head first, tail last; never empty once bootstrapped.
    pub members: Vec<NodeId>,
    /// The seed's chain-view-id (§2.4), ≥ 1; bumped exactly when `members` changes.
    pub view: u64,
    /// The map epoch of the command that last changed the tail (`members.last()`); at most the map's
    /// epoch.
    pub tail_epoch: u64,
    pub change: Option<ChainChange>,
    /// The replica kind of each member, in the order of `members`.
    pub kinds: Vec<ReplicaKind>,
    /// Members whose node restarted without a whole replica (a replica of a kind that does not survive a
    /// restart, or a head's that passed updates on before its fsync), with the incarnation that reported it:
    /// they take no part until repaired.
    pub lost: BTreeMap<NodeId, u64>,
    /// The member, and its incarnation, whose lost replica became the chain's state because no member held
    /// a whole one: the writes it missed are lost (see [`super::MapCommand::ReplicaRestored`]).
    pub restored: Option<(NodeId, u64)>,
    /// The map epoch of the command that last changed `members` (and so the view): at least `tail_epoch`.
    pub view_epoch: u64,
}

impl ChainView {
    pub fn position(&self, node: NodeId) -> Option<usize> {
        self.members.iter().position(|&m| m == node)
    }

    pub fn contains(&self, node: NodeId) -> bool {
        self.members.contains(&node)
    }

    pub fn tail(&self) -> Option<NodeId> {
        self.members.last().copied()
    }

    /// `node` is a member with a full replica: not the joiner of the Add in flight, whose FLUSH may not
    /// have come back yet, nor a member whose replica is lost.
    pub fn holds(&self, node: NodeId) -> bool {
        let joining = matches!(self.change, Some(ChainChange::Add { node: n, .. }) if n == node);
        self.contains(node) && !joining && !self.lost.contains_key(&node)
    }

    /// The members that hold a whole replica, in member order: neither the joiner of an Add in flight nor a
    /// member whose replica was lost.
    pub fn holders(&self) -> Vec<NodeId> {
        self.members.iter().copied().filter(|&m| self.holds(m)).collect()
    }

    /// The kind of `node`'s replica: as a member, or as the joiner of the Add in flight.
    pub fn kind_of(&self, node: NodeId) -> Option<ReplicaKind> {
        match (self.position(node), &self.change) {
            (Some(i), _) => self.kinds.get(i).copied(),
            (None, Some(ChainChange::Add { node: n, kind, .. })) if *n == node => Some(*kind),
            _ => None,
        }
    }

    /// `node` is a member or the subject of the step in flight.
    pub(super) fn involves(&self, node: NodeId) -> bool {
        self.contains(node) || self.change.as_ref().is_some_and(|c| c.node() == node)
    }

    /// Puts `node` into the members at `position`, in the command of map epoch `epoch`.
    pub(super) fn insert_member(&mut self, epoch: u64, position: usize, node: NodeId, kind: ReplicaKind) {
        self.edit_members(epoch, |c| {
            c.members.insert(position, node);
            c.kinds.insert(position, kind);
        });
    }

    /// Takes `node` out of the members, and with it any record of its lost replica.
    pub(super) fn remove_member(&mut self, epoch: u64, node: NodeId) {
        self.edit_members(epoch, |c| {
            if let Some(i) = c.position(node) {
                c.members.remove(i);
                c.kinds.remove(i);
            }
            c.lost.remove(&node);
        });
    }

    /// Makes `node` the only member, forgetting every lost replica.
    pub(super) fn keep_only(&mut self, epoch: u64, node: NodeId) {
        self.edit_members(epoch, |c| {
            let kind = c.kind_of(node).expect("a member");
            (c.members, c.kinds) = (vec![node], vec![kind]);
            c.lost.clear();
        });
    }

    /// Changes the members: the only place the view moves.
    fn edit_members(&mut self, epoch: u64, edit: impl FnOnce(&mut ChainView)) {
        let tail = self.tail();
        edit(self);
        self.view += 1;
        self.view_epoch = epoch;
        if self.tail() != tail {
            self.tail_epoch = epoch;
        }
    }

    /// Gives up the step in flight. A joiner already inserted is taken out again: it has not finished
    /// its FLUSH, so it is not a valid replica (§2.5: the manager "repairs the chain, redoes the
    /// addition").
    pub(super) fn abort(&mut self, epoch: u64) {
        if let Some(ChainChange::Add { node, inserted: true, .. }) = self.change.take() {
            self.remove_member(epoch, node);
        }
    }
}
