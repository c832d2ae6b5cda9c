//! Graceful shutdown end to end: a node sent SIGTERM while a client's pipelined writes are still being
//! fsynced answers every command it had read, closes the connection cleanly (EOF, not a reset), exits 0,
//! releases its data directory, and keeps every write it acknowledged; and in a cluster, it keeps the replicas
//! of the chains it heads, which a SIGKILL costs a copy.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::resp::{bulk, Conn, Resp};
use support::{Cluster, Server};

/// Few enough that their fsyncs, one per write in `sync` mode, fit in the node's drain time (5 s) even on a
/// slow disk; many enough to still be in flight when the signal comes.
const WRITES: usize = 200;

#[test]
fn sigterm_drains_clients_syncs_and_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::single(dir.path(), &["--durability", "sync"]);
    let mut stream = TcpStream::connect(server.resp).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let pipeline: String = (0..WRITES).map(|i| format!("*3\r\n$3\r\nSET\r\n$4\r\nk{i:03}\r\n$1\r\nv\r\n")).collect();
    stream.write_all(pipeline.as_bytes()).unwrap();
    let mut first = [0u8; 5];
    stream.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"+OK\r\n");
    // Connections that came and went are not counted as open when the node drains; this one, still open, is.
    for _ in 0..3 {
        let mut gone = Conn::connect(server.resp, Duration::from_secs(5)).unwrap();
        assert_eq!(gone.cmd(&["PING"]).unwrap(), Resp::Simple("PONG".into()));
    }
    let mut watcher = Conn::connect(server.resp, Duration::from_secs(5)).unwrap();
    wait_for_clients(&mut watcher, 2);
    server.terminate();

    let mut rest = Vec::new();
    match stream.read_to_end(&mut rest) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => panic!("the node reset the connection while draining"),
        Err(e) => panic!("reading the replies: {e}"),
    }
    let replies = 1 + rest.len() / 5;
    assert_eq!(rest, b"+OK\r\n".repeat(replies - 1), "every reply is +OK");
    assert_eq!(replies, WRITES, "every command the node had read is answered before it closes");

    let status = server.wait_exit(Duration::from_secs(15)).expect("the node exits after SIGTERM");
    assert!(status.success(), "exit status {status}; log:\n{}", server.log());
    let log = server.log();
    let drained = log.lines().find(|l| l.contains("RESP connections drained")).unwrap_or_else(|| panic!("{log}"));
    assert!(without_ansi(drained).contains("open=2"), "only the pipelining client and the watcher: {drained}");
    assert!(log.contains("stopped: clients drained"), "{log}");

    // The data directory is free again, and every acknowledged write is there.
    server.spawn();
    server.wait_ready(Duration::from_secs(20));
    let mut c = Conn::connect(server.resp, Duration::from_secs(5)).unwrap();
    for i in 0..WRITES {
        assert_eq!(c.cmd(&["GET", &format!("k{i:03}")]).unwrap(), bulk("v"), "k{i:03}");
    }
}

/// A node heads a third of the chains of a 3-node cluster, and as their head it passes updates on before its
/// own fsync: after SIGKILL it cannot know it lost none, so it counts those replicas lost and the chains copy
/// them to it again; after SIGTERM it made every write durable first, so it keeps them. Every write stays
/// readable either way.
#[test]
fn only_a_stop_that_was_not_clean_costs_the_heads_a_copy() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(3, dir.path());
    let mut c = cluster.conn(1);
    for i in 0..WRITES {
        assert_eq!(c.cmd(&["SET", &format!("k{i:03}"), "v"]).unwrap(), Resp::Simple("OK".into()));
    }
    let node = &mut cluster.servers[0];
    node.terminate();
    assert!(node.wait_exit(Duration::from_secs(15)).is_some_and(|s| s.success()), "{}", node.log());
    node.spawn();
    node.wait_ready(Duration::from_secs(20));
    assert_eq!(lost_at_start(node), 0, "a clean stop keeps every replica");
    node.kill();
    node.spawn();
    node.wait_ready(Duration::from_secs(20));
    assert!(lost_at_start(node) > 0, "after SIGKILL the chains it headed are copied again");
    let mut c = cluster.conn(0);
    for i in 0..WRITES {
        let key = format!("k{i:03}");
        let deadline = Instant::now() + Duration::from_secs(20);
        // A write or read of a chain under repair may time out until the manager has moved it on.
        while c.cmd(&["GET", &key]).ok() != Some(bulk("v")) {
            assert!(Instant::now() < deadline, "{key} unreadable after the restart");
        }
    }
}

/// The node's `meridian_replicas_lost_at_start`.
fn lost_at_start(node: &Server) -> u64 {
    let metrics = node.http_get("/metrics");
    let line = metrics.lines().find(|l| l.starts_with("meridian_replicas_lost_at_start ")).expect("the gauge");
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// Waits until the node counts `n` connected clients (the ones that left have ended on its side too).
fn wait_for_clients(conn: &mut Conn, n: usize) {
    for _ in 0..500 {
        if conn.connected_clients() == n {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the node never counted {n} clients");
}

/// A log line without the terminal colour codes the node's text format adds.
fn without_ansi(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|&c| c == 'm');
        } else {
            out.push(c);
        }
    }
    out
}
