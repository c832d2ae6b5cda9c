//! FAWN-DS datastores for Meridian (seed 003 §2): every update is a checksummed record appended to a log,
//! and an in-memory hash index maps each key to its latest record. The log doubles as the chain-replication
//! stream, so it also carries replication metadata ([`Body::Skip`], [`Body::AckMark`]) that is never indexed.
//!
//! [`Datastore`] is the Flex-KV storage interface (seed 003 §5.3) with two implementations: [`MemStore`]
//! (volatile) and [`LogStore`] (durable). Storage sits behind [`Vfs`] so the deterministic simulator can run
//! the same code over [`SimVfs`] and cut power at any point.

pub mod datastore;
pub mod log;
pub mod mem;
pub mod record;
mod splitmix;
pub mod vfs;

pub use datastore::{Datastore, Durability, StoreError, StoreStats};
pub use log::{LogStore, RecoveryReport};
pub use mem::MemStore;
pub use record::{decode, encode, Body, Entry, Record, KEY_MAX, VALUE_MAX};
pub use vfs::{RealVfs, SimVfs, Vfs, VfsFile};
