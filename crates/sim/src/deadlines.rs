//! The check that no read returns a value past its deadline, as Redis never does (docs/keyspaces.md,
//! "Expiry"). The history checker cannot see it: a value read late is still a value some linearization allows,
//! since the expiry's delete may come after the read. So the workload holds each read to the put's time to live
//! directly.
//!
//! A put of value v with a time to live of t fixes its deadline on its front-end's wall clock before it
//! completes, so at most `completed + t + WALL_ERROR_MS` of true time; a node that answers a read reads its own
//! wall clock after the read's invocation, at least `invoked − WALL_ERROR_MS`. So a read of v invoked
//! `2 × WALL_ERROR_MS` past `completed + t` was answered by a node whose clock had the key past its deadline: a
//! violation, whatever the clocks did within their bound. Puts whose answer was lost have no completion and
//! are not held to this.

use crate::clock::WALL_ERROR_MS;
use std::collections::HashMap;

/// A put with a time to live: its time to live and, once answered, when.
struct Expiring {
    ttl_ns: u64,
    completed: Option<u64>,
}

#[derive(Default)]
pub struct Deadlines {
    by_value: HashMap<String, Expiring>,
}

impl Deadlines {
    /// A put of `value` (unique to it) with a time to live of `ttl_ms`.
    pub fn put(&mut self, value: &str, ttl_ms: u64) {
        self.by_value.insert(value.to_string(), Expiring { ttl_ns: ttl_ms * 1_000_000, completed: None });
    }

    /// The put of `value`, if it had a time to live, was answered as applied at `now`.
    pub fn applied(&mut self, value: &str, now: u64) {
        if let Some(e) = self.by_value.get_mut(value) {
            e.completed = Some(now);
        }
    }

    /// The violation, if a read invoked at `invoked` that returned `value` came past the value's deadline.
    pub fn check_read(&self, key: &str, value: &str, invoked: u64) -> Option<String> {
        let e = self.by_value.get(value)?;
        let due = e.completed? + e.ttl_ns + 2 * WALL_ERROR_MS * 1_000_000;
        (invoked >= due).then(|| {
            let late_ms = (invoked - due) as f64 / 1e6 + 2.0 * WALL_ERROR_MS as f64;
            format!(
                "read past its deadline: a get of {key} invoked at {} ms returned {value}, whose put completed at \
                 {} ms with a time to live of {} ms ({late_ms:.1} ms after its deadline, more than the clocks' error)",
                invoked / 1_000_000,
                e.completed.unwrap_or(0) / 1_000_000,
                e.ttl_ns / 1_000_000
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_read_is_late_only_beyond_the_clocks_error_after_an_answered_put() {
        let mut d = Deadlines::default();
        d.put("v", 100);
        assert_eq!(d.check_read("k", "v", 10_000 * MS), None, "the put has no answer yet");
        d.applied("v", 1_000 * MS);
        let bound = 1_000 + 100 + 2 * WALL_ERROR_MS;
        assert_eq!(d.check_read("k", "v", (bound - 1) * MS), None);
        assert!(d.check_read("k", "v", bound * MS).unwrap().contains("past its deadline"));
        assert_eq!(d.check_read("k", "w", bound * MS), None, "a value without a time to live");
    }
}
