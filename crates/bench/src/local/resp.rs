//! A blocking RESP2 client for SETs and GETs, pipelined or one at a time: commands are buffered and sent
//! together, replies read back in order. Values are counted and checked for length, never kept.

use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long a connection may wait on the node. A tail waiting for its lease during a chain change answers
/// within about a second; the node's own request timeout is 2 s.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Writes one command as RESP2 sends it: an array of bulk strings.
pub(crate) fn write_command(out: &mut impl Write, args: &[&[u8]]) -> io::Result<()> {
    write!(out, "*{}\r\n", args.len())?;
    for a in args {
        write!(out, "${}\r\n", a.len())?;
        out.write_all(a)?;
        out.write_all(b"\r\n")?;
    }
    Ok(())
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Reply {
    Ok,
    /// A bulk string's length, `None` for nil.
    Bulk(Option<usize>),
    Error(String),
}

pub(crate) struct Conn {
    reader: BufReader<TcpStream>,
    writer: BufWriter<TcpStream>,
}

impl Conn {
    pub(crate) fn connect(addr: SocketAddr) -> io::Result<Conn> {
        let s = TcpStream::connect_timeout(&addr, TIMEOUT)?;
        s.set_read_timeout(Some(TIMEOUT))?;
        s.set_write_timeout(Some(TIMEOUT))?;
        s.set_nodelay(true)?;
        Ok(Conn { reader: BufReader::new(s.try_clone()?), writer: BufWriter::new(s) })
    }

    /// Buffers one command; [`Conn::flush`] sends what is buffered.
    pub(crate) fn queue(&mut self, args: &[&[u8]]) -> io::Result<()> {
        write_command(&mut self.writer, args)
    }

    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }

    /// Sends one command and reads its reply: a round trip.
    pub(crate) fn call(&mut self, args: &[&[u8]]) -> io::Result<Reply> {
        self.queue(args)?;
        self.flush()?;
        self.read()
    }

    pub(crate) fn read(&mut self) -> io::Result<Reply> {
        let line = self.line()?;
        let bad = || io::Error::new(io::ErrorKind::InvalidData, format!("unexpected reply {line:?}"));
        match line.split_at(line.len().min(1)) {
            ("+", _) => Ok(Reply::Ok),
            ("-", message) => Ok(Reply::Error(message.to_string())),
            ("$", "-1") => Ok(Reply::Bulk(None)),
            ("$", len) => {
                let len: usize = len.parse().map_err(|_| bad())?;
                // The value and its CRLF, skipped without keeping them.
                let skipped = io::copy(&mut (&mut self.reader).take(len as u64 + 2), &mut io::sink())?;
                if skipped < len as u64 + 2 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                Ok(Reply::Bulk(Some(len)))
            }
            _ => Err(bad()),
        }
    }

    fn line(&mut self) -> io::Result<String> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the node closed the connection"));
        }
        Ok(line.trim_end_matches("\r\n").to_string())
    }
}
