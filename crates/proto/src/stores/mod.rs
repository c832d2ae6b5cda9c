//! The node's datastores: one per keyspace and replica kind (a node may keep one chain of a keyspace in
//! memory and another on disk, by their positions). `log` stores live in `<dir>/ks-<id>`, `buffered` ones in
//! `<dir>/ks-<id>-buffered`; `mem` ones have no files. A key of one keyspace never meets the same key of
//! another in an index, and dropping a keyspace removes its files instead of rewriting a shared log around
//! them.
//!
//! A store is opened when the node first takes part in one of the keyspace's chains with that kind, and at
//! start for every keyspace of the node's map that has a directory. Files of a keyspace the map has dropped
//! are removed when the node learns of the drop, and again at start if a crash interrupted that.
//!
//! Stores are not chain replication's: any protocol's replicas keep their data in them, so they live beside the
//! protocols rather than inside `chain`, which for now holds the node's [`Stores`] (`ChainNode::stores`).

pub mod atomic_file;
pub mod ledger;

use ledger::{Ledger, Ledgered};
use meridian_core::{KeyspaceId, ReplicaKind, SyncJob};
use meridian_store::{
    BatchOptions, BufferedStore, Datastore, LogOptions, LogStore, MemStore, StoreError, StoreStats, Vfs,
};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Where and how the node's stores are kept.
#[derive(Clone, Debug)]
pub struct StoreSpec {
    pub vfs: Arc<dyn Vfs>,
    /// The parent of every keyspace's directory.
    pub dir: PathBuf,
    pub log: LogOptions,
}

/// The kinds that keep files, whose stores are opened at start if their directory exists.
const ON_DISK: [ReplicaKind; 2] = [ReplicaKind::Log, ReplicaKind::Buffered];

/// Which store: a keyspace's, of one replica kind.
pub type StoreKey = (KeyspaceId, ReplicaKind);

pub struct Stores {
    spec: StoreSpec,
    open: BTreeMap<StoreKey, Ledgered>,
}

impl Stores {
    /// Opens the stores of `keyspaces` (each with whether it is a cache keyspace) that exist on disk, and
    /// removes what is left of `dropped` ones.
    pub fn open(
        spec: StoreSpec,
        keyspaces: impl IntoIterator<Item = (KeyspaceId, bool)>,
        dropped: impl IntoIterator<Item = KeyspaceId>,
    ) -> Result<Stores, StoreError> {
        let mut stores = Stores { spec, open: BTreeMap::new() };
        for keyspace in dropped {
            stores.remove(keyspace)?;
        }
        for (keyspace, cache) in keyspaces {
            for kind in ON_DISK {
                if stores.spec.vfs.exists(&stores.dir((keyspace, kind))) {
                    stores.get_or_open((keyspace, kind), cache)?;
                }
            }
        }
        Ok(stores)
    }

    fn dir(&self, (keyspace, kind): StoreKey) -> PathBuf {
        match kind {
            ReplicaKind::Buffered => self.spec.dir.join(format!("ks-{}-buffered", keyspace.0)),
            ReplicaKind::Log | ReplicaKind::Mem => self.spec.dir.join(format!("ks-{}", keyspace.0)),
        }
    }

    /// The open stores.
    pub fn iter(&self) -> impl Iterator<Item = (StoreKey, &dyn Datastore)> {
        self.open.iter().map(|(&k, s)| (k, s as &dyn Datastore))
    }

    /// The store, if it is open.
    pub fn get(&self, key: StoreKey) -> Option<&dyn Datastore> {
        self.open.get(&key).map(|s| s as &dyn Datastore)
    }

    pub fn get_mut(&mut self, key: StoreKey) -> Option<&mut dyn Datastore> {
        self.open.get_mut(&key).map(|s| s as &mut dyn Datastore)
    }

    /// The store's ledger, if it is open.
    pub fn ledger(&self, key: StoreKey) -> Option<&Ledger> {
        self.open.get(&key).map(Ledgered::ledger)
    }

    /// The store, opened (and created) if it is not yet; `cache` says whether its keyspace is a cache keyspace,
    /// whose ledger tracks every key (a keyspace's configuration never changes).
    pub fn get_or_open(&mut self, key: StoreKey, cache: bool) -> Result<&mut dyn Datastore, StoreError> {
        if !self.open.contains_key(&key) {
            let store = Ledgered::open(self.open_store(key)?, cache)?;
            self.open.insert(key, store);
        }
        Ok(self.open.get_mut(&key).expect("just opened"))
    }

    fn open_store(&self, key: StoreKey) -> Result<Box<dyn Datastore>, StoreError> {
        let (dir, vfs, log) = (self.dir(key), self.spec.vfs.clone(), self.spec.log);
        let (store, report): (Box<dyn Datastore>, _) = match key.1 {
            ReplicaKind::Mem => return Ok(Box::new(MemStore::new())),
            ReplicaKind::Log => LogStore::open_with(vfs, &dir, log).map(|(s, r)| (Box::new(s) as _, r))?,
            ReplicaKind::Buffered => {
                BufferedStore::open(vfs, &dir, log, BatchOptions::default()).map(|(s, r)| (Box::new(s) as _, r))?
            }
        };
        if report.dropped_bytes > 0 {
            tracing::warn!(dir = %dir.display(), dropped = report.dropped_bytes, reason = ?report.reason,
                "recovery dropped a torn log tail");
        }
        Ok(store)
    }

    /// The small file `name` a protocol core keeps beside the stores (`save_record`), if there is one.
    pub fn load_record(&self, name: &str) -> std::io::Result<Option<Vec<u8>>> {
        atomic_file::read(self.spec.vfs.as_ref(), &self.spec.dir, name)
    }

    /// Replaces the small file `name` by `bytes`, durably before it returns: for what a core must find again
    /// after any crash (a blocking fsync, so for rare changes only).
    pub fn save_record(&self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        atomic_file::replace(self.spec.vfs.as_ref(), &self.spec.dir, name, bytes)
    }

    /// Closes the keyspace's stores, if open, and removes their files.
    pub fn remove(&mut self, keyspace: KeyspaceId) -> Result<(), StoreError> {
        self.open.retain(|&(k, _), _| k != keyspace);
        for kind in ON_DISK {
            let dir = self.dir((keyspace, kind));
            if !self.spec.vfs.exists(&dir) {
                continue;
            }
            for file in self.spec.vfs.list_files(&dir)? {
                self.spec.vfs.remove_file(&dir.join(file))?;
            }
        }
        Ok(())
    }

    pub fn sync(&mut self) -> Result<(), StoreError> {
        self.open.values_mut().try_for_each(|s| s.sync())
    }

    pub fn flush(&mut self) -> Result<(), StoreError> {
        self.open.values_mut().try_for_each(|s| s.flush())
    }

    /// Every open store's fsync job, as one.
    pub fn begin_sync(&mut self) -> Result<Option<SyncJob>, StoreError> {
        let mut jobs = Vec::new();
        for store in self.open.values_mut() {
            jobs.extend(store.begin_sync()?);
        }
        Ok(match jobs.len() {
            0 => None,
            1 => jobs.pop(),
            _ => Some(Box::new(move || jobs.into_iter().try_for_each(|job| job()))),
        })
    }

    pub fn end_sync(&mut self) {
        self.open.values_mut().for_each(|s| s.end_sync());
    }

    pub fn sync_now(&mut self) -> Result<(), StoreError> {
        self.open.values_mut().try_for_each(|s| s.sync_now())
    }

    pub fn maintain_if_idle(&mut self) {
        self.open.values_mut().for_each(|s| s.maintain_if_idle());
    }

    /// Every open store's figures added up.
    pub fn stats(&self) -> StoreStats {
        self.open.values().map(|s| s.stats()).fold(StoreStats::default(), |a, b| StoreStats {
            live_keys: a.live_keys + b.live_keys,
            records: a.records + b.records,
            log_bytes: a.log_bytes + b.log_bytes,
            dead_bytes: a.dead_bytes + b.dead_bytes,
            index_bytes: a.index_bytes + b.index_bytes,
            segments: a.segments + b.segments,
            compactions: a.compactions + b.compactions,
        })
    }
}
