//! Mutual TLS on the peer transport (`meridian server --peer-certs-dir`, docs/security.md): every peer
//! connection, both ways, is TLS, and both ends present a certificate signed by the cluster's CA that names
//! the node (`identity.rs`).
//!
//! Inbound, the server configuration is the client port's (`tls.rs`) with client certificates required. Outbound,
//! the peer's certificate is checked against the CA and against the node being dialled, not against the
//! dialled host: a peer is addressed by its node id (the map says where it lives), its address is often a bare
//! IP, and an address in the certificate would tie it to a host the map may move; what matters is that the
//! node at the other end is the one the map names. rustls does every check of its own (chain, validity,
//! signatures); this adds only the identity.

use super::identity::{self, IdentityError};
use crate::metrics::{PeerTlsFailure, PeerTlsFailures};
use crate::tls::{self, HandshakeFailed, TlsError, TlsFiles, HANDSHAKE_MAX};
use meridian_core::{wire, NodeId};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::verify_server_cert_signed_by_trust_anchor;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::{client, server, TlsAcceptor, TlsConnector};

/// The first byte of every TLS record of a handshake: a caller that opens with anything else speaks plain TCP.
pub(crate) const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// A node's peer TLS: its certificate and key, and the CA its peers' certificates must be signed by.
#[derive(Clone)]
pub struct PeerTls {
    dir: PathBuf,
    me: NodeId,
    /// Shared by every clone, so that a reload reaches the listener and every dial.
    configs: Arc<RwLock<PeerConfigs>>,
    failures: Arc<PeerTlsFailures>,
}

/// Both sides of peer TLS, as the files in `--peer-certs-dir` make them.
#[derive(Clone)]
pub(crate) struct PeerConfigs {
    acceptor: TlsAcceptor,
    connector: TlsConnector,
}

impl std::fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerTls")
    }
}

/// Why a node cannot start with its peer certificates.
#[derive(Debug, thiserror::Error)]
pub enum PeerTlsError {
    #[error("{0}")]
    Files(#[from] TlsError),
    #[error("{path}: {reason}")]
    NoNode { path: PathBuf, reason: String },
    #[error(
        "{path} is node {}'s certificate, not this node's ({}): give each node its own \
         (`meridian cert create-node --node-id {}`)", .cert.0, .me.0, .me.0
    )]
    OtherNode { path: PathBuf, cert: NodeId, me: NodeId },
    #[error("{path}: {source}")]
    Unusable { path: PathBuf, source: rustls::Error },
}

/// Why an inbound peer connection was refused before its hello.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Untrusted {
    #[error("it speaks plain TCP, and this node's peer port needs mutual TLS (--peer-certs-dir)")]
    Plain,
    #[error("TLS handshake failed: {0}")]
    Handshake(HandshakeFailed),
    #[error("{0}")]
    NoNode(IdentityError),
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl PeerTls {
    /// Reads `dir` as `meridian cert` writes it (`ca.crt`, `node.crt`, `node.key`) for node `me`: its
    /// certificate must name `me`, so that a node given another's files stops now rather than be refused by
    /// every peer.
    pub fn load(dir: &Path, me: NodeId) -> Result<PeerTls, PeerTlsError> {
        let configs = Arc::new(RwLock::new(configs(dir, me)?));
        Ok(PeerTls { dir: dir.to_path_buf(), me, configs, failures: Arc::default() })
    }

    /// The configurations the files make now, for [`PeerTls::install`]: files that no longer load, or a
    /// certificate for another node, are an error here, and change nothing.
    pub(crate) fn read_again(&self) -> Result<PeerConfigs, PeerTlsError> {
        configs(&self.dir, self.me)
    }

    /// Accepts and dials with `fresh` from now on; connections open keep what they began with.
    pub(crate) fn install(&self, fresh: PeerConfigs) {
        *self.configs.write().unwrap_or_else(PoisonError::into_inner) = fresh;
    }

    fn current(&self) -> PeerConfigs {
        self.configs.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// What `/metrics` shows of refused peers.
    pub(crate) fn failures(&self) -> Arc<PeerTlsFailures> {
        self.failures.clone()
    }

    pub(crate) fn count(&self, failure: PeerTlsFailure) {
        self.failures.count(failure);
    }

    /// The server side of a peer connection: a plain caller is told why in plain text (it logs the refusal,
    /// as for any other), a TLS caller must present a certificate of the CA that names a node, which it is.
    pub(crate) async fn accept(
        &self,
        mut stream: TcpStream,
    ) -> Result<(server::TlsStream<TcpStream>, NodeId), Untrusted> {
        let mut first = [0u8; 1];
        let peeked = tokio::time::timeout(HANDSHAKE_MAX, stream.peek(&mut first)).await;
        let peeked = peeked.map_err(|_| self.failed(Untrusted::Handshake(HandshakeFailed::Timeout)))??;
        if peeked == 1 && first[0] != TLS_HANDSHAKE_RECORD {
            let untrusted = self.failed(Untrusted::Plain);
            // The caller logs why; a failed write changes nothing.
            let _ = stream.write_all(&wire::refusal(&untrusted.to_string())).await;
            return Err(untrusted);
        }
        let tls = tls::accept_within(&self.current().acceptor, stream)
            .await
            .map_err(|e| self.failed(Untrusted::Handshake(e)))?;
        let cert =
            tls.get_ref().1.peer_certificates().and_then(|c| c.first()).expect("client certificates are required");
        let node = identity::node_of(cert).map_err(|e| self.failed(Untrusted::NoNode(e)))?;
        Ok((tls, node))
    }

    fn failed(&self, untrusted: Untrusted) -> Untrusted {
        let failure = match &untrusted {
            Untrusted::Plain => PeerTlsFailure::Plain,
            Untrusted::Handshake(HandshakeFailed::Timeout) => PeerTlsFailure::Timeout,
            Untrusted::Handshake(HandshakeFailed::Error(_)) | Untrusted::Io(_) => PeerTlsFailure::Handshake,
            Untrusted::NoNode(_) => PeerTlsFailure::Identity,
        };
        self.count(failure);
        untrusted
    }

    /// The client side: a connection to `to`, whose certificate must name it.
    pub(crate) async fn connect(&self, to: NodeId, stream: TcpStream) -> io::Result<client::TlsStream<TcpStream>> {
        let connecting = self.current().connector.connect(identity::server_name(to), stream);
        let connected = tokio::time::timeout(HANDSHAKE_MAX, connecting)
            .await
            .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out")));
        connected.map_err(|e| {
            self.count(PeerTlsFailure::Dial);
            explain_dial(e)
        })
    }
}

/// Reads `dir` for node `me`: both sides of its peer TLS.
fn configs(dir: &Path, me: NodeId) -> Result<PeerConfigs, PeerTlsError> {
    let files = TlsFiles {
        cert: dir.join("node.crt"),
        key: dir.join("node.key"),
        ca: Some(dir.join("ca.crt")),
        auth_clients: Some(tls::ClientAuth::Yes),
        auth_clients_user: tls::CertUser::Off,
    };
    let acceptor = files.load()?.acceptor();
    let chain = tls::read_certs("certificate file", &files.cert)?;
    let no_node = |reason: String| PeerTlsError::NoNode { path: files.cert.clone(), reason };
    let cert = identity::node_of(&chain[0]).map_err(|e| no_node(e.to_string()))?;
    if cert != me {
        return Err(PeerTlsError::OtherNode { path: files.cert, cert, me });
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(NodeVerifier { roots: tls::read_roots(&dir.join("ca.crt"))?, provider: provider.clone() });
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports rustls' default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(chain, tls::read_key(&files.key)?)
        .map_err(|source| PeerTlsError::Unusable { path: files.cert.clone(), source })?;
    // The server name is `node-N` (`identity::server_name`), which says nothing to the peer.
    config.enable_sni = false;
    let connector = TlsConnector::from(Arc::new(config));
    Ok(PeerConfigs { acceptor, connector })
}

/// A dial's failure, with what rustls' terse reasons mean here.
fn explain_dial(e: io::Error) -> io::Error {
    match hint(&e) {
        Some(hint) => io::Error::new(e.kind(), format!("TLS handshake failed: {e} ({hint})")),
        None => io::Error::new(e.kind(), format!("TLS handshake failed: {e}")),
    }
}

/// What a rustls error inside `e` means for peers. A certificate of another CA fails as an unknown issuer, or on
/// its signature if that CA has the same name as this node's (CAs made by other tools may).
fn hint(e: &io::Error) -> Option<&'static str> {
    use rustls::CertificateError::{BadSignature, UnknownIssuer};
    match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>())? {
        // A peer without TLS answers a ClientHello with a plain refusal: to rustls, a corrupt record.
        rustls::Error::InvalidMessage(_) => {
            Some("the peer does not speak TLS: is it started without --peer-certs-dir?")
        }
        rustls::Error::InvalidCertificate(UnknownIssuer | BadSignature) => {
            Some("the peer's certificate is not signed by this node's CA, ca.crt in --peer-certs-dir")
        }
        _ => None,
    }
}

/// Checks a peer's server certificate: signed by the CA (rustls' own chain, validity and usage checks), and
/// for the node dialled (`identity::server_name`), in place of a host name.
#[derive(Debug)]
struct NodeVerifier {
    roots: RootCertStore,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for NodeVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        let algorithms = self.provider.signature_verification_algorithms.all;
        verify_server_cert_signed_by_trust_anchor(&cert, &self.roots, intermediates, now, algorithms)?;
        let found = identity::node_of(end_entity).map_err(|e| rustls::Error::General(format!("the peer: {e}")))?;
        match identity::node_of_name(server_name) {
            Some(dialled) if dialled == found => Ok(ServerCertVerified::assertion()),
            dialled => Err(rustls::Error::General(format!(
                "the peer's certificate is for node {}, not node {}, which this node dialled",
                found.0,
                dialled.map_or_else(|| "?".to_string(), |d| d.0.to_string())
            ))),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}
