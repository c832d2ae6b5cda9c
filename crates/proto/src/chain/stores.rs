//! The node's datastores: one per keyspace, each in its own directory (`<dir>/ks-<id>`). A key of one
//! keyspace never meets the same key of another in an index, each keyspace can be configured on its own, and
//! dropping a keyspace removes its files instead of rewriting a shared log around them.
//!
//! A store is opened when the node first takes part in one of the keyspace's chains, and at start for every
//! keyspace of the node's map that has a directory. Files of a keyspace the map has dropped are removed when
//! the node learns of the drop, and again at start if a crash interrupted that.

use meridian_core::KeyspaceId;
use meridian_store::{Datastore, LogOptions, LogStore, StoreError, StoreStats, Vfs};
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

pub struct Stores {
    spec: StoreSpec,
    open: BTreeMap<KeyspaceId, Box<dyn Datastore>>,
}

impl Stores {
    /// Opens the stores of `keyspaces` that exist on disk, and removes what is left of `dropped` ones.
    pub fn open(
        spec: StoreSpec,
        keyspaces: impl IntoIterator<Item = KeyspaceId>,
        dropped: impl IntoIterator<Item = KeyspaceId>,
    ) -> Result<Stores, StoreError> {
        let mut stores = Stores { spec, open: BTreeMap::new() };
        for keyspace in dropped {
            stores.remove(keyspace)?;
        }
        for keyspace in keyspaces {
            if stores.spec.vfs.exists(&stores.dir(keyspace)) {
                stores.get_or_open(keyspace)?;
            }
        }
        Ok(stores)
    }

    fn dir(&self, keyspace: KeyspaceId) -> PathBuf {
        self.spec.dir.join(format!("ks-{}", keyspace.0))
    }

    /// The open stores, by keyspace.
    pub fn iter(&self) -> impl Iterator<Item = (KeyspaceId, &dyn Datastore)> {
        self.open.iter().map(|(&k, s)| (k, s.as_ref()))
    }

    /// The keyspace's store, if it is open.
    pub fn get(&self, keyspace: KeyspaceId) -> Option<&dyn Datastore> {
        self.open.get(&keyspace).map(|s| s.as_ref())
    }

    pub fn get_mut(&mut self, keyspace: KeyspaceId) -> Option<&mut dyn Datastore> {
        Some(self.open.get_mut(&keyspace)?.as_mut())
    }

    /// The keyspace's store, opened (and created) if it is not yet.
    pub fn get_or_open(&mut self, keyspace: KeyspaceId) -> Result<&mut dyn Datastore, StoreError> {
        if !self.open.contains_key(&keyspace) {
            let dir = self.dir(keyspace);
            let (store, report) = LogStore::open_with(self.spec.vfs.clone(), &dir, self.spec.log)?;
            if report.dropped_bytes > 0 {
                tracing::warn!(dir = %dir.display(), dropped = report.dropped_bytes, reason = ?report.reason,
                    "recovery dropped a torn log tail");
            }
            self.open.insert(keyspace, Box::new(store));
        }
        Ok(self.open.get_mut(&keyspace).expect("just opened").as_mut())
    }

    /// Closes the keyspace's store, if open, and removes its files.
    pub fn remove(&mut self, keyspace: KeyspaceId) -> Result<(), StoreError> {
        self.open.remove(&keyspace);
        let dir = self.dir(keyspace);
        if !self.spec.vfs.exists(&dir) {
            return Ok(());
        }
        for file in self.spec.vfs.list_files(&dir)? {
            self.spec.vfs.remove_file(&dir.join(file))?;
        }
        Ok(())
    }

    pub fn sync(&mut self) -> Result<(), StoreError> {
        self.open.values_mut().try_for_each(|s| s.sync())
    }

    pub fn flush(&mut self) -> Result<(), StoreError> {
        self.open.values_mut().try_for_each(|s| s.flush())
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
