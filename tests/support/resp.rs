//! A minimal blocking RESP2 client, enough for tests to record exactly what each command returned.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resp {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Resp>>),
}

pub struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Resp {
    /// A bulk string of `v`'s bytes.
    pub fn bulk(v: &str) -> Resp {
        Resp::Bulk(Some(v.as_bytes().to_vec()))
    }
}

impl Conn {
    pub fn connect(addr: SocketAddr, timeout: Duration) -> io::Result<Conn> {
        let s = TcpStream::connect_timeout(&addr, timeout)?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        s.set_nodelay(true)?;
        Ok(Conn { reader: BufReader::new(s.try_clone()?), writer: s })
    }

    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> io::Result<Resp> {
        self.send(args)?;
        read(&mut self.reader)
    }

    /// `connected_clients` as the server's INFO reports it.
    pub fn connected_clients(&mut self) -> usize {
        let Resp::Bulk(Some(info)) = self.cmd(&["INFO", "clients"]).unwrap() else { panic!("INFO is a bulk string") };
        let info = String::from_utf8(info).unwrap();
        let line = info.lines().find_map(|l| l.strip_prefix("connected_clients:")).expect("connected_clients");
        line.parse().unwrap()
    }

    pub fn send<A: AsRef<[u8]>>(&mut self, args: &[A]) -> io::Result<()> {
        let mut buf = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            let a = a.as_ref();
            buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            buf.extend_from_slice(a);
            buf.extend_from_slice(b"\r\n");
        }
        self.writer.write_all(&buf)
    }

    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.writer.write_all(bytes)
    }

    pub fn read(&mut self) -> io::Result<Resp> {
        read(&mut self.reader)
    }
}

fn line(r: &mut impl BufRead) -> io::Result<String> {
    let mut s = String::new();
    if r.read_line(&mut s)? == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"));
    }
    Ok(s.trim_end_matches("\r\n").to_string())
}

fn read(r: &mut impl BufRead) -> io::Result<Resp> {
    let l = line(r)?;
    let bad = || io::Error::new(io::ErrorKind::InvalidData, format!("bad reply line {l:?}"));
    let (tag, rest) = l.split_at(l.len().min(1));
    let num = || rest.parse::<i64>().map_err(|_| bad());
    match tag {
        "+" => Ok(Resp::Simple(rest.into())),
        "-" => Ok(Resp::Error(rest.into())),
        ":" => Ok(Resp::Int(num()?)),
        "$" if num()? < 0 => Ok(Resp::Bulk(None)),
        "$" => {
            let mut data = vec![0; num()? as usize + 2];
            r.read_exact(&mut data)?;
            data.truncate(data.len() - 2);
            Ok(Resp::Bulk(Some(data)))
        }
        "*" if num()? < 0 => Ok(Resp::Array(None)),
        "*" => (0..num()?).map(|_| read(r)).collect::<io::Result<Vec<_>>>().map(|v| Resp::Array(Some(v))),
        _ => Err(bad()),
    }
}

/// A bulk string reply holding `v`.
pub fn bulk(v: &str) -> Resp {
    Resp::Bulk(Some(v.as_bytes().to_vec()))
}
