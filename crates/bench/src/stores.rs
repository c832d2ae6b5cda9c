//! The stores under test, each opened fresh in its own directory.

use meridian_store::{BatchOptions, BufferedStore, Datastore, LogOptions, LogStore, MemStore, RealVfs};
use serde::Serialize;
use std::io;
use std::path::Path;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// The volatile "M" replica: an index and nothing behind it, so its syncs cost nothing.
    Mem,
    /// The durable "D" replica (FAWN-DS): an append-only log with an in-memory index.
    Log,
    /// The "M_b…D" replica: reads from memory, a log fsynced one batch at a time, so it loses at most a batch.
    Buffered,
}

impl StoreKind {
    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Mem => "mem",
            StoreKind::Log => "log",
            StoreKind::Buffered => "buffered",
        }
    }

    pub(crate) fn open(self, dir: &Path) -> io::Result<Box<dyn Datastore>> {
        Ok(match self {
            StoreKind::Mem => Box::new(MemStore::new()),
            StoreKind::Log => Box::new(LogStore::open(Arc::new(RealVfs), dir).map_err(io::Error::other)?.0),
            StoreKind::Buffered => {
                let (log, batch) = (LogOptions::default(), BatchOptions::default());
                Box::new(BufferedStore::open(Arc::new(RealVfs), dir, log, batch).map_err(io::Error::other)?.0)
            }
        })
    }
}
