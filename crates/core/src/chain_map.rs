//! A map keyed by chain id, for per-chain state that a node looks up several times per request.
//!
//! A chain id is its keyspace and its partition (`ids.rs`), so a lookup here is a scan of the few keyspaces
//! held and an index by partition. A `BTreeMap` of a keyspace's 64 chains compared its way down two nodes at
//! about 110 instructions a lookup, and the chain head's write path looked a replica up some ten times
//! (docs/performance-history.md, section 18). Iteration is in chain-id order, as a `BTreeMap`'s is, so whatever a node
//! does per chain it still does in the same order, which the simulator's determinism depends on.

use crate::ids::{ChainId, KeyspaceId};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::ops::Index;

/// A keyspace and its slots, indexed by partition.
type Keyspace<V> = (KeyspaceId, Vec<Option<(ChainId, V)>>);

/// Equal maps are equal field by field: each keyspace's slots end in an occupied one, and a keyspace with none
/// is dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainMap<V> {
    /// Sorted by keyspace; each keyspace's slots are indexed by partition and end in an occupied one.
    keyspaces: Vec<Keyspace<V>>,
    len: usize,
}

impl<V> Default for ChainMap<V> {
    fn default() -> Self {
        ChainMap { keyspaces: Vec::new(), len: 0 }
    }
}

impl<V> ChainMap<V> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, chain: &ChainId) -> Option<&V> {
        let (_, slots) = self.keyspaces.iter().find(|(k, _)| *k == chain.keyspace())?;
        slots.get(chain.partition() as usize)?.as_ref().map(|(_, v)| v)
    }

    pub fn get_mut(&mut self, chain: &ChainId) -> Option<&mut V> {
        let (_, slots) = self.keyspaces.iter_mut().find(|(k, _)| *k == chain.keyspace())?;
        slots.get_mut(chain.partition() as usize)?.as_mut().map(|(_, v)| v)
    }

    pub fn contains_key(&self, chain: &ChainId) -> bool {
        self.get(chain).is_some()
    }

    /// Puts `value` under `chain` and returns what was there.
    pub fn insert(&mut self, chain: ChainId, value: V) -> Option<V> {
        let before = slot(&mut self.keyspaces, chain).replace((chain, value)).map(|(_, v)| v);
        self.len += usize::from(before.is_none());
        before
    }

    /// The value under `chain`, put there by `make` if there was none.
    pub fn get_or_insert_with(&mut self, chain: ChainId, make: impl FnOnce() -> V) -> &mut V {
        let slot = slot(&mut self.keyspaces, chain);
        self.len += usize::from(slot.is_none());
        let (_, value) = slot.get_or_insert_with(|| (chain, make()));
        value
    }

    pub fn remove(&mut self, chain: &ChainId) -> Option<V> {
        let at = self.keyspaces.iter().position(|(k, _)| *k == chain.keyspace())?;
        let slots = &mut self.keyspaces[at].1;
        let (_, value) = slots.get_mut(chain.partition() as usize)?.take()?;
        self.len -= 1;
        trim(slots);
        if slots.is_empty() {
            self.keyspaces.remove(at);
        }
        Some(value)
    }

    /// Keeps the entries `keep` says to, in chain-id order.
    pub fn retain(&mut self, mut keep: impl FnMut(&ChainId, &mut V) -> bool) {
        for (_, slots) in self.keyspaces.iter_mut() {
            for slot in slots.iter_mut() {
                if slot.as_mut().is_some_and(|(chain, value)| !keep(chain, value)) {
                    *slot = None;
                    self.len -= 1;
                }
            }
            trim(slots);
        }
        self.keyspaces.retain(|(_, slots)| !slots.is_empty());
    }

    /// Entries in chain-id order.
    pub fn iter(&self) -> impl Iterator<Item = (&ChainId, &V)> {
        self.keyspaces.iter().flat_map(|(_, slots)| slots.iter().flatten().map(|(c, v)| (c, v)))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&ChainId, &mut V)> {
        self.keyspaces.iter_mut().flat_map(|(_, slots)| slots.iter_mut().flatten().map(|(c, v)| (&*c, v)))
    }

    pub fn keys(&self) -> impl Iterator<Item = &ChainId> {
        self.iter().map(|(c, _)| c)
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.iter_mut().map(|(_, v)| v)
    }
}

impl<V> Index<&ChainId> for ChainMap<V> {
    type Output = V;

    fn index(&self, chain: &ChainId) -> &V {
        self.get(chain).unwrap_or_else(|| panic!("no entry for chain {chain}"))
    }
}

impl<V> FromIterator<(ChainId, V)> for ChainMap<V> {
    fn from_iter<I: IntoIterator<Item = (ChainId, V)>>(entries: I) -> Self {
        let mut map = ChainMap::new();
        for (chain, value) in entries {
            map.insert(chain, value);
        }
        map
    }
}

/// Encoded as a `BTreeMap` of the same entries is, so a cluster map's encoding did not change with its type.
impl<V: Serialize> Serialize for ChainMap<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Not `collect_map`: a length-prefixed encoding needs the length, which the iterator does not know.
        let mut map = serializer.serialize_map(Some(self.len))?;
        for (chain, value) in self.iter() {
            map.serialize_entry(chain, value)?;
        }
        map.end()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for ChainMap<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(BTreeMap::<ChainId, V>::deserialize(deserializer)?.into_iter().collect())
    }
}

/// Drops trailing empty slots (and, once a keyspace's are all gone, the caller drops the keyspace), so a
/// keyspace the node no longer holds costs nothing to scan past and equal maps compare equal.
fn trim<V>(slots: &mut Vec<Option<V>>) {
    while slots.last().is_some_and(Option::is_none) {
        slots.pop();
    }
}

/// `chain`'s slot, made if its keyspace or partition had none.
fn slot<V>(keyspaces: &mut Vec<Keyspace<V>>, chain: ChainId) -> &mut Option<(ChainId, V)> {
    let keyspace = chain.keyspace();
    let at = match keyspaces.binary_search_by_key(&keyspace, |(k, _)| *k) {
        Ok(at) => at,
        Err(at) => {
            keyspaces.insert(at, (keyspace, Vec::new()));
            at
        }
    };
    let slots = &mut keyspaces[at].1;
    let partition = chain.partition() as usize;
    if slots.len() <= partition {
        slots.resize_with(partition + 1, || None);
    }
    &mut slots[partition]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::splitmix::SplitMix64;

    /// Random inserts, updates and removes over a few keyspaces and partitions, checked against a `BTreeMap`
    /// after every one: the same lookups, the same length, the same entries in the same order, and a map equal to
    /// one built from those entries alone.
    #[test]
    fn it_behaves_as_a_btree_map_does() {
        let mut rng = SplitMix64::new(7);
        let mut map = ChainMap::new();
        let mut model: BTreeMap<ChainId, u64> = BTreeMap::new();
        for step in 0..20_000u64 {
            let keyspace = KeyspaceId(rng.below(4) as u32 * 3);
            let chain = ChainId::new(keyspace, rng.below(70) as u32);
            match rng.below(4) {
                0 => assert_eq!(map.remove(&chain), model.remove(&chain)),
                1 if step % 100 == 0 => {
                    let cut = rng.next_u64() % 20_000;
                    map.retain(|c, v| c.partition() % 3 != 0 || *v < cut);
                    model.retain(|c, v| c.partition() % 3 != 0 || *v < cut);
                }
                1 | 2 => {
                    *map.get_or_insert_with(chain, || 0) += step;
                    *model.entry(chain).or_default() += step;
                }
                _ => assert_eq!(map.insert(chain, step), model.insert(chain, step)),
            }
            assert_eq!(map.get(&chain), model.get(&chain));
            assert_eq!(map.len(), model.len());
            assert!(map.iter().eq(model.iter()));
            assert!(map.iter_mut().map(|(c, v)| (*c, *v)).eq(model.iter().map(|(c, v)| (*c, *v))));
            // What equality relies on: the same entries make the same fields, however they came to be.
            assert_eq!(map, model.iter().map(|(c, v)| (*c, *v)).collect::<ChainMap<u64>>());
        }
        let encoded = postcard::to_allocvec(&map).unwrap();
        assert_eq!(encoded, postcard::to_allocvec(&model).unwrap(), "encoded as the BTreeMap is");
        assert_eq!(postcard::from_bytes::<ChainMap<u64>>(&encoded).unwrap(), map);
    }
}
