//! Per-node CPU budgets. On one machine the nodes would otherwise share every core, and the copy work of
//! a join on one node would take CPU from the others; the seed's experiment ran each node on its own
//! machine. So each node process goes into its own cgroup with a CFS quota of a fraction of a core: cgroup
//! v1's cpu controller (`cpu.cfs_period_us`, `cpu.cfs_quota_us`) where it is mounted, else cgroup v2's
//! `cpu.max`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The CFS period: quotas are a share of it.
const PERIOD_US: u64 = 100_000;
/// The smallest quota the kernel accepts.
const QUOTA_MIN_US: u64 = 1_000;
/// How long removing a group may wait for the kernel to let go of a process that just exited.
const REMOVE_WAIT: Duration = Duration::from_secs(2);

const V1_ROOT: &str = "/sys/fs/cgroup/cpu";
const V2_ROOT: &str = "/sys/fs/cgroup";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

impl Version {
    pub fn name(self) -> &'static str {
        match self {
            Version::V1 => "cgroup v1",
            Version::V2 => "cgroup v2",
        }
    }
}

/// Where node cgroups are made, and the quota each gets.
#[derive(Clone, Debug)]
pub struct CpuBudget {
    version: Version,
    root: PathBuf,
    cores: f64,
}

impl CpuBudget {
    /// The hierarchy with a cpu controller on this machine, if any: v1's when mounted, else v2's when it
    /// offers the cpu controller. Whether it is writable shows when the first group is made.
    pub fn detect(cores: f64) -> Option<CpuBudget> {
        let v2_controllers = fs::read_to_string(Path::new(V2_ROOT).join("cgroup.controllers")).unwrap_or_default();
        if Path::new(V1_ROOT).join("cpu.cfs_quota_us").exists() {
            Some(CpuBudget { version: Version::V1, root: V1_ROOT.into(), cores })
        } else if v2_controllers.split_whitespace().any(|c| c == "cpu") {
            Some(CpuBudget { version: Version::V2, root: V2_ROOT.into(), cores })
        } else {
            None
        }
    }

    pub fn version(&self) -> Version {
        self.version
    }

    /// A new group `name` with this budget's quota; removed when dropped.
    pub fn group(&self, name: &str) -> io::Result<Group> {
        if self.version == Version::V2 {
            enable_cpu_controller(&self.root)?;
        }
        let path = self.root.join(name);
        fs::create_dir(&path)?;
        // From here on the directory is removed on every path, written or not.
        let group = Group { path };
        for (file, contents) in quota_files(self.version, self.cores) {
            fs::write(group.path.join(file), contents)?;
        }
        Ok(group)
    }
}

/// v2 offers a controller to a group's children only when the parent lists it in `cgroup.subtree_control`.
fn enable_cpu_controller(root: &Path) -> io::Result<()> {
    let control = root.join("cgroup.subtree_control");
    if fs::read_to_string(&control)?.split_whitespace().any(|c| c == "cpu") {
        return Ok(());
    }
    fs::write(control, "+cpu")
}

/// The files that set a quota of `cores` and what to write in them, in order (v1 takes the period first, as
/// the quota is checked against it).
pub fn quota_files(version: Version, cores: f64) -> Vec<(&'static str, String)> {
    let quota = ((cores * PERIOD_US as f64).round() as u64).max(QUOTA_MIN_US);
    match version {
        Version::V1 => vec![("cpu.cfs_period_us", PERIOD_US.to_string()), ("cpu.cfs_quota_us", quota.to_string())],
        Version::V2 => vec![("cpu.max", format!("{quota} {PERIOD_US}"))],
    }
}

/// One node's cgroup.
#[derive(Debug)]
pub struct Group {
    path: PathBuf,
}

impl Group {
    /// Moves process `pid` (all its threads, and whatever it starts later) into the group.
    pub fn add(&self, pid: u32) -> io::Result<()> {
        fs::write(self.path.join("cgroup.procs"), pid.to_string())
    }
}

impl Drop for Group {
    /// A group can be removed only once empty; a process that has just been reaped may still count for a
    /// moment, so this retries briefly.
    fn drop(&mut self) {
        let start = Instant::now();
        while let Err(e) = fs::remove_dir(&self.path) {
            if e.kind() == io::ErrorKind::NotFound {
                return;
            }
            if start.elapsed() > REMOVE_WAIT {
                return eprintln!("warning: cannot remove cgroup {}: {e}", self.path.display());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quarter_core_is_a_quarter_of_each_period() {
        let v1 = quota_files(Version::V1, 0.25);
        assert_eq!(v1, vec![("cpu.cfs_period_us", "100000".to_string()), ("cpu.cfs_quota_us", "25000".to_string())]);
        assert_eq!(quota_files(Version::V2, 0.25), vec![("cpu.max", "25000 100000".to_string())]);
        assert_eq!(quota_files(Version::V2, 1.5), vec![("cpu.max", "150000 100000".to_string())]);
        assert_eq!(quota_files(Version::V1, 0.0001)[1].1, "1000", "the kernel's minimum");
    }
}
