//! RESP commands against one node, over a real socket.

use crate::resp_client::{encode, Client, Resp};
use crate::support::{single_kv, within, LIMITS};
use meridian_node::build_info;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test]
async fn strings_commands_behave_like_redis() {
    let node = single_kv().await;
    let mut c = Client::connect(node.resp_addr()).await;
    assert_eq!(c.cmd(&["PING"]).await, Resp::Simple("PONG".into()));
    assert_eq!(c.cmd(&["ping", "hi"]).await, Resp::bulk("hi"));
    assert_eq!(c.cmd(&["ECHO", "hello world"]).await, Resp::bulk("hello world"));
    assert_eq!(c.cmd(&["GET", "a"]).await, Resp::null());
    assert_eq!(c.cmd(&["SET", "a", "1"]).await, Resp::ok());
    assert_eq!(c.cmd(&["get", "a"]).await, Resp::bulk("1"));
    assert_eq!(c.cmd(&["SET", "a", "2", "NX"]).await, Resp::null());
    assert_eq!(c.cmd(&["SET", "b", "2", "XX"]).await, Resp::null());
    assert_eq!(c.cmd(&["SET", "b", "2", "nx"]).await, Resp::ok());
    assert_eq!(c.cmd(&["SET", "b", "3", "XX"]).await, Resp::ok());
    assert_eq!(c.cmd(&["GET", "b"]).await, Resp::bulk("3"));
    assert_eq!(c.cmd(&["EXISTS", "a", "b", "nope", "a"]).await, Resp::Int(3));
    assert_eq!(c.cmd(&["MSET", "c", "x", "d", "y"]).await, Resp::ok());
    let mget = c.cmd(&["MGET", "a", "nope", "d"]).await;
    assert_eq!(mget, Resp::Array(vec![Resp::bulk("1"), Resp::null(), Resp::bulk("y")]));
    assert_eq!(c.cmd(&["DEL", "a", "nope", "c"]).await, Resp::Int(2));
    assert_eq!(c.cmd(&["GET", "a"]).await, Resp::null());
    assert_eq!(c.cmd(&["SELECT", "0"]).await, Resp::ok());
    assert_eq!(c.cmd(&["SELECT", "16"]).await, Resp::error("ERR DB index is out of range"));
    let refused = Resp::error("ERR no administration here");
    assert_eq!(c.cmd(&["SELECT", "1"]).await, refused, "this core refuses to create db1");
    assert_eq!(c.cmd(&["SELECT", "-1"]).await, Resp::error("ERR DB index is out of range"));
    assert_eq!(c.cmd(&["SELECT", "x"]).await, Resp::error("ERR value is not an integer or out of range"));
    assert_eq!(c.cmd(&["GET", "d"]).await, Resp::bulk("y"), "a refused SELECT leaves the keyspace as it was");
    within("shutdown", node.shutdown()).await;
}

#[tokio::test]
async fn errors_are_worded_like_redis() {
    let node = single_kv().await;
    let mut c = Client::connect(node.resp_addr()).await;
    let unknown = c.cmd(&["XYZZY", "a", "b"]).await;
    assert_eq!(unknown, Resp::error("ERR unknown command 'XYZZY', with args beginning with: 'a' 'b' "));
    assert_eq!(c.cmd(&["GET"]).await, Resp::error("ERR wrong number of arguments for 'get' command"));
    assert_eq!(
        c.cmd(&["MSET", "k", "v", "odd"]).await,
        Resp::error("ERR wrong number of arguments for 'mset' command")
    );
    assert_eq!(c.cmd(&["SET", "k", "v", "GET", "GET"]).await, Resp::error("ERR syntax error"));
    assert_eq!(c.cmd(&["SET", "k", "v", "EX", "0"]).await, Resp::error("ERR invalid expire time in 'set' command"));
    assert_eq!(c.cmd(&["SET", "k", "v", "NX", "XX"]).await, Resp::error("ERR syntax error"));
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "x", "y"]).await,
        Resp::error("ERR unknown subcommand 'SET'. Try CONFIG HELP.")
    );
    assert_eq!(c.cmd(&["GET", ""]).await, Resp::error("ERR empty keys are not allowed"));
    within("shutdown", node.shutdown()).await;
}

#[tokio::test]
async fn introspection_answers_honestly() {
    let node = single_kv().await;
    let mut c = Client::connect(node.resp_addr()).await;
    let Resp::Int(count) = c.cmd(&["COMMAND", "COUNT"]).await else { panic!("COMMAND COUNT is not an integer") };
    let Resp::Array(all) = c.cmd(&["COMMAND"]).await else { panic!("COMMAND is not an array") };
    assert_eq!(all.len() as i64, count);
    assert_eq!(c.cmd(&["COMMAND", "DOCS"]).await, Resp::Array(vec![]));
    assert_eq!(c.cmd(&["CONFIG", "GET", "save"]).await, Resp::Array(vec![Resp::bulk("save"), Resp::bulk("")]));
    let appendonly = c.cmd(&["CONFIG", "GET", "appendonly"]).await;
    assert_eq!(appendonly, Resp::Array(vec![Resp::bulk("appendonly"), Resp::bulk("no")]));
    assert_eq!(c.cmd(&["CONFIG", "GET", "no-such-parameter"]).await, Resp::Array(vec![]));
    let bulk_max = LIMITS.max_value_bytes.to_string();
    let config = c.cmd(&["CONFIG", "GET", "proto-max-*"]).await;
    assert_eq!(config, Resp::Array(vec![Resp::bulk("proto-max-bulk-len"), Resp::bulk(&bulk_max)]));
    let maxclients = c.cmd(&["CONFIG", "GET", "maxclients"]).await;
    assert_eq!(maxclients, Resp::Array(vec![Resp::bulk("maxclients"), Resp::bulk("10000")]));
    let Resp::Bulk(Some(info)) = c.cmd(&["INFO"]).await else { panic!("INFO is not a bulk string") };
    let info = String::from_utf8(info).unwrap();
    assert!(info.starts_with("# Server\r\nredis_version:7.0.15\r\n"), "{info}");
    assert!(info.contains(&format!("tcp_port:{}\r\n", node.resp_addr().port())), "{info}");
    assert!(info.contains("node_id:1\r\n"), "{info}");
    assert!(info.contains(&format!("process_id:{}\r\n", std::process::id())), "{info}");
    assert!(info.contains("uptime_in_seconds:") && info.contains("build_profile:"), "{info}");
    let commit =
        format!("meridian_git_sha1:{}\r\nmeridian_git_dirty:{}\r\n", build_info::GIT_SHA1, build_info::GIT_DIRTY);
    assert!(info.contains(&commit), "{info}");
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]).await, Resp::null());
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "bench-1"]).await, Resp::ok());
    assert_eq!(c.cmd(&["client", "getname"]).await, Resp::bulk("bench-1"));
    within("shutdown", node.shutdown()).await;
}

/// HELLO switches a connection between RESP2 and RESP3; replies after it (and its own) come in the protocol it
/// chose, other connections are unaffected, and CLIENT ID tells connections apart.
#[tokio::test]
async fn hello_switches_the_protocol_of_its_connection_only() {
    let node = single_kv().await;
    let mut c = Client::connect(node.resp_addr()).await;
    let mut other = Client::connect(node.resp_addr()).await;
    let Resp::Int(id) = c.cmd(&["CLIENT", "ID"]).await else { panic!("CLIENT ID is not an integer") };
    assert_ne!(other.cmd(&["CLIENT", "ID"]).await, Resp::Int(id), "each connection has its own id");
    let Resp::Map(hello) = c.cmd(&["HELLO", "3", "SETNAME", "app"]).await else { panic!("HELLO 3 is not a map") };
    assert!(hello.contains(&(Resp::bulk("proto"), Resp::Int(3))), "{hello:?}");
    assert!(hello.contains(&(Resp::bulk("id"), Resp::Int(id))), "{hello:?}");
    assert_eq!(c.cmd(&["GET", "missing"]).await, Resp::Null);
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]).await, Resp::bulk("app"));
    let config = c.cmd(&["CONFIG", "GET", "databases"]).await;
    assert_eq!(config, Resp::Map(vec![(Resp::bulk("databases"), Resp::bulk("16"))]));
    assert_eq!(other.cmd(&["GET", "missing"]).await, Resp::null(), "still RESP2");
    let Resp::Array(hello) = c.cmd(&["HELLO", "2"]).await else { panic!("HELLO 2 is not a flat array") };
    assert_eq!(hello.len(), 18);
    let version = hello.iter().position(|f| *f == Resp::bulk("version")).map(|i| &hello[i + 1]);
    assert_eq!(version, Some(&Resp::bulk("7.0.15")), "the Redis version clients pick features by, as INFO's");
    assert_eq!(c.cmd(&["GET", "missing"]).await, Resp::null());
    assert_eq!(c.cmd(&["HELLO", "4"]).await, Resp::error("NOPROTO unsupported protocol version"));
    let unknown_user = c.cmd(&["HELLO", "3", "AUTH", "u", "p"]).await;
    assert!(matches!(&unknown_user, Resp::Error(e) if e.starts_with("WRONGPASS")), "{unknown_user:?}");
    assert_eq!(c.cmd(&["GET", "missing"]).await, Resp::null(), "a refused HELLO leaves the protocol as it was");
    within("shutdown", node.shutdown()).await;
}

#[tokio::test]
async fn inline_commands_and_quit() {
    let node = single_kv().await;
    let mut c = Client::connect(node.resp_addr()).await;
    c.send_raw(b"SET greeting \"hello world\"\r\nGET greeting\r\n").await;
    assert_eq!(c.read().await, Resp::ok());
    assert_eq!(c.read().await, Resp::bulk("hello world"));
    assert_eq!(c.cmd(&["QUIT"]).await, Resp::ok());
    assert!(c.is_closed().await);
    within("shutdown", node.shutdown()).await;
}

#[tokio::test]
async fn pipelined_replies_come_back_in_order() {
    let node = single_kv().await;
    let mut c = Client::connect(node.resp_addr()).await;
    let mut batch = Vec::new();
    for i in 0..50 {
        batch.extend(encode(&["SET", &format!("k{i}"), &format!("v{i}")]));
        batch.extend(encode(&["GET", &format!("k{i}")]));
    }
    c.send_raw(&batch).await;
    for i in 0..50 {
        assert_eq!(c.read().await, Resp::ok(), "reply to SET k{i}");
        assert_eq!(c.read().await, Resp::bulk(&format!("v{i}")), "reply to GET k{i}");
    }
    within("shutdown", node.shutdown()).await;
}

/// A client that reads nothing until it has sent a long pipeline: the replies fill both sockets' buffers, so
/// the server's end-of-turn write cannot take them and the connection writes the rest itself as the client
/// reads. Every reply comes back once, in order. On two workers, so the outbox and the connection may write from
/// different threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_late_gets_every_reply_in_order() {
    let node = single_kv().await;
    let mut c = Client::connect(node.resp_addr()).await;
    let values: Vec<String> = ["a", "b", "c", "d"].iter().map(|v| v.repeat(LIMITS.max_value_bytes)).collect();
    for (i, value) in values.iter().enumerate() {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), value]).await, Resp::ok());
    }
    // About 16 MB of replies: more than loopback's socket buffers hold.
    let (mut requests, mut expected) = (Vec::new(), Vec::new());
    for i in 0..60_000 {
        requests.extend(encode(&["GET", &format!("k{}", i % 4)]));
        expected.extend(format!("${}\r\n{}\r\n", LIMITS.max_value_bytes, values[i % 4]).into_bytes());
    }
    let (mut reader, mut writer) = TcpStream::connect(node.resp_addr()).await.unwrap().into_split();
    let sending = tokio::spawn(async move { writer.write_all(&requests).await.map(|()| writer) });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut got = vec![0; expected.len()];
    within("read every reply", reader.read_exact(&mut got)).await.unwrap();
    assert!(got == expected, "every reply once, in order");
    within("send the pipeline", sending).await.unwrap().unwrap();
    within("shutdown", node.shutdown()).await;
}

#[tokio::test]
async fn a_malformed_frame_closes_only_its_connection() {
    let node = single_kv().await;
    let mut good = Client::connect(node.resp_addr()).await;
    let mut bad = Client::connect(node.resp_addr()).await;
    bad.send_raw(b"*1\r\n$x\r\n").await;
    assert_eq!(bad.read().await, Resp::error("ERR Protocol error: invalid bulk length"));
    assert!(bad.is_closed().await);
    assert_eq!(good.cmd(&["PING"]).await, Resp::Simple("PONG".into()));
    within("shutdown", node.shutdown()).await;
}

#[tokio::test]
async fn oversized_requests_are_refused_and_write_nothing() {
    let node = single_kv().await;
    let mut c = Client::connect(node.resp_addr()).await;
    let big = "v".repeat(LIMITS.max_value_bytes + 1);
    let refused = c.cmd(&["SET", "k", &big]).await;
    assert_eq!(refused, Resp::error("ERR argument is 257 bytes; the limit is 256"));
    let refused = c.cmd(&["MSET", "small", "ok", "k", &big]).await;
    assert_eq!(refused, Resp::error("ERR argument is 257 bytes; the limit is 256"));
    assert_eq!(c.cmd(&["MGET", "k", "small"]).await, Resp::Array(vec![Resp::null(), Resp::null()]));

    // Far beyond the limit the parser drops the value as it arrives; the connection goes on.
    let huge = "v".repeat(LIMITS.max_value_bytes * 100);
    c.send_raw(&encode(&["SET", "k", &huge])).await;
    assert_eq!(c.read().await, Resp::error("ERR argument is 25600 bytes; the limit is 256"));
    assert_eq!(c.cmd(&["GET", "k"]).await, Resp::null());
    within("shutdown", node.shutdown()).await;
}
