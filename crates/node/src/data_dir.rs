//! A node's data directory: one node id for life, one process at a time, one data format.
//!
//! The format is a number in `FORMAT`, written when a directory is first used. A build refuses a directory of a
//! format it does not know (a newer release's, after a downgrade) with an error that says so, rather than
//! misreading segments, hints or the manager's log: their encodings (postcard for the manager's, not
//! self-describing) change only with a new format number. A directory without the file, made before it
//! existed, is of format 1.
//!
//! - Format 1: the first release's.
//! - Format 2: a log may hold groups of records appended as one (the record kind's high bit,
//!   `meridian_store::record`), which a format-1 build would take for damage; and a key with a hash tag
//!   (`{…}`) is placed by its tag (`meridian_core::ring::key_token`). A format-1 directory holds no groups, but
//!   a key with a tag there sits where its whole bytes placed it: the node's start-up looks for such keys and
//!   refuses the directory if it finds one, and otherwise marks it format 2 ([`DataDir::mark_current`]).

use meridian_core::NodeId;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The data format this build writes; it reads every format from 1 up to it.
pub const FORMAT: u32 = 2;

const FORMAT_PREFIX: &str = "meridian data format ";

/// A claimed data directory. Its lock (an advisory `flock` on `LOCK`) is held for as long as this value
/// lives, and released by the OS if the process dies, so a crashed node never leaves a stale lock behind.
#[derive(Debug)]
pub struct DataDir {
    path: PathBuf,
    /// The format the directory was found in: [`FORMAT`] for a new one.
    format: u32,
    _lock: File,
}

/// Why [`DataDir::claim`] refused a directory: unreadable or unwritable, in use, or another node's or format's.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    #[error("cannot create data directory {path}: {source}")]
    Create { path: PathBuf, source: io::Error },
    #[error("cannot lock {path}: {source}")]
    Lock { path: PathBuf, source: io::Error },
    #[error(
        "data directory {dir} is in use by another meridian process{}; stop it or pick another --data-dir",
        .pid.as_ref().map_or(String::new(), |pid| format!(" (pid {pid})"))
    )]
    InUse { dir: PathBuf, pid: Option<String> },
    #[error(
        "data directory {dir} holds data format {format}, and this build of meridian reads formats 1 to {FORMAT}: \
         run the release that wrote it (or a later one), or start this node on an empty --data-dir"
    )]
    Format { dir: PathBuf, format: u32 },
    #[error("data directory {dir} belongs to node {owner}, not node {}", .node.0)]
    Owner { dir: PathBuf, owner: u32, node: NodeId },
    #[error("{path} is corrupt: {text:?}")]
    Corrupt { path: PathBuf, text: String },
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
}

impl DataDir {
    /// Creates the directory if need be, locks it, and checks that it belongs to `node`. Two processes on one
    /// directory would interleave their logs, and a directory started as another node would mix two nodes'
    /// histories: both are refused with an error that says why.
    pub fn claim(path: &Path, node: NodeId) -> Result<DataDir, DataDirError> {
        std::fs::create_dir_all(path).map_err(|source| DataDirError::Create { path: path.into(), source })?;
        let lock = lock(path)?;
        let format = check_format(path)?;
        check_owner(path, node)?;
        Ok(DataDir { path: path.to_path_buf(), format, _lock: lock })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The format the directory holds, an older one until [`DataDir::mark_current`].
    pub fn format(&self) -> u32 {
        self.format
    }

    /// Marks a directory of an older format as this build's, which older builds then refuse: for the caller to
    /// do once it has found nothing there that this build would misread (see the module docs).
    pub fn mark_current(&mut self) -> Result<(), DataDirError> {
        if self.format < FORMAT {
            write_format(&self.path)?;
            self.format = FORMAT;
        }
        Ok(())
    }
}

fn lock(dir: &Path) -> Result<File, DataDirError> {
    let path = dir.join("LOCK");
    let cannot = |source: io::Error| DataDirError::Lock { path: path.clone(), source };
    let mut file =
        OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(cannot)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let pid = Some(holder.trim()).filter(|h| !h.is_empty()).map(String::from);
            return Err(DataDirError::InUse { dir: dir.into(), pid });
        }
        Err(TryLockError::Error(e)) => return Err(cannot(e)),
    }
    // The pid is only a hint for the message above; the lock itself is what protects the directory.
    file.set_len(0).and_then(|()| file.rewind()).map_err(cannot)?;
    write!(file, "{}", std::process::id()).map_err(cannot)?;
    Ok(file)
}

/// The format is written on first use and checked on every start after; returns the format found. A directory
/// without the file but with a node id is from before the file: format 1.
fn check_format(dir: &Path) -> Result<u32, DataDirError> {
    let Some(text) = read_marker(dir, "FORMAT")? else {
        if read_marker(dir, "node-id")?.is_some() {
            return Ok(1);
        }
        return write_format(dir).map(|()| FORMAT);
    };
    match text.trim().strip_prefix(FORMAT_PREFIX).and_then(|n| n.parse::<u32>().ok()) {
        Some(format @ 1..=FORMAT) => Ok(format),
        Some(format) => Err(DataDirError::Format { dir: dir.into(), format }),
        None => Err(DataDirError::Corrupt { path: dir.join("FORMAT"), text }),
    }
}

/// Marks `dir` as of this build's format.
fn write_format(dir: &Path) -> Result<(), DataDirError> {
    write_marker(dir, "FORMAT", &format!("{FORMAT_PREFIX}{FORMAT}\n"))
}

/// The id is written on first use and checked on every start after.
fn check_owner(dir: &Path, node: NodeId) -> Result<(), DataDirError> {
    let Some(text) = read_marker(dir, "node-id")? else {
        return write_marker(dir, "node-id", &format!("{}\n", node.0));
    };
    match text.trim().parse::<u32>() {
        Ok(owner) if owner == node.0 => Ok(()),
        Ok(owner) => Err(DataDirError::Owner { dir: dir.into(), owner, node }),
        Err(_) => Err(DataDirError::Corrupt { path: dir.join("node-id"), text }),
    }
}

/// The contents of the marker file `name`, or None if there is none.
fn read_marker(dir: &Path, name: &str) -> Result<Option<String>, DataDirError> {
    let path = dir.join(name);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(DataDirError::Read { path, source }),
    }
}

/// Writes the marker file `name` whole or not at all (a temporary file, fsynced, renamed over it, and the
/// directory fsynced), so a crash during the first start cannot leave an empty marker that refuses every start
/// after.
fn write_marker(dir: &Path, name: &str, contents: &str) -> Result<(), DataDirError> {
    let (tmp, path) = (dir.join(format!("{name}.tmp")), dir.join(name));
    let cannot = |source: io::Error| DataDirError::Write { path: path.clone(), source };
    let mut file = File::create(&tmp).map_err(cannot)?;
    file.write_all(contents.as_bytes()).and_then(|()| file.sync_all()).map_err(cannot)?;
    std::fs::rename(&tmp, &path).map_err(cannot)?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(cannot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_claim_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDir::claim(dir.path(), NodeId(1)).unwrap();
        let refused = DataDir::claim(dir.path(), NodeId(1)).unwrap_err().to_string();
        assert!(refused.contains("in use by another meridian process"), "{refused}");
        assert!(refused.contains(&format!("pid {}", std::process::id())), "{refused}");
        drop(first);
        DataDir::claim(dir.path(), NodeId(1)).unwrap();
    }

    #[test]
    fn a_directory_keeps_its_format_and_refuses_another() {
        let dir = tempfile::tempdir().unwrap();
        drop(DataDir::claim(dir.path(), NodeId(1)).unwrap());
        let written = std::fs::read_to_string(dir.path().join("FORMAT")).unwrap();
        assert_eq!(written, format!("meridian data format {FORMAT}\n"));
        drop(DataDir::claim(dir.path(), NodeId(1)).unwrap());

        std::fs::write(dir.path().join("FORMAT"), format!("meridian data format {}\n", FORMAT + 1)).unwrap();
        let refused = DataDir::claim(dir.path(), NodeId(1)).unwrap_err().to_string();
        assert!(refused.contains(&format!("holds data format {}", FORMAT + 1)), "{refused}");
        std::fs::write(dir.path().join("FORMAT"), "").unwrap();
        let refused = DataDir::claim(dir.path(), NodeId(1)).unwrap_err().to_string();
        assert!(refused.contains("FORMAT is corrupt"), "{refused}");
    }

    /// A directory made before the format file existed, or marked format 1, is claimed as format 1, and marked
    /// as this build's format only when the caller says so.
    #[test]
    fn an_older_format_is_read_and_marked_when_the_caller_says() {
        for marker in [None, Some("meridian data format 1\n")] {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("node-id"), "1\n").unwrap();
            if let Some(marker) = marker {
                std::fs::write(dir.path().join("FORMAT"), marker).unwrap();
            }
            let mut claimed = DataDir::claim(dir.path(), NodeId(1)).unwrap();
            assert_eq!(claimed.format(), 1);
            assert_eq!(std::fs::read_to_string(dir.path().join("FORMAT")).ok().as_deref(), marker);
            claimed.mark_current().unwrap();
            let written = std::fs::read_to_string(dir.path().join("FORMAT")).unwrap();
            assert_eq!((claimed.format(), written), (FORMAT, format!("meridian data format {FORMAT}\n")));
        }
    }

    #[test]
    fn a_directory_keeps_its_node_id() {
        let dir = tempfile::tempdir().unwrap();
        drop(DataDir::claim(dir.path(), NodeId(1)).unwrap());
        let refused = DataDir::claim(dir.path(), NodeId(2)).unwrap_err().to_string();
        assert!(refused.contains("belongs to node 1, not node 2"), "{refused}");
    }
}
