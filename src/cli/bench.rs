//! `meridian bench`: measurements on the machine at hand. `bench store` measures the datastores under
//! each durability mode beside the disk's own bandwidth and fsync latency (crate `meridian-bench`).

use clap::{Args, Subcommand};
use meridian_bench::{Limits, StoreBench, DEFAULT_WRITERS, VALUE_SIZES};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: BenchCommand,
}

#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// Put and get throughput and latency of the mem and log stores in each durability mode, beside the
    /// disk's raw sequential write bandwidth and fsync latency measured in the same directory.
    Store(StoreArgs),
}

#[derive(Args, Debug)]
pub struct StoreArgs {
    /// Where to put the stores and test files (default: a temporary directory, removed afterwards).
    /// Measure on the disk you mean to run on.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 2.0)]
    duration: f64,
    /// Bytes per measurement at most (keys and values; the raw test writes at most 256 MiB).
    /// Accepts K, M and G suffixes (powers of 1024).
    #[arg(long, default_value = "256M", value_parser = parse_bytes)]
    max_bytes: u64,
    /// Concurrent writers handing puts to the committer.
    #[arg(long, default_value_t = DEFAULT_WRITERS)]
    writers: usize,
    /// Also write every figure to this file as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// A byte count with an optional K, M or G suffix.
fn parse_bytes(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, shift) = match s.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&s[..s.len() - 1], 10),
        Some('M') => (&s[..s.len() - 1], 20),
        Some('G') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    let n: u64 = digits.parse().map_err(|_| format!("{s:?} is not a byte count like 4096, 64K, 256M or 1G"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("{s} is too large"))
}

pub fn run(args: BenchArgs) -> Result<ExitCode, String> {
    match args.what {
        BenchCommand::Store(store) => run_store(store),
    }
}

fn run_store(args: StoreArgs) -> Result<ExitCode, String> {
    // Checked here because a negative or NaN duration cannot even be built; the bench checks the rest.
    if !(args.duration > 0.0 && args.duration <= 600.0) {
        return Err("--duration must be more than 0 and at most 600 seconds".into());
    }
    let temp = match &args.dir {
        Some(_) => None,
        None => Some(tempfile::Builder::new().prefix("meridian-bench-").tempdir().map_err(|e| e.to_string())?),
    };
    let dir = args.dir.clone().unwrap_or_else(|| temp.as_ref().expect("temp dir").path().to_path_buf());
    let bench = StoreBench {
        dir,
        writers: args.writers,
        value_sizes: VALUE_SIZES.to_vec(),
        limits: Limits { duration: Duration::from_secs_f64(args.duration), max_bytes: args.max_bytes },
    };
    let report = meridian_bench::run(&bench, &mut |line| eprintln!("{line}")).map_err(|e| e.to_string())?;
    println!("{report}");
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(path, json + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn byte_counts_take_binary_suffixes() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("64k"), Ok(64 << 10));
        assert_eq!(parse_bytes("256M"), Ok(256 << 20));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert!(parse_bytes("M").is_err() && parse_bytes("12X").is_err());
        assert!(parse_bytes("99999999999G").unwrap_err().contains("too large"));
    }
}
