//! Disk faults beyond crashes: flipped bits on read are caught by checksums and never cost good records; a
//! full disk is a clear, recoverable error; other write failures fence the store.

use std::io;

use meridian_store::{Body, Datastore, LogOptions, Record, SimVfs, StoreError};

use crate::common::*;

/// Unbuffered, so every append reaches the (simulated) disk at once and faults and crashes can strike at any
/// record; the write buffer's own crash and full-disk behaviour is tested beside it in the crate.
/// No space reserved ahead of the data, so reopening changes no file's size (`recovery.rs` tests reservations).
fn small() -> LogOptions {
    LogOptions { write_buffer_bytes: 0, preallocate_bytes: 0, ..opts(500, no_compaction()) }
}

/// Segment sizes: a restart may rewrite hints, but must never cut a segment it could not read.
fn segment_sizes(vfs: &SimVfs) -> Vec<usize> {
    files(vfs, ".seg").iter().map(|f| read_file(vfs, f).len()).collect()
}

#[test]
fn flipped_reads_are_caught_and_never_returned_or_truncated() {
    let vfs = SimVfs::new();
    let recs = workload(3, 40, 8);
    let (mut store, _) = open(&vfs, small());
    append_all(&mut store, &recs);
    store.sync().unwrap();
    let want = model(&recs);

    vfs.set_read_flips(1.0, 7);
    for key in want.keys() {
        assert!(matches!(store.get(key), Err(StoreError::Corrupt { .. })), "{key:?}");
    }
    assert!(matches!(store.replay(&mut |_| ()), Err(StoreError::Corrupt { .. })));
    drop(store);
    let sizes = segment_sizes(&vfs);
    // Every read flipped: the open refuses rather than cutting good records off.
    assert!(matches!(try_open(&vfs, small()), Err(StoreError::Corrupt { .. })));
    assert_eq!(segment_sizes(&vfs), sizes);

    // Occasional flips are outlived by re-reads.
    let mut opened = 0;
    for seed in 0..50 {
        vfs.set_read_flips(0.2, seed);
        let result = try_open(&vfs, small());
        vfs.set_read_flips(0.0, 0);
        match result {
            Ok((store, report)) => {
                assert_eq!(report.dropped_bytes, 0, "seed {seed}: {report:?}");
                assert_eq!(replayed(&store), recs);
                assert_values(&store, &want);
                opened += 1;
            }
            Err(e) => assert!(matches!(e, StoreError::Corrupt { .. }), "{e}"),
        }
        assert_eq!(segment_sizes(&vfs), sizes, "seed {seed}");
    }
    assert!(opened >= 40, "only {opened} of 50 opens got past the flips");
}

#[test]
fn a_full_disk_is_a_clear_error_and_writes_resume_when_space_frees() {
    let vfs = SimVfs::new();
    let recs = workload(4, 120, 8);
    let (mut store, _) = open(&vfs, small());
    append_all(&mut store, &recs[..20]);
    store.sync().unwrap();
    vfs.set_capacity(Some(vfs.used_bytes() + 700));
    let mut written = recs[..20].to_vec();
    let mut refused = 0;
    for rec in &recs[20..60] {
        match store.append(rec) {
            Ok(()) => written.push(rec.clone()),
            Err(StoreError::Full(e)) => {
                assert_eq!(e.kind(), io::ErrorKind::StorageFull);
                refused += 1;
            }
            Err(e) => panic!("expected a full disk, got {e}"),
        }
        assert_values(&store, &model(&written));
    }
    assert!(refused > 10 && written.len() > 20, "{refused} refused, {} written", written.len());
    store.sync().unwrap();
    assert_eq!(replayed(&store), written);

    vfs.set_capacity(None);
    append_all(&mut store, &recs[60..]);
    written.extend_from_slice(&recs[60..]);
    store.sync().unwrap();
    drop(store);
    let (store, report) = open(&vfs, small());
    assert_eq!(report.dropped_bytes, 0);
    assert_eq!(replayed(&store), written);
}

#[test]
fn a_full_disk_abandons_compaction_and_leaves_the_log_alone() {
    let vfs = SimVfs::new();
    // Without range drops nothing is reclaimable before the ack mark, so a pass needs as much room as its input.
    let recs: Vec<Record> =
        workload(6, 80, 4).into_iter().filter(|r| !matches!(r.body, Body::DropRange { .. })).collect();
    let (mut store, _) = open(&vfs, small());
    append_all(&mut store, &recs);
    store.sync().unwrap();
    drop(store);
    let compacting = opts(500, eager_compaction(1 << 20));
    let (mut store, _) = open(&vfs, compacting);
    vfs.set_capacity(Some(vfs.used_bytes() + 100));
    for _ in 0..20 {
        store.sync().unwrap();
    }
    let progress = store.compaction_progress();
    assert!(progress.passes_abandoned >= 1 && progress.passes_completed == 0, "{progress:?}");
    assert!(progress.last_error.as_deref().is_some_and(|e| e.contains("full")), "{progress:?}");
    assert!(files(&vfs, ".tmp").is_empty());
    assert_eq!(replayed(&store), recs);

    vfs.set_capacity(None);
    store.append(&ack(1, 80)).unwrap();
    compact_fully(&mut store);
    assert!(store.compaction_progress().passes_completed >= 1);
    assert_values(&store, &model(&recs));
}

#[test]
fn a_failed_write_other_than_a_full_disk_fences_the_store() {
    let vfs = SimVfs::new();
    let (mut store, _) = open(&vfs, small());
    let recs = workload(8, 3, 2);
    store.append(&recs[0]).unwrap();
    vfs.cut_power_after(Some(0));
    assert!(matches!(store.append(&recs[1]), Err(StoreError::Io(_))));
    vfs.cut_power_after(None);
    assert!(matches!(store.append(&recs[2]), Err(StoreError::Io(_))));
    assert!(matches!(store.sync(), Err(StoreError::Io(_))));
    assert_values(&store, &model(&recs[..1]));
}
