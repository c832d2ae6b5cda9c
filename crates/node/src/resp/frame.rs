//! Replies and their encoding in RESP2 or RESP3, whichever the connection speaks (HELLO chooses). The two
//! differ only where RESP3 has a type of its own: a null is `_` instead of `$-1`, a map is `%` instead of a
//! flat array of keys and values.

use bytes::Bytes;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum Frame {
    Simple(&'static str),
    /// The whole error line after `-`, code first (`ERR …`, `BUSY …`).
    Error(String),
    Integer(i64),
    Bulk(Bytes),
    /// Redis' "no value": the null bulk string `$-1` in RESP2, `_` in RESP3.
    #[default]
    Null,
    Array(Vec<Frame>),
    /// Pairs: a flat array in RESP2, a map in RESP3.
    Map(Vec<(Frame, Frame)>),
}

/// The protocol version a connection speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Protocol {
    #[default]
    Resp2,
    Resp3,
}

impl Protocol {
    pub(crate) fn version(self) -> i64 {
        match self {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    }
}

impl Frame {
    pub(crate) fn ok() -> Frame {
        Frame::Simple("OK")
    }

    pub(crate) fn error(line: impl Into<String>) -> Frame {
        Frame::Error(line.into())
    }

    pub(crate) fn bulk(text: impl Into<String>) -> Frame {
        Frame::Bulk(Bytes::from(text.into()))
    }

    pub(crate) fn encode(&self, protocol: Protocol, out: &mut Vec<u8>) {
        match self {
            Frame::Simple(s) => line(out, b'+', s.as_bytes()),
            Frame::Error(e) => error_line(out, e),
            Frame::Integer(n) => header(out, b':', *n),
            Frame::Bulk(b) => {
                header(out, b'$', b.len() as i64);
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Frame::Null if protocol == Protocol::Resp3 => out.extend_from_slice(b"_\r\n"),
            Frame::Null => out.extend_from_slice(b"$-1\r\n"),
            Frame::Array(items) => {
                header(out, b'*', items.len() as i64);
                items.iter().for_each(|item| item.encode(protocol, out));
            }
            Frame::Map(pairs) => {
                match protocol {
                    Protocol::Resp2 => header(out, b'*', 2 * pairs.len() as i64),
                    Protocol::Resp3 => header(out, b'%', pairs.len() as i64),
                }
                for (key, value) in pairs {
                    key.encode(protocol, out);
                    value.encode(protocol, out);
                }
            }
        }
    }
}

fn line(out: &mut Vec<u8>, kind: u8, text: &[u8]) {
    out.push(kind);
    out.extend_from_slice(text);
    out.extend_from_slice(b"\r\n");
}

/// Errors may quote client input; a CR or LF in it would end the line early and desynchronise the
/// client, so they become spaces, as Redis does.
fn error_line(out: &mut Vec<u8>, text: &str) {
    out.push(b'-');
    out.extend(text.bytes().map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }));
    out.extend_from_slice(b"\r\n");
}

fn header(out: &mut Vec<u8>, kind: u8, n: i64) {
    out.push(kind);
    // `itoa` rather than `write!`: the formatting machinery cost about 300 instructions per reply header.
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(frame: Frame) -> String {
        encoded_in(frame, Protocol::Resp2)
    }

    fn encoded_in(frame: Frame, protocol: Protocol) -> String {
        let mut out = Vec::new();
        frame.encode(protocol, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn resp3_has_its_own_null_and_map() {
        let map = || Frame::Map(vec![(Frame::bulk("k"), Frame::Null)]);
        assert_eq!(encoded_in(map(), Protocol::Resp3), "%1\r\n$1\r\nk\r\n_\r\n");
        assert_eq!(encoded_in(map(), Protocol::Resp2), "*2\r\n$1\r\nk\r\n$-1\r\n");
        assert_eq!(encoded_in(Frame::Integer(7), Protocol::Resp3), ":7\r\n");
    }

    #[test]
    fn encodes_every_kind() {
        assert_eq!(encoded(Frame::ok()), "+OK\r\n");
        assert_eq!(encoded(Frame::error("ERR bad\r\nthing")), "-ERR bad  thing\r\n");
        assert_eq!(encoded(Frame::Integer(-3)), ":-3\r\n");
        assert_eq!(encoded(Frame::bulk("hi")), "$2\r\nhi\r\n");
        assert_eq!(encoded(Frame::Null), "$-1\r\n");
        assert_eq!(encoded(Frame::Array(vec![Frame::Integer(1), Frame::Null])), "*2\r\n:1\r\n$-1\r\n");
    }

    #[test]
    fn integers_are_written_as_display_writes_them() {
        for n in [0, 9, 10, -1, -10, 1_234_567, i64::MAX, i64::MIN, i64::MIN + 1] {
            assert_eq!(encoded(Frame::Integer(n)), format!(":{n}\r\n"));
        }
    }
}
