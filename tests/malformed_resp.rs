//! Malformed and over-limit input over real sockets, against a `meridian server` process: a protocol error
//! gets `-ERR Protocol error: …` and closes that connection only, an over-limit key or value gets an `-ERR`
//! and the connection goes on, and in neither case is any part of the offending command applied.

mod support;

use std::io;
use std::time::{Duration, Instant};
use support::resp::{Conn, Resp};
use support::Server;

const TIMEOUT: Duration = Duration::from_secs(10);
/// The limits the suite's server runs with, small so over-limit frames stay small.
const MAX_KEY: usize = 64;
const MAX_VALUE: usize = 1024;
/// The parser's longest inline command or header line (Redis' PROTO_INLINE_MAX_SIZE).
const LINE_MAX: usize = 64 << 10;

fn server(dir: &std::path::Path) -> Server {
    Server::single(dir, &["--max-key-bytes", "64", "--max-value-bytes", "1kb"])
}

fn connect(server: &Server) -> Conn {
    Conn::connect(server.resp, TIMEOUT).expect("connect")
}

fn error(text: &str) -> Resp {
    Resp::Error(text.to_string())
}

/// A multibulk frame, as client libraries encode commands.
fn frame(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend(format!("${}\r\n", arg.len()).as_bytes());
        out.extend(*arg);
        out.extend(b"\r\n");
    }
    out
}

/// The server has closed `conn`: a read finds the end of the stream (or a reset) rather than a reply.
fn assert_closed(conn: &mut Conn, what: &str) {
    match conn.read() {
        Err(e) if matches!(e.kind(), io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset) => {}
        other => panic!("{what}: the connection is still open: {other:?}"),
    }
}

/// `keys` hold nothing: the refused command wrote none of them.
fn assert_unwritten(conn: &mut Conn, keys: &[&str], what: &str) {
    for key in keys {
        assert_eq!(conn.cmd(&["GET", key]).unwrap(), Resp::Bulk(None), "{what}: {key} was written");
    }
}

struct Malformed {
    what: &'static str,
    bytes: Vec<u8>,
    /// What follows `ERR Protocol error: `.
    error: &'static str,
    /// Keys a command inside the frame would have written.
    unwritten: &'static [&'static str],
}

fn malformed_frames() -> Vec<Malformed> {
    let mut missing_crlf = frame(&[b"SET", b"crlf", b"v"]);
    missing_crlf.truncate(missing_crlf.len() - 2);
    missing_crlf.extend(b"XY");
    let mut mset_with_an_integer = b"*5\r\n".to_vec();
    mset_with_an_integer.extend(b"$4\r\nMSET\r\n$6\r\nmset-a\r\n$1\r\n1\r\n$6\r\nmset-b\r\n:2\r\n");
    // Exactly one byte over, so the server has read all of it when it refuses and closes.
    let long_inline = [b"SET long ".as_slice(), &vec![b'v'; LINE_MAX + 1 - 9]].concat();
    vec![
        Malformed {
            what: "non-numeric multibulk length",
            bytes: b"*abc\r\n".to_vec(),
            error: "invalid multibulk length",
            unwritten: &[],
        },
        Malformed {
            what: "multibulk length over a million",
            bytes: b"*99999999\r\n".to_vec(),
            error: "invalid multibulk length",
            unwritten: &[],
        },
        Malformed {
            what: "negative bulk length",
            bytes: b"*3\r\n$3\r\nSET\r\n$3\r\nneg\r\n$-5\r\n".to_vec(),
            error: "invalid bulk length",
            unwritten: &["neg"],
        },
        Malformed {
            what: "bulk length over 512 MiB",
            bytes: b"*3\r\n$3\r\nSET\r\n$4\r\nhuge\r\n$99999999999\r\n".to_vec(),
            error: "invalid bulk length",
            unwritten: &["huge"],
        },
        Malformed {
            what: "bulk string without its CRLF",
            bytes: missing_crlf,
            error: "expected CRLF after a bulk string",
            unwritten: &["crlf"],
        },
        Malformed {
            what: "an integer where a bulk string belongs, inside an MSET",
            bytes: mset_with_an_integer,
            error: "expected '$', got ':'",
            unwritten: &["mset-a", "mset-b"],
        },
        Malformed {
            what: "inline command over 64 KiB",
            bytes: long_inline,
            error: "too big inline request",
            unwritten: &["long"],
        },
        Malformed {
            what: "unbalanced quotes",
            bytes: b"SET quoted \"v\r\n".to_vec(),
            error: "unbalanced quotes in request",
            unwritten: &["quoted"],
        },
        Malformed {
            what: "binary garbage after a star",
            bytes: b"*\x00\xff\xfe\x80\r\n".to_vec(),
            error: "invalid multibulk length",
            unwritten: &[],
        },
        Malformed {
            what: "binary garbage with a stray quote",
            bytes: b"\x01\x02\"\xfe\xff\n".to_vec(),
            error: "unbalanced quotes in request",
            unwritten: &[],
        },
    ]
}

/// Sends one malformed frame on a fresh connection while another, opened before it, looks on.
fn refuse(server: &Server, case: &Malformed) {
    let mut bystander = connect(server);
    let mut bad = connect(server);
    bad.send_raw(&case.bytes).unwrap();
    let want = error(&format!("ERR Protocol error: {}", case.error));
    assert_eq!(bad.read().unwrap(), want, "{}", case.what);
    assert_closed(&mut bad, case.what);
    assert_eq!(bystander.cmd(&["PING"]).unwrap(), Resp::Simple("PONG".into()), "{}: bystander", case.what);
    assert_unwritten(&mut bystander, case.unwritten, case.what);
}

#[test]
fn each_malformed_frame_closes_only_its_connection_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    for case in malformed_frames() {
        refuse(&server, &case);
    }
}

#[test]
fn valid_commands_pipelined_before_a_malformed_frame_are_answered_and_applied() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let mut bystander = connect(&server);
    let mut c = connect(&server);
    let mut pipeline = [frame(&[b"SET", b"p1", b"a"]), frame(&[b"SET", b"p2", b"b"])].concat();
    pipeline.extend(b"*3\r\n$3\r\nSET\r\n$2\r\np3\r\n$x\r\n");
    c.send_raw(&pipeline).unwrap();
    assert_eq!(c.read().unwrap(), Resp::Simple("OK".into()));
    assert_eq!(c.read().unwrap(), Resp::Simple("OK".into()));
    assert_eq!(c.read().unwrap(), error("ERR Protocol error: invalid bulk length"));
    assert_closed(&mut c, "after the pipeline");
    assert_eq!(bystander.cmd(&["GET", "p1"]).unwrap(), Resp::Bulk(Some(b"a".to_vec())));
    assert_eq!(bystander.cmd(&["GET", "p2"]).unwrap(), Resp::Bulk(Some(b"b".to_vec())));
    assert_unwritten(&mut bystander, &["p3"], "the malformed SET");
}

/// Sends `bytes` one write per byte, so the server sees the frame arrive in many pieces.
fn trickle(conn: &mut Conn, bytes: &[u8]) {
    for b in bytes {
        conn.send_raw(std::slice::from_ref(b)).unwrap();
    }
}

#[test]
fn frames_split_across_many_writes_parse_as_whole_ones() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let mut c = connect(&server);
    trickle(&mut c, &frame(&[b"SET", b"split", b"across writes"]));
    assert_eq!(c.read().unwrap(), Resp::Simple("OK".into()));
    trickle(&mut c, b"GET split\r\n");
    assert_eq!(c.read().unwrap(), Resp::Bulk(Some(b"across writes".to_vec())));
    let mut bystander = connect(&server);
    trickle(&mut c, b"*2\r\n$3\r\nGET\r\n$5\r\nsplit\r\n*3\r\n$3\r\nSET\r\n$5\r\nsplit\r\n$1\r\nxYZ");
    assert_eq!(c.read().unwrap(), Resp::Bulk(Some(b"across writes".to_vec())));
    assert_eq!(c.read().unwrap(), error("ERR Protocol error: expected CRLF after a bulk string"));
    assert_closed(&mut c, "after the trickled malformed frame");
    let unchanged = bystander.cmd(&["GET", "split"]).unwrap();
    assert_eq!(unchanged, Resp::Bulk(Some(b"across writes".to_vec())), "the malformed SET wrote nothing");
}

#[test]
fn garbage_without_a_star_is_an_unknown_command_not_a_protocol_error() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let mut c = connect(&server);
    c.send_raw(b"\x00\x01\xfe\xff\r\n").unwrap();
    let Resp::Error(e) = c.read().unwrap() else { panic!("garbage got a non-error reply") };
    assert!(e.starts_with("ERR unknown command"), "{e}");
    assert_eq!(c.cmd(&["PING"]).unwrap(), Resp::Simple("PONG".into()), "the connection goes on, as in Redis");
}

#[test]
fn over_limit_keys_and_values_are_refused_and_the_connection_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let mut c = connect(&server);
    let long_key = "k".repeat(MAX_KEY + 1);
    let refused = c.cmd(&["SET", &long_key, "v"]).unwrap();
    assert_eq!(refused, error(&format!("ERR key is {} bytes; the limit is {MAX_KEY}", MAX_KEY + 1)));
    assert_eq!(c.cmd(&["GET", &long_key]).unwrap(), error(&format!("ERR key is 65 bytes; the limit is {MAX_KEY}")));

    let over = "v".repeat(MAX_VALUE + 1);
    let refused = c.cmd(&["SET", "big", &over]).unwrap();
    assert_eq!(refused, error(&format!("ERR argument is {} bytes; the limit is {MAX_VALUE}", MAX_VALUE + 1)));
    let refused = c.cmd(&["MSET", "small", "ok", "big", &over]).unwrap();
    assert_eq!(refused, error(&format!("ERR argument is {} bytes; the limit is {MAX_VALUE}", MAX_VALUE + 1)));
    // Far over the limit: the server drops the value as it arrives rather than holding 4 MiB of it.
    let huge = vec![b'v'; 4 << 20];
    let refused = c.cmd(&[b"SET".as_slice(), b"big", &huge]).unwrap();
    assert_eq!(refused, error(&format!("ERR argument is {} bytes; the limit is {MAX_VALUE}", 4 << 20)));

    assert_eq!(c.cmd(&["SET", "fits", &"v".repeat(MAX_VALUE)]).unwrap(), Resp::Simple("OK".into()));
    assert_unwritten(&mut c, &["big", "small"], "over-limit commands");
}

#[test]
fn a_pipeline_deeper_than_max_pipeline_is_served_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::single(dir.path(), &["--max-pipeline", "1"]);
    let mut c = connect(&server);
    let commands: Vec<Vec<u8>> = (0..200).map(|i| frame(&[b"ECHO", i.to_string().as_bytes()])).collect();
    c.send_raw(&commands.concat()).unwrap();
    for i in 0..200 {
        assert_eq!(c.read().unwrap(), Resp::Bulk(Some(i.to_string().into_bytes())), "reply {i}");
    }
}

/// Two connections that both answer PING. The readiness probe's connection may still be closing on the
/// server when the test starts, so a refusal is retried for a while.
fn two_admitted(server: &Server) -> (Conn, Conn) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let mut first = connect(server);
        let mut second = connect(server);
        let pong = Resp::Simple("PONG".into());
        if first.cmd(&["PING"]).ok() == Some(pong.clone()) && second.cmd(&["PING"]).ok() == Some(pong) {
            return (first, second);
        }
        assert!(Instant::now() < deadline, "two connections were never both admitted");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn max_connections_refuses_the_next_connection_as_redis_does() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::single(dir.path(), &["--max-connections", "2"]);
    let (mut first, mut second) = two_admitted(&server);
    let mut third = connect(&server);
    assert_eq!(third.read().unwrap(), error("ERR max number of clients reached"));
    assert_closed(&mut third, "the connection past the limit");
    assert_eq!(first.cmd(&["SET", "k", "v"]).unwrap(), Resp::Simple("OK".into()));
    assert_eq!(second.cmd(&["GET", "k"]).unwrap(), Resp::Bulk(Some(b"v".to_vec())));
    drop(first);
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let mut again = connect(&server);
        match again.cmd(&["PING"]) {
            Ok(Resp::Simple(pong)) if pong == "PONG" => break,
            other => assert!(Instant::now() < deadline, "a closed connection's slot was never freed: {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
