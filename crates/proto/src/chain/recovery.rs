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
use crate::map::{ChainView, ClusterMap};
use crate::stores::{StoreKey, Stores};
use meridian_core::{ChainId, ChainMap, KeyspaceId, NodeId, ReplicaKind};
use meridian_store::{Body, Datastore, Record, StoreError};
use std::collections::{BTreeMap, BTreeSet};

/// Every chain's replica, and the stale copies to drop: see [`recover_all`].
type Recovered = (ChainMap<Replica>, Vec<(ChainId, StoreKey)>);

/// The replication state of every chain the stores hold data for, and the chains found in more than one store
/// of their keyspace (a replica of another kind left from an earlier membership), by the stores that also hold
/// them. `prefer` gives the kind the node's map last gave it for a chain: that store's copy is kept.
/// Only the stores of keyspaces `mine` says are chain keyspaces are read.
pub fn recover_all(
    stores: &Stores,
    mine: &dyn Fn(KeyspaceId) -> bool,
    prefer: &dyn Fn(ChainId) -> Option<ReplicaKind>,
) -> Result<Recovered, StoreError> {
    let mut replicas: ChainMap<Replica> = ChainMap::new();
    let mut stale = Vec::new();
    for ((keyspace, kind), store) in stores.iter().filter(|((k, _), _)| mine(*k)) {
        for (chain, mut r) in recover(store)? {
            if chain.keyspace() != keyspace {
                let reason = format!("the store of keyspace {keyspace} holds records of chain {chain}");
                return Err(StoreError::Corrupt { offset: 0, reason });
            }
            r.kind = kind;
            // Without a word from the map, a log's copy is the one that can be whole.
            let wanted = prefer(chain).unwrap_or(ReplicaKind::Log);
            match replicas.get(&chain) {
                Some(kept) if kept.kind == wanted || kind != wanted => stale.push((chain, (keyspace, kind))),
                Some(kept) => {
                    stale.push((chain, (keyspace, kept.kind)));
                    replicas.insert(chain, r);
                }
                None => drop(replicas.insert(chain, r)),
            }
        }
    }
    Ok((replicas, stale))
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
            let outcome = Outcome::default();
            r.record(&Update { chain, seq: rec.seq, key: rec.key, change, outcome, origin: None, also: Vec::new() });
        } else if rec.seq == r.lu && r.lu > 0 {
            // Every record of seq `lu` was written by update `lu`: a later key of its group, or a copy of one of
            // its keys' states.
            r.record_also(rec.key, change);
        }
    })?;
    for (chain, r) in replicas.iter_mut() {
        r.top = highest.get(chain).map_or(r.lu, |&top| top.max(r.lu));
        r.complete = r.top <= r.lu;
    }
    Ok(replicas)
}

/// Marks lost the replicas `map` (the one the node stored last) gave this node as a member that may miss
/// acknowledged writes: those of kinds that do not survive a restart; unless `heads_synced` (the previous
/// run made every write durable as it stopped), those of chains it headed passing updates on before its fsync
/// ([`ClusterMap::head_forwards_early`]); and those an earlier run counted lost (`was_lost`), whatever the map
/// has made of their position since. A `buffered` or `log` one keeps what its log holds, in case the chain
/// has nothing better.
pub fn mark_lost(
    me: NodeId,
    map: &ClusterMap,
    replicas: &mut ChainMap<Replica>,
    heads_synced: bool,
    was_lost: &BTreeSet<ChainId>,
) {
    let at_risk = |c: &ChainView, kind: ReplicaKind| {
        !kind.survives_restart() || (!heads_synced && map.head_forwards_early(c, me)) || was_lost.contains(&c.id)
    };
    for c in map.chains.values() {
        let Some(kind) = c.position(me).map(|i| c.kinds[i]).filter(|&k| at_risk(c, k)) else { continue };
        let r = replicas.get_or_insert_with(c.id, || Replica::empty(kind));
        if r.kind != kind {
            *r = Replica::empty(kind);
        }
        r.lost = true;
    }
}
