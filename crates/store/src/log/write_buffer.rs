//! The active segment's user-space write buffer: appends collect here and reach the OS in one write when the
//! buffer fills, on `flush`, and on `sync` (before the fsync).
//!
//! Design: the buffer sits under the segment's file handle and implements [`VfsFile`] itself, so every read
//! of the log (lookups, replay, `read_log`, scans, compaction, hint writing, sealing) goes through
//! `read_exact_at`, which serves the unflushed tail from memory. Readers therefore see buffered records
//! exactly as written ones, with no flush on the read path and no second code path to keep in step.
//!
//! Buffered bytes live only in this process: a process crash loses them (unlike bytes in the page cache),
//! which is why the node driver flushes before it acknowledges in async mode.
//!
//! The buffer also reserves the file's space ahead of its data, `reserve_step` bytes at a time
//! ([`VfsFile::reserve`]), so that the fsyncs of group commit find the file's size unchanged and write only data:
//! on ext4 an fdatasync that must also write the inode costs a second device write, and on the project's 2-core VM
//! that was a fifth of a 3-node log chain's CPU per update (`docs/performance-history.md`, section 7). The price is
//! that the segment's file ends in zeros until it is sealed ([`WriteBuffer::trim`]) and, after a crash or restart,
//! until recovery cuts them off.

use meridian_core::SyncJob;
use std::io;

use crate::vfs::VfsFile;

#[derive(Debug)]
pub(super) struct WriteBuffer {
    file: Box<dyn VfsFile>,
    /// Bytes of the file already handed to the OS; `pending` follows them.
    written: u64,
    pending: Vec<u8>,
    /// `pending` is written out once it holds this many bytes; 0 writes every append at once.
    capacity: usize,
    /// Nothing was written to the file since its last fsync or sync job was taken, so another job would make
    /// nothing more durable: a node whose batch wrote only to other stores does not pay an fsync for this one.
    taken: bool,
    /// Nothing was written to the file since an fsync that has completed: what `sync` may skip on. A job that
    /// is taken but not yet run does not count, since `sync` promises durability on return.
    durable: bool,
    /// Space is reserved this many bytes at a time ahead of the data; 0 reserves none.
    reserve_step: u64,
    /// How far the file's space is reserved (at least `written` when anything is).
    reserved: u64,
}

impl WriteBuffer {
    /// Wraps `file`, which holds `written` bytes and nothing reserved after them.
    pub(super) fn new(file: Box<dyn VfsFile>, written: u64, capacity: usize, reserve_step: u64) -> WriteBuffer {
        WriteBuffer {
            file,
            written,
            pending: Vec::new(),
            capacity,
            taken: false,
            durable: false,
            reserve_step,
            reserved: written,
        }
    }

    /// Hands the pending bytes to the OS in one write. On a full disk it cuts off whatever part made it and
    /// keeps the bytes pending, so the file still ends on a record boundary and no appended record is lost.
    pub(super) fn flush(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        (self.taken, self.durable) = (false, false);
        self.reserve_ahead()?;
        match self.file.append(&self.pending) {
            Ok(()) => {
                self.written += self.pending.len() as u64;
                self.pending.clear();
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::StorageFull => {
                self.file.truncate(self.written)?;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Reserves the next steps of space if the pending bytes would pass the reservation. A full disk is no
    /// error here: the reservation only saves work, and the append that follows finds out what fits.
    fn reserve_ahead(&mut self) -> io::Result<()> {
        let end = self.written + self.pending.len() as u64;
        if self.reserve_step == 0 || end <= self.reserved {
            return Ok(());
        }
        match self.reserve(end.next_multiple_of(self.reserve_step)) {
            Err(e) if e.kind() != io::ErrorKind::StorageFull => Err(e),
            _ => Ok(()),
        }
    }

    /// The last job of [`VfsFile::begin_sync`] has run: what it covered is durable, which is everything if
    /// nothing was written since it was taken.
    pub(super) fn job_done(&mut self) {
        self.durable |= self.taken;
    }

    /// Writes out the pending bytes and gives back the space reserved past them, durably, so the file ends
    /// with its last record: what a sealed segment must do, since recovery trusts sealed segments to the end.
    pub(super) fn trim(&mut self) -> io::Result<()> {
        self.flush()?;
        if self.reserved > self.written {
            self.file.truncate(self.written)?;
            self.reserved = self.written;
        }
        Ok(())
    }
}

impl WriteBuffer {
    /// Appends what `write` adds to the end of the pending bytes, writing the buffer out if that fills it.
    /// `write` must only append, and append nothing when it fails. On failure the bytes may be partly
    /// buffered, as with [`VfsFile::append`]; the caller truncates them off.
    pub(super) fn append_with(&mut self, write: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> io::Result<()> {
        write(&mut self.pending)?;
        if self.pending.len() >= self.capacity {
            self.flush()?;
        }
        Ok(())
    }
}

impl VfsFile for WriteBuffer {
    fn len(&self) -> io::Result<u64> {
        Ok(self.written + self.pending.len() as u64)
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if offset + buf.len() as u64 > self.len()? {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of the segment"));
        }
        let on_disk = self.written.saturating_sub(offset).min(buf.len() as u64) as usize;
        let (disk, memory) = buf.split_at_mut(on_disk);
        if !disk.is_empty() {
            self.file.read_exact_at(offset, disk)?;
        }
        if !memory.is_empty() {
            let from = (offset + on_disk as u64 - self.written) as usize;
            memory.copy_from_slice(&self.pending[from..from + memory.len()]);
        }
        Ok(())
    }

    /// Buffers `data`, writing the buffer out if that fills it. On failure `data` may be partly buffered;
    /// the caller truncates it off, as with an unbuffered file.
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.append_with(|pending| {
            pending.extend_from_slice(data);
            Ok(())
        })
    }

    /// Skips the fsync only when one has completed since the last write: with a job taken but not yet run, the
    /// bytes it covers are not durable yet, and a caller of `sync` may record elsewhere, at once, that they are
    /// (a chain node storing a map in which it no longer heads a chain it forwarded early for, a segment being
    /// sealed).
    fn sync(&mut self) -> io::Result<()> {
        self.flush()?;
        if !self.durable {
            self.file.sync()?;
            (self.taken, self.durable) = (true, true);
        }
        Ok(())
    }

    /// Writes the pending bytes out first, since the job runs on the file; `None` when nothing was written
    /// since the last sync or job. A job that fails stops the node (fail-stop), so no later job need cover its
    /// bytes again; the bytes count as durable only once it has run ([`WriteBuffer::job_done`]).
    fn begin_sync(&mut self) -> io::Result<Option<SyncJob>> {
        self.flush()?;
        if self.taken {
            return Ok(None);
        }
        let job = self.file.begin_sync()?;
        self.taken = true;
        Ok(job)
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        if len >= self.written {
            self.pending.truncate((len - self.written) as usize);
            return Ok(());
        }
        self.pending.clear();
        (self.taken, self.durable) = (false, false);
        self.file.truncate(len)?;
        (self.written, self.reserved) = (len, len);
        Ok(())
    }

    fn reserve(&mut self, len: u64) -> io::Result<()> {
        self.file.reserve(len)?;
        self.reserved = self.reserved.max(len);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::vfs::{SimVfs, Vfs};

    fn buffered(capacity: usize) -> (SimVfs, WriteBuffer) {
        let vfs = SimVfs::new();
        let file = vfs.open(Path::new("f")).unwrap();
        (vfs.clone(), WriteBuffer::new(file, 0, capacity, 0))
    }

    #[test]
    fn reads_span_written_and_pending_bytes() {
        let (vfs, mut buf) = buffered(8);
        buf.append(b"abcdef").unwrap();
        assert_eq!(vfs.open(Path::new("f")).unwrap().len().unwrap(), 0, "still pending");
        buf.append(b"ghij").unwrap();
        buf.append(b"kl").unwrap();
        assert_eq!(vfs.open(Path::new("f")).unwrap().len().unwrap(), 10);
        let mut out = [0; 6];
        buf.read_exact_at(6, &mut out).unwrap();
        assert_eq!(&out, b"ghijkl");
        assert!(buf.read_exact_at(7, &mut out).is_err());
    }

    /// A file that counts its fsyncs.
    #[derive(Debug, Default)]
    struct Counted {
        data: Vec<u8>,
        fsyncs: std::sync::Arc<std::sync::atomic::AtomicU32>,
    }

    impl VfsFile for Counted {
        fn len(&self) -> io::Result<u64> {
            Ok(self.data.len() as u64)
        }
        fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
            buf.copy_from_slice(&self.data[offset as usize..offset as usize + buf.len()]);
            Ok(())
        }
        fn append(&mut self, data: &[u8]) -> io::Result<()> {
            self.data.extend_from_slice(data);
            Ok(())
        }
        fn sync(&mut self) -> io::Result<()> {
            self.fsyncs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        }
        fn begin_sync(&mut self) -> io::Result<Option<SyncJob>> {
            let fsyncs = self.fsyncs.clone();
            Ok(Some(Box::new(move || {
                fsyncs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            })))
        }
        fn truncate(&mut self, len: u64) -> io::Result<()> {
            self.data.truncate(len as usize);
            Ok(())
        }
        fn reserve(&mut self, _len: u64) -> io::Result<()> {
            Ok(())
        }
    }

    /// A buffer of `capacity` bytes over a [`Counted`] file, and a reading of the file's fsyncs so far.
    fn counted(capacity: usize) -> (WriteBuffer, impl Fn() -> u32) {
        let file = Counted::default();
        let fsyncs = file.fsyncs.clone();
        (WriteBuffer::new(Box::new(file), 0, capacity, 0), move || fsyncs.load(std::sync::atomic::Ordering::Relaxed))
    }

    #[test]
    fn a_sync_with_nothing_new_costs_no_fsync() {
        let (mut buf, count) = counted(4);
        buf.append(b"ab").unwrap();
        buf.sync().unwrap();
        buf.sync().unwrap();
        assert_eq!(count(), 1, "nothing new to make durable");
        buf.append(b"c").unwrap();
        buf.sync().unwrap();
        assert_eq!(count(), 2);
        buf.truncate(1).unwrap();
        buf.sync().unwrap();
        assert_eq!(count(), 3, "a cut is a change too");
    }

    #[test]
    fn a_sync_job_is_taken_only_when_something_was_written_and_counts_once_run() {
        let (mut buf, count) = counted(64);
        buf.append(b"ab").unwrap();
        let job = buf.begin_sync().unwrap().expect("a write owes a sync");
        assert_eq!(buf.file.len().unwrap(), 2, "the pending bytes reach the file before the job is taken");
        assert!(buf.begin_sync().unwrap().is_none(), "nothing new since the job");
        job().unwrap();
        buf.job_done();
        assert_eq!(count(), 1);
        buf.sync().unwrap();
        assert_eq!(count(), 1, "the job that ran stands for the sync");
    }

    /// Seed 160 of the simulator's membership sweep: a head that forwarded an update before its fsync stored a map
    /// in which it no longer heads the chain, trusting a `sync` that returned while the job covering the update
    /// had not yet run; power was lost before it did.
    #[test]
    fn a_sync_while_a_job_is_out_makes_the_bytes_durable_itself() {
        let (vfs, mut buf) = buffered(64);
        buf.append(b"update").unwrap();
        let _job = buf.begin_sync().unwrap().expect("a write owes a sync");
        buf.sync().unwrap();
        assert_eq!(vfs.unsynced_bytes(), 0, "a power loss now would keep the update");
    }

    #[test]
    fn truncate_cuts_pending_then_written_bytes() {
        let (_vfs, mut buf) = buffered(4);
        buf.append(b"abcd").unwrap();
        buf.append(b"ef").unwrap();
        buf.truncate(5).unwrap();
        assert_eq!(buf.len().unwrap(), 5);
        buf.truncate(2).unwrap();
        let mut out = [0; 2];
        buf.read_exact_at(0, &mut out).unwrap();
        assert_eq!((&out, buf.len().unwrap()), (b"ab", 2));
    }

    #[test]
    fn space_is_reserved_a_step_ahead_and_trimmed_off() {
        let vfs = SimVfs::new();
        let mut buf = WriteBuffer::new(vfs.open(Path::new("f")).unwrap(), 0, 4, 16);
        buf.append(b"abcd").unwrap();
        assert_eq!(vfs.used_bytes(), 16, "the first write reserved a step");
        buf.append(&[7; 20]).unwrap();
        assert_eq!(vfs.used_bytes(), 32, "24 bytes take two steps");
        buf.trim().unwrap();
        assert_eq!((vfs.used_bytes(), buf.len().unwrap()), (24, 24));
        buf.append(b"e").unwrap();
        buf.flush().unwrap();
        assert_eq!(vfs.used_bytes(), 32, "appends after a trim reserve again");
    }
}
