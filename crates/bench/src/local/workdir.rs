//! The run's own directory, under the one the bench was given: node data and logs go there, and it is
//! removed when the run ends, however it ends.

use std::path::{Path, PathBuf};

pub(crate) struct WorkDir(pub PathBuf);

impl WorkDir {
    /// `<parent>/<bench>-<pid>`, so that runs sharing a parent directory do not meet.
    pub(crate) fn create(parent: &Path, bench: &str) -> Result<WorkDir, String> {
        let dir = parent.join(format!("{bench}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(WorkDir(dir))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            eprintln!("warning: cannot remove {}: {e}", self.0.display());
        }
    }
}
