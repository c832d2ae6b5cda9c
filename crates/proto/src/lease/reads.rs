//! Reads (seed 001 §4.1.3, Algorithm 1). The master answers from its store, which holds acknowledged versions
//! only, while its own lease lasts. A replica answers from its store while it holds a lease on the key, the master
//! confirms it (`mastery.rs`) and no pushed version of the key awaits its commit; otherwise it asks the master,
//! which records a lease for it and answers with its value, and the replica answers its client with that value.
//! A replica that holds a lease but also a pushed version not yet committed, or a write of its own on its way to
//! the master, waits for the commit instead (`parked.rs`). A node that holds no replica of the partition sends
//! the read to the replica in its own region, or else to the master. An affiliated node answers the keys it holds
//! secondary leases on, and a host sends reads of those keys on to its affiliated nodes (`affiliates.rs`).

use super::mastery::Lease;
use super::msg::{Forwarded, Granted, Renew};
use super::timing::shrunk_from;
use super::{Fx, Group, LeaseMsg, LeaseNode};
use crate::host::Host;
use crate::versioned::read_reply;
use meridian_core::{NodeId, Read, Reply, Time};

impl LeaseNode {
    pub(super) fn read(&mut self, host: &mut Host, now: Time, fwd: Forwarded, read: Read, g: Group, out: &mut Fx) {
        self.read_as(host, now, fwd, read, g, true, out)
    }

    /// [`Self::read`]; one that `may_park` waits for a commit rather than renews, when its lease allows it
    /// (`parked.rs`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn read_as(
        &mut self,
        host: &mut Host,
        now: Time,
        fwd: Forwarded,
        read: Read,
        g: Group,
        may_park: bool,
        out: &mut Fx,
    ) {
        let Some(key) = fwd.req.key().cloned() else { return };
        let k = (g.chain, key.clone());
        if let Some(v) = self.read_secondary(&k, now) {
            return self.answer(host, &fwd.origin, read_reply(read, &v, host.wall_ms), out);
        }
        let master = g.master_of(&key);
        let local = match master == self.me {
            true => self.mastery_of(&g, &key).is_some_and(|m| m.serves_key(&g, &key, now)),
            false => g.holders.contains(&self.me) && self.member.serves(&g, &key, now),
        };
        if local {
            self.member.read_under(&k);
            let Some(fwd) = self.spread(host, now, fwd, &k, out) else { return };
            self.stats.local_reads += 1;
            let reply = match self.cell(host, g.chain, &key) {
                Ok(v) => read_reply(read, &v, host.wall_ms),
                Err(e) => Reply::Error(meridian_core::ErrorKind::Storage, e.to_string()),
            };
            return self.answer(host, &fwd.origin, reply, out);
        }
        if master == self.me {
            return self.bounce(host, fwd.origin, fwd.req, None, out);
        }
        if !g.holders.contains(&self.me) {
            let host_of_me = self.secondaries.host.filter(|h| g.holders.contains(h));
            let to = self.route(&k, now).or(host_of_me).or_else(|| self.nearest_holder(&g)).unwrap_or(master);
            return self.forward(host, to, fwd, out);
        }
        if may_park && self.waits_for_commit(&g, &key, now) {
            return self.park(host, fwd, read, &g, key, out);
        }
        self.stats.renewals += 1;
        if self.member.expired(&g, &key, now) {
            self.stats.expired += 1;
        }
        if fwd.origin.node == self.me {
            host.requests.keep(&fwd.origin, fwd.req.clone());
        }
        let run = self.member.run(&g, g.domain_of(&key), now);
        let (origin, chain, fence, incarnation) = (fwd.origin, g.chain, g.fence, self.incarnation);
        out.send(master, LeaseMsg::Renew(Renew { origin, chain, fence, key, read, sent: now, incarnation, run }));
    }

    /// The holder of `g` in this node's region, if it has one.
    fn nearest_holder(&self, g: &Group) -> Option<NodeId> {
        let map = self.map.as_ref().expect("a request is served only with a map");
        let region = |n: &NodeId| map.nodes.get(n).map(|i| i.location.region.as_str());
        let mine = region(&self.me);
        g.holders.iter().copied().find(|n| region(n) == mine)
    }

    /// A replica's renewal: a lease recorded for it and the value sent back, if this node is the master that
    /// serves the partition in that configuration; otherwise the read goes back to its origin.
    pub(super) fn on_renew(&mut self, host: &mut Host, now: Time, from: NodeId, r: Renew, out: &mut Fx) {
        let g = self.groups.get(&r.chain).filter(|g| g.fence == r.fence && g.holders.contains(&from)).cloned();
        let serves = |g: &Group| {
            let m = self.mastery_of(g, &r.key);
            m.is_some_and(|m| m.serves_key(g, &r.key, now) && m.fence == r.fence)
        };
        let Some(g) = g.filter(serves) else {
            self.stats.bounced += 1;
            return out.send(r.origin.node, LeaseMsg::Bounce { origin: r.origin, stamped: None });
        };
        let versioned = match self.cell(host, r.chain, &r.key) {
            Ok(v) => v,
            Err(e) => {
                let reply = Reply::Error(meridian_core::ErrorKind::Storage, e.to_string());
                return self.answer(host, &r.origin, reply, out);
            }
        };
        // No lease while a write of the key is under way: the write would have to reach this replica too, and
        // count only its storing the write, not a release it may have sent before (sim seed 141 of `--nemesis
        // region,migrate` on globlease-4: a replica without a map released a push, then took a lease on the old
        // value, and the write committed without it). It would also wait for it: on globlease-4, a write from
        // `tk` whose own region's reads renewed the key took 290 ms instead of 225. The read gets the value, and
        // the next one renews.
        let lease_ns = if self.writing(&(r.chain, r.key.clone())) { 0 } else { g.lease_ns() };
        if lease_ns > 0 {
            self.record(&g, &r.key, from, r.sent, now.plus(std::time::Duration::from_nanos(lease_ns)));
            self.stats.granted += 1;
        }
        out.send(from, LeaseMsg::Granted(Granted { renew: r, versioned, lease_ns }));
    }

    /// The master's answer to this replica's renewal: the lease (if it granted one) counts from when it asked; the
    /// client gets the master's value, which was acknowledged when the master sent it.
    pub(super) fn on_granted(&mut self, host: &mut Host, from: NodeId, g: Granted, out: &mut Fx) {
        let Granted { renew: r, versioned, lease_ns } = g;
        if r.incarnation != self.incarnation {
            return;
        }
        let current = self.groups.get(&r.chain).is_some_and(|g| g.fence == r.fence && g.master_of(&r.key) == from);
        if current {
            // The master's value is acknowledged; a newer one held here is not (yet), and keeps the key from being
            // answered under the lease until a commit names it.
            let key = (r.chain, r.key.clone());
            match self.take(host, r.chain, &r.key, &versioned) {
                Ok(held) if held > versioned.version => self.member.uncommitted(key.clone(), held),
                Ok(_) => self.mark_written(r.chain, out),
                Err(e) => tracing::warn!(chain = %r.chain, "lease replica cannot store a granted value: {e}"),
            }
            if let Some(run) = r.run.filter(|_| lease_ns > 0) {
                let (since, until) = (r.sent, shrunk_from(r.sent, lease_ns));
                self.member.lease(key, Lease::new(from, run, since, until));
            }
        }
        let reply = read_reply(r.read, &versioned, host.wall_ms);
        self.answer(host, &r.origin, reply, out);
    }
}
