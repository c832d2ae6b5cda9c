//! Which replica kind each member of a chain gets (seed 003 §5.3, heterogeneous chains).
//!
//! A keyspace's configuration lists a kind per chain position, head first. A member keeps the kind it was
//! added with for as long as it is a member: changing a replica's kind in place would mean moving its data
//! between datastores while it serves. So the map follows the configuration as a *multiset*: a chain holds
//! the configured kinds, and a member that joins takes a kind the members staying in the chain lack (the one
//! its target position names, if that one is lacking). Members may end up in another order than the
//! configuration's; order matters for speed (which replica is the head), the multiset for what survives a
//! crash.
//!
//! A chain on fewer nodes than the keyspace's R holds the most durable of the configured kinds (`log`, then
//! `buffered`, then `mem`), so a configuration with a `log` replica never runs without one.

use meridian_core::ReplicaKind;

fn rank(kind: ReplicaKind) -> u8 {
    match kind {
        ReplicaKind::Log => 2,
        ReplicaKind::Buffered => 1,
        ReplicaKind::Mem => 0,
    }
}

/// The kinds a chain of `len` members should hold, in configuration order: all of `config` if `len` is at
/// least its length, otherwise its `len` most durable kinds.
pub fn wanted(config: &[ReplicaKind], len: usize) -> Vec<ReplicaKind> {
    let mut by_durability: Vec<usize> = (0..config.len()).collect();
    by_durability.sort_by_key(|&i| (std::cmp::Reverse(rank(config[i])), i));
    let mut kept: Vec<usize> = by_durability.into_iter().take(len).collect();
    kept.sort_unstable();
    kept.into_iter().map(|i| config[i]).collect()
}

/// The multiset difference `a − b`, in the order of `a`.
pub fn missing(a: &[ReplicaKind], b: &[ReplicaKind]) -> Vec<ReplicaKind> {
    let mut spare = b.to_vec();
    a.iter()
        .filter(|k| match spare.iter().position(|s| s == *k) {
            Some(i) => {
                spare.swap_remove(i);
                false
            }
            None => true,
        })
        .copied()
        .collect()
}

/// The kind of a node joining a chain at `index` of its target, given the wanted kinds and the kinds of the
/// members that stay: the kind its position wants if the staying members lack it, otherwise the first kind
/// they lack (there is one whenever fewer members stay than are wanted).
pub fn joiner_kind(wanted: &[ReplicaKind], staying: &[ReplicaKind], index: usize) -> ReplicaKind {
    let lacking = missing(wanted, staying);
    let own = wanted[index.min(wanted.len() - 1)];
    if lacking.contains(&own) {
        own
    } else {
        lacking.first().copied().unwrap_or(own)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ReplicaKind::{Buffered, Log, Mem};

    #[test]
    fn short_chains_keep_the_most_durable_kinds_in_configured_order() {
        assert_eq!(wanted(&[Mem, Log], 2), [Mem, Log]);
        assert_eq!(wanted(&[Mem, Log], 1), [Log]);
        assert_eq!(wanted(&[Mem, Buffered, Mem, Log], 2), [Buffered, Log]);
        assert_eq!(wanted(&[Mem, Mem], 5), [Mem, Mem]);
    }

    #[test]
    fn a_joiner_takes_what_the_staying_members_lack() {
        assert_eq!(missing(&[Mem, Log, Log], &[Log, Mem]), [Log]);
        assert_eq!(joiner_kind(&[Mem, Log], &[Mem], 0), Log, "position 0 wants mem, but only log is lacking");
        assert_eq!(joiner_kind(&[Mem, Log], &[], 0), Mem);
        assert_eq!(joiner_kind(&[Mem, Log], &[], 1), Log);
        assert_eq!(joiner_kind(&[Log, Log], &[Log, Log], 1), Log, "nothing lacking: its position's kind");
    }
}
