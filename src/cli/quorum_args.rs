//! The quorum protocol's options, as `ctl keyspace create` and `sim` both take them.

use clap::Args;
use meridian_core::{Protocol, ProtocolConfig};

#[derive(Args, Debug)]
pub struct QuorumArgs {
    /// With `--protocol quorum`: the replicas a read waits for, `one`, `quorum` (a majority, the default), `all`
    /// or a count.
    #[arg(long)]
    pub read_quorum: Option<String>,
    /// With `--protocol quorum`: the replicas a write waits for, as --read-quorum.
    #[arg(long)]
    pub write_quorum: Option<String>,
    /// With `--protocol quorum`: how writes are stamped, `quorum` (ABD, linearizable with R + W > N; the
    /// default) or `clock` (the coordinator's wall clock, one round trip fewer).
    #[arg(long)]
    pub timestamps: Option<String>,
}

impl QuorumArgs {
    /// `protocol`'s config with these options, which a protocol other than quorum refuses by name.
    pub fn config(&self, protocol: Protocol) -> Result<ProtocolConfig, String> {
        let (read, write, stamps) =
            (self.read_quorum.as_deref(), self.write_quorum.as_deref(), self.timestamps.as_deref());
        ProtocolConfig::from_options(protocol, read, write, stamps).map_err(|e| e.to_string())
    }
}
