//! `meridian topology show PRESET|FILE` and `meridian topology list`: a topology's regions and the round trips
//! between them, checked and printed (docs/regions.md).

use clap::{Args, Subcommand};
use meridian_core::topology::{Topology, PRESETS};
use std::process::ExitCode;

#[derive(Args)]
pub struct TopologyArgs {
    #[command(subcommand)]
    command: TopologyCommand,
}

#[derive(Subcommand)]
enum TopologyCommand {
    /// Prints a preset (canopus-7, globlease-4, leads-3, lan) or a topology file, after checking it.
    Show {
        /// A preset's name or a TOML file's path.
        topology: String,
    },
    /// Lists the presets that ship with the binary.
    List,
}

pub fn run(args: TopologyArgs) -> Result<ExitCode, String> {
    match args.command {
        TopologyCommand::Show { topology } => print!("{}", Topology::load(&topology).map_err(|e| e.to_string())?),
        TopologyCommand::List => {
            for (name, _) in PRESETS {
                let t = Topology::load(name).map_err(|e| e.to_string())?;
                println!("{name}: {} region(s): {}", t.regions().len(), t.description);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
