//! The wire protocols the load generator speaks: RESP (redis-server, Meridian) and memcached's text protocol.
//! Both put a string record's GET and SET into a connection's output buffer and read their replies as the same
//! `Reply`, so the loops (`driver`) and the judging of replies (`ops`) are the same whichever server is measured.

use super::{memcache, resp};
use serde::Serialize;

/// What a reply was, with its payload counted rather than kept: the load generator only checks replies.
/// memcached's replies are read as their RESP equivalents (`memcache`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Reply {
    Simple,
    Error(String),
    Integer,
    /// A bulk string's length; `None` for nil.
    Bulk(Option<usize>),
    /// An array's length and how many of its elements are nil; `None` for a nil array.
    Array(Option<(usize, usize)>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Resp,
    /// memcached's text protocol: records of one field only, as an item holds one value.
    Memcache,
}

/// A protocol name that is not `resp` or `memcache`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("protocol {0:?}: expected resp or memcache")]
pub struct UnknownProtocol(pub String);

impl Protocol {
    pub fn parse_name(name: &str) -> Result<Protocol, UnknownProtocol> {
        match name {
            "resp" => Ok(Protocol::Resp),
            "memcache" => Ok(Protocol::Memcache),
            _ => Err(UnknownProtocol(name.into())),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Resp => "resp",
            Protocol::Memcache => "memcache",
        }
    }

    /// Appends a read of the string at `key`.
    pub(super) fn get(self, out: &mut Vec<u8>, key: &[u8]) {
        match self {
            Protocol::Resp => resp::encode(out, &[b"GET", key]),
            Protocol::Memcache => memcache::get(out, key),
        }
    }

    /// Appends a write of `value` to the string at `key`.
    pub(super) fn set(self, out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
        match self {
            Protocol::Resp => resp::encode(out, &[b"SET", key, value]),
            Protocol::Memcache => memcache::set(out, key, value),
        }
    }

    /// The first complete reply in `buf` and its length in bytes; `None` if `buf` holds only part of one.
    pub(super) fn parse(self, buf: &[u8]) -> Result<Option<(Reply, usize)>, String> {
        match self {
            Protocol::Resp => resp::parse(buf),
            Protocol::Memcache => memcache::parse(buf),
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Checks that `stream` parses as the replies `expected`, one after another, and that every strict prefix of
    /// each is incomplete, never an error or a shorter reply.
    pub(in crate::ycsb) fn parses_whole_or_not_at_all(protocol: Protocol, stream: &[u8], expected: &[Reply]) {
        let mut at = 0;
        for want in expected {
            let (reply, len) = protocol.parse(&stream[at..]).unwrap().unwrap();
            assert_eq!(&reply, want);
            for cut in 0..len {
                assert_eq!(protocol.parse(&stream[at..at + cut]).unwrap(), None, "{want:?} cut at {cut}");
            }
            at += len;
        }
        assert_eq!(at, stream.len());
    }
}
