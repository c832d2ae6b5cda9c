//! What every client connection of a node shares: the way into the core and the facts the
//! introspection commands (INFO, CONFIG GET) report.

use super::commands::Session;
use super::outbox::Outbox;
use crate::drain::Drain;
use crate::inbox::{Answer, CoreInbox};
use crate::metrics::NodeMetrics;
use meridian_core::acl::{Access, User};
use meridian_core::{Limits, NodeId, Request};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use tokio::sync::{oneshot, watch};

/// Requests of one connection in flight, by default, before the server stops reading from it.
pub const DEFAULT_PIPELINE_MAX: usize = 1024;
/// Client connections served at once, by default (Redis' `maxclients` default).
pub const DEFAULT_CONNECTIONS_MAX: usize = 10_000;

/// Bounds on what Redis clients can make a node hold besides keys and values (`docs/resp.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RespLimits {
    /// Requests of one connection whose replies have not been written yet; at this many the server
    /// stops reading from the connection, and TCP pushes back on the client.
    pub pipeline_max: usize,
    /// Client connections served at once; one more gets `-ERR max number of clients reached` and is
    /// closed.
    pub connections_max: usize,
}

/// A bound of [`RespLimits`] that is zero, which [`RespLimits::check`] refuses.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BadRespLimits {
    #[error("pipeline_max must be at least 1")]
    Pipeline,
    #[error("connections_max must be at least 1")]
    Connections,
}

impl RespLimits {
    /// Both bounds must admit at least one: a zero would serve nothing and wait forever.
    pub fn check(&self) -> Result<(), BadRespLimits> {
        match (self.pipeline_max, self.connections_max) {
            (0, _) => Err(BadRespLimits::Pipeline),
            (_, 0) => Err(BadRespLimits::Connections),
            _ => Ok(()),
        }
    }
}

impl Default for RespLimits {
    fn default() -> Self {
        RespLimits { pipeline_max: DEFAULT_PIPELINE_MAX, connections_max: DEFAULT_CONNECTIONS_MAX }
    }
}

pub(crate) struct Frontend {
    pub(crate) core: Arc<dyn CoreInbox>,
    pub(crate) limits: Limits,
    pub(crate) resp: RespLimits,
    pub(crate) node: NodeId,
    pub(crate) resp_port: u16,
    pub(crate) cluster_nodes: usize,
    /// What INFO and `/metrics` report: commands, clients, fsyncs, peer drops, uptime.
    pub(crate) metrics: Arc<NodeMetrics>,
    /// The last CLIENT ID handed out on this node.
    pub(crate) client_ids: AtomicU64,
    /// Set when the node shuts down: connections stop reading and finish what they have read.
    pub(crate) drain: Drain,
    /// Replies to write at the end of this turn.
    pub(crate) outbox: Outbox,
    /// The `default` user as this node has it until the cluster map has one: with `--requirepass`'s password,
    /// if given.
    pub(crate) default_user: User,
    /// The cluster map's users and keyspace names, as the core publishes them.
    pub(crate) access: watch::Receiver<Option<Arc<Access>>>,
}

impl Frontend {
    /// A new connection's CLIENT ID: unique on this node for as long as it runs, never 0.
    pub(crate) fn next_client_id(&self) -> u64 {
        self.client_ids.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
    }

    /// Hands a command's request to the core: stepped at once if the core is idle, unless the connection is
    /// pipelining. A pipeline's requests go to the core task, which takes them in one batch on one worker while
    /// the connections parse on the others; stepped one by one from both workers, the core's tables would move
    /// between the CPUs' caches with every request (interleaved pipelined runs: 3 of 8 won, 0.2–0.4 µs more CPU
    /// per request, `docs/performance-history.md` section 14).
    ///
    /// A pipeline's requests wait in the session until the connection has parsed what it read and hands them
    /// over together ([`Self::flush`]): one push into the core's inbox, and one take out of it, for all of them
    /// (or for each [`crate::inbox::HANDOVER_BYTES_MAX`] of their values).
    pub(crate) fn submit(&self, session: &mut Session, req: Request) -> Answer {
        if session.pipelining {
            let (tx, rx) = oneshot::channel();
            if session.queued.push(req, tx) {
                self.flush(session);
            }
            Answer::Coming(rx)
        } else {
            // After the requests queued before it, in the order the client sent them.
            self.flush(session);
            self.core.submit(req)
        }
    }

    /// Hands the requests the session has queued to the core task. The connection calls it before it waits
    /// for anything: a reply it waits for may be one of them.
    pub(crate) fn flush(&self, session: &mut Session) {
        if let Some(reqs) = session.queued.take() {
            self.core.enqueue(reqs);
        }
    }

    /// The largest RESP argument kept: no key or value can be longer. A longer one is dropped by the
    /// parser as it arrives and its command refused.
    pub(crate) fn bulk_max(&self) -> usize {
        self.limits.max_key_bytes.max(self.limits.max_value_bytes)
    }
}
