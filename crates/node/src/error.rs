//! Why a node could not start. Every variant names what failed and where, so the binary can print it as
//! is and exit.

use meridian_core::NodeId;
use std::net::SocketAddr;

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("node id {} is not in the cluster config (its members are {members})", .node.0)]
    UnknownNode { node: NodeId, members: String },
    #[error("cannot bind {what} listener {addr}: {source}")]
    Bind {
        /// Which listener: "RESP", "peer" or "HTTP".
        what: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot start the core thread: {0}")]
    CoreThread(std::io::Error),
}
