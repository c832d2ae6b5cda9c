//! Per-command statistics: calls, failed calls and latency, kept for every command of the table and read
//! by both INFO (`# Commandstats`) and `/metrics`, so the two always tell the same story.
//!
//! A command's latency runs from when its frame was parsed to when its reply was ready to be written: the
//! time the node took, including any wait behind an earlier pipelined command of the same key and the
//! round trips to the chain, but not the client's network. Replies written out together share one clock
//! reading, taken at the first of them: a pipeline's replies are ready within microseconds of each other, and a
//! reading costs about as much as encoding a reply.

use super::commands::COMMANDS;
use crate::metrics::histogram::Histogram;
use meridian_core::exposition::Latencies;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[derive(Debug, Default)]
struct CommandCounters {
    latency: Histogram,
    /// Calls answered with an error reply.
    failed: AtomicU64,
}

/// The figures of every command of [`COMMANDS`], by its place in the table.
#[derive(Debug)]
pub(crate) struct CommandStats {
    per: Box<[CommandCounters]>,
}

/// One command's figures as read at one moment.
#[derive(Clone, Debug)]
pub(crate) struct CommandReading {
    pub(crate) name: &'static str,
    /// Calls: the latency's count.
    pub(crate) latency: Latencies,
    pub(crate) failed: u64,
}

impl Default for CommandStats {
    fn default() -> Self {
        CommandStats { per: COMMANDS.iter().map(|_| CommandCounters::default()).collect() }
    }
}

impl CommandStats {
    pub(crate) fn record(&self, command: usize, elapsed: Duration, failed: bool) {
        let c = &self.per[command];
        c.latency.record(elapsed);
        if failed {
            c.failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The commands called at least once, in table order.
    pub(crate) fn called(&self) -> Vec<CommandReading> {
        self.per
            .iter()
            .zip(COMMANDS)
            .map(|(c, command)| CommandReading {
                name: command.name,
                latency: c.latency.snapshot(),
                failed: c.failed.load(Ordering::Relaxed),
            })
            .filter(|r| r.latency.count > 0)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_called_commands_are_read_with_their_calls_and_failures() {
        let stats = CommandStats::default();
        let get = COMMANDS.iter().position(|c| c.name == "get").unwrap();
        stats.record(get, Duration::from_micros(30), false);
        stats.record(get, Duration::from_micros(300), true);
        let called = stats.called();
        assert_eq!(called.len(), 1);
        assert_eq!((called[0].name, called[0].latency.count, called[0].failed), ("get", 2, 1));
        assert_eq!(called[0].latency.sum_us, 330);
    }
}
