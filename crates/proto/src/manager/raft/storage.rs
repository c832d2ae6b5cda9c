//! [`RaftLog`]: raft-rs's [`Storage`], kept in memory and in one append-only file of checksummed frames.
//!
//! The file holds frames (see `frame.rs`) of seven kinds, replayed in order on open:
//! - hard state (term, vote, commit) and conf state (the voter set), protobuf-encoded; the last one wins;
//! - an entry, which must extend the log by exactly one index;
//! - a truncation: entries from the given index on are dropped (raft overwrote a conflicting suffix);
//! - a snapshot (metadata and the application's state bytes), which replaces every entry before it;
//! - a batch: records of the first four kinds nested in one frame, so that a crash keeps all or none of them;
//! - first in every file written since files named it, the file's format version (`KIND_FORMAT`); a file of
//!   another version is refused with both named.
//!   [`RaftLog::save`] writes what one raft Ready persists as a batch: were the entries and the hard state
//!   separate frames, a torn write could keep entries of a term the hard state never reached (raft-rs refuses
//!   to restart from that), or a commit index without the entries it covers.
//!
//! Every write goes to the file at once; nothing is durable until [`RaftLog::sync`]. A snapshot, whether taken
//! locally by [`RaftLog::compact`] or received from the leader by [`RaftLog::apply_snapshot`], rewrites the
//! whole file: the new contents go to a temporary file, which is synced and then renamed over the old one.
//! A crash before the rename leaves the old file whole (the temporary is removed on open); after it, the new
//! one. Open cuts a torn tail off; damage followed by good frames is reported, never silently dropped.
//!
//! After any error from a writing method the in-memory state and the file may disagree: drop the log and
//! open it again (fail-stop), as after a crash.

use std::cmp;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::map::{format1, older_map, ENCODED_AS_CURRENT, MAP_FORMAT};
use meridian_store::{Vfs, VfsFile};
use raft::eraftpb::{ConfState, Entry, EntryType, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState, Storage, StorageError};

use super::frame::{self, Frame, Tail};

const LOG_FILE: &str = "raft.log";
/// Where a rewrite builds the next log file; a leftover one is an unfinished rewrite and is removed on open.
const TMP_FILE: &str = "raft.log.tmp";

const KIND_HARD_STATE: u8 = 1;
const KIND_CONF_STATE: u8 = 2;
const KIND_ENTRY: u8 = 3;
const KIND_TRUNCATE: u8 = 4;
const KIND_SNAPSHOT: u8 = 5;
const KIND_BATCH: u8 = 6;
/// The version of what the file holds ([`MAP_FORMAT`], the encoding of the map commands in its entries and the
/// map in its snapshot): the first frame of every file written since files named it. A file without one was
/// written before, in version 1. A file of an older version is upgraded on open: its entries and snapshot are
/// re-encoded and the file rewritten, atomically, in the current version.
pub(super) const KIND_FORMAT: u8 = 7;

/// Reads of the file before a bad frame is believed: a bit flipped on the way from the disk must not make
/// recovery cut synced entries off as if they were a torn tail.
const READ_ATTEMPTS: usize = 3;

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("raft log I/O: {0}")]
    Io(#[from] io::Error),
    /// Damage that a crash cannot explain, or frames that contradict each other: the node must not run on.
    #[error("raft log {path} is corrupt at offset {offset}: {reason}")]
    Corrupt { path: String, offset: u64, reason: String },
}

/// What [`RaftLog::open`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    pub frames: u64,
    pub kept_bytes: u64,
    /// Bytes of a torn tail cut off the file.
    pub dropped_bytes: u64,
    /// Why the tail was cut; `None` if the file was whole.
    pub reason: Option<String>,
}

/// The durable Raft log of one manager replica. See the module docs for the file format and crash safety.
#[derive(Debug)]
pub struct RaftLog {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    file: Box<dyn VfsFile>,
    hard_state: HardState,
    conf_state: ConfState,
    /// The latest snapshot, with the application's state; index 0 while there is none.
    snapshot: Snapshot,
    /// The entries after the snapshot: `entries[i].index == snapshot index + 1 + i`.
    entries: Vec<Entry>,
    recovery: Recovery,
    /// The version the file was written in, until `recover` upgrades it.
    format: u8,
}

impl RaftLog {
    /// Opens the log in `dir` (creating an empty one), replays it and cuts off a torn tail.
    pub fn open(vfs: Arc<dyn Vfs>, dir: &Path) -> Result<RaftLog, LogError> {
        vfs.create_dir_all(dir)?;
        let tmp = dir.join(TMP_FILE);
        if vfs.exists(&tmp) {
            vfs.remove_file(&tmp)?;
        }
        let file = vfs.open(&dir.join(LOG_FILE))?;
        let mut log = RaftLog {
            vfs,
            dir: dir.to_path_buf(),
            file,
            hard_state: HardState::default(),
            conf_state: ConfState::default(),
            snapshot: Snapshot::default(),
            entries: Vec::new(),
            recovery: Recovery::default(),
            format: MAP_FORMAT,
        };
        log.recover()?;
        Ok(log)
    }

    /// Replays the file into the (empty) in-memory state and cuts off a torn tail.
    fn recover(&mut self) -> Result<(), LogError> {
        let buf = read_believed(self.file.as_ref())?;
        let path = self.dir.join(LOG_FILE).display().to_string();
        let corrupt = |offset, reason| LogError::Corrupt { path: path.clone(), offset, reason };
        let (frames, tail) = frame::scan(&buf);
        if frames.first().is_some_and(|f| f.kind != KIND_FORMAT) {
            self.format = 1;
        }
        for f in &frames {
            self.replay(f).map_err(|reason| corrupt(f.offset, reason))?;
        }
        if frames.is_empty() && buf.is_empty() {
            // A new file names its version first; if the write is lost, the next open finds it empty again.
            let mut header = Vec::new();
            frame::encode(KIND_FORMAT, &[MAP_FORMAT], &mut header);
            self.file.append(&header)?;
        }
        self.recovery = Recovery { frames: frames.len() as u64, kept_bytes: buf.len() as u64, ..Recovery::default() };
        match tail {
            Tail::Clean => {}
            Tail::Torn { at, reason } => self.cut_tail(at, buf.len() as u64, reason)?,
            Tail::Corrupt { at, reason } => return Err(corrupt(at, reason)),
        }
        self.check_hard_state().map_err(|reason| corrupt(self.recovery.kept_bytes, reason))?;
        if self.format < MAP_FORMAT {
            self.upgrade().map_err(|reason| corrupt(0, reason))?;
            self.format = MAP_FORMAT;
            self.rewrite()?;
        }
        Ok(())
    }

    /// Re-encodes, in memory, the map commands of the entries (of format 1, the one whose commands differ from
    /// [`MAP_FORMAT`]'s) and the map of the snapshot; `rewrite` then makes it the file.
    fn upgrade(&mut self) -> Result<(), String> {
        let old = self.format;
        let why = |what: &str, e: postcard::Error| format!("{what} of raft log format {old} does not decode: {e}");
        let commands_as_current = ENCODED_AS_CURRENT.contains(&old);
        for e in self.entries.iter_mut().filter(|e| e.get_entry_type() == EntryType::EntryNormal) {
            if !e.data.is_empty() && !commands_as_current {
                let cmd = format1::command(&e.data).map_err(|err| why(&format!("entry {}", e.index), err))?;
                e.data = postcard::to_allocvec(&cmd).expect("commands serialize").into();
            }
        }
        if !self.snapshot.get_data().is_empty() {
            let data = self.snapshot.get_data();
            let map = older_map(old, data).map_err(|err| why("the snapshot", err))?;
            self.snapshot.set_data(postcard::to_allocvec(&map).expect("maps serialize").into());
        }
        Ok(())
    }

    /// Writes the voter set of a new cluster into an empty log. Durable once it returns.
    pub fn bootstrap(&mut self, conf_state: ConfState) -> io::Result<()> {
        assert!(self.is_blank(), "bootstrap of a raft log that already has state");
        let mut buf = Vec::new();
        encode(KIND_CONF_STATE, &conf_state, &mut buf);
        self.file.append(&buf)?;
        self.conf_state = conf_state;
        self.sync()
    }

    /// Whether the log has never been bootstrapped nor received a snapshot.
    pub fn is_blank(&self) -> bool {
        self.conf_state == ConfState::default() && self.snapshot_index() == 0 && self.entries.is_empty()
    }

    /// Writes what a raft Ready persists, its entries and then its hard state, as one batch frame (see the
    /// module docs). An entry at or below the last index first truncates the conflicting suffix, recorded as
    /// its own frame in the batch so replay sees the same overwrite.
    pub fn save(&mut self, entries: &[Entry], hs: Option<&HardState>) -> io::Result<()> {
        let mut batch = Vec::new();
        self.stage_entries(entries, &mut batch);
        if let Some(hs) = hs {
            frame::encode_nested(KIND_HARD_STATE, &to_bytes(hs), &mut batch);
            self.hard_state = hs.clone();
        }
        if batch.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::new();
        frame::encode(KIND_BATCH, &batch, &mut buf);
        self.file.append(&buf)
    }

    fn stage_entries(&mut self, entries: &[Entry], batch: &mut Vec<u8>) {
        let Some(first) = entries.first() else {
            return;
        };
        assert!(first.index > self.snapshot_index(), "raft overwrote compacted entries at {}", first.index);
        assert!(first.index <= self.last() + 1, "gap: entry {} after last index {}", first.index, self.last());
        if first.index <= self.last() {
            frame::encode_nested(KIND_TRUNCATE, &first.index.to_be_bytes(), batch);
            self.entries.truncate((first.index - self.first()) as usize);
        }
        for e in entries {
            frame::encode_nested(KIND_ENTRY, &to_bytes(e), batch);
        }
        self.entries.extend_from_slice(entries);
    }

    /// Records a higher commit index. It need not be synced: it only tells a restarted node how far it may
    /// re-apply before hearing from the leader, and it never exceeds the entries written before it.
    pub fn set_commit(&mut self, commit: u64) -> io::Result<()> {
        assert!(commit <= self.last(), "commit {commit} beyond last index {}", self.last());
        self.hard_state.commit = commit;
        let mut buf = Vec::new();
        encode(KIND_HARD_STATE, &self.hard_state, &mut buf);
        self.file.append(&buf)
    }

    /// Replaces the whole log by a snapshot from the leader (raft only sends one newer than what we have).
    pub fn apply_snapshot(&mut self, snapshot: Snapshot) -> io::Result<()> {
        let meta = snapshot.get_metadata();
        assert!(meta.index > self.snapshot_index(), "snapshot {} is not newer than ours", meta.index);
        self.hard_state.term = cmp::max(self.hard_state.term, meta.term);
        self.hard_state.commit = cmp::max(self.hard_state.commit, meta.index);
        self.conf_state = meta.get_conf_state().clone();
        self.entries.clear();
        self.snapshot = snapshot;
        self.rewrite()
    }

    /// Replaces the committed entries up to `index` by the application's state after applying them, and
    /// rewrites the file, so the log does not grow forever. Returns whether anything was compacted; an index
    /// beyond the commit index is refused (`InvalidInput`), since only applied entries can be summarised.
    pub fn compact(&mut self, index: u64, conf_state: ConfState, state: Vec<u8>) -> io::Result<bool> {
        if index <= self.snapshot_index() {
            return Ok(false);
        }
        if index > self.hard_state.commit {
            let msg = format!("compaction to {index} beyond commit index {}", self.hard_state.commit);
            return Err(io::Error::new(io::ErrorKind::InvalidInput, msg));
        }
        let term = self.entries[(index - self.first()) as usize].term;
        self.entries.drain(..=((index - self.first()) as usize));
        let mut snapshot = Snapshot { data: state.into(), ..Snapshot::default() };
        let meta = snapshot.mut_metadata();
        (meta.index, meta.term) = (index, term);
        meta.set_conf_state(conf_state.clone());
        self.snapshot = snapshot;
        self.conf_state = conf_state;
        self.rewrite()?;
        Ok(true)
    }

    /// Makes every write so far durable.
    pub fn sync(&mut self) -> io::Result<()> {
        self.file.sync()
    }

    /// Bytes in the log file, unsynced writes included.
    pub fn file_len(&self) -> io::Result<u64> {
        self.file.len()
    }

    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    pub fn hard_state(&self) -> &HardState {
        &self.hard_state
    }

    /// The latest snapshot (index 0 and no data while there is none).
    pub fn last_snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    pub fn snapshot_index(&self) -> u64 {
        self.snapshot.get_metadata().index
    }

    fn first(&self) -> u64 {
        self.snapshot_index() + 1
    }

    fn last(&self) -> u64 {
        self.snapshot_index() + self.entries.len() as u64
    }

    fn last_term(&self) -> u64 {
        self.entries.last().map_or(self.snapshot.get_metadata().term, |e| e.term)
    }

    /// Applies one frame to the in-memory state, refusing frames that contradict what came before.
    fn replay(&mut self, f: &Frame<'_>) -> Result<(), String> {
        match f.kind {
            KIND_HARD_STATE => self.hard_state = parse(f.payload)?,
            KIND_CONF_STATE => self.conf_state = parse(f.payload)?,
            KIND_ENTRY => self.replay_entry(parse(f.payload)?)?,
            KIND_TRUNCATE => self.replay_truncate(f.payload)?,
            KIND_SNAPSHOT => self.replay_snapshot(parse(f.payload)?)?,
            KIND_BATCH => self.replay_batch(f)?,
            KIND_FORMAT if f.offset == 0 => self.format = check_format(f.payload)?,
            kind => return Err(format!("unknown frame kind {kind}")),
        }
        Ok(())
    }

    /// Replays the records nested in a batch; its checksum covered them, so any flaw in them is corruption.
    fn replay_batch(&mut self, batch: &Frame<'_>) -> Result<(), String> {
        for record in frame::parse_nested(batch)? {
            if record.kind == KIND_BATCH || record.kind == KIND_SNAPSHOT {
                return Err(format!("record of kind {} nested in a batch", record.kind));
            }
            self.replay(&record)?;
        }
        Ok(())
    }

    fn replay_entry(&mut self, e: Entry) -> Result<(), String> {
        if e.index != self.last() + 1 || e.term < self.last_term() {
            let (index, term) = (self.last(), self.last_term());
            return Err(format!("entry {}/{} does not follow entry {index}/{term}", e.index, e.term));
        }
        self.entries.push(e);
        Ok(())
    }

    fn replay_truncate(&mut self, payload: &[u8]) -> Result<(), String> {
        let from = u64::from_be_bytes(payload.try_into().map_err(|_| "truncation frame is not 8 bytes")?);
        if !(self.first()..=self.last()).contains(&from) {
            return Err(format!("truncation at {from} outside the log [{}, {}]", self.first(), self.last()));
        }
        self.entries.truncate((from - self.first()) as usize);
        Ok(())
    }

    fn replay_snapshot(&mut self, snapshot: Snapshot) -> Result<(), String> {
        let index = snapshot.get_metadata().index;
        if index <= self.snapshot_index() {
            return Err(format!("snapshot {index} is not newer than snapshot {}", self.snapshot_index()));
        }
        self.conf_state = snapshot.get_metadata().get_conf_state().clone();
        self.entries.clear();
        self.snapshot = snapshot;
        Ok(())
    }

    /// Checks what raft-rs assumes of a restarted log: a commit index within [snapshot index, last index] and
    /// a term no older than the last entry's. The writes rule both out (a commit index only after the entries
    /// it covers; entries of a new term in the same batch as that term), so a violation means the file lies.
    fn check_hard_state(&self) -> Result<(), String> {
        let HardState { commit, term, .. } = self.hard_state;
        let (first, last) = (self.snapshot_index(), self.last());
        if !(first..=last).contains(&commit) {
            return Err(format!("commit index {commit} outside the log's [{first}, {last}]"));
        }
        if term < self.last_term() {
            return Err(format!("term {term} older than the last entry's term {}", self.last_term()));
        }
        Ok(())
    }

    fn cut_tail(&mut self, at: u64, len: u64, reason: String) -> io::Result<()> {
        self.file.truncate(at)?;
        self.recovery.kept_bytes = at;
        self.recovery.dropped_bytes = len - at;
        self.recovery.reason = Some(reason);
        Ok(())
    }

    /// Writes the whole state to a temporary file, syncs it and renames it over the log: crash-safe at every
    /// step, since the rename is atomic and durable.
    fn rewrite(&mut self) -> io::Result<()> {
        let tmp = self.dir.join(TMP_FILE);
        if self.vfs.exists(&tmp) {
            self.vfs.remove_file(&tmp)?;
        }
        let mut buf = Vec::new();
        frame::encode(KIND_FORMAT, &[MAP_FORMAT], &mut buf);
        if self.snapshot_index() > 0 {
            encode(KIND_SNAPSHOT, &self.snapshot, &mut buf);
        }
        encode(KIND_CONF_STATE, &self.conf_state, &mut buf);
        encode(KIND_HARD_STATE, &self.hard_state, &mut buf);
        for e in &self.entries {
            encode(KIND_ENTRY, e, &mut buf);
        }
        let mut file = self.vfs.open(&tmp)?;
        file.append(&buf)?;
        file.sync()?;
        self.vfs.rename(&tmp, &self.dir.join(LOG_FILE))?;
        self.file = file;
        Ok(())
    }
}

impl Storage for RaftLog {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(self.hard_state.clone(), self.conf_state.clone()))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low < self.first() {
            return Err(StorageError::Compacted.into());
        }
        if high > self.last() + 1 || low > high {
            return Err(StorageError::Unavailable.into());
        }
        let offset = self.first();
        let mut entries = self.entries[(low - offset) as usize..(high - offset) as usize].to_vec();
        raft::util::limit_size(&mut entries, max_size.into());
        Ok(entries)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        if idx == self.snapshot_index() {
            return Ok(self.snapshot.get_metadata().term);
        }
        if idx < self.first() {
            return Err(StorageError::Compacted.into());
        }
        if idx > self.last() {
            return Err(StorageError::Unavailable.into());
        }
        Ok(self.entries[(idx - self.first()) as usize].term)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.first())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.last())
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        if self.snapshot_index() < request_index {
            return Err(StorageError::SnapshotTemporarilyUnavailable.into());
        }
        Ok(self.snapshot.clone())
    }
}

/// Reads the whole file, reading again (up to [`READ_ATTEMPTS`] times) while the scan does not end cleanly, so
/// a flaky read is not taken for damage. The file stays small: snapshots rewrite it.
fn read_believed(file: &dyn VfsFile) -> io::Result<Vec<u8>> {
    let mut buf = read_all(file)?;
    for _ in 1..READ_ATTEMPTS {
        if frame::scan(&buf).1 == Tail::Clean {
            break;
        }
        buf = read_all(file)?;
    }
    Ok(buf)
}

fn read_all(file: &dyn VfsFile) -> io::Result<Vec<u8>> {
    let len = usize::try_from(file.len()?).map_err(io::Error::other)?;
    let mut buf = vec![0; len];
    file.read_exact_at(0, &mut buf)?;
    Ok(buf)
}

/// The version a file was written in; one this build does not read is refused, both named.
fn check_format(payload: &[u8]) -> Result<u8, String> {
    match payload {
        [version] if (1..=MAP_FORMAT).contains(version) => Ok(*version),
        [version] => Err(format!(
            "written in raft log format {version}, and this build reads formats 1 to {MAP_FORMAT}; run the build \
             that wrote it"
        )),
        _ => Err(format!("a format frame of {} bytes", payload.len())),
    }
}

fn encode(kind: u8, msg: &impl protobuf::Message, out: &mut Vec<u8>) {
    frame::encode(kind, &to_bytes(msg), out);
}

fn to_bytes(msg: &impl protobuf::Message) -> Vec<u8> {
    msg.write_to_bytes().expect("proto3 messages without required fields always encode")
}

fn parse<M: protobuf::Message>(payload: &[u8]) -> Result<M, String> {
    M::parse_from_bytes(payload).map_err(|e| format!("undecodable frame: {e}"))
}
