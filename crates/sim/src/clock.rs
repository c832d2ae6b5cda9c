//! Per-node monotonic clocks: virtual time at a drifting rate from an arbitrary zero. Cores see this clock as
//! `now` and their timers run at its rate. A monotonic clock never steps, so the only clock faults are its
//! offset (which no protocol may compare across nodes) and its rate, which the nemesis changes at random
//! within ±500 ppm (the slewing of a clock disciplined by NTP).

use meridian_core::Time;
use std::time::Duration;

#[derive(Clone, Copy, Debug, Default)]
pub struct Clock {
    /// Virtual time at which the current rate took effect, and the local reading then.
    base_virtual: u64,
    base_local: u64,
    /// Parts per million faster (positive) or slower (negative) than virtual time.
    drift_ppm: i64,
}

impl Clock {
    pub fn new(offset_ns: u64, drift_ppm: i64) -> Clock {
        Clock { base_virtual: 0, base_local: offset_ns, drift_ppm }
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
    fn rate_changes_never_step_the_reading() {
        let mut c = Clock::new(0, 500);
        let before = c.local(2_000_000);
        c.set_drift(2_000_000, -500);
        assert_eq!(c.local(2_000_000), before);
        assert!(c.local(3_000_000) > before);
        assert_eq!(c.local(3_000_000).0, before.0 + 1_000_000 - 500);
    }
}
