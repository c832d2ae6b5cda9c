//! Tuning knobs of a [`super::LogStore`].

use std::io;

use super::segment::{SegName, Segment};
use crate::datastore::StoreError;
use crate::vfs::VfsFile;

/// Largest segment, so record offsets, and a compaction output built from two segments' worth of input, fit
/// in the index's 32-bit offsets.
const SEGMENT_BYTES_MAX: u64 = 1 << 30;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogOptions {
    /// The active segment is sealed, and a new one started, before an append would take it past this size
    /// (a record larger than this gets a segment of its own).
    pub segment_bytes: u64,
    /// Appends are collected in a user-space buffer of this many bytes and handed to the OS in one write when
    /// it fills (or on `flush`/`sync`), since one write(2) per small record costs more than the disk does; 0
    /// writes each append at once.
    pub write_buffer_bytes: usize,
    /// The active segment's file is given space this many bytes at a time ahead of its data (zeros, cut off
    /// when it is sealed), so a group commit's fdatasync writes data only and not the file's new size too; 0
    /// turns it off. At most `segment_bytes` is reserved at once.
    pub preallocate_bytes: u64,
    pub compaction: CompactionOptions,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CompactionOptions {
    /// Compaction runs while dead bytes exceed this fraction of the sealed segments' bytes.
    pub dead_ratio: f64,
    /// Most bytes of input one `sync` compacts, so no call stalls for long: 256 KiB by default, a few
    /// milliseconds of a node's core (1 MiB took 7–15 ms on the T2 set-up, `docs/performance-history.md` section
    /// 28), and still hundreds of MB/s of compaction under the write rates that need it.
    pub slice_bytes: u64,
    /// Sealed segments there must be before compaction runs.
    pub min_segments: usize,
    /// Bytes a slice frees (input read less output written) per byte appended since the previous slice: it stops
    /// there, having read at least a few KiB and at most `slice_bytes`. So compaction keeps pace with the writes
    /// that make garbage rather than spending `slice_bytes` on every sync: a store whose log is mostly garbage from
    /// earlier writes otherwise gave up a quarter of its write rate while it compacted
    /// (`docs/performance-history.md` section 29). At 2 the log shrinks by at least what is appended while
    /// compaction has work, unless `slice_bytes` of input free less than that; the space comes back as each pass
    /// commits, so by up to two segments later. A store that takes no writes compacts a whole slice on each timer
    /// tick instead (`Datastore::maintain_if_idle`). 0 turns pacing off: every slice reads `slice_bytes`.
    pub pace: u32,
}

impl Default for LogOptions {
    fn default() -> LogOptions {
        LogOptions {
            segment_bytes: 64 << 20,
            write_buffer_bytes: 256 << 10,
            preallocate_bytes: 1 << 20,
            compaction: CompactionOptions::default(),
        }
    }
}

impl Default for CompactionOptions {
    fn default() -> CompactionOptions {
        CompactionOptions { dead_ratio: 0.5, slice_bytes: 256 << 10, min_segments: 2, pace: 2 }
    }
}

impl LogOptions {
    /// A segment over `file`, which holds `len` bytes, buffered and preallocated as these options say.
    pub(super) fn segment(&self, name: SegName, file: Box<dyn VfsFile>, len: u64) -> Segment {
        let reserve_step = self.preallocate_bytes.min(self.segment_bytes);
        Segment::new(name, file, len, self.write_buffer_bytes, reserve_step)
    }

    pub(super) fn validate(&self) -> Result<(), StoreError> {
        let c = &self.compaction;
        let problem = if !(1..=SEGMENT_BYTES_MAX).contains(&self.segment_bytes) {
            format!("segment_bytes must be between 1 and {SEGMENT_BYTES_MAX}")
        } else if !(c.dead_ratio > 0.0 && c.dead_ratio <= 1.0) {
            "compaction.dead_ratio must be in (0, 1]".to_owned()
        } else if c.slice_bytes == 0 {
            "compaction.slice_bytes must be positive".to_owned()
        } else {
            return Ok(());
        };
        Err(StoreError::Io(io::Error::new(io::ErrorKind::InvalidInput, problem)))
    }
}
