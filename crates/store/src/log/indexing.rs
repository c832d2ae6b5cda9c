//! Keeping the index in step with the log: finding a key's entry (reading each candidate record to compare
//! keys), and pointing it at a newer record while keeping every segment's live-byte count exact.

use meridian_core::ring::key_token;

use super::index::{prefix_of, IndexEntry, Loc};
use super::{AckLoc, DropMark, LogStore};
use crate::datastore::StoreError;
use crate::record::{Body, Record};

/// What indexing a record will change, looked up before the record is written.
pub(super) enum Placement {
    /// A value or tombstone: its key's prefix and current entry, if any.
    Key { prefix: u64, previous: Option<(usize, IndexEntry)> },
    /// A range drop: its range, and the index entries it takes out.
    Drop { chain: u32, start_exclusive: u64, end_inclusive: u64, victims: Vec<IndexEntry> },
    /// Replication metadata, which has no key entry.
    Meta,
}

impl LogStore {
    /// The slot, entry and latest record of `key`, reading every record whose key shares its token prefix.
    pub(super) fn locate(&self, key: &[u8], prefix: u64) -> Result<Option<(usize, IndexEntry, Record)>, StoreError> {
        for (i, entry) in self.index.candidates(prefix) {
            let rec = self.read_indexed(entry)?;
            if rec.key == key {
                return Ok(Some((i, entry, rec)));
            }
        }
        Ok(None)
    }

    /// Where the last existence check found `key`, if its entry is still there, and forgets it: every record
    /// prepared takes it, so no index change but the one it prepares comes between the check and its use. An
    /// unchanged entry in the slot is the key's, since its location names one record.
    fn recall(&self, key: &[u8]) -> Option<(usize, IndexEntry)> {
        let mut found = self.found.borrow_mut();
        let (i, entry) = found.at.take()?;
        (found.key == key && self.index.entry_at(i) == Some(entry)).then_some((i, entry))
    }

    /// The record an index entry points at, checked to be the kind of record the entry says it is.
    pub(super) fn read_indexed(&self, entry: IndexEntry) -> Result<Record, StoreError> {
        let seg = self.segs.get(entry.loc.seg);
        let rec = seg.read_record(entry.loc)?;
        match (&rec.body, entry.tombstone) {
            (Body::Value(_), false) | (Body::Tombstone, true) => Ok(rec),
            _ => Err(StoreError::corrupt(u64::from(entry.loc.offset), "record does not match its index entry")
                .in_file(&seg.name.file())),
        }
    }

    /// Looks up what indexing `rec` will replace or, for a range drop, take out.
    pub(super) fn prepare(&self, rec: &Record) -> Result<Placement, StoreError> {
        let recalled = self.recall(&rec.key);
        match rec.body {
            Body::Value(_) | Body::Tombstone => {
                let prefix = prefix_of(key_token(&rec.key));
                let previous = match recalled {
                    Some(at) => Some(at),
                    None => self.locate(&rec.key, prefix)?.map(|(i, entry, _)| (i, entry)),
                };
                Ok(Placement::Key { prefix, previous })
            }
            Body::DropRange { start_exclusive, end_inclusive } => {
                let victims = self.drop_victims(start_exclusive, end_inclusive)?;
                Ok(Placement::Drop { chain: rec.chain, start_exclusive, end_inclusive, victims })
            }
            Body::Skip | Body::AckMark => Ok(Placement::Meta),
        }
    }

    /// Accounts for `rec`, now stored at `loc`: its key's entry, its chain's ack watermark, what a range drop
    /// takes out, its segment's counts.
    pub(super) fn place(&mut self, rec: &Record, loc: Loc, placement: Placement) {
        match placement {
            Placement::Key { prefix, previous } => {
                let entry = IndexEntry { prefix, loc, tombstone: rec.body == Body::Tombstone };
                self.set_entry(previous, entry);
            }
            Placement::Drop { chain, start_exclusive, end_inclusive, victims } => {
                self.apply_drop(DropMark { chain, start_exclusive, end_inclusive, loc }, &victims);
            }
            Placement::Meta if rec.body == Body::AckMark => self.set_ack(rec.chain, AckLoc { seq: rec.seq, loc }),
            Placement::Meta => {}
        }
        self.segs.get_mut(loc.seg).records += 1;
    }

    /// Indexes a record found at `loc` by a scan, as if it had just been appended there.
    pub(super) fn index_scanned(&mut self, rec: &Record, loc: Loc) -> Result<(), StoreError> {
        let placement = self.prepare(rec)?;
        self.place(rec, loc, placement);
        Ok(())
    }

    /// Makes `entry` its key's index entry, replacing `previous` (the key's slot and entry, if it had one).
    pub(super) fn set_entry(&mut self, previous: Option<(usize, IndexEntry)>, entry: IndexEntry) {
        self.segs.get_mut(entry.loc.seg).live += u64::from(entry.loc.len);
        match previous {
            Some((i, old)) => {
                self.index.replace(i, entry);
                self.segs.get_mut(old.loc.seg).live -= u64::from(old.loc.len);
            }
            None => self.index.insert(entry),
        }
    }

    /// Makes `ack` its chain's latest ack mark.
    pub(super) fn set_ack(&mut self, chain: u32, ack: AckLoc) {
        self.segs.get_mut(ack.loc.seg).live += u64::from(ack.loc.len);
        if let Some(old) = self.acks.insert(chain, ack) {
            self.segs.get_mut(old.loc.seg).live -= u64::from(old.loc.len);
        }
    }
}
