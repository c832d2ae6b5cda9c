//! INFO and TIME: what the node reports about itself.
//!
//! INFO's sections are named and laid out as Redis 7's, with the fields that redis-cli, client libraries
//! (redis-py's `info()`) and monitoring exporters read, each from what the node measures (docs/resp.md,
//! "INFO"). `redis_version` names the Redis whose behaviour the commands follow; `meridian_version` the build.
//! The memory and keyspace sections need the core's figures, which one INFO asks the core for once.

use super::commands::{Action, Session};
use super::databases::{self, number_of, Listed};
use super::frame::Frame;
use super::frontend::Frontend;
use super::pending::{receive, Pending};
use crate::build_info;
use crate::inbox::CoreInbox;
use crate::metrics::{cpu_time, resident_bytes};
use bytes::Bytes;
use meridian_core::{Admin, Reply, Request};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The Redis whose replies and errors Meridian's commands follow: they are compared with redis-server 7.0.15,
/// the server `tests/bench_ycsb.rs` measures beside Meridian. Clients read it to decide which commands to use.
pub(super) const REDIS_VERSION: &str = "7.0.15";

/// TIME: this node's wall clock, as seconds and microseconds since the Unix epoch.
pub(super) fn time(_: &mut [Bytes], _: &mut Session, _: &Frontend) -> Action {
    let now = wall_clock();
    Frame::Array(vec![Frame::bulk(now.as_secs().to_string()), Frame::bulk(now.subsec_micros().to_string())]).into()
}

fn wall_clock() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// INFO [section …]: as in Redis, no argument (or `default`) means the default sections, `all` and
/// `everything` mean every section, and `commandstats` is not a default one.
pub(super) fn info(args: &mut [Bytes], _: &mut Session, frontend: &Frontend) -> Action {
    let asked: Vec<Vec<u8>> = args[1..].iter().map(|a| a.to_ascii_lowercase()).collect();
    let wanted = |s: &&Section| {
        let named = |word: &[u8]| asked.iter().any(|a| a == word);
        (s.default && (asked.is_empty() || named(b"default")))
            || named(b"all")
            || named(b"everything")
            || named(s.name.as_bytes())
    };
    let parts: Vec<Part> = SECTIONS.iter().filter(wanted).map(|s| s.part(frontend)).collect();
    if parts.iter().all(|p| matches!(p, Part::Ready(_))) {
        return Frame::bulk(joined(parts, None)).into();
    }
    let core = frontend.core.clone();
    Pending::Walk(Box::pin(async move { Frame::bulk(joined(parts, CoreFigures::ask(core).await.as_ref())) })).into()
}

/// One of INFO's sections: its name, whether plain INFO shows it, and what it reports.
struct Section {
    name: &'static str,
    default: bool,
    text: Text,
}

/// A section written from the core's figures; None if the core did not answer, and then the section leaves
/// those figures out.
type FromCore = fn(Option<&CoreFigures>) -> String;

/// Where a section's figures come from.
enum Text {
    /// What the front end measures itself.
    Here(fn(&Frontend) -> String),
    Core(FromCore),
}

/// A section wanted: written already, or waiting for the core's figures.
enum Part {
    Ready(String),
    Core(FromCore),
}

impl Section {
    fn part(&self, frontend: &Frontend) -> Part {
        match self.text {
            Text::Here(text) => Part::Ready(text(frontend)),
            Text::Core(text) => Part::Core(text),
        }
    }
}

fn joined(parts: Vec<Part>, figures: Option<&CoreFigures>) -> String {
    let text = |part| match part {
        Part::Ready(text) => text,
        Part::Core(text) => text(figures),
    };
    parts.into_iter().map(text).collect::<Vec<_>>().join("\r\n")
}

/// In Redis' order.
const SECTIONS: [Section; 9] = [
    Section { name: "server", default: true, text: Text::Here(server_info) },
    Section { name: "clients", default: true, text: Text::Here(clients_info) },
    Section { name: "memory", default: true, text: Text::Core(memory_info) },
    Section { name: "persistence", default: true, text: Text::Here(persistence_info) },
    Section { name: "stats", default: true, text: Text::Here(stats_info) },
    Section { name: "replication", default: true, text: Text::Here(replication_info) },
    Section { name: "cpu", default: true, text: Text::Here(cpu_info) },
    Section { name: "commandstats", default: false, text: Text::Here(commandstats_info) },
    Section { name: "keyspace", default: true, text: Text::Core(keyspace_info) },
];

/// Who and what is answering: the Redis it behaves as, the build (version, commit, profile, platform), the
/// process, its clock and how long it has run. The commit fields are named as Redis' `redis_git_sha1` and
/// `redis_git_dirty`.
fn server_info(frontend: &Frontend) -> String {
    let profile = build_info::PROFILE;
    let uptime = frontend.metrics.started.elapsed().as_secs();
    format!(
        "# Server\r\nredis_version:{REDIS_VERSION}\r\nredis_mode:standalone\r\nmeridian_version:{}\r\n\
         meridian_git_sha1:{}\r\nmeridian_git_dirty:{}\r\nbuild_profile:{profile}\r\nos:{} {}\r\narch_bits:{}\r\n\
         process_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\n\
         node_id:{}\r\ncluster_nodes:{}\r\n",
        env!("CARGO_PKG_VERSION"),
        build_info::GIT_SHA1,
        build_info::GIT_DIRTY,
        std::env::consts::OS,
        std::env::consts::ARCH,
        usize::BITS,
        std::process::id(),
        frontend.resp_port,
        wall_clock().as_micros(),
        uptime / 86_400,
        frontend.node.0,
        frontend.cluster_nodes
    )
}

/// `blocked_clients` is always 0: no Meridian command blocks (redis-cli `--stat` shows it).
fn clients_info(frontend: &Frontend) -> String {
    let c = frontend.metrics.clients.read();
    format!(
        "# Clients\r\nconnected_clients:{}\r\nblocked_clients:0\r\nmaxclients:{}\r\n",
        c.connected, frontend.resp.connections_max
    )
}

/// `used_memory`: the memory this node's stores hold (their indexes, and a memory store's keys and values too);
/// `used_memory_rss`: the process's resident memory; `maxmemory`: the most this node may hold, which is the sum
/// of its cache keyspaces' caps when every keyspace is a cache, and otherwise 0, Redis' "no limit".
fn memory_info(figures: Option<&CoreFigures>) -> String {
    let fields = [
        ("used_memory", figures.map(|f| f.store_bytes)),
        ("used_memory_rss", resident_bytes()),
        ("maxmemory", figures.map(CoreFigures::maxmemory)),
    ];
    let known = fields.iter().filter_map(|(name, value)| Some(format!("{name}:{}\r\n", (*value)?)));
    format!("# Memory\r\n{}", known.collect::<String>())
}

/// The node's default durability mode with the modes' knobs, and the core's fsyncs.
/// `loss_window_max_us` is the longest a write acknowledged in async mode has waited for its fsync (zero
/// while there were none): what a power loss could have taken back at worst so far.
fn persistence_info(frontend: &Frontend) -> String {
    let policy = frontend.metrics.persistence.policy;
    let r = frontend.metrics.persistence.read();
    format!(
        "# Persistence\r\ndurability:{}\r\ngroup_max_wait_us:{}\r\nasync_interval_ms:{}\r\n\
         fsyncs:{}\r\nlast_fsync_us:{}\r\nloss_window_max_us:{}\r\n",
        policy.default,
        policy.group_max_wait.as_micros(),
        policy.async_interval.as_millis(),
        r.fsyncs(),
        r.last_fsync.as_micros(),
        r.loss_window_max.as_micros()
    )
}

/// The same counters `/metrics` exports (`meridian_connections_*`, `meridian_commands_total`,
/// `meridian_peer_messages_dropped_total`).
fn stats_info(frontend: &Frontend) -> String {
    let m = &frontend.metrics;
    let c = m.clients.read();
    let commands: u64 = m.commands.called().iter().map(|c| c.latency.count).sum();
    format!(
        "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{commands}\r\n\
         rejected_connections:{}\r\npeer_messages_dropped:{}\r\n",
        c.received,
        c.rejected,
        m.peer_drops.load(Ordering::Relaxed)
    )
}

/// Every node is a master with no replicas, as Redis counts them: a node replicates its writes by chain
/// replication among the cluster's nodes (docs/protocols/chain.md), which a Redis replica cannot join (there is
/// no SYNC or PSYNC).
fn replication_info(_: &Frontend) -> String {
    "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n".into()
}

/// The process's CPU time so far, every thread's, in seconds.
fn cpu_info(_: &Frontend) -> String {
    let times = cpu_time().map(|t| (t.system.as_secs_f64(), t.user.as_secs_f64()));
    let fields = times.map(|(sys, user)| format!("used_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\n"));
    format!("# CPU\r\n{}", fields.unwrap_or_default())
}

/// Redis' `cmdstat_<name>:calls=…,usec=…,usec_per_call=…,failed_calls=…`, from the figures behind
/// `meridian_commands_total`, `meridian_command_duration_seconds` and `meridian_command_errors_total`.
fn commandstats_info(frontend: &Frontend) -> String {
    let mut text = String::from("# Commandstats\r\n");
    for c in frontend.metrics.commands.called() {
        let (calls, usec) = (c.latency.count, c.latency.sum_us);
        let per_call = usec as f64 / calls as f64;
        text += &format!(
            "cmdstat_{}:calls={calls},usec={usec},usec_per_call={per_call:.2},failed_calls={}\r\n",
            c.name, c.failed
        );
    }
    text
}

/// Redis' `db<n>:keys=…,expires=…,avg_ttl=…` for each keyspace SELECT reaches by a number and this node holds
/// keys of. `keys` is what the core reports without a walk: the live keys in this node's replicas of the
/// keyspace, which is all of its keys when the node is in every chain of it (as in a cluster of no more nodes than
/// the keyspace's replication factor) and a share of them otherwise (DBSIZE counts them all). `expires` counts
/// those of them that have a deadline (`meridian_store_expiring_keys`). The core keeps no sum of deadlines, so
/// `avg_ttl` is 0, which Redis also gives when it has not sampled one.
fn keyspace_info(figures: Option<&CoreFigures>) -> String {
    let mut text = String::from("# Keyspace\r\n");
    let Some(f) = figures else { return text };
    let held = |k: &Listed| {
        let keys = *f.keys.get(&k.name).filter(|&&n| n > 0)?;
        Some((number_of(k, &f.keyspaces)?, keys, f.expires.get(&k.name).copied().unwrap_or(0)))
    };
    let mut numbered: Vec<(u32, u64, u64)> = f.keyspaces.iter().filter_map(held).collect();
    numbered.sort_unstable();
    for (n, keys, expires) in numbered {
        text += &format!("db{n}:keys={keys},expires={expires},avg_ttl=0\r\n");
    }
    text
}

/// What INFO shows of the core's figures: this node's stores, from `Admin::Metrics` (the one report of
/// them), and the keyspaces.
struct CoreFigures {
    /// Live keys of this node's stores, by keyspace name (`meridian_store_keys`).
    keys: BTreeMap<String, u64>,
    /// Of those, the keys with a deadline (`meridian_store_expiring_keys`).
    expires: BTreeMap<String, u64>,
    /// The memory this node's stores hold (`meridian_store_index_bytes`, added up).
    store_bytes: u64,
    keyspaces: Vec<Listed>,
}

impl CoreFigures {
    async fn ask(core: Arc<dyn CoreInbox>) -> Option<CoreFigures> {
        let Reply::Text(metrics) = receive(&mut core.submit(Request::Admin(Admin::Metrics))).await else {
            return None;
        };
        let keyspaces = databases::keyspaces(core.as_ref()).await.ok()?;
        Some(CoreFigures::read(&metrics, keyspaces))
    }

    /// The figures from the core's metrics text (the Prometheus text format) and its keyspaces.
    fn read(metrics: &str, keyspaces: Vec<Listed>) -> CoreFigures {
        let by_keyspace = |metric| {
            let mut sums: BTreeMap<String, u64> = BTreeMap::new();
            for (keyspace, n) in samples(metrics, metric) {
                *sums.entry(keyspace.to_string()).or_default() += n;
            }
            sums
        };
        let (keys, expires) = (by_keyspace("meridian_store_keys"), by_keyspace("meridian_store_expiring_keys"));
        let store_bytes = samples(metrics, "meridian_store_index_bytes").map(|(_, n)| n).sum();
        CoreFigures { keys, expires, store_bytes, keyspaces }
    }

    fn maxmemory(&self) -> u64 {
        let caps: Option<Vec<u64>> = self.keyspaces.iter().map(Listed::maxmemory).collect();
        caps.map_or(0, |caps| caps.iter().sum())
    }
}

/// Each sample of `metric` in Prometheus text: its `keyspace` label and its whole-number value.
fn samples<'a>(text: &'a str, metric: &'a str) -> impl Iterator<Item = (&'a str, u64)> + 'a {
    text.lines().filter_map(move |line| {
        let (labels, value) = line.strip_prefix(metric)?.strip_prefix('{')?.rsplit_once("} ")?;
        let keyspace = labels.split(',').find_map(|label| label.strip_prefix("keyspace=\""))?;
        Some((keyspace.strip_suffix('"')?, value.parse().ok()?))
    })
}

#[cfg(test)]
mod tests {
    use super::super::commands::Session;
    use super::super::testing::Scripted;
    use super::*;
    use meridian_core::ErrorKind;

    /// The core's metrics text as `Admin::Metrics` writes it, cut to the families INFO reads and one other.
    const METRICS: &str = "# HELP meridian_store_keys Live keys in this node's store.\n\
        # TYPE meridian_store_keys gauge\n\
        meridian_store_keys{keyspace=\"default\",replica=\"log\"} 3\n\
        meridian_store_keys{keyspace=\"db9\",replica=\"mem\"} 4\n\
        meridian_store_keys{keyspace=\"db9\",replica=\"log\"} 5\n\
        meridian_store_keys{keyspace=\"cache\",replica=\"mem\"} 0\n\
        meridian_store_expiring_keys{keyspace=\"db9\",replica=\"mem\"} 2\n\
        meridian_store_expiring_keys{keyspace=\"db9\",replica=\"log\"} 1\n\
        meridian_store_index_bytes{keyspace=\"default\",replica=\"log\"} 1000\n\
        meridian_store_index_bytes{keyspace=\"db9\",replica=\"mem\"} 24\n\
        meridian_store_keys_total_other 99\n";

    fn keyspaces(caps: [Option<u64>; 3]) -> String {
        let entry = |id: u32, name: &str, cap: Option<u64>| {
            serde_json::json!({"id": id, "name": name, "replicas": ["log"], "update": "su", "read_from": "tail",
                "durability": null, "maxmemory": cap})
        };
        let list = [entry(0, "default", caps[0]), entry(1, "cache", caps[1]), entry(2, "db9", caps[2])];
        serde_json::Value::Array(list.into()).to_string()
    }

    fn core(caps: [Option<u64>; 3]) -> Arc<Scripted> {
        Scripted::new(move |req| match req {
            Request::Admin(Admin::Metrics) => Reply::Text(METRICS.into()),
            Request::Admin(Admin::Keyspaces) => Reply::Text(keyspaces(caps)),
            other => panic!("INFO asked {other:?}"),
        })
    }

    async fn info_of(core: &Arc<Scripted>, words: &[&str]) -> String {
        match core.run(&mut Session::new(1), words).await {
            Frame::Bulk(text) => String::from_utf8(text.to_vec()).unwrap(),
            other => panic!("INFO is a bulk string, not {other:?}"),
        }
    }

    fn headers(info: &str) -> Vec<&str> {
        info.lines().filter(|l| l.starts_with('#')).collect()
    }

    #[tokio::test]
    async fn sections_come_in_redis_order_as_asked() {
        let core = core([None; 3]);
        let default = ["# Server", "# Clients", "# Memory", "# Persistence", "# Stats", "# Replication", "# CPU"];
        let with_keyspace = [&default[..], &["# Keyspace"]].concat();
        assert_eq!(headers(&info_of(&core, &["INFO"]).await), with_keyspace);
        assert_eq!(headers(&info_of(&core, &["INFO", "default"]).await), with_keyspace);
        let all = [&default[..], &["# Commandstats", "# Keyspace"]].concat();
        assert_eq!(headers(&info_of(&core, &["INFO", "everything"]).await), all);
        assert_eq!(headers(&info_of(&core, &["info", "ALL"]).await), all);
        assert_eq!(headers(&info_of(&core, &["INFO", "keyspace", "CPU"]).await), ["# CPU", "# Keyspace"]);
        let asked_before = core.asked().len();
        assert_eq!(headers(&info_of(&core, &["INFO", "replication"]).await), ["# Replication"]);
        assert_eq!(core.asked().len(), asked_before, "a section of the front end's own asks the core nothing");
        assert_eq!(info_of(&core, &["INFO", "nosuchsection"]).await, "");
    }

    #[tokio::test]
    async fn server_replication_and_cpu_carry_what_clients_read() {
        let core = core([None; 3]);
        let info = info_of(&core, &["INFO"]).await;
        assert!(info.starts_with("# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n"), "{info}");
        for field in ["arch_bits:64\r\n", "role:master\r\n", "connected_slaves:0\r\n", "blocked_clients:0\r\n"] {
            assert!(info.contains(field), "{field:?} in {info}");
        }
        let field = |name: &str| info.lines().find_map(|l| l.strip_prefix(name)).unwrap_or_else(|| panic!("{name}"));
        let cpu: f64 = field("used_cpu_user:").parse().unwrap();
        assert!(cpu > 0.0 && field("used_cpu_sys:").split_once('.').is_some_and(|(_, us)| us.len() == 6));
        let usec: u128 = field("server_time_usec:").parse().unwrap();
        assert!(usec.abs_diff(wall_clock().as_micros()) < 60_000_000, "the wall clock");
    }

    #[tokio::test]
    async fn memory_is_the_stores_bytes_the_resident_set_and_the_cap() {
        let info = info_of(&core([None, Some(100), None]), &["INFO", "memory"]).await;
        assert!(info.starts_with("# Memory\r\nused_memory:1024\r\nused_memory_rss:"), "{info}");
        assert!(info.ends_with("\r\nmaxmemory:0\r\n"), "a keyspace without a cap: no limit: {info}");
        let capped = info_of(&core([Some(1000), Some(100), Some(10)]), &["INFO", "memory"]).await;
        assert!(capped.ends_with("\r\nmaxmemory:1110\r\n"), "every keyspace a cache: {capped}");
    }

    #[tokio::test]
    async fn keyspace_lists_databases_with_keys_by_their_select_number() {
        let info = info_of(&core([None; 3]), &["INFO", "keyspace"]).await;
        assert_eq!(info, "# Keyspace\r\ndb0:keys=3,expires=0,avg_ttl=0\r\ndb9:keys=9,expires=3,avg_ttl=0\r\n");
    }

    #[tokio::test]
    async fn a_core_that_does_not_answer_leaves_its_figures_out() {
        let core = Scripted::new(|_| Reply::Error(ErrorKind::Timeout, "no answer".into()));
        let info = info_of(&core, &["INFO", "memory", "keyspace"]).await;
        assert!(info.starts_with("# Memory\r\nused_memory_rss:"), "{info}");
        assert!(!info.contains("used_memory:") && !info.contains("maxmemory"), "{info}");
        assert!(info.ends_with("\r\n# Keyspace\r\n"), "{info}");
    }

    #[tokio::test]
    async fn time_is_seconds_and_microseconds_as_bulk_strings() {
        let Frame::Array(time) = core([None; 3]).run(&mut Session::new(1), &["TIME"]).await else { panic!("an array") };
        let [Frame::Bulk(secs), Frame::Bulk(micros)] = time.as_slice() else { panic!("two bulk strings: {time:?}") };
        let secs: u64 = std::str::from_utf8(secs).unwrap().parse().unwrap();
        let micros: u32 = std::str::from_utf8(micros).unwrap().parse().unwrap();
        assert!(secs.abs_diff(wall_clock().as_secs()) < 60 && micros < 1_000_000);
    }
}
