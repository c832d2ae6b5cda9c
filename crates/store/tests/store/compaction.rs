//! Compaction: it keeps the store's contents, obeys the retention contract of docs/protocols/chain.md,
//! reclaims space, never blocks reads, and survives a crash at any step.

use std::path::Path;

use bytes::Bytes;
use meridian_store::{Body, Datastore, Entry, LogStore, Record, SimVfs, Vfs};

use crate::common::*;

const SEGMENT: u64 = 600;

/// Chain 1's history: `rounds` puts to each of `keys` keys (with a delete or skip now and then), seqs from 1,
/// and after each round an ack mark `lag` updates behind.
fn history(keys: u64, rounds: u64, lag: u64) -> Vec<Record> {
    let mut rng = Rng(keys * 31 + rounds);
    let mut recs = Vec::new();
    let mut seq = 0;
    for round in 0..rounds {
        for k in 0..keys {
            seq += 1;
            let key = format!("key{k}");
            recs.push(match rng.below(12) {
                0 => meta(1, seq, &key, Body::Tombstone),
                1 => meta(1, seq, &key, Body::Skip),
                _ => put(1, seq, &key, &format!("r{round}s{seq}").repeat(1 + rng.below(4) as usize)),
            });
        }
        recs.push(ack(1, seq.saturating_sub(lag)));
    }
    recs
}

/// Replays `log` the way chain recovery does (seed 003 Listing 1, docs/protocols/chain.md): an ack mark
/// stands for everything up to it, and any other record must follow the last seq without a gap. Returns the
/// last seq reached.
fn chain_replay(log: &[Record], chain: u32) -> u64 {
    let mut lu = 0;
    for rec in log.iter().filter(|r| r.chain == chain) {
        match rec.body {
            Body::AckMark => lu = lu.max(rec.seq),
            _ if rec.seq == lu + 1 => lu += 1,
            _ => assert!(rec.seq <= lu, "chain {chain} jumps from {lu} to {}", rec.seq),
        }
    }
    lu
}

fn last_seq(recs: &[Record], chain: u32) -> u64 {
    recs.iter().filter(|r| r.chain == chain && r.body != Body::AckMark).map(|r| r.seq).max().unwrap_or(0)
}

fn sealed_store(vfs: &SimVfs, recs: &[Record]) {
    let (mut store, _) = open(vfs, opts(SEGMENT, no_compaction()));
    append_all(&mut store, recs);
    store.sync().unwrap();
}

/// Syncs until the first pass commits (true), or a sync fails or a pass is abandoned (false).
fn drive_first_pass(store: &mut LogStore) -> bool {
    for _ in 0..10_000 {
        if store.sync().is_err() {
            return false;
        }
        let p = store.compaction_progress();
        if p.passes_completed > 0 {
            return true;
        }
        if p.passes_abandoned > 0 {
            return false;
        }
    }
    panic!("no compaction pass completed");
}

#[test]
fn a_crash_at_any_step_of_a_pass_leaves_the_same_contents() {
    let recs = history(12, 8, 5);
    let want = model(&recs);
    let compacting = opts(SEGMENT, eager_compaction(150));
    let mut cut = 0;
    loop {
        let vfs = SimVfs::new();
        sealed_store(&vfs, &recs);
        let (mut store, _) = open(&vfs, compacting);
        vfs.cut_power_after(Some(cut));
        let committed = drive_first_pass(&mut store);
        // A write after the pass tells whether the power cut came before the pass's last write.
        let cut_short = vfs.create_dir_all(Path::new("/probe")).is_err();
        vfs.crash(cut);
        drop(store);
        let (store, report) = open(&vfs, compacting);
        assert_values(&store, &want);
        assert_eq!(chain_replay(&replayed(&store), 1), last_seq(&recs, 1), "crash after {cut} writes");
        assert!(report.segments.iter().all(|s| s.note.is_none()), "{report:?}");
        assert!(files(&vfs, ".tmp").is_empty());
        if committed && !cut_short {
            break;
        }
        cut += 1;
    }
    assert!(cut > 10, "the pass should take many writes, took {cut}");
}

#[test]
fn overwritten_data_compacts_to_within_twice_the_live_bytes() {
    let vfs = SimVfs::new();
    let (mut store, _) = open(&vfs, opts(4096, eager_compaction(2048)));
    let mut all = Vec::new();
    let mut seq = 0;
    for round in 0..10 {
        for k in 0..200 {
            seq += 1;
            let rec = put(1, seq, &format!("key{k:03}"), &format!("{round:02}").repeat(50));
            store.append(&rec).unwrap();
            all.push(rec);
        }
        let mark = ack(1, seq);
        store.append(&mark).unwrap();
        all.push(mark);
        store.sync().unwrap();
    }
    compact_fully(&mut store);
    let want = model(&all);
    let live: u64 = all.iter().filter(|r| want.get(&r.key) == r.entry().as_ref()).map(|r| r.encoded_len() as u64).sum();
    let stats = store.stats();
    assert!(stats.log_bytes <= 2 * live, "{stats:?}, live data {live}");
    assert!(stats.compactions > 0 && stats.live_keys == 200);
    assert!(stats.index_bytes <= 200 * 64, "{stats:?}");
    assert_values(&store, &want);
    drop(store);
    let (store, _) = open(&vfs, opts(4096, eager_compaction(2048)));
    assert_values(&store, &want);
    assert_eq!(chain_replay(&replayed(&store), 1), seq);
}

#[test]
fn reads_and_writes_go_on_while_a_pass_is_under_way() {
    let vfs = SimVfs::new();
    let mut recs = history(10, 10, 0);
    sealed_store(&vfs, &recs);
    let compacting = opts(SEGMENT, eager_compaction(64));
    let (mut store, _) = open(&vfs, compacting);
    let mut rng = Rng(99);
    let mut seq = last_seq(&recs, 1);
    let (mut slices_seen, mut passes) = (0, 0);
    while passes < 3 {
        store.sync().unwrap();
        let progress = store.compaction_progress();
        slices_seen += usize::from(progress.pass.is_some());
        passes = progress.passes_completed;
        assert_values(&store, &model(&recs));
        seq += 1;
        let rec = put(1, seq, &format!("key{}", rng.below(10)), &format!("during{seq}"));
        store.append(&rec).unwrap();
        recs.push(rec);
        if rng.below(4) == 0 {
            let mark = ack(1, seq);
            store.append(&mark).unwrap();
            recs.push(mark);
        }
        assert!(seq < 10_000, "compaction made no progress");
    }
    assert!(slices_seen > 20, "passes should span many syncs, saw {slices_seen}");
    store.sync().unwrap();
    drop(store);
    let (store, _) = open(&vfs, compacting);
    assert_values(&store, &model(&recs));
    assert_eq!(chain_replay(&replayed(&store), 1), seq);
}

#[test]
fn records_above_the_watermark_survive_and_replay_meets_the_watermark_first() {
    let vfs = SimVfs::new();
    let mut recs: Vec<Record> = (1..=20).map(|s| put(1, s, "g", &format!("garbage{s:02}"))).collect();
    recs.push(put(1, 21, "b", "superseded-but-unacknowledged"));
    recs.push(put(1, 22, "b", "latest"));
    // Chain 2 never acknowledges anything, so none of its records may go.
    recs.extend((1..=10).map(|s| put(2, s, "z", &format!("chain2-{s}"))));
    recs.push(ack(1, 20));
    recs.extend((23..=40).map(|s| put(1, s, &format!("c{s}"), "filler-filler")));
    let (mut store, _) = open(&vfs, opts(200, eager_compaction(1 << 20)));
    append_all(&mut store, &recs);
    compact_fully(&mut store);
    assert!(store.stats().compactions >= 2);

    let log = replayed(&store);
    assert_eq!(log[0], ack(1, 20), "a compacted range begins with its watermark");
    let kept = |r: &Record| log.contains(r);
    assert!((1..20).all(|s| !kept(&put(1, s, "g", &format!("garbage{s:02}")))));
    assert!(kept(&put(1, 20, "g", "garbage20")));
    let b21 = log.iter().position(|r| *r == recs[20]).expect("b@21 is above the watermark");
    let b22 = log.iter().position(|r| *r == recs[21]).unwrap();
    assert!(b21 < b22);
    assert!(recs[22..32].iter().all(kept), "chain 2 has no watermark");
    assert_eq!(chain_replay(&log, 1), 40);
    assert_values(&store, &model(&recs));
}

/// `key` deleted at chain 1's seq 2, then enough acknowledged garbage that compaction runs from the oldest
/// segment; `before` goes first.
fn deleted_then_compacted(before: &[Record]) -> (SimVfs, LogStore, Vec<Record>) {
    let vfs = SimVfs::new();
    let mut recs = before.to_vec();
    recs.push(put(1, 1, "t", "doomed"));
    recs.push(meta(1, 2, "t", Body::Tombstone));
    recs.extend((3..=30).map(|s| put(1, s, "f", &format!("garbage{s}"))));
    recs.push(ack(1, 30));
    recs.extend((31..=40).map(|s| put(1, s, &format!("c{s}"), "filler")));
    let compacting = opts(200, eager_compaction(1 << 20));
    let (mut store, _) = open(&vfs, compacting);
    append_all(&mut store, &recs);
    compact_fully(&mut store);
    (vfs, store, recs)
}

#[test]
fn an_acknowledged_latest_tombstone_goes_with_its_key() {
    let (_, store, recs) = deleted_then_compacted(&[]);
    assert_eq!(store.get(b"t").unwrap(), None);
    assert!(replayed(&store).iter().all(|r| r.key != "t"));
    assert_eq!(chain_replay(&replayed(&store), 1), 40);
    assert_values(&store, &model(&recs).into_iter().filter(|(k, _)| k != "t").collect());
}

#[test]
fn a_tombstone_stays_while_an_older_value_of_its_key_must() {
    // Chain 2 wrote `t` first and has acknowledged nothing of it, so that value stays; dropping chain 1's
    // tombstone would bring it back on a restart that scans the log.
    let chain2 = [ack(2, 1), put(2, 5, "t", "older-from-chain-2")];
    let (vfs, store, recs) = deleted_then_compacted(&chain2);
    let tombstone = Some(Entry { chain: 1, seq: 2, value: None });
    assert_eq!(store.get(b"t").unwrap(), tombstone);
    assert!(replayed(&store).contains(&chain2[1]));
    drop(store);
    for hint in files(&vfs, ".hint") {
        vfs.remove_file(&hint).unwrap();
    }
    let (store, _) = open(&vfs, opts(200, eager_compaction(1 << 20)));
    assert_eq!(store.get(b"t").unwrap(), tombstone);
    assert_values(&store, &model(&recs));
}

#[test]
fn an_unacknowledged_log_is_not_rewritten_over_and_over() {
    let vfs = SimVfs::new();
    let recs: Vec<Record> = (1..=100).map(|s| put(1, s, "k", &format!("value{s:03}"))).collect();
    let (mut store, _) = open(&vfs, opts(300, eager_compaction(1 << 20)));
    append_all(&mut store, &recs);
    for _ in 0..50 {
        store.sync().unwrap();
    }
    assert!(store.compaction_progress().passes_completed <= 1, "{:?}", store.compaction_progress());
    let before = store.stats().log_bytes;
    store.append(&ack(1, 100)).unwrap();
    compact_fully(&mut store);
    assert!(store.stats().log_bytes < before / 4, "{:?}", store.stats());
    assert_eq!(store.get(b"k").unwrap().unwrap().value, Some(Bytes::from("value100")));
    assert_eq!(chain_replay(&replayed(&store), 1), 100);
}

#[test]
fn random_crashes_while_compacting_keep_a_prefix_that_covers_every_sync() {
    let compacting = opts(300, eager_compaction(200));
    for entropy in 0..150 {
        let vfs = SimVfs::new();
        let (mut store, _) = open(&vfs, compacting);
        let mut rng = Rng(entropy * 7 + 1);
        let mut recs = Vec::new();
        let mut synced = 0;
        for seq in 1..=120 {
            let key = format!("key{}", rng.below(8));
            recs.push(match rng.below(10) {
                0 => meta(1, seq, &key, Body::Tombstone),
                1 => meta(1, seq, &key, Body::Skip),
                _ => put(1, seq, &key, &format!("{entropy}/{seq}")),
            });
            store.append(recs.last().unwrap()).unwrap();
            if rng.below(5) == 0 {
                recs.push(ack(1, seq - rng.below(4).min(seq - 1)));
                store.append(recs.last().unwrap()).unwrap();
            }
            if rng.below(3) == 0 {
                store.sync().unwrap();
                synced = recs.len();
            }
        }
        assert!(store.stats().compactions > 0);
        vfs.crash(entropy);
        drop(store);
        let (store, _) = open(&vfs, compacting);
        // What survived is a prefix of the appends that covers every sync, and every key reads as it says.
        let lu = chain_replay(&replayed(&store), 1);
        assert!(lu >= last_seq(&recs[..synced], 1), "entropy {entropy}: kept up to {lu}");
        let n = recs.iter().position(|r| r.body != Body::AckMark && r.seq == lu).map_or(0, |i| i + 1);
        let want = model(&recs[..n]);
        for key in (0..8).map(|k| Bytes::from(format!("key{k}"))) {
            let got = store.get(&key).unwrap().and_then(|e| e.value);
            assert_eq!(got, want.get(&key).and_then(|e| e.value.clone()), "entropy {entropy}, {key:?}");
        }
    }
}
