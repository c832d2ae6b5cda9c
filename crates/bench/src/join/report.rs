//! The figures of one join run: as JSON (`--json`) and as the table `meridian bench join` prints.

use super::load::Tally;
use super::monitor::Observed;
use super::sample::{precopy_sources, PerSecond};
use super::JoinBench;
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt::{self, Write as _};

/// Issue 4's goal: nodes the join does not involve keep at least this share of their steady throughput.
pub const UNINVOLVED_GOAL: f64 = 0.9;

#[derive(Clone, Debug, Serialize)]
pub struct JoinReport {
    pub nodes: u32,
    pub joiner: u32,
    pub replication: usize,
    pub vnodes: usize,
    pub keys: u64,
    pub value_bytes: usize,
    pub preload_seconds: f64,
    pub clients: usize,
    /// GETs each client keeps in flight.
    pub pipeline: usize,
    pub duration_s: u32,
    /// The CPU quota of each node in cores, and the cgroup version that enforced it; `None`: the nodes
    /// shared the machine's CPUs.
    pub cpu_per_node: Option<f64>,
    pub cgroup: Option<String>,
    pub migration_mb_per_s: u64,
    /// The windows the rates are taken over, in seconds since the load started (round times; each node's own
    /// samples fall a few milliseconds later).
    pub steady_window_s: (u32, u32),
    pub join_window_s: (u32, u32),
    pub join: JoinFigures,
    pub per_node: Vec<NodeFigures>,
    pub load: LoadFigures,
    /// The lowest join/steady ratio among the nodes the join did not involve, and among those it did.
    pub uninvolved_min_ratio: Option<f64>,
    pub involved_min_ratio: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct JoinFigures {
    /// When the joiner was started, in seconds since the load started.
    pub started_s: f64,
    /// When the join was seen settled (the joiner ACTIVE, no step in flight), if it was.
    pub settled_s: Option<f64>,
    pub seconds: Option<f64>,
    /// Whether it settled before the load ended (else the join window ends with the load).
    pub settled_under_load: bool,
    pub chains_joined: usize,
    /// Cluster maps the manager made from just before the join to its end (every step takes two or three,
    /// and every node adopts each one durably).
    pub map_changes: u64,
    /// Nodes that copied to the joiner: pre-copy sources (the chains' tails) and flush sources.
    pub copy_sources: Vec<u32>,
    /// Bytes of keys and values seen in the joiner's copy progress (a lower bound: a copy shows only while it
    /// runs, and the status is read ten times a second).
    pub copied_bytes_seen: u64,
    /// The joiner's datastore on disk at the end (records with their framing): what it copied, as no
    /// client writes during the bench.
    pub joiner_store_bytes: u64,
    /// Bytes of keys and values the preload put in the chains the joiner joined.
    pub preloaded_bytes_in_joined_chains: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct NodeFigures {
    pub id: u32,
    /// "joiner", "source" (copied to the joiner) or "uninvolved".
    pub role: &'static str,
    /// Read clients sending to this node (the keys whose chain it was tail of when the load began).
    pub clients: usize,
    /// Led the cluster manager during the join (planning the steps and sending every node each new map).
    pub manager_leader: bool,
    pub steady_reads_per_s: Option<f64>,
    /// The standard deviation of the per-second rates in the steady window.
    pub steady_spread: Option<f64>,
    pub join_reads_per_s: Option<f64>,
    pub ratio: Option<f64>,
    /// From the end of the join to the end of the load, if there was time left: whether the node recovered
    /// (or, if it did not, whether something other than the join held it back).
    pub after_reads_per_s: Option<f64>,
    /// Cores the node's process used (at most its quota when it has one).
    pub steady_cores: Option<f64>,
    pub join_cores: Option<f64>,
    pub per_second: Vec<PerSecond>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LoadFigures {
    pub gets_found: u64,
    /// GETs of preloaded keys answered with nil.
    pub gets_missing: u64,
    pub errors: u64,
    pub first_error: Option<String>,
}

/// What the run measured besides the rounds.
pub(super) struct Measured {
    pub preload_seconds: f64,
    pub cgroup: Option<String>,
    pub clients_per_node: Vec<(u32, usize)>,
    /// Bytes of keys and values preloaded per chain.
    pub bytes_per_chain: Vec<u64>,
    pub tally: Tally,
    pub joiner_store_bytes: u64,
    /// The rounds of the steady window.
    pub steady: (u32, u32),
    pub last_round: u32,
}

impl JoinReport {
    pub(super) fn new(bench: &JoinBench, joiner: u32, measured: Measured, seen: &Observed) -> JoinReport {
        let join_round = measured.steady.1;
        // The first round at or after the join settled, so that the window covers all of it.
        let settle_round = seen.settled_at.map(|at| at.ceil() as u32);
        let during_end = settle_round.map_or(measured.last_round, |round| round.min(measured.last_round));
        let mut involved: BTreeSet<u32> = precopy_sources(&seen.before, &seen.after, joiner);
        involved.extend(&seen.sources_seen);
        let joined = seen.after.chains_of(joiner);
        let per_node: Vec<NodeFigures> = seen
            .series
            .iter()
            .map(|(&id, series)| {
                let (steady, during) =
                    (series.rate(measured.steady.0, join_round), series.rate(join_round, during_end));
                NodeFigures {
                    id,
                    role: match id {
                        _ if id == joiner => "joiner",
                        _ if involved.contains(&id) => "source",
                        _ => "uninvolved",
                    },
                    clients: measured.clients_per_node.iter().find(|(n, _)| *n == id).map_or(0, |&(_, c)| c),
                    manager_leader: series.led(join_round, during_end),
                    steady_reads_per_s: steady,
                    steady_spread: series.spread(measured.steady.0, join_round),
                    join_reads_per_s: during,
                    ratio: steady.zip(during).map(|(s, d)| d / s),
                    after_reads_per_s: series.rate(during_end, measured.last_round),
                    steady_cores: series.cores(measured.steady.0, join_round),
                    join_cores: series.cores(join_round, during_end),
                    per_second: series.per_second(),
                }
            })
            .collect();
        let min_ratio =
            |role: &str| per_node.iter().filter(|n| n.role == role).filter_map(|n| n.ratio).min_by(f64::total_cmp);
        JoinReport {
            nodes: bench.nodes,
            joiner,
            replication: bench.replication,
            vnodes: bench.vnodes,
            keys: bench.keys,
            value_bytes: bench.value_bytes,
            preload_seconds: measured.preload_seconds,
            clients: bench.clients,
            pipeline: super::load::PIPELINE,
            duration_s: bench.duration_s,
            cpu_per_node: measured.cgroup.is_some().then_some(bench.cpu_per_node),
            cgroup: measured.cgroup,
            migration_mb_per_s: bench.migration_mb_per_s,
            steady_window_s: measured.steady,
            join_window_s: (join_round, during_end),
            join: JoinFigures {
                started_s: seen.join_at,
                settled_s: seen.settled_at,
                seconds: seen.settled_at.map(|at| at - seen.join_at),
                settled_under_load: settle_round.is_some_and(|round| round <= measured.last_round),
                chains_joined: joined.len(),
                map_changes: seen.after.epoch.saturating_sub(seen.before.epoch),
                copy_sources: involved.iter().copied().collect(),
                copied_bytes_seen: seen.copied.bytes(),
                joiner_store_bytes: measured.joiner_store_bytes,
                preloaded_bytes_in_joined_chains: joined
                    .iter()
                    .filter_map(|&c| measured.bytes_per_chain.get(c as usize))
                    .sum(),
            },
            uninvolved_min_ratio: min_ratio("uninvolved"),
            involved_min_ratio: min_ratio("source"),
            per_node,
            load: LoadFigures {
                gets_found: measured.tally.found,
                gets_missing: measured.tally.missing,
                errors: measured.tally.errors,
                first_error: measured.tally.first_error,
            },
        }
    }
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "-".to_string(), f)
}

fn cores(v: Option<f64>) -> String {
    opt(v, |v| format!("{v:.3}"))
}

impl fmt::Display for JoinReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut t = String::new();
        self.write_setup(&mut t)?;
        self.write_join(&mut t)?;
        self.write_nodes(&mut t)?;
        self.write_goal(&mut t)?;
        f.write_str(&t)
    }
}

impl JoinReport {
    fn write_setup(&self, t: &mut String) -> fmt::Result {
        let cpu = match (&self.cgroup, self.cpu_per_node) {
            (Some(cgroup), Some(cores)) => format!("{cores} CPU per node ({cgroup} quota)"),
            _ => "nodes sharing the machine's CPUs (no cgroup: figures are not per-node)".to_string(),
        };
        writeln!(
            t,
            "meridian bench join: {} nodes + node {} joining, R={}, {} vnodes per node, {cpu}, migration cap {} MB/s \
             per chain",
            self.nodes, self.joiner, self.replication, self.vnodes, self.migration_mb_per_s
        )?;
        writeln!(
            t,
            "preload: {} keys x {} B in {:.1} s; load: {} clients, {} GETs in flight each, to the key's tail, {} s",
            self.keys, self.value_bytes, self.preload_seconds, self.clients, self.pipeline, self.duration_s
        )?;
        let l = &self.load;
        write!(t, "answers: {} found, {} missing, {} errors", l.gets_found, l.gets_missing, l.errors)?;
        match &l.first_error {
            Some(e) => writeln!(t, " (first: {e})"),
            None => writeln!(t),
        }
    }

    fn write_join(&self, t: &mut String) -> fmt::Result {
        let j = &self.join;
        let took = match (j.seconds, j.settled_under_load) {
            (Some(s), true) => format!("settled after {s:.1} s"),
            (Some(s), false) => format!("settled after {s:.1} s, after the load ended"),
            (None, _) => "had not settled when the bench stopped waiting".to_string(),
        };
        let sources: Vec<String> = j.copy_sources.iter().map(u32::to_string).collect();
        writeln!(
            t,
            "\njoin: node {} started at t={:.1} s, {took}; {} map changes",
            self.joiner, j.started_s, j.map_changes
        )?;
        writeln!(
            t,
            "      joined {} chains holding {:.2} MB of preloaded keys and values, copying from node(s) {}",
            j.chains_joined,
            j.preloaded_bytes_in_joined_chains as f64 / 1e6,
            sources.join(", ")
        )?;
        writeln!(
            t,
            "      joiner's store afterwards: {:.2} MB on disk; copy progress seen in its status: at least {:.2} MB",
            j.joiner_store_bytes as f64 / 1e6,
            j.copied_bytes_seen as f64 / 1e6
        )?;
        let ((s0, s1), (j0, j1)) = (self.steady_window_s, self.join_window_s);
        writeln!(
            t,
            "\nreads/s each node answered as tail; steady: t={s0}..{s1} s (+-: standard deviation of its seconds),"
        )?;
        let end = self.duration_s;
        writeln!(t, "during the join: t={j0}..{j1} s, after it: t={j1}..{end} s; cores: CPU the node's process used;")?;
        writeln!(t, "leader: of the cluster manager")
    }

    fn write_nodes(&self, t: &mut String) -> fmt::Result {
        writeln!(
            t,
            "{:<6}{:<19}{:>8}{:>16}{:>8}{:>14}{:>8}{:>15}{:>14}{:>12}",
            "node",
            "role",
            "clients",
            "steady reads/s",
            "+-",
            "join reads/s",
            "ratio",
            "after reads/s",
            "steady cores",
            "join cores"
        )?;
        for n in &self.per_node {
            writeln!(
                t,
                "{:<6}{:<19}{:>8}{:>16}{:>8}{:>14}{:>8}{:>15}{:>14}{:>12}",
                n.id,
                if n.manager_leader { format!("{}, leader", n.role) } else { n.role.to_string() },
                n.clients,
                opt(n.steady_reads_per_s, |v| format!("{v:.0}")),
                opt(n.steady_spread, |v| format!("{v:.0}")),
                opt(n.join_reads_per_s, |v| format!("{v:.0}")),
                opt(n.ratio, |v| format!("{v:.2}")),
                opt(n.after_reads_per_s, |v| format!("{v:.0}")),
                cores(n.steady_cores),
                cores(n.join_cores)
            )?;
        }
        Ok(())
    }

    fn write_goal(&self, t: &mut String) -> fmt::Result {
        let goal = format!("{UNINVOLVED_GOAL:.2}");
        match self.uninvolved_min_ratio {
            Some(r) => {
                let verdict = if r >= UNINVOLVED_GOAL { "met" } else { "not met" };
                writeln!(
                    t,
                    "\nuninvolved nodes keep >= {goal} of their steady reads/s (issue 4): min {r:.2}, {verdict}"
                )?
            }
            None => writeln!(t, "\nno node was uninvolved in the join: the >= {goal} goal (issue 4) is not tested")?,
        }
        match self.involved_min_ratio {
            Some(r) => writeln!(t, "copy sources: min ratio {r:.2} (seed 003 §4.2 saw about 0.67 at max load)"),
            None => Ok(()),
        }
    }
}
