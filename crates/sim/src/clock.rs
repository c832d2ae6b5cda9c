//! Per-node clocks: an offset, a drift and steps on top of virtual time. Cores see the skewed wall
//! clock as `now`; their timers are relative and run at the drifted rate, as a monotonic clock would.

use meridian_core::Time;
use std::time::Duration;

#[derive(Clone, Copy, Debug, Default)]
pub struct Clock {
    pub offset_ns: i64,
    /// Parts per million faster (positive) or slower (negative) than virtual time.
    pub drift_ppm: i64,
}

impl Clock {
    pub fn local(&self, virtual_ns: u64) -> Time {
        let v = virtual_ns as i128;
        let t = v + self.offset_ns as i128 + v * self.drift_ppm as i128 / 1_000_000;
        Time(t.clamp(0, u64::MAX as i128) as u64)
    }

    /// Virtual time that passes while this clock measures `d`.
    pub fn virtual_span(&self, d: Duration) -> u64 {
        let ns = d.as_nanos() as i128 * 1_000_000 / (1_000_000 + self.drift_ppm as i128).max(1);
        ns.clamp(1, u64::MAX as i128) as u64
    }

    pub fn step(&mut self, delta_ns: i64) {
        self.offset_ns = self.offset_ns.saturating_add(delta_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_and_offset_shape_local_time() {
        let c = Clock { offset_ns: 1_000, drift_ppm: 1_000 };
        assert_eq!(c.local(1_000_000).0, 1_000_000 + 1_000 + 1_000);
        assert_eq!(c.virtual_span(Duration::from_nanos(1_001_000)), 1_000_000);
    }

    #[test]
    fn backwards_steps_never_underflow() {
        let mut c = Clock::default();
        c.step(-5_000);
        assert_eq!(c.local(1_000).0, 0);
    }
}
