//! The `meridian` binary: run a node, a local demo cluster, the deterministic simulator, or measurements. It
//! wires the crates together: `meridian-node` runs `meridian-proto`'s `ClusterNode` for `server` and `demo`,
//! `meridian-sim` runs `sim`, and `meridian-bench` runs `bench`. Its real-process tests are in `tests/`: several
//! `meridian server` processes on 127.0.0.x, killed (SIGKILL), stopped (SIGTERM), restarted and joined, some
//! recording histories that `meridian-check` judges.
//!
//! Start with `cli/node.rs` (what `demo` and `server` share: flags, the data directory, starting a node), then
//! `cli/server.rs` and `cli/demo.rs`.
//!
//! Modules:
//! - `allocator`: the process's allocator, mimalloc, asked for alignment only when its size classes do not
//!   already give it (`docs/performance-history.md`, sections 6 and 20).
//! - `cli`: one module per subcommand (`demo`, `server`, `ctl`, `sim`, `bench`, `cert`); `cli/node.rs` what `demo` and
//!   `server` share; `cli/config.rs` `server --config FILE.toml` and `--print-config` (`docs/configuration.md`);
//!   `cli/http.rs` the small HTTP client of `ctl` and `server --join`.

mod allocator;
mod cli;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::ffi::OsString;
use std::process::ExitCode;

/// mimalloc rather than glibc's malloc: the request path allocates small, short-lived buffers (parsed commands,
/// replies, messages), and glibc's allocator was about a tenth of a pipelined SET's CPU
/// (`docs/performance-history.md`, section 6).
#[global_allocator]
static ALLOCATOR: allocator::Mimalloc = allocator::Mimalloc;

#[derive(Parser)]
#[command(name = "meridian", version = meridian_node::build_info::VERSION, about = "An infrastructure-aware, geo-distributed storage system")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How `server` and `demo` write their logs to stderr: `text` for people, `json` (one object per line,
    /// with the event's fields) for log collectors. The level comes from RUST_LOG (default: info).
    #[arg(long, global = true, default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
}

#[derive(Subcommand)]
enum Command {
    /// A local cluster in one process, with defaults (3 nodes, RESP on 127.0.0.1:6380-6382).
    Demo(cli::demo::DemoArgs),
    /// One node: of a new cluster (--peers) or joining a running one (--join).
    Server(cli::server::ServerArgs),
    /// Cluster administration over a node's HTTP port: status, node add, node remove.
    Ctl(cli::ctl::CtlArgs),
    /// Deterministic simulation of a protocol under faults, with its histories checked.
    Sim(cli::sim::SimArgs),
    /// Measurements on this machine: the datastores (store), real node processes (join, keyspaces), and YCSB's
    /// workloads against any RESP server (ycsb).
    Bench(cli::bench::BenchArgs),
    /// Certificates for TLS (docs/security.md): a CA (create-ca), a node's (create-node), a client's
    /// (create-client).
    Cert(cli::cert::CertArgs),
    /// Regions and the round trips between them: the presets, and topology files (docs/regions.md).
    Topology(cli::topology::TopologyArgs),
}

fn main() -> ExitCode {
    match cli::config::expand(&Cli::command(), std::env::args_os().collect()).and_then(run) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("meridian: {e}");
            ExitCode::from(2)
        }
    }
}

/// Parses the command line (a server's config file already added to it) and runs the command.
fn run(argv: Vec<OsString>) -> Result<ExitCode, String> {
    let mut command = Cli::command();
    let matches = command.clone().get_matches_from(argv);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.format(&mut command).exit());
    if matches!(cli.command, Command::Demo(_) | Command::Server(_)) {
        cli::node::init_logging(cli.log_format == "json");
    }
    match cli.command {
        Command::Demo(args) => cli::demo::run(args),
        Command::Server(args) => {
            let given = matches.subcommand_matches("server").expect("the server subcommand's matches");
            cli::server::run(args, &cli::config::resolved(&command, given))
        }
        Command::Ctl(args) => cli::ctl::run(args),
        Command::Sim(args) => cli::sim::run(args),
        Command::Bench(args) => cli::bench::run(args),
        Command::Topology(args) => cli::topology::run(args),
        Command::Cert(args) => cli::cert::run(args),
    }
}
