//! Storage behind a trait, so the deterministic simulator can swap the real file system for [`SimVfs`] and
//! cut power at any point.

mod faults;
mod real;
mod sim;

use meridian_core::SyncJob;
use std::cell::RefCell;
use std::fmt::Debug;
use std::io;
use std::path::Path;
use std::thread::JoinHandle;

pub use real::RealVfs;
pub use sim::SimVfs;

pub trait Vfs: Send + Sync + Debug {
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Opens for reading and appending, creating the file if missing.
    fn open(&self, path: &Path) -> io::Result<Box<dyn VfsFile>>;
    fn exists(&self, path: &Path) -> bool;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Atomically gives the file at `from` the name `to`, replacing any file there; durable once it returns.
    /// Open handles keep referring to the same file.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Names of the regular files directly in `dir`, sorted.
    fn list_files(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Runs `job`, file work whose loss the next open repairs (writing a segment's hint, removing segments a
    /// compaction replaced), where it does not hold the caller up: the real backend runs it on a thread of its
    /// own, since an fsync, a directory sync or unlinking a large file can each take tens of milliseconds that
    /// the caller, a node's core, would otherwise spend, and skips it if no thread can be started. It returns
    /// that thread, for the caller to wait for before it goes (`Background`). This default runs it now, as
    /// the simulator's disk does, so a run stays deterministic.
    fn in_background(&self, job: Box<dyn FnOnce() + Send>) -> Option<JoinHandle<()>> {
        job();
        None
    }
}

/// The jobs a store started through [`Vfs::in_background`], waited for when it is dropped: a closed store does
/// not go on writing into its directory, where its owner may be removing or reopening it.
#[derive(Debug, Default)]
pub(crate) struct Background(RefCell<Vec<JoinHandle<()>>>);

impl Background {
    pub(crate) fn start(&self, vfs: &dyn Vfs, job: Box<dyn FnOnce() + Send>) {
        if let Some(thread) = vfs.in_background(job) {
            let mut threads = self.0.borrow_mut();
            threads.retain(|t| !t.is_finished());
            threads.push(thread);
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        for thread in self.0.get_mut().drain(..) {
            // A job that panicked left work the next open repairs; there is nothing more to do with it here.
            let _ = thread.join();
        }
    }
}

// No `is_empty`: a file's length is a fallible I/O query, and callers compare it with offsets, not zero.
#[allow(clippy::len_without_is_empty)]
pub trait VfsFile: Send + Debug {
    fn len(&self) -> io::Result<u64>;
    /// Reads exactly buf.len() bytes at offset (error UnexpectedEof if the file is shorter). Sees unsynced appends.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Appends at the end. Not durable until sync. On failure (`StorageFull` included) part of `data` may have
    /// been written.
    fn append(&mut self, data: &[u8]) -> io::Result<()>;
    /// Makes all appends so far durable (fdatasync on the real backend).
    fn sync(&mut self) -> io::Result<()>;
    /// Asks the OS to start writing what was appended so far to the device, without waiting for it (Linux's
    /// `sync_file_range`), so that a later `sync` of a file written in many appends waits only for the last of
    /// them rather than for all at once. It changes nothing of durability: only `sync` makes appends durable.
    /// This default does nothing.
    fn start_writeback(&self) {}
    /// `sync` taken off the handle, to run later on any thread while appends go on: the job makes durable at
    /// least what was appended when it was taken. `None` when nothing needs it (a handle that tracks what is
    /// synced may know).
    fn begin_sync(&mut self) -> io::Result<Option<SyncJob>>;
    /// Cuts the file to len bytes, durably (used by recovery to drop a torn tail). Drops any reservation.
    fn truncate(&mut self, len: u64) -> io::Result<()>;
    /// Makes the file at least `len` bytes long on disk, zero-filled past its data, so that appends up to there
    /// do not change its size: an fdatasync then writes only data, not the inode as well (on ext4, one device
    /// write per sync instead of two). Like an append, it is durable only after `sync`.
    ///
    /// This handle's `len` and reads still end at the appended data. But the zeros are part of the file: opened
    /// again, or after a crash, it reads as its data followed by zeros up to the reservation (or a shorter one,
    /// if the last reservation was not synced), so whoever reads the file must tell where its data ends.
    fn reserve(&mut self, len: u64) -> io::Result<()>;
}
