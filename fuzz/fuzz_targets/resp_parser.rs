//! Feeds arbitrary bytes to the RESP request parser, whole and split into arbitrary chunks (as a socket may
//! deliver them). The parser must never panic; every call may only take bytes it was given, and what it
//! returns must fit in what it took; and the commands and error must not depend on how the bytes arrived.
//!
//! Input layout: byte 0 is the parser's `bulk_max` (small, so oversized arguments are common); byte 1 is how
//! many chunk lengths follow; each of those bytes is a chunk length (0 is read as 1), reused in turn; the rest
//! is the stream.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use meridian_node::fuzzing::{Command, Parser, ProtocolError};

/// What a connection would see: the commands in order, then the error that closed it, if any.
type Outcome = (Vec<Command>, Option<ProtocolError>);

fuzz_target!(|data: &[u8]| {
    let Some((&bulk_max, rest)) = data.split_first() else { return };
    let Some((&cuts, rest)) = rest.split_first() else { return };
    let (lengths, stream) = rest.split_at(rest.len().min(usize::from(cuts)));
    let chunks = chunked(stream, lengths);
    let whole = feed(usize::from(bulk_max), &[stream]);
    let split = feed(usize::from(bulk_max), &chunks);
    assert_eq!(whole, split, "the outcome depends on how the bytes arrived");
});

/// `stream` cut into pieces of the given lengths, cycling through them; one piece if there are none.
fn chunked<'a>(stream: &'a [u8], lengths: &[u8]) -> Vec<&'a [u8]> {
    if lengths.is_empty() {
        return vec![stream];
    }
    let mut chunks = Vec::new();
    let mut rest = stream;
    for &len in lengths.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (chunk, after) = rest.split_at(rest.len().min(usize::from(len.max(1))));
        chunks.push(chunk);
        rest = after;
    }
    chunks
}

/// Runs a parser over the chunks as a connection does: append a chunk, take every complete command, stop
/// at the first error.
fn feed(bulk_max: usize, chunks: &[&[u8]]) -> Outcome {
    let mut parser = Parser::new(bulk_max);
    let mut buf = BytesMut::new();
    let mut commands = Vec::new();
    let (mut given, mut taken, mut returned) = (0usize, 0usize, 0usize);
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        given += chunk.len();
        loop {
            let before = buf.len();
            let next = parser.next(&mut buf);
            assert!(buf.len() <= before, "the parser added bytes to its input");
            taken += before - buf.len();
            assert!(taken <= given, "the parser took {taken} bytes of {given}");
            match next {
                Ok(Some(command)) => {
                    returned += returned_bytes(&command);
                    assert!(returned <= taken, "commands stand for {returned} bytes, of {taken} taken");
                    commands.push(command);
                }
                Ok(None) => break,
                Err(e) => return (commands, Some(e)),
            }
        }
    }
    (commands, None)
}

/// The bytes a command stands for: its arguments, or the oversized argument's length (all of which the
/// parser must have taken, to drop it, before it reports the command).
fn returned_bytes(command: &Command) -> usize {
    match command {
        Command::Args(args) => args.iter().map(|a| a.len()).sum(),
        Command::Oversized { len } => *len,
    }
}
