//! Rebuilding each chain's replication state from the datastores' logs at start.
//!
//! The log holds, per chain, consecutive history records, ack watermarks (`AckMark`), copied states (a join's
//! pre-copy or flush, whose sequence numbers are sparse) and range drops (the node left the chain). Replay
//! follows the rules of `docs/protocols/chain.md` ("The log and compaction") and of the join protocol
//! (`docs/protocols/ouroboros.md`):
//! - a drop forgets everything of the chain before it;
//! - a watermark stands for LU and LA: the tail held everything up to it, or a copy reflected it;
//! - a record that continues LU is history; one beyond LU + 1 is copied data, which leaves the chain
//!   incomplete until a later watermark or history catches up with it.

use super::msg::{Change, Outcome, Update};
use super::replica::Replica;
use super::stores::Stores;
use meridian_core::ChainId;
use meridian_store::{Body, Datastore, Record, StoreError};
use std::collections::BTreeMap;

/// The replication state of every chain the stores hold data for.
pub fn recover_all(stores: &Stores) -> Result<BTreeMap<ChainId, Replica>, StoreError> {
    let mut replicas = BTreeMap::new();
    for (keyspace, store) in stores.iter() {
        let found = recover(store)?;
        if let Some(stray) = found.keys().find(|c| c.keyspace() != keyspace) {
            let reason = format!("the store of keyspace {keyspace} holds records of chain {stray}");
            return Err(StoreError::Corrupt { offset: 0, reason });
        }
        replicas.extend(found);
    }
    Ok(replicas)
}

/// The replication state of every chain the log holds data for.
fn recover(store: &dyn Datastore) -> Result<BTreeMap<ChainId, Replica>, StoreError> {
    let mut replicas: BTreeMap<ChainId, Replica> = BTreeMap::new();
    let mut highest: BTreeMap<ChainId, u64> = BTreeMap::new();
    store.replay(&mut |rec: Record| {
        let chain = ChainId(rec.chain);
        let change = match rec.body {
            Body::DropRange { .. } => {
                replicas.remove(&chain);
                highest.remove(&chain);
                return;
            }
            Body::AckMark => {
                replicas.entry(chain).or_default().restore_watermark(rec.seq);
                return;
            }
            Body::Value(v) => Change::Put(v),
            Body::Tombstone => Change::Delete,
            Body::Skip => Change::Skip,
        };
        let r = replicas.entry(chain).or_default();
        let top = highest.entry(chain).or_default();
        *top = (*top).max(rec.seq);
        if rec.seq == r.lu + 1 {
            r.record(Update { chain, seq: rec.seq, key: rec.key, change, outcome: Outcome::default(), origin: None });
        }
    })?;
    for (chain, r) in replicas.iter_mut() {
        r.complete = highest.get(chain).is_none_or(|&top| top <= r.lu);
    }
    Ok(replicas)
}
