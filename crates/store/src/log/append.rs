//! The write path: appending to the active segment, and sealing it when full.

use std::io;

use super::index::Loc;
use super::segment::SegName;
use super::LogStore;
use crate::datastore::StoreError;
use crate::record::{encode, Record};
use crate::vfs::VfsFile;

impl LogStore {
    pub(super) fn append_record(&mut self, rec: &Record) -> Result<(), StoreError> {
        self.check_healthy()?;
        rec.check_limits()?;
        // Look the key up before writing anything, so a failed read leaves the log untouched.
        let placement = self.prepare(rec)?;
        let len = rec.encoded_len();
        let active = self.segs.active();
        if active.len > 0 && active.len + len as u64 > self.opts.segment_bytes {
            self.seal()?;
        }
        let loc = self.write_active(rec, len)?;
        self.place(rec, loc, placement);
        Ok(())
    }

    /// Encodes `rec` straight into the active segment's write buffer: one copy of the value, not two.
    fn write_active(&mut self, rec: &Record, len: usize) -> Result<Loc, StoreError> {
        let slot = self.segs.active_slot();
        let seg = self.segs.get_mut(slot);
        let before = seg.len;
        match seg.file.append_with(|pending| encode(rec, pending).map_err(io::Error::other)) {
            Ok(()) => {
                seg.len += len as u64;
                self.compactor.note_appended(len as u64);
                Ok(Loc { seg: slot, offset: before as u32, len: len as u32 })
            }
            Err(e) if e.kind() == io::ErrorKind::StorageFull => {
                // Cut off whatever part of the record made it, so the next append starts on a record boundary.
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
