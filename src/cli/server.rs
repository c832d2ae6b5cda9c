//! `meridian server`: one node of a static cluster.

use super::node::{init_logging, runtime, start, stop_signal, DurabilityArgs, NodeSetup};
use clap::Args;
use meridian_core::config::{DEFAULT_REPLICATION, DEFAULT_VNODES};
use meridian_core::{ClusterConfig, NodeId};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct ServerArgs {
    /// This node's id; must appear in --peers.
    #[arg(long)]
    node_id: u32,
    /// RESP (Redis protocol) listen address.
    #[arg(long, default_value = "127.0.0.1:6380")]
    listen: SocketAddr,
    /// Peer (node-to-node) listen address.
    #[arg(long)]
    peer_listen: SocketAddr,
    /// HTTP listen address (/health, /v1/cluster).
    #[arg(long)]
    http: Option<SocketAddr>,
    /// Every node's peer address: 1=HOST:PORT,2=HOST:PORT,...
    #[arg(long)]
    peers: String,
    /// Where this node keeps its data.
    #[arg(long)]
    data_dir: PathBuf,
    /// Replicas per key (chain length).
    #[arg(long, default_value_t = DEFAULT_REPLICATION)]
    replication: usize,
    /// Ring points per node.
    #[arg(long, default_value_t = DEFAULT_VNODES)]
    vnodes: usize,
    #[command(flatten)]
    durability: DurabilityArgs,
}

pub fn run(args: ServerArgs) -> Result<ExitCode, String> {
    init_logging();
    let peers = ClusterConfig::parse_peers(&args.peers).map_err(|e| e.to_string())?;
    let cluster = ClusterConfig::new(peers, args.replication, args.vnodes).map_err(|e| e.to_string())?;
    let node_id = NodeId(args.node_id);
    let own = cluster.node(node_id).ok_or_else(|| format!("--node-id {} is not in --peers", args.node_id))?;
    if own.peer_addr != args.peer_listen.to_string() {
        tracing::info!(listen = %args.peer_listen, advertised = %own.peer_addr, "peer listen address differs from --peers entry");
    }
    let setup = NodeSetup {
        node_id,
        cluster,
        resp: args.listen,
        peer: args.peer_listen,
        http: args.http,
        data_dir: args.data_dir,
        durability: args.durability.mode(),
    };
    runtime()?.block_on(async {
        let handle = start(setup).await?;
        tracing::info!(node = args.node_id, resp = %handle.resp_addr(), durability = %args.durability.mode(), "serving");
        stop_signal().await;
        tracing::info!("shutting down");
        handle.shutdown().await;
        Ok(ExitCode::SUCCESS)
    })
}
