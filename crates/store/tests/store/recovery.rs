//! Crash and corruption recovery: whatever happens to the tail of the active segment, reopening yields a
//! prefix of what was appended; damage anywhere else is refused, never returned as data.

use std::path::{Path, PathBuf};

use meridian_store::{decode, decode_framed, encode, Body, Datastore, LogOptions, Record, SimVfs, StoreError, Vfs};

use crate::common::*;

const SEGMENT: u64 = 400;

/// Unbuffered, so every append reaches the (simulated) disk at once and faults and crashes can strike at any
/// record; the write buffer's own crash and full-disk behaviour is tested beside it in the crate. No space is
/// reserved, so files hold exactly their records; [`reserving`] is the same with reservations.
fn small() -> LogOptions {
    LogOptions { write_buffer_bytes: 0, preallocate_bytes: 0, ..opts(SEGMENT, no_compaction()) }
}

/// [`small`], with space reserved ahead of the data in steps that a few records fill.
fn reserving() -> LogOptions {
    LogOptions { preallocate_bytes: 96, ..small() }
}

/// Checks that `store` holds exactly `recs[..n]` for some `n >= at_least`, and returns `n`.
fn assert_holds_prefix(store: &dyn Datastore, recs: &[Record], at_least: usize) -> usize {
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

#[test]
fn a_crash_keeps_a_prefix_that_covers_every_sync() {
    for opts in [small(), reserving()] {
        a_crash_keeps_a_prefix_that_covers_every_sync_with(opts);
    }
}

fn a_crash_keeps_a_prefix_that_covers_every_sync_with(opts: LogOptions) {
    let (mut kept_unsynced, mut lost_unsynced, mut torn) = (false, false, false);
    for entropy in 0..300 {
        let vfs = SimVfs::new();
        let (mut store, _) = open(&vfs, opts);
        let recs = workload(entropy, 40, 6);
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
        let (store, report) = open(&vfs, opts);
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
    for (entropy, opts) in (0..200).map(|e| (e, if e % 2 == 0 { small() } else { reserving() })) {
        let vfs = SimVfs::new();
        let recs = workload(entropy, 30, 6);
        let (mut store, _) = open(&vfs, opts);
        append_all(&mut store, &recs[..20]);
        store.sync().unwrap();
        append_all(&mut store, &recs[20..]);
        vfs.crash(entropy);
        drop(store);
        let (mut store, _) = open(&vfs, opts);
        let n = replayed(&store).len();
        let extra = workload(entropy + 1000, 5, 6);
        append_all(&mut store, &extra);
        store.sync().unwrap();
        drop(store);
        let (store, report) = open(&vfs, opts);
        assert_eq!(report.dropped_bytes, 0);
        let expected: Vec<Record> = recs[..n].iter().chain(&extra).cloned().collect();
        assert_holds_prefix(&store, &expected, expected.len());
    }
}

/// A synced multi-segment log with hints and range drops; returns its records.
fn build(vfs: &SimVfs) -> Vec<Record> {
    let recs = workload(5, 24, 6);
    assert!(recs.iter().filter(|r| matches!(r.body, Body::DropRange { .. })).count() >= 2);
    let (mut store, _) = open(vfs, small());
    append_all(&mut store, &recs);
    store.sync().unwrap();
    recs
}

/// Opens `vfs` after `victim` was cut; returns whether the open succeeded. A cut active segment must recover
/// a prefix, a cut hint must cost nothing, and a cut sealed segment must be refused, naming it.
fn open_after_cut(vfs: &SimVfs, victim: &Path, active: &Path, recs: &[Record]) -> bool {
    let (store, report) = match try_open(vfs, small()) {
        Ok(opened) => opened,
        Err(e) => {
            assert!(victim != active, "the active segment must recover: {e}");
            assert!(matches!(e, StoreError::Corrupt { .. }), "{e}");
            assert!(e.to_string().contains(victim.file_name().unwrap().to_str().unwrap()), "{e}");
            return false;
        }
    };
    let got = replayed(&store);
    if victim == active {
        assert_eq!(got, recs[..got.len()]);
        assert_eq!(report.kept_bytes, store.stats().log_bytes);
    } else {
        assert_eq!(victim.extension().unwrap(), "hint", "a cut sealed segment was accepted");
        assert_eq!(got, recs);
    }
    // Every key reads as something that was written to it, or as absent.
    for r in recs {
        let entry = store.get(&r.key).unwrap();
        assert!(entry.is_none_or(|e| recs.iter().any(|w| w.key == r.key && w.entry() == Some(e.clone()))));
    }
    true
}

#[test]
fn recovery_from_any_truncation_never_returns_an_unwritten_value() {
    let probe = SimVfs::new();
    let recs = build(&probe);
    let segments = files(&probe, ".seg");
    assert!(segments.len() >= 3, "{segments:?}");
    let active = segments.last().unwrap();
    let (mut opened, mut refused) = (0, 0);
    for victim in segments.iter().chain(&files(&probe, ".hint")) {
        for cut in 0..read_file(&probe, victim).len() {
            let vfs = SimVfs::new();
            build(&vfs);
            vfs.open(victim).unwrap().truncate(cut as u64).unwrap();
            match open_after_cut(&vfs, victim, active, &recs) {
                true => opened += 1,
                false => refused += 1,
            }
        }
    }
    assert!(opened > 0 && refused > 0);
}

fn only_segment(vfs: &SimVfs) -> PathBuf {
    open(vfs, LogOptions::default());
    files(vfs, ".seg").pop().unwrap()
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

#[test]
fn a_flipped_byte_in_the_active_segment_stops_recovery_at_its_record() {
    let recs = workload(9, 10, 6);
    let (log, ends) = encoded(&recs);
    for at in 0..log.len() as u64 {
        let mut damaged = log.clone();
        damaged[at as usize] ^= 0x10;
        let vfs = SimVfs::new();
        write_file(&vfs, &only_segment(&vfs), &damaged);
        let (store, report) = open(&vfs, LogOptions::default());
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
    let recs = workload(2, 10, 6);
    let (mut log, ends) = encoded(&recs);
    let last = (ends[5] - 1) as usize;
    log[last] ^= 0xff;
    let vfs = SimVfs::new();
    let segment = only_segment(&vfs);
    write_file(&vfs, &segment, &log);
    let (_, report) = open(&vfs, LogOptions::default());
    let reason = report.reason.unwrap();
    let file = segment.file_name().unwrap().to_str().unwrap();
    assert!(reason.contains("checksum") && reason.contains(&format!("offset {}", ends[4])), "{reason}");
    assert!(reason.contains(file), "{reason}");
    assert_eq!((report.records, report.kept_bytes), (4, ends[4]));
    assert_eq!(report.dropped_bytes, log.len() as u64 - ends[4]);
}

#[test]
fn damage_in_a_sealed_segment_is_refused_not_truncated() {
    let vfs = SimVfs::new();
    let recs = build(&vfs);
    let sealed = files(&vfs, ".seg")[1].clone();
    let mut bytes = read_file(&vfs, &sealed);
    let at = bytes.len() / 2;
    bytes[at] ^= 0x04;
    write_file(&vfs, &sealed, &bytes);

    // With its hint the segment is not read at open, but a read of the damaged record fails its checksum.
    let (store, _) = open(&vfs, small());
    assert!(matches!(store.replay(&mut |_| ()), Err(StoreError::Corrupt { .. })));
    for r in &recs {
        // Every key reads as what was written or as corrupt, never as something else.
        if let Ok(entry) = store.get(&r.key) {
            assert_eq!(entry, model(&recs).get(&r.key).cloned());
        }
    }
    drop(store);

    // Without it, the open scans the segment and refuses, naming the file; nothing is cut off.
    let hint = sealed.with_extension("hint");
    vfs.remove_file(&hint).unwrap();
    let err = try_open(&vfs, small()).unwrap_err();
    let reason = err.to_string();
    assert!(reason.contains(sealed.file_name().unwrap().to_str().unwrap()) && reason.contains("checksum"), "{reason}");
    assert_eq!(read_file(&vfs, &sealed), bytes);
}

#[test]
fn a_sealed_segment_shorter_than_its_hint_is_refused() {
    let vfs = SimVfs::new();
    build(&vfs);
    let sealed = files(&vfs, ".seg")[0].clone();
    let bytes = read_file(&vfs, &sealed);
    // Cut exactly at a record boundary: only the hint can tell the segment lost records.
    let first = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize + 4;
    write_file(&vfs, &sealed, &bytes[..first]);
    let err = try_open(&vfs, small()).unwrap_err().to_string();
    assert!(err.contains(sealed.file_name().unwrap().to_str().unwrap()) && err.contains("hint"), "{err}");
}

#[test]
fn reserved_space_is_cut_off_on_reopen_and_never_reported_as_damage() {
    let vfs = SimVfs::new();
    let recs = workload(5, 24, 6);
    let (mut store, _) = open(&vfs, reserving());
    append_all(&mut store, &recs);
    store.sync().unwrap();
    drop(store);
    let active = files(&vfs, ".seg").pop().unwrap();
    let with_zeros = read_file(&vfs, &active);
    assert_eq!(with_zeros.len() % 96, 0, "the active segment ends in reserved space");
    let (store, report) = open(&vfs, reserving());
    assert_eq!((report.dropped_bytes, report.reason), (0, None));
    assert_eq!(replayed(&store), recs);
    drop(store);
    let data = read_file(&vfs, &active);
    assert!(data.len() < with_zeros.len() && with_zeros[data.len()..].iter().all(|&b| b == 0));
    let segments = files(&vfs, ".seg");
    assert!(segments.len() > 2);
    for sealed in &segments[..segments.len() - 1] {
        let mut bytes = &read_file(&vfs, sealed)[..];
        while let Some((_, used)) = decode(bytes).unwrap() {
            bytes = &bytes[used..];
        }
        assert!(bytes.is_empty(), "{sealed:?} ends with its last record");
    }
}

#[test]
fn reopening_an_unchanged_store_changes_nothing() {
    let vfs = SimVfs::new();
    let recs = build(&vfs);
    let before: Vec<Vec<u8>> = files(&vfs, "").iter().map(|f| read_file(&vfs, f)).collect();
    let (store, report) = open(&vfs, small());
    assert!(report.removed_files.is_empty() && report.dropped_bytes == 0);
    assert_eq!(replayed(&store), recs);
    assert_values(&store, &model(&recs));
    drop(store);
    let after: Vec<Vec<u8>> = files(&vfs, "").iter().map(|f| read_file(&vfs, f)).collect();
    assert_eq!(before, after);
}

#[test]
fn a_single_file_log_from_before_segments_becomes_the_first_segment() {
    let recs = workload(13, 12, 6);
    let (log, _) = encoded(&recs);
    let vfs = SimVfs::new();
    vfs.create_dir_all(Path::new(DIR)).unwrap();
    write_file(&vfs, &Path::new(DIR).join("data.log"), &log);
    let (store, _) = open(&vfs, small());
    assert_eq!(replayed(&store), recs);
    assert!(!vfs.exists(&Path::new(DIR).join("data.log")));
    drop(store);
    write_file(&vfs, &Path::new(DIR).join("data.log"), &log);
    assert!(try_open(&vfs, small()).is_err(), "an old log beside segments is ambiguous");
}

/// Groups of one to four records of distinct keys, each group one seq, as a chain logs a multi-key update.
fn grouped(entropy: u64, groups: u64) -> Vec<Vec<Record>> {
    let mut rng = Rng(entropy | 1);
    (1..=groups)
        .map(|seq| {
            let first = rng.below(6);
            (0..1 + rng.below(4))
                .map(|i| {
                    let key = format!("key{}", (first + i) % 6);
                    match rng.below(4) {
                        0 => meta(1, seq, &key, Body::Tombstone),
                        _ => put(1, seq, &key, &format!("{entropy}:{seq}:").repeat(1 + rng.below(8) as usize)),
                    }
                })
                .collect()
        })
        .collect()
}

#[test]
fn a_crash_keeps_each_group_whole_or_drops_it() {
    let (mut cut_inside, mut kept_unsynced) = (false, false);
    for (entropy, opts) in (0..300).map(|e| (e, if e % 2 == 0 { small() } else { reserving() })) {
        let vfs = SimVfs::new();
        let (mut store, _) = open(&vfs, opts);
        let groups = grouped(entropy, 30);
        let mut rng = Rng(entropy + 3);
        let mut synced = 0;
        for (i, group) in groups.iter().enumerate() {
            store.append_group(group).unwrap();
            if rng.below(5) == 0 {
                store.sync().unwrap();
                synced = i + 1;
            }
        }
        vfs.crash(entropy);
        drop(store);
        let survived = whole_records(&vfs);
        let (store, _) = open(&vfs, opts);
        let got = replayed(&store);
        let whole = (0..=groups.len()).find(|&n| groups[..n].iter().map(Vec::len).sum::<usize>() == got.len());
        let whole = whole.unwrap_or_else(|| panic!("entropy {entropy}: {} records end inside a group", got.len()));
        assert!(whole >= synced, "entropy {entropy}: lost a synced group");
        let flat: Vec<Record> = groups[..whole].concat();
        assert_eq!(got, flat);
        assert_model(&store, &flat);
        cut_inside |= survived > got.len();
        kept_unsynced |= whole > synced;
    }
    assert!(cut_inside && kept_unsynced, "the crashes should tear groups ({cut_inside}) and keep unsynced ones");
}

/// Records that read whole from the start of each segment, in whatever group.
fn whole_records(vfs: &SimVfs) -> usize {
    let mut n = 0;
    for segment in files(vfs, ".seg") {
        let bytes = read_file(vfs, &segment);
        let mut at = 0;
        while let Ok(Some((_, len))) = decode(&bytes[at..]) {
            (n, at) = (n + 1, at + len);
        }
    }
    n
}

#[test]
fn a_group_is_never_split_across_segments() {
    let vfs = SimVfs::new();
    let (mut store, _) = open(&vfs, small());
    let groups = grouped(9, 40);
    for group in &groups {
        store.append_group(group).unwrap();
    }
    store.sync().unwrap();
    drop(store);
    let segments = files(&vfs, ".seg");
    assert!(segments.len() >= 3, "{segments:?}");
    for segment in segments {
        let (bytes, mut at, mut more) = (read_file(&vfs, &segment), 0, false);
        while let Some(framed) = decode_framed(&bytes[at..]).unwrap() {
            (at, more) = (at + framed.len, framed.more);
        }
        assert!(!more, "{} ends inside a group", segment.display());
    }
    let (store, report) = open(&vfs, small());
    assert_eq!(report.dropped_bytes, 0);
    assert_eq!(replayed(&store), groups.concat());
}
