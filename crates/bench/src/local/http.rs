//! A node's JSON over HTTP/1.1, one request per connection: `/v1/cluster`, and creating and dropping
//! keyspaces under `/v1/keyspaces`. (The binary's `meridian ctl` client is in the binary crate, which this
//! crate cannot use.)

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long a GET may take, connecting included. A node under its CPU quota answers within a CFS period or
/// two; anything much slower means it is in trouble.
const GET_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a keyspace command may take: the node answers once its map shows the change, and gives up after
/// 100 manager ticks (10 s at the default tick).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(15);

/// The JSON body of a 2xx answer to `GET path`, or what went wrong.
pub(crate) fn get(addr: SocketAddr, path: &str) -> Result<Value, String> {
    request(addr, "GET", path, None, GET_TIMEOUT)
}

/// The JSON body of a 2xx answer to `POST path` with `body`, or what went wrong.
pub(crate) fn post(addr: SocketAddr, path: &str, body: &Value) -> Result<Value, String> {
    request(addr, "POST", path, Some(body), COMMAND_TIMEOUT)
}

/// The JSON body of a 2xx answer to `DELETE path`, or what went wrong.
pub(crate) fn delete(addr: SocketAddr, path: &str) -> Result<Value, String> {
    request(addr, "DELETE", path, None, COMMAND_TIMEOUT)
}

fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&Value>,
    timeout: Duration,
) -> Result<Value, String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("{method} http://{addr}{path}: {what}: {e}");
    let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(|e| fail("cannot connect", &e))?;
    stream.set_read_timeout(Some(timeout)).map_err(|e| fail("socket", &e))?;
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| fail("send", &e))?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).map_err(|e| fail("receive", &e))?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response.split_once("\r\n\r\n").ok_or_else(|| fail("answer", &"no HTTP header"))?;
    let status: u16 = head.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| fail("answer", &head))?;
    if !(200..300).contains(&status) {
        return Err(fail(&format!("HTTP {status}"), &body));
    }
    serde_json::from_str(body).map_err(|e| fail("JSON", &e))
}
