//! The Meridian node: runs any sans-IO protocol core ([`meridian_core::Process`]) for real.
//!
//! A node is four parts, started by [`start_node`] and stopped by [`NodeHandle::shutdown`]:
//!
//! - `driver`: the core runs in its own tokio task, fed through a bounded channel (`inbox`); it batches
//!   the inputs that arrive while it is busy, syncs once per batch (group commit) and only then carries
//!   out the effects marked `after_sync`. `durability` holds the other modes: an fsync per write, or
//!   acknowledgement before a periodic fsync.
//! - `transport`: one outbound TCP connection per peer for sending, inbound connections for receiving,
//!   both speaking the frames of [`meridian_core::wire`] after a `Hello` handshake.
//! - `resp`: a RESP2 and RESP3 server for Redis clients, pipelining-aware; its port listens once the core serves.
//! - `http`: a small axum server with `/health`, `/ready`, `/metrics` (`metrics`: what the runner measures, and how the
//!   page is put together), `/v1/cluster` and the administration API.
//!
//! Reading order: `node` (how the parts are wired), then `driver`, `transport`, `resp`.

mod accept;
pub mod build_info;
mod data_dir;
mod drain;
mod driver;
mod durability;
mod error;
mod http;
mod inbox;
mod metrics;
mod node;
mod open_files;
mod resp;
mod timers;
mod transport;

/// The RESP request parser, for the cargo-fuzz target in `fuzz/` only: not part of the API, and compiled
/// only with the `fuzzing` feature.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::resp::parser::{Command, Parser, ProtocolError};
}

pub use data_dir::DataDir;
pub use durability::{SyncPolicy, BATCH_MAX, DEFAULT_ASYNC_INTERVAL, GROUP_BYTES_MAX};
pub use error::NodeError;
pub use node::{start_node, NodeHandle, NodeOptions};
pub use resp::{RespLimits, DEFAULT_CONNECTIONS_MAX, DEFAULT_PIPELINE_MAX};
