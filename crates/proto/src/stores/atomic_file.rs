//! Replacing a small file whole, durably: written to a temporary file beside it, synced, then renamed over it, so
//! a crash leaves either the old contents or the new, never a torn mix.

use meridian_store::Vfs;
use std::io;
use std::path::Path;

/// What `dir/name` holds, if it exists.
pub fn read(vfs: &dyn Vfs, dir: &Path, name: &str) -> io::Result<Option<Vec<u8>>> {
    let path = dir.join(name);
    if !vfs.exists(&path) {
        return Ok(None);
    }
    let file = vfs.open(&path)?;
    let mut bytes = vec![0; file.len()? as usize];
    file.read_exact_at(0, &mut bytes)?;
    Ok(Some(bytes))
}

/// Replaces `dir/name` by `bytes`; durable once it returns.
pub fn replace(vfs: &dyn Vfs, dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    vfs.create_dir_all(dir)?;
    if vfs.exists(&tmp) {
        vfs.remove_file(&tmp)?;
    }
    let mut file = vfs.open(&tmp)?;
    file.append(bytes)?;
    file.sync()?;
    // A name is durable once renamed (`Vfs::rename`), not when its file is created.
    vfs.rename(&tmp, &dir.join(name))
}
