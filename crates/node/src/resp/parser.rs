//! Incremental RESP2 request parser: multibulk arrays of bulk strings (what every client library
//! sends) and inline commands (what a person types into telnet).
//!
//! It takes complete arguments out of the connection's buffer as they arrive and keeps the ones of an
//! unfinished command in its own state, so a command that trickles in is never re-parsed from the
//! start, and the buffer holds at most one partial argument. Everything is bounded: [`ARGS_MAX`]
//! arguments, `bulk_max` bytes per argument, [`COMMAND_BYTES_MAX`] per command and [`LINE_MAX`] per
//! header or inline line. Malformed input is an error (worded as Redis words it), never a panic.

use bytes::{Buf, Bytes, BytesMut};

/// Arguments in one command; Redis' own default is the same million.
pub(crate) const ARGS_MAX: usize = 1 << 20;
/// Bytes in one command, all arguments together; bounds what one connection can make the node hold.
pub(crate) const COMMAND_BYTES_MAX: usize = 512 << 20;
/// Bytes in an inline command or a header line (Redis' PROTO_INLINE_MAX_SIZE).
pub(crate) const LINE_MAX: usize = 64 << 10;
/// Argument slots reserved up front, so a huge announced count costs nothing until its arguments come.
const PREALLOC_MAX: usize = 1024;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum ProtocolError {
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

pub(crate) struct Parser {
    bulk_max: usize,
    partial: Option<Partial>,
}

/// A multibulk command whose arguments are still arriving.
struct Partial {
    remaining: usize,
    args: Vec<Bytes>,
    bytes: usize,
}

/// How a new command starts.
enum Start {
    Incomplete,
    /// A blank inline line or an empty array, which Redis skips.
    Empty,
    Inline(Vec<Bytes>),
    Multibulk(Partial),
}

impl Parser {
    pub(crate) fn new(bulk_max: usize) -> Parser {
        Parser { bulk_max, partial: None }
    }

    /// Takes the next complete command out of `buf`; `Ok(None)` until one has fully arrived.
    pub(crate) fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        loop {
            let partial = match self.partial.take() {
                Some(partial) => partial,
                None => match start(buf)? {
                    Start::Incomplete => return Ok(None),
                    Start::Empty => continue,
                    Start::Inline(args) => return Ok(Some(args)),
                    Start::Multibulk(partial) => partial,
                },
            };
            return self.fill(partial, buf);
        }
    }

    fn fill(&mut self, mut partial: Partial, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        while partial.remaining > 0 {
            let Some(arg) = bulk(buf, self.bulk_max)? else {
                self.partial = Some(partial);
                return Ok(None);
            };
            partial.bytes += arg.len();
            if partial.bytes > COMMAND_BYTES_MAX {
                return Err(ProtocolError::CommandTooBig);
            }
            partial.args.push(arg);
            partial.remaining -= 1;
        }
        Ok(Some(partial.args))
    }
}

fn start(buf: &mut BytesMut) -> Result<Start, ProtocolError> {
    match buf.first() {
        None => Ok(Start::Incomplete),
        Some(b'*') => multibulk_header(buf),
        Some(_) => inline(buf),
    }
}

fn multibulk_header(buf: &mut BytesMut) -> Result<Start, ProtocolError> {
    let Some(end) = header_line(buf, ProtocolError::CountLineTooBig)? else {
        return Ok(Start::Incomplete);
    };
    let count = parse_int(&buf[1..end]).ok_or(ProtocolError::MultibulkLength)?;
    buf.advance(end + 2);
    if count <= 0 {
        return Ok(Start::Empty);
    }
    let count = usize::try_from(count).ok().filter(|&n| n <= ARGS_MAX).ok_or(ProtocolError::MultibulkLength)?;
    Ok(Start::Multibulk(Partial { remaining: count, args: Vec::with_capacity(count.min(PREALLOC_MAX)), bytes: 0 }))
}

/// One bulk string, consumed from `buf` only once all of it (and its CRLF) has arrived.
fn bulk(buf: &mut BytesMut, bulk_max: usize) -> Result<Option<Bytes>, ProtocolError> {
    match buf.first() {
        None => return Ok(None),
        Some(b'$') => {}
        Some(&other) => return Err(ProtocolError::ExpectedBulk(other as char)),
    }
    let Some(end) = header_line(buf, ProtocolError::BulkLineTooBig)? else {
        return Ok(None);
    };
    let len = parse_int(&buf[1..end])
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n <= bulk_max)
        .ok_or(ProtocolError::BulkLength)?;
    let body = end + 2;
    if buf.len() < body + len + 2 {
        return Ok(None);
    }
    if &buf[body + len..body + len + 2] != b"\r\n" {
        return Err(ProtocolError::MissingCrlf);
    }
    // A copy rather than a slice of the read buffer: a stored value must not pin the whole buffer it
    // arrived in, and an unshared buffer is reused for the next reads instead of reallocated.
    let arg = Bytes::copy_from_slice(&buf[body..body + len]);
    buf.advance(body + len + 2);
    Ok(Some(arg))
}

/// Where the CRLF ending the header line at the front of `buf` is, looking no further than [`LINE_MAX`].
fn header_line(buf: &[u8], too_big: ProtocolError) -> Result<Option<usize>, ProtocolError> {
    let window = &buf[..buf.len().min(LINE_MAX + 2)];
    match window.windows(2).position(|w| w == b"\r\n") {
        Some(end) => Ok(Some(end)),
        None if buf.len() > LINE_MAX => Err(too_big),
        None => Ok(None),
    }
}

fn parse_int(digits: &[u8]) -> Option<i64> {
    std::str::from_utf8(digits).ok()?.parse().ok()
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

    fn words(args: &[&str]) -> Vec<Bytes> {
        args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect()
    }

    fn parse_all(parser: &mut Parser, input: &[u8]) -> Result<Vec<Vec<Bytes>>, ProtocolError> {
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(cmd) = parser.next(&mut buf)? {
            out.push(cmd);
        }
        Ok(out)
    }

    #[test]
    fn parses_pipelined_multibulk_and_inline() {
        let input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\nPING\r\n*0\r\n\r\n*1\r\n$4\r\nPING\r\n";
        let cmds = parse_all(&mut Parser::new(100), input).unwrap();
        assert_eq!(cmds, vec![words(&["SET", "k", ""]), words(&["PING"]), words(&["PING"])]);
    }

    #[test]
    fn byte_by_byte_arrival_gives_the_same_commands() {
        let input = b"*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\nset a \"b c\"\n";
        let mut parser = Parser::new(100);
        let mut buf = BytesMut::new();
        let mut cmds = Vec::new();
        for &b in input.iter() {
            buf.extend_from_slice(&[b]);
            while let Some(cmd) = parser.next(&mut buf).unwrap() {
                cmds.push(cmd);
            }
        }
        assert_eq!(cmds, vec![words(&["ECHO", "hello"]), words(&["set", "a", "b c"])]);
        assert!(buf.is_empty());
    }

    #[test]
    fn inline_quoting_follows_redis() {
        assert_eq!(split_inline(br#"set k "a\x41\n""#).unwrap(), words(&["set", "k", "aA\n"]));
        assert_eq!(split_inline(br"get 'it\'s'").unwrap(), words(&["get", "it's"]));
        assert_eq!(split_inline(b"  a\tb  ").unwrap(), words(&["a", "b"]));
        assert_eq!(split_inline(br#"x"y z"w"#), None);
        assert_eq!(split_inline(br#"set "open"#), None);
        assert_eq!(split_inline(br#""a"b"#), None);
    }

    #[test]
    fn malformed_frames_are_errors() {
        let cases: [(&[u8], ProtocolError); 6] = [
            (b"*x\r\n", ProtocolError::MultibulkLength),
            (b"*2000000\r\n", ProtocolError::MultibulkLength),
            (b"*1\r\n:5\r\n", ProtocolError::ExpectedBulk(':')),
            (b"*1\r\n$-1\r\n", ProtocolError::BulkLength),
            (b"*1\r\n$2\r\nabcd\r\n", ProtocolError::MissingCrlf),
            (b"get \"k\n", ProtocolError::UnbalancedQuotes),
        ];
        for (input, want) in cases {
            assert_eq!(parse_all(&mut Parser::new(100), input), Err(want), "{:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn limits_are_enforced_before_buffering() {
        assert_eq!(parse_all(&mut Parser::new(10), b"*1\r\n$11\r\n"), Err(ProtocolError::BulkLength));
        assert_eq!(parse_all(&mut Parser::new(10), b"*1\r\n$10\r\n"), Ok(vec![]));
        let long_line = vec![b'a'; LINE_MAX + 1];
        assert_eq!(parse_all(&mut Parser::new(10), &long_line), Err(ProtocolError::InlineTooBig));
        let mut long_count = b"*".to_vec();
        long_count.extend(std::iter::repeat_n(b'1', LINE_MAX + 1));
        assert_eq!(parse_all(&mut Parser::new(10), &long_count), Err(ProtocolError::CountLineTooBig));
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A fixed linear congruential generator: varied but reproducible input, biased toward RESP syntax.
        let alphabet = b"*$\r\n0123456789-\"' \\xabPING";
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..2000 {
            let mut input = Vec::new();
            for _ in 0..(state % 40) {
                state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                input.push(alphabet[(state >> 33) as usize % alphabet.len()]);
            }
            let _ = parse_all(&mut Parser::new(16), &input);
            state = state.wrapping_add(1);
        }
    }
}
