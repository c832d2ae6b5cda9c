//! FAWN-DS's maintenance operations (seed 003 §2.5) over any two [`Datastore`]s: `split_range` copies a key
//! range into another store (a node joining as head splits a range in two), `merge_into` appends one store's
//! log onto another (Ouroboros' temporary store, merged after play-forward). Both are single sequential
//! passes, so they work for every replica type the same way.

use bytes::Bytes;

use crate::datastore::{Datastore, LogPos, StoreError};
use crate::record::{Body, Entry, Record};

/// How much of the source `merge_into` holds in memory at a time.
const MERGE_BATCH_BYTES: usize = 1 << 20;

/// Appends to `dst` the latest record (value or tombstone) of every key of `src` whose ring token lies in
/// `(start_exclusive, end_inclusive]`, and returns how many it appended. The copies keep their chain and
/// sequence numbers but come in no particular order, so `dst` holds the range's state, not its history (range
/// drops included: a dropped key is simply not there to copy). Nothing is synced.
pub fn split_range(
    src: &dyn Datastore,
    dst: &mut dyn Datastore,
    start_exclusive: u64,
    end_inclusive: u64,
) -> Result<u64, StoreError> {
    let mut copied = 0;
    let mut failure = None;
    src.scan_range(start_exclusive, end_inclusive, &mut |key: Bytes, entry: Entry| {
        if failure.is_some() {
            return;
        }
        match dst.append(&record_of(key, entry)) {
            Ok(()) => copied += 1,
            Err(e) => failure = Some(e),
        }
    })?;
    failure.map_or(Ok(copied), Err)
}

/// Appends every record `src` streams from its start ([`Datastore::read_log`]), in order, to `dst` and returns
/// how many it appended. For a log store that is its whole log; for a memory store, the latest record of every
/// key and every range drop. Range drops arrive in their place, so one takes out the keys in its range that
/// `dst` already held as well as those `src` wrote before it. Nothing is synced.
pub fn merge_into(src: &dyn Datastore, dst: &mut dyn Datastore) -> Result<u64, StoreError> {
    let mut pos = LogPos::START;
    let mut appended = 0;
    loop {
        let (batch, next) = src.read_log(pos, MERGE_BATCH_BYTES)?;
        if batch.is_empty() {
            return Ok(appended);
        }
        for rec in &batch {
            dst.append(rec)?;
        }
        appended += batch.len() as u64;
        pos = next;
    }
}

fn record_of(key: Bytes, entry: Entry) -> Record {
    let body = entry.value.map_or(Body::Tombstone, Body::Value);
    Record { chain: entry.chain, seq: entry.seq, key, body }
}
