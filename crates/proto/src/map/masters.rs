//! Who masters which keys of a lease keyspace (`docs/protocols/lease.md`, "Master migration"). Every key is
//! mastered in its keyspace's home region (the placement's first) unless the operator or the write-origin
//! tracker pinned it to another region of the placement. The keys mastered in one region of one partition are
//! a *domain*: the partition's replica in that region masters them, and its promises, confirmations and
//! takeovers are per domain.
//!
//! A key changes domain only by a map command, which records the epoch it moved at (`since`): a master may
//! serve a key under promises given for rounds of that epoch or later only, and a member will not promise
//! a domain that gained keys while it still holds promises, given before the move, to another domain
//! (`lease/mastery.rs`). So the old and the new master of a moved key never both serve it.

use super::{Applied, ClusterMap, MapError};
use crate::map::ChainView;
use bytes::Bytes;
use meridian_core::{KeyspaceId, NodeId, Protocol};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Keys a lease keyspace may pin to a region: the map travels whole in every change.
pub const PINNED_MAX: usize = 4096;

/// Bytes a pinned key may have.
pub const PINNED_KEY_MAX: usize = 512;

/// The masters of one lease keyspace's keys.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyMasters {
    /// The epoch of the last change to who masters what: a key's move or the home region's.
    pub epoch: u64,
    /// The epoch the home region last changed at: every key without a pin moved then.
    pub home_since: u64,
    /// Keys pinned to a region, each with the epoch it moved at.
    pub pinned: BTreeMap<Bytes, Pin>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    pub region: String,
    pub since: u64,
}

impl ClusterMap {
    /// Where `keyspace`'s keys are mastered, if it ever moved any.
    pub fn key_masters(&self, keyspace: KeyspaceId) -> Option<&KeyMasters> {
        self.masters.get(&keyspace)
    }

    /// The region `key` of the lease keyspace `keyspace` is mastered in.
    pub fn key_master_region(&self, keyspace: KeyspaceId, key: &[u8]) -> Option<&str> {
        let pinned = self.key_masters(keyspace).and_then(|m| m.pinned.get(key));
        pinned.map(|p| p.region.as_str()).or_else(|| self.keyspaces.get(&keyspace)?.config.placement.home())
    }

    /// The master of `c`'s keys mastered in `region` (its home region if None): the longest-standing live
    /// holder there, or the longest-standing live holder if none is there, or the last holder if none is
    /// live. The planner adds a joiner before every member (`quorum::rules`), so the last holder is the one
    /// that has held the partition longest: a join leaves the master where it is, where picking the first
    /// holder moved mastership, and with it a takeover and a pause in writes, to every joiner (sim seed
    /// 25103278 spent the 27 s of joins after its heal without a write to one partition).
    pub fn lease_master_in(&self, c: &ChainView, region: Option<&str>) -> Option<NodeId> {
        let holders = c.holders();
        let in_region = |n: &&NodeId| self.nodes.get(n).is_some_and(|i| Some(i.location.region.as_str()) == region);
        let live = |n: &&NodeId| self.is_live(**n);
        let live_holders = || holders.iter().rev().filter(live);
        live_holders().find(in_region).or(live_holders().next()).or(holders.last()).copied()
    }

    /// Whether `node` masters some keys of the lease partition `c`: in its home region, or in a region keys are
    /// pinned to, whose master `node` may be while that region has no live holder (sim seed 38100777: a node
    /// standing in for such a region got no manager's lease and its keys no writes).
    pub(super) fn masters_some_of(&self, c: &ChainView, node: NodeId) -> bool {
        if self.lease_master(c) == Some(node) {
            return true;
        }
        let Some(masters) = self.key_masters(c.id.keyspace()) else { return false };
        let regions: BTreeSet<&str> = masters.pinned.values().map(|p| p.region.as_str()).collect();
        regions.into_iter().any(|region| self.lease_master_in(c, Some(region)) == Some(node))
    }

    /// Pins `key` of the lease keyspace `name` to `region`, which its placement must name.
    pub(super) fn set_key_master(&mut self, name: &str, key: &Bytes, region: &str) -> Result<Applied, MapError> {
        let (id, keyspace) = self.lease_keyspace(name)?;
        keyspace.config.placement.clone().homed_in(region).map_err(|e| MapError::BadKeyspace(e.into()))?;
        if key.is_empty() || key.len() > PINNED_KEY_MAX {
            return Err(MapError::BadPinnedKey(key.len()));
        }
        let epoch = self.applying_epoch();
        let masters = self.masters.entry(id).or_default();
        match masters.pinned.get(key) {
            Some(pin) if pin.region == region => return Ok(Applied::Unchanged),
            None if masters.pinned.len() >= PINNED_MAX => return Err(MapError::TooManyPins(name.to_string())),
            _ => {}
        }
        masters.pinned.insert(key.clone(), Pin { region: region.to_string(), since: epoch });
        masters.epoch = epoch;
        Ok(Applied::Changed)
    }

    /// The lease keyspace `name`, or why there is none.
    pub(super) fn lease_keyspace(&self, name: &str) -> Result<(KeyspaceId, &super::Keyspace), MapError> {
        let (id, keyspace) = self.keyspace_named(name).ok_or_else(|| MapError::UnknownKeyspace(name.to_string()))?;
        match keyspace.config.protocol.protocol() {
            Protocol::Lease => Ok((id, keyspace)),
            _ => Err(MapError::NotLease(name.to_string())),
        }
    }
}
