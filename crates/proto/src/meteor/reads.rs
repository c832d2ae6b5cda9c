//! Reads at a replica (the seed's readLocal, Fig. 4.14 a, with θt = 0: MeteorShower1). A read counts this
//! replica's own version and each peer's version as its statuses say, but a peer's only if its view is whole,
//! in the read's configuration, and from a status sent after the read arrived by more than ε, the bound on how
//! far apart clocks may be (so sent after it in real time). Once a majority of the partition's replicas agree on
//! one version, that version is the answer; until then the read waits for statuses, up to [`WAIT_MAX`].
//!
//! Why that is sequentially consistent (the seed's Lemmas 1–3 and Theorem 1, for θt = 0): a write succeeded
//! once a majority stored it durably, and a replica's versions only grow, so every status sent after the write's
//! answer reports it or a newer version. A read sent after that answer counts only such statuses from its
//! peers, and any majority that agrees meets the write's majority: it agrees on that version or a newer one
//! (read your writes, and every read after it in real time). A read that answered v had a majority at v or
//! newer from then on, so a later read cannot agree on anything older (monotonic reads). Versions order every
//! write, and a write that a majority refused (it held newer ones) failed and no majority ever agrees on it.
//!
//! The agreed version may not be the one this replica holds (a write's message to it was lost, or it has a
//! newer one under way): the read then fetches that version's value from a replica that agreed, and answers
//! with it if that replica still holds it.

use crate::requests::Origin;
use crate::versioned::{Fence, Versioned};
use bytes::Bytes;
use meridian_core::{ChainId, NodeId, Read, Time};
use std::collections::BTreeMap;
use std::time::Duration;

/// How long a read waits at its replica for a majority to agree: past it the client gets a timeout.
pub const WAIT_MAX: Duration = Duration::from_secs(2);

/// A read waiting at its replica.
#[derive(Clone, Debug)]
pub struct Parked {
    pub origin: Origin,
    pub chain: ChainId,
    pub fence: Fence,
    pub key: Bytes,
    pub read: Read,
    /// This node's clock when the read arrived: statuses count only if sent after it by more than ε.
    pub arrived_ms: u64,
    /// When it arrived on the monotonic clock, for [`WAIT_MAX`].
    pub since: Time,
    /// The version whose value it asked a peer for, if it did.
    pub fetching: Option<u64>,
}

/// What a read does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// A majority agrees on this, and this replica has its value.
    Answer(Versioned),
    /// A majority agrees on `version`, whose value this replica lacks: ask `from`, which agreed.
    Fetch { version: u64, from: NodeId },
    /// No majority agrees yet.
    Wait,
}

/// The version a majority of `holders` agree on, from this replica's `own` cell, the peers' versions that
/// count (`seen`), and a value fetched earlier; and what to do about it.
pub fn decide(
    me: NodeId,
    holders: &[NodeId],
    own: &Versioned,
    seen: &BTreeMap<NodeId, u64>,
    fetched: Option<&Versioned>,
) -> Next {
    debug_assert!(holders.contains(&me), "{me} reads from statuses without holding the partition");
    let mut support: BTreeMap<u64, Vec<NodeId>> = BTreeMap::new();
    support.entry(own.version).or_default().push(me);
    for (&peer, &version) in seen.iter().filter(|(p, _)| **p != me && holders.contains(p)) {
        support.entry(version).or_default().push(peer);
    }
    let majority = holders.len() / 2 + 1;
    let Some((&version, agreed)) = support.iter().find(|(_, nodes)| nodes.len() >= majority) else {
        return Next::Wait;
    };
    if version == own.version {
        return Next::Answer(own.clone());
    }
    match fetched.filter(|f| f.version == version) {
        Some(f) => Next::Answer(f.clone()),
        None => Next::Fetch { version, from: agreed[0] },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(version: u64) -> Versioned {
        Versioned { version, value: Some(Bytes::from(format!("\0v{version}"))) }
    }

    #[test]
    fn a_majority_agreeing_on_one_version_answers_and_anything_less_waits() {
        let holders = [NodeId(1), NodeId(2), NodeId(3)];
        let seen = |pairs: &[(u32, u64)]| pairs.iter().map(|&(n, v)| (NodeId(n), v)).collect();
        let me = NodeId(1);
        assert_eq!(decide(me, &holders, &v(5), &seen(&[]), None), Next::Wait, "itself alone is no majority");
        assert_eq!(decide(me, &holders, &v(5), &seen(&[(2, 5)]), None), Next::Answer(v(5)));
        assert_eq!(decide(me, &holders, &v(5), &seen(&[(2, 7), (3, 4)]), None), Next::Wait, "no two agree");
        let fetch = decide(me, &holders, &v(5), &seen(&[(2, 7), (3, 7)]), None);
        assert_eq!(fetch, Next::Fetch { version: 7, from: NodeId(2) }, "agreed on a version it lacks");
        assert_eq!(decide(me, &holders, &v(5), &seen(&[(2, 7), (3, 7)]), Some(&v(7))), Next::Answer(v(7)));
        let stale_fetch = decide(me, &holders, &v(5), &seen(&[(2, 7), (3, 7)]), Some(&v(6)));
        assert_eq!(stale_fetch, Next::Fetch { version: 7, from: NodeId(2) }, "a value of another version");
        assert_eq!(decide(me, &holders, &v(9), &seen(&[(4, 9)]), None), Next::Wait, "a node outside the holders");
    }
}
