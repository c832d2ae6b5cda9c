//! Range drops: every store takes the range out at once; a log store recovers the same index from scans and
//! from hints, forgets a drop lost with an unsynced tail, and compaction reclaims what a drop took out while
//! keeping the marker, the records after it, and the chain's watermark in its place.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use meridian_core::ring::key_token;
use meridian_store::hint::{self, Hint};
use meridian_store::{
    merge_into, ring_range_contains, split_range, BatchOptions, Body, BufferedStore, Datastore, Entry, LogOptions,
    LogPos, LogStore, MemStore, Record, SimVfs, StoreStats, Vfs,
};

use crate::common::*;

/// A third of the ring that wraps past `u64::MAX`.
const START: u64 = u64::MAX / 3 * 2;
const END: u64 = u64::MAX / 3;

fn in_range(key: &[u8]) -> bool {
    ring_range_contains(START, END, key_token(key))
}

fn is_drop(rec: &Record) -> bool {
    matches!(rec.body, Body::DropRange { .. })
}

/// Puts to `keys` keys of `chain` with seqs from `first_seq`, every fifth key deleted again, then an ack mark.
fn puts(chain: u32, first_seq: u64, keys: u64, tag: &str) -> Vec<Record> {
    let mut seq = first_seq;
    let mut recs = Vec::new();
    for k in 0..keys {
        recs.push(put(chain, seq, &format!("k{k}"), &format!("{tag}{seq}")));
        seq += 1;
        if k % 5 == 0 {
            recs.push(meta(chain, seq, &format!("k{k}"), Body::Tombstone));
            seq += 1;
        }
    }
    recs.push(meta(chain, seq, "", Body::Skip));
    recs.push(ack(chain, seq));
    recs
}

fn scanned(store: &dyn Datastore, start: u64, end: u64) -> BTreeMap<Bytes, Entry> {
    let mut out = BTreeMap::new();
    store.scan_range(start, end, &mut |k, e| assert!(out.insert(k, e).is_none(), "a key came twice")).unwrap();
    out
}

/// What a store's index holds, and its counts. Not the index's capacity, which depends on how many keys were
/// indexed at once before a drop took some out; nor the compactions since the store was opened.
fn snapshot(store: &dyn Datastore) -> (BTreeMap<Bytes, Entry>, StoreStats) {
    (scanned(store, 0, 0), StoreStats { index_bytes: 0, compactions: 0, ..store.stats() })
}

fn buffered(vfs: &SimVfs) -> BufferedStore {
    let batch = BatchOptions { batch_bytes: 1 << 20, batch_records: 16 };
    BufferedStore::open(Arc::new(vfs.clone()), Path::new(DIR), opts(700, no_compaction()), batch).unwrap().0
}

#[test]
fn every_store_drops_a_range_and_keeps_what_is_written_after() {
    let (log_vfs, buffered_vfs) = (SimVfs::new(), SimVfs::new());
    let stores: [Box<dyn Datastore>; 3] = [
        Box::new(MemStore::new()),
        Box::new(open(&log_vfs, opts(700, no_compaction())).0),
        Box::new(buffered(&buffered_vfs)),
    ];
    for mut store in stores {
        let mut recs = puts(1, 1, 120, "v");
        append_all(&mut *store, &recs);
        let before = scanned(&*store, 0, 0);
        let doomed = before.keys().filter(|k| in_range(k)).count();
        assert!(doomed > 20 && doomed < before.len() - 20, "{doomed} of {}", before.len());

        let marker = drop_range(1, START, END);
        store.append(&marker).unwrap();
        recs.push(marker);
        for key in before.keys() {
            // Absent, not deleted: a dropped key has no entry at all.
            let want = if in_range(key) { None } else { before.get(key).cloned() };
            assert_eq!(store.get(key).unwrap(), want, "{key:?}");
        }
        assert!(scanned(&*store, START, END).is_empty());
        assert_eq!(scanned(&*store, 0, 0).len(), before.len() - doomed);
        let live = |m: &BTreeMap<Bytes, Entry>| m.values().filter(|e| e.value.is_some()).count() as u64;
        assert_eq!(store.stats().live_keys, live(&model(&recs)));

        // Writes after the drop, to keys in the range and out of it, are live as usual.
        let later = puts(1, 1000, 30, "after");
        append_all(&mut *store, &later);
        recs.extend(later);
        assert_model(&*store, &recs);
        assert_eq!(scanned(&*store, 0, 0), model(&recs));
        assert_eq!(store.stats().live_keys, live(&model(&recs)));
        store.sync().unwrap();
        if store.durability() != meridian_store::Durability::Volatile {
            assert_eq!(replayed(&*store), recs, "the marker is replayed in its place");
        }
    }
}

#[test]
fn dead_bytes_count_what_a_drop_takes_out_and_never_the_marker() {
    let vfs = SimVfs::new();
    let (mut store, _) = open(&vfs, opts(700, no_compaction()));
    let chain1 = puts(1, 1, 60, "v");
    let watermark = chain1.last().unwrap().encoded_len() as u64;
    // Chain 2 overwrites a few of the keys: a drop takes keys by their token, whoever wrote them.
    let all: Vec<Record> = chain1.into_iter().chain(puts(2, 1, 3, "other")).collect();
    append_all(&mut store, &all);
    let dead = store.stats().dead_bytes;
    let latest = model(&all);
    let taken: u64 = all
        .iter()
        .filter(|r| r.entry().is_some() && in_range(&r.key) && latest.get(&r.key) == r.entry().as_ref())
        .map(|r| r.encoded_len() as u64)
        .sum();
    store.append(&drop_range(1, START, END)).unwrap();
    assert_eq!(store.stats().dead_bytes, dead + taken + watermark, "chain 2's watermark stays live");
}

/// A multi-segment log whose drops fall before, between and after records of the same sealed segment, with
/// keys written again after each drop, and chain 1's watermark forgotten by the last drop. Returns what was
/// appended.
fn log_with_drops(store: &mut dyn Datastore) -> Vec<Record> {
    let mut recs = puts(1, 1, 40, "a");
    recs.push(drop_range(1, START, END));
    recs.extend(puts(2, 1, 10, "b"));
    recs.extend(puts(1, 100, 25, "c"));
    recs.push(drop_range(1, END, START));
    recs.extend(puts(1, 200, 8, "d"));
    recs.push(drop_range(3, 0, u64::MAX / 8));
    recs.extend(puts(2, 100, 12, "e"));
    append_all(store, &recs);
    store.sync().unwrap();
    recs
}

fn reopen(vfs: &SimVfs, opts: LogOptions) -> LogStore {
    open(vfs, opts).0
}

#[test]
fn recovery_from_hints_and_from_scans_builds_the_same_index() {
    let vfs = SimVfs::new();
    let small = opts(700, no_compaction());
    let (mut store, _) = open(&vfs, small);
    let recs = log_with_drops(&mut store);
    let want = snapshot(&store);
    assert_eq!(want.0, model(&recs));
    drop(store);
    // Some sealed segment has a drop with entries after it, which loading its hint must not take out.
    let hints: Vec<Hint> = files(&vfs, ".hint").iter().map(|f| hint::decode(&read_file(&vfs, f)).unwrap()).collect();
    let mid_segment = |h: &Hint| h.drops.iter().any(|d| h.entries.iter().any(|e| e.offset > d.offset));
    assert!(hints.iter().any(mid_segment), "{hints:?}");

    let (store, report) = open(&vfs, small);
    assert!(report.segments.len() > 4 && report.segments.iter().rev().skip(1).all(|s| s.from_hint), "{report:?}");
    assert_eq!(snapshot(&store), want);
    assert_model(&store, &recs);
    drop(store);

    for hint in files(&vfs, ".hint") {
        vfs.remove_file(&hint).unwrap();
    }
    let (store, report) = open(&vfs, small);
    assert!(report.segments.iter().all(|s| !s.from_hint));
    assert_eq!(snapshot(&store), want, "a scan and the hints must agree on the index and every count");
    assert_eq!(replayed(&store), recs);
    drop(store);
    assert_eq!(snapshot(&reopen(&vfs, small)), want, "the rewritten hints agree too");
}

#[test]
fn a_drop_lost_with_an_unsynced_tail_did_not_happen() {
    let unbuffered = LogOptions { write_buffer_bytes: 0, ..opts(700, no_compaction()) };
    let (mut kept, mut lost) = (0, 0);
    for entropy in 0..60 {
        let vfs = SimVfs::new();
        let (mut store, _) = open(&vfs, unbuffered);
        let recs = puts(1, 1, 30, "v");
        append_all(&mut store, &recs);
        store.sync().unwrap();
        store.append(&drop_range(1, START, END)).unwrap();
        drop(store);
        vfs.crash(entropy);
        let store = reopen(&vfs, unbuffered);
        let log = replayed(&store);
        let survived = log.len() > recs.len();
        assert_eq!(log[..recs.len()], recs);
        let mut with_drop = recs.clone();
        with_drop.push(drop_range(1, START, END));
        assert_model(&store, if survived { &with_drop } else { &recs });
        assert_eq!(scanned(&store, 0, 0), model(if survived { &with_drop } else { &recs }));
        (kept, lost) = (kept + u32::from(survived), lost + u32::from(!survived));
    }
    assert!(kept > 0 && lost > 0, "kept {kept}, lost {lost}");

    // A drop still in the write buffer is lost with the process, even without a power cut.
    let vfs = SimVfs::new();
    let (mut store, _) = open(&vfs, opts(700, no_compaction()));
    let recs = puts(1, 1, 30, "v");
    append_all(&mut store, &recs);
    store.sync().unwrap();
    store.append(&drop_range(1, 7, 7)).unwrap();
    std::mem::forget(store);
    let store = reopen(&vfs, opts(700, no_compaction()));
    assert_eq!(replayed(&store), recs);
    assert_model(&store, &recs);
}

#[test]
fn compaction_reclaims_a_dropped_range_without_a_watermark() {
    let vfs = SimVfs::new();
    let compacting = opts(600, eager_compaction(1 << 20));
    let (mut store, _) = open(&vfs, compacting);
    // Chain 1 never acknowledges anything, so only the drop can make its superseded records go.
    let mut recs: Vec<Record> =
        (1..=300).map(|s| put(1, s, &format!("k{}", s % 40), &format!("value{s:03}"))).collect();
    append_all(&mut store, &recs);
    store.sync().unwrap();
    let before = store.stats();
    let marker = drop_range(1, 9, 9);
    // Enough after the drop to seal the segment holding chain 1's last records.
    let later: Vec<Record> = (1..=40).map(|s| put(2, s, &format!("k{s}"), "later")).collect();
    store.append(&marker).unwrap();
    append_all(&mut store, &later);
    recs.push(marker.clone());
    recs.extend(later.iter().cloned());
    assert!(store.stats().dead_bytes > before.log_bytes * 9 / 10, "{:?}", store.stats());
    compact_fully(&mut store);

    let after = store.stats();
    let kept_bytes: u64 = later.iter().chain([&marker]).map(|r| r.encoded_len() as u64).sum();
    assert!(after.compactions > 0 && after.log_bytes < before.log_bytes / 4, "{before:?} -> {after:?}");
    assert!(after.log_bytes <= 2 * kept_bytes, "{after:?}, {kept_bytes} bytes still needed");
    let log = replayed(&store);
    assert_eq!(log.iter().filter(|r| is_drop(r)).collect::<Vec<_>>(), [&marker], "the marker is kept");
    assert!(log.iter().all(|r| r.chain == 2 || is_drop(r)), "chain 1's records before the drop are gone");
    assert!(later.iter().all(|r| log.contains(r)));
    assert_eq!(snapshot(&store).0, model(&recs));
    let want = snapshot(&store);
    drop_store_and_compare(&vfs, store, compacting, &want, &recs);
}

#[test]
fn a_drop_ends_its_chains_run_so_the_chains_superseded_records_go_too() {
    let vfs = SimVfs::new();
    let compacting = opts(400, eager_compaction(1 << 20));
    let (mut store, _) = open(&vfs, compacting);
    // Chain 1 overwrites one key outside the range it then drops, without ever acknowledging anything.
    let key = (0..).map(|i| format!("out{i}")).find(|k| !in_range(k.as_bytes())).unwrap();
    let mut recs: Vec<Record> = (1..=60).map(|s| put(1, s, &key, &format!("version{s:02}"))).collect();
    recs.push(drop_range(1, START, END));
    recs.extend((1..=40).map(|s| put(2, s, &format!("z{s}"), "filler")));
    append_all(&mut store, &recs);
    compact_fully(&mut store);
    let log = replayed(&store);
    assert_eq!(log.iter().filter(|r| r.chain == 1).collect::<Vec<_>>(), [&recs[59], &recs[60]]);
    assert_model(&store, &recs);
}

/// Reopens from hints, then from scans, and checks both give `want` and `recs`' model.
fn drop_store_and_compare(
    vfs: &SimVfs,
    store: LogStore,
    opts: LogOptions,
    want: &(BTreeMap<Bytes, Entry>, StoreStats),
    recs: &[Record],
) {
    drop(store);
    assert_eq!(&snapshot(&reopen(vfs, opts)), want);
    for hint in files(vfs, ".hint") {
        vfs.remove_file(&hint).unwrap();
    }
    let store = reopen(vfs, opts);
    assert_eq!(&snapshot(&store), want);
    assert_model(&store, recs);
}

/// Replays `log` the way chain recovery does (docs/protocols/chain.md), from the chain's last range drop on:
/// an ack mark stands for everything up to it, and any other record must follow the last seq without a gap.
/// Returns the last seq reached.
fn chain_replay(log: &[Record], chain: u32) -> u64 {
    let from = log.iter().rposition(|r| r.chain == chain && is_drop(r)).map_or(0, |i| i + 1);
    let mut lu = 0;
    for rec in log[from..].iter().filter(|r| r.chain == chain) {
        match rec.body {
            Body::AckMark => lu = lu.max(rec.seq),
            _ if rec.seq == lu + 1 => lu += 1,
            _ => assert!(rec.seq <= lu, "chain {chain} jumps from {lu} to {}", rec.seq),
        }
    }
    lu
}

/// Chain 1 acknowledges everything, drops its whole range, starts over from seq 1 and acknowledges all but
/// its last few updates; chain 2 goes on beside it.
fn rejoined_history() -> Vec<Record> {
    let mut recs: Vec<Record> = (1..=40).map(|s| put(1, s, &format!("k{}", s % 8), &format!("old{s:02}"))).collect();
    recs.push(ack(1, 40));
    recs.extend((1..=10).map(|s| put(2, s, &format!("z{s}"), "chain2")));
    recs.push(drop_range(1, 3, 3));
    recs.extend((1..=60).map(|s| put(1, s, &format!("k{}", s % 8), &format!("new{s:02}"))));
    recs.push(ack(1, 55));
    recs.push(ack(2, 10));
    recs.extend((61..=70).map(|s| put(1, s, &format!("f{s}"), "filler-filler")));
    recs
}

#[test]
fn a_watermark_after_a_drop_is_restated_after_it() {
    let vfs = SimVfs::new();
    let compacting = opts(300, eager_compaction(1 << 20));
    let (mut store, _) = open(&vfs, compacting);
    let recs = rejoined_history();
    append_all(&mut store, &recs);
    compact_fully(&mut store);
    assert!(store.stats().compactions >= 2);

    let log = replayed(&store);
    let marker = log.iter().position(is_drop).expect("the marker is kept");
    assert!(log[..marker].iter().all(|r| r.chain != 1), "chain 1's records before its drop are dead");
    assert_eq!(log[marker + 1], ack(1, 55), "the watermark follows the drop that forgot it");
    assert!(log.len() < recs.len() / 2, "{} of {} records kept", log.len(), recs.len());
    assert_eq!(chain_replay(&log, 1), 70);
    assert_eq!(chain_replay(&log, 2), 10);
    assert_model(&store, &recs);
    let want = snapshot(&store);
    drop_store_and_compare(&vfs, store, compacting, &want, &recs);
    assert_eq!(replayed(&reopen(&vfs, compacting)), log);
}

/// Syncs until compaction settles, or a sync fails because the power was cut.
fn compact_until_cut(store: &mut LogStore) {
    for _ in 0..10_000 {
        let before = store.compaction_progress();
        if store.sync().is_err() {
            return;
        }
        let after = store.compaction_progress();
        if before.pass.is_none() && after.pass.is_none() && after.passes_completed == before.passes_completed {
            return;
        }
    }
    panic!("compaction never settled");
}

#[test]
fn a_crash_at_any_step_of_compacting_over_drops_leaves_the_same_contents() {
    let recs = rejoined_history();
    let compacting = opts(300, eager_compaction(120));
    let mut cut = 0;
    loop {
        let vfs = SimVfs::new();
        let (mut store, _) = open(&vfs, opts(300, no_compaction()));
        append_all(&mut store, &recs);
        store.sync().unwrap();
        drop(store);
        let (mut store, _) = open(&vfs, compacting);
        vfs.cut_power_after(Some(cut));
        compact_until_cut(&mut store);
        // A write after compaction tells whether the power cut came before its last write.
        let finished = vfs.create_dir_all(Path::new("/probe")).is_ok();
        vfs.crash(cut);
        drop(store);
        let (store, report) = open(&vfs, compacting);
        assert!(report.segments.iter().all(|s| s.note.is_none()), "{report:?}");
        assert_model(&store, &recs);
        let log = replayed(&store);
        assert_eq!((chain_replay(&log, 1), chain_replay(&log, 2)), (70, 10), "crash after {cut} writes");
        if finished {
            assert!(log.len() < recs.len() / 2, "{} of {} records kept", log.len(), recs.len());
            break;
        }
        cut += 1;
    }
    assert!(cut > 10, "compacting should take many writes, took {cut}");
}

#[test]
fn merge_carries_drops_and_split_copies_only_indexed_keys() {
    let vfs = SimVfs::new();
    let (mut src, _) = open(&vfs, opts(700, no_compaction()));
    let recs = log_with_drops(&mut src);

    // A merge appends the drops too, so they take out the destination's own keys in their range.
    let base = puts(1, 1, 50, "base");
    let other = SimVfs::new();
    for mut dst in
        [Box::new(MemStore::new()) as Box<dyn Datastore>, Box::new(open(&other, opts(700, no_compaction())).0)]
    {
        append_all(&mut *dst, &base);
        merge_into(&src, &mut *dst).unwrap();
        let all: Vec<Record> = base.iter().chain(&recs).cloned().collect();
        assert_eq!(scanned(&*dst, 0, 0), model(&all));

        // From a memory store, the stream holds the drops and the latest record of every key after them.
        let mut copy = MemStore::new();
        append_all(&mut copy, &base);
        merge_into(&*dst, &mut copy).unwrap();
        assert_eq!(scanned(&copy, 0, 0), model(&all));
        let (streamed, _) = dst.read_log(LogPos::START, usize::MAX).unwrap();
        assert_eq!(streamed.iter().filter(|r| is_drop(r)).count(), 3);
    }

    let mut part = MemStore::new();
    let copied = split_range(&src, &mut part, END, START).unwrap();
    let want: BTreeMap<Bytes, Entry> =
        model(&recs).into_iter().filter(|(k, _)| ring_range_contains(END, START, key_token(k))).collect();
    assert_eq!((copied, scanned(&part, 0, 0)), (want.len() as u64, want));
    assert_eq!(part.read_log(LogPos::START, usize::MAX).unwrap().0.iter().filter(|r| is_drop(r)).count(), 0);
}
