//! A node's data directory: one node id for life, one process at a time.

use meridian_core::NodeId;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// A claimed data directory. Its lock (an advisory `flock` on `LOCK`) is held for as long as this value
/// lives, and released by the OS if the process dies, so a crashed node never leaves a stale lock behind.
#[derive(Debug)]
pub struct DataDir {
    path: PathBuf,
    _lock: File,
}

impl DataDir {
    /// Creates the directory if need be, locks it, and checks that it belongs to `node`. Two processes on one
    /// directory would interleave their logs, and a directory started as another node would mix two nodes'
    /// histories: both are refused with an error that says why.
    pub fn claim(path: &Path, node: NodeId) -> Result<DataDir, String> {
        std::fs::create_dir_all(path).map_err(|e| format!("cannot create data directory {}: {e}", path.display()))?;
        let lock = lock(path)?;
        check_owner(path, node)?;
        Ok(DataDir { path: path.to_path_buf(), _lock: lock })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn lock(dir: &Path) -> Result<File, String> {
    let path = dir.join("LOCK");
    let cannot = |e: std::io::Error| format!("cannot lock {}: {e}", path.display());
    let mut file =
        OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(cannot)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            let by = if holder.is_empty() { String::new() } else { format!(" (pid {holder})") };
            return Err(format!(
                "data directory {} is in use by another meridian process{by}; stop it or pick another --data-dir",
                dir.display()
            ));
        }
        Err(TryLockError::Error(e)) => return Err(cannot(e)),
    }
    // The pid is only a hint for the message above; the lock itself is what protects the directory.
    file.set_len(0).and_then(|()| file.rewind()).map_err(cannot)?;
    write!(file, "{}", std::process::id()).map_err(cannot)?;
    Ok(file)
}

/// The id is written on first use and checked on every start after.
fn check_owner(dir: &Path, node: NodeId) -> Result<(), String> {
    let id_file = dir.join("node-id");
    match std::fs::read_to_string(&id_file) {
        Ok(text) => match text.trim().parse::<u32>() {
            Ok(owner) if owner == node.0 => Ok(()),
            Ok(owner) => Err(format!("data directory {} belongs to node {owner}, not node {}", dir.display(), node.0)),
            Err(_) => Err(format!("{} is corrupt: {text:?}", id_file.display())),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::write(&id_file, format!("{}\n", node.0))
            .map_err(|e| format!("cannot write {}: {e}", id_file.display())),
        Err(e) => Err(format!("cannot read {}: {e}", id_file.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_claim_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDir::claim(dir.path(), NodeId(1)).unwrap();
        let refused = DataDir::claim(dir.path(), NodeId(1)).unwrap_err();
        assert!(refused.contains("in use by another meridian process"), "{refused}");
        assert!(refused.contains(&format!("pid {}", std::process::id())), "{refused}");
        drop(first);
        DataDir::claim(dir.path(), NodeId(1)).unwrap();
    }

    #[test]
    fn a_directory_keeps_its_node_id() {
        let dir = tempfile::tempdir().unwrap();
        drop(DataDir::claim(dir.path(), NodeId(1)).unwrap());
        let refused = DataDir::claim(dir.path(), NodeId(2)).unwrap_err();
        assert!(refused.contains("belongs to node 1, not node 2"), "{refused}");
    }
}
