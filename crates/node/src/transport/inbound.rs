//! Receiving from peers: each accepted connection must open with an admissible `Hello` within
//! [`HELLO_TIMEOUT`]; after that its frames are decoded and handed to the core as `(from, msg)`. A caller that
//! is refused (another cluster, a clashing id, a frame version this node does not speak) is told why in plain
//! text before the connection closes, so both ends log the reason. Any
//! decode error (bad checksum, unknown version, oversized or undecodable frame) closes that connection
//! only; the peer's sender reconnects. A node that emulates a WAN hands each frame on when the connection's
//! delay line says (`wan.rs`).

use super::handshake::{Admitted, Refusal};
use super::wan::{DelayLine, HELD_BYTES_MAX};
use super::Gate;
use crate::accept::accept_loop;
use crate::inbox::{deliver, CoreStopped, Input};
use bytes::{Buf, BytesMut};
use meridian_core::wire::{self, Hello, WireError};
use meridian_core::NodeId;
use serde::de::DeserializeOwned;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{self, Sender};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tracing::{debug, warn};

/// A caller that has not introduced itself by then is not a Meridian peer.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes read per call; the buffer holds at most one partial frame (at most `wire::FRAME_MAX`) plus this.
const READ_CHUNK: usize = 64 << 10;

#[derive(Debug, thiserror::Error)]
enum InboundError {
    #[error("no hello within {HELLO_TIMEOUT:?}")]
    HelloTimeout,
    #[error("closed before its hello")]
    NoHello,
    #[error("{0}")]
    Refused(#[from] Refusal),
    #[error("{0}")]
    Wire(#[from] WireError),
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("the core has stopped")]
    CoreStopped,
}

impl From<CoreStopped> for InboundError {
    fn from(_: CoreStopped) -> Self {
        InboundError::CoreStopped
    }
}

/// Accepts peer connections until the task is aborted.
pub(crate) async fn accept_peers<M>(listener: TcpListener, gate: Gate, inbox: Sender<Input<M>>)
where
    M: DeserializeOwned + Send + 'static,
{
    accept_loop(listener, "peer", None, None, |stream, addr| serve_peer(stream, addr, gate.clone(), inbox.clone()))
        .await
}

async fn serve_peer<M: DeserializeOwned>(mut stream: TcpStream, addr: SocketAddr, gate: Gate, inbox: Sender<Input<M>>) {
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let admitted = match handshake(&mut stream, &mut buf, &gate, u64::from(addr.port())).await {
        Ok(admitted) => admitted,
        Err(e) => {
            warn!(%addr, "refusing peer connection: {e}");
            // The caller logs why, whatever version it speaks (`wire::refusal`); a failed write changes nothing.
            let _ = stream.write_all(&wire::refusal(&e.to_string())).await;
            return;
        }
    };
    let from = admitted.from;
    debug!(peer = %from, %addr, "peer connected");
    match receive(&mut stream, &mut buf, admitted, &inbox).await {
        Ok(()) => debug!(peer = %from, %addr, "peer closed its connection"),
        Err(e) => warn!(peer = %from, %addr, "closing peer connection: {e}"),
    }
}

async fn handshake(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    gate: &Gate,
    seed: u64,
) -> Result<Admitted, InboundError> {
    let (hello, _): (Hello, _) = tokio::time::timeout(HELLO_TIMEOUT, read_frame(stream, buf))
        .await
        .map_err(|_| InboundError::HelloTimeout)??
        .ok_or(InboundError::NoHello)?;
    Ok(gate.admit(&hello, seed)?)
}

/// Passes every frame to the core until the peer closes the connection.
async fn receive<M: DeserializeOwned>(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    admitted: Admitted,
    inbox: &Sender<Input<M>>,
) -> Result<(), InboundError> {
    let Admitted { from, line } = admitted;
    if let Some(line) = line {
        return receive_delayed(stream, buf, from, line, inbox).await;
    }
    while let Some((msg, _)) = read_frame(stream, buf).await? {
        deliver(inbox, from, msg).await?;
    }
    Ok(())
}

/// Reads frames as they arrive and hands each on when `line` says, holding at most [`HELD_BYTES_MAX`] bytes:
/// beyond that the connection is not read until held frames are handed on.
async fn receive_delayed<M: DeserializeOwned>(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    from: NodeId,
    mut line: DelayLine,
    inbox: &Sender<Input<M>>,
) -> Result<(), InboundError> {
    let held = Arc::new(Semaphore::new(HELD_BYTES_MAX));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let read = async move {
        while let Some((msg, bytes)) = read_frame::<M>(stream, buf).await? {
            let bytes = bytes.min(HELD_BYTES_MAX);
            let permit = held.clone().acquire_many_owned(bytes as u32).await.expect("the semaphore stays open");
            // The receiver outlives this sender unless it failed, which ends this connection anyway.
            let _ = tx.send((line.due(Instant::now(), bytes), msg, permit));
        }
        Ok(())
    };
    let hand_on = async {
        while let Some((due, msg, _permit)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            deliver(inbox, from, msg).await?;
        }
        Ok(())
    };
    tokio::try_join!(read, hand_on).map(|_| ())
}

/// The next frame and its size, reading more as needed; `None` when the peer closes the connection.
async fn read_frame<T: DeserializeOwned>(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
) -> Result<Option<(T, usize)>, InboundError> {
    loop {
        if let Some((msg, used)) = wire::decode(buf)? {
            buf.advance(used);
            return Ok(Some((msg, used)));
        }
        buf.reserve(READ_CHUNK);
        if stream.read_buf(buf).await? == 0 {
            return Ok(None);
        }
    }
}
