//! `bench ycsb --tls`: connections over TLS, as `redis-cli --tls` makes them, so the same client measures a TLS
//! port of Meridian and of redis-server. The server's certificate is checked against `--cacert` for the address
//! dialled (an IP address must be among its names); `--cert` and `--key` give the client's own certificate, for
//! servers that ask for one.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
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

/// Why the files do not make a client.
#[derive(Debug, thiserror::Error)]
pub enum TlsClientError {
    #[error("{path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error("the client certificate or key: {0}")]
    Identity(rustls::Error),
}

impl TlsFiles {
    pub fn load(&self) -> Result<TlsClient, TlsClientError> {
        let mut roots = RootCertStore::empty();
        for cert in certificates(&self.ca)? {
            roots.add(cert).map_err(|e| file_error(&self.ca, e))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports rustls' default protocol versions")
            .with_root_certificates(roots);
        let config = match &self.identity {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let key = PrivateKeyDer::from_pem_file(key).map_err(|e| file_error(key, e))?;
                builder.with_client_auth_cert(certificates(cert)?, key).map_err(TlsClientError::Identity)?
            }
        };
        Ok(TlsClient(TlsConnector::from(Arc::new(config))))
    }
}

impl TlsClient {
    /// The TLS session over `stream`, a connection to `addr`.
    pub(super) async fn connect(&self, addr: SocketAddr, stream: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
        self.0.connect(ServerName::IpAddress(addr.ip().into()), stream).await
    }
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsClientError> {
    let certs: Result<Vec<_>, _> = CertificateDer::pem_file_iter(path).map_err(|e| file_error(path, e))?.collect();
    let certs = certs.map_err(|e| file_error(path, e))?;
    if certs.is_empty() {
        return Err(file_error(path, "no certificate in it"));
    }
    Ok(certs)
}

fn file_error(path: &Path, reason: impl std::fmt::Display) -> TlsClientError {
    TlsClientError::File { path: path.to_path_buf(), reason: reason.to_string() }
}
