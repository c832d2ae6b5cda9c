//! `LogStore` over the real file system: durability across reopen and torn-tail recovery on an actual file.

use std::fs::OpenOptions;
use std::io::Write;
use std::sync::Arc;

use bytes::Bytes;
use meridian_store::{Body, Datastore, Entry, LogStore, RealVfs, Record, Vfs};

fn put(seq: u64, key: &'static str, value: &'static str) -> Record {
    Record {
        chain: 2,
        seq,
        key: Bytes::from_static(key.as_bytes()),
        body: Body::Value(Bytes::from_static(value.as_bytes())),
    }
}

#[test]
fn synced_records_survive_reopen_and_a_torn_tail_is_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("node/store");
    let (mut store, report) = LogStore::open(Arc::new(RealVfs), &dir).unwrap();
    assert_eq!(report.kept_bytes, 0);
    store.append(&put(1, "a", "one")).unwrap();
    store.append(&put(2, "b", "two")).unwrap();
    store.append(&Record { chain: 2, seq: 3, key: Bytes::from_static(b"a"), body: Body::Tombstone }).unwrap();
    store.sync().unwrap();
    let log_bytes = store.stats().log_bytes;
    drop(store);

    let segments = RealVfs.list_files(&dir).unwrap();
    let [segment] = &segments[..] else { panic!("one segment expected, found {segments:?}") };
    let mut file = OpenOptions::new().append(true).open(dir.join(segment)).unwrap();
    file.write_all(&[0, 0, 0, 40, 1, 2, 3]).unwrap();
    drop(file);

    let (mut store, report) = LogStore::open(Arc::new(RealVfs), &dir).unwrap();
    assert_eq!((report.records, report.kept_bytes, report.dropped_bytes), (3, log_bytes, 7));
    assert_eq!(store.get(b"a").unwrap(), Some(Entry { chain: 2, seq: 3, value: None }));
    assert_eq!(store.get(b"b").unwrap().unwrap().value, Some(Bytes::from_static(b"two")));
    store.append(&put(4, "c", "three")).unwrap();
    store.sync().unwrap();
    drop(store);

    let (store, report) = LogStore::open(Arc::new(RealVfs), &dir).unwrap();
    assert_eq!((report.records, report.dropped_bytes), (4, 0));
    let mut seqs = Vec::new();
    store.replay(&mut |r| seqs.push(r.seq)).unwrap();
    assert_eq!(seqs, [1, 2, 3, 4]);
}
