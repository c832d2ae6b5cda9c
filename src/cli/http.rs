//! A small blocking HTTP/1.1 client for talking to a node's HTTP port (`meridian ctl`, `server --join`): one
//! request per connection, JSON in and out, over TLS (rustls) when the port is HTTPS. Enough for an admin tool;
//! not a general client.

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};
use serde_json::Value;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How long one request may take, connecting included.
const TIMEOUT: Duration = Duration::from_secs(10);

/// A node's HTTP API: where it is, the token its requests carry (`--http-token-file`), if any, and the TLS
/// configuration to reach it with if it is HTTPS.
pub struct Api {
    addr: String,
    token: Option<String>,
    tls: Option<Arc<ClientConfig>>,
}

/// How a client reaches HTTPS ports: the CA it checks them against, and its own certificate and key, if any
/// (`meridian ctl --cacert --cert --key`).
#[derive(Clone, Copy, Default)]
pub struct TlsFiles<'a> {
    pub ca: Option<&'a Path>,
    pub identity: Option<(&'a Path, &'a Path)>,
}

impl Api {
    /// The API at `address`: `HOST:PORT`, `http://HOST:PORT`, or `https://HOST:PORT`. It is HTTPS with a scheme
    /// that says so or with a CA file (which HTTPS needs: the server's certificate is checked against it).
    pub fn new(address: &str, token: Option<String>, files: TlsFiles) -> Result<Api, String> {
        let (https, addr) = match address.split_once("://") {
            Some(("https", addr)) => (true, addr),
            Some(("http", addr)) => (false, addr),
            Some((scheme, _)) => return Err(format!("{address}: {scheme}:// is not http:// or https://")),
            None => (files.ca.is_some(), address),
        };
        let tls = match (https, files.ca) {
            (false, None) if files.identity.is_some() => {
                return Err(format!("{address}: a client certificate is for HTTPS, which needs --cacert"))
            }
            (false, Some(_)) => return Err(format!("{address}: --cacert is for https://, not http://")),
            (false, None) => None,
            (true, None) => return Err(format!("{address}: https needs the CA to check the node against (--cacert)")),
            (true, Some(ca)) => {
                let config = meridian_node::client_config(ca, files.identity).map_err(|e| e.to_string())?;
                Some(Arc::new(config))
            }
        };
        Ok(Api { addr: addr.trim_end_matches('/').to_string(), token, tls })
    }

    /// `HOST:PORT`, as the API was given.
    pub fn addr(&self) -> &str {
        &self.addr
    }

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
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let fail =
            |what: &str, e: &dyn std::fmt::Display| format!("{method} {scheme}://{}{path}: {what}: {e}", self.addr);
        let authorization = self.token.as_ref().map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
        let body = body.map(Value::to_string).unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n{authorization}Connection: close\r\nContent-Type: \
             application/json\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        let response = self.exchange(&[head.as_bytes(), body.as_bytes()]).map_err(|(what, e)| fail(what, &e))?;
        answer(&response).map_err(|(what, e)| fail(&what, &e))
    }

    /// Sends `request` on a new connection and reads the answer until the server closes it.
    fn exchange(&self, request: &[&[u8]]) -> Result<Vec<u8>, (&'static str, io::Error)> {
        let target = self.addr.to_socket_addrs().map_err(|e| ("bad address", e))?.next();
        let target = target.ok_or_else(|| ("bad address", io::Error::other("it resolves to nothing")))?;
        let stream = TcpStream::connect_timeout(&target, TIMEOUT).map_err(|e| ("cannot connect", e))?;
        stream.set_read_timeout(Some(TIMEOUT)).map_err(|e| ("socket", e))?;
        let mut response = Vec::new();
        let Some(tls) = &self.tls else {
            return send_and_read(stream, request, &mut response).map(|()| response);
        };
        let host = self.addr.rsplit_once(':').map_or(self.addr.as_str(), |(host, _)| host);
        let name = ServerName::try_from(host.trim_matches(['[', ']']).to_string())
            .map_err(|e| ("bad address", io::Error::other(e)))?;
        let connection = ClientConnection::new(tls.clone(), name).map_err(|e| ("TLS", io::Error::other(e)))?;
        send_and_read(StreamOwned::new(connection, stream), request, &mut response).map(|()| response)
    }
}

fn send_and_read(
    mut stream: impl Read + Write,
    request: &[&[u8]],
    response: &mut Vec<u8>,
) -> Result<(), (&'static str, io::Error)> {
    request.iter().try_for_each(|part| stream.write_all(part)).map_err(|e| ("send", e))?;
    stream.flush().map_err(|e| ("send", e))?;
    stream.read_to_end(response).map(drop).map_err(|e| ("receive", e))
}

/// The JSON body of a 2xx answer, or the error the node gave.
fn answer(response: &[u8]) -> Result<Value, (String, String)> {
    // A TLS alert record: the port is HTTPS and took the request for a broken handshake.
    if response.starts_with(&[0x15, 0x03]) {
        return Err(("answer".into(), "the port speaks TLS: give the address as https:// with --cacert".into()));
    }
    let response = String::from_utf8_lossy(response);
    let (head, body) = response.split_once("\r\n\r\n").ok_or(("answer".into(), "no HTTP header".into()))?;
    let status: u16 =
        head.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| ("answer".into(), head.to_string()))?;
    let json: Value = serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_string()));
    if !(200..300).contains(&status) {
        let why = json.get("error").and_then(Value::as_str).map_or_else(|| json.to_string(), str::to_string);
        return Err((format!("HTTP {status}"), why));
    }
    Ok(json)
}
