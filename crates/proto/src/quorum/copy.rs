//! A joiner's copy of its partition. From the start of its step every write of the new configuration reaches it
//! (and waits for one acknowledgement more), and a replica in the new configuration refuses writes sent in the
//! old one; so a replica's keys, once it is in the new configuration, hold every write it ever took from the
//! old. The joiner asks every replica for its keys a page at a time and is done once N − W + 1 of them have
//! sent all of theirs, R with ABD (`versioned/copy.rs`): those meet every write quorum of the old configuration,
//! and every read's write-back, so the joiner then holds every acknowledged write's version, or a newer one, and
//! every value a read returned. It reports `PreCopied`; once the map
//! shows it inserted, it has taken every write since, and reports `Flushed`.

use super::msg::{CopyData, CopyReq, QuorumMsg};
use super::replica;
use super::{Config, Fx, QuorumNode};
use crate::host::Host;
use crate::reports::StepReport;
use crate::versioned::copy::{self, JoinCopy};
use meridian_core::{ChainId, NodeId};

/// Asks every replica of `cfg` for its first page: the joiner needs [`Config::copy_sources`] of them.
pub(super) fn start(chain: ChainId, step: u64, cfg: &Config, out: &mut Fx) -> JoinCopy {
    let (join, asks) = JoinCopy::start(chain, step, cfg.fence, &cfg.holders, cfg.copy_sources());
    asks.into_iter().for_each(|(to, req)| out.send(to, QuorumMsg::CopyReq(req)));
    join
}

/// On a tick: asks again every source that sent nothing since the last one.
pub(super) fn prod(join: &mut JoinCopy, out: &mut Fx) {
    join.copy.prod().into_iter().for_each(|(to, req)| out.send(to, QuorumMsg::CopyReq(req)));
}

impl QuorumNode {
    /// A replica's page of keys for a joiner in the configuration it asked in; nothing if it is in another (the
    /// joiner asks again).
    pub(super) fn on_copy_req(&mut self, host: &mut Host, from: NodeId, req: CopyReq, out: &mut Fx) {
        let chain = req.chain;
        let holds = self.config(chain).is_some_and(|c| c.fence == req.fence && c.holders.contains(&self.me));
        let Some(partitions) = self.map.as_ref().map(|m| m.partitions).filter(|_| holds) else { return };
        match self.store(host, chain).and_then(|s| copy::page(s, partitions, req)) {
            Ok(data) => out.send(from, QuorumMsg::CopyData(data)),
            Err(e) => tracing::warn!(%chain, "quorum replica cannot page its keys: {e}"),
        }
    }

    pub(super) fn on_copy_data(&mut self, host: &mut Host, from: NodeId, data: CopyData, out: &mut Fx) {
        let chain = data.chain;
        let Some(join) = self.copies.get_mut(&chain) else { return };
        let Some(next) = join.copy.on_page(from, &data) else { return };
        if let Some(req) = next {
            out.send(from, QuorumMsg::CopyReq(req));
        }
        let finished = join.copy.finished().then_some(join.step);
        let applied = self
            .store(host, chain)
            .and_then(|s| data.entries.iter().try_for_each(|(key, v)| replica::apply(s, chain, key, v).map(|_| ())));
        if let Err(e) = applied {
            return tracing::warn!(%chain, "quorum joiner cannot store its copy: {e}");
        }
        self.mark_written(chain, out);
        if let Some(step) = finished {
            self.copies.remove(&chain);
            self.stats.copies += 1;
            self.step_finished(host, StepReport::PreCopied { chain, step }, out);
        }
    }
}
