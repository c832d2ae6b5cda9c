//! Gets while the log store compacts, beside gets once it has finished, and the log it reclaims: every key
//! is written [`OVERWRITES`] times into small segments (with no `sync`, so no compaction runs yet), then
//! each `sync` does one slice of compaction, as on a node, with a round of timed gets after each.

use crate::latency::Latency;
use crate::puts::key;
use crate::Limits;
use bytes::Bytes;
use meridian_core::splitmix::SplitMix64;
use meridian_store::{Body, CompactionOptions, Datastore, LogOptions, LogStore, RealVfs, Record, StoreStats};
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Versions written of each key; all but the last are garbage for compaction.
pub(crate) const OVERWRITES: u64 = 10;
/// Most keys, so the run stays within a few hundred megabytes of log whatever the byte budget.
const KEYS_MAX: u64 = 20_000;
/// Gets timed after each compaction slice, and (times the slices) once compaction is done.
const GETS_PER_SLICE: u64 = 200;
/// Bound on slices, in case compaction never goes idle.
const SLICES_MAX: u64 = 100_000;

pub(crate) struct CompactionRun {
    pub(crate) keys: u64,
    pub(crate) segment_bytes: u64,
    pub(crate) before: StoreStats,
    pub(crate) after: StoreStats,
    pub(crate) during: Latency,
    pub(crate) idle: Latency,
}

pub(crate) fn run(dir: &Path, value: &Bytes, limits: &Limits) -> io::Result<CompactionRun> {
    let per_record = (value.len() + key(0, 0).len()) as u64;
    let keys = (limits.max_bytes / (OVERWRITES * per_record)).clamp(1, KEYS_MAX);
    // About 32 segments of log, so compaction has many passes to make.
    let segment_bytes = (keys * OVERWRITES * per_record / 32).clamp(4 << 10, 4 << 20);
    // Unpaced: no writes run beside compaction here, so every slice is a full `slice_bytes`, as on a node that
    // writes fast enough to earn it.
    let compaction = CompactionOptions { pace: 0, ..CompactionOptions::default() };
    let opts = LogOptions { segment_bytes, compaction, ..LogOptions::default() };
    let (mut store, _) = LogStore::open_with(Arc::new(RealVfs), dir, opts).map_err(io::Error::other)?;
    write_versions(&mut store, keys, value)?;
    let before = store.stats();
    let mut rng = SplitMix64::new(keys);
    let (mut during, mut slices) = (Latency::new(), 0);
    while slices < SLICES_MAX && compact_slice(&mut store)? {
        time_gets(&store, keys, GETS_PER_SLICE, &mut rng, &mut during)?;
        slices += 1;
    }
    let mut idle = Latency::new();
    time_gets(&store, keys, GETS_PER_SLICE * slices.max(1), &mut rng, &mut idle)?;
    Ok(CompactionRun { keys, segment_bytes, before, after: store.stats(), during, idle })
}

/// Every key [`OVERWRITES`] times, then an ack mark covering them all, which lets compaction drop the
/// superseded versions (it keeps whatever the chain's ack watermark does not cover).
fn write_versions(store: &mut LogStore, keys: u64, value: &Bytes) -> io::Result<()> {
    let mut seq = 0;
    for _ in 0..OVERWRITES {
        for n in 0..keys {
            seq += 1;
            let rec = Record { chain: 0, seq, key: key(0, n), body: Body::Value(value.clone()) };
            store.append(&rec).map_err(io::Error::other)?;
        }
    }
    let ack = Record { chain: 0, seq, key: Bytes::new(), body: Body::AckMark };
    store.append(&ack).map_err(io::Error::other)
}

/// One `sync`, which does one slice of compaction; whether compaction was busy across it.
fn compact_slice(store: &mut LogStore) -> io::Result<bool> {
    let before = store.compaction_progress();
    store.sync().map_err(io::Error::other)?;
    let after = store.compaction_progress();
    Ok(before.pass.is_some() || after.pass.is_some() || after.passes_completed > before.passes_completed)
}

fn time_gets(store: &LogStore, keys: u64, gets: u64, rng: &mut SplitMix64, into: &mut Latency) -> io::Result<()> {
    for _ in 0..gets {
        let k = key(0, rng.next_u64() % keys);
        let t = Instant::now();
        let found = store.get(&k).map_err(io::Error::other)?;
        into.record(t.elapsed());
        if found.is_none() {
            return Err(io::Error::other(format!("key {k:?} was written but is missing")));
        }
    }
    Ok(())
}
