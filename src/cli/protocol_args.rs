//! The protocols' own options, as `ctl keyspace create` and `sim` both take them.

use clap::Args;
use meridian_core::ProtocolKnobs;

#[derive(Args, Debug)]
pub struct ProtocolArgs {
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
    /// With `--protocol lease`: how long a lease lets a replica answer reads of a key locally, in milliseconds
    /// (default 60000).
    #[arg(long)]
    pub lease_ms: Option<u32>,
    /// With `--protocol lease`: `active` (the default: a write reaches a majority and every replica holding a
    /// lease before it succeeds) or `passive` (while no lease is valid, the master's own write succeeds at once
    /// and spreads in the background; lost if the master fails first).
    #[arg(long)]
    pub write_mode: Option<String>,
    /// With `--protocol meteor`: how often each replica sends the others its status, in milliseconds (default
    /// 10).
    #[arg(long)]
    pub status_interval_ms: Option<u32>,
    /// With `--protocol meteor`: ε, how far apart any two nodes' wall clocks may be, in milliseconds (default
    /// 10). Reads count only statuses sent this much after they arrived; clocks further apart break the
    /// keyspace's guarantee.
    #[arg(long)]
    pub clock_bound_ms: Option<u32>,
    /// With `--protocol meteor`: θt, how old a status a read may count, in milliseconds: `0` (the default;
    /// MeteorShower1), `auto` (the largest its replicas' measured round trips make safe; MeteorShower2) or N (at
    /// most N, and no more than that bound unless --unsafe).
    #[arg(long)]
    pub theta_ms: Option<String>,
    /// With `--protocol meteor`: how many statuses in a row carry each change before it is left to the
    /// receiver's acknowledgement, 1 to 8 (default 2): a status lost now and then then costs nothing.
    #[arg(long)]
    pub redundancy: Option<u32>,
    /// With a fixed `--theta-ms`: apply it even above the bound measured round trips make safe, where reads may
    /// miss writes that succeeded before they began, their own included.
    #[arg(long = "unsafe")]
    pub unsafe_theta: bool,
}

impl ProtocolArgs {
    pub fn knobs(&self) -> ProtocolKnobs<'_> {
        ProtocolKnobs {
            read: self.read_quorum.as_deref(),
            write: self.write_quorum.as_deref(),
            timestamps: self.timestamps.as_deref(),
            lease_ms: self.lease_ms,
            write_mode: self.write_mode.as_deref(),
            status_interval_ms: self.status_interval_ms,
            clock_bound_ms: self.clock_bound_ms,
            theta: self.theta_ms.as_deref(),
            redundancy: self.redundancy,
            unsafe_theta: self.unsafe_theta,
        }
    }
}
