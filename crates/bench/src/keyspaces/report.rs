//! The figures of one `meridian bench keyspaces` run: as JSON (`--json`) and as the tables it prints.

use super::configs::Keyspace;
use super::recovery::Seen;
use super::writers::Written;
use serde::Serialize;
use std::fmt::{self, Write as _};

#[derive(Clone, Debug, Serialize)]
pub struct KeyspacesReport {
    pub nodes: u32,
    pub clients: usize,
    /// Seconds each put cell wrote before its SETs were timed, and seconds timed.
    pub warmup_s: f64,
    pub duration_s: u32,
    /// The nodes' pace for copying a chain, which bounds how fast a lost replica is copied back.
    pub migration_mb_per_s: u64,
    pub puts: Vec<PutCell>,
    pub memory: Vec<MemoryFigures>,
    /// M-D's resident memory per byte of data over M-M's, when both were measured.
    pub memory_md_over_mm: Option<f64>,
    pub recovery: Vec<RecoveryFigures>,
}

/// One cell of the put matrix.
#[derive(Clone, Debug, Serialize)]
pub struct PutCell {
    pub chain: &'static str,
    pub update: &'static str,
    pub value_bytes: usize,
    /// SETs acknowledged after the warm-up, over `seconds` (to the last of their acknowledgements).
    pub puts: u64,
    pub seconds: f64,
    pub puts_per_s: f64,
    /// Values only, in MiB (2^20 bytes) per second.
    pub mib_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    /// Refused SETs and broken connections, warm-up included.
    pub errors: u64,
    pub first_error: Option<String>,
}

/// Resident memory of a fresh cluster before and after one keyspace was filled.
#[derive(Clone, Debug, Serialize)]
pub struct MemoryFigures {
    pub chain: &'static str,
    pub value_bytes: usize,
    pub keys: u64,
    /// Bytes of keys and values written (each replica holds them once).
    pub data_bytes: u64,
    /// VmRSS summed over the node processes.
    pub rss_before_bytes: u64,
    pub rss_after_bytes: u64,
    /// What holding the data costs in memory across the nodes: after less before.
    pub held_bytes: u64,
    pub held_per_data_byte: f64,
}

/// One M-D recovery.
#[derive(Clone, Debug, Serialize)]
pub struct RecoveryFigures {
    /// Bytes of keys and values in the keyspace, and how many keys.
    pub data_bytes: u64,
    pub keys: u64,
    pub value_bytes: usize,
    /// The node SIGKILLed and restarted.
    pub node: u32,
    /// The keyspace's chains in which it held the memory replica, of all its chains.
    pub lost_chains: usize,
    pub chains: usize,
    /// Bytes of keys and values in those chains: what was copied back.
    pub lost_bytes: u64,
    /// Seconds from the restart until the node answered with a cluster map.
    pub up_s: Option<f64>,
    /// Seconds from the restart until every chain was at full replication, nothing lost, no step in flight;
    /// `None` if that did not happen within the bench's limit.
    pub recovered_s: Option<f64>,
    /// Cluster maps the manager made from the crash until then: each chain's repair is a removal and an Add,
    /// which takes several.
    pub map_changes: Option<u64>,
    /// `lost_bytes` over `recovered_s`, in MiB per second.
    pub copied_mib_per_s: Option<f64>,
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

fn seconds(s: Option<f64>, decimals: usize) -> String {
    s.map_or_else(|| "-".to_string(), |s| format!("{s:.decimals$}"))
}

impl PutCell {
    pub(super) fn new(keyspace: &Keyspace, value_len: usize, w: &Written) -> PutCell {
        let puts_per_s = w.per_second();
        PutCell {
            chain: keyspace.chain,
            update: keyspace.update.name(),
            value_bytes: value_len,
            puts: w.latency.count(),
            seconds: w.window.as_secs_f64(),
            puts_per_s,
            mib_per_s: puts_per_s * value_len as f64 / f64::from(1 << 20),
            p50_us: w.latency.micros(50.0),
            p99_us: w.latency.micros(99.0),
            p999_us: w.latency.micros(99.9),
            errors: w.errors,
            first_error: w.first_error.clone(),
        }
    }

    const HEADER: &str = "chain  update   value B     puts/s    MiB/s    p50 µs    p99 µs  p99.9 µs  errors";

    pub(super) fn row(&self) -> String {
        format!(
            "{:<6} {:<6} {:>9} {:>10.0} {:>8.2} {:>9.0} {:>9.0} {:>9.0} {:>7}",
            self.chain,
            self.update,
            self.value_bytes,
            self.puts_per_s,
            self.mib_per_s,
            self.p50_us,
            self.p99_us,
            self.p999_us,
            self.errors
        )
    }
}

impl MemoryFigures {
    pub(super) fn new(chain: &'static str, value_len: usize, w: &Written, before: u64, after: u64) -> MemoryFigures {
        let held = after.saturating_sub(before);
        MemoryFigures {
            chain,
            value_bytes: value_len,
            keys: w.acked,
            data_bytes: w.bytes(),
            rss_before_bytes: before,
            rss_after_bytes: after,
            held_bytes: held,
            held_per_data_byte: held as f64 / w.bytes().max(1) as f64,
        }
    }

    const HEADER: &str = "chain    value B      keys  data MiB  before MiB  after MiB  held MiB  held/data";

    pub(super) fn row(&self) -> String {
        format!(
            "{:<6} {:>9} {:>9} {:>9.1} {:>11.1} {:>10.1} {:>9.1} {:>10.2}",
            self.chain,
            self.value_bytes,
            self.keys,
            mib(self.data_bytes),
            mib(self.rss_before_bytes),
            mib(self.rss_after_bytes),
            mib(self.held_bytes),
            self.held_per_data_byte
        )
    }
}

impl RecoveryFigures {
    pub(super) fn new(w: &Written, value_len: usize, seen: &Seen) -> RecoveryFigures {
        let recovered_s = seen.timeline.whole.map(|d| d.as_secs_f64());
        RecoveryFigures {
            data_bytes: w.bytes(),
            keys: w.acked,
            value_bytes: value_len,
            node: seen.victim,
            lost_chains: seen.lost_chains,
            chains: seen.chains,
            lost_bytes: seen.lost_bytes,
            up_s: seen.timeline.up.map(|d| d.as_secs_f64()),
            recovered_s,
            map_changes: seen.timeline.map_changes,
            copied_mib_per_s: recovered_s.map(|s| mib(seen.lost_bytes) / s.max(f64::MIN_POSITIVE)),
        }
    }

    const HEADER: &str =
        "data MiB      keys  value B  node  memory replicas  copied MiB   up s  whole s  maps  copied MiB/s";

    pub(super) fn row(&self) -> String {
        format!(
            "{:>8.1} {:>9} {:>8} {:>5} {:>16} {:>11.1} {:>6} {:>8} {:>5} {:>13}",
            mib(self.data_bytes),
            self.keys,
            self.value_bytes,
            self.node,
            format!("{} of {}", self.lost_chains, self.chains),
            mib(self.lost_bytes),
            seconds(self.up_s, 2),
            seconds(self.recovered_s, 2),
            self.map_changes.map_or_else(|| "-".to_string(), |m| m.to_string()),
            seconds(self.copied_mib_per_s, 1)
        )
    }
}

/// M-D's resident memory per byte of data over M-M's, if both were measured.
fn md_over_mm(memory: &[MemoryFigures]) -> Option<f64> {
    let per_byte = |chain: &str| memory.iter().find(|m| m.chain == chain).map(|m| m.held_per_data_byte);
    per_byte("M-D").zip(per_byte("M-M")).filter(|&(_, mm)| mm > 0.0).map(|(md, mm)| md / mm)
}

impl KeyspacesReport {
    /// The report of a run; the M-D/M-M memory ratio is taken from `memory`.
    pub(super) fn new(
        bench: &super::KeyspacesBench,
        puts: Vec<PutCell>,
        memory: Vec<MemoryFigures>,
        recovery: Vec<RecoveryFigures>,
    ) -> KeyspacesReport {
        KeyspacesReport {
            nodes: bench.nodes,
            clients: bench.clients,
            warmup_s: super::puts::WARMUP.as_secs_f64(),
            duration_s: bench.duration_s,
            migration_mb_per_s: bench.migration_mb_per_s,
            puts,
            memory_md_over_mm: md_over_mm(&memory),
            memory,
            recovery,
        }
    }

    fn write_puts(&self, t: &mut String) -> fmt::Result {
        writeln!(
            t,
            "puts: {} clients, each with one SET in flight, sent to the head of its key's chain; {} s per cell after \
             {} s of warm-up",
            self.clients, self.duration_s, self.warmup_s
        )?;
        writeln!(t, "{}", PutCell::HEADER)?;
        for cell in &self.puts {
            writeln!(t, "{}", cell.row())?;
        }
        for cell in self.puts.iter().filter(|c| c.errors > 0) {
            let first = cell.first_error.as_deref().unwrap_or("-");
            writeln!(
                t,
                "  {} {} {} B: {} errors, the first: {first}",
                cell.chain, cell.update, cell.value_bytes, cell.errors
            )?;
        }
        Ok(())
    }

    fn write_memory(&self, t: &mut String) -> fmt::Result {
        writeln!(
            t,
            "\nresident memory: VmRSS summed over the nodes once an su keyspace is filled, less before; each chain in a \
             fresh cluster"
        )?;
        writeln!(t, "{}", MemoryFigures::HEADER)?;
        for m in &self.memory {
            writeln!(t, "{}", m.row())?;
        }
        match self.memory_md_over_mm {
            Some(r) => writeln!(t, "M-D holds {r:.2} of M-M's resident memory per byte of data"),
            None => Ok(()),
        }
    }

    fn write_recovery(&self, t: &mut String) -> fmt::Result {
        writeln!(
            t,
            "\nM-D recovery: a node holding memory replicas SIGKILLed and restarted on its data (migration cap {} MB/s \
             per chain);\nup: it answers with a map; whole: every chain at R, nothing lost, no step in flight \
             (seconds from the restart); maps: map changes until then",
            self.migration_mb_per_s
        )?;
        writeln!(t, "{}", RecoveryFigures::HEADER)?;
        for r in &self.recovery {
            writeln!(t, "{}", r.row())?;
        }
        Ok(())
    }
}

impl fmt::Display for KeyspacesReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut t = String::new();
        writeln!(
            t,
            "meridian bench keyspaces: {} nodes on 127.0.0.x sharing this machine's CPUs; keyspaces of two replicas, \
             read from the tail\n",
            self.nodes
        )?;
        self.write_puts(&mut t)?;
        self.write_memory(&mut t)?;
        self.write_recovery(&mut t)?;
        f.write_str(&t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(chain: &'static str, held: u64) -> MemoryFigures {
        MemoryFigures {
            chain,
            value_bytes: 10240,
            keys: 6400,
            data_bytes: 64 << 20,
            rss_before_bytes: 30 << 20,
            rss_after_bytes: (30 << 20) + held,
            held_bytes: held,
            held_per_data_byte: held as f64 / f64::from(64 << 20),
        }
    }

    fn report() -> KeyspacesReport {
        let cell = PutCell {
            chain: "M-D",
            update: "ausi",
            value_bytes: 10240,
            puts: 25_000,
            seconds: 5.0,
            puts_per_s: 5000.4,
            mib_per_s: 48.83,
            p50_us: 2950.2,
            p99_us: 9100.0,
            p999_us: 15000.0,
            errors: 2,
            first_error: Some("node 2: SET answered Error(\"TIMEOUT\")".into()),
        };
        let memory = vec![memory("M-M", 140 << 20), memory("M-D", 70 << 20)];
        let recovery = RecoveryFigures {
            data_bytes: 8 << 20,
            keys: 820,
            value_bytes: 10240,
            node: 3,
            lost_chains: 6,
            chains: 16,
            lost_bytes: 3 << 20,
            up_s: Some(0.41),
            recovered_s: None,
            map_changes: None,
            copied_mib_per_s: None,
        };
        KeyspacesReport {
            nodes: 3,
            clients: 16,
            warmup_s: 1.0,
            duration_s: 5,
            migration_mb_per_s: 64,
            puts: vec![cell],
            memory_md_over_mm: md_over_mm(&memory),
            memory,
            recovery: vec![recovery],
        }
    }

    #[test]
    fn the_tables_line_up_under_their_headers() {
        let text = report().to_string();
        let lines: Vec<&str> = text.lines().collect();
        let row = |start: &str| *lines.iter().find(|l| l.starts_with(start)).unwrap();
        assert_eq!(
            row("M-D    ausi"),
            "M-D    ausi       10240       5000    48.83      2950      9100     15000       2"
        );
        assert_eq!(row("chain  update").chars().count(), row("M-D    ausi").len());
        assert!(text.contains("  M-D ausi 10240 B: 2 errors, the first: node 2: SET answered Error(\"TIMEOUT\")"));
        assert_eq!(row("M-M "), "M-M        10240      6400      64.0        30.0      170.0     140.0       2.19");
        assert!(text.contains("M-D holds 0.50 of M-M's resident memory per byte of data"));
        let recovery =
            "     8.0       820    10240     3          6 of 16         3.0   0.41        -     -             -";
        assert_eq!(row("     8.0"), recovery);
        for (header, row) in [(MemoryFigures::HEADER, row("M-M ")), (RecoveryFigures::HEADER, recovery)] {
            assert_eq!(header.len(), row.len(), "{header}\n{row}");
        }
        assert_eq!(md_over_mm(&report().memory[..1]), None, "M-D not measured");
    }
}
