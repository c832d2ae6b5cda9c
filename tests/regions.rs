//! Nodes that know where they run, on real processes: locations from `--peers` and `--join`, placements given at
//! `keyspace create`, and a data directory that a build of map format 1 wrote (docs/regions.md).

mod support;

use serde_json::Value;
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;
use support::resp::Resp;
use support::{free_port, Server};

/// `ctl ARGS` through `server`: whether it succeeded, and what it printed on stdout and stderr.
fn ctl(server: &Server, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["ctl", "--addr", &server.http.to_string()])
        .args(args)
        .output()
        .expect("run meridian ctl");
    let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), said)
}

/// The members of every chain of keyspace `keyspace`, head first.
fn chains_of(server: &Server, keyspace: u64) -> Vec<Vec<u64>> {
    let status = server.cluster_status();
    let chains = status["status"]["chains"].as_array().cloned().unwrap_or_default();
    let members = |c: &Value| c["members"].as_array().unwrap().iter().map(|m| m.as_u64().unwrap()).collect();
    chains.iter().filter(|c| c["keyspace"].as_u64() == Some(keyspace)).map(members).collect()
}

#[test]
fn nodes_run_where_peers_and_join_say_and_keyspaces_are_placed_by_region() {
    let dir = tempfile::tempdir().unwrap();
    let peers: Vec<SocketAddr> = (1..=2)
        .map(|i| format!("127.0.0.{i}:{}", free_port(&format!("127.0.0.{i}"))))
        .map(|a| a.parse().unwrap())
        .collect();
    let list = format!("1={}@eu/a,2={}@us", peers[0], peers[1]);
    let start = |id: u32| {
        let args = ["--peers".to_string(), list.clone(), "--replication".into(), "2".into()];
        Server::launch(id, &format!("127.0.0.{id}"), peers[id as usize - 1], &args, dir.path())
    };
    let servers = [start(1), start(2)];
    servers.iter().for_each(|s| s.wait_ready(Duration::from_secs(20)));
    let joiner = Server::launch(
        3,
        "127.0.0.3",
        format!("127.0.0.3:{}", free_port("127.0.0.3")).parse().unwrap(),
        &["--join".into(), servers[0].http.to_string(), "--region".into(), "eu".into(), "--zone".into(), "b".into()],
        dir.path(),
    );
    joiner.wait_ready(Duration::from_secs(30));

    let status = servers[0].cluster_status();
    let place = |id: u64| {
        let nodes = status["status"]["nodes"].as_array().unwrap();
        let n = nodes.iter().find(|n| n["id"].as_u64() == Some(id)).unwrap();
        (n["region"].as_str().unwrap().to_string(), n["zone"].as_str().map(String::from))
    };
    assert_eq!(place(1), ("eu".into(), Some("a".into())));
    assert_eq!(place(2), ("us".into(), None));
    assert_eq!(place(3), ("eu".into(), Some("b".into())));
    let shown = servers[0].ctl(&["status"]);
    let eu = shown.find("n3 ").unwrap();
    assert!(shown.find("n1 ").unwrap() < eu && eu < shown.find("n2 ").unwrap(), "grouped by region:\n{shown}");

    // Homed in us, one replica in each region: every chain's head is n2, its other member in eu.
    let (made, said) = ctl(&servers[0], &["keyspace", "create", "orders", "--regions", "us,eu"]);
    assert!(made, "{said}");
    let chains = chains_of(&servers[0], 1);
    assert!(!chains.is_empty() && chains.iter().all(|c| c.len() == 2 && c[0] == 2 && c[1] != 2), "{chains:?}");
    // Two replicas in eu take its two zones; none may run in us.
    let (made, said) = ctl(&servers[0], &["keyspace", "create", "carts", "--placement", "eu=2", "--ban-region", "us"]);
    assert!(made, "{said}");
    assert!(chains_of(&servers[0], 2).iter().all(|c| c.len() == 2 && !c.contains(&2)));
    let list = servers[0].ctl(&["keyspace", "list"]);
    assert!(list.contains("us=1,eu=1") && list.contains("eu=2 not us"), "{list}");

    let (made, said) = ctl(&servers[0], &["keyspace", "create", "far", "--regions", "asia"]);
    assert!(!made && said.contains("region 'asia', which has 0 nodes"), "{said}");
    let (made, said) = ctl(&servers[0], &["keyspace", "create", "odd", "--placement", "eu=1", "--replicas", "log,log"]);
    assert!(!made && said.contains("puts 1 replicas, and the keyspace has 2"), "{said}");
    assert!(chains_of(&servers[0], 3).is_empty() && !servers[0].ctl(&["keyspace", "list"]).contains("far"));

    let mut conn = support::resp::Conn::connect(joiner.resp, Duration::from_secs(5)).unwrap();
    assert_eq!(conn.cmd(&["SET", "k", "v"]).unwrap(), Resp::Simple("OK".into()));
    let mut other = support::resp::Conn::connect(servers[1].resp, Duration::from_secs(5)).unwrap();
    assert_eq!(other.cmd(&["GET", "k"]).unwrap(), Resp::Bulk(Some(b"v".to_vec())));
}

#[test]
fn a_node_of_the_initial_cluster_is_where_peers_says() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("n1");
    let out = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["server", "--node-id", "1", "--peer-listen", "127.0.0.1:1", "--peers", "1=127.0.0.1:1@eu"])
        .args(["--region", "us", "--data-dir", data.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("node 1 is at eu in --peers, not at us"), "{err}");
    assert!(!data.exists(), "nothing started");
    let out = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["server", "--node-id", "1", "--peer-listen", "127.0.0.1:1", "--peers", "1=127.0.0.1:1@Eu"])
        .args(["--data-dir", data.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("node 1: 'Eu' is not a region name"), "{err}");
    let wan = |wan: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_meridian"))
            .args(["server", "--node-id", "1", "--peer-listen", "127.0.0.1:1", "--peers", "1=127.0.0.1:1@eu"])
            .args(["--wan", wan, "--data-dir", data.to_str().unwrap()])
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = wan("globlease-4");
    assert_eq!(code, Some(2));
    assert!(
        err.contains("region 'eu' is not in the --wan topology globlease-4 (its regions: or, va, ir, tk)"),
        "{err}"
    );
    let (code, err) = wan("no-such-preset");
    assert!(code == Some(2) && err.contains("--wan: ") && err.contains("no-such-preset"), "{err}");
    assert!(!data.exists(), "nothing started");
}

/// `tests/fixtures/format1-node`: the data directory of a one-node cluster that a build of map format 1
/// (dca6af9) ran, with `SET alpha one`, `SET beta two` and a keyspace `cache`. This build serves it on, its node
/// in region `default` and its keyspaces spread, and rewrites its raft log and its data format marker in the
/// current formats.
#[test]
fn a_data_directory_of_map_format_1_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(
        &std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format1-node"),
        &dir.path().join("node1"),
    );
    let peer: SocketAddr = format!("127.0.0.1:{}", free_port("127.0.0.1")).parse().unwrap();
    // The fixture's map names node 1's peer address as it was; this node listens elsewhere.
    let start = ["--peers".to_string(), "1=127.0.0.1:17101".into(), "--replication".into(), "1".into()];
    let server = Server::launch(1, "127.0.0.1", peer, &start, dir.path());
    server.wait_ready(Duration::from_secs(20));
    let mut conn = support::resp::Conn::connect(server.resp, Duration::from_secs(5)).unwrap();
    assert_eq!(conn.cmd(&["GET", "alpha"]).unwrap(), Resp::Bulk(Some(b"one".to_vec())));
    assert_eq!(conn.cmd(&["GET", "beta"]).unwrap(), Resp::Bulk(Some(b"two".to_vec())));
    let list = server.ctl(&["keyspace", "list"]);
    assert!(list.contains("cache") && list.contains("spread"), "{list}");
    let status = server.cluster_status();
    assert_eq!(status["status"]["nodes"][0]["region"], "default");
    let raft = std::fs::read(dir.path().join("node1/raft/raft.log")).unwrap();
    // The first frame (length, checksum, kind 7, version) names the format the log was rewritten in.
    assert_eq!(&raft[8..10], &[7, meridian_proto::map::MAP_FORMAT], "the raft log was upgraded");
    let format = std::fs::read_to_string(dir.path().join("node1/FORMAT")).unwrap();
    assert_eq!(format, format!("meridian data format {}\n", meridian_node::DATA_FORMAT));
}

/// The format-1 fixture with a key holding a hash tag, which format 1 placed by its whole name: this build would
/// look for it elsewhere, so it refuses the directory, naming the key, and leaves it as it was.
#[test]
fn a_format_1_directory_with_a_tagged_key_is_refused() {
    use meridian_store::{Body, Datastore, LogOptions, LogStore, RealVfs, Record};
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("node1");
    copy_dir(&std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format1-node"), &node);
    let store = node.join("keyspaces/ks-0");
    let (mut log, _) = LogStore::open_with(std::sync::Arc::new(RealVfs), &store, LogOptions::default()).unwrap();
    let tagged = Record { chain: 0, seq: 99, key: "{user1}.name".into(), body: Body::Value("\0ann".into()) };
    log.append(&tagged).unwrap();
    log.sync().unwrap();
    drop(log);
    let peer = format!("127.0.0.1:{}", free_port("127.0.0.1"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["server", "--node-id", "1", "--replication", "1", "--peer-listen", &peer])
        .args(["--listen", &format!("127.0.0.1:{}", free_port("127.0.0.1")), "--peers", &format!("1={peer}")])
        .args(["--data-dir", node.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("holds key \"{user1}.name\"") && err.contains("hash tag"), "{err}");
    assert_eq!(std::fs::read_to_string(node.join("FORMAT")).unwrap(), "meridian data format 1\n");
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        match entry.file_type().unwrap().is_dir() {
            true => copy_dir(&entry.path(), &to.join(entry.file_name())),
            false => drop(std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap()),
        }
    }
}

/// Six `meridian server` processes, two in each region of `leads-3`, with the WAN emulated (`--wan`): every
/// chain has a replica in each region, and the manager's voters are one per region (nodes 1, 3 and 5). Killing
/// both nodes of `mc1`, a voter among them, with SIGKILL leaves the other regions serving every key, nothing
/// acknowledged lost, and taking new writes.
#[test]
fn losing_a_whole_region_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let regions = ["mc1", "mc1", "mc2", "mc2", "mc3", "mc3"];
    let peers: Vec<SocketAddr> =
        (1..=6).map(|i| format!("127.0.0.{i}:{}", free_port(&format!("127.0.0.{i}"))).parse().unwrap()).collect();
    let list: Vec<String> =
        peers.iter().zip(regions).enumerate().map(|(i, (a, r))| format!("{}={a}@{r}", i + 1)).collect();
    let start = ["--peers".to_string(), list.join(","), "--wan".into(), "leads-3".into()];
    let mut servers: Vec<Server> = (1..=6)
        .map(|id| Server::launch(id, &format!("127.0.0.{id}"), peers[id as usize - 1], &start, dir.path()))
        .collect();
    servers.iter().for_each(|s| s.wait_ready(Duration::from_secs(30)));
    let chains = chains_of(&servers[0], 0);
    let region_of = |n: &u64| regions[*n as usize - 1];
    assert!(
        chains
            .iter()
            .all(|c| c.len() == 3 && c.iter().map(region_of).collect::<std::collections::BTreeSet<_>>().len() == 3),
        "{chains:?}"
    );

    let conn = |s: &Server| support::resp::Conn::connect(s.resp, Duration::from_secs(5)).unwrap();
    let mut writers: Vec<_> = servers.iter().map(conn).collect();
    for i in 0..120 {
        let key = format!("key{i}");
        assert_eq!(writers[i % 6].cmd(&["SET", &key, &format!("v{i}")]).unwrap(), Resp::Simple("OK".into()));
    }
    let voters = servers[2].cluster_status()["status"]["manager"]["voters"].clone();
    assert_eq!(voters, serde_json::json!([1, 3, 5]), "one voter per region");
    servers[0].kill();
    servers[1].kill();
    let survivors = &servers[2..];
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut readers: Vec<_> = survivors.iter().map(conn).collect();
    for i in 0..120 {
        let (key, value) = (format!("key{i}"), format!("v{i}"));
        loop {
            match readers[i % 4].cmd(&["GET", &key]).unwrap() {
                Resp::Bulk(Some(v)) => {
                    assert_eq!(v, value.as_bytes(), "{key}");
                    break;
                }
                other => assert!(
                    std::time::Instant::now() < deadline,
                    "{key} unreadable after the region was lost: {other:?}"
                ),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    for (i, reader) in readers.iter_mut().enumerate() {
        let key = format!("after{i}");
        loop {
            match reader.cmd(&["SET", &key, "x"]).unwrap() {
                Resp::Simple(ok) if ok == "OK" => break,
                other => assert!(std::time::Instant::now() < deadline, "no write after the region was lost: {other:?}"),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
