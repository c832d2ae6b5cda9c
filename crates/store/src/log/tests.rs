//! LogStore semantics over a [`SimVfs`]; crash and corruption recovery are exercised in `tests/recovery.rs`.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::record::Body;
use crate::vfs::SimVfs;

fn open(vfs: &SimVfs) -> (LogStore, RecoveryReport) {
    LogStore::open(Arc::new(vfs.clone()), Path::new("/node/store")).unwrap()
}

fn put(seq: u64, key: &str, value: &str) -> Record {
    Record { chain: 3, seq, key: Bytes::copy_from_slice(key.as_bytes()), body: Body::Value(value.to_owned().into()) }
}

fn meta(seq: u64, key: &str, body: Body) -> Record {
    Record { chain: 3, seq, key: Bytes::copy_from_slice(key.as_bytes()), body }
}

fn value(store: &LogStore, key: &str) -> Option<Option<Bytes>> {
    store.get(key.as_bytes()).unwrap().map(|e| e.value)
}

fn replayed(store: &LogStore) -> Vec<Record> {
    let mut out = Vec::new();
    store.replay(&mut |r| out.push(r)).unwrap();
    out
}

fn workload() -> Vec<Record> {
    vec![
        put(1, "a", "one"),
        put(2, "b", "two"),
        meta(3, "", Body::Skip),
        put(4, "a", "three"),
        meta(5, "b", Body::Tombstone),
        meta(6, "a", Body::Skip),
        meta(5, "", Body::AckMark),
        meta(7, "c", Body::Tombstone),
    ]
}

#[test]
fn values_tombstones_and_metadata() {
    let (mut store, report) = open(&SimVfs::new());
    assert_eq!(report, RecoveryReport { records: 0, kept_bytes: 0, dropped_bytes: 0, reason: None });
    for rec in workload() {
        store.append(&rec).unwrap();
    }
    assert_eq!(store.get(b"a").unwrap(), Some(Entry { chain: 3, seq: 4, value: Some(Bytes::from_static(b"three")) }));
    assert_eq!(store.get(b"b").unwrap(), Some(Entry { chain: 3, seq: 5, value: None }));
    assert_eq!(value(&store, "c"), Some(None));
    assert_eq!(value(&store, ""), None);
    assert_eq!(value(&store, "zzz"), None);
    let stats = store.stats();
    assert_eq!((stats.live_keys, stats.records), (1, 8));
    assert_eq!(store.durability(), Durability::Durable);
}

#[test]
fn replay_returns_records_in_log_order_before_and_after_sync() {
    let (mut store, _) = open(&SimVfs::new());
    let recs = workload();
    for rec in &recs[..3] {
        store.append(rec).unwrap();
    }
    store.sync().unwrap();
    for rec in &recs[3..] {
        store.append(rec).unwrap();
    }
    assert_eq!(replayed(&store), recs);
}

#[test]
fn reopen_after_sync_returns_everything() {
    let vfs = SimVfs::new();
    let (mut store, _) = open(&vfs);
    for rec in workload() {
        store.append(&rec).unwrap();
    }
    store.sync().unwrap();
    let before = store.stats();
    drop(store);

    let (store, report) = open(&vfs);
    assert_eq!(report, RecoveryReport { records: 8, kept_bytes: before.log_bytes, dropped_bytes: 0, reason: None });
    assert_eq!(store.stats(), before);
    assert_eq!(replayed(&store), workload());
    assert_eq!(value(&store, "a"), Some(Some(Bytes::from_static(b"three"))));
    assert_eq!(value(&store, "b"), Some(None));
}

#[test]
fn appends_reach_the_file_unsynced() {
    let vfs = SimVfs::new();
    let (mut store, _) = open(&vfs);
    store.append(&put(1, "a", "one")).unwrap();
    assert_eq!(vfs.unsynced_bytes(), store.stats().log_bytes);
    store.sync().unwrap();
    assert_eq!(vfs.unsynced_bytes(), 0);
}

#[test]
fn records_spanning_scan_chunks_recover() {
    let vfs = SimVfs::new();
    let (mut store, _) = open(&vfs);
    let third = "x".repeat(scan::CHUNK / 3);
    let mut recs: Vec<Record> = (0..7).map(|i| put(i, &format!("k{i}"), &third)).collect();
    recs.push(put(7, "huge", &"y".repeat(scan::CHUNK * 3)));
    recs.push(put(8, "tail", "z"));
    for rec in &recs {
        store.append(rec).unwrap();
    }
    store.sync().unwrap();
    drop(store);
    let (store, report) = open(&vfs);
    assert_eq!((report.records, report.dropped_bytes), (9, 0));
    assert_eq!(replayed(&store), recs);
    assert_eq!(value(&store, "k6"), Some(Some(Bytes::from(third))));
}

#[test]
fn a_value_damaged_on_disk_reads_as_corrupt() {
    let vfs = SimVfs::new();
    let (mut store, _) = open(&vfs);
    store.append(&put(1, "a", "one")).unwrap();
    store.append(&put(2, "b", "two")).unwrap();
    store.sync().unwrap();
    let mut file = vfs.open(Path::new("/node/store/data.log")).unwrap();
    let len = file.len().unwrap();
    file.truncate(len - 1).unwrap();
    file.append(b"X").unwrap();

    assert_eq!(value(&store, "a"), Some(Some(Bytes::from_static(b"one"))));
    assert!(matches!(store.get(b"b"), Err(StoreError::Corrupt { .. })));
    assert!(matches!(store.replay(&mut |_| ()), Err(StoreError::Corrupt { .. })));
}

#[test]
fn a_failed_sync_fences_the_store() {
    let vfs = SimVfs::new();
    let (mut store, _) = open(&vfs);
    store.append(&put(1, "a", "one")).unwrap();
    vfs.crash(0);
    assert!(matches!(store.sync(), Err(StoreError::Io(_))));
    assert!(matches!(store.append(&put(2, "a", "two")), Err(StoreError::Io(_))));
    assert!(matches!(store.sync(), Err(StoreError::Io(_))));
}

#[test]
fn oversized_records_are_refused_without_side_effects() {
    let (mut store, _) = open(&SimVfs::new());
    let huge = Record { body: Body::Value(vec![0; crate::VALUE_MAX + 1].into()), ..put(1, "a", "") };
    assert!(matches!(store.append(&huge), Err(StoreError::TooLarge(_))));
    assert_eq!(store.stats(), StoreStats::default());
    store.append(&put(2, "a", "ok")).unwrap();
    assert_eq!(replayed(&store), [put(2, "a", "ok")]);
}
