//! An in-memory [`Vfs`] whose power can be cut: the simulator's disk.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Vfs, VfsFile};
use crate::splitmix::SplitMix64;

/// Longest garbage run a torn write leaves at the end of what it kept.
const TORN_MAX: usize = 16;

/// A simulated disk; clones are handles on the same disk.
///
/// What a crash can lose is deliberately narrower than real hardware, and these simplifications are part of
/// the contract:
/// - directory entries, file creation and removal are durable immediately; only file contents are lost;
/// - each file keeps its synced bytes plus a prefix of its unsynced appends (later appends never survive
///   without earlier ones), and the last kept append may be cut short and end in garbage (a torn write);
/// - file handles opened before a crash are dead afterwards: every call on them returns an error.
///
/// Everything a crash does is drawn from its `entropy` argument and files are visited in creation order, so a
/// run replays exactly.
#[derive(Clone, Default)]
pub struct SimVfs {
    disk: Arc<Mutex<Disk>>,
}

#[derive(Default)]
struct Disk {
    names: BTreeMap<PathBuf, u64>,
    dirs: BTreeSet<PathBuf>,
    inodes: BTreeMap<u64, Inode>,
    next_ino: u64,
    /// Bumped by every crash; handles from an earlier epoch are dead.
    epoch: u64,
}

/// A file's contents, kept while it has a name or an open handle (POSIX unlink semantics).
#[derive(Default)]
struct Inode {
    data: Vec<u8>,
    /// Length of the durable prefix of `data`.
    synced: usize,
    /// End offsets of the non-empty appends after `synced`, in order: the units a crash keeps or tears.
    pending: Vec<usize>,
    handles: usize,
    linked: bool,
}

impl SimVfs {
    pub fn new() -> SimVfs {
        SimVfs::default()
    }

    /// Simulates power loss, drawing every choice from `entropy`. See the type's docs for what survives.
    pub fn crash(&self, entropy: u64) {
        let mut disk = self.lock();
        let mut rng = SplitMix64::new(entropy);
        disk.inodes.retain(|_, inode| inode.linked);
        for inode in disk.inodes.values_mut() {
            inode.lose_power(&mut rng);
        }
        disk.epoch += 1;
    }

    /// Total bytes appended but not yet synced, across files.
    pub fn unsynced_bytes(&self) -> u64 {
        self.lock().inodes.values().map(|i| (i.data.len() - i.synced) as u64).sum()
    }

    fn lock(&self) -> MutexGuard<'_, Disk> {
        lock(&self.disk)
    }
}

/// A panic elsewhere cannot leave a `Disk` half-updated in a way later calls would trip over, so a poisoned
/// lock is still usable.
fn lock(disk: &Mutex<Disk>) -> MutexGuard<'_, Disk> {
    disk.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl fmt::Debug for SimVfs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimVfs").finish_non_exhaustive()
    }
}

impl Vfs for SimVfs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut disk = self.lock();
        if path.ancestors().any(|a| disk.names.contains_key(a)) {
            return Err(io::Error::new(io::ErrorKind::NotADirectory, format!("{} crosses a file", path.display())));
        }
        disk.dirs.extend(path.ancestors().filter(|a| !a.as_os_str().is_empty()).map(Path::to_path_buf));
        Ok(())
    }

    fn open(&self, path: &Path) -> io::Result<Box<dyn VfsFile>> {
        let mut disk = self.lock();
        if disk.dirs.contains(path) {
            return Err(io::Error::new(io::ErrorKind::IsADirectory, path.display().to_string()));
        }
        let ino = match disk.names.get(path) {
            Some(&ino) => ino,
            None => disk.create(path)?,
        };
        disk.inodes.get_mut(&ino).expect("named inode exists").handles += 1;
        Ok(Box::new(SimFile { disk: Arc::clone(&self.disk), ino, epoch: disk.epoch }))
    }

    fn exists(&self, path: &Path) -> bool {
        let disk = self.lock();
        disk.names.contains_key(path) || disk.dirs.contains(path)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut disk = self.lock();
        let ino = disk.names.remove(path).ok_or_else(|| not_found(path))?;
        disk.inodes.get_mut(&ino).expect("named inode exists").linked = false;
        disk.collect(ino);
        Ok(())
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, path.display().to_string())
}

impl Disk {
    fn create(&mut self, path: &Path) -> io::Result<u64> {
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
        if parent.is_some_and(|p| !self.dirs.contains(p)) {
            return Err(not_found(path));
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.inodes.insert(ino, Inode { linked: true, ..Inode::default() });
        self.names.insert(path.to_path_buf(), ino);
        Ok(ino)
    }

    /// Frees an inode once nothing can reach it.
    fn collect(&mut self, ino: u64) {
        if self.inodes.get(&ino).is_some_and(|i| !i.linked && i.handles == 0) {
            self.inodes.remove(&ino);
        }
    }
}

impl Inode {
    fn lose_power(&mut self, rng: &mut SplitMix64) {
        let cut = self.crash_point(rng);
        self.data.truncate(cut);
        self.synced = cut;
        self.pending.clear();
        self.handles = 0;
    }

    /// Where power loss cuts the file: after a random number of whole unsynced appends, and maybe partway into
    /// the next one, in which case the kept part may end in garbage.
    fn crash_point(&mut self, rng: &mut SplitMix64) -> usize {
        let whole = rng.below(self.pending.len() + 1);
        let start = whole.checked_sub(1).map_or(self.synced, |i| self.pending[i]);
        let Some(&end) = self.pending.get(whole) else {
            return start;
        };
        if !rng.coin() {
            return start;
        }
        let cut = start + rng.below(end - start);
        if rng.coin() {
            tear(&mut self.data[start..cut], rng);
        }
        cut
    }
}

fn tear(kept: &mut [u8], rng: &mut SplitMix64) {
    if kept.is_empty() {
        return;
    }
    let garbage = 1 + rng.below(kept.len().min(TORN_MAX));
    let from = kept.len() - garbage;
    for byte in &mut kept[from..] {
        *byte = rng.next_u64() as u8;
    }
}

struct SimFile {
    disk: Arc<Mutex<Disk>>,
    ino: u64,
    epoch: u64,
}

impl SimFile {
    fn with<T>(&self, f: impl FnOnce(&mut Inode) -> io::Result<T>) -> io::Result<T> {
        let mut disk = lock(&self.disk);
        if disk.epoch != self.epoch {
            return Err(io::Error::other("file handle opened before a simulated crash"));
        }
        f(disk.inodes.get_mut(&self.ino).expect("an open handle keeps its inode"))
    }
}

impl fmt::Debug for SimFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimFile").field("ino", &self.ino).field("epoch", &self.epoch).finish()
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        let mut disk = lock(&self.disk);
        if disk.epoch != self.epoch {
            return;
        }
        if let Some(inode) = disk.inodes.get_mut(&self.ino) {
            inode.handles -= 1;
        }
        disk.collect(self.ino);
    }
}

impl VfsFile for SimFile {
    fn len(&self) -> io::Result<u64> {
        self.with(|inode| Ok(inode.data.len() as u64))
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.with(|inode| {
            let range = usize::try_from(offset).ok().and_then(|start| Some(start..start.checked_add(buf.len())?));
            let src = range.and_then(|r| inode.data.get(r)).ok_or(io::ErrorKind::UnexpectedEof)?;
            buf.copy_from_slice(src);
            Ok(())
        })
    }

    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.with(|inode| {
            if !data.is_empty() {
                inode.data.extend_from_slice(data);
                inode.pending.push(inode.data.len());
            }
            Ok(())
        })
    }

    fn sync(&mut self) -> io::Result<()> {
        self.with(|inode| {
            inode.synced = inode.data.len();
            inode.pending.clear();
            Ok(())
        })
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        let len = usize::try_from(len).map_err(io::Error::other)?;
        self.with(|inode| {
            inode.data.resize(len, 0);
            inode.synced = len;
            inode.pending.clear();
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(vfs: &SimVfs, path: &Path) -> Vec<u8> {
        let f = vfs.open(path).unwrap();
        let mut buf = vec![0; f.len().unwrap() as usize];
        f.read_exact_at(0, &mut buf).unwrap();
        buf
    }

    /// A file with `synced` durable bytes followed by three unsynced appends; returns everything written.
    fn scenario(vfs: &SimVfs, path: &Path) -> Vec<u8> {
        let mut f = vfs.open(path).unwrap();
        f.append(b"durable-").unwrap();
        f.sync().unwrap();
        for chunk in [&b"first-append-"[..], b"second-append-", b"third-append"] {
            f.append(chunk).unwrap();
        }
        read_all(vfs, path)
    }

    #[test]
    fn crash_keeps_synced_bytes_and_a_possibly_torn_prefix_of_the_rest() {
        let path = Path::new("f");
        let boundaries = [8, 21, 35, 47];
        let (mut all_lost, mut all_kept, mut cut_mid, mut torn) = (false, false, false, false);
        for entropy in 0..500 {
            let vfs = SimVfs::new();
            let written = scenario(&vfs, path);
            assert_eq!(vfs.unsynced_bytes(), 39);
            vfs.crash(entropy);
            assert_eq!(vfs.unsynced_bytes(), 0);
            let got = read_all(&vfs, path);
            assert!((8..=written.len()).contains(&got.len()), "{entropy}");
            let append_start = *boundaries.iter().rfind(|&&b| b <= got.len()).unwrap();
            let garbage_from = got.len().saturating_sub(TORN_MAX).max(append_start);
            assert_eq!(got[..garbage_from], written[..garbage_from], "{entropy}");
            let tail_clean = got[..] == written[..got.len()];
            all_lost |= got.len() == 8;
            all_kept |= got == written;
            cut_mid |= append_start != got.len();
            torn |= !tail_clean;
        }
        assert!(all_lost && all_kept && cut_mid && torn);
    }

    #[test]
    fn crash_replays_exactly_from_its_entropy() {
        let outcome = |entropy| {
            let vfs = SimVfs::new();
            scenario(&vfs, Path::new("a"));
            scenario(&vfs, Path::new("b"));
            vfs.crash(entropy);
            (read_all(&vfs, Path::new("a")), read_all(&vfs, Path::new("b")))
        };
        for entropy in 0..50 {
            assert_eq!(outcome(entropy), outcome(entropy));
        }
    }

    #[test]
    fn handles_from_before_a_crash_are_dead() {
        let vfs = SimVfs::new();
        let mut old = vfs.open(Path::new("f")).unwrap();
        old.append(b"x").unwrap();
        old.sync().unwrap();
        vfs.crash(1);
        assert!(old.len().is_err());
        assert!(old.append(b"y").is_err());
        drop(old);
        assert_eq!(read_all(&vfs, Path::new("f")), b"x");
    }

    #[test]
    fn truncate_is_durable_and_reads_past_the_end_fail() {
        let vfs = SimVfs::new();
        let mut f = vfs.open(Path::new("f")).unwrap();
        f.append(b"abcdef").unwrap();
        f.truncate(4).unwrap();
        assert_eq!(vfs.unsynced_bytes(), 0);
        let mut buf = [0; 2];
        assert_eq!(f.read_exact_at(3, &mut buf).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(f.read_exact_at(u64::MAX, &mut buf).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        vfs.crash(9);
        assert_eq!(read_all(&vfs, Path::new("f")), b"abcd");
    }

    #[test]
    fn directories_must_exist_and_removed_files_live_while_open() {
        let vfs = SimVfs::new();
        let path = Path::new("/d/e/f");
        assert_eq!(vfs.open(path).unwrap_err().kind(), io::ErrorKind::NotFound);
        vfs.create_dir_all(Path::new("/d/e")).unwrap();
        assert!(vfs.exists(Path::new("/d")));
        let mut f = vfs.open(path).unwrap();
        f.append(b"kept").unwrap();
        vfs.remove_file(path).unwrap();
        assert!(!vfs.exists(path));
        assert_eq!(vfs.remove_file(path).unwrap_err().kind(), io::ErrorKind::NotFound);
        let mut buf = [0; 4];
        f.read_exact_at(0, &mut buf).unwrap();
        assert_eq!(&buf, b"kept");
        drop(f);
        assert_eq!(vfs.unsynced_bytes(), 0);
        assert_eq!(vfs.open(path).unwrap().len().unwrap(), 0);
    }
}
