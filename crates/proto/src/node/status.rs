//! What `GET /v1/cluster`, `meridian ctl status` and `keyspace list` show: the node's map as JSON, with the
//! manager's state and this node's replicas.

use super::ClusterNode;
use crate::map::placement::partition_range;
use crate::map::{ChainChange, ClusterMap};
use meridian_core::{ChainId, KeyspaceId, Placement, Time};
use std::collections::BTreeMap;

impl ClusterNode {
    /// The cluster as this node sees it: its newest map (nodes with their states, chains with their views,
    /// members and any step in flight), the manager's state here, and this node's replicas with copy progress.
    pub fn status(&self, now: Time) -> serde_json::Value {
        let map = self.agent.map();
        let nodes: Vec<serde_json::Value> = map
            .iter()
            .flat_map(|m| m.nodes.iter().map(move |n| (m, n)))
            .map(|(m, (id, n))| {
                serde_json::json!({
                    "id": id.0, "state": n.state.to_string(), "vnodes": n.vnodes, "departed": n.departed,
                    "peer_addr": n.addrs.peer_addr, "resp_addr": n.addrs.resp_addr, "http_addr": n.addrs.http_addr,
                    "region": n.location.region, "zone": n.location.zone, "rack": n.location.rack,
                    "affiliate_of": m.hosts.get(id).map(|h| h.0),
                })
            })
            .collect();
        let chains: Vec<serde_json::Value> = map.iter().flat_map(|m| m.chains.values().map(move |c| (m, c))).map(|(m, c)| {
            let range = partition_range(c.id, m.partitions);
            serde_json::json!({
                "id": c.id.0, "keyspace": c.id.keyspace().0, "partition": c.id.partition(),
                "first_token": range.start(), "last_token": range.end(), "view": c.view,
                "members": c.members.iter().map(|n| n.0).collect::<Vec<_>>(), "change": c.change.as_ref().map(change_json),
                "kinds": c.kinds.iter().map(|k| k.name()).collect::<Vec<_>>(),
                "lost": c.lost.keys().map(|n| n.0).collect::<Vec<_>>(),
                "restored_from": c.restored.map(|(n, _)| n.0),
            })
        }).collect();
        serde_json::json!({
            "node": self.me.0,
            "epoch": self.agent.epoch(),
            "replication": map.map(|m| m.replication(ChainId::new(KeyspaceId::DEFAULT, 0))),
            "partitions": map.map(|m| m.partitions),
            "manager": {
                "voters": map.map(|m| m.manager_voters.iter().map(|v| v.0).collect::<Vec<_>>()),
                "learners": map.map(|m| m.manager_learners.iter().map(|v| v.0).collect::<Vec<_>>()),
                "voters_wanted": map.map(|m| m.voters_wanted.iter().map(|v| v.0).collect::<Vec<_>>()),
                "here": self.manager.as_ref().map(|m| match m.is_leader() {
                    true => "leader",
                    // As the map shown beside it says, not as this replica has applied so far.
                    false if map.is_some_and(|m| m.manager_learners.contains(&self.me)) => "learner",
                    false => "voter",
                }),
                "leader_guess": self.agent.leader_guess().map(|l| l.0),
            },
            "nodes": nodes,
            "keyspaces": map.map(|m| self.keyspaces_json(m)),
            "chains": chains,
            "replicas": self.protocols.status(&self.host.stores, now),
            "served": {
                "reads": self.chain().stats().reads, "writes": self.chain().stats().writes,
                "expired": self.chain().stats().expired, "evicted": self.chain().stats().evicted,
            },
            "refused": self.agent.refused,
        })
    }

    /// Every keyspace: its number (what `SELECT` takes), name and configuration (`durability` null: each node's
    /// own `--durability`; `placement` empty: spread over every region not in `ban_regions`), and where its
    /// protocol stands on this node (`here`: θt in force for a meteor keyspace).
    pub(super) fn keyspaces_json(&self, map: &ClusterMap) -> serde_json::Value {
        let list: Vec<serde_json::Value> = map
            .keyspaces
            .iter()
            .map(|(id, k)| {
                serde_json::json!({
                    "id": id.0, "name": k.name, "replication": k.config.replication(),
                    "replicas": k.config.replicas.iter().map(|r| r.name()).collect::<Vec<_>>(),
                    "update": k.config.update.name(), "read_from": k.config.read_from.name(),
                    "durability": k.config.durability.map(|d| d.name()), "maxmemory": k.config.maxmemory,
                    "protocol": k.config.protocol.protocol().name(), "placement": k.config.placement.regions,
                    "ban_regions": k.config.placement.banned, "unmet": unmet(map, &k.config.placement),
                    "read_quorum": k.config.protocol.quorum().map(|q| q.read.to_string()),
                    "write_quorum": k.config.protocol.quorum().map(|q| q.write.to_string()),
                    "timestamps": k.config.protocol.quorum().map(|q| q.timestamps.name()),
                    "lease_ms": k.config.protocol.lease().map(|l| l.lease_ms),
                    "write_mode": k.config.protocol.lease().map(|l| l.write_mode.name()),
                    "status_interval_ms": k.config.protocol.meteor().map(|m| m.status_interval_ms),
                    "clock_bound_ms": k.config.protocol.meteor().map(|m| m.clock_bound_ms),
                    "theta_ms": k.config.protocol.meteor().map(|m| m.theta.to_string()),
                    "redundancy": k.config.protocol.meteor().map(|m| m.redundancy),
                    "unsafe": k.config.protocol.meteor().map(|m| m.unsafe_theta),
                    "here": self.protocols.keyspace_gauges(*id).into_iter().collect::<BTreeMap<_, _>>(),
                })
            })
            .collect();
        serde_json::Value::Array(list)
    }
}

/// The regions where a keyspace's placement wants more replicas than there are placeable nodes.
fn unmet(map: &ClusterMap, placement: &Placement) -> serde_json::Value {
    let short = map.unmet(placement).into_iter();
    short.map(|(region, has, needs)| serde_json::json!({ "region": region, "has": has, "needs": needs })).collect()
}

fn change_json(change: &ChainChange) -> serde_json::Value {
    match *change {
        ChainChange::Add { node, position, step, inserted, kind } => {
            serde_json::json!({ "add": node.0, "position": position, "step": step, "inserted": inserted, "kind": kind.name() })
        }
        ChainChange::Remove { node, step } => serde_json::json!({ "remove": node.0, "step": step }),
    }
}
