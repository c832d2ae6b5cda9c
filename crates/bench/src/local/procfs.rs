//! What `/proc` tells of a node process. Its CPU time (all its threads, user and system, from
//! `/proc/<pid>/stat`): over a window it shows whether the node ran at its quota, or was held below it by the
//! load or by other work on the machine. Its resident memory (`VmRSS` in `/proc/<pid>/status`): what a
//! memory replica costs, beside the bytes it holds.

/// CPU seconds process `pid` has used so far; `None` once it is gone.
pub(super) fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let ticks_per_s = rustix::param::clock_ticks_per_second();
    (ticks_per_s > 0).then(|| cpu_ticks(&stat).map(|t| t as f64 / ticks_per_s as f64)).flatten()
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line, in clock ticks. The command name (field
/// 2) is in parentheses and may hold spaces and parentheses itself, so fields are counted after the last ')'.
fn cpu_ticks(stat: &str) -> Option<u64> {
    let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Resident bytes of process `pid` now; `None` once it is gone.
pub(super) fn rss_bytes(pid: u32) -> Option<u64> {
    vm_rss(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
}

/// The `VmRSS:` line of a `/proc/<pid>/status`, which the kernel gives in kB (KiB), in bytes.
fn vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib << 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_user_plus_system_time() {
        let stat = "4242 (meridian (x) y) S 1 4242 4242 0 -1 4194560 5000 0 0 0 1234 567 0 0 20 0 9 0 100 1 2";
        assert_eq!(cpu_ticks(stat), Some(1234 + 567));
        assert_eq!(cpu_ticks("4242 (short) S 1 2"), None);
        assert!(cpu_seconds(std::process::id()).is_some_and(|s| s >= 0.0));
    }

    #[test]
    fn resident_memory_is_vm_rss_in_bytes() {
        let status = "Name:\tmeridian\nVmPeak:\t  900000 kB\nVmRSS:\t   12345 kB\nRssAnon:\t 10000 kB\n";
        assert_eq!(vm_rss(status), Some(12345 << 10));
        assert_eq!(vm_rss("Name:\tkthreadd\n"), None, "kernel threads have no VmRSS");
        assert!(rss_bytes(std::process::id()).is_some_and(|b| b > 0));
    }
}
