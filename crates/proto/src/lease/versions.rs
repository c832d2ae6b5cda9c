//! A lease version is `epoch << 32 | seq`: the map epoch its master stamped it in, then its place among that
//! master's stamps. A key's master changes only with the map (its domain's master failed or moved, or the key
//! moved to another domain), so every master of a key stamps in later epochs than every master before it, and its
//! versions are newer than any its predecessors stamped, even one a predecessor pushed to a minority that the
//! new master's copy of a majority never saw (sim seed 694 of `--nemesis region,migrate --spares 0` on
//! globlease-4: such a version, numbered by counters, outranked the acknowledged writes of the key's next master,
//! and a later takeover brought it back).
//!
//! Within an epoch a master numbers on from the newest version it copied, which does not cover its own stamps of
//! an earlier run in the same epoch: a write it pushed to a minority only, and lost from its own disk in a crash,
//! may be newer than everything a majority holds. So a node never stamps past a bound it has stored durably
//! ([`Numbering`]), as a timestamp oracle leases ranges: after a restart it numbers past that bound. The first
//! [`FREE_SEQ`] stamps of an epoch need no record, since the node's map, stored before the node adopts it, says
//! which epoch a restarted node may have stamped in: a restart numbers past them in that epoch alone.

use std::io;

/// Bits of a version that number a master's stamps within one map epoch.
const SEQ_BITS: u32 = 32;
const SEQ_MAX: u64 = (1 << SEQ_BITS) - 1;
/// Stamps a node makes in an epoch newer than its last run's before it must store a bound.
const FREE_SEQ: u64 = 1 << 20;
/// How far past the stamp that needs it a stored bound reaches: one fsync per this many stamps.
const RESERVE: u64 = 1 << 20;
/// The file, beside the node's stores, that holds the bound.
pub const RECORD: &str = "lease-versions";
const HEADER: &str = "meridian lease versions, format 1";

/// The version after `last` for a master in map `epoch`; None if `last` is of a later epoch (the master's map
/// lags the version's: it stamps nothing until it catches up) or the epoch's numbers ran out.
pub fn next(last: u64, epoch: u64) -> Option<u64> {
    let v = last.checked_add(1)?.max(epoch.checked_shl(SEQ_BITS)?);
    (v >> SEQ_BITS == epoch).then_some(v)
}

/// This node's stamps, across its runs: each is newer than every stamp of its earlier runs.
#[derive(Debug)]
pub struct Numbering {
    last: u64,
    /// The durable bound: no stamp passes it unless it is of an epoch newer than `started_in` and within the
    /// free stamps of that epoch.
    reserved: u64,
    /// The epoch of the map this node had stored when it started: its earlier runs stamped in no later epoch.
    started_in: u64,
}

impl Numbering {
    /// The numbering of a node that starts with `record` stored (the bound its earlier runs stored last) and
    /// `started_in` the epoch of its stored map (0 if it never stored one, and so never stamped).
    pub fn open(record: Option<u64>, started_in: u64) -> Numbering {
        let free = match started_in {
            0 => 0,
            e => e.checked_shl(SEQ_BITS).map_or(u64::MAX, |v| v | FREE_SEQ),
        };
        let last = record.unwrap_or(0).max(free);
        Numbering { last, reserved: last, started_in }
    }

    /// A new version in map `epoch`, storing a new bound with `save` first if it passes the stored one; None if
    /// the epoch lags `last`, its numbers ran out, or the bound could not be stored.
    pub fn stamp(&mut self, epoch: u64, save: impl FnOnce(u64) -> io::Result<()>) -> Option<u64> {
        let v = next(self.last, epoch)?;
        let free = epoch > self.started_in && v & SEQ_MAX <= FREE_SEQ;
        if !free && v > self.reserved {
            let bound = v.saturating_add(RESERVE).min(v | SEQ_MAX);
            if let Err(e) = save(bound) {
                tracing::warn!(error = %e, "could not store the lease version bound; stamping nothing");
                return None;
            }
            self.reserved = bound;
        }
        self.last = v;
        Some(v)
    }

    /// Numbers on past `seen`, a version this node copied.
    pub fn raise(&mut self, seen: u64) {
        self.last = self.last.max(seen);
    }
}

pub fn encode(bound: u64) -> Vec<u8> {
    format!("{HEADER}\n{bound}\n").into_bytes()
}

pub fn decode(bytes: &[u8]) -> io::Result<u64> {
    let damaged = |why: String| io::Error::new(io::ErrorKind::InvalidData, format!("{RECORD}: {why}"));
    let text = std::str::from_utf8(bytes).map_err(|e| damaged(e.to_string()))?;
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(damaged(format!("expected the header {HEADER:?}; a newer build may have written it")));
    }
    let line = lines.next().unwrap_or_default();
    line.parse().map_err(|e| damaged(format!("bound {line:?}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn a_later_epoch_outranks_every_stamp_of_an_earlier_one() {
        let first = next(0, 3).unwrap();
        assert_eq!(first, 3 << SEQ_BITS);
        assert_eq!(next(first, 3), Some(first + 1), "numbered on within the epoch");
        let far = (4 << SEQ_BITS) - 1;
        assert!(next(3 << SEQ_BITS, 4).unwrap() > far, "a new epoch beats the most its predecessor could stamp");
        assert_eq!(next(far, 3), None, "the epoch's numbers ran out");
        assert_eq!(next(5 << SEQ_BITS, 4), None, "a version of a later epoch: the map lags");
    }

    /// A `save` that keeps the bound in `stored`.
    fn keep(stored: &Cell<Option<u64>>) -> impl FnOnce(u64) -> io::Result<()> + '_ {
        |b| {
            stored.set(Some(b));
            Ok(())
        }
    }

    /// Stamps `n` versions in `epoch`, returning the last.
    fn stamp_n(numbering: &mut Numbering, epoch: u64, n: u64, stored: &Cell<Option<u64>>) -> u64 {
        let mut v = 0;
        for _ in 0..n {
            v = numbering.stamp(epoch, keep(stored)).unwrap();
        }
        v
    }

    #[test]
    fn a_restart_in_the_same_epoch_numbers_past_every_stamp_of_the_run_before() {
        let stored = Cell::new(None);
        let mut first = Numbering::open(None, 0);
        let v = stamp_n(&mut first, 7, 10, &stored);
        assert_eq!(stored.get(), None, "the first stamps of a new epoch store nothing");
        let mut again = Numbering::open(stored.get(), 7);
        assert!(again.stamp(7, keep(&stored)).unwrap() > v);
        assert!(stored.get().is_some(), "a restarted node stores a bound before its first stamp in that epoch");

        let mut third = Numbering::open(stored.get(), 7);
        let past = stamp_n(&mut third, 7, RESERVE + 2, &stored);
        let mut fourth = Numbering::open(stored.get(), 7);
        assert!(fourth.stamp(7, |_| Ok(())).unwrap() > past, "a bound stored mid-run covers the run");
        assert!(Numbering::open(stored.get(), 7).stamp(8, |_| panic!("free")).unwrap() >> SEQ_BITS == 8);
    }

    #[test]
    fn a_bound_that_cannot_be_stored_stamps_nothing() {
        let mut numbering = Numbering::open(None, 7);
        assert_eq!(numbering.stamp(7, |_| Err(io::Error::other("disk full"))), None);
        let v = numbering.stamp(7, |_| Ok(())).unwrap();
        assert_eq!(v, (7 << SEQ_BITS) | (FREE_SEQ + 1), "the refused stamp was not used");
    }

    #[test]
    fn the_record_round_trips_and_refuses_another_format() {
        assert_eq!(decode(&encode(42 << SEQ_BITS)).unwrap(), 42 << SEQ_BITS);
        assert!(decode(b"meridian lease versions, format 2\n1\n").unwrap_err().to_string().contains("format 1"));
        assert!(decode(format!("{HEADER}\nx\n").as_bytes()).is_err());
    }
}
