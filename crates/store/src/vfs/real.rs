//! The [`Vfs`] over `std::fs`.

use meridian_core::SyncJob;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use super::{Vfs, VfsFile};

/// The real file system. Creating or removing a file or directory also syncs its parent directory, so names
/// are as durable as [`super::SimVfs`] assumes they are.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealVfs;

impl Vfs for RealVfs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        if path.is_dir() {
            return Ok(());
        }
        fs::create_dir_all(path)?;
        sync_parent(path)
    }

    fn open(&self, path: &Path) -> io::Result<Box<dyn VfsFile>> {
        let existed = path.exists();
        // Not O_APPEND: appends are positioned writes at the end of the data, which may lie before the end
        // of the file when space is reserved.
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        if !existed {
            sync_parent(path)?;
        }
        let len = file.metadata()?.len();
        Ok(Box::new(RealFile { file: Arc::new(file), end: len, size: len }))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)?;
        sync_parent(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)?;
        sync_parent(to)?;
        if from.parent() != to.parent() {
            sync_parent(from)?;
        }
        Ok(())
    }

    fn list_files(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            // A name that is not UTF-8 was not written by Meridian, so it is not ours to read.
            if let (true, Ok(name)) = (entry.file_type()?.is_file(), entry.file_name().into_string()) {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    fn in_background(&self, job: Box<dyn FnOnce() + Send>) -> Option<JoinHandle<()>> {
        // A job's loss is repaired by the next open (`Vfs::in_background`), so a failed spawn only skips it.
        std::thread::Builder::new().name("meridian-files".into()).spawn(job).ok()
    }
}

fn sync_parent(path: &Path) -> io::Result<()> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    File::open(parent)?.sync_all()
}

#[derive(Debug)]
struct RealFile {
    /// Shared with the fsync jobs taken off it, which may outlive the handle.
    file: Arc<File>,
    /// End of the data: where the next append goes.
    end: u64,
    /// The file's size, at least `end`; past `end` it holds reserved zeros.
    size: u64,
}

impl VfsFile for RealFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.end)
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if offset.checked_add(buf.len() as u64).is_none_or(|end| end > self.end) {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of the data"));
        }
        self.file.read_exact_at(buf, offset)
    }

    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        // On failure part of `data` may be in the file; `end` stays, so the next append overwrites it.
        self.file.write_all_at(data, self.end)?;
        self.end += data.len() as u64;
        self.size = self.size.max(self.end);
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    #[cfg(target_os = "linux")]
    fn start_writeback(&self) {
        use std::os::fd::AsRawFd;
        // SAFETY: the descriptor is open for as long as `self.file` lives; the call only starts writeback of
        // the file's dirty pages (offset 0, length 0: to its end) and reads or writes no memory of ours.
        unsafe { libc::sync_file_range(self.file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    }

    fn begin_sync(&mut self) -> io::Result<Option<SyncJob>> {
        let file = Arc::clone(&self.file);
        Ok(Some(Box::new(move || file.sync_data())))
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)?;
        self.file.sync_all()?;
        (self.end, self.size) = (len, len);
        Ok(())
    }

    fn reserve(&mut self, len: u64) -> io::Result<()> {
        if len <= self.size {
            return Ok(());
        }
        // Written zeros, not fallocate: ext4 marks fallocated blocks unwritten, and the first write to each
        // changes the extent tree, so every fdatasync would write metadata again.
        let zeros = vec![0; usize::try_from(len - self.size).map_err(io::Error::other)?];
        self.file.write_all_at(&zeros, self.size)?;
        self.size = len;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_append_read_truncate_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("a/b");
        RealVfs.create_dir_all(&sub).unwrap();
        let path = sub.join("f");
        assert!(!RealVfs.exists(&path));

        let mut f = RealVfs.open(&path).unwrap();
        assert!(RealVfs.exists(&path));
        f.append(b"hello ").unwrap();
        f.append(b"world").unwrap();
        f.sync().unwrap();
        assert_eq!(f.len().unwrap(), 11);
        let mut buf = [0; 5];
        f.read_exact_at(6, &mut buf).unwrap();
        assert_eq!(&buf, b"world");
        let err = f.read_exact_at(8, &mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);

        f.truncate(5).unwrap();
        f.append(b"!").unwrap();
        drop(f);
        let g = RealVfs.open(&path).unwrap();
        let mut all = [0; 6];
        g.read_exact_at(0, &mut all).unwrap();
        assert_eq!(&all, b"hello!");

        RealVfs.remove_file(&path).unwrap();
        assert!(!RealVfs.exists(&path));
    }

    #[test]
    fn reserved_space_is_zeros_that_only_a_reopened_file_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = RealVfs.open(&path).unwrap();
        f.append(b"abc").unwrap();
        f.reserve(8).unwrap();
        f.append(b"de").unwrap();
        f.sync().unwrap();
        assert_eq!((f.len().unwrap(), fs::metadata(&path).unwrap().len()), (5, 8));
        let err = f.read_exact_at(4, &mut [0; 2]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        drop(f);
        let mut g = RealVfs.open(&path).unwrap();
        let mut all = [1; 8];
        g.read_exact_at(0, &mut all).unwrap();
        assert_eq!(&all, b"abcde\0\0\0");
        g.truncate(5).unwrap();
        g.append(b"f").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"abcdef");
    }

    #[test]
    fn rename_replaces_and_listing_shows_only_files() {
        let dir = tempfile::tempdir().unwrap();
        RealVfs.create_dir_all(&dir.path().join("sub")).unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        RealVfs.open(&a).unwrap().append(b"new").unwrap();
        RealVfs.open(&b).unwrap().append(b"old").unwrap();
        RealVfs.rename(&a, &b).unwrap();
        assert_eq!(RealVfs.list_files(dir.path()).unwrap(), ["b"]);
        let mut buf = [0; 3];
        RealVfs.open(&b).unwrap().read_exact_at(0, &mut buf).unwrap();
        assert_eq!(&buf, b"new");
    }
}
