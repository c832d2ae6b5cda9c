//! Thousands of clients at once on one node: every connection is served (a write and a read of its own
//! key), INFO and `/metrics` count them while they are open, and the count falls back once they close.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::resp::Conn;
use support::Server;

const CLIENTS: usize = 4_000;

fn line(reader: &mut BufReader<TcpStream>) -> String {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    line
}

#[test]
fn thousands_of_concurrent_clients_are_each_served() {
    // This process holds every client socket; the node raises its own limit (`open_files.rs`).
    rlimit::increase_nofile_limit(CLIENTS as u64 + 256).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::single(dir.path(), &[]);
    let mut clients: Vec<BufReader<TcpStream>> = (0..CLIENTS)
        .map(|i| {
            let stream = TcpStream::connect(server.resp).unwrap_or_else(|e| panic!("client {i}: {e}"));
            stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            BufReader::new(stream)
        })
        .collect();
    // All of them have a write in flight at once, then a read.
    for (i, c) in clients.iter_mut().enumerate() {
        c.get_mut().write_all(format!("SET client{i} {i}\r\n").as_bytes()).unwrap();
    }
    for (i, c) in clients.iter_mut().enumerate() {
        assert_eq!(line(c), "+OK\r\n", "client {i}");
    }
    for (i, c) in clients.iter_mut().enumerate() {
        c.get_mut().write_all(format!("GET client{i}\r\n").as_bytes()).unwrap();
    }
    for (i, c) in clients.iter_mut().enumerate() {
        let value = i.to_string();
        assert_eq!([line(c), line(c)], [format!("${}\r\n", value.len()), format!("{value}\r\n")], "client {i}");
    }

    let mut observer = Conn::connect(server.resp, Duration::from_secs(5)).unwrap();
    assert_eq!(observer.connected_clients(), CLIENTS + 1);
    let metrics = server.http_get("/metrics");
    assert!(metrics.lines().any(|l| l == format!("meridian_connected_clients {}", CLIENTS + 1)), "{metrics}");

    drop(clients);
    let start = Instant::now();
    while observer.connected_clients() > 1 {
        assert!(start.elapsed() < Duration::from_secs(10), "closed clients still counted");
        std::thread::sleep(Duration::from_millis(50));
    }
}
