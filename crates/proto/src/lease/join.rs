//! A replica added to a lease partition copies it as a quorum joiner does (`versioned/copy.rs`): from the start
//! of its step every write reaches it and waits for one acknowledgement more, and it copies every key's newest
//! version from N − M + 1 holders (M a majority), which meet every majority a write was acknowledged by.

use super::msg::CopyFor;
use super::{Fx, LeaseMsg, LeaseNode};
use crate::host::Host;
use crate::map::ChainChange;
use crate::reports::StepReport;
use crate::versioned::cells;
use crate::versioned::copy::{self, still_wanted, CopyData, CopyReq, JoinCopy};
use meridian_core::{ChainId, NodeId, Time};
use std::collections::BTreeMap;

impl LeaseNode {
    /// Starts the copies of the steps that add this node, and forgets reports and copies the map moved past.
    pub(super) fn adopt_joins(
        &mut self,
        host: &mut Host,
        changes: &BTreeMap<ChainId, Option<ChainChange>>,
        out: &mut Fx,
    ) {
        let change_of = |chain: &ChainId| changes.get(chain).cloned().flatten();
        self.finished.retain(|chain, (report, _)| still_wanted(report, change_of(chain).as_ref()));
        let groups = &self.groups;
        self.joins.retain(|chain, j| groups.get(chain).is_some_and(|g| g.fence == j.copy.fence));
        for (chain, change) in changes {
            let Some(ChainChange::Add { step, inserted, .. }) = change.clone().filter(|c| c.node() == self.me) else {
                continue;
            };
            let Some(group) = self.groups.get(chain).cloned() else { continue };
            if self.finished.contains_key(chain) || self.joins.contains_key(chain) {
                continue;
            }
            if inserted {
                // It has taken every write since its step began, so its part is done.
                self.step_finished(host, StepReport::Flushed { chain: *chain, step }, out);
                continue;
            }
            let n = group.holders.len();
            let (join, asks) = JoinCopy::start(*chain, step, group.fence, &group.holders, n + 1 - group.majority());
            asks.into_iter().for_each(|(to, req)| out.send(to, LeaseMsg::CopyReq { req, to: CopyFor::Joiner }));
            self.joins.insert(*chain, join);
        }
    }

    /// A page of this holder's keys for a domain's master (a takeover) or the partition's joiner, in the
    /// configuration and table it asked in (or a newer table); nothing otherwise. A holder that has sent a new
    /// master a page takes no more writes of its domain's keys from the old one (`on_push` takes them from the
    /// key's master in its map only), so every write the old master can still get a majority for is in some
    /// page of the new master's copy.
    pub(super) fn on_copy_req(&mut self, host: &mut Host, from: NodeId, req: CopyReq, to: CopyFor, out: &mut Fx) {
        let chain = req.chain;
        let copier = |g: &super::Group| match &to {
            CopyFor::Joiner => g.joiner == Some(from),
            CopyFor::Takeover { domain, epoch } => g.master_in(domain) == Some(from) && g.domains.epoch >= *epoch,
        };
        let holds =
            self.groups.get(&chain).is_some_and(|g| g.fence == req.fence && g.holders.contains(&self.me) && copier(g));
        let Some(partitions) = self.map.as_ref().map(|m| m.partitions).filter(|_| holds) else { return };
        match self.store(host, chain).and_then(|s| copy::page(s, partitions, req)) {
            Ok(data) => out.send(from, LeaseMsg::CopyData { data, to }),
            Err(e) => tracing::warn!(%chain, "lease replica cannot page its keys: {e}"),
        }
    }

    /// A page for this node's takeover as master, or for its copy as a joiner.
    pub(super) fn on_copy_data(
        &mut self,
        host: &mut Host,
        now: Time,
        from: NodeId,
        data: CopyData,
        to: CopyFor,
        out: &mut Fx,
    ) {
        if let CopyFor::Takeover { domain, .. } = to {
            let d = (data.chain, domain);
            if self.masteries.get(&d).is_some_and(|m| m.takes_over(data.fence)) {
                self.on_takeover_page(host, now, from, data, d, out);
            }
            return;
        }
        let chain = data.chain;
        let Some(join) = self.joins.get_mut(&chain) else { return };
        let Some(next) = join.copy.on_page(from, &data) else { return };
        if let Some(req) = next {
            out.send(from, LeaseMsg::CopyReq { req, to: CopyFor::Joiner });
        }
        let finished = join.copy.finished().then_some(join.step);
        let applied = self
            .store(host, chain)
            .and_then(|s| data.entries.iter().try_for_each(|(key, v)| cells::apply(s, chain, key, v).map(|_| ())));
        if let Err(e) = applied {
            return tracing::warn!(%chain, "lease joiner cannot store its copy: {e}");
        }
        self.mark_written(chain, out);
        if let Some(step) = finished {
            self.joins.remove(&chain);
            self.stats.copies += 1;
            self.step_finished(host, StepReport::PreCopied { chain, step }, out);
        }
    }

    /// On a tick: asks again every joiner's source that sent nothing since the last one.
    pub(super) fn prod_joins(&mut self, out: &mut Fx) {
        for join in self.joins.values_mut() {
            join.copy
                .prod()
                .into_iter()
                .for_each(|(n, req)| out.send(n, LeaseMsg::CopyReq { req, to: CopyFor::Joiner }));
        }
    }
}
