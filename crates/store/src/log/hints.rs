//! Writing and reading a segment's hint file ([`crate::hint`]).
//!
//! A hint is written under a temporary name, synced, then renamed into place, so a hint file that exists was
//! written whole; its checksum still guards against later damage. Hints are an optimisation: failing to write
//! one costs a scan at the next open, so errors here are not the caller's problem, and the writing is left to
//! [`crate::vfs::Vfs::in_background`] (an open removes a temporary hint, and one whose segment is gone).
//!
//! A hint lists only the entries that are their key's latest, or may be after a power loss, when its entries
//! are fixed (by the caller, on the store's thread), so whatever superseded the rest must already be durable:
//! sealing syncs the segment first and nothing after it exists yet, a compaction pass keeps what only records
//! not yet durable supersede (`compaction.rs`), and recovery syncs the active segment before it rewrites hints.

use std::io;
use std::path::Path;
use std::sync::Arc;

use super::index::Loc;
use super::scan::READ_ATTEMPTS;
use super::segment::SegName;
use super::LogStore;
use crate::datastore::StoreError;
use crate::hint::{self, Hint, HintAck, HintEntry};
use crate::vfs::{Vfs, VfsFile};

impl LogStore {
    /// Writes the hint of segment `slot` from the current index, if it can.
    pub(super) fn write_hint(&self, slot: u16) {
        self.write_hint_later(self.segs.get(slot).name, &self.hint_for(slot));
    }

    /// Writes `hint` for segment `name` under a temporary name, syncs it and then names it, on a thread of the
    /// file system's own where it has one ([`crate::vfs::Vfs::in_background`]): a hint only spares the next open
    /// a scan, and an open removes a temporary hint or one whose segment is gone, so nothing waits for it. Its
    /// entries are fixed here, by the caller, from the index as it is.
    pub(super) fn write_hint_later(&self, name: SegName, hint: &Hint) {
        let (vfs, bytes) = (Arc::clone(&self.vfs), hint::encode(hint));
        let (staged, named) = (self.path(&SegName::temp(&name.hint_file())), self.path(&name.hint_file()));
        self.background.start(
            &*self.vfs,
            Box::new(move || {
                let written = create_empty(&*vfs, &staged)
                    .and_then(|mut file| file.append(&bytes).and_then(|()| file.sync()))
                    .and_then(|()| vfs.rename(&staged, &named));
                if written.is_err() && vfs.exists(&staged) {
                    let _ = vfs.remove_file(&staged);
                }
            }),
        );
    }

    /// Segment `slot`'s index entries, latest ack marks and range drops, by offset.
    fn hint_for(&self, slot: u16) -> Hint {
        let mut entries: Vec<HintEntry> = self
            .index
            .iter()
            .filter(|e| e.loc.seg == slot)
            .map(|e| self.hint_entry(e.prefix, e.loc, e.tombstone))
            .collect();
        entries.sort_by_key(|e| e.offset);
        let mut acks: Vec<HintAck> = self
            .acks
            .iter()
            .filter(|(_, a)| a.loc.seg == slot)
            .map(|(&chain, a)| HintAck { chain, seq: a.seq, offset: a.loc.offset, len: a.loc.len })
            .collect();
        acks.sort_by_key(|a| a.offset);
        // `drops` is in log order, so a segment's markers come by offset.
        let drops = self.drops.iter().filter(|d| d.loc.seg == slot).map(|d| d.hint_at(d.loc)).collect();
        let seg = self.segs.get(slot);
        Hint { segment_len: seg.len, records: seg.records, acks, drops, entries }
    }

    /// A hint entry for a record at `loc` (`loc.seg` aside), flagged if its prefix is shared in the index now.
    pub(super) fn hint_entry(&self, prefix: u64, loc: Loc, tombstone: bool) -> HintEntry {
        let shared_prefix = self.index.count_prefix(prefix) > 1;
        HintEntry { token_prefix: prefix, offset: loc.offset, len: loc.len, tombstone, shared_prefix }
    }

    /// The hint of segment `name`. A read that fails its checksum is retried before the hint is given up on.
    pub(super) fn read_hint(&self, name: &SegName) -> Result<Hint, StoreError> {
        let file = self.vfs.open(&self.path(&name.hint_file()))?;
        let mut buf = vec![0; usize::try_from(file.len()?).map_err(io::Error::other)?];
        let mut attempt = 1;
        loop {
            file.read_exact_at(0, &mut buf)?;
            match hint::decode(&buf) {
                Ok(hint) => return Ok(hint),
                Err(e) if attempt == READ_ATTEMPTS => return Err(e.in_file(&name.hint_file())),
                Err(_) => attempt += 1,
            }
        }
    }

    /// Opens `path` as a new empty file, removing any leftover of that name first (open appends).
    pub(super) fn create_empty(&self, path: &Path) -> io::Result<Box<dyn VfsFile>> {
        create_empty(&*self.vfs, path)
    }

    /// Removes a file if it is there. Used for leftovers that the next open would remove anyway, so a failure
    /// changes nothing.
    pub(super) fn remove_quietly(&self, file: &str) {
        let path = self.path(file);
        if self.vfs.exists(&path) {
            let _ = self.vfs.remove_file(&path);
        }
    }
}

/// Opens `path` in `vfs` as a new empty file, removing any leftover of that name first (open appends).
fn create_empty(vfs: &dyn Vfs, path: &Path) -> io::Result<Box<dyn VfsFile>> {
    if vfs.exists(path) {
        vfs.remove_file(path)?;
    }
    vfs.open(path)
}
