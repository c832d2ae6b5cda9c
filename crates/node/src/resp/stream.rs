//! The byte streams a client connection is served over: a plain TCP socket or a TLS session over one. Both are
//! one type ([`ClientStream`], split into a [`ClientReader`] and a [`ClientWriter`]) whose every call picks its
//! kind with a branch, so the connection's code is compiled once for both ports: compiled twice, its per-command
//! helpers (the parser, the key order, the dispatch) were too big to inline into both and each paid a call of its
//! own (bench/instructions). The plain socket keeps its zero-cost split and its outbox writes straight to it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tracing::debug;

/// A client's stream, before it is split into the halves a connection reads and writes with.
pub(crate) enum ClientStream {
    Plain(TcpStream),
    /// Boxed: a TLS session's state is kilobytes, a socket a few words.
    Tls(Box<TlsStream<TcpStream>>),
}

/// The half a connection reads commands from.
pub(crate) enum ClientReader {
    Plain(OwnedReadHalf),
    Tls(ReadHalf<TlsStream<TcpStream>>),
}

/// The half replies are written to, by the connection or by the node's outbox ([`super::outbox`]).
pub(crate) enum ClientWriter {
    Plain(OwnedWriteHalf),
    Tls(WriteHalf<TlsStream<TcpStream>>),
}

impl ClientStream {
    /// Sets `TCP_NODELAY`, logging a failure (the connection works without it): replies are small and
    /// latency-bound, and batching already happens before each write.
    pub(crate) fn no_delay(&self) {
        let set = match self {
            ClientStream::Plain(s) => s.set_nodelay(true),
            ClientStream::Tls(s) => s.get_ref().0.set_nodelay(true),
        };
        if let Err(e) = set {
            debug!("cannot set TCP_NODELAY on a client connection: {e}");
        }
    }

    /// A TLS session is one state for both directions: its halves share it under tokio's lock.
    pub(crate) fn split(self) -> (ClientReader, ClientWriter) {
        match self {
            ClientStream::Plain(s) => {
                let (r, w) = s.into_split();
                (ClientReader::Plain(r), ClientWriter::Plain(w))
            }
            ClientStream::Tls(s) => {
                let (r, w) = tokio::io::split(*s);
                (ClientReader::Tls(r), ClientWriter::Tls(w))
            }
        }
    }
}

impl ClientWriter {
    /// Writes what the socket takes now and removes it from `bytes`; true if all of it is on its way, false if
    /// some is left (in `bytes`, or buffered in the stream) for the connection to write and flush itself.
    #[inline]
    pub(crate) fn write_now(&mut self, bytes: &mut Vec<u8>) -> bool {
        match self {
            ClientWriter::Plain(w) => {
                let taken = w.try_write(bytes).unwrap_or(0);
                bytes.drain(..taken);
                bytes.is_empty()
            }
            ClientWriter::Tls(w) => tls_write_now(w, bytes),
        }
    }
}

/// Polls once with a waker that does nothing: the outbox never waits, and a connection handed back the rest
/// polls again with its own waker.
fn tls_write_now(w: &mut WriteHalf<TlsStream<TcpStream>>, bytes: &mut Vec<u8>) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    let mut taken = 0;
    while taken < bytes.len() {
        match Pin::new(&mut *w).poll_write(&mut cx, &bytes[taken..]) {
            Poll::Ready(Ok(n)) if n > 0 => taken += n,
            _ => break,
        }
    }
    bytes.drain(..taken);
    // rustls may hold records the socket did not take: they are sent only by a flush.
    bytes.is_empty() && matches!(Pin::new(w).poll_flush(&mut cx), Poll::Ready(Ok(())))
}

impl AsyncRead for ClientReader {
    #[inline]
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientReader::Plain(r) => Pin::new(r).poll_read(cx, buf),
            ClientReader::Tls(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ClientWriter {
    #[inline]
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ClientWriter::Plain(w) => Pin::new(w).poll_write(cx, buf),
            ClientWriter::Tls(w) => Pin::new(w).poll_write(cx, buf),
        }
    }

    #[inline]
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientWriter::Plain(w) => Pin::new(w).poll_flush(cx),
            ClientWriter::Tls(w) => Pin::new(w).poll_flush(cx),
        }
    }

    #[inline]
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientWriter::Plain(w) => Pin::new(w).poll_shutdown(cx),
            ClientWriter::Tls(w) => Pin::new(w).poll_shutdown(cx),
        }
    }
}
