//! The key space: record `n`'s key is named as YCSB names it, so the same records exist under the same keys
//! whichever server is measured; and which record numbers exist yet, for choosing among them while new
//! records are being inserted.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// YCSB's `Utils.fnvhash64`: FNV-1a over the number's eight bytes, low byte first, then Java's `Math.abs` (which
/// leaves the most negative number negative), so that keys match YCSB's and go-ycsb's byte for byte.
pub(super) fn fnvhash64(n: u64) -> i64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 1_099_511_628_211;
    let hash = n.to_le_bytes().iter().fold(OFFSET_BASIS, |h, &octet| (h ^ octet as u64).wrapping_mul(PRIME));
    (hash as i64).wrapping_abs()
}

/// Record `n`'s key: `user` and the hash of `n` (YCSB's default `insertorder=hashed`, which spreads
/// consecutive inserts over the key space), or `n` itself (`insertorder=ordered`).
pub(super) fn key_name(n: u64, ordered: bool) -> String {
    if ordered {
        format!("user{n}")
    } else {
        format!("user{}", fnvhash64(n))
    }
}

/// Record numbers handed to inserts, and how far they are acknowledged, shared by a phase's connections (YCSB's
/// `AcknowledgedCounterGenerator`): reads choose only among records whose insert has been answered, so they
/// do not ask for a record that may not exist yet.
pub(super) struct KeySpace {
    next: AtomicU64,
    /// Every record below this has been answered.
    acked_below: AtomicU64,
    /// Records answered out of order, above `acked_below`.
    early: Mutex<BTreeSet<u64>>,
}

impl KeySpace {
    /// Records `0..existing` exist; the next insert is record `existing`.
    pub(super) fn new(existing: u64) -> KeySpace {
        KeySpace { next: AtomicU64::new(existing), acked_below: AtomicU64::new(existing), early: Mutex::default() }
    }

    /// The record the next insert writes.
    pub(super) fn claim(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Record `n`'s insert was answered, or given up on: a failed insert must not hold back every later one.
    pub(super) fn ack(&self, n: u64) {
        let mut early = self.early.lock().expect("no panics while holding the lock");
        let mut below = self.acked_below.load(Ordering::Relaxed);
        if n != below {
            early.insert(n);
            return;
        }
        below += 1;
        while early.remove(&below) {
            below += 1;
        }
        self.acked_below.store(below, Ordering::Release);
    }

    /// The highest record every record up to which exists.
    pub(super) fn last(&self) -> u64 {
        self.acked_below.load(Ordering::Acquire).saturating_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_ycsbs() {
        // YCSB's CoreWorkload names record 0 `user6284781860667377211` with the default hashed insert order.
        assert_eq!(key_name(0, false), "user6284781860667377211");
        assert_eq!(key_name(7, true), "user7");
        assert_ne!(key_name(1, false), key_name(2, false));
    }

    #[test]
    fn the_last_record_waits_for_every_earlier_insert() {
        let keys = KeySpace::new(10);
        assert_eq!(keys.last(), 9);
        let (a, b, c) = (keys.claim(), keys.claim(), keys.claim());
        assert_eq!((a, b, c), (10, 11, 12));
        keys.ack(c);
        keys.ack(b);
        assert_eq!(keys.last(), 9, "record 10 is not answered yet");
        keys.ack(a);
        assert_eq!(keys.last(), 12);
    }
}
