//! Who masters which keys of a partition (`map/masters.rs`): a partition's keys are split into *domains*, one
//! per region that masters some of them. The home domain, named after the keyspace's master region, holds
//! every key not pinned elsewhere; each other domain holds the keys pinned to its region. A domain's master is
//! the partition's longest-standing live holder in that region (another holder while none is live there), and
//! everything a master does (its own lease, its members' promises and confirmations, its takeover, the
//! leases it records) is per domain.

use crate::map::{ChainView, ClusterMap, Pin};
use bytes::Bytes;
use meridian_core::{ChainId, NodeId};
use std::collections::BTreeMap;

/// A domain of a partition: the partition and the region its keys are mastered in.
pub(crate) type Domain = (ChainId, String);

/// The domains of one partition in one map.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Domains {
    /// The home domain: the keyspace's master region ("" if its placement names no region).
    pub home: String,
    /// Each domain's master.
    masters: BTreeMap<String, NodeId>,
    /// The epoch of the keyspace's last change to who masters what (`KeyMasters::epoch`): masters and
    /// members speak of one such table at a time.
    pub epoch: u64,
    /// When keys without a pin last moved (the home region changed).
    home_since: u64,
    /// This partition's pinned keys.
    pins: BTreeMap<Bytes, Pin>,
    /// For each domain, the newest epoch a key moved into it at.
    gained: BTreeMap<String, u64>,
}

impl Domains {
    /// `c`'s domains by `map`, given the keyspace's pins that fall in `c`.
    pub fn of(map: &ClusterMap, c: &ChainView, pins: BTreeMap<Bytes, Pin>) -> Option<Domains> {
        let keyspace = map.keyspaces.get(&c.id.keyspace())?;
        let home = keyspace.config.placement.home().unwrap_or_default().to_string();
        let table = map.key_masters(c.id.keyspace()).cloned().unwrap_or_default();
        let mut masters = BTreeMap::from([(home.clone(), map.lease_master(c)?)]);
        let mut gained = BTreeMap::from([(home.clone(), table.home_since)]);
        for pin in pins.values() {
            if !masters.contains_key(&pin.region) {
                masters.insert(pin.region.clone(), map.lease_master_in(c, Some(&pin.region))?);
            }
            let g = gained.entry(pin.region.clone()).or_insert(0);
            *g = (*g).max(pin.since);
        }
        Some(Domains { home, masters, epoch: table.epoch, home_since: table.home_since, pins, gained })
    }

    /// The domain `key` is mastered in.
    pub fn of_key(&self, key: &[u8]) -> &str {
        self.pins.get(key).map_or(self.home.as_str(), |p| p.region.as_str())
    }

    pub fn master(&self, domain: &str) -> Option<NodeId> {
        self.masters.get(domain).copied()
    }

    /// Every domain with its master.
    pub fn all(&self) -> impl Iterator<Item = (&str, NodeId)> {
        self.masters.iter().map(|(d, &m)| (d.as_str(), m))
    }

    /// The epoch `key` last moved at: a master serves it only under promises of rounds of that epoch or later.
    pub fn since(&self, key: &[u8]) -> u64 {
        self.pins.get(key).map_or(self.home_since, |p| p.since)
    }

    /// The newest epoch a key moved into `domain` at.
    pub fn gained(&self, domain: &str) -> u64 {
        self.gained.get(domain).copied().unwrap_or(0)
    }

    /// Whether every key of the home domain moved since `epoch`: its master copies the whole partition again.
    pub fn home_moved_since(&self, epoch: u64) -> bool {
        self.home_since > epoch
    }

    /// The pinned keys of `domain` that moved into it after `epoch`.
    pub fn moved_in_since(&self, domain: &str, epoch: u64) -> Vec<Bytes> {
        let moved = |p: &Pin| p.region == domain && p.since > epoch;
        self.pins.iter().filter(|(_, p)| moved(p)).map(|(k, _)| k.clone()).collect()
    }

    /// Domains for a test: `home`, the masters, the table's `epoch`, and pins of (key, region, since).
    #[cfg(test)]
    pub fn for_test(home: &str, masters: &[(&str, NodeId)], epoch: u64, pins: &[(&str, &str, u64)]) -> Domains {
        let masters = masters.iter().map(|&(d, m)| (d.to_string(), m)).collect();
        let mut gained = BTreeMap::new();
        let mut pinned = BTreeMap::new();
        for &(key, region, since) in pins {
            pinned.insert(Bytes::copy_from_slice(key.as_bytes()), Pin { region: region.to_string(), since });
            let g = gained.entry(region.to_string()).or_insert(0);
            *g = (*g).max(since);
        }
        Domains { home: home.to_string(), masters, epoch, home_since: 0, pins: pinned, gained }
    }

    /// The keyspace's pins split by the partition they fall in.
    pub fn pins_by_chain(map: &ClusterMap) -> BTreeMap<ChainId, BTreeMap<Bytes, Pin>> {
        let mut by_chain: BTreeMap<ChainId, BTreeMap<Bytes, Pin>> = BTreeMap::new();
        for (&keyspace, table) in &map.masters {
            for (key, pin) in &table.pinned {
                if let Some(c) = map.chain_of_key(keyspace, key) {
                    by_chain.entry(c.id).or_default().insert(key.clone(), pin.clone());
                }
            }
        }
        by_chain
    }
}
