//! `GET` of a node's JSON over HTTP/1.1, one request per connection: all the bench asks of the HTTP port is
//! `/v1/cluster`. (The binary's `meridian ctl` client is in the binary crate, which this crate cannot use.)

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long one request may take, connecting included. A node under its CPU quota answers within a CFS
/// period or two; anything much slower means it is in trouble.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The JSON body of a 2xx answer to `GET path`, or what went wrong.
pub(super) fn get(addr: SocketAddr, path: &str) -> Result<Value, String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("GET http://{addr}{path}: {what}: {e}");
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(|e| fail("cannot connect", &e))?;
    stream.set_read_timeout(Some(TIMEOUT)).map_err(|e| fail("socket", &e))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").map_err(|e| fail("send", &e))?;
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
