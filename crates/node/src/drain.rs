//! The signal that a node is shutting down gracefully, watched by its listeners and client connections.
//!
//! Every client connection looks at the signal each time it waits for its client, once per request. So a
//! wait must cost next to nothing: it checks a flag and keeps its waker in a slot of its own, registered in
//! the signal's list once per watcher, and locks the slot only when the waker changes, which for a task's own
//! waits it does not. A `watch` channel, used before, put every wait into a waiter list
//! shared by all connections and locked on each wait and each drop (1.4% of an unpipelined GET's samples
//! against 0.5% now, `docs/performance-history.md` section 16).

use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Poll, Waker};

/// A handle on the signal; [`Drain::watch`] gives each waiting task its watcher.
#[derive(Clone, Default)]
pub(crate) struct Drain(Arc<Signal>);

/// What starts the drain. Dropped unthrown, it never starts one: a node whose handle was dropped runs until
/// its runtime stops.
pub(crate) struct DrainSwitch(Arc<Signal>);

#[derive(Default)]
struct Signal {
    started: AtomicBool,
    /// The watchers' waker slots; a watcher that is gone leaves a dead entry, pruned as the list grows.
    watchers: Mutex<Vec<Weak<Slot>>>,
}

type Slot = Mutex<Option<Waker>>;

/// One task's view of the signal.
pub(crate) struct DrainWatch {
    signal: Arc<Signal>,
    slot: Arc<Slot>,
    /// The waker last put in `slot`: the next wait of the same task, the common case, does not lock the slot.
    kept: Option<Waker>,
}

impl Drain {
    /// A switch and the signal it gives.
    pub(crate) fn switch() -> (DrainSwitch, Drain) {
        let drain = Drain::default();
        (DrainSwitch(drain.0.clone()), drain)
    }

    pub(crate) fn watch(&self) -> DrainWatch {
        let slot = Arc::new(Slot::default());
        let mut watchers = self.0.watchers.lock().expect("no panic while the list is held");
        if watchers.len() == watchers.capacity() {
            watchers.retain(|w| w.strong_count() > 0);
        }
        watchers.push(Arc::downgrade(&slot));
        DrainWatch { signal: self.0.clone(), slot, kept: None }
    }
}

impl DrainSwitch {
    /// Starts the drain: every watcher's wait returns, now or when it next waits.
    pub(crate) fn throw(&self) {
        self.0.started.store(true, SeqCst);
        let watchers = std::mem::take(&mut *self.0.watchers.lock().expect("no panic while the list is held"));
        for slot in watchers.iter().filter_map(Weak::upgrade) {
            if let Some(waker) = slot.lock().expect("no panic while a slot is held").take() {
                waker.wake();
            }
        }
    }
}

impl DrainWatch {
    /// Returns once the drain has started.
    pub(crate) async fn started(&mut self) {
        poll_fn(|cx| {
            // The waker is kept before the flag is read, so a drain that starts in between still wakes it. A
            // thrown switch takes the slot's waker, but the flag it set then answers every later wait.
            if !self.kept.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *self.slot.lock().expect("no panic while a slot is held") = Some(cx.waker().clone());
                self.kept = Some(cx.waker().clone());
            }
            if self.signal.started.load(SeqCst) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_waiting_watcher_wakes_when_the_switch_is_thrown_and_a_later_one_returns_at_once() {
        let (switch, drain) = Drain::switch();
        let mut watch = drain.watch();
        let waiting = tokio::spawn(async move { watch.started().await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "nothing started the drain yet");
        switch.throw();
        tokio::time::timeout(Duration::from_secs(5), waiting).await.unwrap().unwrap();
        let mut late = drain.watch();
        tokio::time::timeout(Duration::from_secs(5), late.started()).await.unwrap();
    }

    #[tokio::test]
    async fn a_switch_dropped_unthrown_starts_nothing() {
        let (switch, drain) = Drain::switch();
        let mut watch = drain.watch();
        drop(switch);
        assert!(tokio::time::timeout(Duration::from_millis(20), watch.started()).await.is_err());
    }

    #[test]
    fn watchers_that_are_gone_are_pruned() {
        let drain = Drain::default();
        for _ in 0..1000 {
            drop(drain.watch());
        }
        let kept = drain.watch();
        let watchers = drain.0.watchers.lock().unwrap();
        assert!(watchers.len() < 100, "{} entries kept for one live watcher", watchers.len());
        assert!(watchers.iter().any(|w| w.upgrade().is_some_and(|s| Arc::ptr_eq(&s, &kept.slot))));
    }
}
