//! One node's replication state for one chain (seed 003 Listing 1: LU, LA, H_unacked), and where the node
//! stands in the chain's current view.
//!
//! `lu` is the last sequence number this node holds, `la` the last one the tail has acknowledged, and
//! `unacked` holds exactly the updates `la+1 ..= lu` while the node has a successor, because a successor that
//! lost them (crash, broken connection, a chain repaired around a failed member) must get them again.
//! Invariant: `la ≤ lu`.
//!
//! A node that holds copied data (a joiner's pre-copy, a flush in progress) may hold newer versions of some keys
//! than `lu` says: its data reflects *at least* the state after `lu` for every key. `complete` is false while
//! the log holds states above `lu` that are not part of a consecutive history; such a replica is not valid
//! until a flush from its successor completes it.

use super::invalidate::Awaited;
use super::msg::{Change, Origin, Update};
use bytes::Bytes;
use meridian_core::{NodeId, Read, ReplicaKind, Reply, Time, Violation};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// A put answer a tail owes or has sent to a front-end that has not confirmed it yet.
#[derive(Clone, Debug)]
pub struct Unconfirmed {
    pub origin: Origin,
    pub reply: Reply,
    /// The tick it was committed at (it is given up once its front-end has timed out).
    pub since: u64,
    /// The tick it was last sent at; None while it waits for a lease.
    pub sent: Option<u64>,
}

/// The last read (a GET or a SCAN page) a member answered from its own store: when, at which view, and whether
/// as the tail. Recorded so that the simulator can hold every answer, not only the state it is given from, to
/// what leases promise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answered {
    pub at: Time,
    pub view: u64,
    pub tail: bool,
}

/// Where this node stands in a chain, as the cluster map says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Role {
    /// No map yet, or the map does not involve this node in the chain.
    #[default]
    Outside,
    /// The subject of an Add step still in pre-copy (§2.5 phase 1).
    Joiner { step: u64, view: u64, source: NodeId },
    /// A member: a valid replica unless `flushing` names the Add step that inserted it and has not finished.
    Member { view: u64, pred: Option<NodeId>, succ: Option<NodeId>, flushing: Option<u64> },
}

#[derive(Debug)]
pub struct Replica {
    pub role: Role,
    pub lu: u64,
    pub la: u64,
    /// The watermark last written to the log as an AckMark; recovery drops updates at or below it.
    pub la_logged: u64,
    pub unacked: VecDeque<Update>,
    /// False while the log holds copied states above `lu` (see the module docs).
    pub complete: bool,
    /// The highest sequence number of a record the log held for the chain when the node started (at least
    /// `lu` once recovered): where a replica the map restores the chain from continues, incomplete or not.
    pub top: u64,
    /// The Add step whose flush this node completed in this run; with the map still showing that step in
    /// flight, it is what makes the inserted member valid.
    pub flushed: Option<u64>,
    /// `la` when the last tick ran; no progress across a tick with updates outstanding prompts a Probe.
    pub la_at_tick: u64,
    /// Tick at which this node last asked its predecessor to resend after spotting a gap.
    pub gap_sync_tick: Option<u64>,
    /// At the tail: put answers, by sequence number, that their front-ends have not confirmed (seed 003 §2.4).
    /// The tail acknowledges upstream only below the oldest, so if it fails its predecessor, as the new tail,
    /// still holds those updates and answers them again.
    pub unconfirmed: BTreeMap<u64, Unconfirmed>,
    /// At the tail: the sequence number last acknowledged upstream.
    pub acked_up: u64,
    /// The kind of datastore the replica lives in.
    pub kind: ReplicaKind,
    /// Under `ausi`, after the head: keys with a write this member does not have yet, by the write's seq.
    pub invalid: HashMap<Bytes, u64>,
    /// Under `ausi`, at the head: writes whose invalidations the chain does not hold yet, by seq, with their keys
    /// and the answers owed once it does (to nobody for a delete the head ordered itself).
    pub awaiting: BTreeMap<u64, Awaited>,
    /// Under `ausi`, at the head: reads of keys with a write in `awaiting`, answered once it is answered.
    pub deferred: Vec<(Origin, Bytes, Read)>,
    /// The node restarted as a member of the chain with a replica of a kind that does not survive a restart
    /// (see [`ReplicaKind::survives_restart`]): it may miss acknowledged writes, so it takes no part until the
    /// manager repairs the chain, or restores the chain from it.
    pub lost: bool,
    /// The last read this member answered from its store (`ChainNode::answered`).
    pub answered: Option<Answered>,
}

/// A replica that holds nothing: complete, since there is nothing it could be missing.
impl Default for Replica {
    fn default() -> Self {
        Replica {
            role: Role::Outside,
            lu: 0,
            la: 0,
            la_logged: 0,
            unacked: VecDeque::new(),
            complete: true,
            top: 0,
            flushed: None,
            la_at_tick: 0,
            gap_sync_tick: None,
            unconfirmed: BTreeMap::new(),
            acked_up: 0,
            kind: ReplicaKind::Log,
            invalid: HashMap::new(),
            awaiting: BTreeMap::new(),
            deferred: Vec::new(),
            lost: false,
            answered: None,
        }
    }
}

impl Replica {
    /// A replica of `kind` that holds nothing.
    pub fn empty(kind: ReplicaKind) -> Replica {
        Replica { kind, ..Replica::default() }
    }

    pub fn view(&self) -> Option<u64> {
        match self.role {
            Role::Member { view, .. } | Role::Joiner { view, .. } => Some(view),
            Role::Outside => None,
        }
    }

    pub fn pred(&self) -> Option<NodeId> {
        match self.role {
            Role::Member { pred, .. } => pred,
            _ => None,
        }
    }

    pub fn succ(&self) -> Option<NodeId> {
        match self.role {
            Role::Member { succ, .. } => succ,
            _ => None,
        }
    }

    /// A member that is a valid replica: it may order, forward, acknowledge and answer.
    pub fn is_active(&self) -> bool {
        match self.role {
            Role::Member { flushing, .. } if !self.lost => {
                self.complete && (flushing.is_none() || flushing == self.flushed)
            }
            _ => false,
        }
    }

    pub fn is_tail(&self) -> bool {
        matches!(self.role, Role::Member { succ: None, .. })
    }

    pub fn is_head(&self) -> bool {
        matches!(self.role, Role::Member { pred: None, .. })
    }

    /// What this node tells its predecessor the tail holds: for the tail itself, only what front-ends have
    /// confirmed (see `unconfirmed`); for any other member, what the tail acknowledged.
    pub fn upstream_la(&self) -> u64 {
        if self.is_tail() {
            self.unconfirmed.first_key_value().map_or(self.lu, |(&seq, _)| seq - 1)
        } else {
            self.la
        }
    }

    /// Logs the next update in sequence; only the caller's durability rules decide when it may leave. Only a
    /// member before the tail keeps a copy (to resend until the tail acknowledges it), so the tail copies nothing.
    pub fn record(&mut self, update: &Update) {
        debug_assert_eq!(update.seq, self.lu + 1, "updates are logged strictly in sequence");
        self.lu = update.seq;
        if self.is_tail() {
            self.la = self.lu;
        } else {
            self.unacked.push_back(update.clone());
        }
    }

    /// Adds a key the last update logged also changed, as the log gives an update of several keys back one
    /// record at a time; a key the update already names is left as it is.
    pub fn record_also(&mut self, key: Bytes, change: Change) {
        let Some(last) = self.unacked.back_mut().filter(|u| u.seq == self.lu) else { return };
        if !last.keys().any(|k| *k == key) {
            last.also.push((key, change));
        }
    }

    /// Applies a cumulative acknowledgement; returns true when it moved `la` forward.
    pub fn ack(&mut self, seq: u64) -> bool {
        let seq = seq.min(self.lu);
        if seq <= self.la {
            return false;
        }
        self.la = seq;
        while self.unacked.front().is_some_and(|u| u.seq <= seq) {
            self.unacked.pop_front();
        }
        true
    }

    /// Becomes the tail: every update this node holds is now held by the tail, so all are acknowledged.
    /// Returns the updates that were outstanding, whose clients the new tail answers (seed Listing 1,
    /// CR_TAIL and TRUNCATE).
    pub fn settle_as_tail(&mut self) -> Vec<Update> {
        self.la = self.lu;
        std::mem::take(&mut self.unacked).into()
    }

    /// Applies an ack watermark read back from the log. The tail held every seq up to it, so this node
    /// (at or before the tail) holds them all; records at or below it may have been compacted away once
    /// superseded, so the watermark also stands for LU. A copy's watermark means the same: the copied data
    /// reflects every update up to it.
    pub fn restore_watermark(&mut self, seq: u64) {
        self.lu = self.lu.max(seq);
        self.ack(seq);
        self.la_logged = self.la_logged.max(seq);
    }

    /// The updates a successor that holds everything up to `lu` is missing, oldest first.
    pub fn missing_after(&self, lu: u64, max: usize) -> impl Iterator<Item = &Update> {
        self.unacked.iter().skip_while(move |u| u.seq <= lu).take(max)
    }

    /// [`Replica::check`] in constant time, for the places that change the replica to assert in debug builds:
    /// the ends of `unacked` and its length stand for its every entry, since `record` appends strictly in
    /// sequence and only acknowledgements take from its front.
    pub fn shape(&self) -> Result<(), Violation> {
        if self.la > self.lu {
            return Err(format!("LA {} > LU {}", self.la, self.lu).into());
        }
        if !self.is_active() {
            return Ok(());
        }
        if self.is_tail() {
            return match self.la == self.lu && self.unacked.is_empty() {
                true => Ok(()),
                false => Err(format!("tail has unacknowledged history: LA {} LU {}", self.la, self.lu).into()),
            };
        }
        let ends = (self.unacked.front().map(|u| u.seq), self.unacked.back().map(|u| u.seq));
        let expected = if self.la == self.lu { (None, None) } else { (Some(self.la + 1), Some(self.lu)) };
        match self.unacked.len() as u64 == self.lu - self.la && ends == expected {
            true => Ok(()),
            false => {
                Err(format!("{} unacked updates {ends:?} for LA {} LU {}", self.unacked.len(), self.la, self.lu).into())
            }
        }
    }

    pub fn check(&self) -> Result<(), Violation> {
        if self.la > self.lu {
            return Err(format!("LA {} > LU {}", self.la, self.lu).into());
        }
        // A joiner's or flushing member's counters describe copied data, not a history it holds.
        if !self.is_active() {
            return Ok(());
        }
        if self.is_tail() && (self.la != self.lu || !self.unacked.is_empty()) {
            return Err(format!("tail has unacknowledged history: LA {} LU {}", self.la, self.lu).into());
        }
        if !self.is_tail() {
            let expected = self.lu - self.la;
            if self.unacked.len() as u64 != expected {
                return Err(format!("{} unacked updates for LA {} LU {}", self.unacked.len(), self.la, self.lu).into());
            }
            if let Some((i, u)) = self.unacked.iter().enumerate().find(|(i, u)| u.seq != self.la + 1 + *i as u64) {
                return Err(format!("unacked[{i}] has seq {} but LA is {}", u.seq, self.la).into());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::msg::{Change, Outcome};
    use bytes::Bytes;
    use meridian_core::ChainId;

    fn update(seq: u64) -> Update {
        Update {
            chain: ChainId(0),
            seq,
            key: Bytes::from_static(b"k"),
            change: Change::Skip,
            outcome: Outcome::default(),
            origin: None,
            also: Vec::new(),
        }
    }

    fn member(pred: Option<u32>, succ: Option<u32>) -> Replica {
        let role = Role::Member { view: 1, pred: pred.map(NodeId), succ: succ.map(NodeId), flushing: None };
        Replica { role, ..Replica::default() }
    }

    #[test]
    fn acks_trim_history_and_never_pass_lu() {
        let mut r = member(None, Some(2));
        (1..=5).for_each(|s| r.record(&update(s)));
        assert!(r.ack(3));
        assert!(!r.ack(2));
        assert_eq!(r.unacked.front().unwrap().seq, 4);
        assert!(r.ack(99));
        assert_eq!((r.la, r.unacked.len()), (5, 0));
        r.check().unwrap();
    }

    #[test]
    fn missing_after_skips_what_the_successor_has() {
        let mut r = member(None, Some(2));
        (1..=5).for_each(|s| r.record(&update(s)));
        let seqs: Vec<u64> = r.missing_after(2, 2).map(|u| u.seq).collect();
        assert_eq!(seqs, vec![3, 4]);
    }

    #[test]
    fn a_watermark_read_back_stands_for_compacted_records() {
        let mut r = member(None, Some(2));
        r.record(&update(1));
        r.restore_watermark(5);
        assert_eq!((r.lu, r.la, r.la_logged, r.unacked.len()), (5, 5, 5, 0));
        r.record(&update(6));
        r.check().unwrap();
    }

    #[test]
    fn tail_acknowledges_as_it_logs() {
        let mut r = member(Some(1), None);
        r.record(&update(1));
        assert_eq!((r.la, r.lu), (1, 1));
        r.check().unwrap();
    }

    #[test]
    fn a_new_tail_settles_its_outstanding_history() {
        let mut r = member(Some(1), Some(3));
        (1..=4).for_each(|s| r.record(&update(s)));
        r.ack(1);
        r.role = Role::Member { view: 2, pred: Some(NodeId(1)), succ: None, flushing: None };
        let settled: Vec<u64> = r.settle_as_tail().iter().map(|u| u.seq).collect();
        assert_eq!(settled, vec![2, 3, 4]);
        assert_eq!((r.la, r.lu), (4, 4));
        r.check().unwrap();
    }
}
