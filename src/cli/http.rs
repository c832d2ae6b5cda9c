//! A small blocking HTTP/1.1 client for talking to a node's HTTP port (`meridian ctl`, `server --join`): one
//! request per connection, JSON in and out. Enough for an admin tool; not a general client.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How long one request may take, connecting included.
const TIMEOUT: Duration = Duration::from_secs(10);

/// A node's HTTP API at `addr` (host:port), and the token its requests carry (`--http-token-file`), if any.
pub struct Api<'a> {
    pub addr: &'a str,
    pub token: Option<&'a str>,
}

impl Api<'_> {
    /// `GET path`; the JSON body of a 2xx answer, or an error naming what went wrong.
    pub fn get(&self, path: &str) -> Result<Value, String> {
        self.request("GET", path, None)
    }

    /// `POST path` with a JSON body; the JSON body of a 2xx answer.
    pub fn post(&self, path: &str, body: &Value) -> Result<Value, String> {
        self.request("POST", path, Some(body))
    }

    /// `PUT path` with a JSON body; the JSON body of a 2xx answer.
    pub fn put(&self, path: &str, body: &Value) -> Result<Value, String> {
        self.request("PUT", path, Some(body))
    }

    /// `DELETE path`; the JSON body of a 2xx answer.
    pub fn delete(&self, path: &str) -> Result<Value, String> {
        self.request("DELETE", path, None)
    }

    fn request(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
        let authorization = self.token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
        request(self.addr, method, path, &authorization, body)
    }
}

fn request(addr: &str, method: &str, path: &str, authorization: &str, body: Option<&Value>) -> Result<Value, String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("{method} http://{addr}{path}: {what}: {e}");
    let target = addr.to_socket_addrs().map_err(|e| fail("bad address", &e))?.next().ok_or("no address")?;
    let mut stream = TcpStream::connect_timeout(&target, TIMEOUT).map_err(|e| fail("cannot connect", &e))?;
    stream.set_read_timeout(Some(TIMEOUT)).map_err(|e| fail("socket", &e))?;
    let body = body.map(Value::to_string).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{authorization}Connection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(body.as_bytes())).map_err(|e| fail("send", &e))?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).map_err(|e| fail("receive", &e))?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response.split_once("\r\n\r\n").ok_or_else(|| fail("answer", &"no HTTP header"))?;
    let status: u16 = head.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| fail("answer", &head))?;
    let json: Value = serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_string()));
    if !(200..300).contains(&status) {
        let why = json.get("error").and_then(Value::as_str).map_or_else(|| json.to_string(), str::to_string);
        return Err(fail(&format!("HTTP {status}"), &why));
    }
    Ok(json)
}
