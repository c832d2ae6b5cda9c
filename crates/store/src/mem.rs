//! The volatile "M" replica type of Flex-KV (seed 003 §8): an index with no log behind it.

use std::collections::HashMap;

use bytes::Bytes;

use crate::datastore::{Datastore, Durability, StoreError, StoreStats};
use crate::record::{Entry, Record};

/// Keeps each key's latest entry in memory. Nothing survives a restart, so there is nothing to replay.
#[derive(Debug, Default)]
pub struct MemStore {
    index: HashMap<Bytes, Entry>,
    live_keys: u64,
    records: u64,
}

impl MemStore {
    pub fn new() -> MemStore {
        MemStore::default()
    }
}

impl Datastore for MemStore {
    fn append(&mut self, rec: &Record) -> Result<(), StoreError> {
        rec.check_limits()?;
        self.records += 1;
        let Some(entry) = rec.entry() else {
            return Ok(());
        };
        let live = entry.value.is_some();
        let was_live = self.index.insert(rec.key.clone(), entry).is_some_and(|old| old.value.is_some());
        self.live_keys = self.live_keys + u64::from(live) - u64::from(was_live);
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<Option<Entry>, StoreError> {
        Ok(self.index.get(key).cloned())
    }

    fn sync(&mut self) -> Result<(), StoreError> {
        Ok(())
    }

    fn replay(&self, _f: &mut dyn FnMut(Record)) -> Result<(), StoreError> {
        Ok(())
    }

    fn stats(&self) -> StoreStats {
        StoreStats { live_keys: self.live_keys, records: self.records, log_bytes: 0 }
    }

    fn durability(&self) -> Durability {
        Durability::Volatile
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Body, KEY_MAX};

    fn rec(seq: u64, key: &'static str, body: Body) -> Record {
        Record { chain: 1, seq, key: Bytes::from_static(key.as_bytes()), body }
    }

    #[test]
    fn values_tombstones_and_metadata() {
        let mut s = MemStore::new();
        s.append(&rec(1, "a", Body::Value(Bytes::from_static(b"x")))).unwrap();
        s.append(&rec(2, "b", Body::Value(Bytes::from_static(b"y")))).unwrap();
        s.append(&rec(3, "a", Body::Tombstone)).unwrap();
        s.append(&rec(4, "b", Body::Skip)).unwrap();
        s.append(&rec(5, "", Body::AckMark)).unwrap();
        s.sync().unwrap();

        assert_eq!(s.get(b"a").unwrap(), Some(Entry { chain: 1, seq: 3, value: None }));
        assert_eq!(s.get(b"b").unwrap(), Some(Entry { chain: 1, seq: 2, value: Some(Bytes::from_static(b"y")) }));
        assert_eq!(s.get(b"").unwrap(), None);
        assert_eq!(s.stats(), StoreStats { live_keys: 1, records: 5, log_bytes: 0 });
        let mut replayed = 0;
        s.replay(&mut |_| replayed += 1).unwrap();
        assert_eq!(replayed, 0);
        assert_eq!(s.durability(), Durability::Volatile);
    }

    #[test]
    fn enforces_the_log_limits() {
        let mut s = MemStore::new();
        let big = Record { chain: 0, seq: 0, key: vec![0; KEY_MAX + 1].into(), body: Body::Tombstone };
        assert!(matches!(s.append(&big), Err(StoreError::TooLarge(_))));
        assert_eq!(s.stats(), StoreStats::default());
    }
}
