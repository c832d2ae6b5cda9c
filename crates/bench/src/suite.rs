//! Which measurements run, in which order. Each store measurement gets a fresh store in its own
//! subdirectory, removed when it is done, so no measurement reads another's data or page cache.

use crate::report::{CompactionFigures, GetFigures, PutFigures, Report, SequentialFigures};
use crate::stores::StoreKind;
use crate::{compaction, disk, gets, incompressible, puts, sequential, StoreBench, WRITERS_MAX};
use bytes::Bytes;
use meridian_core::DurabilityMode;
use meridian_node::SyncPolicy;
use meridian_store::VALUE_MAX;
use std::io;
use std::path::Path;

/// Runs the whole store benchmark; `progress` hears one line per finished measurement.
pub fn run(bench: &StoreBench, progress: &mut dyn FnMut(&str)) -> io::Result<Report> {
    check(bench)?;
    std::fs::create_dir_all(&bench.dir)?;
    let disk = disk::measure(&bench.dir, &bench.limits)?;
    progress(&format!("disk: {:.1} MB/s sequential, fsync p50 {:.1} µs", disk.seq_write_mb_s, disk.fsync_p50_us));
    let (mut puts, mut gets, mut sequential) = (Vec::new(), Vec::new(), Vec::new());
    for &size in &bench.value_sizes {
        let value = Bytes::from(incompressible(size));
        for (kind, mode) in cells() {
            let (put, get) = put_cell(bench, kind, mode, &value)?;
            progress(&put.summary());
            puts.push(put);
            gets.extend(get);
        }
        let seq = sequential_cell(bench, &value)?;
        progress(&seq.summary());
        sequential.push(seq);
    }
    let compaction = compaction_cell(bench)?;
    progress(&compaction.summary());
    Ok(Report::new(bench, disk, puts, gets, sequential, compaction))
}

/// Value size of the compaction measurement: one size is enough to show what compaction costs reads.
const COMPACTION_VALUE_BYTES: usize = 1024;

fn compaction_cell(bench: &StoreBench) -> io::Result<CompactionFigures> {
    let dir = bench.dir.join("compaction-log");
    let value = Bytes::from(incompressible(COMPACTION_VALUE_BYTES));
    let run = compaction::run(&dir, &value, &bench.limits)?;
    remove_dir(&dir)?;
    Ok(CompactionFigures::new(COMPACTION_VALUE_BYTES, &run))
}

fn check(bench: &StoreBench) -> io::Result<()> {
    let invalid = |what: String| Err(io::Error::new(io::ErrorKind::InvalidInput, what));
    if !(1..=WRITERS_MAX).contains(&bench.writers) {
        return invalid(format!("writers must be 1..={WRITERS_MAX}, not {}", bench.writers));
    }
    if let Some(size) = bench.value_sizes.iter().find(|&&s| s == 0 || s > VALUE_MAX) {
        return invalid(format!("value size {size} is outside 1..={VALUE_MAX}"));
    }
    if bench.limits.duration.is_zero() || bench.limits.max_bytes == 0 {
        return invalid("the duration and the byte budget must not be zero".into());
    }
    Ok(())
}

/// The mem store once (`None`: its syncs cost nothing, so the mode cannot matter), the log store in
/// every durability mode, and the buffered store under group commit (its `sync` fsyncs only a full batch).
fn cells() -> [(StoreKind, Option<DurabilityMode>); 5] {
    [
        (StoreKind::Mem, None),
        (StoreKind::Log, Some(DurabilityMode::Sync)),
        (StoreKind::Log, Some(DurabilityMode::Group)),
        (StoreKind::Log, Some(DurabilityMode::Async)),
        (StoreKind::Buffered, Some(DurabilityMode::Group)),
    ]
}

/// Concurrent puts into a fresh store; after the group-commit run (the node's default), gets from it.
fn put_cell(
    bench: &StoreBench,
    kind: StoreKind,
    mode: Option<DurabilityMode>,
    value: &Bytes,
) -> io::Result<(PutFigures, Option<GetFigures>)> {
    let mode_name = mode.map_or("none", |m| m.name());
    let dir = bench.dir.join(format!("puts-{}-{mode_name}-{}", kind.name(), value.len()));
    let mut store = kind.open(&dir)?;
    let policy = mode.map_or_else(SyncPolicy::default, SyncPolicy::with_default);
    let run = puts::run(store.as_mut(), policy, bench.writers, value, &bench.limits)?;
    let put = PutFigures::new(kind, mode, value.len(), bench.writers, &run);
    let get = if policy == SyncPolicy::default() {
        let got = gets::run(store.as_ref(), &run.per_writer, &bench.limits)?;
        Some(GetFigures::new(kind, value.len(), &got))
    } else {
        None
    };
    drop(store);
    remove_dir(&dir)?;
    Ok((put, get))
}

fn sequential_cell(bench: &StoreBench, value: &Bytes) -> io::Result<SequentialFigures> {
    let dir = bench.dir.join(format!("sequential-{}", value.len()));
    std::fs::create_dir_all(&dir)?;
    let pairs = sequential::run(&dir, value, &bench.limits)?;
    remove_dir(&dir)?;
    Ok(SequentialFigures::new(value.len(), &pairs))
}

/// Removes a measurement's directory; the mem store never creates one.
fn remove_dir(dir: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}
