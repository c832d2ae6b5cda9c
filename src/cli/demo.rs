//! `meridian demo`: a local cluster in one process, for trying Meridian with redis-cli; with `--topology`, spread
//! over the regions of an emulated WAN (docs/regions.md); with `--secure`, with TLS everywhere and certificates
//! and a token it makes itself (docs/security.md).

use super::cert;
use super::http_port::read_token;
use super::node::{
    default_replicas, start, stop_signal, ClusterArgs, DurabilityArgs, LimitArgs, NodeSetup, ThreadArgs,
};
use clap::Args;
use meridian_core::config::{DEFAULT_REPLICATION, DEFAULT_VNODES};
use meridian_core::topology::Topology;
use meridian_core::{
    ClusterConfig, KeyspaceConfig, KeyspaceId, Location, NodeId, NodeSpec, Read, ReplicaKind, Reply, Request,
};
use meridian_node::{
    CertUser, ClientAuth, HttpSecurity, HttpToken, HttpsConfig, NodeHandle, PeerTls, TlsFiles, TlsListen,
};
use std::fs::{self, OpenOptions};
use std::io::{Read as _, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
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
    /// Secure, as docs/security.md sets a cluster up: clients over TLS only (on the RESP ports, the plain ports
    /// off) with a client certificate, mutual TLS between the nodes, a token on the HTTP API. The CA, the
    /// nodes' certificates, one for user `demo` and the token are made in the data directory (kept there
    /// with --data-dir, and used again by the next run on it).
    #[arg(long)]
    secure: bool,
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
    let secure = args.secure.then(|| Secure::make(&root, nodes)).transpose()?;
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
            let node_id = NodeId(u32::from(i) + 1);
            let (resp, tls, peer_tls, http_security) = match &secure {
                None => (Some(addr(args.port + i)), None, None, HttpSecurity::default()),
                Some(s) => (
                    None,
                    Some(s.tls_port(node_id, addr(args.port + i))?),
                    Some(s.peer_tls(node_id)?),
                    s.http(node_id)?,
                ),
            };
            let setup = NodeSetup {
                node_id,
                cluster: cluster.clone(),
                join: None,
                resp,
                tls,
                peer: addr(args.port + 1000 + i),
                http: Some(addr(args.port + 2000 + i)),
                data_dir: root.join(format!("node{}", i + 1)),
                durability: args.durability.policy(),
                config: args.cluster.config_with(args.limits.limits()),
                resp_limits: args.limits.resp(),
                wan: topology.clone(),
                requirepass: None,
                http_security,
                peer_tls,
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
            let scheme = if secure.is_some() { "https" } else { "http" };
            let http = h.http_addr().map(|a| format!("{scheme}://{a}")).unwrap_or_default();
            let region = topology.as_ref().map_or(String::new(), |_| format!("  region {}", places[i]));
            let client = match (h.plain_addr(), h.tls_addr()) {
                (Some(plain), _) => format!("RESP {plain}"),
                (None, tls) => format!("RESP over TLS {}", tls.expect("a node has a client port")),
            };
            println!("  node {}: {client}  HTTP {http}{region}", i + 1);
        }
        // A write through the first node read back through the last: another node's, when there is one.
        let (first, last) = (args.port, args.port + nodes - 1);
        match &secure {
            None => println!("Try: redis-cli -p {first} SET k v; redis-cli -p {last} GET k   (Ctrl-C stops)"),
            Some(s) => s.print_howto(first, last, args.port + 2000),
        }
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

/// The user the demo's client certificate is for.
const DEMO_USER: &str = "demo";

/// `--secure`'s files: `certs/` holds the CA (`ca.crt`, `ca.key`) and the client certificate for
/// [`DEMO_USER`], and `certs/nodeN/` node N's `--peer-certs-dir` (`ca.crt`, `node.crt`, `node.key`), which
/// its TLS client port uses too; `http.token` holds the HTTP API's token.
struct Secure {
    certs: PathBuf,
    token_file: PathBuf,
}

impl Secure {
    /// Makes what is missing, with `meridian cert`'s own functions. A data directory kept from an earlier run
    /// keeps its files, so that clients set up with them go on working; a new CA (its certificate was
    /// missing) replaces every certificate, since those of the old one would no longer verify.
    fn make(root: &Path, nodes: u16) -> Result<Secure, String> {
        let certs = root.join("certs");
        let ca_crt = certs.join("ca.crt");
        let new_ca = !ca_crt.exists();
        // Overwriting only what the checks below chose to make: a key left without its certificate by an
        // interrupted run is replaced rather than refused.
        let files = |dir: &Path| cert::Files::new(dir.to_path_buf(), Some(certs.join("ca.key")), true);
        if new_ca {
            cert::create_ca(&files(&certs))?;
        }
        for id in 1..=u32::from(nodes) {
            let dir = certs.join(format!("node{id}"));
            if new_ca || !dir.join("node.crt").exists() {
                fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
                fs::copy(&ca_crt, dir.join("ca.crt")).map_err(|e| format!("cannot copy {}: {e}", ca_crt.display()))?;
                // The hosts redis-cli (127.0.0.1) and redis-py (either) dial by default.
                cert::create_node(&files(&dir), id, &["127.0.0.1".into(), "localhost".into()])?;
            }
        }
        if new_ca || !certs.join(format!("client.{DEMO_USER}.crt")).exists() {
            cert::create_client(&files(&certs), DEMO_USER)?;
        }
        let token_file = root.join("http.token");
        if !token_file.exists() {
            write_new_token(&token_file)?;
        }
        Ok(Secure { certs, token_file })
    }

    fn node_dir(&self, node: NodeId) -> PathBuf {
        self.certs.join(format!("node{}", node.0))
    }

    /// Node `node`'s certificate, asking clients for one of the demo's CA as `auth` says.
    fn node_files(&self, node: NodeId, auth: ClientAuth) -> TlsFiles {
        let dir = self.node_dir(node);
        TlsFiles {
            cert: dir.join("node.crt"),
            key: dir.join("node.key"),
            ca: Some(dir.join("ca.crt")),
            auth_clients: Some(auth),
            auth_clients_user: CertUser::Off,
        }
    }

    /// The node's TLS client port at `addr`, with its node certificate, requiring client certificates of the
    /// demo's CA.
    fn tls_port(&self, node: NodeId, addr: SocketAddr) -> Result<TlsListen, String> {
        let config =
            self.node_files(node, ClientAuth::Yes).load().map_err(|e| format!("node {}: TLS port: {e}", node.0))?;
        Ok(TlsListen { addr, config })
    }

    fn peer_tls(&self, node: NodeId) -> Result<PeerTls, String> {
        PeerTls::load(&self.node_dir(node), node).map_err(|e| format!("node {}: mutual TLS: {e}", node.0))
    }

    /// The HTTP API over HTTPS with the node's certificate, needing the token (probes included: the demo shows a
    /// locked-down node, and `meridian ctl` carries it) or a certificate of the demo's CA.
    fn http(&self, node: NodeId) -> Result<HttpSecurity, String> {
        let token = read_token(&self.token_file)?;
        let token = HttpToken::new(&token).map_err(|e| format!("{}: {e}", self.token_file.display()))?;
        let tls =
            self.node_files(node, ClientAuth::Optional).load().map_err(|e| format!("node {}: HTTPS: {e}", node.0))?;
        let tls = HttpsConfig { tls, client_certificates: true };
        Ok(HttpSecurity { token: Some(token), tls: Some(tls), open_probes: false })
    }

    /// How to connect: each line works as printed, pasted into a shell.
    fn print_howto(&self, first: u16, last: u16, http: u16) {
        let file = |name: &str| self.certs.join(name).display().to_string();
        let (ca, cert, key) =
            (file("ca.crt"), file(&format!("client.{DEMO_USER}.crt")), file(&format!("client.{DEMO_USER}.key")));
        let tls = format!("--tls --cacert {} --cert {} --key {}", sh_word(&ca), sh_word(&cert), sh_word(&key));
        let token = sh_word(&self.token_file.display().to_string());
        println!(
            "Secure: clients over TLS only, with a certificate of the demo's CA (user {DEMO_USER}); mutual TLS between \
             the nodes; the HTTP API is HTTPS and needs the token in {token}"
        );
        println!("Try: redis-cli {tls} -p {first} SET k v");
        println!("     redis-cli {tls} -p {last} GET k");
        let py = format!(
            "import redis; print(redis.Redis(host=\"127.0.0.1\", port={last}, ssl=True, ssl_ca_certs={ca:?}, \
             ssl_certfile={cert:?}, ssl_keyfile={key:?}).get(\"k\"))"
        );
        println!("     python3 -c {}", sh_word(&py));
        println!(
            "     meridian ctl --addr https://127.0.0.1:{http} --cacert {} --token-file {token} status   (Ctrl-C stops)",
            sh_word(&ca)
        );
    }
}

/// A new random token, 32 bytes from the kernel's generator in hex, in a file only its owner may read.
fn write_new_token(path: &Path) -> Result<(), String> {
    let cannot = |e: std::io::Error| format!("cannot make the HTTP token {}: {e}", path.display());
    let mut bytes = [0u8; 32];
    fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).map_err(cannot)?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(cannot)?;
    writeln!(file, "{token}").and_then(|()| file.sync_all()).map_err(cannot)
}

/// `text` as one shell word: as is if it holds nothing a shell would read specially, else single-quoted.
fn sh_word(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+:=,@%".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        return text.to_string();
    }
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::sh_word;

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(sh_word("/tmp/meridian-demo-x1/certs/ca.crt"), "/tmp/meridian-demo-x1/certs/ca.crt");
        assert_eq!(sh_word("/my data/ca.crt"), "'/my data/ca.crt'");
        assert_eq!(sh_word("it's"), "'it'\\''s'");
        assert_eq!(sh_word(""), "''");
    }
}
