//! The cluster map as a node's `GET /v1/cluster` shows it under `status` (`crates/proto/src/node/status.rs`):
//! the part the benches read, and which chain serves a key.

use super::http;
use meridian_core::ring::key_token;
use meridian_core::KeyspaceId;
use meridian_proto::map::placement::chain_for_token;
use serde::Deserialize;
use std::net::SocketAddr;

/// The cluster map as one node sees it, and whether it leads the cluster manager.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct MapView {
    pub epoch: u64,
    /// `None` until the node has a map.
    pub partitions: Option<u32>,
    pub nodes: Vec<NodeEntry>,
    /// Every keyspace's chains, in chain id order.
    pub chains: Vec<Chain>,
    /// `None` until the node has a map.
    pub keyspaces: Option<Vec<Keyspace>>,
    /// The cluster manager's part on this node.
    pub manager: Manager,
}

#[derive(Clone, Debug, Deserialize)]
pub(crate) struct NodeEntry {
    pub id: u32,
    pub state: String,
}

#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Chain {
    pub id: u32,
    pub keyspace: u32,
    /// Raised by every change of the members.
    pub view: u64,
    /// Head first, tail last.
    pub members: Vec<u32>,
    /// The membership step in flight, if any.
    pub change: Option<Change>,
    /// Each member's replica type (`mem`, `log`, `buffered`), in the order of `members`.
    pub kinds: Vec<String>,
    /// Members whose replica is lost (a `mem` or `buffered` replica whose node restarted) and not yet
    /// removed and copied back.
    pub lost: Vec<u32>,
}

/// A step in flight: an Add names its node and whether it has been inserted (pre-copy done); a Remove
/// names neither.
#[derive(Clone, Copy, Debug, Deserialize)]
pub(crate) struct Change {
    pub add: Option<u32>,
    #[serde(default)]
    pub inserted: bool,
}

#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Keyspace {
    /// What `SELECT` takes.
    pub id: u32,
    pub name: String,
    /// R: the length of its chains at full replication.
    pub replication: usize,
}

#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Manager {
    /// "leader", "voter", or `None` on a node that is not a voter.
    pub here: Option<String>,
}

impl MapView {
    /// The map node `addr` (an HTTP address) has; an error if it has none yet.
    pub(crate) fn read(addr: SocketAddr) -> Result<MapView, String> {
        let map = MapView::deserialize(&http::get(addr, "/v1/cluster")?["status"])
            .map_err(|e| format!("unexpected /v1/cluster from {addr}: {e}"))?;
        match map.partitions {
            Some(_) => Ok(map),
            None => Err(format!("the node at {addr} has no cluster map yet")),
        }
    }

    /// The chain of `keyspace` that serves `key`: the top log2(partitions) bits of its ring token.
    pub(crate) fn chain_of(&self, keyspace: u32, key: &[u8]) -> Option<&Chain> {
        let id = chain_for_token(KeyspaceId(keyspace), key_token(key), self.partitions?).0;
        self.chains.binary_search_by_key(&id, |c| c.id).ok().map(|i| &self.chains[i])
    }

    /// The keyspace called `name`.
    pub(crate) fn keyspace(&self, name: &str) -> Option<&Keyspace> {
        self.keyspaces.iter().flatten().find(|k| k.name == name)
    }

    /// The chains of `keyspace`.
    pub(crate) fn chains_in(&self, keyspace: u32) -> impl Iterator<Item = &Chain> {
        self.chains.iter().filter(move |c| c.keyspace == keyspace)
    }

    /// Whether this node leads the cluster manager.
    pub(crate) fn leads(&self) -> bool {
        self.manager.here.as_deref() == Some("leader")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use meridian_core::ChainId;
    use serde_json::{json, Value};

    /// A chain of `keyspace` as `/v1/cluster` shows it.
    pub(crate) fn chain(
        id: u32,
        keyspace: u32,
        view: u64,
        members: &[u32],
        change: Value,
        lost: &[u32],
        kinds: &[&str],
    ) -> Value {
        json!({
            "id": id, "keyspace": keyspace, "partition": id % 4096, "first_token": 0, "last_token": 1,
            "view": view, "members": members, "change": change, "kinds": kinds, "lost": lost, "restored_from": null,
        })
    }

    /// A map with `chains`, `nodes` and `keyspaces`, as node 1 sees it when it is not the leader.
    pub(crate) fn map(chains: Value, nodes: Value, keyspaces: Value) -> MapView {
        let status = json!({
            "node": 1, "epoch": 7, "partitions": 4, "nodes": nodes, "chains": chains, "keyspaces": keyspaces,
            "manager": { "voters": [1, 2, 3], "here": "voter", "leader_guess": 2 },
        });
        MapView::deserialize(&status).unwrap()
    }

    #[test]
    fn keys_map_to_their_keyspace_chains_by_the_top_bits_of_their_token() {
        let ids: Vec<u32> = (0..2).flat_map(|k| (0..4).map(move |p| ChainId::new(KeyspaceId(k), p).0)).collect();
        let chains: Vec<Value> =
            ids.iter().map(|&id| chain(id, id >> 12, 1, &[1, 2], Value::Null, &[], &["log", "log"])).collect();
        let keyspaces =
            json!([{ "id": 0, "name": "default", "replication": 2 }, { "id": 1, "name": "md", "replication": 2 }]);
        let map = map(Value::from(chains), json!([]), keyspaces);
        for key in [&b"a"[..], b"key:1", b"another key"] {
            let partition = (key_token(key) >> 62) as u32;
            assert_eq!(map.chain_of(0, key).map(|c| c.id), Some(partition));
            assert_eq!(map.chain_of(1, key).map(|c| c.id), Some(4096 + partition));
            assert!(map.chain_of(2, key).is_none(), "no such keyspace");
        }
        assert_eq!(map.keyspace("md").map(|k| k.id), Some(1));
        assert_eq!(map.chains_in(1).count(), 4);
        assert!(!map.leads());
    }
}
