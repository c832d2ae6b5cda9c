//! The chains whose replicas on this node are lost (`chain/recovery.rs`), kept across restarts until the map has
//! dealt with them.
//!
//! A replica counts lost when the node finds, as it starts, that it may miss writes the chain acknowledged: a
//! memory replica, or the `log` replica of a head that passed updates on before its fsync. What it is judged by
//! is the map the node stored last, and that map moves on: the node may next start with a map in which it is no
//! longer such a head (a joiner inserted before it), or after a clean stop, which spares heads the judgement.
//! Either way the replica is no more whole than it was, so the verdict must outlive the run that reached it: it is
//! stored here, durably, before the node takes any input, and applied again at every start. Entries go when the
//! node leaves the chain or the map restores the chain from it; a stale entry costs a copy, never data.
//!
//! The file is text: a header naming the format, then one chain id per line; replaced atomically (written to a
//! temporary file, synced, renamed).

use meridian_core::ChainId;
use meridian_store::Vfs;
use std::collections::BTreeSet;
use std::io;
use std::path::Path;

const FILE: &str = "lost-replicas";
const HEADER: &str = "meridian lost replicas, format 1";

/// The chains the previous run counted lost (none if it never stored any).
pub fn load(vfs: &dyn Vfs, dir: &Path) -> io::Result<BTreeSet<ChainId>> {
    let path = dir.join(FILE);
    let Some(bytes) = crate::stores::atomic_file::read(vfs, dir, FILE)? else { return Ok(BTreeSet::new()) };
    let damaged = |why: String| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {why}", path.display()));
    let text = String::from_utf8(bytes).map_err(|e| damaged(e.to_string()))?;
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(damaged(format!("expected the header {HEADER:?}; a newer build may have written it")));
    }
    lines.map(|l| l.parse::<u32>().map(ChainId).map_err(|e| damaged(format!("chain id {l:?}: {e}")))).collect()
}

/// Replaces the stored set by `lost`, durably.
pub fn store(vfs: &dyn Vfs, dir: &Path, lost: &BTreeSet<ChainId>) -> io::Result<()> {
    let mut text = format!("{HEADER}\n");
    lost.iter().for_each(|c| text.push_str(&format!("{}\n", c.0)));
    crate::stores::atomic_file::replace(vfs, dir, FILE, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_store::SimVfs;

    #[test]
    fn the_set_survives_a_power_loss_and_is_replaced_whole() {
        let disk = SimVfs::default();
        let dir = Path::new("/n");
        assert!(load(&disk, dir).unwrap().is_empty(), "nothing stored yet");
        let lost: BTreeSet<ChainId> = [ChainId(3), ChainId(4097)].into();
        store(&disk, dir, &lost).unwrap();
        disk.crash(5);
        assert_eq!(load(&disk, dir).unwrap(), lost);
        store(&disk, dir, &BTreeSet::new()).unwrap();
        disk.crash(6);
        assert!(load(&disk, dir).unwrap().is_empty());
    }

    #[test]
    fn a_file_of_another_format_is_refused() {
        let disk = SimVfs::default();
        let dir = Path::new("/n");
        disk.create_dir_all(dir).unwrap();
        disk.open(&dir.join(FILE)).unwrap().append(b"meridian lost replicas, format 2\n7\n").unwrap();
        let err = load(&disk, dir).unwrap_err();
        assert!(err.to_string().contains("format 1"), "{err}");
    }
}
