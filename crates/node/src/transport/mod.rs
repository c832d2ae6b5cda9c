//! The TCP peer transport, plain or over mutual TLS (`mutual_tls.rs`).
//!
//! Each node keeps one outbound connection per peer whose address it knows (the core tells it, with
//! [`meridian_core::Effect::Address`], as the cluster changes), used only to send to it, and accepts inbound
//! connections, used only to receive; so a pair of nodes talks over two connections, one per direction,
//! and neither side has to decide who dials whom. Every connection starts with a [`wire::Hello`] naming
//! the caller and the cluster fingerprint, and then carries [`wire`] frames.
//!
//! Delivery is best effort, by design: when a connection fails, the messages queued for it or in flight
//! on it may be lost, and when a peer's queue is full (`PEER_QUEUE_MAX`) new messages to it are dropped
//! and counted. The protocols retransmit what matters, as they must over any real network; the transport
//! only guarantees that what arrives from one peer arrives in the order it was sent and uncorrupted (the
//! frame checksum).
//!
//! [`wire`]: meridian_core::wire
//! [`wire::Hello`]: meridian_core::wire::Hello

mod handshake;
mod identity;
mod inbound;
mod mutual_tls;
mod outbound;
mod refusals;
mod wan;

pub(crate) use handshake::Gate;
pub(crate) use identity::{common_name, node_named};
pub(crate) use inbound::accept_peers;
pub use mutual_tls::{PeerTls, PeerTlsError};
pub(crate) use outbound::{spawner, PeerQueues};
pub use wan::{UnknownRegion, Wan};
