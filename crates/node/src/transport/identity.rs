//! Which node a peer certificate stands for. `meridian cert create-node --node-id N` names the node in the
//! certificate's common name, `node-N`; with mutual TLS a peer is admitted only as the node its certificate
//! names, so a node holding a valid certificate for node 3 cannot claim to be node 5, and a client certificate
//! signed by the same CA (`create-client alice`) is no node's at all.

use meridian_core::NodeId;
use rustls::pki_types::{CertificateDer, ServerName};

/// Why a certificate names no node.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum IdentityError {
    #[error("its certificate cannot be read: {0}")]
    Unreadable(String),
    #[error("its certificate has no common name, so it names no node")]
    NoCommonName,
    #[error("its certificate is for {0:?}, not for a node (`meridian cert create-node` makes node-N)")]
    NotANode(String),
}

/// The node `cert` (DER) was issued to.
pub(crate) fn node_of(cert: &CertificateDer<'_>) -> Result<NodeId, IdentityError> {
    let cn = common_name(cert)?;
    node_named(&cn).ok_or(IdentityError::NotANode(cn))
}

/// The subject common name of `cert` (DER): `node-N` for a node, the user's name for a client
/// (`meridian cert create-client USER`).
pub(crate) fn common_name(cert: &CertificateDer<'_>) -> Result<String, IdentityError> {
    let (_, parsed) =
        x509_parser::parse_x509_certificate(cert).map_err(|e| IdentityError::Unreadable(e.to_string()))?;
    let cn = parsed.subject().iter_common_name().next().ok_or(IdentityError::NoCommonName)?;
    cn.as_str().map(str::to_string).map_err(|e| IdentityError::Unreadable(e.to_string()))
}

/// The node a common name `node-N` stands for.
pub(crate) fn node_named(name: &str) -> Option<NodeId> {
    let digits = name.strip_prefix("node-")?;
    // `node-03` or `node-+3` would name node 3 too: one spelling per node.
    let canonical = digits.bytes().all(|b| b.is_ascii_digit()) && (digits == "0" || !digits.starts_with('0'));
    canonical.then(|| digits.parse().ok().map(NodeId)).flatten()
}

/// The TLS server name a node is dialled by: what the outbound verifier compares with the certificate's node.
pub(crate) fn server_name(node: NodeId) -> ServerName<'static> {
    ServerName::try_from(format!("node-{}", node.0)).expect("node-N is a valid DNS name")
}

/// The node a server name from [`server_name`] stands for.
pub(crate) fn node_of_name(name: &ServerName<'_>) -> Option<NodeId> {
    match name {
        ServerName::DnsName(dns) => node_named(dns.as_ref()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(cn: Option<&str>) -> CertificateDer<'static> {
        let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            params.distinguished_name.push(rcgen::DnType::CommonName, cn);
        }
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().clone()
    }

    #[test]
    fn a_node_certificate_names_its_node() {
        assert_eq!(node_of(&cert(Some("node-3"))), Ok(NodeId(3)));
        assert_eq!(node_of(&cert(Some("alice"))), Err(IdentityError::NotANode("alice".into())));
        assert_eq!(node_of(&cert(None)), Err(IdentityError::NoCommonName));
        assert!(matches!(node_of(&CertificateDer::from(vec![1, 2, 3])), Err(IdentityError::Unreadable(_))));
    }

    #[test]
    fn only_the_canonical_spelling_names_a_node() {
        assert_eq!(node_named("node-0"), Some(NodeId(0)));
        assert_eq!(node_named("node-4294967295"), Some(NodeId(u32::MAX)));
        for other in ["node-03", "node-+3", "node-", "node-4294967296", "Node-3", "node-3 ", "xnode-3"] {
            assert_eq!(node_named(other), None, "{other}");
        }
    }

    #[test]
    fn a_node_is_dialled_by_a_server_name_that_names_it() {
        assert_eq!(node_of_name(&server_name(NodeId(7))), Some(NodeId(7)));
        assert_eq!(node_of_name(&ServerName::try_from("127.0.0.1").unwrap()), None);
    }
}
