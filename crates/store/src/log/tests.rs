//! LogStore semantics over a [`SimVfs`]; crash and corruption recovery, compaction, faults and streaming are
//! exercised in `tests/`.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::record::Body;
use crate::vfs::SimVfs;

const DIR: &str = "/node/store";

fn open(vfs: &SimVfs) -> (LogStore, RecoveryReport) {
    LogStore::open(Arc::new(vfs.clone()), Path::new(DIR)).unwrap()
}

fn open_small(vfs: &SimVfs, segment_bytes: u64) -> LogStore {
    let opts = LogOptions { segment_bytes, ..LogOptions::default() };
    LogStore::open_with(Arc::new(vfs.clone()), Path::new(DIR), opts).unwrap().0
}

fn segment_files(vfs: &SimVfs) -> Vec<String> {
    vfs.list_files(Path::new(DIR)).unwrap().into_iter().filter(|f| f.ends_with(".seg")).collect()
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
    assert_eq!((report.records, report.kept_bytes, report.dropped_bytes, report.reason), (0, 0, 0, None));
    assert!(report.segments.is_empty() && report.removed_files.is_empty());
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
    assert_eq!((report.records, report.kept_bytes, report.dropped_bytes), (8, before.log_bytes, 0));
    assert_eq!(report.reason, None);
    assert_eq!(store.stats(), before);
    assert_eq!(replayed(&store), workload());
    assert_eq!(value(&store, "a"), Some(Some(Bytes::from_static(b"three"))));
    assert_eq!(value(&store, "b"), Some(None));
}

#[test]
fn flushed_appends_reach_the_file_unsynced() {
    let vfs = SimVfs::new();
    let (mut store, _) = open(&vfs);
    store.append(&put(1, "a", "one")).unwrap();
    store.flush().unwrap();
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
    let [seg] = &segment_files(&vfs)[..] else { panic!("one segment expected") };
    let mut file = vfs.open(&Path::new(DIR).join(seg)).unwrap();
    let len = file.len().unwrap();
    file.truncate(len - 1).unwrap();
    file.append(b"X").unwrap();

    assert_eq!(value(&store, "a"), Some(Some(Bytes::from_static(b"one"))));
    match store.get(b"b") {
        Err(StoreError::Corrupt { reason, .. }) => assert!(reason.contains(seg.as_str()), "{reason}"),
        other => panic!("expected Corrupt, got {other:?}"),
    }
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
    assert_eq!((store.stats().records, store.stats().log_bytes), (0, 0));
    store.append(&put(2, "a", "ok")).unwrap();
    assert_eq!(replayed(&store), [put(2, "a", "ok")]);
}

#[test]
fn a_group_with_an_oversized_record_adds_none_of_it() {
    let (mut store, _) = open(&SimVfs::new());
    let huge = Record { body: Body::Value(vec![0; crate::VALUE_MAX + 1].into()), ..put(1, "b", "") };
    assert!(matches!(store.append_group(&[put(1, "a", "x"), huge]), Err(StoreError::TooLarge(_))));
    assert_eq!((store.stats().records, store.stats().log_bytes), (0, 0));
    let group = [put(2, "a", "x"), meta(2, "b", Body::Tombstone), put(2, "c", "z")];
    store.append_group(&group).unwrap();
    assert_eq!(replayed(&store), group);
    assert_eq!((value(&store, "a"), value(&store, "b")), (Some(Some(Bytes::from("x"))), Some(None)));
}

#[test]
fn segments_seal_at_their_size_and_replay_in_append_order() {
    let vfs = SimVfs::new();
    let mut store = open_small(&vfs, 100);
    let recs: Vec<Record> = (1..=20).map(|i| put(i, &format!("k{}", i % 4), "0123456789")).collect();
    for rec in &recs {
        store.append(rec).unwrap();
    }
    let stats = store.stats();
    assert!(stats.segments > 5, "{stats:?}");
    assert_eq!(segment_files(&vfs).len() as u64, stats.segments);
    assert_eq!(replayed(&store), recs);
    // Every sealed segment got a hint; the active one has none.
    let hints = vfs.list_files(Path::new(DIR)).unwrap().into_iter().filter(|f| f.ends_with(".hint")).count();
    assert_eq!(hints as u64, stats.segments - 1);
    store.sync().unwrap();
    drop(store);
    let (store, report) = open(&vfs);
    assert_eq!(replayed(&store), recs);
    assert!(report.segments[..report.segments.len() - 1].iter().all(|s| s.from_hint), "{report:?}");
    assert_eq!(value(&store, "k3"), Some(Some(Bytes::from_static(b"0123456789"))));
    assert_eq!(store.stats().live_keys, 4);
}

#[test]
fn dead_bytes_count_superseded_records() {
    let (mut store, _) = open(&SimVfs::new());
    let a1 = put(1, "a", "first");
    store.append(&a1).unwrap();
    assert_eq!(store.stats().dead_bytes, 0);
    store.append(&put(2, "a", "second")).unwrap();
    assert_eq!(store.stats().dead_bytes, a1.encoded_len() as u64);
    let skip = meta(3, "a", Body::Skip);
    store.append(&skip).unwrap();
    let ack = meta(3, "", Body::AckMark);
    store.append(&ack).unwrap();
    store.append(&meta(4, "", Body::AckMark)).unwrap();
    let dead = (a1.encoded_len() + skip.encoded_len() + ack.encoded_len()) as u64;
    assert_eq!(store.stats().dead_bytes, dead);
    assert_eq!(store.stats().live_bytes(), store.stats().log_bytes - dead);
}

#[test]
fn invalid_options_are_refused() {
    let vfs: Arc<dyn Vfs> = Arc::new(SimVfs::new());
    let bad = [
        LogOptions { segment_bytes: 0, ..LogOptions::default() },
        LogOptions { segment_bytes: 2 << 30, ..LogOptions::default() },
        LogOptions {
            compaction: CompactionOptions { dead_ratio: 0.0, ..CompactionOptions::default() },
            ..LogOptions::default()
        },
        LogOptions {
            compaction: CompactionOptions { slice_bytes: 0, ..CompactionOptions::default() },
            ..LogOptions::default()
        },
    ];
    for opts in bad {
        assert!(LogStore::open_with(Arc::clone(&vfs), Path::new(DIR), opts).is_err(), "{opts:?}");
    }
}

fn open_buffered(vfs: &SimVfs) -> LogStore {
    let opts = LogOptions { write_buffer_bytes: 64 << 10, ..LogOptions::default() };
    LogStore::open_with(Arc::new(vfs.clone()), Path::new(DIR), opts).unwrap().0
}

fn buffered_puts(store: &mut LogStore, seqs: std::ops::Range<u64>) -> Vec<Record> {
    let recs: Vec<Record> = seqs.map(|n| put(n, &format!("k{n}"), &format!("v{n}"))).collect();
    for r in &recs {
        store.append(r).unwrap();
    }
    recs
}

#[test]
fn every_read_path_sees_buffered_appends() {
    let vfs = SimVfs::new();
    let mut store = open_buffered(&vfs);
    let recs = buffered_puts(&mut store, 1..20);
    assert_eq!(vfs.unsynced_bytes(), 0, "nothing has reached the OS yet");
    assert_eq!(value(&store, "k7"), Some(Some(Bytes::from("v7"))));
    assert_eq!(replayed(&store), recs);
    assert_eq!(store.read_log(LogPos::START, usize::MAX).unwrap(), (recs.clone(), store.end_pos()));
    let mut scanned = 0;
    store.scan_range(0, 0, &mut |_, _| scanned += 1).unwrap();
    assert_eq!(scanned, recs.len());
    store.flush().unwrap();
    assert_eq!(vfs.unsynced_bytes(), store.stats().log_bytes, "a flush hands the OS everything, unsynced");
}

#[test]
fn a_process_crash_loses_only_what_was_not_flushed() {
    let vfs = SimVfs::new();
    let mut store = open_buffered(&vfs);
    let flushed = buffered_puts(&mut store, 1..10);
    store.flush().unwrap();
    buffered_puts(&mut store, 10..20);
    // A killed process runs no destructors: the buffer dies with it, the page cache does not.
    std::mem::forget(store);
    let (store, _) = open(&vfs);
    assert_eq!(replayed(&store), flushed);
    assert_eq!(value(&store, "k12"), None);
}

#[test]
fn power_loss_before_a_flush_recovers_the_synced_prefix() {
    let vfs = SimVfs::new();
    let mut store = open_buffered(&vfs);
    let synced = buffered_puts(&mut store, 1..10);
    store.sync().unwrap();
    buffered_puts(&mut store, 10..20);
    drop(store);
    vfs.crash(9);
    let (mut store, _) = open(&vfs);
    assert_eq!(replayed(&store), synced);
    assert_eq!(value(&store, "k15"), None);
    let later = put(30, "k15", "again");
    store.append(&later).unwrap();
    assert_eq!(value(&store, "k15"), Some(Some(Bytes::from("again"))));
}

#[test]
fn a_sync_job_run_after_later_appends_makes_its_own_records_durable() {
    for entropy in 0..20 {
        let vfs = SimVfs::new();
        let mut store = open_buffered(&vfs);
        let covered = buffered_puts(&mut store, 1..10);
        let job = store.begin_sync().unwrap().expect("the appends owe an fsync");
        let later = buffered_puts(&mut store, 10..20);
        assert!(store.begin_sync().unwrap().is_some(), "the later appends owe one of their own");
        job().unwrap();
        store.end_sync();
        drop(store);
        vfs.crash(entropy);
        let recovered = replayed(&open(&vfs).0);
        assert!(recovered.starts_with(&covered), "{entropy}: lost a record the job covered");
        assert!(later.starts_with(&recovered[covered.len()..]), "{entropy}: recovered what was never written");
    }
}

#[test]
fn a_full_disk_keeps_buffered_records_until_space_returns() {
    let vfs = SimVfs::new();
    let mut store = open_buffered(&vfs);
    let recs = buffered_puts(&mut store, 1..10);
    vfs.set_capacity(Some(vfs.used_bytes() + 8));
    assert!(matches!(store.flush(), Err(StoreError::Full(_))));
    assert!(matches!(store.sync(), Err(StoreError::Full(_))));
    assert_eq!(replayed(&store), recs, "still readable, and not fenced");
    vfs.set_capacity(None);
    store.sync().unwrap();
    drop(store);
    vfs.crash(3);
    assert_eq!(replayed(&open(&vfs).0), recs);
}

fn drop_range(start_exclusive: u64, end_inclusive: u64) -> Record {
    Record { chain: 3, seq: 0, key: Bytes::new(), body: Body::DropRange { start_exclusive, end_inclusive } }
}

fn scanned_keys(store: &LogStore) -> Vec<Bytes> {
    let mut keys = Vec::new();
    store.scan_range(0, 0, &mut |k, _| keys.push(k)).unwrap();
    keys.sort();
    keys
}

#[test]
fn a_drop_cuts_exactly_at_its_ends() {
    let (mut store, _) = open(&SimVfs::new());
    let keys: Vec<String> = (0..50).map(|i| format!("key{i}")).collect();
    for (i, k) in keys.iter().enumerate() {
        store.append(&put(i as u64, k, "v")).unwrap();
    }
    let token = |k: &str| meridian_core::ring::key_token(k.as_bytes());
    // Ends one token either side of a key's: its index prefix straddles the end, so the key is read.
    let (first, second) = (token(&keys[0]), token(&keys[1]));
    store.append(&drop_range(first, first.wrapping_add(1))).unwrap();
    store.append(&drop_range(second.wrapping_sub(1), second)).unwrap();
    assert_eq!(value(&store, &keys[0]), Some(Some(Bytes::from_static(b"v"))), "the start is exclusive");
    assert_eq!(value(&store, &keys[1]), None, "the end is inclusive");
    assert_eq!(store.stats().live_keys, 49);
    assert_eq!(scanned_keys(&store).len(), 49);
}

#[test]
fn dropping_the_whole_ring_reads_no_record() {
    let vfs = SimVfs::new();
    let mut store = open_small(&vfs, 200);
    for i in 0..40 {
        store.append(&put(i, &format!("k{i}"), "0123456789")).unwrap();
    }
    store.sync().unwrap();
    let reads =
        |vfs: &SimVfs| -> u64 { segment_files(vfs).iter().map(|f| vfs.read_bytes(&Path::new(DIR).join(f))).sum() };
    let before = reads(&vfs);
    store.append(&drop_range(9, 9)).unwrap();
    assert_eq!(reads(&vfs), before, "every index prefix lies in the whole ring");
    assert!(scanned_keys(&store).is_empty());
    let stats = store.stats();
    assert_eq!((stats.live_keys, stats.records), (0, 41));
    assert_eq!(stats.live_bytes(), drop_range(9, 9).encoded_len() as u64, "only the marker is live");
    store.append(&put(50, "k3", "back")).unwrap();
    assert_eq!(scanned_keys(&store), [Bytes::from_static(b"k3")]);
    store.sync().unwrap();
    drop(store);
    let (store, _) = open(&vfs);
    assert_eq!(scanned_keys(&store), [Bytes::from_static(b"k3")]);
    // The sync may have compacted the dropped records away, never the marker.
    let log = replayed(&store);
    assert_eq!(log[log.len() - 2..], [drop_range(9, 9), put(50, "k3", "back")]);
}

#[test]
fn a_drop_forgets_its_chains_watermark_only() {
    let (mut store, _) = open(&SimVfs::new());
    let other = Record { chain: 4, ..meta(9, "", Body::AckMark) };
    store.append(&meta(5, "", Body::AckMark)).unwrap();
    store.append(&other).unwrap();
    store.append(&drop_range(1, 1)).unwrap();
    assert_eq!(store.acks.keys().collect::<Vec<_>>(), [&4]);
    assert_eq!(store.stats().live_bytes(), (other.encoded_len() + drop_range(1, 1).encoded_len()) as u64);
}

/// Bytes read from the segment files so far.
fn segment_reads(vfs: &SimVfs) -> u64 {
    segment_files(vfs).iter().map(|f| vfs.read_bytes(&Path::new(DIR).join(f))).sum()
}

#[test]
fn an_append_after_an_existence_check_of_its_key_does_not_read_the_record_again() {
    let vfs = SimVfs::new();
    let (mut store, _) = open(&vfs);
    for n in 1..10 {
        store.append(&put(n, &format!("k{n}"), "old")).unwrap();
    }
    store.sync().unwrap();
    let before = segment_reads(&vfs);
    store.append(&put(10, "k5", "unchecked")).unwrap();
    let one_lookup = segment_reads(&vfs) - before;
    assert!(one_lookup > 0, "an append reads the key's record to confirm the key");
    store.sync().unwrap();

    let before = segment_reads(&vfs);
    assert!(store.has_value(b"k5").unwrap());
    let checked = segment_reads(&vfs);
    assert!(checked > before, "the check reads the record");
    store.append(&put(11, "k5", "checked")).unwrap();
    assert_eq!(segment_reads(&vfs), checked, "the append after it does not");
    assert_eq!(value(&store, "k5"), Some(Some(Bytes::from("checked"))));
    assert_eq!(store.stats().live_keys, 9);
}

/// What the check found is used only by the next record appended, only for its key, and never after
/// compaction has moved entries: otherwise the key gets a second entry or replaces another key's.
#[test]
fn an_existence_check_is_forgotten_by_any_other_record_and_by_compaction() {
    let vfs = SimVfs::new();
    let compaction = CompactionOptions { dead_ratio: 0.3, slice_bytes: 150, min_segments: 1, pace: 0 };
    let opts = LogOptions { segment_bytes: 256, compaction, ..LogOptions::default() };
    let reopen = || LogStore::open_with(Arc::new(vfs.clone()), Path::new(DIR), opts).unwrap().0;
    let mut store = reopen();
    for n in 1..40 {
        store.append(&put(n, &format!("k{}", n % 8), &format!("v{n}"))).unwrap();
    }
    assert!(store.has_value(b"k3").unwrap());
    store.append(&put(40, "k4", "other key")).unwrap();
    store.append(&put(41, "k3", "after another record")).unwrap();
    assert!(store.has_value(b"k6").unwrap());
    for _ in 0..200 {
        store.sync().unwrap();
    }
    assert!(store.compaction_progress().passes_completed > 0, "{:?}", store.compaction_progress());
    store.append(&put(42, "k6", "after compaction")).unwrap();
    assert!(store.has_value(b"k2").unwrap());
    store.append(&Record { chain: 3, seq: 43, key: Bytes::from("k2"), body: Body::Tombstone }).unwrap();
    assert!(!store.has_value(b"k2").unwrap());
    store.append(&put(44, "k2", "back")).unwrap();

    let expect = |store: &LogStore| {
        assert_eq!(value(store, "k3"), Some(Some(Bytes::from("after another record"))));
        assert_eq!(value(store, "k4"), Some(Some(Bytes::from("other key"))));
        assert_eq!(value(store, "k6"), Some(Some(Bytes::from("after compaction"))));
        assert_eq!(value(store, "k2"), Some(Some(Bytes::from("back"))));
        assert_eq!(store.stats().live_keys, 8);
    };
    expect(&store);
    store.sync().unwrap();
    drop(store);
    expect(&reopen());
}

#[test]
fn append_tells_whether_the_key_had_a_value() {
    crate::datastore::check_append_existed(&mut open(&SimVfs::new()).0);
}

/// With group commit pipelined, a compaction slice runs in `end_sync` while records appended after the sync
/// began are not yet durable: it must not treat a record that only they supersede, or that only a range drop
/// among them takes, as gone (in what it copies or in the output's hint), or a power loss takes both.
#[test]
fn compaction_keeps_what_only_unsynced_records_supersede_or_drop() {
    let later: [&dyn Fn(&mut LogStore); 2] = [&|store| store.append(&put(60, "key", "unsynced")).unwrap(), &|store| {
        store.append(&drop_range(7, 7)).unwrap()
    }];
    for (case, append_later) in later.iter().enumerate() {
        for entropy in 0..8 {
            let vfs = SimVfs::new();
            let compaction = CompactionOptions { dead_ratio: 0.3, slice_bytes: 1 << 20, min_segments: 1, pace: 0 };
            let opts = LogOptions { segment_bytes: 256, compaction, ..LogOptions::default() };
            let reopen = || LogStore::open_with(Arc::new(vfs.clone()), Path::new(DIR), opts).unwrap().0;
            let mut store = reopen();
            // The first segments: the key, then fillers that are all overwritten later, so they are mostly dead.
            store.append(&put(1, "key", "old")).unwrap();
            for n in 2..60 {
                store.append(&put(n, &format!("f{}", n % 10), &format!("v{n}"))).unwrap();
            }
            store.append(&meta(59, "", Body::AckMark)).unwrap();
            store.sync_active().unwrap();
            let job = store.begin_sync().unwrap();
            append_later(&mut store);
            if let Some(job) = job {
                job().unwrap();
            }
            for _ in 0..20 {
                store.end_sync();
            }
            assert!(store.compaction_progress().passes_completed > 0, "{:?}", store.compaction_progress());
            drop(store);
            vfs.crash(entropy);
            let got = value(&reopen(), "key");
            let fine = |v: &Bytes| v == "old" || (case == 0 && v == "unsynced");
            assert!(matches!(&got, Some(Some(v)) if fine(v)), "case {case}, {entropy}: the key holds {got:?}");
        }
    }
}

/// A store compacting at pace 2, with slices of `slice_bytes` and segments of `segment_bytes`.
fn paced(vfs: &SimVfs, slice_bytes: u64, segment_bytes: u64) -> LogStore {
    let compaction = CompactionOptions { dead_ratio: 0.3, slice_bytes, min_segments: 1, pace: 2 };
    let opts = LogOptions { segment_bytes, compaction, ..LogOptions::default() };
    LogStore::open_with(Arc::new(vfs.clone()), Path::new(DIR), opts).unwrap().0
}

/// Appends `records` puts of 200 B over 20 keys after `seq`, then an ack mark covering them (so all but each
/// key's latest are garbage); returns the last seq.
fn overwrite(store: &mut LogStore, seq: u64, records: u64) -> u64 {
    let value = "x".repeat(200);
    for seq in seq + 1..=seq + records {
        store.append(&put(seq, &format!("k{}", seq % 20), &value)).unwrap();
    }
    store.append(&meta(seq + records, "", Body::AckMark)).unwrap();
    seq + records
}

/// A sync's compaction stops once it has freed `pace` times what was appended since the previous one (having
/// read a few KiB at least), so old garbage is not compacted at the writes' expense; and a pass still ends on
/// syncs with nothing appended.
#[test]
fn compaction_keeps_pace_with_appends() {
    let mut store = paced(&SimVfs::new(), 1 << 20, 64 << 10);
    let mut seq = overwrite(&mut store, 0, 1500);
    let garbage = store.stats().log_bytes;
    // What was written so far earns the first slice a whole pass; the next one starts another.
    store.sync().unwrap();
    assert_eq!(store.compaction_progress().passes_completed, 1);
    let progress = |store: &LogStore| store.compaction_progress().pass.map(|p| (p.read_bytes, p.written_bytes));
    let (record, floor) = (256, 4 << 10);
    store.sync().unwrap();
    let (read, _) = progress(&store).unwrap();
    assert!((floor..=floor + record).contains(&read), "an idle slice reads the floor: {read}");
    for records in [2, 40] {
        let (before, log_before) = (progress(&store).unwrap(), store.stats().log_bytes);
        seq = overwrite(&mut store, seq, records);
        let appended = store.stats().log_bytes - log_before;
        store.sync().unwrap();
        let after = progress(&store).expect("the pass goes on");
        let (read, freed) = (after.0 - before.0, (after.0 - before.0) - (after.1 - before.1));
        let summary = format!("{read} read and {freed} freed after {appended} appended");
        assert!(read >= floor && freed >= 2 * appended, "stopped early: {summary}");
        assert!(read < floor + record || freed < 2 * appended + record, "went on: {summary}");
    }
    for _ in 0..1000 {
        store.sync().unwrap();
    }
    let progress = store.compaction_progress();
    assert!(progress.pass.is_none() && progress.passes_completed > 2, "{progress:?}");
    assert!(store.stats().log_bytes < garbage / 4, "{} of {garbage} bytes left", store.stats().log_bytes);
}

/// A store that took no writes since the last `maintain_if_idle` compacts a whole slice in it, so garbage that
/// paced compaction leaves goes while no one writes; a write since the last call, or a sync under way, skips it.
#[test]
fn an_idle_store_compacts_when_maintained() {
    let mut store = paced(&SimVfs::new(), 16 << 10, 16 << 10);
    overwrite(&mut store, 0, 1500);
    let garbage = store.stats().log_bytes;
    let untouched = |store: &LogStore| store.compaction_progress() == CompactionProgress::default();
    store.maintain_if_idle();
    assert!(untouched(&store), "appended since the last call: {:?}", store.compaction_progress());
    let job = store.begin_sync().unwrap();
    store.maintain_if_idle();
    assert!(untouched(&store), "a sync under way: {:?}", store.compaction_progress());
    if let Some(job) = job {
        job().unwrap();
    }
    store.end_sync();
    for _ in 0..100 {
        store.maintain_if_idle();
    }
    let progress = store.compaction_progress();
    assert!(progress.passes_completed > 3 && progress.pass.is_none(), "{progress:?}");
    assert!(store.stats().log_bytes < garbage / 4, "{} of {garbage} bytes left", store.stats().log_bytes);
}
