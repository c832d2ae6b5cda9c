//! Reads a log file front to back in bounded chunks, so recovery and replay never hold the whole log in
//! memory.

use std::io;

use crate::datastore::StoreError;
use crate::record::{decode, Record};
use crate::vfs::VfsFile;

pub(super) const CHUNK: usize = 1 << 20;

pub(super) struct Scan<'a> {
    file: &'a dyn VfsFile,
    end: u64,
    buf: Vec<u8>,
    /// Log offset of `buf[0]`.
    buf_at: u64,
    /// Bytes at the front of `buf` already returned as records.
    used: usize,
}

impl<'a> Scan<'a> {
    /// Scans `file` from offset 0 up to `end`.
    pub(super) fn new(file: &'a dyn VfsFile, end: u64) -> Scan<'a> {
        Scan { file, end, buf: Vec::new(), buf_at: 0, used: 0 }
    }

    /// Log offset of the next record: after a scan stops, the end of the last good record.
    pub(super) fn offset(&self) -> u64 {
        self.buf_at + self.used as u64
    }

    /// The next record and its encoded length, or `None` once the bytes left (if any) are not a whole record.
    pub(super) fn next_record(&mut self) -> Result<Option<(Record, u64)>, StoreError> {
        loop {
            let at = self.offset();
            match decode(&self.buf[self.used..]).map_err(|e| e.shifted(at))? {
                Some((rec, len)) => {
                    self.used += len;
                    return Ok(Some((rec, len as u64)));
                }
                None if self.loaded() == self.end => return Ok(None),
                None => self.fill()?,
            }
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
        let more = (self.end - from).min(CHUNK as u64) as usize;
        self.buf.resize(old + more, 0);
        self.file.read_exact_at(from, &mut self.buf[old..])
    }
}
