//! An operation as the node that took the client's request coordinates it (any node does: there is no leader).
//! A read asks the partition's replicas what they hold and waits for R of them; a write stores its version and
//! waits for W acknowledgements. With quorum timestamps (ABD) a write first asks R replicas for the highest
//! version, and a read stores what it returns on W replicas before it answers.

use super::msg::{OpId, Versioned};
use super::Config;
use crate::requests::Origin;
use crate::versioned::Asked;
use bytes::Bytes;
use meridian_core::{NodeId, Reply, Request};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug)]
pub(super) enum Phase {
    /// Waiting for `need` replicas to say what they hold.
    Query { need: usize, found: BTreeMap<NodeId, Versioned> },
    /// Waiting for `need` replicas to hold `versioned`.
    Store { need: usize, versioned: Versioned, acks: BTreeSet<NodeId>, existed: bool },
    /// Done, waiting for the wall clock to pass the write's stamp before it answers.
    Settle { reply: Reply, stamped_ms: u64 },
}

#[derive(Debug)]
pub(super) struct Op {
    pub origin: Origin,
    /// The client's request, for the front-end to send again if the partition's configuration changed under it.
    pub req: Request,
    pub key: Bytes,
    pub asked: Asked,
    pub phase: Phase,
    /// The partition's configuration the operation runs in: who counts, who joins, the levels.
    pub cfg: Config,
    /// Replicas that refused (another configuration): once the rest cannot make up the phase, it gives up.
    pub refused: BTreeSet<NodeId>,
    /// Replicas that held a newer version than the write's (meteor keyspaces).
    pub rejected: BTreeSet<NodeId>,
    /// A write sent again with the version an earlier attempt may have stored: a replica that rejects it now may
    /// have taken it then, and a newer one since.
    pub resent: bool,
    /// The tick it started at; it is dropped once its request timed out.
    pub started: u64,
}

impl Op {
    /// Whether the replies still missing can no longer make up the phase.
    pub fn hopeless(&self) -> bool {
        let (need, have, counted) = match &self.phase {
            Phase::Query { need, found } => (*need, found.len(), self.cfg.holders.len()),
            Phase::Store { need, acks, .. } => {
                if let Some((leaving, k)) = self.cfg.staying_need(matches!(self.asked, Asked::Read(_))) {
                    let lost = self.refused.union(&self.rejected).filter(|&&n| n != leaving).count();
                    if self.cfg.holders.len() - 1 < k + lost {
                        return true;
                    }
                }
                (*need, acks.len(), self.cfg.holders.len() + usize::from(self.cfg.joiner.is_some()))
            }
            Phase::Settle { .. } => return false,
        };
        have + counted.saturating_sub(have + self.refused.len() + self.rejected.len()) < need
    }

    /// Whether a majority of the partition's replicas hold newer versions than the write's, with no joiner
    /// taking writes: then no majority of this configuration or a later one ever agrees on the write's version
    /// (a joiner copies from a set that meets that majority). With a joiner, the replicas that took the write
    /// and the joiner could become a majority once the joiner counts; so only a majority of holders decides.
    pub fn outvoted(&self) -> bool {
        let holders = &self.cfg.holders;
        let rejecting = self.rejected.iter().filter(|n| holders.contains(n)).count();
        matches!(self.phase, Phase::Store { .. }) && self.cfg.joiner.is_none() && rejecting > holders.len() / 2
    }

    /// Whether `from`'s reply counts in the phase under way.
    pub fn counts(&self, from: NodeId) -> bool {
        match self.phase {
            Phase::Query { .. } => self.cfg.holders.contains(&from),
            Phase::Store { .. } => self.cfg.takes_part(from),
            Phase::Settle { .. } => false,
        }
    }
}

/// The newest of what replicas hold (versions are unique: the coordinator's node id is in their low bits).
pub(super) fn newest(found: &BTreeMap<NodeId, Versioned>) -> Versioned {
    found.values().max_by_key(|v| v.version).cloned().unwrap_or_default()
}

/// An operation id of this coordinator's run.
pub(super) fn op_id(incarnation: u64, seq: u64) -> OpId {
    OpId { incarnation, seq }
}
