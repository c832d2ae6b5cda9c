//! FAWN-DS datastores for Meridian (seed 003 §2): every update is a checksummed record appended to a log,
//! and an in-memory hash index maps each key to its latest record. The log doubles as the chain-replication
//! stream, so it also carries replication metadata ([`Body::Skip`], [`Body::AckMark`]) that is never indexed,
//! and range drops ([`Body::DropRange`]), with which a node leaving a chain discards that chain's data.
//!
//! [`Datastore`] is the Flex-KV storage interface (seed 003 §5.3) with three implementations: [`MemStore`]
//! (volatile), [`LogStore`] (durable, segmented, compacted) and [`BufferedStore`] (memory over a log fsynced a
//! batch at a time, losing at most one batch). [`split_range`] and [`merge_into`] are FAWN's
//! maintenance operations over any two stores. Storage sits behind [`Vfs`] so the deterministic simulator can
//! run the same code over [`SimVfs`], cut power at any point and inject disk faults.

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
pub use record::{decode, encode, Body, Entry, Record, KEY_MAX, VALUE_MAX};
pub use vfs::{RealVfs, SimVfs, Vfs, VfsFile};
