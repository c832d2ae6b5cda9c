//! The figures of one run: as JSON (`--json`) and as the table `meridian bench store` prints.

use crate::compaction::{CompactionRun, OVERWRITES};
use crate::disk::DiskFigures;
use crate::gets::GetRun;
use crate::puts::PutRun;
use crate::sequential::Pair;
use crate::stores::StoreKind;
use crate::{mb_per_s, per_second, StoreBench};
use meridian_core::DurabilityMode;
use serde::Serialize;
use std::fmt::{self, Write as _};

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub dir: String,
    pub writers: usize,
    pub seconds_per_measurement: f64,
    pub max_bytes_per_measurement: u64,
    pub disk: DiskFigures,
    pub puts: Vec<PutFigures>,
    pub gets: Vec<GetFigures>,
    pub sequential: Vec<SequentialFigures>,
    pub compaction: CompactionFigures,
    /// Log store: group-commit put throughput over sync-mode put throughput, per value size.
    pub group_over_sync: Vec<Ratio>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PutFigures {
    pub store: StoreKind,
    /// `None` for the mem store, which has nothing to fsync.
    pub durability: Option<String>,
    pub value_bytes: usize,
    pub writers: usize,
    pub puts: u64,
    pub seconds: f64,
    pub puts_per_s: f64,
    /// Keys and values, in megabytes (10^6 bytes) per second.
    pub mb_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub fsyncs: Option<u64>,
    /// Async mode: the longest an acknowledged put waited for its fsync (the power-loss window).
    pub loss_window_max_ms: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct GetFigures {
    pub store: StoreKind,
    pub value_bytes: usize,
    pub gets: u64,
    pub gets_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// Log store gets while compaction runs and after, and the log bytes it reclaims.
#[derive(Clone, Debug, Serialize)]
pub struct CompactionFigures {
    pub value_bytes: usize,
    pub keys: u64,
    /// Versions written of each key.
    pub overwrites: u64,
    pub segment_bytes: u64,
    pub gets_during: u64,
    pub during_p50_us: f64,
    pub during_p99_us: f64,
    pub after_p50_us: f64,
    pub after_p99_us: f64,
    pub log_bytes_before: u64,
    pub live_bytes_before: u64,
    pub log_bytes_after: u64,
    pub live_bytes_after: u64,
    pub passes: u64,
}

impl CompactionFigures {
    pub(crate) fn new(value_bytes: usize, run: &CompactionRun) -> Self {
        CompactionFigures {
            value_bytes,
            keys: run.keys,
            overwrites: OVERWRITES,
            segment_bytes: run.segment_bytes,
            gets_during: run.during.count(),
            during_p50_us: run.during.micros(50.0),
            during_p99_us: run.during.micros(99.0),
            after_p50_us: run.idle.micros(50.0),
            after_p99_us: run.idle.micros(99.0),
            log_bytes_before: run.before.log_bytes,
            live_bytes_before: run.before.live_bytes(),
            log_bytes_after: run.after.log_bytes,
            live_bytes_after: run.after.live_bytes(),
            passes: run.after.compactions,
        }
    }

    pub(crate) fn summary(&self) -> String {
        format!(
            "compaction {}: get p99 {:.1} µs during, {:.1} µs after; log {} -> {} bytes",
            size(self.value_bytes),
            self.during_p99_us,
            self.after_p99_us,
            self.log_bytes_before,
            self.log_bytes_after
        )
    }
}

/// The log store's sequential puts against the raw disk, over `sequential::ROUNDS` pairs; every
/// figure is the median over the pairs.
#[derive(Clone, Debug, Serialize)]
pub struct SequentialFigures {
    pub value_bytes: usize,
    pub rounds: usize,
    pub puts_per_s: f64,
    /// Keys and values per second, in megabytes.
    pub payload_mb_s: f64,
    /// Bytes the log grew by (records with their framing) per second, in megabytes.
    pub log_mb_s: f64,
    /// The raw file's bandwidth in the same pairs.
    pub raw_mb_s: f64,
    /// Median of each pair's `log MB/s / raw MB/s`.
    pub fraction_of_raw: f64,
    pub fraction_min: f64,
    pub fraction_max: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Ratio {
    pub value_bytes: usize,
    pub group_puts_per_s: f64,
    pub sync_puts_per_s: f64,
    pub ratio: f64,
}

impl PutFigures {
    pub(crate) fn new(
        store: StoreKind,
        mode: Option<DurabilityMode>,
        value_bytes: usize,
        writers: usize,
        run: &PutRun,
    ) -> Self {
        let puts = run.puts();
        let key_bytes: u64 =
            run.per_writer.iter().enumerate().map(|(w, &n)| n * crate::puts::key(w, 0).len() as u64).sum();
        PutFigures {
            store,
            durability: mode.map(|m| m.to_string()),
            value_bytes,
            writers,
            puts,
            seconds: run.elapsed.as_secs_f64(),
            puts_per_s: per_second(puts, run.elapsed),
            mb_per_s: mb_per_s(puts * value_bytes as u64 + key_bytes, run.elapsed),
            p50_us: run.latency.micros(50.0),
            p99_us: run.latency.micros(99.0),
            p999_us: run.latency.micros(99.9),
            // A buffered store's sync fsyncs only a full batch, so the committer's count of syncs would
            // overstate its fsyncs.
            fsyncs: mode.filter(|_| store == StoreKind::Log).map(|_| run.commits.syncs),
            loss_window_max_ms: match mode {
                Some(DurabilityMode::Async) => Some(run.commits.loss_window_max.as_secs_f64() * 1e3),
                _ => None,
            },
        }
    }

    pub(crate) fn summary(&self) -> String {
        format!(
            "puts {} {} {}: {:.0}/s, p50 {:.1} µs, p99 {:.1} µs",
            self.store.name(),
            self.durability.as_deref().unwrap_or("-"),
            size(self.value_bytes),
            self.puts_per_s,
            self.p50_us,
            self.p99_us
        )
    }
}

impl GetFigures {
    pub(crate) fn new(store: StoreKind, value_bytes: usize, run: &GetRun) -> Self {
        GetFigures {
            store,
            value_bytes,
            gets: run.gets,
            gets_per_s: per_second(run.gets, run.elapsed),
            p50_us: run.latency.micros(50.0),
            p99_us: run.latency.micros(99.0),
        }
    }
}

impl SequentialFigures {
    pub(crate) fn new(value_bytes: usize, pairs: &[Pair]) -> Self {
        let median_of = |f: &dyn Fn(&Pair) -> f64| median(pairs.iter().map(f).collect());
        let fractions: Vec<f64> = pairs.iter().map(Pair::fraction).collect();
        SequentialFigures {
            value_bytes,
            rounds: pairs.len(),
            puts_per_s: median_of(&|p| p.puts as f64 / p.log_elapsed.as_secs_f64().max(f64::MIN_POSITIVE)),
            payload_mb_s: median_of(&|p| mb_per_s(p.payload_bytes, p.log_elapsed)),
            log_mb_s: median_of(&Pair::log_mb_s),
            raw_mb_s: median_of(&Pair::raw_mb_s),
            fraction_of_raw: median(fractions.clone()),
            fraction_min: fractions.iter().copied().fold(f64::INFINITY, f64::min),
            fraction_max: fractions.iter().copied().fold(0.0, f64::max),
        }
    }

    pub(crate) fn summary(&self) -> String {
        format!(
            "sequential log {}: {:.1} MB/s, {:.2} of raw ({:.1} MB/s beside it; median of {})",
            size(self.value_bytes),
            self.log_mb_s,
            self.fraction_of_raw,
            self.raw_mb_s,
            self.rounds
        )
    }
}

impl Report {
    pub(crate) fn new(
        bench: &StoreBench,
        disk: DiskFigures,
        puts: Vec<PutFigures>,
        gets: Vec<GetFigures>,
        sequential: Vec<SequentialFigures>,
        compaction: CompactionFigures,
    ) -> Report {
        let group_over_sync = bench.value_sizes.iter().filter_map(|&size| ratio(&puts, size)).collect();
        Report {
            dir: bench.dir.display().to_string(),
            writers: bench.writers,
            seconds_per_measurement: bench.limits.duration.as_secs_f64(),
            max_bytes_per_measurement: bench.limits.max_bytes,
            disk,
            puts,
            gets,
            sequential,
            compaction,
            group_over_sync,
        }
    }
}

/// The log store's group over sync put throughput at `size`, if both were measured.
fn ratio(puts: &[PutFigures], size: usize) -> Option<Ratio> {
    let rate = |mode: &str| {
        puts.iter()
            .find(|p| p.store == StoreKind::Log && p.value_bytes == size && p.durability.as_deref() == Some(mode))
            .map(|p| p.puts_per_s)
    };
    let (group, sync) = (rate("group")?, rate("sync")?);
    Some(Ratio { value_bytes: size, group_puts_per_s: group, sync_puts_per_s: sync, ratio: group / sync })
}

/// 100 B, 1 KiB, 10 KiB.
fn size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

fn opt<T: fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut t = String::new();
        self.write_disk(&mut t)?;
        self.write_puts(&mut t)?;
        self.write_gets(&mut t)?;
        self.write_sequential(&mut t)?;
        self.write_compaction(&mut t)?;
        self.write_ratios(&mut t)?;
        f.write_str(&t)
    }
}

impl Report {
    fn write_disk(&self, t: &mut String) -> fmt::Result {
        let d = &self.disk;
        writeln!(
            t,
            "meridian bench store: {} writers, {} s and {} at most per measurement, in {}",
            self.writers,
            self.seconds_per_measurement,
            size(self.max_bytes_per_measurement as usize),
            self.dir
        )?;
        writeln!(
            t,
            "\ndisk: sequential write {:.1} MB/s ({} in 1 MiB writes, then fdatasync, {:.2} s)",
            d.seq_write_mb_s,
            size(d.seq_write_bytes as usize),
            d.seq_write_seconds
        )?;
        writeln!(
            t,
            "      4 KiB append + fdatasync: p50 {:.1} µs, p99 {:.1} µs ({} samples)",
            d.fsync_p50_us, d.fsync_p99_us, d.fsync_samples
        )
    }

    fn write_puts(&self, t: &mut String) -> fmt::Result {
        writeln!(
            t,
            "\nputs: {} writers, one put outstanding each, acknowledged at the mode's durability point",
            self.writers
        )?;
        writeln!(
            t,
            "{:<9}{:<11}{:>7}{:>11}{:>9}{:>10}{:>10}{:>11}{:>9}{:>16}",
            "store",
            "durability",
            "value",
            "puts/s",
            "MB/s",
            "p50 µs",
            "p99 µs",
            "p99.9 µs",
            "fsyncs",
            "loss window ms"
        )?;
        for p in &self.puts {
            writeln!(
                t,
                "{:<9}{:<11}{:>7}{:>11.0}{:>9.1}{:>10.1}{:>10.1}{:>11.1}{:>9}{:>16}",
                p.store.name(),
                p.durability.as_deref().unwrap_or("-"),
                size(p.value_bytes),
                p.puts_per_s,
                p.mb_per_s,
                p.p50_us,
                p.p99_us,
                p.p999_us,
                opt(p.fsyncs),
                opt(p.loss_window_max_ms.map(|ms| format!("{ms:.1}")))
            )?;
        }
        Ok(())
    }

    fn write_gets(&self, t: &mut String) -> fmt::Result {
        writeln!(t, "\ngets: one thread, index in memory, log pages in the page cache")?;
        writeln!(t, "{:<9}{:>7}{:>12}{:>10}{:>10}", "store", "value", "gets/s", "p50 µs", "p99 µs")?;
        for g in &self.gets {
            let (store, value) = (g.store.name(), size(g.value_bytes));
            writeln!(t, "{store:<9}{value:>7}{:>12.0}{:>10.2}{:>10.2}", g.gets_per_s, g.p50_us, g.p99_us)?;
        }
        Ok(())
    }

    fn write_sequential(&self, t: &mut String) -> fmt::Result {
        let rounds = self.sequential.first().map_or(0, |s| s.rounds);
        writeln!(t, "\nsequential puts: log store, one writer, one fdatasync at the end; raw file of the same size")?;
        writeln!(t, "beside it in each pair, order alternating; medians over {rounds} pairs")?;
        writeln!(
            t,
            "{:>7}{:>11}{:>15}{:>11}{:>11}{:>11}{:>13}",
            "value", "puts/s", "payload MB/s", "log MB/s", "raw MB/s", "log/raw", "min..max"
        )?;
        for s in &self.sequential {
            let value = size(s.value_bytes);
            writeln!(
                t,
                "{value:>7}{:>11.0}{:>15.1}{:>11.1}{:>11.1}{:>11.2}{:>8.2}..{:.2}",
                s.puts_per_s, s.payload_mb_s, s.log_mb_s, s.raw_mb_s, s.fraction_of_raw, s.fraction_min, s.fraction_max
            )?;
        }
        Ok(())
    }

    fn write_compaction(&self, t: &mut String) -> fmt::Result {
        let c = &self.compaction;
        let (keys, versions, value, seg) = (c.keys, c.overwrites, size(c.value_bytes), size(c.segment_bytes as usize));
        writeln!(t, "\ncompaction: log store, {keys} keys x {versions} versions of {value}, {seg} segments")?;
        writeln!(t, "{:<9}{:>10}{:>10}{:>14}{:>14}", "gets", "p50 µs", "p99 µs", "log bytes", "live bytes")?;
        let (before, live_before) = (c.log_bytes_before, c.live_bytes_before);
        writeln!(t, "{:<9}{:>10.2}{:>10.2}{before:>14}{live_before:>14}", "during", c.during_p50_us, c.during_p99_us)?;
        let (after, live_after) = (c.log_bytes_after, c.live_bytes_after);
        writeln!(t, "{:<9}{:>10.2}{:>10.2}{after:>14}{live_after:>14}", "after", c.after_p50_us, c.after_p99_us)?;
        writeln!(t, "({} passes; log bytes before compaction on the during row, after it on the after row)", c.passes)
    }

    fn write_ratios(&self, t: &mut String) -> fmt::Result {
        writeln!(t, "\nlog store, {} writers: group commit over sync put throughput", self.writers)?;
        for r in &self.group_over_sync {
            let value = size(r.value_bytes);
            let (group, sync) = (r.group_puts_per_s, r.sync_puts_per_s);
            writeln!(t, "{value:>7}  {:.2}x  ({group:.0} vs {sync:.0} puts/s)", r.ratio)?;
        }
        Ok(())
    }
}

/// The middle value (the mean of the two middle ones for an even count); 0 for none.
fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size(100), "100 B");
        assert_eq!(size(1024), "1 KiB");
        assert_eq!(size(10 * 1024), "10 KiB");
        assert_eq!(size(256 << 20), "256 MiB");
        assert_eq!(size(1500), "1500 B");
    }

    #[test]
    fn median_takes_the_middle_whatever_the_order() {
        assert_eq!(median(vec![]), 0.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
