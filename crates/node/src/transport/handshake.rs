//! The peer handshake: who may connect. A caller is admitted only if it belongs to the same cluster (the
//! fingerprint of the configuration the cluster started from, which a joining node learns from the node it
//! joins through) and claims an id that is not ours; anything else is a misconfiguration that must be
//! visible, not a peer to trust. Any other id is admitted, since nodes join at run time; the cluster map
//! decides what a node may do.

use meridian_core::wire::Hello;
use meridian_core::{ClusterConfig, NodeId};

#[derive(Clone, Debug)]
pub(crate) struct Gate {
    me: NodeId,
    fingerprint: u64,
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
}

impl Gate {
    pub(crate) fn new(me: NodeId, cluster: &ClusterConfig) -> Gate {
        Gate { me, fingerprint: cluster.fingerprint() }
    }

    /// The first frame this node sends on every outbound connection.
    pub(crate) fn hello(&self) -> Hello {
        Hello { node: self.me, cluster: self.fingerprint }
    }

    pub(crate) fn admit(&self, hello: &Hello) -> Result<NodeId, Refusal> {
        if hello.cluster != self.fingerprint {
            return Err(Refusal::OtherCluster { theirs: hello.cluster, ours: self.fingerprint });
        }
        if hello.node == self.me {
            return Err(Refusal::Impostor(hello.node));
        }
        Ok(hello.node)
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

    #[test]
    fn admits_members_of_the_same_cluster() {
        let gate = Gate::new(NodeId(1), &cluster(3));
        let hello = Hello { node: NodeId(2), cluster: cluster(3).fingerprint() };
        assert_eq!(gate.admit(&hello), Ok(NodeId(2)));
    }

    #[test]
    fn refuses_other_clusters_and_impostors_and_admits_newcomers() {
        let gate = Gate::new(NodeId(1), &cluster(3));
        let ours = cluster(3).fingerprint();
        let theirs = cluster(2).fingerprint();
        let other = gate.admit(&Hello { node: NodeId(2), cluster: theirs }).unwrap_err();
        assert_eq!(other, Refusal::OtherCluster { theirs, ours });
        assert!(other.to_string().contains(&format!("{theirs:#018x}")));
        assert_eq!(gate.admit(&Hello { node: NodeId(9), cluster: ours }), Ok(NodeId(9)), "a node that joins");
        assert_eq!(gate.admit(&Hello { node: NodeId(1), cluster: ours }), Err(Refusal::Impostor(NodeId(1))));
    }
}
