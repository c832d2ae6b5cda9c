//! What every client connection of a node shares: the way into the core and the facts the
//! introspection commands (INFO, CONFIG GET) report.

use crate::durability::Persistence;
use crate::inbox::CoreInbox;
use meridian_core::{Limits, NodeId};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Slack above the largest key or value for one RESP argument, so a value just over the limit reaches
/// [`Limits::check`] and gets its clear message instead of a protocol error.
const BULK_SLACK: usize = 1024;

pub(crate) struct Frontend {
    pub(crate) core: Arc<dyn CoreInbox>,
    pub(crate) limits: Limits,
    pub(crate) node: NodeId,
    pub(crate) resp_port: u16,
    pub(crate) cluster_nodes: usize,
    /// Peer messages dropped by the transport (full queues); reported by INFO.
    pub(crate) peer_drops: Arc<AtomicU64>,
    /// The durability mode and the core thread's fsync figures; reported by INFO.
    pub(crate) persistence: Arc<Persistence>,
}

impl Frontend {
    /// The largest RESP bulk string a client may send.
    pub(crate) fn bulk_max(&self) -> usize {
        self.limits.max_key_bytes.max(self.limits.max_value_bytes) + BULK_SLACK
    }
}
