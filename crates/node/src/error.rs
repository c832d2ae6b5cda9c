//! Why a node could not start. Every variant names what failed and where, so the binary can print it as
//! is and exit.

use crate::resp::BadRespLimits;
use std::net::SocketAddr;

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("cannot bind {what} listener {addr}: {source}")]
    Bind {
        /// Which listener: "RESP", "peer" or "HTTP".
        what: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("invalid node options: {0}")]
    Options(String),
    #[error("invalid node options: {0}")]
    Resp(#[from] BadRespLimits),
}
