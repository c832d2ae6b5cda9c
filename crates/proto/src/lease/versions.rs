//! A lease version is `epoch << 32 | seq`: the map epoch its master stamped it in, then its place among that
//! master's stamps. A key's master changes only with the map (its domain's master failed or moved, or the key
//! moved to another domain), so every master of a key stamps in later epochs than every master before it, and its
//! versions are newer than any its predecessors stamped, even one a predecessor pushed to a minority that the
//! new master's copy of a majority never saw (sim seed 694 of `--nemesis region,migrate --spares 0` on
//! globlease-4: such a version, numbered by counters, outranked the acknowledged writes of the key's next master,
//! and a later takeover brought it back).
//!
//! Within an epoch a master numbers on from the newest version it copied, so a master that restarts in the
//! epoch it ran in numbers past what a majority holds, not past what it pushed to a minority only before it
//! stopped: `docs/protocols/lease.md` says what that leaves open.

/// Bits of a version that number a master's stamps within one map epoch.
const SEQ_BITS: u32 = 32;

/// The version after `last` for a master in map `epoch`; None if `last` is of a later epoch (the master's map
/// lags the version's: it stamps nothing until it catches up) or the epoch's numbers ran out.
pub fn next(last: u64, epoch: u64) -> Option<u64> {
    let v = last.checked_add(1)?.max(epoch.checked_shl(SEQ_BITS)?);
    (v >> SEQ_BITS == epoch).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
