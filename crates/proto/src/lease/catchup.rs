//! Taking over keys that moved into a domain its master already runs (`map/masters.rs`). The master copies
//! only those keys' newest versions from a majority of holders (`Fetch`), as a takeover copies a whole
//! partition: every write the old master got acknowledged is on a majority, and a holder answers only from a
//! table in which the key has moved, in which it takes no more pushes of the key from the old master. Keys
//! that fewer than a majority held the newest version of are written back before the master serves them; the
//! others are served once the copy is whole, and only under promises of rounds of the table they moved in
//! (`mastery.rs`).

use super::msg::{Fetch, Fetched};
use super::takeover::Seen;
use super::{Domain, Fx, Group, LeaseMsg, LeaseNode};
use crate::host::Host;
use bytes::Bytes;
use meridian_core::{NodeId, Time};
use std::collections::{BTreeMap, BTreeSet};

/// A copy of keys that moved into a domain.
#[derive(Debug)]
pub(super) struct Catchup {
    /// What was asked, and of whom.
    ask: Fetch,
    /// Holders that answered.
    answered: BTreeSet<NodeId>,
    seen: BTreeMap<Bytes, Seen>,
}

impl LeaseNode {
    /// On a tick: starts a copy for every ready domain that gained keys since it last caught up, and asks again
    /// the holders that have not answered one under way.
    pub(super) fn prod_catchups(&mut self, host: &mut Host, now: Time, out: &mut Fx) {
        let mut behind = Vec::new();
        for (d, m) in &self.masteries {
            let Some(g) = self.groups.get(&d.0) else { continue };
            if !matches!(m.phase, super::mastery::Phase::Ready) {
                continue;
            }
            match &m.catchup {
                Some(c) => {
                    let unanswered = g.holders.iter().filter(|&&n| n != self.me && !c.answered.contains(&n));
                    unanswered.for_each(|&n| out.send(n, LeaseMsg::Fetch(c.ask.clone())));
                }
                None if g.domains.epoch > m.caught => behind.push(d.clone()),
                None => {}
            }
        }
        for d in behind {
            let g = self.groups[&d.0].clone();
            self.start_catchup(host, now, &g, d, out);
        }
    }

    /// Asks the other holders for the keys that moved into `d` since its master caught up.
    fn start_catchup(&mut self, host: &mut Host, now: Time, g: &Group, d: Domain, out: &mut Fx) {
        let caught = self.masteries[&d].caught;
        let keys = g.domains.moved_in_since(&d.1, caught);
        if keys.is_empty() {
            // Only other partitions' keys moved.
            return self.masteries.get_mut(&d).expect("listed").caught = g.domains.epoch;
        }
        let mut seen = BTreeMap::new();
        for key in &keys {
            match self.cell(host, g.chain, key) {
                Ok(v) if v.version > 0 => _ = seen.insert(key.clone(), Seen::own(v.version)),
                Ok(_) => {}
                Err(e) => return tracing::warn!(chain = %g.chain, "lease master cannot read a moved key: {e}"),
            }
        }
        let (chain, domain, fence, epoch) = (g.chain, d.1.clone(), g.fence, g.domains.epoch);
        let ask = Fetch { chain, domain, fence, epoch, keys };
        for &n in g.holders.iter().filter(|&&n| n != self.me) {
            out.send(n, LeaseMsg::Fetch(ask.clone()));
        }
        let m = self.masteries.get_mut(&d).expect("listed");
        m.catchup = Some(Catchup { ask, answered: BTreeSet::new(), seen });
        self.finish_catchup(host, now, g, d, out);
    }

    /// A holder's answer to a [`Fetch`]: its versions are counted, newer ones taken.
    pub(super) fn on_fetched(&mut self, host: &mut Host, now: Time, from: NodeId, f: Fetched, out: &mut Fx) {
        let d = (f.chain, f.domain);
        let Some(c) = self.masteries.get_mut(&d).and_then(|m| m.catchup.as_mut()) else { return };
        if (c.ask.fence, c.ask.epoch) != (f.fence, f.epoch) || !c.answered.insert(from) {
            return;
        }
        let newer: Vec<_> = f.entries.into_iter().filter(|(key, v)| Seen::count(&mut c.seen, key, v.version)).collect();
        for (key, v) in &newer {
            if let Err(e) = self.take(host, f.chain, key, v) {
                return tracing::warn!(chain = %f.chain, "lease master cannot store a moved key: {e}");
            }
        }
        self.mark_written(f.chain, out);
        let Some(g) = self.groups.get(&f.chain).cloned() else { return };
        self.finish_catchup(host, now, &g, d, out);
    }

    /// Once a majority (this node included) answered: writes back what needs it, and the keys are caught up.
    fn finish_catchup(&mut self, host: &mut Host, now: Time, g: &Group, d: Domain, out: &mut Fx) {
        let m = self.masteries.get_mut(&d).expect("catching up");
        let Some(c) = m.catchup.take_if(|c| c.answered.len() + 1 >= g.majority()) else { return };
        m.caught = c.ask.epoch;
        self.stats.moved_in += c.ask.keys.len() as u64;
        let writes = self.write_back(host, now, g, c.seen, out);
        self.masteries.get_mut(&d).expect("catching up").unready.extend(writes);
    }

    /// A new master's [`Fetch`]: answered by a holder whose table is at least as new, in the same configuration,
    /// where that node masters the domain.
    pub(super) fn on_fetch(&mut self, host: &mut Host, from: NodeId, f: Fetch, out: &mut Fx) {
        let Some(g) = self.groups.get(&f.chain) else { return };
        let current = g.fence == f.fence && g.domains.epoch >= f.epoch && g.master_in(&f.domain) == Some(from);
        if !current || !g.holders.contains(&self.me) {
            return;
        }
        let mut entries = Vec::new();
        for key in f.keys {
            match self.cell(host, f.chain, &key) {
                Ok(v) if v.version > 0 => entries.push((key, v)),
                Ok(_) => {}
                Err(e) => return tracing::warn!(chain = %f.chain, "lease replica cannot read a moved key: {e}"),
            }
        }
        let (chain, domain, fence, epoch) = (f.chain, f.domain, f.fence, f.epoch);
        out.send(from, LeaseMsg::Fetched(Fetched { chain, domain, fence, epoch, entries }));
    }
}
