//! `meridian server`'s client ports: the plain RESP port (`--listen`, which `off` switches off) and the TLS port
//! (`--tls-port` and its files, named as Redis names them so that `redis-cli --tls` and redis-py's `ssl=True`
//! connect unchanged; docs/security.md).

use clap::Args;
use meridian_node::{CertUser, ClientAuth, TlsFiles, TlsListen};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;

/// `--listen`: an address, or `off` for no plain RESP port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listen {
    Off,
    On(SocketAddr),
}

impl FromStr for Listen {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "off" => Ok(Listen::Off),
            _ => text.parse().map(Listen::On).map_err(|_| format!("{text:?} is not HOST:PORT or off")),
        }
    }
}

impl fmt::Display for Listen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Listen::Off => f.write_str("off"),
            Listen::On(addr) => addr.fmt(f),
        }
    }
}

impl Listen {
    pub fn addr(self) -> Option<SocketAddr> {
        match self {
            Listen::Off => None,
            Listen::On(addr) => Some(addr),
        }
    }
}

/// `--tls-port`: a port, or a whole address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsPort {
    Port(u16),
    Addr(SocketAddr),
}

impl FromStr for TlsPort {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.parse() {
            Ok(port) => Ok(TlsPort::Port(port)),
            Err(_) => text.parse().map(TlsPort::Addr).map_err(|_| format!("{text:?} is not a port or HOST:PORT")),
        }
    }
}

/// The TLS client port (docs/security.md).
#[derive(Args, Debug)]
pub struct TlsArgs {
    /// Serve Redis clients over TLS on this port (on --listen's IP address, or 127.0.0.1 with --listen off), or
    /// on this address (HOST:PORT). Needs --tls-cert-file and --tls-key-file.
    #[arg(long, value_name = "PORT|ADDR")]
    tls_port: Option<TlsPort>,
    /// The node's certificate (PEM; its chain after it, if any), as `meridian cert create-node` makes it.
    #[arg(long, value_name = "FILE")]
    tls_cert_file: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "FILE")]
    tls_key_file: Option<PathBuf>,
    /// CA certificates (PEM) to check client certificates against; with it, clients must present one signed by
    /// them unless --tls-auth-clients says otherwise.
    #[arg(long, value_name = "FILE")]
    tls_ca_cert_file: Option<PathBuf>,
    /// Whether TLS clients must present a certificate: yes (the default with --tls-ca-cert-file), optional
    /// (checked if presented), no (not asked for).
    #[arg(long, value_name = "yes|no|optional")]
    tls_auth_clients: Option<ClientAuth>,
    /// With CN, a client whose certificate's subject common name names an ACL user that is on starts as that
    /// user, without AUTH or password (Redis 8.6); other clients start as they would without it. Needs client
    /// certificates asked for (--tls-ca-cert-file, --tls-auth-clients yes or optional). Default: off.
    #[arg(long, value_name = "off|CN")]
    tls_auth_clients_user: Option<CertUser>,
}

impl TlsArgs {
    /// The flags' relations, checked without reading any file: what `--print-config` checks too.
    pub fn check(&self, listen: Listen) -> Result<(), String> {
        let files = [
            ("--tls-cert-file", self.tls_cert_file.is_some()),
            ("--tls-key-file", self.tls_key_file.is_some()),
            ("--tls-ca-cert-file", self.tls_ca_cert_file.is_some()),
            ("--tls-auth-clients", self.tls_auth_clients.is_some()),
            ("--tls-auth-clients-user", self.tls_auth_clients_user.is_some()),
        ];
        match self.tls_port {
            None if listen == Listen::Off => {
                Err("--listen off leaves the node no client port: give --tls-port, or a --listen address".into())
            }
            None => match files.iter().find(|(_, given)| *given) {
                Some((flag, _)) => Err(format!("{flag} is given without --tls-port, which it is for")),
                None => Ok(()),
            },
            Some(_) => match files[..2].iter().find(|(_, given)| !given) {
                Some((flag, _)) => Err(format!("--tls-port needs {flag}")),
                None => Ok(()),
            },
        }
    }

    /// The TLS port with its files read and checked, if one is asked for: every error now, before anything
    /// starts.
    pub fn port(&self, listen: Listen) -> Result<Option<TlsListen>, String> {
        self.check(listen)?;
        let (Some(port), Some(cert), Some(key)) = (self.tls_port, &self.tls_cert_file, &self.tls_key_file) else {
            return Ok(None);
        };
        let addr = match port {
            TlsPort::Addr(addr) => addr,
            TlsPort::Port(port) => {
                SocketAddr::new(listen.addr().map_or(IpAddr::V4(Ipv4Addr::LOCALHOST), |a| a.ip()), port)
            }
        };
        let files = TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            ca: self.tls_ca_cert_file.clone(),
            auth_clients: self.tls_auth_clients,
            auth_clients_user: self.tls_auth_clients_user.unwrap_or_default(),
        };
        let config = files.load().map_err(|e| format!("TLS port: {e}"))?;
        Ok(Some(TlsListen { addr, config }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(port: Option<&str>, files: &[&str]) -> TlsArgs {
        let has = |f: &str| files.contains(&f).then(|| PathBuf::from(f));
        TlsArgs {
            tls_port: port.map(|p| p.parse().unwrap()),
            tls_cert_file: has("cert"),
            tls_key_file: has("key"),
            tls_ca_cert_file: has("ca"),
            tls_auth_clients: files.contains(&"auth").then_some(ClientAuth::Optional),
            tls_auth_clients_user: files.contains(&"user").then_some(CertUser::Cn),
        }
    }

    #[test]
    fn listen_is_an_address_or_off() {
        assert_eq!("off".parse(), Ok(Listen::Off));
        assert_eq!("127.0.0.1:6380".parse::<Listen>().unwrap().addr(), Some("127.0.0.1:6380".parse().unwrap()));
        assert!("6380".parse::<Listen>().is_err());
        assert_eq!(Listen::Off.to_string(), "off");
    }

    #[test]
    fn a_tls_port_is_a_port_or_an_address() {
        assert_eq!("6379".parse(), Ok(TlsPort::Port(6379)));
        assert_eq!("0.0.0.0:6379".parse(), Ok(TlsPort::Addr("0.0.0.0:6379".parse().unwrap())));
        assert!("tls".parse::<TlsPort>().is_err());
    }

    #[test]
    fn a_node_needs_a_client_port_and_a_tls_port_its_files() {
        let on = Listen::On("127.0.0.1:6380".parse().unwrap());
        assert_eq!(args(None, &[]).check(on), Ok(()));
        assert!(args(None, &[]).check(Listen::Off).unwrap_err().contains("no client port"));
        assert_eq!(args(Some("6379"), &["cert", "key"]).check(Listen::Off), Ok(()));
        assert_eq!(args(Some("6379"), &["cert"]).check(on), Err("--tls-port needs --tls-key-file".into()));
        assert_eq!(args(Some("6379"), &["key", "ca"]).check(on), Err("--tls-port needs --tls-cert-file".into()));
        let unused = args(None, &["ca"]).check(on).unwrap_err();
        assert_eq!(unused, "--tls-ca-cert-file is given without --tls-port, which it is for");
        assert!(args(None, &["auth"]).check(on).unwrap_err().starts_with("--tls-auth-clients "));
        assert!(args(None, &["user"]).check(on).unwrap_err().starts_with("--tls-auth-clients-user "));
    }
}
