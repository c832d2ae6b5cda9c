//! Whether the node's previous run stopped cleanly: its runner made every write durable and gave the core no
//! input after that ([`meridian_core::Process::stopped`]). A head that passed updates on before its fsync
//! (`ClusterMap::head_forwards_early`) then lost none of them, so after a clean stop its `log` replicas are
//! trusted; after any other end they are counted lost and copied again (`chain/recovery.rs`), which a planned
//! restart should not cost.
//!
//! The marker is an empty file, made durable at the stop and removed, durably, as the node opens, before it takes
//! any input: it never speaks for a run after the one that left it.

use meridian_store::Vfs;
use std::io;
use std::path::Path;

const FILE: &str = "clean-stop";

/// Whether the previous run left the marker; removes it.
pub fn take(vfs: &dyn Vfs, dir: &Path) -> io::Result<bool> {
    let path = dir.join(FILE);
    if !vfs.exists(&path) {
        return Ok(false);
    }
    vfs.remove_file(&path)?;
    Ok(true)
}

/// Leaves the marker for the next run; every write of this one must be durable, and none may follow.
pub fn leave(vfs: &dyn Vfs, dir: &Path) -> io::Result<()> {
    crate::stores::atomic_file::replace(vfs, dir, FILE, &[])
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_store::SimVfs;

    #[test]
    fn the_marker_speaks_for_one_start_only_and_survives_a_power_loss() {
        let disk = SimVfs::default();
        let dir = Path::new("/n");
        assert!(!take(&disk, dir).unwrap(), "no marker before any stop");
        leave(&disk, dir).unwrap();
        disk.crash(3);
        assert!(take(&disk, dir).unwrap());
        disk.crash(3);
        assert!(!take(&disk, dir).unwrap(), "taken for good");
    }
}
