//! `meridian cert`: the certificate authority, node and client certificates of a deployment with TLS, made as
//! `cockroach cert` makes them (docs/security.md). rcgen makes every key (ECDSA P-256) and certificate and signs
//! them; nothing here is cryptography of its own.
//!
//! The certificates directory holds `ca.crt`, `node.crt` and `node.key`, and `client.USER.crt` and
//! `client.USER.key`; the CA's key is `ca.key` there unless `--ca-key` keeps it elsewhere (it need not be on
//! any node). Keys are written readable by their owner only. Nothing that exists is replaced without
//! `--overwrite`, and nothing is written unless every file of the command may be.

use clap::{Args, Subcommand};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    PublicKeyData, SanType,
};
use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write};
use std::net::IpAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use time::{Duration as Span, OffsetDateTime};

/// A CA outlives the certificates it signs, so that they can be renewed under it.
const CA_LIFETIME: Span = Span::days(10 * 365);
/// Node and client certificates.
const LEAF_LIFETIME: Span = Span::days(5 * 365);
/// Certificates are valid from this long before they are made, so that a machine whose clock is a little
/// behind the one that made them still accepts them.
const BACKDATE: Span = Span::hours(1);

#[derive(Args, Debug)]
pub struct CertArgs {
    #[command(subcommand)]
    command: CertCommand,
}

#[derive(Subcommand, Debug)]
enum CertCommand {
    /// A certificate authority: a new key (DIR/ca.key, or --ca-key) and its self-signed certificate (DIR/ca.crt),
    /// which every node and client is given to check the others' certificates.
    #[command(name = "create-ca")]
    Ca {
        #[command(flatten)]
        files: Files,
    },
    /// A node's certificate and key (DIR/node.crt, DIR/node.key), signed by the CA: for its TLS client port, and
    /// usable as a client certificate too. Its common name is `node-N`.
    #[command(name = "create-node")]
    Node {
        /// The node's id (`meridian server --node-id`).
        #[arg(long)]
        node_id: u32,
        /// A name or IP address clients reach the node by (an IP address becomes an IP SAN, a name a DNS
        /// SAN); repeat for each. A client checks that the host it dialled is one of them, so list `localhost`
        /// and `127.0.0.1` too if clients on the node's machine use them.
        #[arg(long = "host", value_name = "HOST", required = true)]
        hosts: Vec<String>,
        #[command(flatten)]
        files: Files,
    },
    /// A client certificate and key for USER (DIR/client.USER.crt, DIR/client.USER.key), signed by the CA, for
    /// a node that requires client certificates (`--tls-auth-clients yes`). Its common name is USER.
    #[command(name = "create-client")]
    Client {
        /// The user's name: letters, digits, `_`, `-` and `.`, not starting with `.`.
        #[arg(value_parser = user_name)]
        user: String,
        #[command(flatten)]
        files: Files,
    },
}

/// Where the files go and how long the certificate lasts.
#[derive(Args, Debug)]
pub struct Files {
    /// The certificates directory (created if missing).
    #[arg(long, value_name = "DIR")]
    certs_dir: PathBuf,
    /// The CA's key (default: DIR/ca.key): written by create-ca, read to sign by the others.
    #[arg(long, value_name = "FILE")]
    ca_key: Option<PathBuf>,
    /// How long the certificate is valid, in years, days or hours (`5y`, `365d`, `24h`); default 10y for a CA,
    /// 5y for node and client certificates.
    #[arg(long, value_name = "SPAN", value_parser = lifetime)]
    lifetime: Option<Span>,
    /// Replace files that exist, instead of refusing to.
    #[arg(long)]
    overwrite: bool,
}

pub fn run(args: CertArgs) -> Result<ExitCode, String> {
    match args.command {
        CertCommand::Ca { files } => {
            let ca = create_ca(&files)?;
            println!("CA certificate {} (until {}), key {}", ca.cert.display(), ca.until, ca.key.display());
        }
        CertCommand::Node { node_id, hosts, files } => print_leaf(&create_node(&files, node_id, &hosts)?),
        CertCommand::Client { user, files } => print_leaf(&create_client(&files, &user)?),
    }
    Ok(ExitCode::SUCCESS)
}

fn print_leaf(made: &Made) {
    println!("{} for {} (until {}), key {}", made.cert.display(), made.cn, made.until, made.key.display());
}

/// What a creation wrote: for `meridian cert` to report, and for `meridian demo --secure` to point clients at.
#[derive(Debug)]
pub struct Made {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The certificate's common name.
    pub cn: String,
    pub until: time::Date,
}

/// `create-ca`: a new CA key (`ca.key`, or `--ca-key`) and its self-signed certificate `ca.crt`.
pub fn create_ca(files: &Files) -> Result<Made, String> {
    let (cert_path, key_path) = (files.path("ca.crt"), files.ca_key());
    files.check_free(&[&cert_path, &key_path])?;
    let key = new_key()?;
    // A name of its own: a verifier looks a certificate's issuer up by name, so two CAs of one name make a
    // certificate of the other CA fail on its signature rather than as unknown.
    let fingerprint = key.public_key_raw().iter().skip(1).take(4).map(|b| format!("{b:02x}")).collect::<String>();
    let cn = format!("Meridian CA {fingerprint}");
    let mut params = files.params(&cn, CA_LIFETIME);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let cert = params.self_signed(&key).map_err(|e| format!("cannot make the CA certificate: {e}"))?;
    files.write_key(&key_path, &key)?;
    files.write(&cert_path, &cert.pem(), 0o644)?;
    Ok(Made { cert: cert_path, key: key_path, cn, until: params.not_after.date() })
}

/// `create-node`: `node.crt` and `node.key` for node `node_id`, reached by `hosts`, signed by the CA (whose
/// `ca.crt` must be in the directory).
pub fn create_node(files: &Files, node_id: u32, hosts: &[String]) -> Result<Made, String> {
    let sans = hosts.iter().map(|h| san(h)).collect::<Result<_, _>>()?;
    let usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    issue(files, "node", &format!("node-{node_id}"), sans, usages)
}

/// `create-client`: `client.USER.crt` and `client.USER.key`, signed by the CA.
pub fn create_client(files: &Files, user: &str) -> Result<Made, String> {
    let user = user_name(user)?;
    issue(files, &format!("client.{user}"), &user, Vec::new(), vec![ExtendedKeyUsagePurpose::ClientAuth])
}

/// Makes `NAME.crt` and `NAME.key`, for `cn` with these names and purposes, signed by the CA.
fn issue(
    files: &Files,
    name: &str,
    cn: &str,
    sans: Vec<SanType>,
    usages: Vec<ExtendedKeyUsagePurpose>,
) -> Result<Made, String> {
    let (cert_path, key_path) = (files.path(&format!("{name}.crt")), files.path(&format!("{name}.key")));
    files.check_free(&[&cert_path, &key_path])?;
    let ca = files.load_ca()?;
    let mut params = files.params(cn, LEAF_LIFETIME);
    params.subject_alt_names = sans;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = usages;
    params.use_authority_key_identifier_extension = true;
    let key = new_key()?;
    let cert = params.signed_by(&key, &ca).map_err(|e| format!("cannot sign {}: {e}", cert_path.display()))?;
    files.write_key(&key_path, &key)?;
    files.write(&cert_path, &cert.pem(), 0o644)?;
    Ok(Made { cert: cert_path, key: key_path, cn: cn.to_string(), until: params.not_after.date() })
}

impl Files {
    /// Files in `certs_dir`, signed with the CA key `ca_key` (default: `certs_dir/ca.key`), of the default
    /// lifetimes; with `overwrite`, replacing what exists.
    pub fn new(certs_dir: PathBuf, ca_key: Option<PathBuf>, overwrite: bool) -> Files {
        Files { certs_dir, ca_key, lifetime: None, overwrite }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.certs_dir.join(file)
    }

    fn ca_key(&self) -> PathBuf {
        self.ca_key.clone().unwrap_or_else(|| self.path("ca.key"))
    }

    /// Refuses, before anything is written, files that exist unless `--overwrite` allows them.
    fn check_free(&self, paths: &[&Path]) -> Result<(), String> {
        match paths.iter().find(|p| p.exists()) {
            Some(taken) if !self.overwrite => {
                Err(format!("{} exists; give --overwrite to replace it", taken.display()))
            }
            _ => Ok(()),
        }
    }

    /// A certificate's parameters: its subject and validity, from now (less [`BACKDATE`]) for `--lifetime`
    /// or `default`.
    fn params(&self, cn: &str, default: Span) -> CertificateParams {
        let now = OffsetDateTime::now_utc();
        let mut params = CertificateParams::default();
        params.distinguished_name.remove(DnType::CommonName);
        params.distinguished_name.push(DnType::OrganizationName, "Meridian");
        params.distinguished_name.push(DnType::CommonName, cn);
        params.not_before = now - BACKDATE;
        params.not_after = now + self.lifetime.unwrap_or(default);
        params
    }

    /// The CA certificate and its key, checked to belong together.
    fn load_ca(&self) -> Result<Issuer<'static, KeyPair>, String> {
        let (cert_path, key_path) = (self.path("ca.crt"), self.ca_key());
        let cert = fs::read_to_string(&cert_path).map_err(|e| match e.kind() {
            ErrorKind::NotFound => format!(
                "no CA certificate at {}: make one first with `meridian cert create-ca --certs-dir {}`",
                cert_path.display(),
                self.certs_dir.display()
            ),
            _ => format!("cannot read the CA certificate {}: {e}", cert_path.display()),
        })?;
        let key = fs::read_to_string(&key_path)
            .map_err(|e| format!("cannot read the CA key {} (--ca-key): {e}", key_path.display()))?;
        let key = KeyPair::from_pem(&key).map_err(|e| format!("{}: not a private key: {e}", key_path.display()))?;
        check_ca(&cert, &key).map_err(|e| format!("{}: {e}", cert_path.display()))?;
        Issuer::from_ca_cert_pem(&cert, key).map_err(|e| format!("{}: {e}", cert_path.display()))
    }

    /// Writes a private key readable by its owner only.
    fn write_key(&self, path: &Path, key: &KeyPair) -> Result<(), String> {
        self.write(path, &key.serialize_pem(), 0o600)
    }

    fn write(&self, path: &Path, text: &str, mode: u32) -> Result<(), String> {
        let cannot = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(cannot)?;
        }
        let mut options = OpenOptions::new();
        options.write(true).mode(mode);
        if self.overwrite {
            options.create(true).truncate(true);
        } else {
            options.create_new(true);
        }
        let mut file = options.open(path).map_err(cannot)?;
        // `mode` applies only to a file the open creates; one overwritten keeps its own unless set here.
        file.set_permissions(fs::Permissions::from_mode(mode)).map_err(cannot)?;
        file.write_all(text.as_bytes()).and_then(|()| file.sync_all()).map_err(cannot)
    }
}

/// Refuses a certificate that is not a CA's, or whose public key is not `key`'s: whatever it signed then
/// would not verify.
fn check_ca(pem: &str, key: &KeyPair) -> Result<(), String> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(|e| format!("not a PEM file: {e}"))?;
    let cert = pem.parse_x509().map_err(|e| format!("not a certificate: {e}"))?;
    if !cert.is_ca() {
        return Err("not a CA certificate".into());
    }
    if cert.public_key().raw != key.subject_public_key_info().as_slice() {
        return Err("the CA key (--ca-key) is not this certificate's key".into());
    }
    Ok(())
}

fn new_key() -> Result<KeyPair, String> {
    KeyPair::generate().map_err(|e| format!("cannot generate a key: {e}"))
}

/// A host as a subject alternative name: an IP address or a DNS name.
fn san(host: &str) -> Result<SanType, String> {
    match host.parse::<IpAddr>() {
        Ok(ip) => Ok(SanType::IpAddress(ip)),
        Err(_) => host.try_into().map(SanType::DnsName).map_err(|e| format!("--host {host:?}: {e}")),
    }
}

/// `--lifetime`: a positive number of years (`y`, 365 days), days (`d`) or hours (`h`).
fn lifetime(text: &str) -> Result<Span, String> {
    let unit_at = text.char_indices().last().map_or(0, |(at, _)| at);
    let (number, unit) = text.split_at(unit_at);
    let n: i64 = number.parse().ok().filter(|n| *n > 0).ok_or_else(|| format!("{text:?} is not a span like 5y"))?;
    let hours = match unit {
        "y" => 365 * 24,
        "d" => 24,
        "h" => 1,
        _ => return Err(format!("{text:?}: give years, days or hours, as 5y, 365d or 24h")),
    };
    n.checked_mul(hours)
        .filter(|h| *h <= 1000 * 365 * 24)
        .map(Span::hours)
        .ok_or_else(|| format!("{text:?} is too long"))
}

/// A client's user name, which is also part of its files' names.
fn user_name(text: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if text.is_empty() || text.starts_with('.') || !text.chars().all(allowed) {
        return Err(format!("{text:?}: a user name has letters, digits, _, - and ., and does not start with ."));
    }
    Ok(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_are_years_days_or_hours() {
        assert_eq!(lifetime("5y"), Ok(Span::days(5 * 365)));
        assert_eq!(lifetime("30d"), Ok(Span::days(30)));
        assert_eq!(lifetime("24h"), Ok(Span::hours(24)));
        for bad in ["", "5", "y", "0d", "-1d", "5w", "1.5y", "9999999999999y"] {
            assert!(lifetime(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn user_names_are_safe_in_file_names() {
        assert!(user_name("app-1.read_only").is_ok());
        for bad in ["", ".hidden", "a/b", "../x", "a b", "é"] {
            assert!(user_name(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn hosts_become_ip_or_dns_names() {
        assert!(matches!(san("127.0.0.1"), Ok(SanType::IpAddress(_))));
        assert!(matches!(san("::1"), Ok(SanType::IpAddress(_))));
        assert!(matches!(san("node1.example.com"), Ok(SanType::DnsName(_))));
    }

    #[test]
    fn a_ca_key_that_is_not_the_certificates_is_refused() {
        let key = new_key().unwrap();
        let mut params = CertificateParams::default();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = params.self_signed(&key).unwrap().pem();
        assert_eq!(check_ca(&ca, &key), Ok(()));
        assert!(check_ca(&ca, &new_key().unwrap()).unwrap_err().contains("not this certificate's key"));
        let leaf = CertificateParams::default().self_signed(&key).unwrap().pem();
        assert_eq!(check_ca(&leaf, &key), Err("not a CA certificate".into()));
    }
}
