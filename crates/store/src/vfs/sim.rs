//! An in-memory [`Vfs`] whose power can be cut: the simulator's disk.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::faults::Faults;
use super::{Vfs, VfsFile};
use meridian_core::splitmix::SplitMix64;
use meridian_core::SyncJob;

/// Longest garbage run a torn write leaves at the end of what it kept.
const TORN_MAX: usize = 16;

/// A simulated disk; clones are handles on the same disk.
///
/// What a crash can lose is deliberately narrower than real hardware, and these simplifications are part of
/// the contract:
/// - directory entries, file creation, removal and renames are durable immediately; only file contents are lost;
/// - each file keeps its synced bytes plus a prefix of its unsynced appends (later appends never survive
///   without earlier ones), and the last kept append may be cut short and end in garbage (a torn write);
/// - reserved space ([`VfsFile::reserve`]) follows what was kept as zeros, up to the last synced reservation
///   or, by a coin toss, the latest one; a file opened again with no other handle open also reads its
///   reservation as zeros after its data, as a real file does (a second handle opened while one is open does
///   not see them: the simulator serves one writer per file, which is all the stores use);
/// - file handles opened before a crash are dead afterwards: every call on them returns an error.
///
/// Everything a crash does is drawn from its `entropy` argument and files are visited in creation order, so a
/// run replays exactly.
///
/// Faults beyond crashes, configurable at run time and deterministic from their seeds: bit flips in what reads
/// return ([`SimVfs::set_read_flips`]), a capacity past which appends fail with `StorageFull`
/// ([`SimVfs::set_capacity`]), and a power cut after a number of mutating calls ([`SimVfs::cut_power_after`]),
/// which lets a test stop a multi-step operation between any two of its writes.
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
    faults: Faults,
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
    /// Bytes returned by reads over the file's life: lets tests check which files an operation touched.
    read_bytes: u64,
    /// The file's size on disk when space is reserved beyond `data`: zeros fill the gap.
    reserved: usize,
    /// `reserved` as of the last sync.
    reserved_synced: usize,
    /// Truncations so far: an fsync job taken before one covers nothing after it.
    truncations: u64,
}

impl SimVfs {
    pub fn new() -> SimVfs {
        SimVfs::default()
    }

    /// Simulates power loss, drawing every choice from `entropy`. See the type's docs for what survives. Power
    /// comes back on: a pending [`SimVfs::cut_power_after`] is cleared.
    pub fn crash(&self, entropy: u64) {
        let mut disk = self.lock();
        let mut rng = SplitMix64::new(entropy);
        disk.inodes.retain(|_, inode| inode.linked);
        for inode in disk.inodes.values_mut() {
            inode.lose_power(&mut rng);
        }
        disk.epoch += 1;
        disk.faults.cut_power_after(None);
    }

    /// Total bytes appended but not yet synced, across files.
    pub fn unsynced_bytes(&self) -> u64 {
        self.lock().inodes.values().map(|i| (i.data.len() - i.synced) as u64).sum()
    }

    /// Makes each read flip one random bit of what it returns with probability `chance` (0 turns flips off),
    /// drawing from a generator seeded with `seed`. The stored bytes stay intact, as with a flaky bus or cable.
    pub fn set_read_flips(&self, chance: f64, seed: u64) {
        self.lock().faults.set_read_flips(chance, seed);
    }

    /// Limits the bytes all files together may hold (`None`: unlimited). An append that does not fit writes what
    /// fits and fails with `io::ErrorKind::StorageFull`, like a real `write` on a full disk.
    pub fn set_capacity(&self, bytes: Option<u64>) {
        self.lock().faults.set_capacity(bytes);
    }

    /// Lets `ops` more mutating calls (create, append, sync, truncate, rename, remove) succeed and fails every
    /// one after that without effect, as if power had been cut then; [`SimVfs::crash`] then decides what the
    /// disk kept. `None` cancels.
    pub fn cut_power_after(&self, ops: Option<u64>) {
        self.lock().faults.cut_power_after(ops);
    }

    /// Bytes the disk holds, across files (including removed files that are still open).
    pub fn used_bytes(&self) -> u64 {
        self.lock().used()
    }

    /// Bytes read so far from the file now named `path` (0 if there is none).
    pub fn read_bytes(&self, path: &Path) -> u64 {
        let disk = self.lock();
        disk.names.get(path).and_then(|ino| disk.inodes.get(ino)).map_or(0, |inode| inode.read_bytes)
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
        if disk.dirs.contains(path) {
            return Ok(());
        }
        disk.faults.charge()?;
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
        let inode = disk.inodes.get_mut(&ino).expect("named inode exists");
        if inode.handles == 0 {
            inode.read_reservation();
        }
        inode.handles += 1;
        Ok(Box::new(SimFile { disk: Arc::clone(&self.disk), ino, epoch: disk.epoch }))
    }

    fn exists(&self, path: &Path) -> bool {
        let disk = self.lock();
        disk.names.contains_key(path) || disk.dirs.contains(path)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut disk = self.lock();
        if !disk.names.contains_key(path) {
            return Err(not_found(path));
        }
        disk.faults.charge()?;
        disk.unlink(path);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut disk = self.lock();
        let &ino = disk.names.get(from).ok_or_else(|| not_found(from))?;
        if to.parent().filter(|p| !p.as_os_str().is_empty()).is_some_and(|p| !disk.dirs.contains(p)) {
            return Err(not_found(to));
        }
        disk.faults.charge()?;
        disk.names.remove(from);
        if disk.names.contains_key(to) {
            disk.unlink(to);
        }
        disk.names.insert(to.to_path_buf(), ino);
        Ok(())
    }

    fn list_files(&self, dir: &Path) -> io::Result<Vec<String>> {
        let disk = self.lock();
        if !disk.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let in_dir = disk.names.keys().filter(|p| p.parent() == Some(dir));
        Ok(in_dir.filter_map(|p| p.file_name()?.to_str().map(str::to_owned)).collect())
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
        self.faults.charge()?;
        let ino = self.next_ino;
        self.next_ino += 1;
        self.inodes.insert(ino, Inode { linked: true, ..Inode::default() });
        self.names.insert(path.to_path_buf(), ino);
        Ok(ino)
    }

    fn unlink(&mut self, path: &Path) {
        let ino = self.names.remove(path).expect("caller checked the name exists");
        self.inode(ino).linked = false;
        self.collect(ino);
    }

    fn inode(&mut self, ino: u64) -> &mut Inode {
        self.inodes.get_mut(&ino).expect("a name or an open handle keeps its inode")
    }

    fn used(&self) -> u64 {
        self.inodes.values().map(|i| i.data.len().max(i.reserved) as u64).sum()
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
        if self.reserved != self.reserved_synced && rng.coin() {
            self.reserved = self.reserved_synced;
        }
        // The zeros a crash leaves after the data are on disk already: durable, not a pending append.
        self.read_reservation();
        self.pending.clear();
        self.synced = self.data.len();
        self.reserved_synced = self.reserved;
        self.handles = 0;
    }

    /// Makes durable what the file held when it was `len` bytes long with `reserved` bytes reserved (an fsync
    /// taken then), unless it was truncated since: the truncation was durable itself, and bytes appended after
    /// it were not there to be covered.
    fn sync_prefix(&mut self, len: usize, reserved: usize, truncations: u64) {
        if truncations != self.truncations {
            return;
        }
        self.synced = self.synced.max(len);
        let synced = self.synced;
        self.pending.retain(|&end| end > synced);
        self.reserved_synced = self.reserved_synced.max(reserved);
    }

    /// Reserved bytes not yet filled by appends.
    fn spare(&self) -> usize {
        self.reserved.saturating_sub(self.data.len())
    }

    /// What a new handle on a file with reserved space sees: the zeros after the data are part of it.
    fn read_reservation(&mut self) {
        if self.reserved > self.data.len() {
            self.data.resize(self.reserved, 0);
            self.pending.push(self.data.len());
        }
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
    fn with<T>(&self, f: impl FnOnce(&mut Disk) -> io::Result<T>) -> io::Result<T> {
        let mut disk = lock(&self.disk);
        if disk.epoch != self.epoch {
            return Err(io::Error::other("file handle opened before a simulated crash"));
        }
        f(&mut disk)
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
        self.with(|disk| Ok(disk.inode(self.ino).data.len() as u64))
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.with(|disk| {
            let inode = disk.inode(self.ino);
            let range = usize::try_from(offset).ok().and_then(|start| Some(start..start.checked_add(buf.len())?));
            let src = range.and_then(|r| inode.data.get(r)).ok_or(io::ErrorKind::UnexpectedEof)?;
            buf.copy_from_slice(src);
            inode.read_bytes += buf.len() as u64;
            disk.faults.maybe_flip(buf);
            Ok(())
        })
    }

    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.with(|disk| {
            disk.faults.charge()?;
            // Reserved space the append fills is already counted as used.
            let spare = disk.inode(self.ino).spare() as u64;
            let room = disk.faults.capacity().map(|cap| cap.saturating_sub(disk.used()) + spare);
            let fits = room.map_or(data.len(), |room| data.len().min(usize::try_from(room).unwrap_or(usize::MAX)));
            let inode = disk.inode(self.ino);
            if fits > 0 {
                inode.data.extend_from_slice(&data[..fits]);
                inode.pending.push(inode.data.len());
            }
            if fits < data.len() {
                return Err(io::Error::new(io::ErrorKind::StorageFull, "simulated disk is full"));
            }
            Ok(())
        })
    }

    fn sync(&mut self) -> io::Result<()> {
        self.with(|disk| {
            disk.faults.charge()?;
            let inode = disk.inode(self.ino);
            inode.sync_prefix(inode.data.len(), inode.reserved, inode.truncations);
            Ok(())
        })
    }

    /// The job checks its epoch and charges the power-cut budget when it runs, as `sync` does when called.
    fn begin_sync(&mut self) -> io::Result<Option<SyncJob>> {
        let taken = self.with(|disk| {
            let inode = disk.inode(self.ino);
            Ok((inode.data.len(), inode.reserved, inode.truncations))
        })?;
        let (disk, ino, epoch) = (Arc::clone(&self.disk), self.ino, self.epoch);
        Ok(Some(Box::new(move || {
            let mut disk = lock(&disk);
            if disk.epoch != epoch {
                return Err(io::Error::other("fsync taken before a simulated crash"));
            }
            disk.faults.charge()?;
            // A file removed and closed since has nothing left to make durable.
            if let Some(inode) = disk.inodes.get_mut(&ino) {
                inode.sync_prefix(taken.0, taken.1, taken.2);
            }
            Ok(())
        })))
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        let len = usize::try_from(len).map_err(io::Error::other)?;
        self.with(|disk| {
            disk.faults.charge()?;
            let inode = disk.inode(self.ino);
            inode.data.resize(len, 0);
            inode.synced = len;
            inode.pending.clear();
            (inode.reserved, inode.reserved_synced) = (0, 0);
            inode.truncations += 1;
            Ok(())
        })
    }

    fn reserve(&mut self, len: u64) -> io::Result<()> {
        let len = usize::try_from(len).map_err(io::Error::other)?;
        self.with(|disk| {
            disk.faults.charge()?;
            let inode = disk.inode(self.ino);
            let grows = len.saturating_sub(inode.data.len() + inode.spare());
            if disk.faults.capacity().is_some_and(|cap| disk.used() + grows as u64 > cap) {
                return Err(io::Error::new(io::ErrorKind::StorageFull, "simulated disk is full"));
            }
            let inode = disk.inode(self.ino);
            inode.reserved = inode.reserved.max(len);
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
    fn a_sync_job_makes_durable_what_was_there_when_it_was_taken_and_no_more() {
        let path = Path::new("f");
        let (mut kept_later, mut lost_later) = (false, false);
        for entropy in 0..200 {
            let vfs = SimVfs::new();
            let mut f = vfs.open(path).unwrap();
            f.append(b"covered-").unwrap();
            let job = f.begin_sync().unwrap().unwrap();
            f.append(b"after-the-job").unwrap();
            job().unwrap();
            assert_eq!(vfs.unsynced_bytes(), 13);
            vfs.crash(entropy);
            let got = read_all(&vfs, path);
            assert!(got.starts_with(b"covered-"), "{entropy}: {got:?}");
            kept_later |= got == b"covered-after-the-job";
            lost_later |= got == b"covered-";
        }
        assert!(kept_later && lost_later);
    }

    #[test]
    fn a_sync_job_covers_nothing_after_a_truncation_or_a_crash() {
        let vfs = SimVfs::new();
        let mut f = vfs.open(Path::new("f")).unwrap();
        f.append(b"long enough").unwrap();
        let job = f.begin_sync().unwrap().unwrap();
        f.truncate(4).unwrap();
        f.append(b" appended after the cut").unwrap();
        job().unwrap();
        assert_eq!(vfs.unsynced_bytes(), 23, "only the truncation's 4 bytes are durable");

        let job = f.begin_sync().unwrap().unwrap();
        vfs.crash(3);
        assert!(job().is_err());
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
    fn rename_replaces_the_target_and_keeps_open_handles() {
        let vfs = SimVfs::new();
        vfs.create_dir_all(Path::new("/d")).unwrap();
        let mut tmp = vfs.open(Path::new("/d/x.tmp")).unwrap();
        tmp.append(b"new").unwrap();
        vfs.open(Path::new("/d/x")).unwrap().append(b"old").unwrap();
        vfs.rename(Path::new("/d/x.tmp"), Path::new("/d/x")).unwrap();
        assert_eq!(vfs.list_files(Path::new("/d")).unwrap(), ["x"]);
        tmp.append(b"er").unwrap();
        assert_eq!(read_all(&vfs, Path::new("/d/x")), b"newer");
        assert_eq!(vfs.rename(Path::new("/d/x.tmp"), Path::new("/d/y")).unwrap_err().kind(), io::ErrorKind::NotFound);
        assert_eq!(vfs.list_files(Path::new("/nope")).unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn read_flips_damage_what_is_read_not_what_is_stored() {
        let vfs = SimVfs::new();
        let mut f = vfs.open(Path::new("f")).unwrap();
        f.append(&[0; 64]).unwrap();
        vfs.set_read_flips(1.0, 5);
        let flipped = read_all(&vfs, Path::new("f"));
        assert_eq!(flipped.iter().map(|b| b.count_ones()).sum::<u32>(), 1);
        vfs.set_read_flips(0.0, 0);
        assert_eq!(read_all(&vfs, Path::new("f")), [0; 64]);
        assert_eq!(vfs.read_bytes(Path::new("f")), 128);
    }

    #[test]
    fn reserved_space_is_zeros_after_the_data_once_reopened_or_crashed() {
        let path = Path::new("f");
        let vfs = SimVfs::new();
        let mut f = vfs.open(path).unwrap();
        f.append(b"abc").unwrap();
        f.reserve(8).unwrap();
        f.append(b"de").unwrap();
        assert_eq!(f.len().unwrap(), 5, "this handle sees only its data");
        assert_eq!(f.read_exact_at(5, &mut [0; 1]).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(vfs.used_bytes(), 8);
        f.sync().unwrap();
        drop(f);
        assert_eq!(read_all(&vfs, path), b"abcde\0\0\0", "a new handle reads the reservation");

        let (mut kept_reservation, mut lost_reservation) = (false, false);
        for entropy in 0..100 {
            let vfs = SimVfs::new();
            let mut f = vfs.open(path).unwrap();
            f.append(b"abc").unwrap();
            f.reserve(6).unwrap();
            f.sync().unwrap();
            f.reserve(10).unwrap();
            f.append(b"defgh").unwrap();
            vfs.crash(entropy);
            let got = read_all(&vfs, path);
            assert!(got.len() >= 6 && got[..3] == *b"abc", "{entropy}: the synced data and reservation stay");
            kept_reservation |= got.len() == 10 && got[3..].iter().all(|&b| b == 0);
            lost_reservation |= got == b"abc\0\0\0";
        }
        assert!(kept_reservation && lost_reservation);
    }

    #[test]
    fn truncate_drops_the_reservation_and_a_reservation_needs_room() {
        let vfs = SimVfs::new();
        let mut f = vfs.open(Path::new("f")).unwrap();
        f.append(b"abc").unwrap();
        f.reserve(100).unwrap();
        f.truncate(2).unwrap();
        assert_eq!(vfs.used_bytes(), 2);
        drop(f);
        assert_eq!(read_all(&vfs, Path::new("f")), b"ab");
        let mut f = vfs.open(Path::new("f")).unwrap();
        vfs.set_capacity(Some(10));
        assert_eq!(f.reserve(11).unwrap_err().kind(), io::ErrorKind::StorageFull);
        f.reserve(10).unwrap();
        f.append(b"12345678").unwrap();
        assert_eq!(vfs.used_bytes(), 10, "appends fill the reservation");
    }

    #[test]
    fn a_full_disk_keeps_what_fits_and_frees_space_on_truncate() {
        let vfs = SimVfs::new();
        let mut f = vfs.open(Path::new("f")).unwrap();
        vfs.set_capacity(Some(10));
        f.append(b"12345678").unwrap();
        assert_eq!(f.append(b"abcd").unwrap_err().kind(), io::ErrorKind::StorageFull);
        assert_eq!(read_all(&vfs, Path::new("f")), b"12345678ab");
        f.truncate(8).unwrap();
        f.append(b"xy").unwrap();
        assert_eq!(vfs.used_bytes(), 10);
        vfs.set_capacity(None);
        f.append(b"z").unwrap();
    }

    #[test]
    fn a_power_cut_fails_every_later_mutation_until_the_crash() {
        let vfs = SimVfs::new();
        let mut f = vfs.open(Path::new("f")).unwrap();
        vfs.cut_power_after(Some(2));
        f.append(b"a").unwrap();
        f.sync().unwrap();
        assert!(f.append(b"b").is_err());
        assert!(vfs.open(Path::new("g")).is_err());
        assert!(vfs.remove_file(Path::new("f")).is_err());
        assert_eq!(read_all(&vfs, Path::new("f")), b"a");
        vfs.crash(0);
        vfs.open(Path::new("f")).unwrap().append(b"c").unwrap();
        assert_eq!(read_all(&vfs, Path::new("f")), b"ac");
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
