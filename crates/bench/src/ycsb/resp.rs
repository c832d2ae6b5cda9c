//! RESP2 on the wire: commands appended to an output buffer, and replies parsed from whatever bytes have
//! arrived. The parser never consumes a partial reply, so a connection can wait for bytes and for its next send
//! time at once and lose nothing when the timer wins.

use super::protocol::Reply;
use crate::local::resp::write_command;

/// Appends one command, an array of bulk strings.
pub(super) fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    write_command(out, args).expect("writing to a Vec cannot fail");
}

/// Nesting a reply may have: replies to the commands sent here are flat or one level deep.
const DEPTH_MAX: usize = 8;

/// The first complete reply in `buf` and its length in bytes; `None` if `buf` holds only part of one.
pub(super) fn parse(buf: &[u8]) -> Result<Option<(Reply, usize)>, String> {
    parse_at(buf, 0, 0)
}

fn parse_at(buf: &[u8], at: usize, depth: usize) -> Result<Option<(Reply, usize)>, String> {
    let Some((line, body)) = line(buf, at) else { return Ok(None) };
    let (kind, text) = line.split_first().ok_or("an empty reply line")?;
    let text = std::str::from_utf8(text).map_err(|_| "a reply line that is not UTF-8")?;
    let length = || text.parse::<i64>().map_err(|_| format!("bad length {text:?}"));
    match kind {
        b'+' => Ok(Some((Reply::Simple, body))),
        b'-' => Ok(Some((Reply::Error(text.to_string()), body))),
        b':' => Ok(Some((Reply::Integer, body))),
        b'$' => match usize::try_from(length()?) {
            Err(_) => Ok(Some((Reply::Bulk(None), body))),
            Ok(len) if buf.len() < body + len + 2 => Ok(None),
            Ok(len) if &buf[body + len..body + len + 2] != b"\r\n" => Err("a bulk string not ended by CRLF".into()),
            Ok(len) => Ok(Some((Reply::Bulk(Some(len)), body + len + 2))),
        },
        b'*' if depth < DEPTH_MAX => match usize::try_from(length()?) {
            Err(_) => Ok(Some((Reply::Array(None), body))),
            Ok(len) => {
                let (mut end, mut nils) = (body, 0);
                for _ in 0..len {
                    let Some((element, next)) = parse_at(buf, end, depth + 1)? else { return Ok(None) };
                    nils += usize::from(matches!(element, Reply::Bulk(None) | Reply::Array(None)));
                    end = next;
                }
                Ok(Some((Reply::Array(Some((len, nils))), end)))
            }
        },
        _ => Err(format!("unexpected reply {:?}", String::from_utf8_lossy(line))),
    }
}

/// The line starting at `at` without its CRLF, and where the next begins (memcached's replies are lines too).
pub(super) fn line(buf: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let end = at + buf.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
    Some((&buf[at..end], end + 2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ycsb::protocol::tests::parses_whole_or_not_at_all;
    use crate::ycsb::protocol::Protocol;

    #[test]
    fn replies_parse_whole_or_not_at_all() {
        let stream = b"+OK\r\n:3\r\n$5\r\nhello\r\n$-1\r\n*3\r\n$1\r\na\r\n$-1\r\n$1\r\nb\r\n*0\r\n-ERR no\r\n";
        let expected = [
            Reply::Simple,
            Reply::Integer,
            Reply::Bulk(Some(5)),
            Reply::Bulk(None),
            Reply::Array(Some((3, 1))),
            Reply::Array(Some((0, 0))),
            Reply::Error("ERR no".into()),
        ];
        parses_whole_or_not_at_all(Protocol::Resp, stream, &expected);
        assert!(parse(b"?what\r\n").is_err());
        assert!(parse(b"$2\r\nabcd\r\n").is_err());
    }

    #[test]
    fn commands_encode_as_arrays_of_bulk_strings() {
        let mut out = Vec::new();
        encode(&mut out, &[b"SET", b"k", b"v1"]);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nv1\r\n");
        assert_eq!(parse(&out).unwrap(), Some((Reply::Array(Some((3, 0))), out.len())));
    }
}
