//! The datastores a replica keeps its data in: FAWN-DS for Meridian (seed 003 §2), behind one trait that the
//! chain protocol uses for every replica type. Every update is a checksummed record appended to a log, and an
//! in-memory hash index maps each key to its latest record. The log doubles as the chain-replication stream, so
//! it also carries replication metadata ([`Body::Skip`], [`Body::AckMark`]) that is never indexed, and range drops
//! ([`Body::DropRange`]), with which a node leaving a chain discards that chain's data.
//!
//! [`Datastore`] is the Flex-KV storage interface (seed 003 §5.3): get, append, flush and sync (in two halves for
//! group commit), range scans by ring token, range drops and streaming the log from a position. It has three
//! implementations: [`MemStore`] (volatile: each key once, in numbered slots that a seeded hash table, a
//! stamp-ordered vector and a B-tree by ring token refer to, small values in the key's allocation), [`LogStore`]
//! (durable, segmented, compacted a slice at a time within the bounds the chain's acknowledgement watermarks set)
//! and [`BufferedStore`] (memory over a log fsynced a batch at a time, losing at most one batch). [`split_range`]
//! and [`merge_into`] are FAWN's maintenance operations over any two stores. Storage sits behind [`Vfs`] so the
//! deterministic simulator can run the same code over [`SimVfs`], which cuts power at any point (a prefix of the
//! unsynced appends kept, the last one possibly torn), models space reserved ahead of a file's data, and injects
//! bit flips on read and a full disk. cargo-fuzz targets for the record and hint decoders are in
//! `crates/store/fuzz`.
//!
//! The log store, in brief: segment files behind a user-space write buffer that preallocates the active segment
//! with zeros, so an fsync writes no metadata (`docs/durability.md`); an in-memory index of 16-byte slots placed
//! by ring token, so a ring range is a run of it; hint files; compaction a slice at a time, bound by the chain's
//! acknowledgement watermarks and by what is durable, paced by the bytes appended and caught up on an idle
//! store's timer ticks, its hints and unlinks run off the caller's thread (`Vfs::in_background`) and waited for
//! when the store is dropped; recovery that cuts a torn tail.
//!
//! Start with `datastore.rs` (the trait and what each call promises), then `log.rs`, whose module doc walks
//! through segments, index, hints, recovery, the write buffer, compaction and range drops.
//!
//! Modules:
//! - `buffered`: `BufferedStore`, the "M_b…D" replica type: reads from memory, a log behind it fsynced a batch
//!   at a time.
//! - `datastore`: the `Datastore` trait, its errors, statistics and log positions.
//! - `hint`: the hint file format, a checksummed summary of a sealed segment so a restart need not read it.
//! - `log`: `LogStore`, the durable "D" type: FAWN-DS's segmented, checksummed log with its in-memory index.
//! - `maintenance`: `split_range` and `merge_into`, single sequential passes over any two stores.
//! - `mem`: `MemStore`, the volatile "M" type: an index with no log behind it.
//! - `record`: the on-disk record format, and what a datastore keeps per key.
//! - `vfs`: the `Vfs` and `VfsFile` traits, `RealVfs` over the file system and the fault-injecting `SimVfs`.

pub mod buffered;
pub mod datastore;
pub mod hint;
pub mod log;
pub mod maintenance;
pub mod mem;
pub mod record;
pub mod vfs;

pub use buffered::{BatchOptions, BufferedStore};
pub use datastore::{ring_range_contains, Datastore, Durability, LogPos, StoreError, StoreStats};
pub use log::{
    CompactionOptions, CompactionProgress, LogOptions, LogStore, PassProgress, RecoveryReport, SegmentReport,
};
pub use maintenance::{merge_into, split_range};
pub use mem::MemStore;
pub use record::{decode, decode_framed, encode, encode_in_group, Body, Entry, Framed, Record, KEY_MAX, VALUE_MAX};
pub use vfs::{RealVfs, SimVfs, Vfs, VfsFile};
