//! memcached's text protocol: `set key 0 0 len\r\nvalue\r\n` answered `STORED`, `get key` answered `VALUE key
//! flags len\r\nvalue\r\nEND` or, for a key not there, `END`. Replies are read as RESP's (`STORED` a simple
//! string, a value a bulk string, `END` alone a nil, `ERROR`/`CLIENT_ERROR`/`SERVER_ERROR` an error), so a
//! record is judged as a RESP string is. An item is one value, so only records of one field are sent this way
//! (`YcsbBench::validate`). Like the RESP parser, this one never consumes a partial reply.

use super::protocol::Reply;
use super::resp::line;
use std::io::Write as _;

/// Appends a `set` of `value` at `key`, with no flags and no expiry.
pub(super) fn set(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    out.extend_from_slice(b"set ");
    out.extend_from_slice(key);
    write!(out, " 0 0 {}\r\n", value.len()).expect("writing to a Vec cannot fail");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Appends a `get` of one key.
pub(super) fn get(out: &mut Vec<u8>, key: &[u8]) {
    out.extend_from_slice(b"get ");
    out.extend_from_slice(key);
    out.extend_from_slice(b"\r\n");
}

/// The first complete reply in `buf` and its length in bytes; `None` if `buf` holds only part of one.
pub(super) fn parse(buf: &[u8]) -> Result<Option<(Reply, usize)>, String> {
    let Some((line, body)) = line(buf, 0) else { return Ok(None) };
    let text = std::str::from_utf8(line).map_err(|_| "a reply line that is not UTF-8")?;
    match text.split(' ').next().unwrap_or_default() {
        "STORED" => Ok(Some((Reply::Simple, body))),
        "END" => Ok(Some((Reply::Bulk(None), body))),
        "VALUE" => value(buf, text, body),
        // The last three never answer a set or a get, but are memcached's refusals all the same.
        "ERROR" | "CLIENT_ERROR" | "SERVER_ERROR" | "NOT_STORED" | "EXISTS" | "NOT_FOUND" => {
            Ok(Some((Reply::Error(text.to_string()), body)))
        }
        _ => Err(format!("unexpected reply {text:?}")),
    }
}

/// A get's hit: after `header` (`VALUE key flags len [cas]`), `len` bytes, CRLF, and the `END` of the one key
/// asked for.
fn value(buf: &[u8], header: &str, body: usize) -> Result<Option<(Reply, usize)>, String> {
    let len: usize =
        header.split(' ').nth(3).and_then(|n| n.parse().ok()).ok_or_else(|| format!("a bad VALUE line {header:?}"))?;
    let end = body + len;
    if buf.len() < end + 2 {
        return Ok(None);
    }
    if &buf[end..end + 2] != b"\r\n" {
        return Err("a value not ended by CRLF".into());
    }
    match line(buf, end + 2) {
        None => Ok(None),
        Some((b"END", next)) => Ok(Some((Reply::Bulk(Some(len)), next))),
        Some((other, _)) => Err(format!("expected END after one value, got {:?}", String::from_utf8_lossy(other))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ycsb::protocol::tests::parses_whole_or_not_at_all;
    use crate::ycsb::{run, Protocol, Workload, YcsbBench};
    use std::collections::HashMap;
    use std::io::{BufRead, BufReader, BufWriter, Read};
    use std::net::{SocketAddr, TcpListener, TcpStream};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    type Items = Arc<Mutex<HashMap<Vec<u8>, Vec<u8>>>>;

    #[test]
    fn commands_are_memcached_text_lines() {
        let mut out = Vec::new();
        set(&mut out, b"user1", b"abc");
        get(&mut out, b"user1");
        assert_eq!(out, b"set user1 0 0 3\r\nabc\r\nget user1\r\n");
    }

    #[test]
    fn replies_parse_whole_or_not_at_all() {
        let stream = b"STORED\r\nVALUE user1 0 5\r\nhe\r\no\r\nEND\r\nEND\r\nVALUE k 3 1 99\r\nx\r\nEND\r\n\
            SERVER_ERROR out of memory storing object\r\nERROR\r\n";
        let expected = [
            Reply::Simple,
            Reply::Bulk(Some(5)),
            Reply::Bulk(None),
            Reply::Bulk(Some(1)),
            Reply::Error("SERVER_ERROR out of memory storing object".into()),
            Reply::Error("ERROR".into()),
        ];
        parses_whole_or_not_at_all(Protocol::Memcache, stream, &expected);
        assert!(parse(b"HUH\r\n").is_err());
        assert!(parse(b"VALUE k 0 x\r\n").is_err());
        assert!(parse(b"VALUE k 0 2\r\nabcd\r\nEND\r\n").is_err());
        assert!(parse(b"VALUE k 0 1\r\na\r\nVALUE j 0 1\r\nb\r\nEND\r\n").is_err());
    }

    /// A memcached of `set` and `get` on loopback, a thread per connection, keeping its items in `items` (shared
    /// between fakes, as a cluster's nodes share their data); returns its address and a count of the
    /// connections it accepted.
    fn fake_memcached(items: &Items) -> (SocketAddr, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let (items, accepted) = (items.clone(), connections.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                accepted.fetch_add(1, Ordering::Relaxed);
                let items = items.clone();
                std::thread::spawn(move || serve(stream.unwrap(), &items));
            }
        });
        (addr, connections)
    }

    fn serve(stream: TcpStream, items: &Items) {
        stream.set_nodelay(true).unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut writer = BufWriter::new(stream);
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 0 {
            let words: Vec<&str> = line.split_whitespace().collect();
            let reply = match words[..] {
                ["set", key, _flags, _expiry, len] => {
                    let mut value = vec![0; len.parse::<usize>().unwrap() + 2];
                    reader.read_exact(&mut value).unwrap();
                    value.truncate(value.len() - 2);
                    items.lock().unwrap().insert(key.as_bytes().to_vec(), value);
                    b"STORED\r\n".to_vec()
                }
                ["get", key] => match items.lock().unwrap().get(key.as_bytes()) {
                    Some(v) => [format!("VALUE {key} 0 {}\r\n", v.len()).as_bytes(), v, b"\r\nEND\r\n"].concat(),
                    None => b"END\r\n".to_vec(),
                },
                _ => b"ERROR\r\n".to_vec(),
            };
            writer.write_all(&reply).unwrap();
            // Replies to a pipeline go out together, once every command read so far is answered.
            if reader.buffer().is_empty() && writer.flush().is_err() {
                break;
            }
            line.clear();
        }
    }

    fn bench(addrs: Vec<SocketAddr>, workload: Workload) -> YcsbBench {
        YcsbBench {
            addrs,
            protocol: Protocol::Memcache,
            db: None,
            workload,
            load: true,
            run: true,
            pipeline: 4,
            threads: 1,
            tls: None,
        }
    }

    #[test]
    fn a_workload_over_memcache_stores_every_record_and_reads_them_back_through_every_server() {
        let items = Items::default();
        let ((one, to_one), (two, to_two)) = (fake_memcached(&items), fake_memcached(&items));
        let mut w = Workload::preset('f').unwrap();
        (w.record_count, w.operation_count, w.thread_count) = (300, Some(2000), 4);
        let report = run(&bench(vec![one, two], w), &mut |_| {}).unwrap();

        let (load, run) = (&report.phases[0], &report.phases[1]);
        assert_eq!((load.ops[0].op, load.operations, load.errors), ("INSERT", 300, 0), "{load:?}");
        let items = items.lock().unwrap();
        assert_eq!(items.len(), 300);
        assert!(items.values().all(|v| v.len() == 100));
        let ops: Vec<(&str, u64)> = run.ops.iter().map(|o| (o.op, o.count)).collect();
        assert_eq!((run.operations, run.errors), (2000, 0), "{ops:?}");
        assert_eq!(ops.iter().map(|o| o.0).collect::<Vec<_>>(), ["READ", "READ-MODIFY-WRITE"]);
        assert!(run.ops.iter().all(|o| o.missing == 0), "every record loaded is found: {:?}", run.ops);
        // Two connections to each server, per phase.
        assert_eq!((to_one.load(Ordering::Relaxed), to_two.load(Ordering::Relaxed)), (4, 4));
        assert_eq!(report.addrs, [one.to_string(), two.to_string()]);
    }

    #[test]
    fn records_of_more_than_one_field_and_servers_without_a_connection_are_refused() {
        // Refused before connecting: nothing listens at this address.
        let addr = SocketAddr::from(([127, 0, 0, 1], 1));
        let a = Workload { operation_count: Some(10), ..Workload::preset('a').unwrap() };
        let hashes = Workload { field_count: 3, ..a.clone() };
        let refused = run(&bench(vec![addr], hashes), &mut |_| {}).unwrap_err().to_string();
        assert!(refused.contains("(fieldcount=1, --field-count 1), not 3"), "{refused}");
        let few = Workload { thread_count: 1, ..a };
        let refused = run(&bench(vec![addr, addr], few), &mut |_| {}).unwrap_err().to_string();
        assert!(
            refused.contains("--clients (1) must be at least the number of --addr servers (2), so that"),
            "{refused}"
        );
    }
}
