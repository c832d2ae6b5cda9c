//! Crash and corruption recovery of `LogStore`: whatever happens to the tail of the log, reopening yields a
//! prefix of what was appended, never a value that was not written.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use meridian_store::{encode, Body, Datastore, Entry, LogStore, Record, RecoveryReport, SimVfs, Vfs};

const DIR: &str = "/store";
const LOG: &str = "/store/data.log";

/// xorshift64*: deterministic workloads without a rand dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

fn open(vfs: &SimVfs) -> (LogStore, RecoveryReport) {
    LogStore::open(Arc::new(vfs.clone()), Path::new(DIR)).unwrap()
}

/// A mix of puts (some large), deletes and replication metadata over a few keys.
fn workload(seed: u64, len: u64) -> Vec<Record> {
    let mut rng = Rng(seed | 1);
    (1..=len)
        .map(|seq| {
            let key = Bytes::from(format!("key{}", rng.below(6)));
            let body = match rng.below(10) {
                0 => Body::Tombstone,
                1 => Body::Skip,
                2 => Body::AckMark,
                _ => Body::Value(Bytes::from(format!("{seed}:{seq}:").repeat(1 + rng.below(200) as usize))),
            };
            Record { chain: 1, seq, key, body }
        })
        .collect()
}

/// What `get` must return for every key after applying `recs` in order.
fn model(recs: &[Record]) -> HashMap<Bytes, Entry> {
    recs.iter().filter_map(|r| Some((r.key.clone(), r.entry()?))).collect()
}

fn replayed(store: &LogStore) -> Vec<Record> {
    let mut out = Vec::new();
    store.replay(&mut |r| out.push(r)).unwrap();
    out
}

/// Checks that `store` holds exactly `recs[..n]` for some `n >= at_least`, and returns `n`.
fn assert_holds_prefix(store: &LogStore, recs: &[Record], at_least: usize) -> usize {
    let got = replayed(store);
    let n = got.len();
    assert!(n >= at_least && n <= recs.len(), "kept {n} records, synced {at_least}");
    assert_eq!(got, recs[..n]);
    let want = model(&recs[..n]);
    for i in 0..6 {
        let key = format!("key{i}");
        assert_eq!(store.get(key.as_bytes()).unwrap().as_ref(), want.get(key.as_bytes()), "{key}");
    }
    assert_eq!(store.stats().records, n as u64);
    n
}

fn encoded(recs: &[Record]) -> (Vec<u8>, Vec<u64>) {
    let mut log = Vec::new();
    let mut ends = vec![0];
    for r in recs {
        encode(r, &mut log).unwrap();
        ends.push(log.len() as u64);
    }
    (log, ends)
}

fn write_raw(vfs: &SimVfs, bytes: &[u8]) {
    vfs.create_dir_all(Path::new(DIR)).unwrap();
    let mut f = vfs.open(Path::new(LOG)).unwrap();
    f.append(bytes).unwrap();
    f.sync().unwrap();
}

#[test]
fn a_crash_keeps_a_prefix_that_covers_every_sync() {
    let (mut kept_unsynced, mut lost_unsynced, mut torn) = (false, false, false);
    for entropy in 0..300 {
        let vfs = SimVfs::new();
        let (mut store, _) = open(&vfs);
        let recs = workload(entropy, 40);
        let mut rng = Rng(entropy + 7);
        let mut synced = 0;
        for (i, rec) in recs.iter().enumerate() {
            store.append(rec).unwrap();
            if rng.below(6) == 0 {
                store.sync().unwrap();
                synced = i + 1;
            }
        }
        vfs.crash(entropy);
        drop(store);
        let (store, report) = open(&vfs);
        let n = assert_holds_prefix(&store, &recs, synced);
        assert_eq!(report.records, n as u64);
        assert_eq!(report.dropped_bytes == 0, report.reason.is_none());
        kept_unsynced |= n > synced;
        lost_unsynced |= n < recs.len();
        torn |= report.dropped_bytes > 0;
    }
    assert!(kept_unsynced && lost_unsynced && torn, "the crashes should cover every kind of tail");
}

#[test]
fn appends_after_recovery_follow_the_kept_prefix() {
    for entropy in 0..100 {
        let vfs = SimVfs::new();
        let recs = workload(entropy, 30);
        let (mut store, _) = open(&vfs);
        for rec in &recs[..20] {
            store.append(rec).unwrap();
        }
        store.sync().unwrap();
        for rec in &recs[20..] {
            store.append(rec).unwrap();
        }
        vfs.crash(entropy);
        drop(store);
        let (mut store, _) = open(&vfs);
        let n = replayed(&store).len();
        let extra = workload(entropy + 1000, 5);
        for rec in &extra {
            store.append(rec).unwrap();
        }
        store.sync().unwrap();
        drop(store);
        let (store, report) = open(&vfs);
        assert_eq!(report.dropped_bytes, 0);
        let expected: Vec<Record> = recs[..n].iter().chain(&extra).cloned().collect();
        assert_holds_prefix(&store, &expected, expected.len());
    }
}

#[test]
fn recovery_from_any_truncation_yields_a_prefix() {
    let recs = workload(5, 12);
    let (log, ends) = encoded(&recs);
    for cut in 0..=log.len() as u64 {
        let vfs = SimVfs::new();
        write_raw(&vfs, &log[..cut as usize]);
        let (store, report) = open(&vfs);
        let n = ends.iter().rposition(|&e| e <= cut).unwrap();
        assert_eq!(report.records, n as u64);
        assert_eq!(report.kept_bytes, ends[n]);
        assert_eq!(report.dropped_bytes, cut - ends[n]);
        assert_eq!(report.reason.is_some(), cut != ends[n]);
        assert_eq!(vfs.open(Path::new(LOG)).unwrap().len().unwrap(), ends[n]);
        assert_eq!(assert_holds_prefix(&store, &recs, n), n);
    }
}

#[test]
fn a_flipped_byte_stops_recovery_at_its_record() {
    let recs = workload(9, 10);
    let (log, ends) = encoded(&recs);
    for at in 0..log.len() as u64 {
        let mut damaged = log.clone();
        damaged[at as usize] ^= 0x10;
        let vfs = SimVfs::new();
        write_raw(&vfs, &damaged);
        let (store, report) = open(&vfs);
        let hit = ends.iter().rposition(|&e| e <= at).unwrap();
        assert_eq!(report.records, hit as u64, "flip at {at}");
        assert_eq!(report.kept_bytes, ends[hit]);
        assert_eq!(report.dropped_bytes, log.len() as u64 - ends[hit]);
        assert!(report.reason.is_some());
        assert_holds_prefix(&store, &recs, hit);
    }
}

#[test]
fn a_flipped_value_byte_mid_log_is_reported_as_a_checksum_failure() {
    let recs = workload(2, 10);
    let (mut log, ends) = encoded(&recs);
    let last = (ends[5] - 1) as usize;
    log[last] ^= 0xff;
    let vfs = SimVfs::new();
    write_raw(&vfs, &log);
    let (_, report) = open(&vfs);
    let reason = report.reason.unwrap();
    assert!(reason.contains("checksum") && reason.contains(&format!("offset {}", ends[4])), "{reason}");
    assert_eq!((report.records, report.kept_bytes), (4, ends[4]));
    assert_eq!(report.dropped_bytes, log.len() as u64 - ends[4]);
}
