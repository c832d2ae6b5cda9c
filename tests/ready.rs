//! A node serves clients only once it can: until it holds a cluster map (here: until a second of the three
//! manager voters is up), its RESP port refuses connections and `GET /ready` answers 503, while `GET /health` says
//! the process is up. Once it is ready, the first command a client sends is served, not turned away with
//! `-TRYAGAIN` as it was when the port opened at start.

mod support;

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use support::resp::{bulk, Conn, Resp};
use support::{free_port, Server};

#[test]
fn a_node_opens_its_client_port_once_it_can_serve() {
    let dir = tempfile::tempdir().unwrap();
    let ips: Vec<String> = (1..=3).map(|i| format!("127.0.0.{i}")).collect();
    let peers: Vec<SocketAddr> = ips.iter().map(|ip| format!("{ip}:{}", free_port(ip)).parse().unwrap()).collect();
    let list: Vec<String> = peers.iter().enumerate().map(|(i, a)| format!("{}={a}", i + 1)).collect();
    let start = ["--peers".to_string(), list.join(",")];
    let launch = |i: usize| Server::launch(i as u32 + 1, &ips[i], peers[i], &start, dir.path());

    let first = launch(0);
    poll(|| TcpStream::connect(first.http).ok());
    let health = first.http_get("/health");
    assert!(health.contains("\"ok\""), "{health}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(first.http_get("/ready").contains("not ready"), "one voter of three cannot make a map");
    assert!(TcpStream::connect(first.resp).is_err(), "the client port is closed until the node serves");

    let _others: Vec<Server> = (1..3).map(launch).collect();
    poll(|| first.http_get("/ready").contains("\"ready\"").then_some(()));
    let mut conn = Conn::connect(first.resp, Duration::from_secs(5)).unwrap();
    assert_eq!(conn.cmd(&["SET", "k", "v"]).unwrap(), Resp::Simple("OK".into()), "served at once");
    assert_eq!(conn.cmd(&["GET", "k"]).unwrap(), bulk("v"));
}

/// What `f` gives first, trying every 50 ms for up to 20 s.
fn poll<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "gave up waiting");
        std::thread::sleep(Duration::from_millis(50));
    }
}
