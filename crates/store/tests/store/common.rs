//! Workloads, models and file helpers shared by the tests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use meridian_core::ring::key_token;
use meridian_store::{
    ring_range_contains, Body, CompactionOptions, Datastore, Entry, LogOptions, LogStore, Record, RecoveryReport,
    SimVfs, StoreError, Vfs,
};

pub const DIR: &str = "/store";

/// xorshift64*: deterministic workloads without a rand dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// Small segments so a few dozen records span several; compaction as configured by the caller.
pub fn opts(segment_bytes: u64, compaction: CompactionOptions) -> LogOptions {
    LogOptions { segment_bytes, compaction, ..LogOptions::default() }
}

/// Compaction that never triggers: dead bytes can never exceed all of the sealed bytes.
pub fn no_compaction() -> CompactionOptions {
    CompactionOptions { dead_ratio: 1.0, ..CompactionOptions::default() }
}

pub fn eager_compaction(slice_bytes: u64) -> CompactionOptions {
    CompactionOptions { dead_ratio: 0.3, slice_bytes, min_segments: 1, pace: 0 }
}

pub fn try_open(vfs: &SimVfs, opts: LogOptions) -> Result<(LogStore, RecoveryReport), StoreError> {
    LogStore::open_with(Arc::new(vfs.clone()), Path::new(DIR), opts)
}

pub fn open(vfs: &SimVfs, opts: LogOptions) -> (LogStore, RecoveryReport) {
    try_open(vfs, opts).unwrap()
}

pub fn put(chain: u32, seq: u64, key: &str, value: &str) -> Record {
    Record { chain, seq, key: Bytes::copy_from_slice(key.as_bytes()), body: Body::Value(value.to_owned().into()) }
}

pub fn meta(chain: u32, seq: u64, key: &str, body: Body) -> Record {
    Record { chain, seq, key: Bytes::copy_from_slice(key.as_bytes()), body }
}

pub fn ack(chain: u32, seq: u64) -> Record {
    meta(chain, seq, "", Body::AckMark)
}

/// A range drop of `chain`, with seq 0 as the chain layer writes it.
pub fn drop_range(chain: u32, start_exclusive: u64, end_inclusive: u64) -> Record {
    Record { chain, seq: 0, key: Bytes::new(), body: Body::DropRange { start_exclusive, end_inclusive } }
}

/// One chain's updates: puts (some large), deletes, skips and now and then a drop of up to half the ring,
/// over `keys` keys, seqs from 1.
pub fn workload(seed: u64, len: u64, keys: u64) -> Vec<Record> {
    let mut rng = Rng(seed | 1);
    (1..=len)
        .map(|seq| {
            let key = Bytes::from(format!("key{}", rng.below(keys)));
            let body = match rng.below(12) {
                0 => Body::Tombstone,
                1 => Body::Skip,
                2 => {
                    let start_exclusive = rng.below(u64::MAX);
                    let end_inclusive = start_exclusive.wrapping_add(rng.below(u64::MAX / 2));
                    return Record { seq, ..drop_range(1, start_exclusive, end_inclusive) };
                }
                _ => Body::Value(Bytes::from(format!("{seed}:{seq}:").repeat(1 + rng.below(20) as usize))),
            };
            Record { chain: 1, seq, key, body }
        })
        .collect()
}

/// What `get` must return for every key after applying `recs` in order; a key missing from the model reads
/// as absent.
pub fn model(recs: &[Record]) -> BTreeMap<Bytes, Entry> {
    let mut out = BTreeMap::new();
    for r in recs {
        if let Body::DropRange { start_exclusive, end_inclusive } = r.body {
            out.retain(|key: &Bytes, _| !ring_range_contains(start_exclusive, end_inclusive, key_token(key)));
        } else if let Some(entry) = r.entry() {
            out.insert(r.key.clone(), entry);
        }
    }
    out
}

/// Every key `recs` write reads as the model says: its value, or nothing (absent or deleted).
pub fn assert_model(store: &dyn Datastore, recs: &[Record]) {
    let want = model(recs);
    for key in recs.iter().filter(|r| r.entry().is_some()).map(|r| &r.key) {
        let got = store.get(key).unwrap().and_then(|e| e.value);
        assert_eq!(got, want.get(key).and_then(|e| e.value.clone()), "key {key:?}");
    }
}

/// The value (not the entry: compaction may forget a deleted key) every key of the model reads as.
pub fn assert_values(store: &dyn Datastore, want: &BTreeMap<Bytes, Entry>) {
    for (key, entry) in want {
        let got = store.get(key).unwrap().and_then(|e| e.value);
        assert_eq!(got, entry.value, "key {key:?}");
    }
}

pub fn replayed(store: &dyn Datastore) -> Vec<Record> {
    let mut out = Vec::new();
    store.replay(&mut |r| out.push(r)).unwrap();
    out
}

pub fn append_all(store: &mut dyn Datastore, recs: &[Record]) {
    for rec in recs {
        store.append(rec).unwrap();
    }
}

/// Files in the store's directory whose names end with `ext`, sorted (so segments come in log order).
pub fn files(vfs: &SimVfs, ext: &str) -> Vec<PathBuf> {
    let names = vfs.list_files(Path::new(DIR)).unwrap();
    names.into_iter().filter(|n| n.ends_with(ext)).map(|n| Path::new(DIR).join(n)).collect()
}

pub fn read_file(vfs: &SimVfs, path: &Path) -> Vec<u8> {
    let f = vfs.open(path).unwrap();
    let mut buf = vec![0; f.len().unwrap() as usize];
    f.read_exact_at(0, &mut buf).unwrap();
    buf
}

/// Replaces a file's contents, durably.
pub fn write_file(vfs: &SimVfs, path: &Path, bytes: &[u8]) {
    if vfs.exists(path) {
        vfs.remove_file(path).unwrap();
    }
    let mut f = vfs.open(path).unwrap();
    f.append(bytes).unwrap();
    f.sync().unwrap();
}

/// Syncs until no compaction pass is under way and none starts; returns how many syncs that took.
pub fn compact_fully(store: &mut LogStore) -> usize {
    for n in 1..10_000 {
        store.sync().unwrap();
        let before = store.compaction_progress();
        store.sync().unwrap();
        let after = store.compaction_progress();
        if after.pass.is_none() && after.passes_completed == before.passes_completed && before.pass.is_none() {
            return n;
        }
    }
    panic!("compaction never settled");
}
