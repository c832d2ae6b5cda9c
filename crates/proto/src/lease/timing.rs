//! The clock arithmetic of leases. Every node's monotonic clock runs at a rate within ε of real time
//! ([`DRIFT_MAX_PPM`]); clocks are never compared across nodes, only durations. A period that starts earlier on
//! one side and is measured longer there outlasts the other side's, so each rule below picks who starts first
//! and who measures long:
//!
//! - A lease at a replica starts when it asked for it (a renewal) or when the write that issues it arrived (a
//!   push); the master's record starts when it granted it, or when the acknowledgement arrived: later. The
//!   replica counts [`shrunk`] lengths, the master the full ones, so the record outlasts the lease.
//! - A member's promise to a master counts [`PROMISE`] from when its heartbeat arrived; the master's own lease
//!   counts [`shrunk`]`(PROMISE)` from when it sent that heartbeat: earlier, and shorter.
//! - A replica may answer under its leases only while the master confirms it: for the rest of the master's
//!   lease, counted from when the replica sent the acknowledgement the master had heard before it confirmed.

use meridian_core::time::DRIFT_MAX_PPM;
use meridian_core::Time;
use std::time::Duration;

/// How long a member's promise to a master lasts: a new master waits this long, at most, for promises to an old
/// one to run out. It bounds how long reads stall when a master fails (the manager's failure detection comes on
/// top).
pub const PROMISE: Duration = Duration::from_secs(2);

/// Ticks between a master's heartbeats: each renews its lease, well within [`PROMISE`].
pub const HEARTBEAT_TICKS: u64 = 4;

/// A margin on top of the drift bound, as the manager's leases take.
const SAFETY: f64 = 1.1;

/// The largest relative rate error between two clocks, with the margin.
fn epsilon() -> f64 {
    SAFETY * 2.0 * DRIFT_MAX_PPM as f64 / 1e6
}

/// `d` as the side that must stop first counts it: short enough that, measured on a clock ε slow, it ends before
/// `d` measured on a clock ε fast.
pub fn shrunk(d: Duration) -> Duration {
    d.mul_f64((1.0 - epsilon()) / (1.0 + epsilon()))
}

/// `from` plus `ns` shrunk: the end of a period another node measured as `ns` long.
pub fn shrunk_from(from: Time, ns: u64) -> Time {
    from.plus(shrunk(Duration::from_nanos(ns)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shrunk period, on the fastest clock the bound allows, ends before the full one on the slowest.
    #[test]
    fn a_shrunk_period_ends_first_on_any_two_clocks_within_the_bound() {
        let d = Duration::from_secs(60);
        let rate = DRIFT_MAX_PPM as f64 / 1e6;
        let shrunk_real = shrunk(d).as_secs_f64() / (1.0 - rate);
        let full_real = d.as_secs_f64() / (1.0 + rate);
        assert!(shrunk_real < full_real, "{shrunk_real} s ends before {full_real} s");
        assert!(shrunk(d) > d.mul_f64(0.99), "a small price: {:?}", shrunk(d));
        assert_eq!(shrunk_from(Time::from_nanos(5), 0), Time::from_nanos(5));
    }
}
