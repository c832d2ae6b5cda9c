//! The rest of the storage interface, on both replica types: ring-range scans, streaming the log from a
//! position, and the split and merge maintenance operations.

use std::collections::BTreeMap;

use bytes::Bytes;
use meridian_core::ring::key_token;
use meridian_store::{
    merge_into, ring_range_contains, split_range, Body, Datastore, Entry, LogPos, MemStore, Record, SimVfs, StoreError,
};

use crate::common::*;

fn log_store(vfs: &SimVfs) -> Box<dyn Datastore> {
    Box::new(open(vfs, opts(700, no_compaction())).0)
}

/// Puts to 300 keys, then deletes of every seventh.
fn keyed_records() -> Vec<Record> {
    let mut recs: Vec<Record> = (0..300).map(|i| put(1, i + 1, &format!("k{i}"), &format!("v{i}"))).collect();
    recs.extend((0..300).step_by(7).map(|i| meta(1, 301 + i, &format!("k{i}"), Body::Tombstone)));
    recs
}

fn scanned(store: &dyn Datastore, start: u64, end: u64) -> BTreeMap<Bytes, Entry> {
    let mut out = BTreeMap::new();
    store.scan_range(start, end, &mut |k, e| assert!(out.insert(k, e).is_none(), "a key came twice")).unwrap();
    out
}

#[test]
fn scan_range_visits_exactly_the_keys_whose_token_is_in_range() {
    let recs = keyed_records();
    let want = model(&recs);
    let tokens: Vec<u64> = want.keys().map(|k| key_token(k)).collect();
    let mut rng = Rng(5);
    let mut ranges = vec![(0, 0), (tokens[0], tokens[0]), (tokens[1], tokens[2]), (tokens[2], tokens[1])];
    ranges.extend((0..20).map(|_| (rng.below(u64::MAX), rng.below(u64::MAX))));
    // Ends one token either side of a key, to check the boundaries are exclusive and inclusive.
    ranges.extend(tokens[3..6].iter().map(|&t| (t, t.wrapping_add(1))));
    ranges.extend(tokens[3..6].iter().map(|&t| (t.wrapping_sub(1), t)));
    let vfs = SimVfs::new();
    for mut store in [log_store(&vfs), Box::new(MemStore::new()) as Box<dyn Datastore>] {
        append_all(&mut *store, &recs);
        for &(start, end) in &ranges {
            let expected: BTreeMap<Bytes, Entry> = want
                .iter()
                .filter(|(k, _)| ring_range_contains(start, end, key_token(k)))
                .map(|(k, e)| (k.clone(), e.clone()))
                .collect();
            assert_eq!(scanned(&*store, start, end), expected, "({start}, {end}]");
        }
    }
}

/// Reads the whole log from `from` in batches of about `batch` bytes.
fn stream(store: &dyn Datastore, mut from: LogPos, batch: usize) -> (Vec<Record>, LogPos) {
    let mut out = Vec::new();
    loop {
        let (recs, next) = store.read_log(from, batch).unwrap();
        if recs.is_empty() {
            assert_eq!(next, from);
            return (out, from);
        }
        out.extend(recs);
        from = next;
    }
}

#[test]
fn read_log_streams_the_log_in_order_and_resumes_at_the_end() {
    let vfs = SimVfs::new();
    let mut store = log_store(&vfs);
    let recs = workload(11, 60, 8);
    append_all(&mut *store, &recs[..40]);
    for batch in [1, 100, 1 << 20] {
        let (got, end) = stream(&*store, LogPos::START, batch);
        assert_eq!(got, recs[..40], "batch {batch}");
        assert_eq!(end, store.end_pos());
    }
    let end = store.end_pos();
    append_all(&mut *store, &recs[40..]);
    assert_eq!(stream(&*store, end, 50).0, recs[40..]);
    assert!(store.stats().segments > 2);
}

#[test]
fn a_position_compaction_removed_is_refused_and_a_fresh_scan_recovers() {
    let vfs = SimVfs::new();
    let compacting = opts(300, eager_compaction(1 << 20));
    let (mut store, _) = open(&vfs, compacting);
    let mut recs: Vec<Record> = (1..=80).map(|s| put(1, s, &format!("key{}", s % 5), &format!("value{s}"))).collect();
    recs.push(ack(1, 80));
    append_all(&mut store, &recs);
    let (_, early) = store.read_log(LogPos::START, 1).unwrap();
    compact_fully(&mut store);
    assert!(matches!(store.read_log(early, 100), Err(StoreError::Compacted(p)) if p == early));
    assert!(store.read_log(LogPos::START, 100).is_ok());

    // The restart recipe: note the end, copy the current state, then stream what follows.
    let resume = store.end_pos();
    let mut copy = MemStore::new();
    split_range(&store, &mut copy, 0, 0).unwrap();
    let later: Vec<Record> = (81..=90).map(|s| put(1, s, &format!("key{}", s % 7), &format!("late{s}"))).collect();
    append_all(&mut store, &later);
    let (tail, _) = stream(&store, resume, 64);
    assert_eq!(tail, later);
    append_all(&mut copy, &tail);
    recs.extend(later);
    assert_values(&copy, &model(&recs));
}

#[test]
fn split_range_copies_one_range_into_any_store() {
    let recs = keyed_records();
    let want = model(&recs);
    let vfs = SimVfs::new();
    let mut src = log_store(&vfs);
    append_all(&mut *src, &recs);
    let (start, end) = (u64::MAX / 3, u64::MAX / 3 * 2);
    let in_range: BTreeMap<Bytes, Entry> = want
        .iter()
        .filter(|(k, _)| ring_range_contains(start, end, key_token(k)))
        .map(|(k, e)| (k.clone(), e.clone()))
        .collect();
    let other = SimVfs::new();
    for mut dst in [Box::new(MemStore::new()) as Box<dyn Datastore>, log_store(&other)] {
        let copied = split_range(&*src, &mut *dst, start, end).unwrap();
        assert_eq!(copied, in_range.len() as u64);
        assert_eq!(scanned(&*dst, 0, 0), in_range);
        assert!(want.keys().filter(|k| !in_range.contains_key(*k)).all(|k| dst.get(k).unwrap().is_none()));
    }
}

#[test]
fn merge_into_appends_every_record_in_order() {
    let base = workload(20, 30, 6);
    let extra = workload(21, 30, 6);
    let vfs = SimVfs::new();
    let mut dst = log_store(&vfs);
    append_all(&mut *dst, &base);

    // The Ouroboros temporary store is an M store: merging it leaves the latest state of every key.
    let mut tmp = MemStore::new();
    append_all(&mut tmp, &extra);
    merge_into(&tmp, &mut *dst).unwrap();
    let all: Vec<Record> = base.iter().chain(&extra).cloned().collect();
    assert_values(&*dst, &model(&all));

    // From a log store, every record arrives, in order.
    let other = SimVfs::new();
    let mut copy = log_store(&other);
    assert_eq!(merge_into(&*dst, &mut *copy).unwrap(), replayed(&*dst).len() as u64);
    assert_eq!(replayed(&*copy), replayed(&*dst));
}
