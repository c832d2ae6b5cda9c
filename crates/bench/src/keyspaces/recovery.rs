//! M-D recovery against data size (seed 003 §5.3: a memory replica lost with its node is streamed back from
//! the disk replica's log). For each size, a fresh cluster gets an M-D keyspace filled with that much data; a
//! node that holds memory replicas of it (not the manager's leader, so that no election is timed) is SIGKILLed
//! and started again on the same data directory at once. A node that restarts treats its memory replicas as
//! lost; the manager removes it from those chains and adds it back, and it copies them from their log
//! replicas (`docs/keyspaces.md`, "Lost replicas"). The time runs from the restart until the leader's map shows
//! every chain of the keyspace back at full replication with no lost replica and no step in flight.

use super::configs::{self, Keyspace, MD};
use super::report::RecoveryFigures;
use super::writers;
use super::{fresh_cluster, interrupted, KeyspacesBench};
use crate::local::{Chain, Cluster, MapView};
use meridian_core::{ReplicaKind, UpdateMode};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// How often the maps are read while a node recovers: steps take a few manager ticks (100 ms) each.
const POLL: Duration = Duration::from_millis(50);
/// How long a recovery may take before the bench stops waiting and reports it unfinished.
const RECOVERY_MAX: Duration = Duration::from_secs(300);
/// How long the bench waits for the cluster manager to have a leader.
const LEADER_WAIT: Duration = Duration::from_secs(30);

/// One recovery per size in `recovery_mb`, smallest first as given.
pub(super) fn measure(
    bench: &KeyspacesBench,
    dir: &Path,
    progress: &mut dyn FnMut(&str),
    stop: &AtomicBool,
) -> Result<Vec<RecoveryFigures>, String> {
    bench.recovery_mb.iter().map(|&mb| recover(bench, dir, mb, progress, stop)).collect()
}

fn recover(
    bench: &KeyspacesBench,
    dir: &Path,
    mb: u64,
    progress: &mut dyn FnMut(&str),
    stop: &AtomicBool,
) -> Result<RecoveryFigures, String> {
    let mut fresh = fresh_cluster(bench, dir, &format!("recovery-{mb}MiB"), progress)?;
    let cluster = &mut fresh.cluster;
    let keyspace = configs::create(cluster, MD, UpdateMode::Su)?;
    let value_len = bench.largest_value();
    let written = writers::fill(cluster, &keyspace, mb << 20, value_len, bench.clients, stop)?;
    let (leader, leader_http) = leader(cluster, stop)?;
    let map = MapView::read(leader_http)?;
    let victim = victim(&map, &keyspace, leader).ok_or("only the manager's leader holds memory replicas")?;
    let lost = memory_replicas(&map, &keyspace, victim);
    let node = cluster.nodes.iter_mut().find(|n| n.id == victim).ok_or("the victim is not running")?;
    node.kill();
    node.spawn()?;
    let restarted = Instant::now();
    let victim_http = node.http;
    progress(&format!("{mb} MiB: node {victim} SIGKILLed and restarted; waiting for its memory replicas"));
    let watched = Watched { victim_http, leader_http, restarted, epoch: map.epoch };
    let seen = Seen {
        victim,
        lost_chains: lost.len(),
        chains: map.chains_in(keyspace.id).count(),
        lost_bytes: lost.iter().filter_map(|(chain, _)| written.bytes_per_chain.get(chain)).sum(),
        timeline: watched.wait(cluster, &keyspace, &lost, stop)?,
    };
    let figures = RecoveryFigures::new(&written, value_len, &seen);
    progress(&figures.row());
    Ok(figures)
}

/// What the bench saw of one recovery.
pub(super) struct Seen {
    /// The node SIGKILLed and restarted.
    pub victim: u32,
    /// The keyspace's chains in which it held the memory replica, of all its chains, and the bytes of keys and
    /// values in them: what was copied back.
    pub lost_chains: usize,
    pub chains: usize,
    pub lost_bytes: u64,
    pub timeline: Timeline,
}

/// How long after the restart the victim answered with a map, and how long until the keyspace was whole again
/// (`None`: not within [`RECOVERY_MAX`]), with the cluster maps the manager made from the crash until then.
pub(super) struct Timeline {
    pub up: Option<Duration>,
    pub whole: Option<Duration>,
    pub map_changes: Option<u64>,
}

/// A restarted node and the leader that repairs its chains.
struct Watched {
    victim_http: SocketAddr,
    leader_http: SocketAddr,
    restarted: Instant,
    /// The epoch of the leader's map before the crash.
    epoch: u64,
}

impl Watched {
    /// Reads the maps until `keyspace` is whole again, or [`RECOVERY_MAX`] has passed.
    fn wait(
        &self,
        cluster: &mut Cluster,
        keyspace: &Keyspace,
        lost: &[(u32, u64)],
        stop: &AtomicBool,
    ) -> Result<Timeline, String> {
        let mut up = None;
        while self.restarted.elapsed() < RECOVERY_MAX {
            interrupted(stop)?;
            cluster.check_alive()?;
            if up.is_none() && MapView::read(self.victim_http).is_ok() {
                up = Some(self.restarted.elapsed());
            }
            if let Some(map) = MapView::read(self.leader_http).ok().filter(|m| whole_again(m, keyspace, lost)) {
                let (whole, map_changes) = (Some(self.restarted.elapsed()), Some(map.epoch.saturating_sub(self.epoch)));
                return Ok(Timeline { up, whole, map_changes });
            }
            std::thread::sleep(POLL);
        }
        Ok(Timeline { up, whole: None, map_changes: None })
    }
}

/// The node that leads the cluster manager, once one does, and its HTTP address.
fn leader(cluster: &Cluster, stop: &AtomicBool) -> Result<(u32, SocketAddr), String> {
    let start = Instant::now();
    while start.elapsed() < LEADER_WAIT {
        interrupted(stop)?;
        if let Some(n) = cluster.nodes.iter().find(|n| MapView::read(n.http).is_ok_and(|m| m.leads())) {
            return Ok((n.id, n.http));
        }
        std::thread::sleep(POLL);
    }
    Err(format!("no node led the cluster manager within {LEADER_WAIT:?}"))
}

/// The node to crash: of those other than `leader`, the one holding the most memory replicas of `keyspace`
/// (the lowest id of those).
fn victim(map: &MapView, keyspace: &Keyspace, leader: u32) -> Option<u32> {
    let candidates = map.nodes.iter().map(|n| n.id).filter(|&id| id != leader);
    let held = |id: u32| memory_replicas(map, keyspace, id).len();
    candidates.filter(|&id| held(id) > 0).max_by_key(|&id| (held(id), std::cmp::Reverse(id)))
}

/// The chains of `keyspace` in which `node` holds a memory replica, each with its view.
fn memory_replicas(map: &MapView, keyspace: &Keyspace, node: u32) -> Vec<(u32, u64)> {
    let in_memory = |c: &Chain| {
        let at = c.members.iter().position(|&m| m == node);
        at.and_then(|i| c.kinds.get(i)).is_some_and(|k| k == ReplicaKind::Mem.name())
    };
    map.chains_in(keyspace.id).filter(|c| in_memory(c)).map(|c| (c.id, c.view)).collect()
}

/// Whether `map` shows `keyspace` whole again after a node restarted without its memory replicas (`lost`: the
/// chains that held them, each with its view before the crash). Every chain must be at the keyspace's R with no
/// step in flight and no lost member, and every chain in `lost` at least two views on: the member removed, then
/// added back. The views tell a repaired chain from one whose loss the manager has not yet recorded: right after
/// the restart, the map is still the one from before the crash and looks whole.
fn whole_again(map: &MapView, keyspace: &Keyspace, lost: &[(u32, u64)]) -> bool {
    let whole = |c: &Chain| c.members.len() == keyspace.replication && c.change.is_none() && c.lost.is_empty();
    let repaired = |&(id, view): &(u32, u64)| map.chains.iter().any(|c| c.id == id && c.view >= view + 2);
    map.chains_in(keyspace.id).all(whole) && lost.iter().all(repaired)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::map::tests::{chain, map};
    use serde_json::{json, Value};

    fn md() -> Keyspace {
        Keyspace { name: "md".into(), id: 1, replication: 2, chain: "M-D", update: UpdateMode::Su }
    }

    /// Keyspace 1's four chains on nodes 1..3, `c4097` in `view` with members `members` (a memory head and a
    /// log tail, or the tail alone), lost members `lost` and step `change`; the others untouched.
    fn cluster_map(view: u64, members: &[u32], change: Value, lost: &[u32]) -> MapView {
        let kinds = ["mem", "log"];
        let chains = json!([
            chain(4096, 1, 3, &[1, 2], Value::Null, &[], &kinds),
            chain(4097, 1, view, members, change, lost, &kinds[2 - members.len()..]),
            chain(4098, 1, 3, &[2, 3], Value::Null, &[], &kinds),
            chain(4099, 1, 3, &[3, 1], Value::Null, &[], &kinds),
        ]);
        let nodes =
            json!([{ "id": 1, "state": "ACTIVE" }, { "id": 2, "state": "ACTIVE" }, { "id": 3, "state": "ACTIVE" }]);
        map(chains, nodes, json!([{ "id": 1, "name": "md", "replication": 2 }]))
    }

    #[test]
    fn the_victim_holds_the_most_memory_replicas_and_does_not_lead() {
        // Node 2 heads c4097 and c4098, node 3 heads c4099; node 1 (the leader) is passed over.
        let m = cluster_map(3, &[2, 3], Value::Null, &[]);
        assert_eq!(memory_replicas(&m, &md(), 2), vec![(4097, 3), (4098, 3)]);
        assert_eq!(victim(&m, &md(), 1), Some(2));
        assert_eq!(memory_replicas(&m, &md(), 1), vec![(4096, 3)]);
        // Were node 2 the leader, node 1 (one memory replica) would be chosen over node 3 (one too): the lower id.
        assert_eq!(victim(&m, &md(), 2), Some(1));
    }

    #[test]
    fn recovered_once_every_lost_replica_is_removed_and_copied_back() {
        let lost = [(4097, 3)];
        let md = md();
        // Right after the restart: the map from before the crash, whole in appearance.
        assert!(!whole_again(&cluster_map(3, &[2, 3], Value::Null, &[]), &md, &lost));
        // The loss recorded, then the member removed, then added back and copying.
        assert!(!whole_again(&cluster_map(3, &[2, 3], Value::Null, &[2]), &md, &lost));
        assert!(!whole_again(&cluster_map(4, &[3], Value::Null, &[]), &md, &lost));
        let adding = json!({ "add": 2, "position": 0, "step": 5, "inserted": false, "kind": "mem" });
        assert!(!whole_again(&cluster_map(4, &[3], adding, &[]), &md, &lost));
        // Inserted: at R again, nothing lost, no step in flight.
        assert!(whole_again(&cluster_map(5, &[2, 3], Value::Null, &[]), &md, &lost));
    }
}
