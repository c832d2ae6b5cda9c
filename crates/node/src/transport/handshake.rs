//! The peer handshake: who may connect. A caller is admitted only if it belongs to the same cluster (the
//! fingerprint of the configuration the cluster started from, which a joining node learns from the node it
//! joins through) and claims an id that is not ours; anything else is a misconfiguration that must be
//! visible, not a peer to trust. Any other id is admitted, since nodes join at run time; the cluster map
//! decides what a node may do. A node that emulates a WAN ([`Wan`]) also refuses a caller from a region its
//! topology lacks, and delays what it admits by the caller's region. Over mutual TLS (`mutual_tls.rs`), the
//! caller is also held to the node its certificate names: the certificate, not the hello, says who it is.

use super::refusals::RefusalLog;
use super::wan::{DelayLine, Wan};
use meridian_core::wire::Hello;
use meridian_core::{ClusterConfig, NodeId};

#[derive(Clone, Debug)]
pub(crate) struct Gate {
    me: NodeId,
    fingerprint: u64,
    region: String,
    wan: Option<Wan>,
    /// Where the peer port logs the callers it refuses.
    pub(crate) refusals: RefusalLog,
}

/// An admitted caller, and the delay line its messages pass through when this node emulates a WAN.
pub(crate) struct Admitted {
    pub(crate) from: NodeId,
    pub(crate) line: Option<DelayLine>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum Refusal {
    #[error(
        "it runs cluster config {theirs:#018x} and this node runs {ours:#018x}; \
         start every node with the same cluster config"
    )]
    OtherCluster { theirs: u64, ours: u64 },
    #[error("it claims node id {}, which is this node's own id; two nodes share one id", .0.0)]
    Impostor(NodeId),
    #[error("its certificate is for node {}, and it claims node {}", .cert.0, .claims.0)]
    NotItsCertificate { cert: NodeId, claims: NodeId },
    #[error("it runs in region '{0}', which this node's --wan topology does not have")]
    RegionNotInWan(String),
}

impl Gate {
    /// The gate of node `me`, which runs in `region` (and in `wan`, if it emulates one).
    pub(crate) fn new(me: NodeId, cluster: &ClusterConfig, region: &str, wan: Option<Wan>) -> Gate {
        Gate { me, fingerprint: cluster.fingerprint(), region: region.into(), wan, refusals: RefusalLog::default() }
    }

    /// The first frame this node sends on every outbound connection.
    pub(crate) fn hello(&self) -> Hello {
        Hello { node: self.me, cluster: self.fingerprint, region: self.region.clone() }
    }

    /// `seed` varies the jitter of the caller's delay line; `certified` is the node the caller's certificate
    /// names, over mutual TLS.
    pub(crate) fn admit(&self, hello: &Hello, seed: u64, certified: Option<NodeId>) -> Result<Admitted, Refusal> {
        if let Some(cert) = certified.filter(|cert| *cert != hello.node) {
            return Err(Refusal::NotItsCertificate { cert, claims: hello.node });
        }
        if hello.cluster != self.fingerprint {
            return Err(Refusal::OtherCluster { theirs: hello.cluster, ours: self.fingerprint });
        }
        if hello.node == self.me {
            return Err(Refusal::Impostor(hello.node));
        }
        let line = self.wan.as_ref().map(|w| w.line_from(&hello.region, seed)).transpose()?;
        Ok(Admitted { from: hello.node, line })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::NodeSpec;

    fn cluster(replication: usize) -> ClusterConfig {
        let nodes = (1..=3).map(|i| NodeSpec::new(NodeId(i), format!("127.0.0.1:{}", 7000 + i)));
        ClusterConfig::new(nodes.collect(), replication, 4).unwrap()
    }

    fn hello(node: u32, cluster: u64, region: &str) -> Hello {
        Hello { node: NodeId(node), cluster, region: region.into() }
    }

    fn admitted(gate: &Gate, hello: &Hello) -> Result<(NodeId, bool), Refusal> {
        gate.admit(hello, 0, None).map(|a| (a.from, a.line.is_some()))
    }

    #[test]
    fn admits_members_of_the_same_cluster() {
        let gate = Gate::new(NodeId(1), &cluster(3), "default", None);
        assert_eq!(gate.hello(), hello(1, cluster(3).fingerprint(), "default"));
        assert_eq!(admitted(&gate, &hello(2, cluster(3).fingerprint(), "us")), Ok((NodeId(2), false)));
    }

    #[test]
    fn refuses_other_clusters_and_impostors_and_admits_newcomers() {
        let gate = Gate::new(NodeId(1), &cluster(3), "default", None);
        let ours = cluster(3).fingerprint();
        let theirs = cluster(2).fingerprint();
        let other = admitted(&gate, &hello(2, theirs, "default")).unwrap_err();
        assert_eq!(other, Refusal::OtherCluster { theirs, ours });
        assert!(other.to_string().contains(&format!("{theirs:#018x}")));
        assert_eq!(admitted(&gate, &hello(9, ours, "default")), Ok((NodeId(9), false)), "a node that joins");
        assert_eq!(admitted(&gate, &hello(1, ours, "default")), Err(Refusal::Impostor(NodeId(1))));
    }

    /// With a WAN, a caller gets a delay line by its region, and one from a region the WAN lacks is refused.
    #[test]
    fn a_wan_delays_callers_by_region_and_refuses_unknown_ones() {
        let topology = std::sync::Arc::new(meridian_core::topology::Topology::load("globlease-4").unwrap());
        let gate = Gate::new(NodeId(1), &cluster(3), "or", Some(Wan::new(topology, "or").unwrap()));
        let ours = cluster(3).fingerprint();
        assert_eq!(admitted(&gate, &hello(2, ours, "tk")), Ok((NodeId(2), true)));
        let refused = admitted(&gate, &hello(2, ours, "default")).unwrap_err();
        assert_eq!(refused.to_string(), "it runs in region 'default', which this node's --wan topology does not have");
    }

    #[test]
    fn a_certified_caller_is_the_node_its_certificate_names() {
        let gate = Gate::new(NodeId(1), &cluster(3), "default", None);
        let ours = cluster(3).fingerprint();
        assert_eq!(gate.admit(&hello(3, ours, "default"), 0, Some(NodeId(3))).map(|a| a.from), Ok(NodeId(3)));
        let refused = gate.admit(&hello(5, ours, "default"), 0, Some(NodeId(3))).map(|a| a.from).unwrap_err();
        assert_eq!(refused, Refusal::NotItsCertificate { cert: NodeId(3), claims: NodeId(5) });
        assert_eq!(refused.to_string(), "its certificate is for node 3, and it claims node 5");
    }
}
