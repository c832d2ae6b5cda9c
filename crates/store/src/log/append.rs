//! The write path: appending to the active segment, and sealing it when full.

use std::io;

use super::index::Loc;
use super::segment::SegName;
use super::LogStore;
use crate::datastore::StoreError;
use crate::record::{encode_in_group, Record};
use crate::vfs::VfsFile;

impl LogStore {
    pub(super) fn append_record(&mut self, rec: &Record) -> Result<(), StoreError> {
        self.check_healthy()?;
        rec.check_limits()?;
        // Look the key up before writing anything, so a failed read leaves the log untouched.
        let placement = self.prepare(rec)?;
        let len = rec.encoded_len();
        self.seal_unless_room(len)?;
        let loc = self.write_active(std::slice::from_ref(rec), len)?;
        self.place(rec, loc, placement);
        Ok(())
    }

    /// Appends `recs` back to back in the active segment, each but the last marked as followed by more of the
    /// group. Indexing a record may move the index entries that later ones' lookups found, so each is looked up
    /// only once the group is written; a lookup that fails then leaves records the index does not know, and
    /// fails the store until it is reopened (when recovery indexes the group like any other).
    pub(super) fn append_group_records(&mut self, recs: &[Record]) -> Result<(), StoreError> {
        self.check_healthy()?;
        recs.iter().try_for_each(Record::check_limits)?;
        let len = recs.iter().map(Record::encoded_len).sum();
        self.seal_unless_room(len)?;
        let mut loc = self.write_active(recs, len)?;
        for rec in recs {
            loc.len = rec.encoded_len() as u32;
            match self.prepare(rec) {
                Ok(placement) => self.place(rec, loc, placement),
                Err(e) => {
                    self.failed = true;
                    return Err(e);
                }
            }
            loc.offset += loc.len;
        }
        Ok(())
    }

    /// Seals the active segment if `len` more bytes would take it past its size (an empty one takes anything).
    fn seal_unless_room(&mut self, len: usize) -> Result<(), StoreError> {
        let active = self.segs.active();
        if active.len > 0 && active.len + len as u64 > self.opts.segment_bytes {
            self.seal()?;
        }
        Ok(())
    }

    /// Encodes `recs`, `len` bytes in all, straight into the active segment's write buffer as one group (one
    /// copy of each value, not two); returns the location of the whole. Segments are sealed only between
    /// appends, so a group never spans two.
    fn write_active(&mut self, recs: &[Record], len: usize) -> Result<Loc, StoreError> {
        let slot = self.segs.active_slot();
        let seg = self.segs.get_mut(slot);
        let before = seg.len;
        let last = recs.len() - 1;
        let encode_all = |pending: &mut Vec<u8>| {
            recs.iter().enumerate().try_for_each(|(i, rec)| encode_in_group(rec, i < last, pending))
        };
        match seg.file.append_with(|pending| encode_all(pending).map_err(io::Error::other)) {
            Ok(()) => {
                seg.len += len as u64;
                self.compactor.note_appended(len as u64);
                Ok(Loc { seg: slot, offset: before as u32, len: len as u32 })
            }
            Err(e) if e.kind() == io::ErrorKind::StorageFull => {
                // Cut off whatever part of the group made it, so the next append starts on a record boundary.
                let cut = seg.file.truncate(before);
                self.note_failure(cut)?;
                Err(StoreError::Full(e))
            }
            Err(e) => {
                self.failed = true;
                Err(e.into())
            }
        }
    }

    /// Syncs the active segment, writes its hint, and starts a new active segment. Every segment but the last
    /// is therefore complete and durable, which is what lets recovery treat damage in one as corruption.
    fn seal(&mut self) -> Result<(), StoreError> {
        self.sync_active()?;
        let trimmed = self.segs.active_mut().file.trim();
        self.note_failure(trimmed)?;
        self.write_hint(self.segs.active_slot());
        self.start_segment()
    }

    /// Creates an empty segment after the others, which becomes the active one.
    pub(super) fn start_segment(&mut self) -> Result<(), StoreError> {
        if !self.segs.has_free_slot() {
            return Err(io::Error::other("segment table full; raise segment_bytes").into());
        }
        let name = SegName::fresh(self.next_id);
        let file = self.vfs.open(&self.path(&name.file()))?;
        self.next_id += 1;
        let slot = self.segs.add(self.opts.segment(name, file, 0))?;
        self.segs.push_back(slot);
        Ok(())
    }
}
