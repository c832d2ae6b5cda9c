//! Per-node clocks. The monotonic clock is virtual time at a drifting rate from an arbitrary zero. Cores see it
//! as `now` and their timers run at its rate. It never steps, so its only faults are its offset (which no
//! protocol may compare across nodes) and its rate, which the nemesis changes at random within ±500 ppm (the
//! slewing of a clock disciplined by NTP).
//!
//! The wall clock (Unix milliseconds, what keys' expiry deadlines are fixed and judged by) is virtual time plus
//! an offset within ±[`WALL_ERROR_MS`] of the truth, which the nemesis steps at random, as NTP steps a clock it
//! finds too far off.

use meridian_core::Time;
use std::time::Duration;

/// How far a node's wall clock may be from true time: NTP's accuracy on a healthy network, with margin.
pub const WALL_ERROR_MS: u64 = 100;
/// The wall clock's reading at virtual time zero: a Unix time in 2027, far from any edge.
const WALL_EPOCH_MS: u64 = 1_800_000_000_000;

#[derive(Clone, Copy, Debug, Default)]
pub struct Clock {
    /// Virtual time at which the current rate took effect, and the local reading then.
    base_virtual: u64,
    base_local: u64,
    /// Parts per million faster (positive) or slower (negative) than virtual time.
    drift_ppm: i64,
    /// The wall clock's error, within ±[`WALL_ERROR_MS`].
    wall_offset_ms: i64,
}

impl Clock {
    pub fn new(offset_ns: u64, drift_ppm: i64) -> Clock {
        Clock { base_virtual: 0, base_local: offset_ns, drift_ppm, wall_offset_ms: 0 }
    }

    /// The wall clock's reading at `virtual_ns`.
    pub fn wall_ms(&self, virtual_ns: u64) -> u64 {
        (WALL_EPOCH_MS + virtual_ns / 1_000_000).saturating_add_signed(self.wall_offset_ms)
    }

    /// Steps the wall clock to an error of `offset_ms`, clamped to ±[`WALL_ERROR_MS`].
    pub fn step_wall(&mut self, offset_ms: i64) {
        let bound = WALL_ERROR_MS as i64;
        self.wall_offset_ms = offset_ms.clamp(-bound, bound);
    }

    pub fn local(&self, virtual_ns: u64) -> Time {
        let elapsed = virtual_ns.saturating_sub(self.base_virtual) as i128;
        let t = self.base_local as i128 + elapsed + elapsed * self.drift_ppm as i128 / 1_000_000;
        Time(t.clamp(0, u64::MAX as i128) as u64)
    }

    /// Virtual time that passes while this clock measures `d`.
    pub fn virtual_span(&self, d: Duration) -> u64 {
        let ns = d.as_nanos() as i128 * 1_000_000 / (1_000_000 + self.drift_ppm as i128).max(1);
        ns.clamp(1, u64::MAX as i128) as u64
    }

    /// Changes the rate from `virtual_ns` on, continuing from the current reading.
    pub fn set_drift(&mut self, virtual_ns: u64, drift_ppm: i64) {
        self.base_local = self.local(virtual_ns).0;
        self.base_virtual = virtual_ns;
        self.drift_ppm = drift_ppm;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_and_offset_shape_local_time() {
        let c = Clock::new(1_000, 1_000);
        assert_eq!(c.local(1_000_000).0, 1_000_000 + 1_000 + 1_000);
        assert_eq!(c.virtual_span(Duration::from_nanos(1_001_000)), 1_000_000);
    }

    #[test]
    fn wall_clocks_step_within_their_error_bound() {
        let mut c = Clock::new(5, 300);
        assert_eq!(c.wall_ms(2_000_000), WALL_EPOCH_MS + 2);
        c.step_wall(-40);
        assert_eq!(c.wall_ms(2_000_000), WALL_EPOCH_MS + 2 - 40);
        c.step_wall(10_000);
        assert_eq!(c.wall_ms(0), WALL_EPOCH_MS + WALL_ERROR_MS);
    }

    #[test]
    fn rate_changes_never_step_the_reading() {
        let mut c = Clock::new(0, 500);
        let before = c.local(2_000_000);
        c.set_drift(2_000_000, -500);
        assert_eq!(c.local(2_000_000), before);
        assert!(c.local(3_000_000) > before);
        assert_eq!(c.local(3_000_000).0, before.0 + 1_000_000 - 500);
    }
}
