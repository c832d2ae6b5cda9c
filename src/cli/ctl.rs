//! `meridian ctl`: cluster administration over a node's HTTP port (DESIGN.md §4). `status` shows the cluster
//! map as that node sees it (nodes and their states, chains with their members, views and steps in flight,
//! copies in progress on that node); `node add` and `node remove` ask the manager to add or drain a node;
//! `keyspace create|list|drop|master` manage keyspaces (docs/keyspaces.md); `manager voters` shows the manager's Raft
//! group or moves it to other voters (docs/regions.md). `--json` prints what the node answered,
//! for scripts.

use super::http;
use super::node::LocationArgs;
use super::protocol_args::ProtocolArgs;
use clap::{Args, Subcommand};
use meridian_core::config::DEFAULT_REPLICATION;
use meridian_core::size::parse_size;
use meridian_core::{ChainId, KeyspaceConfig, Placement, ReplicaKind};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct CtlArgs {
    /// HTTP address of any node of the cluster: HOST:PORT (HTTPS with --cacert), http://HOST:PORT or
    /// https://HOST:PORT.
    #[arg(long, default_value = "127.0.0.1:8380")]
    addr: String,
    /// For HTTPS: the CA certificate (PEM) to check the node's certificate against.
    #[arg(long, value_name = "FILE")]
    cacert: Option<PathBuf>,
    /// For HTTPS: a client certificate (PEM) of the CA the node checks callers against, for a node or an ACL
    /// user who may run ACL SETUSER: it admits requests without the token.
    #[arg(long, value_name = "FILE", requires_all = ["key", "cacert"])]
    cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "cert")]
    key: Option<PathBuf>,
    /// The cluster's HTTP token (`meridian server --http-token-file`); without it, and without --token-file,
    /// the MERIDIAN_TOKEN environment variable if set.
    #[arg(long, conflicts_with = "token_file")]
    token: Option<String>,
    /// A file holding the cluster's HTTP token.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Print the node's JSON answer instead of a summary.
    #[arg(long)]
    json: bool,
    #[command(subcommand)]
    command: CtlCommand,
}

#[derive(Subcommand, Debug)]
enum CtlCommand {
    /// The cluster as the node sees it: nodes, chains, the manager, copies in progress.
    Status,
    /// Add, remove or list nodes.
    #[command(subcommand)]
    Node(NodeCommand),
    /// Create, list, drop keyspaces, or move a lease keyspace's master.
    #[command(subcommand)]
    Keyspace(KeyspaceCommand),
    /// The manager's Raft group.
    #[command(subcommand)]
    Manager(ManagerCommand),
}

#[derive(Subcommand, Debug)]
enum ManagerCommand {
    /// The voters, learners and leader; with --set, move the group to these voters (docs/regions.md,
    /// "The control plane").
    Voters {
        /// Node ids, comma-separated: 1, 3, 5 or 7 standard live nodes. `auto` lets the manager choose again.
        #[arg(long, value_name = "IDS|auto")]
        set: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
enum KeyspaceCommand {
    /// Create a keyspace with its own chains; it is ready once this returns.
    Create(Box<CreateArgs>),
    /// Every keyspace with the number SELECT takes.
    List,
    /// Drop a keyspace and all its data (not `default`).
    Drop { name: String },
    /// Move a lease keyspace's master to REGION, one of its --regions: each partition's replica there becomes
    /// the master of its keys (docs/protocols/lease.md, "Master migration"). `master NAME KEY REGION` moves one
    /// key's master, which then stays in REGION whatever the keyspace's master region becomes.
    Master {
        name: String,
        /// REGION, or KEY REGION.
        #[arg(value_name = "[KEY] REGION", num_args = 1..=2, required = true)]
        target: Vec<String>,
    },
}

#[derive(Args, Debug)]
struct CreateArgs {
    name: String,
    /// The replica of each chain position, head first; their number is the replication factor. Default:
    /// `log,log,log`, or a `log` for each replica --regions or --placement puts.
    #[arg(long)]
    replicas: Option<String>,
    /// When writes are acknowledged: `su` once every replica has them, `ausi` once the head has them and
    /// the others an invalidation, `au` once the head has them.
    #[arg(long, default_value = "su", value_parser = ["su", "ausi", "au"])]
    update: String,
    /// Which member answers reads: `tail`, `mid` or `head`.
    #[arg(long, default_value = "tail", value_parser = ["tail", "mid", "head"])]
    read_from: String,
    /// When a write is on disk before it is acknowledged: `sync` (each on its own fsync), `group` (fsyncs
    /// shared by concurrent writes) or `async` (fsynced on an interval: a power loss may take the last
    /// writes). Default: each node's own --durability.
    #[arg(long, value_parser = ["sync", "group", "async"])]
    durability: Option<String>,
    /// A cache keyspace: heads evict the least recently written keys to keep each node within --maxmemory.
    #[arg(long, requires = "maxmemory")]
    cache: bool,
    /// A cache keyspace's cap per node (e.g. 256mb): its keys' and values' bytes plus a fixed overhead per key.
    #[arg(long, requires = "cache", value_parser = parse_size)]
    maxmemory: Option<u64>,
    /// How the replicas agree on writes: `chain`, `quorum`, `lease` or `meteor` (docs/keyspaces.md,
    /// docs/protocols/).
    #[arg(long, default_value = "chain", value_parser = protocol_names())]
    protocol: String,
    #[command(flatten)]
    knobs: ProtocolArgs,
    /// With `--protocol lease`: the region whose replica is each partition's master (default: the first of
    /// --regions or --placement, which it then becomes).
    #[arg(long)]
    master_region: Option<String>,
    /// One replica in each of these regions, in this order: the first is the keyspace's home, where the
    /// chains' heads run (docs/regions.md). Without --replicas, every replica is a `log`.
    #[arg(long, conflicts_with = "placement")]
    regions: Option<String>,
    /// Replicas per region, home region first (e.g. eu=2,us=1). Without --replicas, every replica is a `log`.
    #[arg(long)]
    placement: Option<String>,
    /// Regions that hold none of the keyspace's replicas (comma-separated).
    #[arg(long, value_name = "REGIONS")]
    ban_region: Option<String>,
}

#[derive(Subcommand, Debug)]
enum NodeCommand {
    /// Register a node with the manager; it takes its share of the chains once it runs (start it with
    /// `meridian server --join`).
    Add {
        id: u32,
        /// Its peer listen address (HOST:PORT).
        #[arg(long)]
        peer_addr: String,
        #[arg(long, default_value = "")]
        resp_addr: String,
        #[arg(long)]
        http_addr: Option<String>,
        /// Ring points (default: the cluster's).
        #[arg(long)]
        vnodes: Option<u32>,
        #[command(flatten)]
        at: LocationArgs,
    },
    /// Drain a node out of its chains (a replacement is copied in first) and remove it.
    Remove { id: u32 },
    /// The nodes and their states.
    Status,
}

pub fn run(args: CtlArgs) -> Result<ExitCode, String> {
    let files = http::TlsFiles { ca: args.cacert.as_deref(), identity: args.cert.as_deref().zip(args.key.as_deref()) };
    let api = http::Api::new(&args.addr, token(&args)?, files)?;
    let answer = match &args.command {
        CtlCommand::Status | CtlCommand::Node(NodeCommand::Status) => api.get("/v1/cluster")?,
        CtlCommand::Manager(ManagerCommand::Voters { set: None }) => api.get("/v1/cluster")?,
        CtlCommand::Manager(ManagerCommand::Voters { set: Some(ids) }) => {
            api.put("/v1/manager/voters", &json!({ "voters": voter_ids(ids)? }))?
        }
        CtlCommand::Node(NodeCommand::Add { id, peer_addr, resp_addr, http_addr, vnodes, at }) => {
            let (region, zone, rack) = match at.location()? {
                Some(l) => (Some(l.region), l.zone, l.rack),
                None => (None, None, None),
            };
            let body = json!({
                "id": id, "peer_addr": peer_addr, "resp_addr": resp_addr, "http_addr": http_addr, "vnodes": vnodes,
                "region": region, "zone": zone, "rack": rack,
            });
            api.post("/v1/nodes", &body)?
        }
        CtlCommand::Node(NodeCommand::Remove { id }) => api.post(&format!("/v1/nodes/{id}/remove"), &json!({}))?,
        CtlCommand::Keyspace(KeyspaceCommand::Create(create)) => api.post("/v1/keyspaces", &create_body(create)?)?,
        CtlCommand::Keyspace(KeyspaceCommand::List) => api.get("/v1/keyspaces")?,
        CtlCommand::Keyspace(KeyspaceCommand::Drop { name }) => api.delete(&format!("/v1/keyspaces/{name}"))?,
        CtlCommand::Keyspace(KeyspaceCommand::Master { name, target }) => {
            let body = match target.as_slice() {
                [region] => json!({ "region": region }),
                [key, region] => json!({ "region": region, "key": key }),
                _ => unreachable!("clap takes one or two"),
            };
            api.put(&format!("/v1/keyspaces/{name}/master"), &body)?
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&answer).expect("JSON prints"));
        return Ok(ExitCode::SUCCESS);
    }
    match &args.command {
        CtlCommand::Status => print!("{}", summary(&answer["status"])),
        CtlCommand::Node(NodeCommand::Status) => print!("{}", nodes(&answer["status"])),
        CtlCommand::Node(_) => println!("{}", answer["accepted"].as_str().unwrap_or_default()),
        CtlCommand::Keyspace(KeyspaceCommand::List) => print!("{}", keyspaces(&answer)),
        CtlCommand::Keyspace(KeyspaceCommand::Create(_)) => println!("{}", text(&answer["created"])),
        CtlCommand::Keyspace(KeyspaceCommand::Drop { .. }) => println!("{}", text(&answer["dropped"])),
        CtlCommand::Keyspace(KeyspaceCommand::Master { .. }) => println!("{}", text(&answer["moved"])),
        CtlCommand::Manager(ManagerCommand::Voters { set: None }) => print!("{}", manager(&answer["status"])),
        CtlCommand::Manager(ManagerCommand::Voters { set: Some(_) }) => println!("{}", text(&answer["voters"])),
    }
    Ok(ExitCode::SUCCESS)
}

/// The ids `--set` names: comma-separated node ids, or `auto` for none.
fn voter_ids(list: &str) -> Result<Vec<u32>, String> {
    if list.trim() == "auto" {
        return Ok(Vec::new());
    }
    let id = |s: &str| s.trim().parse::<u32>().map_err(|_| format!("--set takes node ids or auto, not {s:?}"));
    list.split(',').map(id).collect()
}

/// `manager voters`: who votes, who learns, who leads, and what an operator asked for.
fn manager(status: &Value) -> String {
    let m = &status["manager"];
    let or = |v: &Value, none: &str| listed(v).unwrap_or_else(|| none.to_string());
    format!(
        "voters:   {}\nlearners: {}\nleader:   {}\nwanted:   {}\n",
        or(&m["voters"], "none"),
        or(&m["learners"], "none"),
        leader(m),
        or(&m["voters_wanted"], "chosen by the manager")
    )
}

/// The token from --token-file, --token or MERIDIAN_TOKEN, in that order.
fn token(args: &CtlArgs) -> Result<Option<String>, String> {
    if let Some(file) = &args.token_file {
        return super::http_port::read_token(file).map(Some);
    }
    Ok(args.token.clone().or_else(|| std::env::var("MERIDIAN_TOKEN").ok()).map(|t| t.trim().to_string()))
}

/// What `POST /v1/keyspaces` takes for `keyspace create`.
fn create_body(create: &CreateArgs) -> Result<Value, String> {
    let CreateArgs {
        name,
        replicas,
        update,
        read_from,
        durability,
        maxmemory,
        protocol,
        knobs:
            ProtocolArgs {
                read_quorum,
                write_quorum,
                timestamps,
                lease_ms,
                write_mode,
                status_interval_ms,
                clock_bound_ms,
                theta_ms,
                redundancy,
                unsafe_theta,
            },
        master_region,
        regions,
        placement,
        ban_region,
        ..
    } = create;
    let placed = match (regions, placement) {
        (Some(list), _) => Placement::one_in_each(list),
        (None, Some(list)) => Placement::per_region(list),
        (None, None) => Ok(Placement::default()),
    }
    .map_err(|e| e.to_string())?
    .banning(ban_region.as_deref().unwrap_or_default());
    let placed = match master_region {
        Some(_) if protocol != "lease" => return Err("--master-region is an option of protocol lease".into()),
        Some(region) => placed.homed_in(region).map_err(|e| e.to_string())?,
        None => placed,
    };
    let replicas = match (replicas, placed.placed()) {
        (Some(list), _) => KeyspaceConfig::parse_replicas(list).map_err(|e| e.to_string())?,
        (None, Some(n)) => vec![ReplicaKind::Log; n as usize],
        (None, None) => vec![ReplicaKind::Log; DEFAULT_REPLICATION],
    };
    let names: Vec<&str> = replicas.iter().map(|r| r.name()).collect();
    Ok(json!({
        "name": name, "replicas": names, "update": update, "read_from": read_from, "durability": durability,
        "maxmemory": maxmemory, "protocol": protocol, "read_quorum": read_quorum, "write_quorum": write_quorum,
        "timestamps": timestamps, "lease_ms": lease_ms, "write_mode": write_mode,
        "status_interval_ms": status_interval_ms, "clock_bound_ms": clock_bound_ms, "theta_ms": theta_ms, "redundancy": redundancy,
        "unsafe": unsafe_theta, "placement": placed.regions, "ban_regions": placed.banned,
    }))
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// θt in force on the node asked, over the meteor keyspace's partitions it holds: ` (34 ms here)`, or a range;
/// nothing where it holds none.
fn theta_here(here: &Value) -> String {
    match (here["theta_ms_least"].as_u64(), here["theta_ms_most"].as_u64()) {
        (Some(least), Some(most)) if least == most => format!(" ({least} ms here)"),
        (Some(least), Some(most)) => format!(" ({least}–{most} ms here)"),
        _ => String::new(),
    }
}

/// The ids in `v`, if there are any.
fn listed(v: &Value) -> Option<String> {
    Some(ids(v)).filter(|l| !l.is_empty())
}

/// The manager's leader as a status's `manager` object guesses it.
fn leader(manager: &Value) -> String {
    manager["leader_guess"].as_u64().map_or("unknown".to_string(), |l| format!("n{l}"))
}

fn ids(v: &Value) -> String {
    v.as_array().map_or(String::new(), |a| a.iter().map(|n| format!("n{n}")).collect::<Vec<_>>().join(" "))
}

/// The whole status: manager, nodes, chains (those not at R, and those with a step in flight, in detail),
/// and the copies in progress on the node asked.
fn summary(s: &Value) -> String {
    let m = &s["manager"];
    // A learner is a voter being added (`manager voters` has the whole picture).
    let learning = listed(&m["learners"]).map_or(String::new(), |l| format!(" (learning: {l})"));
    let mut out = format!(
        "node n{} sees map epoch {}; replication {}, {} partitions; manager voters {}{learning}, leader {}\n",
        text(&s["node"]),
        text(&s["epoch"]),
        text(&s["replication"]),
        text(&s["partitions"]),
        ids(&m["voters"]),
        leader(m),
    );
    out += &nodes(s);
    out += &unmet(s);
    out += &chains(s);
    for r in s["replicas"].as_array().into_iter().flatten().filter(|r| !r["copy"].is_null()) {
        let c = &r["copy"];
        out += &format!(
            "copying into {}: {} from n{}, {} rounds, {} bytes\n",
            chain_name(&r["chain"]),
            text(&c["kind"]),
            text(&c["source"]),
            text(&c["rounds"]),
            text(&c["bytes"])
        );
    }
    out
}

/// The nodes, grouped by region (regions in order of their first node), with their zone and rack.
fn nodes(s: &Value) -> String {
    let all: Vec<&Value> = s["nodes"].as_array().into_iter().flatten().collect();
    let mut regions: Vec<&str> = Vec::new();
    for region in all.iter().filter_map(|n| n["region"].as_str()) {
        if !regions.contains(&region) {
            regions.push(region);
        }
    }
    let mut out = String::from("nodes:\n  id    state    region           zone     rack     addresses\n");
    for region in regions {
        for n in all.iter().filter(|n| n["region"].as_str() == Some(region)) {
            let resp =
                n["resp_addr"].as_str().filter(|a| !a.is_empty()).map_or(String::new(), |a| format!("  resp {a}"));
            let (zone, rack) = (text(&n["zone"]), text(&n["rack"]));
            let (id, state, peer) = (text(&n["id"]), text(&n["state"]), text(&n["peer_addr"]));
            out += &format!("  n{id:<4} {state:<8} {region:<16} {zone:<8} {rack:<8} peer {peer}{resp}\n");
        }
    }
    out
}

/// The keyspaces whose placement wants more replicas in a region than it has nodes to hold them.
fn unmet(s: &Value) -> String {
    let mut out = String::new();
    for k in s["keyspaces"].as_array().into_iter().flatten() {
        for u in k["unmet"].as_array().into_iter().flatten() {
            out += &format!(
                "keyspace {}: placement unmet: region {} has {} placeable nodes for {} replicas\n",
                text(&k["name"]),
                text(&u["region"]),
                text(&u["has"]),
                text(&u["needs"])
            );
        }
    }
    out
}

/// `c5` for a chain of the default keyspace, `c2.5` for partition 5 of keyspace 2, as the node logs them.
fn chain_name(id: &Value) -> String {
    id.as_u64().and_then(|id| u32::try_from(id).ok()).map_or_else(|| text(id), |id| ChainId(id).to_string())
}

/// Every keyspace: number, name, configuration (durability `node`: each node's own `--durability`).
fn keyspaces(list: &Value) -> String {
    let mut out = String::from(
        "number  name                 replicas             update  read from  durability  protocol  placement        \
         cache\n",
    );
    for k in list.as_array().into_iter().flatten() {
        let replicas: Vec<String> = k["replicas"].as_array().into_iter().flatten().map(text).collect();
        let (id, name, update, read_from) =
            (text(&k["id"]), text(&k["name"]), text(&k["update"]), text(&k["read_from"]));
        let durability = k["durability"].as_str().unwrap_or("node");
        let cache = k["maxmemory"].as_u64().map_or("-".to_string(), |m| format!("maxmemory {}", size(m)));
        let placement =
            serde_json::from_value::<Placement>(json!({"regions": k["placement"], "banned": k["ban_regions"]}));
        let placement = placement.map_or("?".into(), |p| p.to_string());
        let protocol = match k["protocol"].as_str() {
            Some("quorum") => format!(
                "quorum R={} W={} {}",
                text(&k["read_quorum"]),
                text(&k["write_quorum"]),
                text(&k["timestamps"])
            ),
            Some("lease") => format!("lease {} ms {}", text(&k["lease_ms"]), text(&k["write_mode"])),
            Some("meteor") => format!(
                "meteor every {} ms ε {} ms θ {}{} ×{}{}",
                text(&k["status_interval_ms"]),
                text(&k["clock_bound_ms"]),
                text(&k["theta_ms"]),
                theta_here(&k["here"]),
                text(&k["redundancy"]),
                if k["unsafe"] == true { " UNSAFE" } else { "" }
            ),
            _ => text(&k["protocol"]),
        };
        out += &format!(
            "{id:<7} {name:<20} {:<20} {update:<7} {read_from:<10} {durability:<11} {protocol:<9} {placement:<16} {cache}\n",
            replicas.join(",")
        );
    }
    out
}

/// A byte count in the largest binary unit that divides it, as `--maxmemory` takes it back.
fn size(bytes: u64) -> String {
    let unit =
        [(30, "gb"), (20, "mb"), (10, "kb")].into_iter().find(|&(shift, _)| bytes != 0 && bytes % (1 << shift) == 0);
    unit.map_or(format!("{bytes}"), |(shift, name)| format!("{}{name}", bytes >> shift))
}

fn chains(s: &Value) -> String {
    let all = s["chains"].as_array().cloned().unwrap_or_default();
    // R differs between keyspaces; each chain is judged by its own keyspace's.
    let replication: Vec<(u64, usize)> = s["keyspaces"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|k| (k["id"].as_u64().unwrap_or(0), k["replication"].as_u64().unwrap_or(0) as usize))
        .collect();
    let r_of = |c: &Value| replication.iter().find(|(k, _)| Some(*k) == c["keyspace"].as_u64()).map_or(0, |&(_, r)| r);
    let len = |c: &Value| c["members"].as_array().map_or(0, Vec::len);
    let at_r = all.iter().filter(|c| len(c) == r_of(c)).count();
    let lost = |c: &Value| c["lost"].as_array().is_some_and(|l| !l.is_empty());
    let busy: Vec<&Value> = all.iter().filter(|c| len(c) != r_of(c) || !c["change"].is_null() || lost(c)).collect();
    let mut out = format!(
        "chains: {} ({at_r} at their R, {} with a step in flight, a lost replica or not at R)\n",
        all.len(),
        busy.len()
    );
    for c in busy {
        let step = match &c["change"] {
            Value::Null => String::new(),
            ch if ch["add"].is_u64() => format!(
                "  adding n{} at {} (step {}, {})",
                ch["add"],
                ch["position"],
                ch["step"],
                if ch["inserted"] == true { "flushing" } else { "pre-copying" }
            ),
            ch => format!("  removing n{} (step {})", ch["remove"], ch["step"]),
        };
        let lost = if lost(c) { format!("  lost: {}", ids(&c["lost"])) } else { String::new() };
        out += &format!("  {:<6} v{:<4} {}{step}{lost}\n", chain_name(&c["id"]), text(&c["view"]), ids(&c["members"]));
    }
    out
}

/// The protocols `--protocol` takes, by name.
fn protocol_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(meridian_core::Protocol::ALL.iter().map(|p| p.name()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A voter being added shows in the status line and in `manager voters`; an operator's set is shown as asked.
    #[test]
    fn the_managers_learners_and_wanted_voters_are_shown() {
        fn manager_of(learners: Value, wanted: Value) -> Value {
            json!({ "voters": [1, 2, 3], "learners": learners, "voters_wanted": wanted, "leader_guess": 2 })
        }
        let status = |m: Value| json!({ "node": 1, "epoch": 9, "replication": 3, "partitions": 64, "manager": m });
        let growing = status(manager_of(json!([4]), json!([])));
        let line = summary(&growing);
        let first = "node n1 sees map epoch 9; replication 3, 64 partitions; manager voters n1 n2 n3 (learning: n4), \
                     leader n2\n";
        assert!(line.starts_with(first), "{line}");
        let shown = "voters:   n1 n2 n3\nlearners: n4\nleader:   n2\nwanted:   chosen by the manager\n";
        assert_eq!(manager(&growing), shown);
        let settled = status(manager_of(json!([]), json!([1, 2, 3])));
        assert!(!summary(&settled).contains("learning"), "{}", summary(&settled));
        assert_eq!(manager(&settled), "voters:   n1 n2 n3\nlearners: none\nleader:   n2\nwanted:   n1 n2 n3\n");
    }
}
