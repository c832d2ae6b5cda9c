//! Receiving from peers: each accepted connection must open with an admissible `Hello` within
//! [`HELLO_TIMEOUT`]; after that its frames are decoded and handed to the core as `(from, msg)`. A caller that
//! is refused (another cluster, a clashing id, a frame version this node does not speak) is told why in plain
//! text before the connection closes, so both ends log the reason. Any
//! decode error (bad checksum, unknown version, oversized or undecodable frame) closes that connection
//! only; the peer's sender reconnects. A node that emulates a WAN hands each frame on when the connection's
//! delay line says (`wan.rs`). With mutual TLS (`mutual_tls.rs`) each connection runs its TLS handshake
//! first, on its own task, and is then served exactly as a plain one, the code generic over the stream so the
//! plain path stays as it was.

use super::handshake::{Admitted, Refusal};
use super::mutual_tls::{PeerTls, TLS_HANDSHAKE_RECORD};
use super::wan::{DelayLine, HELD_BYTES_MAX};
use super::Gate;
use crate::accept::accept_loop;
use crate::inbox::{deliver, CoreStopped, Input};
use crate::metrics::PeerTlsFailure;
use bytes::{Buf, BytesMut};
use meridian_core::wire::{self, Hello, WireError};
use meridian_core::NodeId;
use serde::de::DeserializeOwned;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
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
    #[error("it speaks TLS, and this node's peer port is plain TCP: start every node with --peer-certs-dir, or none")]
    SpeaksTls,
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

/// Accepts peer connections until the task is aborted; with `tls`, over mutual TLS only.
pub(crate) async fn accept_peers<M>(listener: TcpListener, gate: Gate, inbox: Sender<Input<M>>, tls: Option<PeerTls>)
where
    M: DeserializeOwned + Send + 'static,
{
    match tls {
        None => {
            let serve = |stream, addr| serve_peer(stream, addr, gate.clone(), inbox.clone(), None);
            accept_loop(listener, "peer", None, None, serve).await
        }
        Some(tls) => {
            let serve = |stream, addr| serve_tls_peer(stream, addr, gate.clone(), inbox.clone(), tls.clone());
            accept_loop(listener, "peer", None, None, serve).await
        }
    }
}

async fn serve_tls_peer<M: DeserializeOwned>(
    stream: TcpStream,
    addr: SocketAddr,
    gate: Gate,
    inbox: Sender<Input<M>>,
    tls: PeerTls,
) {
    match tls.accept(stream).await {
        Ok((stream, certified)) => serve_peer(stream, addr, gate, inbox, Some((certified, &tls))).await,
        Err(e) => gate.refusals.refused(addr, &e),
    }
}

/// Serves a caller; `certified` is the node its certificate names, over mutual TLS.
async fn serve_peer<M: DeserializeOwned, S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    addr: SocketAddr,
    gate: Gate,
    inbox: Sender<Input<M>>,
    certified: Option<(NodeId, &PeerTls)>,
) {
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let admitted = match handshake(&mut stream, &mut buf, &gate, u64::from(addr.port()), certified.map(|c| c.0)).await {
        Ok(admitted) => admitted,
        Err(e) => {
            if let (Some((_, tls)), InboundError::Refused(Refusal::NotItsCertificate { .. })) = (certified, &e) {
                tls.count(PeerTlsFailure::Identity);
            }
            gate.refusals.refused(addr, &e);
            // The caller logs why, whatever version it speaks (`wire::refusal`); a failed write changes nothing.
            let _ = stream.write_all(&wire::refusal(&e.to_string())).await;
            let _ = stream.shutdown().await;
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

async fn handshake<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut BytesMut,
    gate: &Gate,
    seed: u64,
    certified: Option<NodeId>,
) -> Result<Admitted, InboundError> {
    let hello = tokio::time::timeout(HELLO_TIMEOUT, read_frame::<Hello, S>(stream, buf))
        .await
        .map_err(|_| InboundError::HelloTimeout)?;
    // A TLS ClientHello read as a frame is a length far beyond FRAME_MAX: say what it is.
    let hello = hello.map_err(|e| match buf.first() {
        Some(&TLS_HANDSHAKE_RECORD) if certified.is_none() => InboundError::SpeaksTls,
        _ => e,
    })?;
    let (hello, _) = hello.ok_or(InboundError::NoHello)?;
    Ok(gate.admit(&hello, seed, certified)?)
}

/// Passes every frame to the core until the peer closes the connection.
async fn receive<M: DeserializeOwned, S: AsyncRead + Unpin>(
    stream: &mut S,
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
async fn receive_delayed<M: DeserializeOwned, S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut BytesMut,
    from: NodeId,
    mut line: DelayLine,
    inbox: &Sender<Input<M>>,
) -> Result<(), InboundError> {
    let held = Arc::new(Semaphore::new(HELD_BYTES_MAX));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let read = async move {
        while let Some((msg, bytes)) = read_frame::<M, S>(stream, buf).await? {
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
async fn read_frame<T: DeserializeOwned, S: AsyncRead + Unpin>(
    stream: &mut S,
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
