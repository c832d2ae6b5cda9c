//! The core's named timers on the monotonic clock.
//!
//! A core names its timers; setting a name that is already set re-arms it and cancelling removes it
//! (the contract of [`meridian_core::Process::Timer`]). Deadlines are [`Instant`]s, on the same monotonic
//! clock as the `now` the core sees.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

pub(crate) struct Timers<T> {
    by_name: BTreeMap<T, Instant>,
    /// The same timers ordered by deadline; the name breaks ties so equal deadlines can coexist.
    by_deadline: BTreeSet<(Instant, T)>,
}

impl<T: Clone + Ord> Timers<T> {
    pub(crate) fn new() -> Self {
        Timers { by_name: BTreeMap::new(), by_deadline: BTreeSet::new() }
    }

    pub(crate) fn set(&mut self, timer: T, deadline: Instant) {
        if let Some(old) = self.by_name.insert(timer.clone(), deadline) {
            self.by_deadline.remove(&(old, timer.clone()));
        }
        self.by_deadline.insert((deadline, timer));
    }

    pub(crate) fn cancel(&mut self, timer: &T) {
        if let Some(old) = self.by_name.remove(timer) {
            self.by_deadline.remove(&(old, timer.clone()));
        }
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.by_deadline.first().map(|(at, _)| *at)
    }

    /// Removes and returns the timers due at `now`, earliest first. Timers the core re-arms while these
    /// fire are not included, so a timer re-armed with a zero delay cannot starve the inputs.
    pub(crate) fn take_due(&mut self, now: Instant) -> Vec<T> {
        let mut due = Vec::new();
        while let Some((at, _)) = self.by_deadline.first() {
            if *at > now {
                break;
            }
            if let Some((_, timer)) = self.by_deadline.pop_first() {
                self.by_name.remove(&timer);
                due.push(timer);
            }
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn due_timers_come_out_in_deadline_order() {
        let t0 = Instant::now();
        let mut timers = Timers::new();
        timers.set("late", t0 + Duration::from_millis(30));
        timers.set("early", t0 + Duration::from_millis(10));
        timers.set("never", t0 + Duration::from_secs(60));
        assert_eq!(timers.next_deadline(), Some(t0 + Duration::from_millis(10)));
        assert_eq!(timers.take_due(t0 + Duration::from_millis(40)), vec!["early", "late"]);
        assert_eq!(timers.take_due(t0 + Duration::from_millis(40)), Vec::<&str>::new());
        assert_eq!(timers.next_deadline(), Some(t0 + Duration::from_secs(60)));
    }

    #[test]
    fn setting_again_rearms_and_cancel_removes() {
        let t0 = Instant::now();
        let mut timers = Timers::new();
        timers.set(1, t0 + Duration::from_millis(10));
        timers.set(1, t0 + Duration::from_millis(50));
        assert_eq!(timers.take_due(t0 + Duration::from_millis(20)), Vec::<i32>::new());
        assert_eq!(timers.take_due(t0 + Duration::from_millis(50)), vec![1]);
        timers.set(2, t0);
        timers.cancel(&2);
        timers.cancel(&3);
        assert_eq!(timers.next_deadline(), None);
    }

    #[test]
    fn equal_deadlines_keep_both_timers() {
        let t0 = Instant::now();
        let mut timers = Timers::new();
        timers.set('a', t0);
        timers.set('b', t0);
        assert_eq!(timers.take_due(t0), vec!['a', 'b']);
    }
}
