//! `LogStore` over the real file system: durability across reopen and torn-tail recovery on an actual file.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use meridian_store::{Body, Datastore, Entry, LogOptions, LogStore, RealVfs, Record, Vfs};

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

    // A torn record where the next append would have gone, in the space reserved ahead of the data.
    let file = OpenOptions::new().write(true).open(only_segment(&dir)).unwrap();
    file.write_all_at(&[0, 0, 0, 40, 1, 2, 3], log_bytes).unwrap();
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

fn only_segment(dir: &Path) -> PathBuf {
    let segments = RealVfs.list_files(dir).unwrap();
    let [segment] = &segments[..] else { panic!("one segment expected, found {segments:?}") };
    dir.join(segment)
}

fn file_len(path: &Path) -> u64 {
    fs::metadata(path).unwrap().len()
}

#[test]
fn space_reserved_ahead_of_the_data_is_no_damage_and_sealing_cuts_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let opts = LogOptions { segment_bytes: 4096, preallocate_bytes: 1024, ..LogOptions::default() };
    let (mut store, _) = LogStore::open_with(Arc::new(RealVfs), &dir, opts).unwrap();
    store.append(&put(1, "a", "one")).unwrap();
    store.sync().unwrap();
    let log_bytes = store.stats().log_bytes;
    assert_eq!(file_len(&only_segment(&dir)), 1024, "a step of space is reserved");
    drop(store);

    let (mut store, report) = LogStore::open_with(Arc::new(RealVfs), &dir, opts).unwrap();
    assert_eq!((report.records, report.kept_bytes, report.dropped_bytes, report.reason), (1, log_bytes, 0, None));
    assert_eq!(file_len(&only_segment(&dir)), log_bytes, "recovery cut the zeros off");
    let value = Bytes::from(vec![b'x'; 1500]);
    for seq in 2..6 {
        let rec = Record { chain: 2, seq, key: Bytes::from(format!("k{seq}")), body: Body::Value(value.clone()) };
        store.append(&rec).unwrap();
    }
    store.sync().unwrap();
    let mut files = RealVfs.list_files(&dir).unwrap();
    files.retain(|f| f.ends_with(".seg"));
    let lens: Vec<u64> = files.iter().map(|f| file_len(&dir.join(f))).collect();
    assert!(lens.len() >= 2, "{files:?}");
    assert!(lens[..lens.len() - 1].iter().all(|&len| len % 1024 != 0), "sealed segments end with a record: {lens:?}");
    assert_eq!(lens[lens.len() - 1] % 1024, 0, "the active one is reserved ahead: {lens:?}");
    drop(store);
    let (store, report) = LogStore::open_with(Arc::new(RealVfs), &dir, opts).unwrap();
    assert_eq!((report.records, report.dropped_bytes), (5, 0));
    assert_eq!(store.get(b"k5").unwrap().unwrap().value, Some(value));
}

/// The real file system, with every background job held back a while, as a loaded disk would hold it.
#[derive(Debug)]
struct SlowBackground;

impl Vfs for SlowBackground {
    fn create_dir_all(&self, path: &Path) -> std::io::Result<()> {
        RealVfs.create_dir_all(path)
    }
    fn open(&self, path: &Path) -> std::io::Result<Box<dyn meridian_store::VfsFile>> {
        RealVfs.open(path)
    }
    fn exists(&self, path: &Path) -> bool {
        RealVfs.exists(path)
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        RealVfs.remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        RealVfs.rename(from, to)
    }
    fn list_files(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        RealVfs.list_files(dir)
    }
    fn in_background(&self, job: Box<dyn FnOnce() + Send>) -> Option<std::thread::JoinHandle<()>> {
        RealVfs.in_background(Box::new(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            job()
        }))
    }
}

#[test]
fn a_dropped_store_has_finished_its_background_file_work() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let opts = LogOptions { segment_bytes: 4096, ..LogOptions::default() };
    let (mut store, _) = LogStore::open_with(Arc::new(SlowBackground), &dir, opts).unwrap();
    let value = Bytes::from(vec![b'x'; 1500]);
    for seq in 1..8 {
        let rec = Record { chain: 2, seq, key: Bytes::from(format!("k{seq}")), body: Body::Value(value.clone()) };
        store.append(&rec).unwrap();
    }
    store.sync().unwrap();
    drop(store);

    // Every sealed segment's hint is in place and nothing is half-written, so the directory can go at once and
    // nothing comes back into it.
    let files = RealVfs.list_files(&dir).unwrap();
    let segments = files.iter().filter(|f| f.ends_with(".seg")).count();
    let hints = files.iter().filter(|f| f.ends_with(".hint")).count();
    assert!(segments >= 3, "{files:?}");
    assert_eq!(hints, segments - 1, "one hint per sealed segment: {files:?}");
    assert!(files.iter().all(|f| !f.ends_with(".tmp")), "{files:?}");
    fs::remove_dir_all(&dir).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!dir.exists());
}
