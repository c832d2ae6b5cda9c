//! The Meridian node: runs any sans-IO protocol core ([`meridian_core::Process`]) for real, over tokio, TCP and
//! the file system. It knows no protocol: the binary hands it `meridian-proto`'s `ClusterNode`.
//!
//! A node is four parts, started by [`start_node`] and stopped by [`NodeHandle::shutdown`]:
//!
//! - `driver`: the core runs in its own tokio task, fed through a bounded channel (`inbox`); it batches
//!   the inputs that arrive while it is busy, syncs once per batch (group commit) and only then carries
//!   out the effects marked `after_sync`. `durability` holds the other modes: an fsync per write, or
//!   acknowledgement before a periodic fsync. On a multi-threaded runtime each fsync runs on the core's own
//!   fsync thread while the core takes more inputs. While the core is idle, a connection that is not pipelining
//!   steps it in its own task (`CoreHandle`). Either way the driver first asks the process for an answer it can
//!   give at once, without effects (`Process::read_at_once`, `Process::write_at_once`).
//! - `transport`: one outbound TCP connection per peer for sending, inbound connections for receiving,
//!   both speaking the frames of [`meridian_core::wire`] after a `Hello` handshake; with `--wan`, inbound
//!   frames are held back as a topology's WAN would (`transport/wan.rs`).
//! - `resp`: a RESP2 and RESP3 server for Redis clients, pipelining-aware, on a plain port, a TLS port or both;
//!   its ports listen once the core serves.
//!   Its limits, malformed input, SCAN, KEYS, INFO and the commands built at the front end: `docs/resp.md`.
//! - `http`: a small axum server with `/health`, `/ready`, `/metrics` (`docs/metrics.md`), `/v1/cluster` and the
//!   administration API.
//!
//! Reading order: `node` (how the parts are wired), then `driver`, `transport`, `resp`.
//!
//! Modules:
//! - `accept`: the accept loop the RESP, TLS and peer listeners share.
//! - `build_info`: the commit the binary was built from (found by `build.rs`), for `--version`, INFO and
//!   `meridian_build_info`.
//! - `data_dir`: a node's data directory: one node id for life, one process at a time (`LOCK`), one data format.
//! - `drain`: the graceful-shutdown signal its listeners and client connections watch.
//! - `driver`: the core task; `driver/syncer.rs` its fsync thread, `driver/clients.rs` the reply channels of the
//!   requests it has taken.
//! - `durability`: the `sync`, `group` and `async` modes and the bounds of a group commit (`docs/durability.md`).
//! - `error`: why a node could not start.
//! - `fuzzing` (with the `fuzzing` feature only): the RESP parser and `ACL SETUSER`'s rules, for the cargo-fuzz
//!   targets in the root `fuzz/`.
//! - `http`: the HTTP server.
//! - `inbox`: the one channel into the core task: peer messages, single requests, and the requests a pipelining
//!   connection hands over together.
//! - `metrics`: the runner's figures and the `/metrics` page (the core writes its own part, in
//!   `meridian-proto`'s `node/metrics.rs`).
//! - `node`: starting and stopping a node, and how the parts are wired.
//! - `open_files`: fitting the client connection cap to the open-file limit.
//! - `resp`: the RESP server: one task per connection reads, dispatches and encodes (`resp/connection.rs`); one
//!   task writes every connection's replies at the end of the worker's turn (`resp/outbox.rs`); numbered
//!   databases made on SELECT (`resp/databases.rs`); per-command counts and latency (`resp/stats.rs`).
//! - `timers`: the core's named timers on the monotonic clock.
//! - `tls`: the client TLS port's certificate, key and client-certificate rule, and its handshake.
//! - `transport`: the TCP peer transport, its handshake and the WAN emulation.

mod accept;
pub mod build_info;
mod certificates;
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
mod tls;
mod transport;

/// The RESP request parser, for the cargo-fuzz target in `fuzz/` only: not part of the API, and compiled
/// only with the `fuzzing` feature.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::resp::acl::rules::applied as acl_setuser;
    pub use crate::resp::parser::{Command, Parser, ProtocolError};
}

pub use certificates::ReloadError;
pub use data_dir::{DataDir, DataDirError, FORMAT as DATA_FORMAT};
pub use durability::{SyncPolicy, BATCH_MAX, DEFAULT_ASYNC_INTERVAL, GROUP_BYTES_MAX};
pub use error::NodeError;
pub use http::{BadToken, HttpSecurity, HttpToken, HttpsConfig};
pub use node::{start_node, NodeHandle, NodeOptions};
pub use resp::{BadRespLimits, EmptyPassword, Password, RespLimits, DEFAULT_CONNECTIONS_MAX, DEFAULT_PIPELINE_MAX};
pub use tls::{client_config, CertUser, ClientAuth, TlsConfig, TlsError, TlsFiles, TlsListen};
pub use transport::{PeerTls, PeerTlsError, UnknownRegion, Wan};
