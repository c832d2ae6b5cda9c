//! The client TLS port (`docs/security.md`): its certificate, key and client-certificate rule, read and checked
//! once at start-up, and the handshake each connection runs on its own task before it is served as a plain one.
//!
//! rustls does the TLS, with the `ring` provider; nothing here is cryptography of its own. The flags and their
//! meaning are Redis': a CA file makes the port ask clients for a certificate signed by it, required unless
//! `tls-auth-clients` is `optional` (asked, checked if given) or `no` (not asked); `tls-auth-clients-user CN`
//! (Redis 8.6) names the ACL user a connection starts as by its certificate's subject common name.

use crate::metrics::NodeMetrics;
use crate::transport::common_name;
use meridian_core::keyspace::UnknownName;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tracing::debug;

/// How long a client has to finish its handshake: one that connects and sends nothing, or too little, holds
/// a connection slot only this long.
pub(crate) const HANDSHAKE_MAX: Duration = Duration::from_secs(10);

/// Whether the TLS port asks clients for a certificate (Redis' `tls-auth-clients`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// Required: a client without a certificate signed by the CA is refused.
    Yes,
    /// Not asked for.
    No,
    /// Asked for and checked if given; a client without one is served.
    Optional,
}

impl FromStr for ClientAuth {
    type Err = UnknownName;

    /// Without regard to case, as Redis reads its enumerated settings.
    fn from_str(text: &str) -> Result<Self, UnknownName> {
        match text.to_ascii_lowercase().as_str() {
            "yes" => Ok(ClientAuth::Yes),
            "no" => Ok(ClientAuth::No),
            "optional" => Ok(ClientAuth::Optional),
            _ => Err(UnknownName::new("tls-auth-clients", text, &["yes", "no", "optional"])),
        }
    }
}

/// Whether a client certificate names the user its connection starts as (Redis 8.6's `tls-auth-clients-user`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CertUser {
    /// It does not: every connection starts as the `default` user.
    #[default]
    Off,
    /// The subject's common name is the user's name.
    Cn,
}

impl FromStr for CertUser {
    type Err = UnknownName;

    /// Without regard to case, as Redis reads its enumerated settings (`cn` is `CN`).
    fn from_str(text: &str) -> Result<Self, UnknownName> {
        if text.eq_ignore_ascii_case("off") {
            Ok(CertUser::Off)
        } else if text.eq_ignore_ascii_case("cn") {
            Ok(CertUser::Cn)
        } else {
            Err(UnknownName::new("tls-auth-clients-user", text, &["off", "CN"]))
        }
    }
}

/// The files of the TLS port, as given.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The node's certificate chain (PEM), its own certificate first.
    pub cert: PathBuf,
    /// The certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The CA certificates client certificates are checked against (PEM), if clients are asked for one.
    pub ca: Option<PathBuf>,
    /// Without it: `Yes` with a CA file, `No` without, as in Redis.
    pub auth_clients: Option<ClientAuth>,
    /// Whether a client certificate names the connection's user; `Cn` needs clients asked for certificates.
    pub auth_clients_user: CertUser,
}

/// Why the TLS port cannot start.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the {what} {path}: {source}")]
    Read { what: &'static str, path: PathBuf, source: std::io::Error },
    #[error("the {what} {path} is not PEM: {reason}")]
    NotPem { what: &'static str, path: PathBuf, reason: String },
    #[error("the {what} {path} holds no {item}")]
    Empty { what: &'static str, path: PathBuf, item: &'static str },
    #[error("the key {key} does not belong to the certificate {cert}")]
    KeyMismatch { cert: PathBuf, key: PathBuf },
    #[error("the certificate {cert} or its key {key} is unusable: {source}")]
    Unusable { cert: PathBuf, key: PathBuf, source: rustls::Error },
    #[error("the CA file {path}: {reason}")]
    BadCa { path: PathBuf, reason: String },
    #[error("tls-auth-clients {0:?} needs a CA file (tls-ca-cert-file) to check client certificates against")]
    AuthWithoutCa(ClientAuth),
    #[error(
        "tls-auth-clients-user CN takes users from client certificates, which the port does not ask for: give \
         tls-ca-cert-file, with tls-auth-clients yes or optional"
    )]
    CertUserWithoutClientCerts,
}

/// A checked TLS configuration, ready to accept clients; its files can be read again while it serves
/// (`NodeHandle::reload_certificates`).
#[derive(Clone, Debug)]
pub struct TlsConfig {
    /// Shared by every clone, so that a reload reaches every listener that uses the configuration.
    server: Arc<RwLock<Arc<ServerConfig>>>,
    files: TlsFiles,
    cert_user: CertUser,
}

/// The TLS client port: where it listens (port 0 picks a free port; see `NodeHandle::tls_addr`) and its
/// configuration.
#[derive(Clone, Debug)]
pub struct TlsListen {
    pub addr: SocketAddr,
    pub config: TlsConfig,
}

impl TlsFiles {
    /// Reads and checks every file: the key must be the certificate's, and a CA file must hold certificates.
    pub fn load(&self) -> Result<TlsConfig, TlsError> {
        let server = Arc::new(RwLock::new(self.server_config()?));
        Ok(TlsConfig { server, files: self.clone(), cert_user: self.auth_clients_user })
    }

    fn server_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("ring supports rustls' default protocol versions");
        let builder = match self.client_verifier(provider)? {
            Some(verifier) => builder.with_client_cert_verifier(verifier),
            // Refused rather than left to do nothing: no certificate would ever name a user.
            None if self.auth_clients_user == CertUser::Cn => return Err(TlsError::CertUserWithoutClientCerts),
            None => builder.with_no_client_auth(),
        };
        let chain = read_certs("certificate file", &self.cert)?;
        let key = read_key(&self.key)?;
        let config = builder.with_single_cert(chain, key).map_err(unusable(&self.cert, &self.key))?;
        Ok(Arc::new(config))
    }

    fn client_verifier(
        &self,
        provider: Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>, TlsError> {
        let auth = self.auth_clients.unwrap_or(if self.ca.is_some() { ClientAuth::Yes } else { ClientAuth::No });
        let Some(ca) = self.ca.as_ref().filter(|_| auth != ClientAuth::No) else {
            return match auth {
                ClientAuth::No => Ok(None),
                asked => Err(TlsError::AuthWithoutCa(asked)),
            };
        };
        let bad_ca = |reason: String| TlsError::BadCa { path: ca.clone(), reason };
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(read_roots(ca)?), provider);
        let verifier = if auth == ClientAuth::Optional { verifier.allow_unauthenticated() } else { verifier };
        verifier.build().map(Some).map_err(|e| bad_ca(e.to_string()))
    }
}

/// A TLS client's configuration: servers are checked against the CA certificates in `ca`, and the client
/// presents the certificate and key in `identity`, if given (to a server that asks for one). What `meridian
/// ctl`, a joining node and `meridian bench ycsb --tls` connect with.
pub fn client_config(ca: &Path, identity: Option<(&Path, &Path)>) -> Result<ClientConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports rustls' default protocol versions")
        .with_root_certificates(read_roots(ca)?);
    let Some((cert, key)) = identity else { return Ok(builder.with_no_client_auth()) };
    builder.with_client_auth_cert(read_certs("certificate file", cert)?, read_key(key)?).map_err(unusable(cert, key))
}

/// Why rustls refused the certificate `cert` with the key `key`.
fn unusable<'a>(cert: &'a Path, key: &'a Path) -> impl FnOnce(rustls::Error) -> TlsError + 'a {
    move |source| match source {
        rustls::Error::InconsistentKeys(_) => TlsError::KeyMismatch { cert: cert.into(), key: key.into() },
        source => TlsError::Unusable { cert: cert.into(), key: key.into(), source },
    }
}

/// The CA certificates of a CA file, as trust anchors.
pub(crate) fn read_roots(ca: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs("CA file", ca)? {
        roots.add(cert).map_err(|e| TlsError::BadCa { path: ca.into(), reason: e.to_string() })?;
    }
    Ok(roots)
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { what, path: path.to_path_buf(), source })
}

pub(crate) fn read_certs(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let not_pem =
        |e: rustls::pki_types::pem::Error| TlsError::NotPem { what, path: path.into(), reason: e.to_string() };
    let certs = CertificateDer::pem_slice_iter(&read(what, path)?).collect::<Result<Vec<_>, _>>().map_err(not_pem)?;
    if certs.is_empty() {
        return Err(TlsError::Empty { what, path: path.into(), item: "certificate" });
    }
    Ok(certs)
}

pub(crate) fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    const WHAT: &str = "key file";
    PrivateKeyDer::from_pem_slice(&read(WHAT, path)?).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => {
            TlsError::Empty { what: WHAT, path: path.into(), item: "private key" }
        }
        e => TlsError::NotPem { what: WHAT, path: path.into(), reason: e.to_string() },
    })
}

impl TlsConfig {
    /// What accepts the next connection: the configuration as last loaded.
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.server.read().unwrap_or_else(PoisonError::into_inner).clone())
    }

    /// The configuration the files make now, for [`TlsConfig::install`]: a file that no longer loads is an
    /// error here, and changes nothing.
    pub(crate) fn read_again(&self) -> Result<Arc<ServerConfig>, TlsError> {
        self.files.server_config()
    }

    /// Serves connections from now on with `fresh`; those open keep the configuration they began with.
    pub(crate) fn install(&self, fresh: Arc<ServerConfig>) {
        *self.server.write().unwrap_or_else(PoisonError::into_inner) = fresh;
    }

    /// The user a client's certificate names, with `CN`: its subject's common name. rustls holds the client's
    /// certificates only once the handshake checked them against the CA, so one that was not is never read.
    pub(crate) fn cert_user<IO>(&self, stream: &TlsStream<IO>) -> Option<String> {
        match self.cert_user {
            CertUser::Off => None,
            CertUser::Cn => common_name(stream.get_ref().1.peer_certificates()?.first()?).ok(),
        }
    }
}

/// Why a TLS handshake a node accepted did not finish.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HandshakeFailed {
    #[error("{0}")]
    Error(std::io::Error),
    #[error("not finished in {HANDSHAKE_MAX:?}")]
    Timeout,
}

/// Runs the server side of a handshake, up to [`HANDSHAKE_MAX`]: the client port's and the peer port's.
pub(crate) async fn accept_within<IO>(acceptor: &TlsAcceptor, stream: IO) -> Result<TlsStream<IO>, HandshakeFailed>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    match tokio::time::timeout(HANDSHAKE_MAX, acceptor.accept(stream)).await {
        Ok(accepted) => accepted.map_err(HandshakeFailed::Error),
        Err(_) => Err(HandshakeFailed::Timeout),
    }
}

/// Runs a client's handshake; a failure is logged at debug and counted, and the connection dropped.
pub(crate) async fn handshake(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    metrics: &NodeMetrics,
) -> Option<TlsStream<TcpStream>> {
    let peer = stream.peer_addr().ok();
    accept_within(acceptor, stream)
        .await
        .inspect_err(|e| {
            debug!(?peer, "TLS handshake failed: {e}");
            metrics.clients.handshake_failed(matches!(e, HandshakeFailed::Timeout));
        })
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durability::{Persistence, SyncPolicy};
    use std::io::Write;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    /// A certificate and key for 127.0.0.1, written to `dir`; their files.
    fn node_files(dir: &Path) -> TlsFiles {
        let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
        let (cert, key) = (dir.join("node.crt"), dir.join("node.key"));
        std::fs::File::create(&cert).unwrap().write_all(made.cert.pem().as_bytes()).unwrap();
        std::fs::File::create(&key).unwrap().write_all(made.signing_key.serialize_pem().as_bytes()).unwrap();
        TlsFiles { cert, key, ca: None, auth_clients: None, auth_clients_user: CertUser::Off }
    }

    /// Runs one handshake with a client that connects and then does `client` to its socket.
    async fn handshake_with(client: impl AsyncFnOnce(&mut TcpStream)) -> (bool, NodeMetrics) {
        let dir = tempfile::tempdir().unwrap();
        let acceptor = node_files(dir.path()).load().unwrap().acceptor();
        let metrics = NodeMetrics::new(Arc::default(), Arc::new(Persistence::new(SyncPolicy::default())), None);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut socket = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        client(&mut socket).await;
        let done = handshake(&acceptor, stream, &metrics).await.is_some();
        (done, metrics)
    }

    #[tokio::test]
    async fn a_client_that_sends_no_tls_fails_its_handshake_and_is_counted() {
        let (done, metrics) = handshake_with(async |s: &mut TcpStream| s.write_all(b"PING\r\n").await.unwrap()).await;
        assert!(!done);
        let read = metrics.clients.read();
        assert_eq!((read.handshakes_failed, read.handshakes_timed_out), (1, 0));
    }

    #[tokio::test]
    async fn a_silent_client_is_dropped_when_its_handshake_runs_out_of_time() {
        let started = tokio::time::Instant::now();
        let (done, metrics) = handshake_with(async |_: &mut TcpStream| {}).await;
        assert!(!done && started.elapsed() >= HANDSHAKE_MAX);
        let read = metrics.clients.read();
        assert_eq!((read.handshakes_failed, read.handshakes_timed_out), (0, 1));
    }

    #[test]
    fn a_client_rule_that_asks_for_certificates_needs_a_ca() {
        let dir = tempfile::tempdir().unwrap();
        let files = TlsFiles { auth_clients: Some(ClientAuth::Optional), ..node_files(dir.path()) };
        assert!(matches!(files.load(), Err(TlsError::AuthWithoutCa(ClientAuth::Optional))));
        let files = TlsFiles { auth_clients: Some(ClientAuth::No), ..node_files(dir.path()) };
        assert!(files.load().is_ok());
        assert_eq!("optional".parse(), Ok(ClientAuth::Optional));
        assert_eq!("YES".parse(), Ok(ClientAuth::Yes), "any case, as Redis reads it");
        assert!("maybe".parse::<ClientAuth>().is_err());
    }

    #[test]
    fn users_from_certificates_need_clients_asked_for_certificates() {
        let dir = tempfile::tempdir().unwrap();
        let cn = TlsFiles { auth_clients_user: CertUser::Cn, ..node_files(dir.path()) };
        assert!(matches!(cn.clone().load(), Err(TlsError::CertUserWithoutClientCerts)), "no CA file");
        // Any certificate will do as the CA here: the port only has to ask for client certificates.
        let with_ca = TlsFiles { ca: Some(cn.cert.clone()), ..cn };
        let not_asked = TlsFiles { auth_clients: Some(ClientAuth::No), ..with_ca.clone() };
        assert!(matches!(not_asked.load(), Err(TlsError::CertUserWithoutClientCerts)), "tls-auth-clients no");
        assert!(with_ca.clone().load().is_ok());
        assert!(TlsFiles { auth_clients: Some(ClientAuth::Optional), ..with_ca }.load().is_ok());
    }

    #[test]
    fn the_setting_reads_off_or_cn_in_any_case() {
        for (text, expected) in
            [("off", CertUser::Off), ("OFF", CertUser::Off), ("CN", CertUser::Cn), ("cn", CertUser::Cn)]
        {
            assert_eq!(text.parse(), Ok(expected), "{text}");
        }
        let uri = "URI".parse::<CertUser>().unwrap_err().to_string();
        assert_eq!(uri, "unknown tls-auth-clients-user \"URI\"; expected one of off, CN", "Valkey's, not Redis'");
    }

    /// A self-signed certificate whose subject is `names`.
    fn cert_named(names: &[(rcgen::DnType, &str)]) -> CertificateDer<'static> {
        let mut params = rcgen::CertificateParams::new(Vec::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        names.iter().for_each(|(kind, value)| params.distinguished_name.push(kind.clone(), *value));
        params.self_signed(&rcgen::KeyPair::generate().unwrap()).unwrap().der().clone()
    }

    #[test]
    fn the_user_is_the_subjects_common_name() {
        use rcgen::DnType::{CommonName, OrganizationName};
        assert_eq!(
            common_name(&cert_named(&[(OrganizationName, "Meridian"), (CommonName, "alice")])).ok().as_deref(),
            Some("alice")
        );
        assert_eq!(common_name(&cert_named(&[(OrganizationName, "Meridian")])).ok(), None, "no common name");
        assert_eq!(common_name(&CertificateDer::from(vec![0x30, 0x03, 1, 2, 3])).ok(), None, "not a certificate");
    }
}
