//! Reloading a node's certificates while it serves (`meridian server` does on SIGHUP; docs/security.md): the
//! client TLS port's, the HTTPS port's and the peers' files are read again, and new connections use them. All
//! of them load, or none is used: a node never serves with half a rotation. Connections already open keep the
//! certificates they began with, as TLS sessions do.

use crate::tls::{TlsConfig, TlsError};
use crate::transport::{PeerTls, PeerTlsError};
use rustls::ServerConfig;
use std::sync::Arc;

/// The node's TLS configurations that come from files.
#[derive(Clone, Default)]
pub(crate) struct Certificates {
    pub(crate) client: Option<TlsConfig>,
    pub(crate) http: Option<TlsConfig>,
    pub(crate) peer: Option<PeerTls>,
}

/// Why certificates were not reloaded; the node goes on with the ones it had.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("the client TLS port: {0}")]
    Client(TlsError),
    #[error("the HTTPS port: {0}")]
    Http(TlsError),
    #[error("the peer certificates: {0}")]
    Peer(PeerTlsError),
}

impl Certificates {
    /// Reads every file again and, if all of them load, serves new connections with them: how many
    /// configurations were reloaded.
    pub(crate) fn reload(&self) -> Result<usize, ReloadError> {
        let client = read_again(self.client.as_ref()).map_err(ReloadError::Client)?;
        let http = read_again(self.http.as_ref()).map_err(ReloadError::Http)?;
        let peer = self.peer.as_ref().map(|p| p.read_again().map(|fresh| (p, fresh))).transpose();
        let peer = peer.map_err(ReloadError::Peer)?;
        let reloaded = [client.is_some(), http.is_some(), peer.is_some()].iter().filter(|r| **r).count();
        [client, http].into_iter().flatten().for_each(|(tls, fresh)| tls.install(fresh));
        if let Some((peer, fresh)) = peer {
            peer.install(fresh);
        }
        Ok(reloaded)
    }
}

/// `tls` with the configuration its files make now, if there is one.
fn read_again(tls: Option<&TlsConfig>) -> Result<Option<(&TlsConfig, Arc<ServerConfig>)>, TlsError> {
    tls.map(|t| t.read_again().map(|fresh| (t, fresh))).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::{CertUser, TlsFiles};
    use std::path::Path;

    /// A self-signed certificate and its key in `dir`, as the files of a port.
    fn port_files(dir: &Path) -> TlsFiles {
        let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
        let (cert, key) = (dir.join("node.crt"), dir.join("node.key"));
        std::fs::write(&cert, made.cert.pem()).unwrap();
        std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
        TlsFiles { cert, key, ca: None, auth_clients: None, auth_clients_user: CertUser::Off }
    }

    fn serving(tls: &TlsConfig) -> Arc<ServerConfig> {
        tls.acceptor().config().clone()
    }

    #[test]
    fn every_configuration_is_reloaded_or_none_is() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (client, http) = (port_files(a.path()).load().unwrap(), port_files(b.path()).load().unwrap());
        let certificates = Certificates { client: Some(client.clone()), http: Some(http.clone()), peer: None };
        let before = (serving(&client), serving(&http));

        std::fs::write(b.path().join("node.key"), "not a key").unwrap();
        assert!(matches!(certificates.reload(), Err(ReloadError::Http(_))));
        assert!(Arc::ptr_eq(&before.0, &serving(&client)), "the client port's loaded, but is not used alone");

        port_files(b.path());
        assert_eq!(certificates.reload().unwrap(), 2);
        assert!(!Arc::ptr_eq(&before.0, &serving(&client)) && !Arc::ptr_eq(&before.1, &serving(&http)));
        assert_eq!(Certificates::default().reload().unwrap(), 0);
    }
}
