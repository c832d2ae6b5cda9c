//! When a node's writes become durable relative to their acknowledgement: the three durability modes,
//! the bounds of a group commit, and the persistence figures INFO reports. `docs/durability.md` says what
//! each mode guarantees (seed 003 §6.2 leaves the fsync policy open; this is Meridian's answer).

use crate::metrics::histogram::Histogram;
use meridian_core::exposition::Latencies;
use meridian_core::DurabilityMode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Inputs handled per batch (and so per group commit) at most; bounds the latency a batch adds to its
/// first input and the memory held by its `after_sync` effects.
pub const BATCH_MAX: usize = 1024;
/// Value bytes of client writes per group commit at most: the first write of a batch waits for the
/// whole batch's fsync, so this bounds how much data that fsync has to carry.
pub const GROUP_BYTES_MAX: usize = 4 << 20;
/// How soon after the oldest unsynced `async` write a node fsyncs, unless told otherwise.
pub const DEFAULT_ASYNC_INTERVAL: Duration = Duration::from_millis(100);

/// How the core orders fsyncs and acknowledgements (`NodeOptions::durability`): the mode of the writes
/// left to the node (those of keyspaces without a durability mode of their own), and the knobs of the modes.
///
/// - `sync`: a write is acknowledged after an fsync right after its step; no fsync is shared between steps.
/// - `group`: after the one fsync that ends the batch of inputs that queued up meanwhile, bounded by
///   [`BATCH_MAX`] inputs and [`GROUP_BYTES_MAX`] value bytes.
/// - `async`: once handed to the OS; the node fsyncs `async_interval` after the oldest unsynced such write,
///   and at shutdown. A power loss can take back about one interval of acknowledged writes; a process crash
///   loses nothing, since the page cache survives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncPolicy {
    pub default: DurabilityMode,
    /// When the default is `group`: how long a batch may wait for more inputs after its first (zero: take
    /// only what is already queued, which is natural batching).
    pub group_max_wait: Duration,
    pub async_interval: Duration,
}

impl Default for SyncPolicy {
    fn default() -> Self {
        SyncPolicy::with_default(DurabilityMode::Group)
    }
}

impl SyncPolicy {
    /// `default` for the node's writes, with the default knobs.
    pub fn with_default(default: DurabilityMode) -> SyncPolicy {
        SyncPolicy { default, group_max_wait: Duration::ZERO, async_interval: DEFAULT_ASYNC_INTERVAL }
    }
}

/// What the core reports about its fsyncs, shared with the client front-end for INFO.
#[derive(Debug)]
pub(crate) struct Persistence {
    pub(crate) policy: SyncPolicy,
    /// Every fsync's duration; its count is the number of fsyncs.
    latency: Histogram,
    last_fsync_nanos: AtomicU64,
    loss_window_max_nanos: AtomicU64,
}

/// A reading of [`Persistence`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PersistenceReading {
    /// Every fsync's duration.
    pub(crate) latency: Latencies,
    pub(crate) last_fsync: Duration,
    /// The longest any write acknowledged in async mode waited for its fsync, i.e. the largest loss window a
    /// power loss could have hit so far. Zero while no async write was made: the other modes acknowledge
    /// nothing unsynced.
    pub(crate) loss_window_max: Duration,
}

impl Persistence {
    pub(crate) fn new(policy: SyncPolicy) -> Persistence {
        Persistence {
            policy,
            latency: Histogram::default(),
            last_fsync_nanos: AtomicU64::new(0),
            loss_window_max_nanos: AtomicU64::new(0),
        }
    }

    /// Notes one completed fsync; `window` is how long the oldest acknowledged write it covered waited.
    pub(crate) fn record_fsync(&self, latency: Duration, window: Option<Duration>) {
        self.latency.record(latency);
        self.last_fsync_nanos.store(nanos(latency), Ordering::Relaxed);
        if let Some(window) = window {
            self.loss_window_max_nanos.fetch_max(nanos(window), Ordering::Relaxed);
        }
    }

    pub(crate) fn read(&self) -> PersistenceReading {
        let latency = self.latency.snapshot();
        PersistenceReading {
            latency,
            last_fsync: Duration::from_nanos(self.last_fsync_nanos.load(Ordering::Relaxed)),
            loss_window_max: Duration::from_nanos(self.loss_window_max_nanos.load(Ordering::Relaxed)),
        }
    }
}

impl PersistenceReading {
    /// The fsyncs completed: the latency histogram's count.
    pub(crate) fn fsyncs(&self) -> u64 {
        self.latency.count
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loss_window_keeps_its_maximum() {
        let p = Persistence::new(SyncPolicy::default());
        p.record_fsync(Duration::from_micros(5), Some(Duration::from_millis(120)));
        p.record_fsync(Duration::from_micros(7), Some(Duration::from_millis(101)));
        p.record_fsync(Duration::from_micros(9), None);
        let r = p.read();
        assert_eq!(
            (r.fsyncs(), r.last_fsync, r.loss_window_max),
            (3, Duration::from_micros(9), Duration::from_millis(120))
        );
    }
}
