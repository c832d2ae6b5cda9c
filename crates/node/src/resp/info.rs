//! INFO: what the node reports about itself, in sections as Redis names them. It names Meridian's version
//! rather than posing as a Redis version.

use super::commands::{Action, Session};
use super::frame::Frame;
use super::frontend::Frontend;
use crate::build_info;
use bytes::Bytes;
use std::sync::atomic::Ordering;

/// INFO [section …]: as in Redis, no argument (or `default`) means the default sections, `all` and
/// `everything` mean every section, and `commandstats` is not a default one.
pub(super) fn info(args: &mut [Bytes], _: &mut Session, frontend: &Frontend) -> Action {
    let asked: Vec<Vec<u8>> = args[1..].iter().map(|a| a.to_ascii_lowercase()).collect();
    let wanted = |s: &Section| {
        let named = |word: &[u8]| asked.iter().any(|a| a == word);
        (s.default && (asked.is_empty() || named(b"default")))
            || named(b"all")
            || named(b"everything")
            || named(s.name.as_bytes())
    };
    let text: Vec<String> = SECTIONS.iter().filter(|s| wanted(s)).map(|s| (s.text)(frontend)).collect();
    Frame::bulk(text.join("\r\n")).into()
}

/// One of INFO's sections: its name, whether plain INFO shows it, and what it reports.
struct Section {
    name: &'static str,
    default: bool,
    text: fn(&Frontend) -> String,
}

/// In Redis' order.
const SECTIONS: [Section; 5] = [
    Section { name: "server", default: true, text: server_info },
    Section { name: "clients", default: true, text: clients_info },
    Section { name: "persistence", default: true, text: persistence_info },
    Section { name: "stats", default: true, text: stats_info },
    Section { name: "commandstats", default: false, text: commandstats_info },
];

/// Who and what is answering: the build (version, commit, profile, platform), the process and how long it has
/// run. The commit fields are named as Redis' `redis_git_sha1` and `redis_git_dirty`.
fn server_info(frontend: &Frontend) -> String {
    let profile = build_info::PROFILE;
    format!(
        "# Server\r\nmeridian_version:{}\r\nmeridian_git_sha1:{}\r\nmeridian_git_dirty:{}\r\nbuild_profile:{profile}\r\n\
         os:{} {}\r\nprocess_id:{}\r\nuptime_in_seconds:{}\r\nnode_id:{}\r\ntcp_port:{}\r\ncluster_nodes:{}\r\n",
        env!("CARGO_PKG_VERSION"),
        build_info::GIT_SHA1,
        build_info::GIT_DIRTY,
        std::env::consts::OS,
        std::env::consts::ARCH,
        std::process::id(),
        frontend.metrics.started.elapsed().as_secs(),
        frontend.node.0,
        frontend.resp_port,
        frontend.cluster_nodes
    )
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

fn clients_info(frontend: &Frontend) -> String {
    let c = frontend.metrics.clients.read();
    format!("# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\n", c.connected, frontend.resp.connections_max)
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
