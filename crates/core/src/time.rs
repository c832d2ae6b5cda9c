//! Time as protocol cores see it: nanoseconds on the node's own (possibly skewed) wall clock.
//!
//! Cores never read a clock; the driver or the simulator passes `now` in. Timers are relative
//! durations, as a monotonic clock would measure them, so a clock step moves `now` but not timers.

use serde::{Deserialize, Serialize};
use std::time::Duration;

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

    /// Saturating: a clock that stepped backwards yields zero, never a panic.
    pub fn since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    pub fn plus(self, d: Duration) -> Time {
        Time(self.0.saturating_add(d.as_nanos() as u64))
    }
}
