//! The core's part of a node's `/metrics` (`Admin::Metrics`): the cluster map as this node sees it, its
//! replicas (role, replication lag, copies in progress), what its chains served, its stores' sizes, and the
//! client requests it took per keyspace. The runner adds its own part (clients, commands, fsyncs, process).
//!
//! Chains and replicas are summed per keyspace rather than exported one series per chain: a keyspace has
//! 64 partitions by default, and `/v1/cluster` already shows each chain. The one per-chain family is the
//! copies in flight, of which there are few.

use super::ClusterNode;
use crate::chain::ReplicaStatus;
use crate::map::{ChainChange, ClusterMap};
use meridian_core::exposition::{Exposition, MetricKind};
use meridian_core::{ChainId, KeyspaceId, Request, Time};
use std::collections::BTreeMap;

/// Client requests this node's front-end accepted, per keyspace, in keyspace order. A sorted vector, not a map:
/// it is looked up on every request, and a node has few keyspaces, whose search costs a map's node walk and more
/// (bench/instructions).
#[derive(Debug, Default)]
pub(super) struct RequestCounts(Vec<(KeyspaceId, KeyspaceRequests)>);

/// Client requests this node's front-end accepted for one keyspace.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct KeyspaceRequests {
    reads: u64,
    writes: u64,
}

impl RequestCounts {
    /// Counts a client request under its keyspace, before it is routed.
    pub(super) fn request(&mut self, req: &Request) {
        self.count(counted_as(req))
    }

    /// Counts what [`counted_as`] said a request counts as.
    pub(super) fn count(&mut self, counted: Option<(KeyspaceId, bool)>) {
        let Some((keyspace, write)) = counted else { return };
        let at = match self.0.binary_search_by_key(&keyspace, |&(k, _)| k) {
            Ok(at) => at,
            Err(at) => {
                self.0.insert(at, (keyspace, KeyspaceRequests::default()));
                at
            }
        };
        let c = &mut self.0[at].1;
        if write {
            c.writes += 1;
        } else {
            c.reads += 1;
        }
    }

    fn iter(&self) -> impl Iterator<Item = &(KeyspaceId, KeyspaceRequests)> {
        self.0.iter()
    }
}

/// What `req` counts as: its keyspace, and whether it is a write; None for administration, which is not counted.
pub(super) fn counted_as(req: &Request) -> Option<(KeyspaceId, bool)> {
    match req {
        Request::Get { keyspace, .. } => Some((*keyspace, false)),
        Request::Write(w) => Some((w.keyspace, true)),
        Request::Scan(scan) => Some((scan.keyspace, false)),
        Request::Admin(_) => None,
    }
}

impl ClusterNode {
    /// The core's metric families, in the Prometheus text format.
    pub fn metrics(&self, now: Time) -> String {
        let mut e = Exposition::new();
        let map = self.agent.map().map(|m| m.as_ref());
        e.single(
            "meridian_map_epoch",
            MetricKind::Gauge,
            "Epoch of the newest cluster map this node has.",
            self.agent.epoch(),
        );
        let leader = self.manager.as_ref().is_some_and(|m| m.is_leader());
        e.single(
            "meridian_manager_leader",
            MetricKind::Gauge,
            "1 if this node leads the cluster manager.",
            u8::from(leader),
        );
        if let Some(map) = map {
            cluster_families(&mut e, map);
        }
        let name = |k: KeyspaceId| keyspace_name(map, k);
        self.request_families(&mut e, &name);
        replica_families(&mut e, &self.protocols.status(&self.host.stores, now), &name);
        self.served_families(&mut e);
        self.protocol_families(&mut e);
        self.store_families(&mut e, &name);
        e.into_text()
    }

    fn request_families(&self, e: &mut Exposition, name: &dyn Fn(KeyspaceId) -> String) {
        let help = "Client requests this node accepted, by keyspace and kind (read or write).";
        e.family("meridian_keyspace_requests_total", MetricKind::Counter, help);
        for &(k, c) in self.requests.iter() {
            let ks = name(k);
            e.sample("meridian_keyspace_requests_total", &[("keyspace", &ks), ("kind", "read")], c.reads);
            e.sample("meridian_keyspace_requests_total", &[("keyspace", &ks), ("kind", "write")], c.writes);
        }
    }

    fn served_families(&self, e: &mut Exposition) {
        let s = self.chain().stats();
        let counters: [(&str, &str, u64); 6] = [
            ("meridian_tail_reads_total", "Reads this node answered as a chain's tail.", s.reads),
            ("meridian_tail_writes_total", "Writes this node committed as a chain's tail.", s.writes),
            (
                "meridian_expired_keys_total",
                "Keys this node deleted as a head because their deadline passed.",
                s.expired,
            ),
            (
                "meridian_evicted_keys_total",
                "Keys this node evicted as the head of a cache keyspace's chain.",
                s.evicted,
            ),
            ("meridian_precopies_total", "Pre-copies to this node that settled (joins, phase 1).", s.precopies),
            ("meridian_flushes_total", "Flushes to this node that completed (joins, phase 2).", s.flushes),
        ];
        for (metric, help, value) in counters {
            e.single(metric, MetricKind::Counter, help, value);
        }
        let help = "Replicas this node found lost when it started, to be copied again: kept in memory, or of chains \
                    it headed passing updates on before its fsync, after a stop that was not clean.";
        e.single("meridian_replicas_lost_at_start", MetricKind::Gauge, help, s.lost);
    }

    /// Every protocol core's own counters (what the simulator sums per run), one series per event.
    fn protocol_families(&self, e: &mut Exposition) {
        let metric = "meridian_protocol_events_total";
        e.family(
            metric,
            MetricKind::Counter,
            "What this node's keyspace protocol cores did since it started, by event.",
        );
        for (event, value) in self.protocols.counters() {
            e.sample(metric, &[("event", &event.replace(' ', "_"))], value);
        }
        let metric = "meridian_protocol_gauge";
        e.family(metric, MetricKind::Gauge, "Where this node's keyspace protocol cores stand now, by gauge.");
        for (gauge, value) in self.protocols.gauges() {
            e.sample(metric, &[("gauge", &gauge.replace(' ', "_"))], value);
        }
        let metric = "meridian_protocol_wait_seconds";
        e.family(metric, MetricKind::Histogram, "How long this node's keyspace protocol cores' waits took, by wait.");
        for (wait, latencies) in self.protocols.latencies() {
            e.histogram(metric, &[("wait", &wait.replace(' ', "_"))], &latencies);
        }
    }

    fn store_families(&self, e: &mut Exposition, name: &dyn Fn(KeyspaceId) -> String) {
        let stores: Vec<_> = self.host.stores.iter().map(|((k, kind), s)| (name(k), kind.name(), s.stats())).collect();
        type Field = fn(&meridian_store::StoreStats) -> u64;
        let families: [(&str, MetricKind, &str, Field); 5] = [
            ("meridian_store_keys", MetricKind::Gauge, "Live keys in this node's store.", |s| s.live_keys),
            ("meridian_store_log_bytes", MetricKind::Gauge, "Bytes of the store's log on disk.", |s| s.log_bytes),
            (
                "meridian_store_dead_bytes",
                MetricKind::Gauge,
                "Bytes of the log held by superseded records, which compaction reclaims.",
                |s| s.dead_bytes,
            ),
            ("meridian_store_index_bytes", MetricKind::Gauge, "Memory held by the store's index.", |s| s.index_bytes),
            (
                "meridian_store_compactions_total",
                MetricKind::Counter,
                "Compaction passes since the store opened.",
                |s| s.compactions,
            ),
        ];
        for (metric, kind, help, field) in families {
            e.family(metric, kind, help);
            for (ks, replica, stats) in &stores {
                e.sample(metric, &[("keyspace", ks), ("replica", replica)], field(stats));
            }
        }
        let metric = "meridian_store_expiring_keys";
        e.family(metric, MetricKind::Gauge, "Keys with a deadline in this node's store, as its ledger counts them.");
        for (key, _) in self.host.stores.iter() {
            let expiring = self.host.stores.ledger(key).map_or(0, |l| l.expiring() as u64);
            e.sample(metric, &[("keyspace", &name(key.0)), ("replica", key.1.name())], expiring);
        }
    }
}

/// Nodes by state, and chains by keyspace and whether a membership step is in flight.
fn cluster_families(e: &mut Exposition, map: &ClusterMap) {
    let mut states: BTreeMap<String, u64> = BTreeMap::new();
    for n in map.nodes.values() {
        *states.entry(n.state.to_string().to_lowercase()).or_default() += 1;
    }
    e.family("meridian_cluster_nodes", MetricKind::Gauge, "Nodes in the cluster map, by state.");
    for (state, n) in &states {
        e.sample("meridian_cluster_nodes", &[("state", state)], n);
    }
    let mut chains: BTreeMap<(KeyspaceId, &str), u64> = BTreeMap::new();
    for c in map.chains.values() {
        let state = match c.change {
            None => "stable",
            Some(ChainChange::Add { .. }) => "adding",
            Some(ChainChange::Remove { .. }) => "removing",
        };
        *chains.entry((c.id.keyspace(), state)).or_default() += 1;
    }
    let help = "Chains in the cluster map, by keyspace and state (stable, or a member being added or removed).";
    e.family("meridian_chains", MetricKind::Gauge, help);
    for ((k, state), n) in &chains {
        e.sample("meridian_chains", &[("keyspace", &keyspace_name(Some(map), *k)), ("state", state)], n);
    }
}

/// This node's replicas by role, their replication lag, and the copies it is receiving.
fn replica_families(e: &mut Exposition, replicas: &[ReplicaStatus], name: &dyn Fn(KeyspaceId) -> String) {
    let keyspace = |r: &ReplicaStatus| name(ChainId(r.chain).keyspace());
    let mut roles: BTreeMap<(String, &str), u64> = BTreeMap::new();
    let mut lag: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for r in replicas {
        *roles.entry((keyspace(r), r.role)).or_default() += 1;
        let l = lag.entry(keyspace(r)).or_default();
        l.0 += r.lu - r.la;
        l.1 = l.1.max(r.lu - r.la);
    }
    e.family("meridian_replicas", MetricKind::Gauge, "This node's replicas, by keyspace and role in their chain.");
    for ((ks, role), n) in &roles {
        e.sample("meridian_replicas", &[("keyspace", ks), ("role", role)], n);
    }
    let help = "Updates this node's replicas hold that the chain's tail has not yet acknowledged (LU - LA), summed.";
    e.family("meridian_replication_lag_updates", MetricKind::Gauge, help);
    for (ks, (sum, _)) in &lag {
        e.sample("meridian_replication_lag_updates", &[("keyspace", ks)], sum);
    }
    let help = "The largest LU - LA of one of this node's replicas: how far the chain furthest behind is.";
    e.family("meridian_replication_lag_updates_max", MetricKind::Gauge, help);
    for (ks, (_, max)) in &lag {
        e.sample("meridian_replication_lag_updates_max", &[("keyspace", ks)], max);
    }
    copy_families(e, replicas, &keyspace);
}

/// Pre-copies and flushes to this node in progress: bytes and rounds so far, per chain.
fn copy_families(e: &mut Exposition, replicas: &[ReplicaStatus], keyspace: &dyn Fn(&ReplicaStatus) -> String) {
    let copies: Vec<_> = replicas
        .iter()
        .filter_map(|r| r.copy.as_ref().map(|c| (keyspace(r), r.chain.to_string(), c.kind, c.source.to_string(), c)))
        .collect();
    let help = "Bytes of keys and values copied so far by a pre-copy or flush to this node in progress.";
    e.family("meridian_copy_bytes", MetricKind::Gauge, help);
    for (ks, chain, kind, source, c) in &copies {
        let labels = [("keyspace", ks.as_str()), ("chain", chain), ("kind", kind), ("source", source)];
        e.sample("meridian_copy_bytes", &labels, c.bytes);
    }
    e.family(
        "meridian_copy_rounds",
        MetricKind::Gauge,
        "Pre-copy rounds completed by a copy to this node in progress.",
    );
    for (ks, chain, kind, source, c) in &copies {
        let labels = [("keyspace", ks.as_str()), ("chain", chain), ("kind", kind), ("source", source)];
        e.sample("meridian_copy_rounds", &labels, c.rounds);
    }
}

/// A keyspace's name from the map; its number when the map does not have it (not yet, or dropped).
fn keyspace_name(map: Option<&ClusterMap>, k: KeyspaceId) -> String {
    map.and_then(|m| m.keyspaces.get(&k)).map_or_else(|| k.0.to_string(), |ks| ks.name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::CopyStatus;

    fn replica(chain: ChainId, role: &'static str, lu: u64, la: u64, copy: Option<CopyStatus>) -> ReplicaStatus {
        ReplicaStatus {
            chain: chain.0,
            role,
            view: Some(1),
            lu,
            la,
            active: true,
            lost: false,
            lease: false,
            memory: None,
            held: 0,
            copy,
        }
    }

    #[test]
    fn replicas_are_summed_per_keyspace_and_copies_shown_per_chain() {
        let (a, b) = (ChainId::new(KeyspaceId::DEFAULT, 3), ChainId::new(KeyspaceId(1), 7));
        let copy = CopyStatus { kind: "pre-copy", source: 2, rounds: 1, bytes: 4096 };
        let replicas =
            [replica(a, "head", 10, 4, None), replica(a, "tail", 5, 5, None), replica(b, "joiner", 0, 0, Some(copy))];
        let mut e = Exposition::new();
        replica_families(&mut e, &replicas, &|k| if k == KeyspaceId::DEFAULT { "default".into() } else { "s".into() });
        let text = e.into_text();
        for line in [
            "meridian_replicas{keyspace=\"default\",role=\"head\"} 1",
            "meridian_replicas{keyspace=\"s\",role=\"joiner\"} 1",
            "meridian_replication_lag_updates{keyspace=\"default\"} 6",
            "meridian_replication_lag_updates_max{keyspace=\"default\"} 6",
            &format!("meridian_copy_bytes{{keyspace=\"s\",chain=\"{}\",kind=\"pre-copy\",source=\"2\"}} 4096", b.0),
            &format!("meridian_copy_rounds{{keyspace=\"s\",chain=\"{}\",kind=\"pre-copy\",source=\"2\"}} 1", b.0),
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
        }
    }
}
