//! The process and its disk, read when `/metrics` is scraped: resident memory and file descriptors from
//! Linux's `/proc` (omitted where there is none), and the bytes under the data directory. INFO reads the
//! resident memory and the CPU time here too.

use meridian_core::exposition::{Exposition, MetricKind};
use std::fs;
use std::mem::MaybeUninit;
use std::path::Path;
use std::time::Duration;

/// Writes what can be read; a figure that cannot is left out rather than reported as zero.
pub(super) fn families(e: &mut Exposition, data_dir: Option<&Path>) {
    if let Some(bytes) = resident_bytes() {
        e.single("process_resident_memory_bytes", MetricKind::Gauge, "Resident memory size in bytes.", bytes);
    }
    if let Ok(fds) = fs::read_dir("/proc/self/fd") {
        e.single("process_open_fds", MetricKind::Gauge, "Open file descriptors.", fds.count());
    }
    if let Some(max) = proc_figure("/proc/self/limits", "Max open files") {
        e.single("process_max_fds", MetricKind::Gauge, "The soft limit on open file descriptors.", max);
    }
    if let Some(dir) = data_dir {
        let help = "Bytes of the files under the node's data directory (stores, map, manager log).";
        e.single("meridian_data_dir_bytes", MetricKind::Gauge, help, tree_bytes(dir));
    }
}

/// The process's resident memory (VmRSS), in bytes; None where there is no `/proc`.
pub(crate) fn resident_bytes() -> Option<u64> {
    proc_figure("/proc/self/status", "VmRSS:").map(|kb| kb * 1024)
}

/// CPU time the process has used so far, in the kernel and in user space, from `getrusage`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct CpuTime {
    pub(crate) system: Duration,
    pub(crate) user: Duration,
}

/// The process's [`CpuTime`], every thread's; None if `getrusage` fails (it does not for `RUSAGE_SELF`).
pub(crate) fn cpu_time() -> Option<CpuTime> {
    let mut usage = MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: `usage` is valid for writes of a `rusage`, which getrusage fills in whole when it returns 0.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: getrusage returned 0, so it initialised `usage`.
    let usage = unsafe { usage.assume_init() };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1_000);
    Some(CpuTime { system: time(usage.ru_stime), user: time(usage.ru_utime) })
}

/// The number after `label` on its line of the `/proc` file `path` (VmRSS in kB in `status`, the soft limit in
/// `limits`).
fn proc_figure(path: &str, label: &str) -> Option<u64> {
    let text = fs::read_to_string(path).ok()?;
    let line = text.lines().find(|l| l.starts_with(label))?;
    line[label.len()..].split_whitespace().next()?.parse().ok()
}

/// The sizes of the regular files under `dir`; what vanishes while it is walked (compaction removing a
/// segment) counts as nothing.
fn tree_bytes(dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => tree_bytes(&entry.path()),
            Ok(t) if t.is_file() => entry.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_reads_its_own_memory_and_cpu_time() {
        assert!(resident_bytes().is_some_and(|b| b > 0), "Linux has /proc");
        let before = cpu_time().unwrap();
        let spin = std::time::Instant::now();
        while spin.elapsed() < Duration::from_millis(30) {
            std::hint::black_box(spin.elapsed());
        }
        let after = cpu_time().unwrap();
        assert!(after.user + after.system > before.user + before.system, "{before:?} then {after:?}");
    }

    #[test]
    fn a_data_directory_counts_its_files_at_every_depth() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a"), [0u8; 10]).unwrap();
        fs::create_dir_all(dir.path().join("x/y")).unwrap();
        fs::write(dir.path().join("x/y/b"), [0u8; 32]).unwrap();
        assert_eq!(tree_bytes(dir.path()), 42);
        assert_eq!(tree_bytes(&dir.path().join("missing")), 0);
    }
}
