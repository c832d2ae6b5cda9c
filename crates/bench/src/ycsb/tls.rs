//! `bench ycsb --tls`: connections over TLS, as `redis-cli --tls` makes them, so the same client measures a TLS
//! port of Meridian and of redis-server. The server's certificate is checked against `--cacert` for the address
//! dialled (an IP address must be among its names); `--cert` and `--key` give the client's own certificate, for
//! servers that ask for one.

use meridian_node::TlsError;
use rustls::pki_types::ServerName;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// The files a TLS client uses.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub ca: PathBuf,
    /// The client's certificate and key, both or neither.
    pub identity: Option<(PathBuf, PathBuf)>,
}

/// A checked client configuration.
#[derive(Clone)]
pub struct TlsClient(TlsConnector);

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsClient")
    }
}

impl TlsFiles {
    pub fn load(&self) -> Result<TlsClient, TlsError> {
        let identity = self.identity.as_ref().map(|(cert, key)| (cert.as_path(), key.as_path()));
        let config = meridian_node::client_config(&self.ca, identity)?;
        Ok(TlsClient(TlsConnector::from(Arc::new(config))))
    }
}

impl TlsClient {
    /// The TLS session over `stream`, a connection to `addr`.
    pub(super) async fn connect(&self, addr: SocketAddr, stream: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
        self.0.connect(ServerName::IpAddress(addr.ip().into()), stream).await
    }
}
