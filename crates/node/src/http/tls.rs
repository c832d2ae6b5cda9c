//! The HTTP API over TLS (`meridian server --http-tls-cert-file`, docs/security.md): a listener for axum whose
//! connections are TLS streams, and the certificate each caller presented, if the port asks for one.
//!
//! Connections are accepted by the listeners' shared loop (`accept.rs`), each handshake on a task of its own, up
//! to [`crate::tls::HANDSHAKE_MAX`], so that a caller that connects and says nothing (or garbage) holds up no one
//! else; at most [`HANDSHAKES_MAX`] run at once, and a connection beyond them is closed unserved.

use crate::accept::{accept_loop, Cap};
use crate::tls::{accept_within, TlsConfig};
use crate::transport::common_name;
use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tracing::debug;

/// Handshakes in progress at most: an admin API has few callers, and a flood of half-open connections must not
/// grow without bound.
const HANDSHAKES_MAX: usize = 64;

/// The HTTPS port's TLS: the node's certificate, and whether callers are asked for one of theirs (with the CA
/// they are checked against: `--http-tls-ca-cert-file`).
#[derive(Clone, Debug)]
pub struct HttpsConfig {
    pub tls: TlsConfig,
    pub client_certificates: bool,
}

/// Connections whose handshake finished, in the order they finished.
pub(crate) struct HttpsListener {
    handshaken: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    accepting: JoinHandle<()>,
}

impl HttpsListener {
    pub(crate) fn new(listener: TcpListener, tls: TlsConfig) -> io::Result<HttpsListener> {
        let local = listener.local_addr()?;
        let (done, handshaken) = mpsc::channel(HANDSHAKES_MAX);
        // A connection leaves its task once handshaken, so the cap counts handshakes in progress.
        let cap = Cap::new(HANDSHAKES_MAX, b"", Arc::default());
        // The configuration as last loaded, so that reloaded certificates serve the next connection.
        let serve = move |stream, peer| handshake(tls.acceptor(), stream, peer, done.clone());
        let accepting = tokio::spawn(accept_loop(listener, "HTTPS", Some(cap), None, serve));
        Ok(HttpsListener { handshaken, local, accepting })
    }
}

/// The server stops by dropping its listener: the accept loop, and the handshakes it started, go with it.
impl Drop for HttpsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Runs a caller's handshake; a connection that finishes it is handed to the server.
async fn handshake(
    acceptor: TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
    done: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    match accept_within(&acceptor, stream).await {
        Ok(tls) => {
            let _ = done.send((tls, peer)).await;
        }
        Err(e) => debug!(%peer, "HTTPS handshake failed: {e}"),
    }
}

impl Listener for HttpsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.handshaken.recv().await {
            Some(connection) => connection,
            // The accept loop only ends when the listener is dropped, so this is never reached while it serves.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}

/// Who is calling, by the certificate the caller presented over TLS: the request extension the admission check
/// reads (`admission.rs`). Without TLS, or without a certificate, there is none.
#[derive(Clone, Debug)]
pub(crate) struct Caller {
    /// The verified certificate's common name, or why it names no one.
    pub(crate) certificate: Option<Result<String, String>>,
}

impl Connected<IncomingStream<'_, HttpsListener>> for Caller {
    fn connect_info(stream: IncomingStream<'_, HttpsListener>) -> Caller {
        // rustls hands over a client's certificates only once they verified against the port's CA.
        let certificates = stream.io().get_ref().1.peer_certificates();
        let certificate = certificates.and_then(|c| c.first()).map(|c| common_name(c).map_err(|e| e.to_string()));
        Caller { certificate }
    }
}
