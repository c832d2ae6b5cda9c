//! A replica's cells (each key's newest version) in its datastore. A key's record carries its version as the
//! record's sequence number, and a delete is kept as an empty value rather than a tombstone: compaction may let a
//! covered tombstone go, and a replica that forgot a delete's version would let an older value it missed win over
//! it again. Every stored value of a live key has a header byte (`meridian_core::Stored`), so empty never means
//! anything else.

use super::Versioned;
use crate::map::placement::partition_range;
use bytes::Bytes;
use meridian_core::ChainId;
use meridian_store::{Body, Datastore, Entry, Record, StoreError};

/// What the store holds of `key`.
pub fn cell(store: &dyn Datastore, key: &[u8]) -> Result<Versioned, StoreError> {
    Ok(store.get(key)?.map_or_else(Versioned::default, versioned))
}

/// A key's index entry as a version: an empty value is a delete.
fn versioned(e: Entry) -> Versioned {
    Versioned { version: e.seq, value: e.value.filter(|v| !v.is_empty()) }
}

/// Takes `v` for `key` if it is newer than what the store holds; says whether the key had a value before.
pub fn apply(store: &mut dyn Datastore, chain: ChainId, key: &Bytes, v: &Versioned) -> Result<bool, StoreError> {
    Ok(offer(store, chain, key, v)?.existed)
}

/// What a replica held of a key when it was offered a version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offered {
    /// The key had a value.
    pub existed: bool,
    /// Its version then: the offer was taken if it was older.
    pub held: u64,
}

/// Takes `v` for `key` if it is newer than what the store holds, and says what it held.
pub fn offer(store: &mut dyn Datastore, chain: ChainId, key: &Bytes, v: &Versioned) -> Result<Offered, StoreError> {
    let held = cell(store, key)?;
    if v.version > held.version {
        put(store, chain, key, v)?;
    }
    Ok(Offered { existed: held.value.is_some(), held: held.version })
}

/// Stores `v` for `key` whatever the store holds: the last record of a key is its cell.
pub fn put(store: &mut dyn Datastore, chain: ChainId, key: &Bytes, v: &Versioned) -> Result<(), StoreError> {
    let body = Body::Value(v.value.clone().unwrap_or_default());
    store.append(&Record { chain: chain.0, seq: v.version, key: key.clone(), body })
}

/// The watermark that lets compaction drop every superseded record of `chain`: a replica of cells keeps no
/// history, only each key's newest version.
pub fn reclaim_all(chain: ChainId) -> Record {
    Record { chain: chain.0, seq: u64::MAX, key: Bytes::new(), body: Body::AckMark }
}

/// Up to `max` keys of `chain`'s partition (of `partitions`) after `after`, in key order, with what the store
/// holds of each; and whether more follow. Each page scans the partition's range anew: a joiner's copy is rare
/// and paced by its requests, and holds nothing open between them.
pub fn page(
    store: &dyn Datastore,
    chain: ChainId,
    partitions: u32,
    after: Option<&Bytes>,
    max: usize,
) -> Result<(Vec<(Bytes, Versioned)>, bool), StoreError> {
    let range = partition_range(chain, partitions);
    let mut all = Vec::new();
    store.scan_range(range.start().wrapping_sub(1), *range.end(), &mut |key, e| {
        if after.is_none_or(|a| key > *a) {
            all.push((key, versioned(e)));
        }
    })?;
    all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let more = all.len() > max;
    all.truncate(max);
    Ok((all, more))
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_store::MemStore;

    #[test]
    fn a_delete_keeps_its_version_and_only_newer_versions_are_taken() {
        let mut store = MemStore::new();
        let (chain, key) = (ChainId(0), Bytes::from_static(b"k"));
        let put = |version, value: &'static [u8]| Versioned { version, value: Some(Bytes::from_static(value)) };
        assert!(!apply(&mut store, chain, &key, &put(5, b"\x00five")).unwrap(), "nothing before");
        assert!(apply(&mut store, chain, &key, &put(3, b"\x00three")).unwrap(), "a value before");
        assert_eq!(cell(&store, &key).unwrap(), put(5, b"\x00five"), "the older version is not taken");
        apply(&mut store, chain, &key, &Versioned { version: 7, value: None }).unwrap();
        assert_eq!(cell(&store, &key).unwrap(), Versioned { version: 7, value: None }, "the delete's version stays");
        assert!(!apply(&mut store, chain, &key, &put(6, b"\x00six")).unwrap());
        assert_eq!(cell(&store, &key).unwrap().version, 7, "a value older than the delete does not come back");
        assert_eq!(cell(&store, b"absent").unwrap(), Versioned::default());
    }
}
