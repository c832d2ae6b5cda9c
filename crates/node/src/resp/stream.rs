//! The byte streams a client connection is served over: a plain TCP socket or a TLS session over one. A
//! connection is generic over them ([`ClientStream`]), so both ports run the same code, and the plain one keeps
//! its zero-cost split and its outbox writes straight to the socket.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncWrite, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tracing::debug;

/// A client's stream, split into the halves a connection reads and writes with.
pub(crate) trait ClientStream: Send + 'static {
    type Reader: AsyncRead + Unpin + Send;
    type Writer: ReplyWriter;

    /// Sets `TCP_NODELAY`: replies are small and latency-bound, and batching already happens before each write.
    fn set_nodelay(&self) -> io::Result<()>;

    fn split(self) -> (Self::Reader, Self::Writer);
}

/// A write half the node's outbox can write to without waiting ([`super::outbox`]).
pub(crate) trait ReplyWriter: AsyncWrite + Unpin + Send + 'static {
    /// Writes what the socket takes now and removes it from `bytes`; true if all of it is on its way, false if
    /// some is left (in `bytes`, or buffered in the stream) for the connection to write and flush itself.
    fn write_now(&mut self, bytes: &mut Vec<u8>) -> bool;
}

impl ClientStream for TcpStream {
    type Reader = OwnedReadHalf;
    type Writer = OwnedWriteHalf;

    fn set_nodelay(&self) -> io::Result<()> {
        TcpStream::set_nodelay(self, true)
    }

    fn split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        self.into_split()
    }
}

impl ReplyWriter for OwnedWriteHalf {
    fn write_now(&mut self, bytes: &mut Vec<u8>) -> bool {
        let taken = self.try_write(bytes).unwrap_or(0);
        bytes.drain(..taken);
        bytes.is_empty()
    }
}

impl ClientStream for TlsStream<TcpStream> {
    type Reader = ReadHalf<TlsStream<TcpStream>>;
    type Writer = WriteHalf<TlsStream<TcpStream>>;

    fn set_nodelay(&self) -> io::Result<()> {
        self.get_ref().0.set_nodelay(true)
    }

    /// A TLS session is one state for both directions: its halves share it under tokio's lock.
    fn split(self) -> (Self::Reader, Self::Writer) {
        tokio::io::split(self)
    }
}

impl ReplyWriter for WriteHalf<TlsStream<TcpStream>> {
    /// Polls once with a waker that does nothing: the outbox never waits, and a connection handed back the
    /// rest polls again with its own waker.
    fn write_now(&mut self, bytes: &mut Vec<u8>) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        let mut taken = 0;
        while taken < bytes.len() {
            match Pin::new(&mut *self).poll_write(&mut cx, &bytes[taken..]) {
                Poll::Ready(Ok(n)) if n > 0 => taken += n,
                _ => break,
            }
        }
        bytes.drain(..taken);
        // rustls may hold records the socket did not take: they are sent only by a flush.
        bytes.is_empty() && matches!(Pin::new(self).poll_flush(&mut cx), Poll::Ready(Ok(())))
    }
}

/// Sets `TCP_NODELAY`, logging a failure: the connection works without it.
pub(crate) fn no_delay(stream: &impl ClientStream) {
    if let Err(e) = stream.set_nodelay() {
        debug!("cannot set TCP_NODELAY on a client connection: {e}");
    }
}
