//! A raw RESP client: writes bytes, reads replies with its own small parser, so the tests see exactly
//! what the server sends.

use crate::support::within;
use bytes::{Buf, BytesMut};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resp {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Resp>),
    /// RESP3's `_`.
    Null,
    /// RESP3's `%`.
    Map(Vec<(Resp, Resp)>),
}

impl Resp {
    pub fn ok() -> Resp {
        Resp::Simple("OK".into())
    }

    pub fn bulk(s: &str) -> Resp {
        Resp::Bulk(Some(s.as_bytes().to_vec()))
    }

    pub fn null() -> Resp {
        Resp::Bulk(None)
    }

    pub fn error(s: &str) -> Resp {
        Resp::Error(s.into())
    }
}

pub struct Client {
    stream: TcpStream,
    buf: BytesMut,
}

pub fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n{arg}\r\n", arg.len()).as_bytes());
    }
    out
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Client {
        let stream = within("connect", TcpStream::connect(addr)).await.unwrap();
        Client { stream, buf: BytesMut::new() }
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        within("write", self.stream.write_all(bytes)).await.unwrap();
    }

    pub async fn cmd(&mut self, args: &[&str]) -> Resp {
        self.send_raw(&encode(args)).await;
        self.read().await
    }

    pub async fn read(&mut self) -> Resp {
        loop {
            if let Some((reply, used)) = parse(&self.buf) {
                self.buf.advance(used);
                return reply;
            }
            let n = within("read a reply", self.stream.read_buf(&mut self.buf)).await.unwrap();
            assert!(n > 0, "the server closed the connection; unparsed: {:?}", String::from_utf8_lossy(&self.buf));
        }
    }

    /// True once the server has closed the connection (and sent nothing more).
    pub async fn is_closed(&mut self) -> bool {
        let mut rest = Vec::new();
        match within("wait for close", self.stream.read_to_end(&mut rest)).await {
            Ok(_) => rest.is_empty() && self.buf.is_empty(),
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

fn line(buf: &[u8]) -> Option<(&str, usize)> {
    let end = buf.windows(2).position(|w| w == b"\r\n")?;
    Some((std::str::from_utf8(&buf[1..end]).unwrap(), end + 2))
}

/// One reply from the front of `buf` and its length, or `None` until it has fully arrived.
fn parse(buf: &[u8]) -> Option<(Resp, usize)> {
    let (text, used) = line(buf)?;
    match buf[0] {
        b'+' => Some((Resp::Simple(text.into()), used)),
        b'-' => Some((Resp::Error(text.into()), used)),
        b':' => Some((Resp::Int(text.parse().unwrap()), used)),
        b'$' => {
            let len: i64 = text.parse().unwrap();
            if len < 0 {
                return Some((Resp::Bulk(None), used));
            }
            let end = used + len as usize;
            (buf.len() >= end + 2).then(|| (Resp::Bulk(Some(buf[used..end].to_vec())), end + 2))
        }
        b'_' => Some((Resp::Null, used)),
        b'*' | b'%' => {
            let per_entry = if buf[0] == b'%' { 2 } else { 1 };
            let mut at = used;
            let mut items = Vec::new();
            for _ in 0..text.parse::<usize>().unwrap() * per_entry {
                let (item, n) = parse(&buf[at..])?;
                items.push(item);
                at += n;
            }
            if per_entry == 1 {
                return Some((Resp::Array(items), at));
            }
            let mut items = items.into_iter();
            let pairs = std::iter::from_fn(|| Some((items.next()?, items.next()?))).collect();
            Some((Resp::Map(pairs), at))
        }
        other => panic!("not a RESP reply: {:?}", other as char),
    }
}
