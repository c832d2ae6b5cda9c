//! Leases extended before they end, for keys read under them. Without this every key's lease at every replica
//! ends a lease length after it began, however often the key is read, and the next read renews: with YCSB's
//! Zipf 0.99 over 10,000 keys, one read in five (the seed's K/(L·R) term). A replica instead asks its master,
//! every heartbeat, to extend the leases it answered reads under that end within a quarter of their length, all
//! keys for one master in one message and without values; the master extends each that it still records for the
//! replica, from when the replica asked, even while a write of the key is under way: on a key written from every
//! region, some write nearly always is (globlease-4, Zipf 4).
//!
//! That the replica holds the key's newest committed version follows from the record: while the master records a
//! lease for a replica, every write of the key waits for the replica to store it (or to drop the lease, which
//! then is not asked about), except a write the replica itself sent, for which it withholds the lease until the
//! write's push arrives (`Member::withhold`). An extension only lengthens a lease, on both sides: it carries no
//! value, so it begins none, and a write the replica sent before it is still left out of the wait and still
//! withheld.

use super::msg::{Extend, Extended, Extension};
use super::timing::shrunk_from;
use super::{Fx, LeaseMsg, LeaseNode};
use meridian_core::{NodeId, Time};
use std::collections::BTreeMap;

/// The part of a lease's length left when a replica asks to extend it.
const WHEN_LEFT: u32 = 4;

impl LeaseNode {
    /// Every heartbeat: asks each master to extend the leases read under that end soon.
    pub(super) fn ask_extensions(&mut self, now: Time, out: &mut Fx) {
        let groups = &self.groups;
        let soon =
            |key: &super::Key| groups.get(&key.0).map(|g| std::time::Duration::from_nanos(g.lease_ns()) / WHEN_LEFT);
        let mut asks: BTreeMap<NodeId, Vec<Extension>> = BTreeMap::new();
        for ((chain, key), l) in self.member.due(now, soon) {
            let held = |g: &&super::Group| self.member.leased_until(g, &key, now).is_some();
            let Some(g) = self.groups.get(&chain).filter(held) else { continue };
            asks.entry(l.master).or_default().push(Extension { chain, fence: g.fence, key, run: l.run });
        }
        for (master, keys) in asks {
            out.send(master, LeaseMsg::Extend(Extend { sent: now, incarnation: self.incarnation, keys }));
        }
    }

    /// A replica's asks: each lease this node, as the key's master in the same configuration, still records for
    /// it is recorded until a lease length from now, and extended from when it asked.
    pub(super) fn on_extend(&mut self, now: Time, from: NodeId, e: Extend, out: &mut Fx) {
        let mut keys = Vec::new();
        for x in e.keys {
            let Some(g) = self.groups.get(&x.chain).filter(|g| g.fence == x.fence && g.holders.contains(&from)) else {
                continue;
            };
            let serves = self.mastery_of(g, &x.key).is_some_and(|m| m.fence == x.fence && m.serves_key(g, &x.key, now));
            if !serves || !self.holders_of(g, &x.key, now, None).contains(&from) {
                continue;
            }
            let (g, lease_ns) = (g.clone(), g.lease_ns());
            self.extend_record(&g, &x.key, from, now.plus(std::time::Duration::from_nanos(lease_ns)));
            self.stats.extended += 1;
            keys.push((x, lease_ns));
        }
        if !keys.is_empty() {
            out.send(from, LeaseMsg::Extended(Extended { sent: e.sent, incarnation: e.incarnation, keys }));
        }
    }

    /// The master's extensions of this replica's leases: each counts from when it asked, within the run it
    /// asked in.
    pub(super) fn on_extended(&mut self, from: NodeId, e: Extended) {
        if e.incarnation != self.incarnation {
            return;
        }
        for (x, lease_ns) in e.keys {
            let current = self.groups.get(&x.chain).is_some_and(|g| g.fence == x.fence && g.master_of(&x.key) == from);
            if current {
                self.member.extend(&(x.chain, x.key), from, x.run, shrunk_from(e.sent, lease_ns));
            }
        }
    }
}
