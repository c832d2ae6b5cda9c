//! Incremental RESP2 request parser: multibulk arrays of bulk strings (what every client library
//! sends) and inline commands (what a person types into telnet).
//!
//! It takes complete arguments out of the connection's buffer as they arrive and keeps the ones of an
//! unfinished command in its own state, so a command that trickles in is never re-parsed from the
//! start, and the buffer holds at most one partial argument. Everything is bounded: [`ARGS_MAX`]
//! arguments, `bulk_max` bytes per argument, [`COMMAND_BYTES_MAX`] per command and [`LINE_MAX`] per
//! header or inline line. Malformed input is an error (worded as Redis words it), never a panic.
//!
//! An argument longer than `bulk_max` but within [`BULK_LEN_MAX`] is well-formed, only too large: its
//! bytes are dropped as they arrive, never buffered, and its command comes out as
//! [`Command::Oversized`], so the client gets a clear error and keeps its connection. A length beyond
//! [`BULK_LEN_MAX`] is a protocol error, as in Redis.

use bytes::{Buf, Bytes, BytesMut};
use std::ops::Range;

/// Arguments in one command; Redis' own default is the same million.
pub const ARGS_MAX: usize = 1 << 20;
/// Bytes in one command, all arguments together (dropped oversized ones included); bounds what one
/// connection can make the node hold or read for a single command.
pub const COMMAND_BYTES_MAX: usize = 512 << 20;
/// The longest bulk string announced that is still taken for a well-formed one (Redis'
/// `proto-max-bulk-len` default); beyond it the stream is refused.
pub const BULK_LEN_MAX: usize = 512 << 20;
/// Bytes in an inline command or a header line (Redis' PROTO_INLINE_MAX_SIZE).
pub const LINE_MAX: usize = 64 << 10;
/// Argument slots reserved up front, so a huge announced count costs nothing until its arguments come.
const PREALLOC_MAX: usize = 1024;
/// The largest argument vector kept for the next command ([`Parser::recycle`]): enough for any command of a
/// few keys, while the vector of one long MSET is not held for the life of the connection.
const SPARE_MAX: usize = 16;
/// Commands up to this long are copied out of the read buffer in one piece. An argument kept from one keeps the
/// whole piece alive (stored values are copies, but the key of an update waiting in a chain's unacknowledged
/// history, or of a request kept for a retry, is a slice of it), so the piece stays small: a long MSET copies
/// each argument on its own.
const ONE_PIECE_MAX: usize = 1024;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtocolError {
    #[error("too big inline request")]
    InlineTooBig,
    #[error("unbalanced quotes in request")]
    UnbalancedQuotes,
    #[error("too big mbulk count string")]
    CountLineTooBig,
    #[error("invalid multibulk length")]
    MultibulkLength,
    #[error("too big bulk count string")]
    BulkLineTooBig,
    #[error("expected '$', got '{0}'")]
    ExpectedBulk(char),
    #[error("invalid bulk length")]
    BulkLength,
    #[error("expected CRLF after a bulk string")]
    MissingCrlf,
    #[error("command larger than {COMMAND_BYTES_MAX} bytes")]
    CommandTooBig,
}

/// A complete command taken out of the stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Args(Vec<Bytes>),
    /// A well-formed command with an argument over `bulk_max`: `len` is the first such argument's length.
    /// Its arguments were dropped, so it must be refused, not run.
    Oversized {
        len: usize,
    },
}

pub struct Parser {
    bulk_max: usize,
    partial: Option<Partial>,
    /// Where [`whole_rest`] found each argument, kept between commands so finding them allocates nothing.
    bodies: Vec<Range<usize>>,
    /// An empty argument vector handed back by [`Parser::recycle`], for the next command's arguments.
    spare: Vec<Bytes>,
}

/// A multibulk command whose arguments are still arriving.
struct Partial {
    remaining: usize,
    args: Vec<Bytes>,
    bytes: usize,
    /// The first oversized argument's length; once set, later arguments are parsed but not kept.
    oversized: Option<usize>,
    /// Bytes of the oversized argument being dropped still to come, its CRLF included (0: none).
    discard: usize,
}

/// How a new command starts.
enum Start {
    Incomplete,
    /// A blank inline line or an empty array, which Redis skips.
    Empty,
    Inline(Vec<Bytes>),
    Multibulk(Partial),
}

/// What the front of the buffer holds where a bulk string is expected.
enum Bulk {
    Incomplete,
    Arg(Bytes),
    /// The header of a bulk string over `bulk_max`, consumed; its body is still to be dropped.
    Oversized(usize),
}

impl Parser {
    pub fn new(bulk_max: usize) -> Parser {
        Parser { bulk_max, partial: None, bodies: Vec::new(), spare: Vec::new() }
    }

    /// Takes back the arguments of a command that has run, so the next command's go into the same vector
    /// rather than a new one: an allocation and a free per command fewer.
    pub fn recycle(&mut self, mut args: Vec<Bytes>) {
        if args.capacity() <= SPARE_MAX {
            args.clear();
            self.spare = args;
        }
    }

    /// Takes the next complete command out of `buf`; `Ok(None)` until one has fully arrived.
    pub fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Command>, ProtocolError> {
        loop {
            let partial = match self.partial.take() {
                Some(partial) => partial,
                None => match start(buf, &mut self.spare)? {
                    Start::Incomplete => return Ok(None),
                    Start::Empty => continue,
                    Start::Inline(args) => return Ok(Some(Command::Args(args))),
                    Start::Multibulk(partial) => partial,
                },
            };
            return self.fill(partial, buf);
        }
    }

    fn fill(&mut self, mut partial: Partial, buf: &mut BytesMut) -> Result<Option<Command>, ProtocolError> {
        if partial.oversized.is_none() && partial.discard == 0 {
            let room = COMMAND_BYTES_MAX - partial.bytes;
            if whole_rest(buf, &mut partial.args, &mut self.bodies, partial.remaining, room, self.bulk_max) {
                return Ok(Some(Command::Args(partial.args)));
            }
        }
        while partial.remaining > 0 {
            if partial.discard > 0 {
                if !discard(buf, &mut partial.discard)? {
                    self.partial = Some(partial);
                    return Ok(None);
                }
                partial.remaining -= 1;
                continue;
            }
            match bulk(buf, self.bulk_max)? {
                Bulk::Incomplete => {
                    self.partial = Some(partial);
                    return Ok(None);
                }
                Bulk::Arg(arg) => {
                    partial.count(arg.len())?;
                    if partial.oversized.is_none() {
                        partial.args.push(arg);
                    }
                    partial.remaining -= 1;
                }
                Bulk::Oversized(len) => {
                    partial.count(len)?;
                    partial.oversized.get_or_insert(len);
                    partial.args = Vec::new();
                    partial.discard = len + 2;
                }
            }
        }
        Ok(Some(match partial.oversized {
            Some(len) => Command::Oversized { len },
            None => Command::Args(partial.args),
        }))
    }
}

impl Partial {
    /// Adds one argument's length to the command's, refusing a command over [`COMMAND_BYTES_MAX`].
    fn count(&mut self, len: usize) -> Result<(), ProtocolError> {
        self.bytes += len;
        if self.bytes > COMMAND_BYTES_MAX {
            return Err(ProtocolError::CommandTooBig);
        }
        Ok(())
    }
}

fn start(buf: &mut BytesMut, spare: &mut Vec<Bytes>) -> Result<Start, ProtocolError> {
    match buf.first() {
        None => Ok(Start::Incomplete),
        Some(b'*') => multibulk_header(buf, spare),
        Some(_) => inline(buf),
    }
}

/// `spare` is an empty vector to take for the arguments, if it has one.
fn multibulk_header(buf: &mut BytesMut, spare: &mut Vec<Bytes>) -> Result<Start, ProtocolError> {
    let Some(end) = header_line(buf, ProtocolError::CountLineTooBig)? else {
        return Ok(Start::Incomplete);
    };
    let count = parse_int(&buf[1..end]).ok_or(ProtocolError::MultibulkLength)?;
    buf.advance(end + 2);
    if count <= 0 {
        return Ok(Start::Empty);
    }
    let count = usize::try_from(count).ok().filter(|&n| n <= ARGS_MAX).ok_or(ProtocolError::MultibulkLength)?;
    let mut args = std::mem::take(spare);
    args.reserve(count.min(PREALLOC_MAX));
    Ok(Start::Multibulk(Partial { remaining: count, args, bytes: 0, oversized: None, discard: 0 }))
}

/// One bulk string, consumed from `buf` only once all of it (and its CRLF) has arrived; or, for one over
/// `bulk_max`, only its header, as soon as that has arrived.
fn bulk(buf: &mut BytesMut, bulk_max: usize) -> Result<Bulk, ProtocolError> {
    match buf.first() {
        None => return Ok(Bulk::Incomplete),
        Some(b'$') => {}
        Some(&other) => return Err(ProtocolError::ExpectedBulk(other as char)),
    }
    let Some(end) = header_line(buf, ProtocolError::BulkLineTooBig)? else {
        return Ok(Bulk::Incomplete);
    };
    let len = parse_int(&buf[1..end])
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n <= BULK_LEN_MAX)
        .ok_or(ProtocolError::BulkLength)?;
    let body = end + 2;
    if len > bulk_max {
        buf.advance(body);
        return Ok(Bulk::Oversized(len));
    }
    if buf.len() < body + len + 2 {
        return Ok(Bulk::Incomplete);
    }
    if &buf[body + len..body + len + 2] != b"\r\n" {
        return Err(ProtocolError::MissingCrlf);
    }
    // A copy rather than a slice of the read buffer: a stored value must not pin the whole buffer it
    // arrived in, and an unshared buffer is reused for the next reads instead of reallocated.
    let arg = Bytes::copy_from_slice(&buf[body..body + len]);
    buf.advance(body + len + 2);
    Ok(Bulk::Arg(arg))
}

/// The rest of a short command, `remaining` bulk strings in at most [`ONE_PIECE_MAX`] bytes, taken out of
/// `buf` in one piece when all of it has arrived, every argument is within `bulk_max` and they add up to at
/// most `room` bytes: one copy of its bytes, the arguments slices of it pushed onto `args`, so a command costs
/// one allocation (and one shared count, which handing an argument on then only increments) instead of one
/// per argument. Otherwise false, with nothing consumed: the argument-by-argument path takes the command from
/// there, and reports what is wrong with it. `bodies` is scratch space for where the arguments are.
fn whole_rest(
    buf: &mut BytesMut,
    args: &mut Vec<Bytes>,
    bodies: &mut Vec<Range<usize>>,
    remaining: usize,
    room: usize,
    bulk_max: usize,
) -> bool {
    bodies.clear();
    let (mut end, mut bytes) = (0, 0);
    for _ in 0..remaining {
        let Some((body, next)) = next_bulk(&buf[..buf.len().min(ONE_PIECE_MAX)], end, bulk_max) else {
            return false;
        };
        bytes += body.len();
        bodies.push(body);
        end = next;
    }
    if bytes > room {
        return false;
    }
    let copy = piece(&buf[..end]);
    buf.advance(end);
    args.extend(bodies.drain(..).map(|body| copy.slice(body)));
    true
}

/// A copy of a command's bytes for its arguments to share. A `Bytes` copied from a slice takes a second
/// allocation, for its shared count, when the first argument is cut from it; a piece of up to
/// [`INLINE_PIECE_MAX`] bytes is instead made in one allocation, a buffer of the next power of two (from 64) with
/// the count beside it. An argument kept after its command (the key of an unacknowledged update, say) keeps the
/// whole buffer alive, so larger pieces are copied to their own size.
fn piece(bytes: &[u8]) -> Bytes {
    match bytes.len() {
        0..=64 => Bytes::from_owner(Inline::<64>::new(bytes)),
        65..=128 => Bytes::from_owner(Inline::<128>::new(bytes)),
        129..=256 => Bytes::from_owner(Inline::<256>::new(bytes)),
        257..=INLINE_PIECE_MAX => Bytes::from_owner(Inline::<INLINE_PIECE_MAX>::new(bytes)),
        _ => Bytes::copy_from_slice(bytes),
    }
}

/// The longest piece made in an [`Inline`] buffer.
const INLINE_PIECE_MAX: usize = 512;

/// Up to `N` bytes in a buffer of their own, to own a [`Bytes`].
struct Inline<const N: usize> {
    len: usize,
    bytes: [u8; N],
}

impl<const N: usize> Inline<N> {
    fn new(from: &[u8]) -> Self {
        let mut bytes = [0; N];
        bytes[..from.len()].copy_from_slice(from);
        Inline { len: from.len(), bytes }
    }
}

impl<const N: usize> AsRef<[u8]> for Inline<N> {
    fn as_ref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The body of the complete, well-formed bulk string of at most `bulk_max` bytes at `at` in `bytes`, and where
/// the next one starts; `None` if there is no such bulk string there (yet).
fn next_bulk(bytes: &[u8], at: usize, bulk_max: usize) -> Option<(Range<usize>, usize)> {
    let rest = &bytes[at..];
    if rest.first() != Some(&b'$') {
        return None;
    }
    let end = header_line(rest, ProtocolError::BulkLineTooBig).ok()??;
    let len = parse_int(&rest[1..end]).and_then(|n| usize::try_from(n).ok()).filter(|&n| n <= bulk_max)?;
    let body = at + end + 2;
    (bytes.get(body + len..body + len + 2)? == b"\r\n").then_some((body..body + len, body + len + 2))
}

/// Drops what has arrived of an oversized argument's body, then checks the CRLF after it; true once the
/// whole argument is gone. `left` counts the body bytes still to come plus the CRLF's two.
fn discard(buf: &mut BytesMut, left: &mut usize) -> Result<bool, ProtocolError> {
    let body = (*left - 2).min(buf.len());
    buf.advance(body);
    *left -= body;
    if *left > 2 || buf.len() < 2 {
        return Ok(false);
    }
    if &buf[..2] != b"\r\n" {
        return Err(ProtocolError::MissingCrlf);
    }
    buf.advance(2);
    *left = 0;
    Ok(true)
}

/// Where the CRLF ending the header line at the front of `buf` is: a line of at most [`LINE_MAX`] bytes.
/// The verdict depends only on the first `LINE_MAX + 2` bytes, so it is the same however they arrive.
fn header_line(buf: &[u8], too_big: ProtocolError) -> Result<Option<usize>, ProtocolError> {
    let window = &buf[..buf.len().min(LINE_MAX + 2)];
    match crlf_in(window) {
        Some(end) => Ok(Some(end)),
        None if window.len() == LINE_MAX + 2 => Err(too_big),
        None => Ok(None),
    }
}

/// Where the first CRLF in `bytes` starts.
fn crlf_in(bytes: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(cr) = cr_from(bytes, from) {
        if bytes.get(cr + 1) == Some(&b'\n') {
            return Some(cr);
        }
        from = cr + 1;
    }
    None
}

/// Where the first CR at or after `from` is. Nearly every line searched is a header of a few bytes (`$3`,
/// `*3`), for which looking at each byte is cheaper than setting up memchr's vector search (about 45
/// instructions a call); longer lines get memchr past the first `NEAR` bytes.
fn cr_from(bytes: &[u8], from: usize) -> Option<usize> {
    const NEAR: usize = 16;
    let rest = &bytes[from..];
    let near = &rest[..rest.len().min(NEAR)];
    let at = match near.iter().position(|&b| b == b'\r') {
        Some(i) => i,
        None => near.len() + memchr::memchr(b'\r', &rest[near.len()..])?,
    };
    Some(from + at)
}

/// A decimal integer exactly as `str::parse::<i64>` reads one (an optional `+` or `-`, then at least one
/// digit, within range), without its detour through UTF-8: every header of every command goes through here.
fn parse_int(digits: &[u8]) -> Option<i64> {
    let (negative, digits) = match digits {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, digits),
    };
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0i64, |n, &d| {
        let d = d.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        let (n, d) = (n.checked_mul(10)?, i64::from(d));
        if negative {
            n.checked_sub(d)
        } else {
            n.checked_add(d)
        }
    })
}

fn inline(buf: &mut BytesMut) -> Result<Start, ProtocolError> {
    let window = &buf[..buf.len().min(LINE_MAX + 1)];
    let Some(newline) = window.iter().position(|&b| b == b'\n') else {
        return if buf.len() > LINE_MAX { Err(ProtocolError::InlineTooBig) } else { Ok(Start::Incomplete) };
    };
    let args = split_inline(&buf[..newline]).ok_or(ProtocolError::UnbalancedQuotes)?;
    buf.advance(newline + 1);
    Ok(if args.is_empty() { Start::Empty } else { Start::Inline(args) })
}

/// Splits an inline command into words the way Redis' `sdssplitargs` does: whitespace separates words;
/// `"…"` quotes with C-style and `\xHH` escapes; `'…'` quotes with only `\'`; a closing quote must be
/// followed by whitespace or the end of the line. `None` when quotes are unbalanced.
fn split_inline(line: &[u8]) -> Option<Vec<Bytes>> {
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while line.get(i).is_some_and(|&b| is_space(b)) {
            i += 1;
        }
        if i == line.len() {
            return Some(args);
        }
        let (word, next) = inline_word(line, i)?;
        args.push(Bytes::from(word));
        i = next;
    }
}

fn inline_word(line: &[u8], mut i: usize) -> Option<(Vec<u8>, usize)> {
    let mut word = Vec::new();
    while let Some(&b) = line.get(i).filter(|&&b| !is_space(b)) {
        i = match b {
            b'"' => double_quoted(line, i + 1, &mut word)?,
            b'\'' => single_quoted(line, i + 1, &mut word)?,
            _ => {
                word.push(b);
                i + 1
            }
        };
    }
    Some((word, i))
}

/// Reads a `"…"` section starting after its opening quote; returns the index after the closing quote.
fn double_quoted(line: &[u8], mut i: usize, word: &mut Vec<u8>) -> Option<usize> {
    loop {
        match *line.get(i)? {
            b'\\' if line.get(i + 1) == Some(&b'x') && hex_byte(line.get(i + 2..i + 4)).is_some() => {
                word.push(hex_byte(line.get(i + 2..i + 4))?);
                i += 4;
            }
            b'\\' if i + 1 < line.len() => {
                word.push(unescape(line[i + 1]));
                i += 2;
            }
            b'"' => return closing_quote(line, i + 1),
            b => {
                word.push(b);
                i += 1;
            }
        }
    }
}

/// Reads a `'…'` section starting after its opening quote; returns the index after the closing quote.
fn single_quoted(line: &[u8], mut i: usize, word: &mut Vec<u8>) -> Option<usize> {
    loop {
        match *line.get(i)? {
            b'\\' if line.get(i + 1) == Some(&b'\'') => {
                word.push(b'\'');
                i += 2;
            }
            b'\'' => return closing_quote(line, i + 1),
            b => {
                word.push(b);
                i += 1;
            }
        }
    }
}

fn closing_quote(line: &[u8], after: usize) -> Option<usize> {
    match line.get(after) {
        None => Some(after),
        Some(&b) if is_space(b) => Some(after),
        Some(_) => None,
    }
}

fn hex_byte(digits: Option<&[u8]>) -> Option<u8> {
    u8::from_str_radix(std::str::from_utf8(digits?).ok()?, 16).ok()
}

fn unescape(b: u8) -> u8 {
    match b {
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'b' => 0x08,
        b'a' => 0x07,
        other => other,
    }
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n' | 0x0b | 0x0c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every header's number reads as `str::parse` reads it: signs, zeros, both ends of the range and one past
    /// them, stray bytes, and every string of up to three bytes from an alphabet of digits, signs and others.
    #[test]
    fn integers_read_as_str_parse_reads_them() {
        let mut cases: Vec<Vec<u8>> = ["", "0", "-0", "+0", "007", "-", "+", "+-1", "1 ", " 1", "1\r", "١"]
            .iter()
            .map(|c| c.as_bytes().to_vec())
            .collect();
        for edge in [i64::MAX as i128, i64::MIN as i128, i64::MAX as i128 + 1, i64::MIN as i128 - 1] {
            cases.push(edge.to_string().into_bytes());
            cases.push(format!("+{edge}").into_bytes());
        }
        let alphabet = b"09-+a\xff";
        for len in 1..=3u32 {
            for mut i in 0..alphabet.len().pow(len) {
                cases.push((0..len).map(|_| (alphabet[i % alphabet.len()], i /= alphabet.len()).0).collect());
            }
        }
        for case in cases {
            let expected = std::str::from_utf8(&case).ok().and_then(|s| s.parse::<i64>().ok());
            assert_eq!(parse_int(&case), expected, "{:?}", String::from_utf8_lossy(&case));
        }
    }

    #[test]
    fn a_header_ends_at_the_first_cr_followed_by_lf() {
        assert_eq!(crlf_in(b"$3\r\nabc\r\n"), Some(2));
        assert_eq!(crlf_in(b"\r\r\n"), Some(1));
        assert_eq!(crlf_in(b"$3\rx\n\r\n"), Some(5));
        assert_eq!(crlf_in(b"$3\r"), None);
        assert_eq!(crlf_in(b""), None);
    }

    /// A command's arguments go into the vector the previous command's were handed back in, emptied, whether
    /// the rest of the command is taken whole or argument by argument; a vector too large to keep is not kept.
    #[test]
    fn recycled_arguments_hold_only_the_next_commands() {
        let mut parser = Parser::new(1 << 20);
        let mut buf = BytesMut::from(&b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"[..]);
        let Ok(Some(Command::Args(set))) = parser.next(&mut buf) else { panic!("SET parses") };
        let kept = set.as_ptr();
        parser.recycle(set);
        let Ok(Some(Command::Args(get))) = parser.next(&mut buf) else { panic!("GET parses") };
        assert_eq!(Command::Args(get.clone()), words(&["GET", "k"]));
        assert_eq!(get.as_ptr(), kept, "the vector was reused");
        parser.recycle(get);
        let big = format!("*2\r\n$4\r\nECHO\r\n${}\r\n{}\r\n", 2 * ONE_PIECE_MAX, "x".repeat(2 * ONE_PIECE_MAX));
        assert_eq!(parse_all(&mut parser, big.as_bytes()), Ok(vec![words(&["ECHO", &"x".repeat(2 * ONE_PIECE_MAX)])]));
        parser.recycle(Vec::with_capacity(SPARE_MAX + 1));
        assert_eq!(parser.spare.capacity(), 0, "a large vector is dropped");
    }

    fn words(args: &[&str]) -> Command {
        Command::Args(args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect())
    }

    fn parse_all(parser: &mut Parser, input: &[u8]) -> Result<Vec<Command>, ProtocolError> {
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(cmd) = parser.next(&mut buf)? {
            out.push(cmd);
        }
        Ok(out)
    }

    /// Feeds `input` one byte at a time; the commands, then the error if any, in order.
    fn parse_bytewise(bulk_max: usize, input: &[u8]) -> (Vec<Command>, Option<ProtocolError>) {
        let mut parser = Parser::new(bulk_max);
        let mut buf = BytesMut::new();
        let mut cmds = Vec::new();
        for &b in input {
            buf.extend_from_slice(&[b]);
            loop {
                match parser.next(&mut buf) {
                    Ok(Some(cmd)) => cmds.push(cmd),
                    Ok(None) => break,
                    Err(e) => return (cmds, Some(e)),
                }
            }
        }
        (cmds, None)
    }

    /// Feeds `input` at once; the same shape as [`parse_bytewise`].
    fn parse_whole(bulk_max: usize, input: &[u8]) -> (Vec<Command>, Option<ProtocolError>) {
        let mut parser = Parser::new(bulk_max);
        let mut buf = BytesMut::from(input);
        let mut cmds = Vec::new();
        loop {
            match parser.next(&mut buf) {
                Ok(Some(cmd)) => cmds.push(cmd),
                Ok(None) => return (cmds, None),
                Err(e) => return (cmds, Some(e)),
            }
        }
    }

    #[test]
    fn parses_pipelined_multibulk_and_inline() {
        let input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\nPING\r\n*0\r\n\r\n*1\r\n$4\r\nPING\r\n";
        let cmds = parse_all(&mut Parser::new(100), input).unwrap();
        assert_eq!(cmds, vec![words(&["SET", "k", ""]), words(&["PING"]), words(&["PING"])]);
    }

    #[test]
    fn a_short_command_that_has_all_arrived_is_one_copy_and_one_that_trickles_in_parses_the_same() {
        let input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n";
        let mut buf = BytesMut::from(&input[..]);
        let Ok(Some(Command::Args(args))) = Parser::new(100).next(&mut buf) else { panic!("a command") };
        let offset = |arg: &Bytes| (arg.as_ptr() as usize).wrapping_sub(args[0].as_ptr() as usize);
        assert_eq!((offset(&args[1]), offset(&args[2])), (3 + 6, 3 + 6 + 1 + 6), "slices of one copy");
        assert!(buf.is_empty());

        let long = [&b"*2\r\n$3\r\nGET\r\n$2000\r\n"[..], &[b'k'; 2000], b"\r\n"].concat();
        let mut buf = BytesMut::from(&long[..]);
        let Ok(Some(Command::Args(args))) = Parser::new(4000).next(&mut buf) else { panic!("a command") };
        assert_eq!(args[1].len(), 2000);
        let apart = (args[1].as_ptr() as usize).wrapping_sub(args[0].as_ptr() as usize);
        assert_ne!(apart, 3 + 8, "a long command is not one piece");

        let mut parser = Parser::new(100);
        let mut buf = BytesMut::from(&input[..20]);
        assert_eq!(parser.next(&mut buf), Ok(None));
        buf.extend_from_slice(&input[20..]);
        assert_eq!(parser.next(&mut buf), Ok(Some(words(&["SET", "k", "value"]))));
    }

    /// Across every size of buffer a piece may take, and past the largest, a command parses to its own arguments,
    /// cut from one piece, which they keep alive after the read buffer has moved on.
    #[test]
    fn commands_of_every_piece_size_parse_to_their_arguments() {
        for len in 0..=INLINE_PIECE_MAX + 8 {
            let value = (0..len).map(|i| b'a' + (i % 26) as u8).collect::<Vec<u8>>();
            let input = [format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${len}\r\n").as_bytes(), &value, b"\r\n"].concat();
            let mut buf = BytesMut::from(&input[..]);
            let Ok(Some(Command::Args(args))) = Parser::new(1000).next(&mut buf) else { panic!("a command of {len}") };
            buf.clear();
            buf.extend_from_slice(&[b'x'; 64]);
            assert_eq!(args, [&b"SET"[..], b"k", &value], "a value of {len} bytes");
            let apart = (args[2].as_ptr() as usize).wrapping_sub(args[0].as_ptr() as usize);
            assert_eq!(apart, "SET\r\n$1\r\nk\r\n$".len() + len.to_string().len() + 2, "one piece");
        }
    }

    #[test]
    fn byte_by_byte_arrival_gives_the_same_commands() {
        let input = b"*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\nset a \"b c\"\n";
        let (cmds, err) = parse_bytewise(100, input);
        assert_eq!(cmds, vec![words(&["ECHO", "hello"]), words(&["set", "a", "b c"])]);
        assert_eq!(err, None);
    }

    #[test]
    fn inline_quoting_follows_redis() {
        let split = |line: &[u8]| split_inline(line).map(Command::Args);
        assert_eq!(split(br#"set k "a\x41\n""#), Some(words(&["set", "k", "aA\n"])));
        assert_eq!(split(br"get 'it\'s'"), Some(words(&["get", "it's"])));
        assert_eq!(split(b"  a\tb  "), Some(words(&["a", "b"])));
        assert_eq!(split(br#"x"y z"w"#), None);
        assert_eq!(split(br#"set "open"#), None);
        assert_eq!(split(br#""a"b"#), None);
    }

    #[test]
    fn malformed_frames_are_errors() {
        let mut oversized_without_crlf = b"*1\r\n$200\r\n".to_vec();
        oversized_without_crlf.extend([b'v'; 200]);
        oversized_without_crlf.extend(b"XY");
        let cases: [(&[u8], ProtocolError); 8] = [
            (b"*x\r\n", ProtocolError::MultibulkLength),
            (b"*2000000\r\n", ProtocolError::MultibulkLength),
            (b"*1\r\n:5\r\n", ProtocolError::ExpectedBulk(':')),
            (b"*1\r\n$-1\r\n", ProtocolError::BulkLength),
            (b"*1\r\n$536870913\r\n", ProtocolError::BulkLength),
            (b"*1\r\n$2\r\nabcd\r\n", ProtocolError::MissingCrlf),
            (&oversized_without_crlf, ProtocolError::MissingCrlf),
            (b"get \"k\n", ProtocolError::UnbalancedQuotes),
        ];
        for (input, want) in cases {
            assert_eq!(parse_all(&mut Parser::new(100), input), Err(want), "{:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn oversized_arguments_are_dropped_unbuffered_and_the_command_refused() {
        let mut parser = Parser::new(10);
        let mut buf = BytesMut::from(&b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1000\r\n"[..]);
        assert_eq!(parser.next(&mut buf), Ok(None));
        assert!(buf.is_empty(), "the header is taken as soon as it has arrived");
        buf.extend_from_slice(&[b'v'; 600]);
        assert_eq!(parser.next(&mut buf), Ok(None));
        assert!(buf.is_empty(), "the body is dropped as it arrives, not held");
        buf.extend_from_slice(&[b'v'; 400]);
        buf.extend_from_slice(b"\r\n*1\r\n$4\r\nPING\r\n");
        assert_eq!(parser.next(&mut buf), Ok(Some(Command::Oversized { len: 1000 })));
        assert_eq!(parser.next(&mut buf), Ok(Some(words(&["PING"]))), "the stream stays in step");
        // Arguments after the oversized one are parsed (and bounded) but not kept.
        let input = b"*3\r\n$11\r\nxxxxxxxxxxx\r\n$2\r\nok\r\n$12\r\nyyyyyyyyyyyy\r\n";
        assert_eq!(parse_all(&mut Parser::new(10), input), Ok(vec![Command::Oversized { len: 11 }]));
        assert_eq!(parse_all(&mut Parser::new(10), b"*1\r\n$10\r\n"), Ok(vec![]));
    }

    #[test]
    fn lines_are_bounded() {
        let long_line = vec![b'a'; LINE_MAX + 1];
        assert_eq!(parse_all(&mut Parser::new(10), &long_line), Err(ProtocolError::InlineTooBig));
        let mut long_count = b"*".to_vec();
        long_count.extend(std::iter::repeat_n(b'1', LINE_MAX + 1));
        assert_eq!(parse_all(&mut Parser::new(10), &long_count), Err(ProtocolError::CountLineTooBig));
    }

    /// A header line of exactly [`LINE_MAX`] bytes whose CR has arrived but not its LF used to be refused,
    /// although the same bytes arriving together were accepted.
    #[test]
    fn a_header_line_at_the_limit_is_judged_the_same_however_it_arrives() {
        let mut header = b"*".to_vec();
        header.extend(std::iter::repeat_n(b'0', LINE_MAX - 2));
        header.extend(b"1\r\n$4\r\nPING\r\n");
        let mut parser = Parser::new(10);
        let mut buf = BytesMut::from(&header[..LINE_MAX + 1]);
        assert_eq!(parser.next(&mut buf), Ok(None));
        buf.extend_from_slice(&header[LINE_MAX + 1..]);
        assert_eq!(parser.next(&mut buf), Ok(Some(words(&["PING"]))));
        assert_eq!(parse_whole(10, &header), (vec![words(&["PING"])], None));
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_parse_the_same_whole_or_bytewise() {
        // A fixed linear congruential generator: varied but reproducible input, biased toward RESP syntax.
        let alphabet = b"*$\r\n0123456789-\"' \\xabPING";
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..2000 {
            let mut input = Vec::new();
            for _ in 0..(state % 40) {
                state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                input.push(alphabet[(state >> 33) as usize % alphabet.len()]);
            }
            assert_eq!(parse_whole(4, &input), parse_bytewise(4, &input), "{:?}", String::from_utf8_lossy(&input));
            state = state.wrapping_add(1);
        }
    }

    /// The byte-by-byte look at a line's first bytes and memchr past them find the same CRLF a plain search
    /// does: lone CRs, a CR as the last byte of the near part or of the input, CRLFs on either side of it.
    #[test]
    fn the_first_crlf_is_found_wherever_it_lies() {
        let naive = |b: &[u8]| b.windows(2).position(|w| w == b"\r\n");
        for len in 0..40 {
            for cr in 0..len {
                for lf in [None, Some(cr + 1), Some(cr + 2), Some(len - 1)] {
                    let mut line = vec![b'7'; len];
                    line[cr] = b'\r';
                    if let Some(at) = lf.filter(|&at| at < len) {
                        line[at] = b'\n';
                        if at > 0 {
                            line[at - 1] = b'\r';
                        }
                    }
                    assert_eq!(crlf_in(&line), naive(&line), "{:?}", String::from_utf8_lossy(&line));
                }
            }
        }
    }
}
