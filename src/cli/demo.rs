//! `meridian demo`: a local cluster in one process, for trying Meridian with redis-cli; with `--topology`, spread
//! over the regions of an emulated WAN (docs/regions.md).

use super::node::{
    default_replicas, start, stop_signal, ClusterArgs, DurabilityArgs, LimitArgs, NodeSetup, ThreadArgs,
};
use clap::Args;
use meridian_core::config::{DEFAULT_REPLICATION, DEFAULT_VNODES};
use meridian_core::topology::Topology;
use meridian_core::{
    ClusterConfig, KeyspaceConfig, KeyspaceId, Location, NodeId, NodeSpec, Read, ReplicaKind, Reply, Request,
};
use meridian_node::NodeHandle;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Number of nodes.
    #[arg(long, default_value_t = 3, conflicts_with = "topology")]
    nodes: u16,
    /// Spread the nodes over the regions of this topology (a preset or a file; `meridian topology list`) and
    /// emulate its WAN between them: nodes are numbered region by region, in the topology's order.
    #[arg(long, value_name = "PRESET|FILE")]
    topology: Option<String>,
    /// With --topology: nodes in each region.
    #[arg(long, default_value_t = 1, requires = "topology")]
    nodes_per_region: u16,
    /// First RESP port; node i listens on port + i, its HTTP on port + 2000 + i, its peers on port + 1000 + i.
    #[arg(long, default_value_t = 6380)]
    port: u16,
    /// Data directory (default: a temporary directory removed on exit).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The replica type of each chain position of the `default` keyspace, head first (`mem`, `log` or
    /// `buffered`); their number is R. Default: three of type --store.
    #[arg(long)]
    replicas: Option<String>,
    /// The replica type of every chain position of `default` (`mem`, `log` or `buffered`; docs/keyspaces.md).
    #[arg(long, default_value = "log", conflicts_with = "replicas")]
    store: ReplicaKind,
    #[command(flatten)]
    durability: DurabilityArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    threads: ThreadArgs,
}

pub fn run(args: DemoArgs) -> Result<ExitCode, String> {
    let topology = args.topology.as_deref().map(Topology::load).transpose().map_err(|e| e.to_string())?.map(Arc::new);
    let places = places(&args, topology.as_deref())?;
    let nodes = u16::try_from(places.len()).ok().filter(|&n| n > 0);
    let Some(nodes) = nodes.filter(|&n| args.port.checked_add(2000 + n).is_some()) else {
        return Err("there must be at least 1 node and the ports must fit below 65536".into());
    };
    let temp = match &args.data_dir {
        Some(_) => None,
        None => Some(tempfile::Builder::new().prefix("meridian-demo-").tempdir().map_err(|e| e.to_string())?),
    };
    let root = args.data_dir.clone().unwrap_or_else(|| temp.as_ref().expect("temp dir").path().to_path_buf());
    let addr = |port: u16| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
    let spec = |(i, location): (u16, &Location)| NodeSpec {
        location: location.clone(),
        ..NodeSpec::new(NodeId(u32::from(i) + 1), addr(args.port + 1000 + i).to_string())
    };
    let specs: Vec<NodeSpec> = (0..nodes).zip(&places).map(spec).collect();
    let replicas = default_replicas(args.replicas.as_deref(), DEFAULT_REPLICATION, args.store)?;
    let cluster = ClusterConfig::new(specs, replicas.len(), DEFAULT_VNODES)
        .and_then(|c| c.with_default(KeyspaceConfig::with_replicas(replicas)))
        .map_err(|e| e.to_string())?;
    args.threads.runtime()?.block_on(async {
        let mut handles = Vec::new();
        for i in 0..nodes {
            let setup = NodeSetup {
                node_id: NodeId(u32::from(i) + 1),
                cluster: cluster.clone(),
                join: None,
                resp: Some(addr(args.port + i)),
                tls: None,
                peer: addr(args.port + 1000 + i),
                http: Some(addr(args.port + 2000 + i)),
                data_dir: root.join(format!("node{}", i + 1)),
                durability: args.durability.policy(),
                config: args.cluster.config_with(args.limits.limits()),
                resp_limits: args.limits.resp(),
                wan: topology.clone(),
                requirepass: None,
                http_token: None,
                peer_tls: None,
            };
            handles.push(start(setup).await?);
        }
        wait_until_ready(&handles).await?;
        let wan = topology.as_ref().map_or(String::new(), |t| format!(", WAN of {}", t.source));
        println!(
            "Meridian demo: {} node{}, chain replication (R = {}), durability {}{wan}, data in {}",
            nodes,
            if nodes == 1 { "" } else { "s" },
            cluster.replication.min(nodes.into()),
            args.durability.policy().default,
            root.display()
        );
        for (i, h) in handles.iter().enumerate() {
            let http = h.http_addr().map(|a| format!("http://{a}")).unwrap_or_default();
            let region = topology.as_ref().map_or(String::new(), |_| format!("  region {}", places[i]));
            println!("  node {}: RESP {}  HTTP {http}{region}", i + 1, h.resp_addr());
        }
        // A write through the first node read back through the last: another node's, when there is one.
        let (first, last) = (args.port, args.port + nodes - 1);
        println!("Try: redis-cli -p {first} SET k v; redis-cli -p {last} GET k   (Ctrl-C stops)");
        stop_signal().await;
        println!("stopping");
        for h in handles {
            h.shutdown().await;
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// Where each node runs: `--nodes` in region `default`, or `--nodes-per-region` in each region of the topology.
fn places(args: &DemoArgs, topology: Option<&Topology>) -> Result<Vec<Location>, String> {
    let Some(t) = topology else { return Ok(vec![Location::default(); args.nodes.into()]) };
    let each = |r: &meridian_core::topology::Region| Location::region(&r.name).map_err(|e| e.to_string());
    let regions = t.regions().iter().map(each).collect::<Result<Vec<_>, _>>()?;
    Ok(regions.iter().flat_map(|l| std::iter::repeat_n(l.clone(), args.nodes_per_region.into())).collect())
}

/// Waits until every node answers a read: the manager has made the cluster map and granted the tails their
/// leases, so what the demo prints next works at once.
async fn wait_until_ready(handles: &[NodeHandle]) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    for h in handles {
        let probe =
            || Request::Get { keyspace: KeyspaceId::DEFAULT, key: "meridian-demo-ready".into(), read: Read::Value };
        while !matches!(h.request(probe()).await, Reply::Value(_)) {
            if Instant::now() > deadline {
                return Err("the cluster did not become ready within 30 s".into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}
