//! `meridian server`: one node. A cluster starts from the nodes every one of them is given in `--peers`;
//! a node added later starts with `--join`, naming the HTTP address of any node of the cluster.

use super::client_ports::{Listen, TlsArgs};
use super::http;
use super::http_port::HttpArgs;
use super::node::{
    default_replicas, start, stop_signal, ClusterArgs, DurabilityArgs, LimitArgs, LocationArgs, NodeSetup, ThreadArgs,
};
use clap::Args;
use meridian_core::config::{DEFAULT_REPLICATION, DEFAULT_VNODES};
use meridian_core::topology::Topology;
use meridian_core::{ClusterConfig, KeyspaceConfig, Location, NodeId, NodeSpec, ReplicaKind};
use meridian_node::NodeHandle;
use meridian_node::{Password, PeerTls};
use meridian_proto::manager::agent::JoinRequest;
use meridian_proto::map::NodeAddrs;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tokio::signal::unix::{signal, Signal, SignalKind};

#[derive(Args, Debug)]
// `multiple`, with the conflict declared on --join: --print-config and --config see alternatives as clap's
// conflicts between two flags, as with --replication and --replicas.
#[command(group(clap::ArgGroup::new("cluster").required(true).multiple(true).args(["peers", "join"])))]
pub struct ServerArgs {
    /// Read settings, the required ones too, from this TOML file: each flag is a field of the same name with `_`
    /// for `-` (`max_value_bytes = "1mb"`; docs/configuration.md). Flags given here override the file's.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print the resolved configuration (file, flags and defaults) as a --config file, and exit.
    #[arg(long)]
    print_config: bool,
    /// This node's id: in --peers, or (with --join) one no other node of the cluster uses.
    #[arg(long)]
    node_id: u32,
    /// RESP (Redis protocol) listen address, or `off` for no plain port (then --tls-port is required).
    #[arg(long, value_name = "ADDR|off", default_value = "127.0.0.1:6380")]
    listen: Listen,
    #[command(flatten)]
    tls: TlsArgs,
    #[command(flatten)]
    api: HttpArgs,
    /// Peer (node-to-node) listen address.
    #[arg(long)]
    peer_listen: SocketAddr,
    /// The nodes the cluster starts with, each with its peer address and optionally its location:
    /// 1=HOST:PORT@REGION/ZONE/RACK,2=HOST:PORT,... (the same on every one of them; three of them, spread over
    /// regions, run the cluster manager; a node without a location is in region `default`).
    #[arg(long)]
    peers: Option<String>,
    #[command(flatten)]
    at: LocationArgs,
    /// Emulate a WAN, for tests and demos (docs/regions.md): hand every message from a peer to this node half the
    /// round trip between the two nodes' regions after it arrived, paced by the link's bandwidth. A preset
    /// (`meridian topology list`) or a topology file, which must name this node's region.
    #[arg(long, value_name = "FILE|PRESET")]
    wan: Option<String>,
    /// Join a running cluster through the HTTP address (HOST:PORT) of any of its nodes: this node is added
    /// and takes its share of the chains by copying from their tails.
    #[arg(long, conflicts_with = "peers")]
    join: Option<String>,
    /// With --join: join as an affiliated node of this standard node (seed 001 §4.1.4): it holds no partition,
    /// only the hot keys of lease keyspaces its host gives it, and answers reads of them. It sits in the host's
    /// region unless --region says otherwise.
    #[arg(long, value_name = "NODE", requires = "join")]
    affiliate_of: Option<u32>,
    /// Where this node keeps its data.
    #[arg(long)]
    data_dir: PathBuf,
    /// Clients must authenticate with this password (`AUTH PASSWORD`, `redis-cli -a`, redis-py's `password=`)
    /// before any other command: Redis' `requirepass`, the `default` user's password (docs/security.md).
    #[arg(long, value_name = "PASSWORD")]
    requirepass: Option<String>,
    /// Mutual TLS between nodes: every peer connection, both ways, is TLS with a certificate signed by the
    /// cluster's CA that names the node. DIR holds ca.crt, node.crt (for this --node-id) and node.key, as
    /// `meridian cert create-ca` and `create-node` write them (docs/security.md). Give it to every node or none.
    #[arg(long, value_name = "DIR")]
    peer_certs_dir: Option<PathBuf>,
    /// Replicas per key (chain length) of the `default` keyspace, all of type --store.
    #[arg(long, default_value_t = DEFAULT_REPLICATION, conflicts_with = "replicas")]
    replication: usize,
    /// The replica type of every chain position of `default` (`mem`, `log` or `buffered`; docs/keyspaces.md).
    /// Used when the cluster is first created.
    #[arg(long, default_value = "log", conflicts_with = "replicas")]
    store: ReplicaKind,
    /// Instead of --replication: the replica type of each chain position of `default`, head first (`mem`,
    /// `log` or `buffered`; e.g. `mem,log`); their number is R. Used when the cluster is first created.
    #[arg(long)]
    replicas: Option<String>,
    /// Ring points per node (with --join: this node's; default, the cluster's).
    #[arg(long)]
    vnodes: Option<usize>,
    #[command(flatten)]
    durability: DurabilityArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    threads: ThreadArgs,
}

/// Runs the node; `resolved` is its configuration as `--print-config` prints it.
pub fn run(args: ServerArgs, resolved: &str) -> Result<ExitCode, String> {
    if args.print_config {
        // What can be checked without the network: a joining node learns its cluster from a running one.
        if let Some(peers) = &args.peers {
            initial_cluster(&args, peers)?;
        }
        args.tls.check(args.listen)?;
        args.api.check()?;
        print!("{resolved}");
        return Ok(ExitCode::SUCCESS);
    }
    let logged: Vec<&str> = resolved.lines().filter(|l| !l.starts_with("requirepass")).collect();
    tracing::debug!(config = ?args.config, "resolved configuration (requirepass left out):\n{}", logged.join("\n"));
    let node_id = NodeId(args.node_id);
    let tls = args.tls.port(args.listen)?;
    let peer_tls = args.peer_certs_dir.as_deref().map(|dir| PeerTls::load(dir, node_id)).transpose();
    let peer_tls = peer_tls.map_err(|e| format!("--peer-certs-dir: {e}"))?;
    // Read once: the node checks requests against it, and asks with it when it joins.
    let http_token = args.api.token()?;
    let http_security = args.api.security(http_token.as_deref())?;
    // What the cluster map shows as this node's client address: its plain port, else its TLS port.
    let client_addr = args.listen.addr().or(tls.as_ref().map(|t| t.addr)).expect("checked: a client port");
    let (cluster, join) = match (&args.peers, &args.join) {
        (Some(peers), _) => (initial_cluster(&args, peers)?, None),
        (None, Some(via)) => joining(&args, join_api(&args, via, http_token)?, client_addr)?,
        (None, None) => unreachable!("clap requires --peers or --join"),
    };
    let setup = NodeSetup {
        node_id,
        cluster,
        join,
        resp: args.listen.addr(),
        tls,
        peer: args.peer_listen,
        http: args.api.http,
        data_dir: args.data_dir,
        durability: args.durability.policy(),
        config: args.cluster.config_with(args.limits.limits()),
        resp_limits: args.limits.resp(),
        wan: args.wan.as_deref().map(Topology::load).transpose().map_err(|e| format!("--wan: {e}"))?.map(Arc::new),
        requirepass: args
            .requirepass
            .as_deref()
            .map(Password::new)
            .transpose()
            .map_err(|e| format!("--requirepass: {e}"))?,
        http_security,
        peer_tls,
    };
    args.threads.runtime()?.block_on(async {
        // Before the node starts, so that no SIGHUP finds the default action (ending the process).
        let hangups = signal(SignalKind::hangup()).map_err(|e| format!("cannot handle SIGHUP: {e}"))?;
        let handle = start(setup).await?;
        let (resp, tls) = (handle.plain_addr(), handle.tls_addr());
        tracing::info!(node = args.node_id, ?resp, ?tls, durability = %args.durability.policy().default, "serving");
        tokio::select! {
            () = stop_signal() => {}
            () = reload_on_hangup(&handle, hangups) => {}
        }
        tracing::info!("shutting down: draining clients");
        handle.shutdown().await;
        tracing::info!("stopped: clients drained, writes synced, data directory released");
        Ok(ExitCode::SUCCESS)
    })
}

/// Reloads the node's certificates on every SIGHUP, as CockroachDB does (docs/security.md), for as long as the
/// node runs.
async fn reload_on_hangup(handle: &NodeHandle, mut hangups: Signal) {
    while hangups.recv().await.is_some() {
        match handle.reload_certificates() {
            Ok(0) => tracing::info!("SIGHUP: this node has no certificates to reload"),
            Ok(n) => tracing::info!(configurations = n, "SIGHUP: certificates reloaded; new connections use them"),
            Err(e) => tracing::error!("SIGHUP: certificates not reloaded, the node keeps the ones it has: {e}"),
        }
    }
}

/// The API of the node `--join` names: over HTTPS if its address says `https://`, checked against the cluster's
/// CA (`--peer-certs-dir`'s, else `--http-tls-ca-cert-file`) and presenting this node's certificate, which admits
/// it, if it has one; with `token`, if any.
fn join_api(args: &ServerArgs, via: &str, token: Option<String>) -> Result<http::Api, String> {
    if !via.starts_with("https://") {
        return http::Api::new(via, token, http::TlsFiles::default());
    }
    let dir = args.peer_certs_dir.as_deref();
    let ca = dir.map(|d| d.join("ca.crt"));
    let identity = dir.map(|d| (d.join("node.crt"), d.join("node.key")));
    let files = http::TlsFiles {
        ca: ca.as_deref().or(args.api.ca()),
        identity: identity.as_ref().map(|(cert, key)| (cert.as_path(), key.as_path())),
    };
    http::Api::new(via, token, files).map_err(|e| format!("--join {e}"))
}

fn initial_cluster(args: &ServerArgs, peers: &str) -> Result<ClusterConfig, String> {
    let peers = ClusterConfig::parse_peers(peers).map_err(|e| e.to_string())?;
    let vnodes = args.vnodes.unwrap_or(DEFAULT_VNODES);
    let replicas = default_replicas(args.replicas.as_deref(), args.replication, args.store)?;
    let cluster = ClusterConfig::new(peers, replicas.len(), vnodes)
        .and_then(|c| c.with_default(KeyspaceConfig::with_replicas(replicas)))
        .map_err(|e| e.to_string())?;
    let own =
        cluster.node(NodeId(args.node_id)).ok_or_else(|| format!("--node-id {} is not in --peers", args.node_id))?;
    if let Some(location) = args.at.location()?.filter(|l| *l != own.location) {
        return Err(format!(
            "node {} is at {} in --peers, not at {location}: a node of the initial cluster is placed by --peers \
             (1=HOST:PORT@REGION/ZONE/RACK), the same on every node",
            args.node_id, own.location
        ));
    }
    if own.peer_addr != args.peer_listen.to_string() {
        tracing::info!(listen = %args.peer_listen, advertised = %own.peer_addr, "peer listen address differs from --peers entry");
    }
    Ok(cluster)
}

/// Learns the cluster from a node's `/v1/cluster`: the configuration it started from (rebuilt exactly, so
/// the handshake fingerprint matches) and whether this node's id is free.
fn joining(
    args: &ServerArgs,
    api: http::Api,
    client_addr: SocketAddr,
) -> Result<(ClusterConfig, Option<JoinRequest>), String> {
    let via = api.addr();
    let layout = api.get("/v1/cluster")?;
    let config = &layout["config"];
    let nodes: Vec<NodeSpec> = serde_json::from_value(config["nodes"].clone()).map_err(|e| format!("{via}: {e}"))?;
    let number = |field: &str| config[field].as_u64().ok_or_else(|| format!("{via}: no {field} in /v1/cluster"));
    let default: KeyspaceConfig =
        serde_json::from_value(config["default"].clone()).map_err(|e| format!("{via}: default keyspace: {e}"))?;
    let cluster = ClusterConfig::new(nodes, number("replication")? as usize, number("vnodes")? as usize)
        .and_then(|c| c.with_default(default))
        .map_err(|e| format!("{via}: {e}"))?;
    if Some(cluster.fingerprint()) != config["fingerprint"].as_u64() {
        return Err(format!("{via}: the cluster configuration it reports does not match its fingerprint"));
    }
    let addrs = NodeAddrs {
        peer_addr: args.peer_listen.to_string(),
        resp_addr: client_addr.to_string(),
        http_addr: args.api.http.map(|a| a.to_string()),
    };
    let nodes = &layout["status"]["nodes"];
    check_id_free(nodes, args.node_id, &addrs.peer_addr)?;
    let vnodes = args.vnodes.unwrap_or(cluster.vnodes) as u32;
    let host = args.affiliate_of.map(|h| check_host(nodes, h)).transpose()?;
    let beside = host.as_ref().map(|(_, at)| at.clone());
    let location = args.at.location()?.or(beside).unwrap_or_default();
    let host = host.map(|(h, _)| h);
    Ok((cluster, Some(JoinRequest { addrs, vnodes, location, host })))
}

/// The node `--affiliate-of` names, with its location: a JOINING or ACTIVE node that is not affiliated itself.
fn check_host(nodes: &Value, host: u32) -> Result<(NodeId, Location), String> {
    let known = nodes.as_array().into_iter().flatten().find(|n| n["id"].as_u64() == Some(u64::from(host)));
    let Some(n) = known else {
        return Err(format!("--affiliate-of {host}: the cluster has no node {host}"));
    };
    let state = n["state"].as_str().unwrap_or("?");
    if !matches!(state, "ACTIVE" | "JOINING") || !n["affiliate_of"].is_null() {
        let what = if n["affiliate_of"].is_null() { state } else { "an affiliated node" };
        return Err(format!(
            "--affiliate-of {host}: node {host} is {what}; only an ACTIVE or JOINING standard node hosts"
        ));
    }
    let part = |f: &str| n[f].as_str().map(str::to_string);
    let region = part("region").unwrap_or_default();
    let location = Location::new(&region, part("zone").as_deref(), part("rack").as_deref())
        .map_err(|e| format!("--affiliate-of {host}: its location: {e}"))?;
    Ok((NodeId(host), location))
}

/// A node id belongs to one node for life: joining as an id the cluster knows with another address is refused
/// here, before anything starts.
fn check_id_free(nodes: &Value, id: u32, peer_addr: &str) -> Result<(), String> {
    let known = nodes.as_array().into_iter().flatten().find(|n| n["id"].as_u64() == Some(u64::from(id)));
    match known {
        Some(n) if n["peer_addr"].as_str() != Some(peer_addr) && n["state"] != "REMOVED" => Err(format!(
            "node id {id} is already used by the node at {} ({}); pick another --node-id",
            n["peer_addr"].as_str().unwrap_or("?"),
            n["state"].as_str().unwrap_or("?")
        )),
        _ => Ok(()),
    }
}
