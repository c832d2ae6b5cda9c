//! `meridian server`'s HTTP API flags: where it listens, HTTPS, and what a request needs to be admitted
//! (docs/security.md).

use clap::Args;
use meridian_node::{CertUser, ClientAuth, HttpSecurity, HttpToken, HttpsConfig, TlsFiles};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct HttpArgs {
    /// HTTP listen address (/health, /metrics, /v1/cluster, what `meridian ctl` uses).
    #[arg(long)]
    pub http: Option<SocketAddr>,
    /// Serve the HTTP API over HTTPS only, with this certificate (PEM, its chain after it), as `meridian cert
    /// create-node` makes it.
    #[arg(long, value_name = "FILE", requires = "http_tls_key_file")]
    http_tls_cert_file: Option<PathBuf>,
    /// The HTTPS certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "http_tls_cert_file")]
    http_tls_key_file: Option<PathBuf>,
    /// CA certificates (PEM) HTTPS callers' certificates are checked against: a request over a connection with
    /// one is admitted if it names a node (node-N) or an ACL user who may run ACL SETUSER; callers without one
    /// need the token.
    #[arg(long, value_name = "FILE", requires = "http_tls_cert_file")]
    http_tls_ca_cert_file: Option<PathBuf>,
    /// Every HTTP request must carry the token this file holds (`Authorization: Bearer TOKEN`; `meridian ctl
    /// --token-file`), or come with a client certificate (--http-tls-ca-cert-file). Give every node the same
    /// one: a node that joins uses it to ask the node it joins through.
    #[arg(long, value_name = "FILE")]
    pub http_token_file: Option<PathBuf>,
    /// With --http-token-file or --http-tls-ca-cert-file: leave GET /health, /ready and /metrics open to
    /// callers with neither the token nor a certificate.
    #[arg(long)]
    http_open_probes: bool,
}

impl HttpArgs {
    /// The flags' relations, checked without reading any file: what `--print-config` checks too.
    pub fn check(&self) -> Result<(), String> {
        if self.http_open_probes && self.http_token_file.is_none() && self.http_tls_ca_cert_file.is_none() {
            return Err("--http-open-probes opens the probes of a closed API: it needs --http-token-file or \
                        --http-tls-ca-cert-file"
                .into());
        }
        Ok(())
    }

    /// The token, read from its file.
    pub fn token(&self) -> Result<Option<String>, String> {
        self.http_token_file.as_deref().map(read_token).transpose()
    }

    /// Who may use the API, and over what, with every file read and checked; `token` is the one
    /// [`HttpArgs::token`] read.
    pub fn security(&self, token: Option<&str>) -> Result<HttpSecurity, String> {
        self.check()?;
        let token = token.map(HttpToken::new).transpose();
        let token = token.map_err(|e| format!("--http-token-file: {e}"))?;
        let tls = match (&self.http_tls_cert_file, &self.http_tls_key_file) {
            (Some(cert), Some(key)) => Some(self.https(cert, key)?),
            _ => None,
        };
        Ok(HttpSecurity { token, tls, open_probes: self.http_open_probes })
    }

    fn https(&self, cert: &Path, key: &Path) -> Result<HttpsConfig, String> {
        let ca = self.http_tls_ca_cert_file.clone();
        // Asked for, not required: the probes, and callers with the token, come without one.
        let auth_clients = Some(if ca.is_some() { ClientAuth::Optional } else { ClientAuth::No });
        let files = TlsFiles { cert: cert.into(), key: key.into(), ca, auth_clients, auth_clients_user: CertUser::Off };
        let tls = files.load().map_err(|e| format!("HTTPS: {e}"))?;
        Ok(HttpsConfig { tls, client_certificates: self.http_tls_ca_cert_file.is_some() })
    }

    /// The CA callers' certificates are checked against, if any.
    pub fn ca(&self) -> Option<&Path> {
        self.http_tls_ca_cert_file.as_deref()
    }
}

/// The token a file holds (its last newline is not part of it).
pub fn read_token(file: &Path) -> Result<String, String> {
    let text =
        std::fs::read_to_string(file).map_err(|e| format!("cannot read the token file {}: {e}", file.display()))?;
    Ok(text.trim().to_string())
}
