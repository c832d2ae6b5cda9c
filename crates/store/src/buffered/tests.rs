//! BufferedStore over a [`SimVfs`]: reads from memory, batched fsyncs, and what a crash can take.

use std::path::Path;

use super::*;
use crate::record::Body;
use crate::vfs::SimVfs;

const DIR: &str = "/node/buffered";
const BATCH: BatchOptions = BatchOptions { batch_bytes: 1 << 20, batch_records: 10 };

fn open(vfs: &SimVfs) -> BufferedStore {
    BufferedStore::open(Arc::new(vfs.clone()), Path::new(DIR), LogOptions::default(), BATCH).unwrap().0
}

fn put(seq: u64) -> Record {
    let key = Bytes::from(format!("k{}", seq % 7));
    Record { chain: 1, seq, key, body: Body::Value(Bytes::from(format!("v{seq}"))) }
}

fn replayed(store: &BufferedStore) -> Vec<Record> {
    let mut out = Vec::new();
    store.replay(&mut |r| out.push(r)).unwrap();
    out
}

/// Appends `recs`, syncing after each, and returns how many were covered by the last fsync.
fn append_syncing(store: &mut BufferedStore, recs: &[Record]) -> usize {
    let mut synced = 0;
    for (i, rec) in recs.iter().enumerate() {
        store.append(rec).unwrap();
        store.sync().unwrap();
        if store.unsynced_records == 0 {
            synced = i + 1;
        }
    }
    synced
}

#[test]
fn reads_come_from_memory_and_fsyncs_come_a_batch_at_a_time() {
    let vfs = SimVfs::new();
    let mut store = open(&vfs);
    let recs: Vec<Record> = (1..=25).map(put).collect();
    let synced = append_syncing(&mut store, &recs);
    assert_eq!(synced, 20, "two full batches of 10 were fsynced, the rest wait");
    assert_eq!(store.durability(), Durability::WindowLoss);
    assert_eq!(store.get(b"k4").unwrap().and_then(|e| e.value), Some(Bytes::from("v25")));
    assert_eq!(replayed(&store), recs);
    let mut keys = 0;
    store.scan_range(0, 0, &mut |_, _| keys += 1).unwrap();
    assert_eq!(keys, 7);
}

#[test]
fn a_crash_loses_at_most_the_unsynced_batch_and_keeps_a_prefix() {
    for entropy in 0..50 {
        let vfs = SimVfs::new();
        let mut store = open(&vfs);
        let recs: Vec<Record> = (1..=37).map(put).collect();
        let synced = append_syncing(&mut store, &recs);
        if entropy % 2 == 0 {
            store.flush().unwrap();
        }
        drop(store);
        vfs.crash(entropy);
        let store = open(&vfs);
        let kept = replayed(&store);
        assert!(kept.len() >= synced && recs.len() - synced < BATCH.batch_records as usize);
        assert_eq!(kept, recs[..kept.len()], "never a value that was not written, never a gap");
        let latest = kept.iter().rev().find(|r| r.key == "k3").map(|r| r.body.clone());
        let got = store.get(b"k3").unwrap().and_then(|e| e.value).map(Body::Value);
        assert_eq!(got, latest);
    }
}

#[test]
fn a_crash_keeps_a_group_whole_or_drops_it() {
    let mut torn = false;
    for entropy in 0..60 {
        let vfs = SimVfs::new();
        let mut store = open(&vfs);
        let synced = append_syncing(&mut store, &(1..=10).map(put).collect::<Vec<_>>());
        assert_eq!(synced, 10);
        let group: Vec<Record> = (11..=16).map(put).collect();
        store.append_group(&group).unwrap();
        store.flush().unwrap();
        drop(store);
        vfs.crash(entropy);
        let store = open(&vfs);
        let kept = replayed(&store).len();
        assert!(kept == 10 || kept == 16, "entropy {entropy}: kept {kept} records");
        let k4 = store.get(b"k4").unwrap().and_then(|e| e.value);
        assert_eq!(k4, Some(Bytes::from(if kept == 16 { "v11" } else { "v4" })), "memory is loaded from the log");
        torn |= kept == 10;
    }
    assert!(torn, "some crash should take the unsynced group");
}

#[test]
fn a_flush_survives_a_process_crash() {
    let vfs = SimVfs::new();
    let mut store = open(&vfs);
    let recs: Vec<Record> = (1..=5).map(put).collect();
    append_syncing(&mut store, &recs);
    store.flush().unwrap();
    // A killed process runs no destructors; the page cache, unlike the process, survives.
    std::mem::forget(store);
    assert_eq!(replayed(&open(&vfs)), recs);
}

#[test]
fn a_drop_reaches_memory_and_the_log_and_survives_a_reopen() {
    let vfs = SimVfs::new();
    let mut store = open(&vfs);
    let recs: Vec<Record> = (1..=14).map(put).collect();
    append_syncing(&mut store, &recs);
    let marker =
        Record { chain: 1, seq: 0, key: Bytes::new(), body: Body::DropRange { start_exclusive: 0, end_inclusive: 0 } };
    store.append(&marker).unwrap();
    store.append(&put(15)).unwrap();
    let survivors = |store: &BufferedStore| {
        let mut keys = Vec::new();
        store.scan_range(0, 0, &mut |k, _| keys.push(k)).unwrap();
        keys
    };
    assert_eq!(survivors(&store), [Bytes::from("k1")]);
    assert_eq!((store.get(b"k3").unwrap(), store.stats().live_keys), (None, 1));
    store.flush().unwrap();
    drop(store);
    let store = open(&vfs);
    assert_eq!(survivors(&store), [Bytes::from("k1")]);
    assert_eq!(replayed(&store)[14..], [marker, put(15)]);
}

#[test]
fn a_sync_job_is_taken_a_batch_at_a_time_and_keeps_what_it_covered() {
    let vfs = SimVfs::new();
    let mut store = open(&vfs);
    let recs: Vec<Record> = (1..=15).map(put).collect();
    for rec in &recs[..9] {
        store.append(rec).unwrap();
        assert!(store.begin_sync().unwrap().is_none(), "the batch is not full yet");
        store.end_sync();
    }
    store.append(&recs[9]).unwrap();
    let job = store.begin_sync().unwrap().expect("a full batch owes the log's fsync");
    assert_eq!(store.unsynced_records, 0);
    for rec in &recs[10..] {
        store.append(rec).unwrap();
    }
    job().unwrap();
    store.end_sync();
    drop(store);
    vfs.crash(5);
    let recovered = replayed(&open(&vfs));
    assert!(recovered.starts_with(&recs[..10]), "lost a record the job covered: {recovered:?}");
}

#[test]
fn append_tells_whether_the_key_had_a_value() {
    crate::datastore::check_append_existed(&mut open(&SimVfs::new()));
}
