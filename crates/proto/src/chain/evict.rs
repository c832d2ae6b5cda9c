//! Cache mode (docs/keyspaces.md, "Cache mode"): a keyspace with a `maxmemory` cap, which every node may hold
//! at most of it. The cap is shared out evenly among a node's chains of the keyspace, and a chain's share is
//! the smallest its members get: `maxmemory / c`, `c` being the most chains of the keyspace any of its members
//! holds. Then no node holds more than the cap, whatever the others do. A chain's head evicts its least
//! recently written keys while the chain holds more than its share: an eviction is a delete ordered like any
//! other write, so every member drops the same keys in the same place in the history, and the eviction keeps
//! the keyspace's guarantees (a key may vanish, but never come back). Every member's ledger counts the chain's
//! bytes, so a new head knows them at once.

use super::PlantedBug;
use super::{ChainNode, ChainStep, Fx};
use crate::map::ClusterMap;
use crate::stores::Stores;
use meridian_core::{ChainId, NodeId, Time};
use std::collections::BTreeMap;

/// Keys one call evicts at most: the rest wait for the next write or tick.
pub const EVICT_MAX: usize = 256;

/// Every chain of a cache keyspace in `map`, with its share of the keyspace's cap (see the module docs).
pub fn budgets(map: &ClusterMap) -> BTreeMap<ChainId, u64> {
    let mut held: BTreeMap<(u32, NodeId), u64> = BTreeMap::new();
    for c in map.chains.values() {
        for &m in &c.members {
            *held.entry((c.id.keyspace().0, m)).or_default() += 1;
        }
    }
    let cap = |c: ChainId| map.keyspaces.get(&c.keyspace())?.config.maxmemory;
    map.chains
        .values()
        .filter_map(|c| {
            let busiest = c.members.iter().map(|&m| held[&(c.id.keyspace().0, m)]).max().unwrap_or(1);
            Some((c.id, cap(c.id)? / busiest))
        })
        .collect()
}

impl ChainStep<'_> {
    /// At the head of a cache keyspace's chain: evicts the least recently written keys while the chain holds
    /// more than its share of the cap, as many as the chain's unacknowledged history has room for.
    pub(super) fn evict(&mut self, now: Time, chain: ChainId, out: &mut Fx) {
        if self.s.planted(PlantedBug::EvictsLocally) {
            return;
        }
        let Some(&budget) = self.s.budgets.get(&chain) else { return };
        let unacked = self.s.replicas.get(&chain).map_or(0, |r| r.unacked.len());
        let room = (self.s.cfg.unacked_max / 2).saturating_sub(unacked).min(EVICT_MAX);
        for _ in 0..room {
            let Some(ledger) = self.ledger(chain).filter(|l| l.chain_bytes(chain.0) > budget) else { return };
            let Some(victim) = ledger.oldest(chain.0, 1).pop() else { return };
            self.head_delete(now, chain, victim, out);
            self.s.stats.evicted += 1;
        }
    }

    /// On every tick: each cache chain this node heads evicts down to its share.
    pub(super) fn evict_all(&mut self, now: Time, out: &mut Fx) {
        for chain in self.headed() {
            self.evict(now, chain, out);
        }
    }
}

impl ChainNode {
    /// The memory `chain` holds here in `stores` as its keyspace's cap counts it, for a cache keyspace.
    pub(super) fn cache_bytes(&self, stores: &Stores, chain: ChainId) -> Option<u64> {
        self.budgets.contains_key(&chain).then(|| self.ledger(stores, chain).map_or(0, |l| l.chain_bytes(chain.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::{MapCommand, NodeAddrs};
    use meridian_core::{KeyspaceConfig, KeyspaceId, Location};

    #[test]
    fn a_chain_gets_the_smallest_share_of_its_members() {
        let addrs = |i| NodeAddrs { peer_addr: format!("h:{i}"), resp_addr: String::new(), http_addr: None };
        let nodes = (1..=4).map(|i| (NodeId(i), addrs(i), Location::default())).collect();
        let cache = KeyspaceConfig { maxmemory: Some(1 << 20), ..KeyspaceConfig::durable(2) };
        let mut map = ClusterMap::default();
        let boot = MapCommand::Bootstrap { nodes, default: cache, partitions: 8, vnodes: 1, voters: vec![NodeId(1)] };
        map.apply(&boot).unwrap();
        let shares = budgets(&map);
        assert_eq!(shares.len(), 8);
        for (chain, share) in &shares {
            let busiest = map.chains[chain]
                .members
                .iter()
                .map(|&m| map.chains.values().filter(|c| c.contains(m)).count() as u64)
                .max()
                .unwrap();
            assert_eq!(*share, (1 << 20) / busiest);
        }
        let durable = MapCommand::CreateKeyspace { name: "d".into(), config: KeyspaceConfig::durable(2) };
        map.apply(&durable).unwrap();
        assert!(budgets(&map).keys().all(|c| c.keyspace() == KeyspaceId::DEFAULT), "only cache keyspaces");
    }
}
