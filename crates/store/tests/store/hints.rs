//! Hint files: with them a restart rebuilds the index without reading sealed segments; without them, or with
//! a damaged one, it scans and writes them again.

use std::path::PathBuf;

use meridian_store::{Datastore, LogOptions, Record, SimVfs, Vfs};

use crate::common::*;

fn small() -> LogOptions {
    opts(400, no_compaction())
}

/// Overwrites spread over several sealed segments, then fresh keys until a seal, so the active segment
/// supersedes nothing sealed. Returns the records and the sealed segment files.
fn build(vfs: &SimVfs) -> (Vec<Record>, Vec<PathBuf>) {
    let (mut store, _) = open(vfs, small());
    let mut recs: Vec<Record> = (1..=60).map(|s| put(1, s, &format!("key{}", s % 20), &format!("v{s}"))).collect();
    append_all(&mut store, &recs);
    let sealed_before = store.stats().segments;
    let mut seq = 60;
    while store.stats().segments == sealed_before {
        seq += 1;
        let rec = put(1, seq, &format!("fresh{seq}"), "new");
        store.append(&rec).unwrap();
        recs.push(rec);
    }
    store.sync().unwrap();
    let mut segments = files(vfs, ".seg");
    segments.pop();
    (recs, segments)
}

fn reads(vfs: &SimVfs, paths: &[PathBuf]) -> Vec<u64> {
    paths.iter().map(|p| vfs.read_bytes(p)).collect()
}

#[test]
fn with_hints_a_restart_reads_no_sealed_segment() {
    let vfs = SimVfs::new();
    let (recs, sealed) = build(&vfs);
    assert!(sealed.len() >= 3);

    let before = reads(&vfs, &sealed);
    let (store, report) = open(&vfs, small());
    assert_eq!(reads(&vfs, &sealed), before, "recovery read a sealed segment");
    assert!(report.segments[..sealed.len()].iter().all(|s| s.from_hint), "{report:?}");
    assert_values(&store, &model(&recs));
    let stats = store.stats();
    drop(store);

    for hint in files(&vfs, ".hint") {
        vfs.remove_file(&hint).unwrap();
    }
    let before = reads(&vfs, &sealed);
    let (store, report) = open(&vfs, small());
    assert!(reads(&vfs, &sealed).iter().zip(&before).all(|(after, before)| after > before));
    assert!(report.segments.iter().all(|s| !s.from_hint));
    assert_eq!(store.stats(), stats, "a scan and the hints must agree on every count");
    drop(store);

    // That open wrote the hints again.
    assert_eq!(files(&vfs, ".hint").len(), sealed.len());
    let before = reads(&vfs, &sealed);
    open(&vfs, small());
    assert_eq!(reads(&vfs, &sealed), before);
}

#[test]
fn a_damaged_hint_falls_back_to_scanning() {
    let vfs = SimVfs::new();
    let (recs, _) = build(&vfs);
    let hint = files(&vfs, ".hint")[1].clone();
    let mut bytes = read_file(&vfs, &hint);
    bytes[20] ^= 1;
    write_file(&vfs, &hint, &bytes);
    let (store, report) = open(&vfs, small());
    let seg = &report.segments[1];
    assert!(!seg.from_hint && seg.note.as_deref().is_some_and(|n| n.contains("hint not used")), "{seg:?}");
    assert_values(&store, &model(&recs));
    assert_eq!(replayed(&store), recs);
}

#[test]
fn a_rewritten_hint_never_outlives_the_records_it_relies_on() {
    for entropy in 0..50 {
        let vfs = SimVfs::new();
        let (mut store, _) = open(&vfs, small());
        let first = put(1, 1, "k", "first");
        store.append(&first).unwrap();
        let mut seq = 1;
        while store.stats().segments == 1 {
            seq += 1;
            store.append(&put(1, seq, &format!("fill{seq}"), "filler")).unwrap();
        }
        // Supersede `k` in the active segment without syncing, then stop the process (the page cache keeps
        // the write) and lose the first segment's hint, so the next open scans it and writes a new one.
        let second = put(1, seq + 1, "k", "second");
        store.append(&second).unwrap();
        drop(store);
        vfs.remove_file(&files(&vfs, ".hint")[0]).unwrap();
        drop(open(&vfs, small()));
        vfs.crash(entropy);
        let (store, _) = open(&vfs, small());
        let got = store.get(b"k").unwrap().and_then(|e| e.value);
        assert!([first.entry(), second.entry()].iter().any(|e| e.clone().unwrap().value == got), "{got:?}");
    }
}
