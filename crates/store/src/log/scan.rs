//! Reads a segment front to back in bounded chunks, so recovery, replay and compaction never hold a whole
//! segment in memory.
//!
//! A read can return flipped bits that are not on the disk (a flaky bus; `SimVfs::set_read_flips`). Before the
//! scan reports a damaged or incomplete record it re-reads the bytes from that record on, so recovery does not
//! mistake a bad read for a torn tail and cut good records away.

use std::io;

use crate::datastore::StoreError;
use crate::record::{decode_framed, Framed};
use crate::vfs::VfsFile;

pub(super) const CHUNK: usize = 1 << 20;
/// Reads of the same bytes before a checksum failure is believed.
pub(super) const READ_ATTEMPTS: usize = 3;

pub(super) struct Scan<'a> {
    file: &'a dyn VfsFile,
    end: u64,
    chunk: usize,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    buf_at: u64,
    /// Bytes at the front of `buf` already returned as records.
    used: usize,
    /// Failed reads of the record at `offset()`.
    failures: usize,
}

impl<'a> Scan<'a> {
    /// Scans `file` from `from` (a record boundary) up to `end`, reading `chunk` bytes at a time.
    pub(super) fn new(file: &'a dyn VfsFile, from: u64, end: u64, chunk: usize) -> Scan<'a> {
        Scan { file, end, chunk: chunk.max(1), buf: Vec::new(), buf_at: from, used: 0, failures: 0 }
    }

    /// File offset of the next record: after a scan stops, the end of the last good record.
    pub(super) fn offset(&self) -> u64 {
        self.buf_at + self.used as u64
    }

    /// The next record, or `None` once the bytes left (if any) are not a whole record. Errors carry file offsets.
    pub(super) fn next_record(&mut self) -> Result<Option<Framed>, StoreError> {
        loop {
            let at = self.offset();
            let stop = match decode_framed(&self.buf[self.used..]) {
                Ok(Some(framed)) => {
                    self.used += framed.len;
                    self.failures = 0;
                    return Ok(Some(framed));
                }
                Ok(None) if self.loaded() < self.end => {
                    self.fill()?;
                    continue;
                }
                Ok(None) if at == self.end => return Ok(None),
                stop => stop.map_err(|e| e.shifted(at)),
            };
            self.failures += 1;
            if self.failures >= READ_ATTEMPTS {
                return stop.map(|_| None);
            }
            // Forget what was read from this record on; the next pass through the loop reads it again.
            self.buf.truncate(self.used);
        }
    }

    fn loaded(&self) -> u64 {
        self.buf_at + self.buf.len() as u64
    }

    /// Drops the records already returned and reads the next chunk after what is buffered.
    fn fill(&mut self) -> io::Result<()> {
        self.buf.drain(..self.used);
        self.buf_at += self.used as u64;
        self.used = 0;
        let from = self.loaded();
        let old = self.buf.len();
        let more = (self.end - from).min(self.chunk as u64) as usize;
        self.buf.resize(old + more, 0);
        self.file.read_exact_at(from, &mut self.buf[old..])
    }
}
