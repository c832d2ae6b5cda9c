//! Time as protocol cores see it: nanoseconds on the node's own monotonic clock.
//!
//! Cores never read a clock; the driver or the simulator passes `now` in. The clock is monotonic: it has an
//! arbitrary zero (it restarts with the process), runs at a slightly wrong rate (drift, bounded by
//! [`DRIFT_MAX_PPM`]), and never steps, like `CLOCK_MONOTONIC`. That is what a lease needs: "valid for d after
//! I sent the request" must hold however NTP moves the wall clock. No core reads wall-clock time; one that
//! needs it (expiry deadlines shared between nodes) is given it as a separate input (`Process::set_wall_clock`).

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The largest rate error, in parts per million, that protocols must tolerate between two nodes' clocks. The
/// simulator draws drifts within ±500 ppm; real quartz clocks are within ±100 ppm. Lease arithmetic uses this
/// bound with a wide safety factor.
pub const DRIFT_MAX_PPM: u64 = 1_000;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Time(pub u64);

impl Time {
    pub const ZERO: Time = Time(0);

    pub fn from_nanos(ns: u64) -> Time {
        Time(ns)
    }

    pub fn as_nanos(self) -> u64 {
        self.0
    }

    /// Saturating: an `earlier` that is in fact later yields zero, never a panic.
    pub fn since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    pub fn plus(self, d: Duration) -> Time {
        Time(self.0.saturating_add(d.as_nanos() as u64))
    }
}
