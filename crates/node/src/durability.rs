//! When a node's writes become durable relative to their acknowledgement: the three durability modes,
//! the bounds of a group commit, and the persistence figures INFO reports. `docs/durability.md` says what
//! each mode guarantees (seed 003 §6.2 leaves the fsync policy open; this is Meridian's answer).

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Inputs handled per batch (and so per group commit) at most; bounds the latency a batch adds to its
/// first input and the memory held by its `after_sync` effects.
pub const BATCH_MAX: usize = 1024;
/// Value bytes of client writes per group commit at most: the first write of a batch waits for the
/// whole batch's fsync, so this bounds how much data that fsync has to carry.
pub const GROUP_BYTES_MAX: usize = 4 << 20;
/// How often an `async` node fsyncs unless told otherwise.
pub const DEFAULT_ASYNC_INTERVAL: Duration = Duration::from_millis(100);

/// How the core thread orders fsyncs and acknowledgements (`NodeOptions::durability`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncMode {
    /// Durable: an fsync after every step that wrote, before that step's `after_sync` effects; no fsync
    /// is shared between writes.
    Sync,
    /// Durable, with group commit: one fsync per batch of the inputs that queued up meanwhile, bounded by
    /// [`BATCH_MAX`] inputs and [`GROUP_BYTES_MAX`] value bytes. After its first input a batch may wait up
    /// to `max_wait` for more (zero: take only what is already queued, which is natural batching).
    Group { max_wait: Duration },
    /// Window-loss durable: `after_sync` effects are carried out at once, and the node fsyncs `interval`
    /// after the oldest unsynced write, and at shutdown. A power loss can take back up to about one
    /// interval of acknowledged writes; a process crash loses nothing, since the page cache survives it.
    Async { interval: Duration },
}

impl Default for SyncMode {
    fn default() -> Self {
        SyncMode::Group { max_wait: Duration::ZERO }
    }
}

impl SyncMode {
    pub fn name(&self) -> &'static str {
        match self {
            SyncMode::Sync => "sync",
            SyncMode::Group { .. } => "group",
            SyncMode::Async { .. } => "async",
        }
    }
}

impl fmt::Display for SyncMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses `sync`, `group` or `async`, with the default wait and interval.
impl FromStr for SyncMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sync" => Ok(SyncMode::Sync),
            "group" => Ok(SyncMode::default()),
            "async" => Ok(SyncMode::Async { interval: DEFAULT_ASYNC_INTERVAL }),
            other => Err(format!("unknown durability mode {other:?}; expected sync, group or async")),
        }
    }
}

/// What the core thread reports about its fsyncs, shared with the client front-end for INFO.
#[derive(Debug)]
pub(crate) struct Persistence {
    pub(crate) mode: SyncMode,
    fsyncs: AtomicU64,
    last_fsync_nanos: AtomicU64,
    loss_window_max_nanos: AtomicU64,
}

/// A reading of [`Persistence`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PersistenceReading {
    pub(crate) fsyncs: u64,
    pub(crate) last_fsync: Duration,
    /// Async mode: the longest any acknowledged write waited for its fsync, i.e. the largest loss window a
    /// power loss could have hit so far. Zero in the other modes, where nothing is acknowledged unsynced.
    pub(crate) loss_window_max: Duration,
}

impl Persistence {
    pub(crate) fn new(mode: SyncMode) -> Persistence {
        Persistence {
            mode,
            fsyncs: AtomicU64::new(0),
            last_fsync_nanos: AtomicU64::new(0),
            loss_window_max_nanos: AtomicU64::new(0),
        }
    }

    /// Notes one completed fsync; `window` is how long the oldest acknowledged write it covered waited.
    pub(crate) fn record_fsync(&self, latency: Duration, window: Option<Duration>) {
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        self.last_fsync_nanos.store(nanos(latency), Ordering::Relaxed);
        if let Some(window) = window {
            self.loss_window_max_nanos.fetch_max(nanos(window), Ordering::Relaxed);
        }
    }

    pub(crate) fn read(&self) -> PersistenceReading {
        PersistenceReading {
            fsyncs: self.fsyncs.load(Ordering::Relaxed),
            last_fsync: Duration::from_nanos(self.last_fsync_nanos.load(Ordering::Relaxed)),
            loss_window_max: Duration::from_nanos(self.loss_window_max_nanos.load(Ordering::Relaxed)),
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_print_by_name() {
        for name in ["sync", "group", "async"] {
            assert_eq!(name.parse::<SyncMode>().unwrap().to_string(), name);
        }
        assert_eq!("async".parse::<SyncMode>().unwrap(), SyncMode::Async { interval: DEFAULT_ASYNC_INTERVAL });
        assert_eq!("group".parse::<SyncMode>().unwrap(), SyncMode::Group { max_wait: Duration::ZERO });
        assert!("fsync".parse::<SyncMode>().unwrap_err().contains("sync, group or async"));
    }

    #[test]
    fn the_loss_window_keeps_its_maximum() {
        let p = Persistence::new(SyncMode::default());
        p.record_fsync(Duration::from_micros(5), Some(Duration::from_millis(120)));
        p.record_fsync(Duration::from_micros(7), Some(Duration::from_millis(101)));
        p.record_fsync(Duration::from_micros(9), None);
        let r = p.read();
        assert_eq!(
            (r.fsyncs, r.last_fsync, r.loss_window_max),
            (3, Duration::from_micros(9), Duration::from_millis(120))
        );
    }
}
