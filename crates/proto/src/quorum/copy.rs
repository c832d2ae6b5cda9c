//! A joiner's copy of its partition. From the start of its step every write of the new configuration reaches it
//! (and waits for one acknowledgement more), and a replica in the new configuration refuses writes sent in the
//! old one; so a replica's keys, once it is in the new configuration, hold every write it ever took from the
//! old. The joiner asks every replica for its keys a page at a time and is done once N − W + 1 of them have
//! sent all of theirs: those meet every write quorum of the old configuration, so the joiner then holds every
//! acknowledged write's version, or a newer one. It reports `PreCopied`; once the map shows it inserted, it has
//! taken every write since, and reports `Flushed`.

use super::msg::{CopyData, CopyReq, Fence, QuorumMsg};
use super::replica;
use super::{Config, Fx, QuorumNode};
use crate::host::Host;
use crate::map::ChainChange;
use crate::reports::StepReport;
use bytes::Bytes;
use meridian_core::{ChainId, NodeId};
use std::collections::BTreeMap;

/// Keys per page of a copy.
const PAGE_KEYS: usize = 256;

#[derive(Debug)]
struct Source {
    /// The last key received from it.
    after: Option<Bytes>,
    done: bool,
    /// A page came since the last tick; a source that sent none is asked again.
    heard: bool,
}

#[derive(Debug)]
pub(super) struct Copy {
    chain: ChainId,
    pub fence: Fence,
    step: u64,
    sources: BTreeMap<NodeId, Source>,
    /// Sources that must have sent every key: N − W + 1.
    need: usize,
}

impl Copy {
    /// Asks every replica of `cfg` for its first page.
    pub fn start(chain: ChainId, step: u64, cfg: &Config, out: &mut Fx) -> Copy {
        let n = cfg.holders.len();
        let need = n + 1 - cfg.opts.write.of(n);
        let sources = cfg.holders.iter().map(|&s| (s, Source { after: None, done: false, heard: true })).collect();
        let copy = Copy { chain, fence: cfg.fence, step, sources, need };
        for &s in cfg.holders.iter() {
            out.send(s, QuorumMsg::CopyReq(CopyReq { chain, fence: copy.fence, after: None }));
        }
        copy
    }

    /// On a tick: asks again every source that sent nothing since the last one.
    pub fn prod(&mut self, out: &mut Fx) {
        for (&s, source) in self.sources.iter_mut().filter(|(_, s)| !s.done) {
            if !source.heard {
                let (chain, fence, after) = (self.chain, self.fence, source.after.clone());
                out.send(s, QuorumMsg::CopyReq(CopyReq { chain, fence, after }));
            }
            source.heard = false;
        }
    }

    fn finished(&self) -> bool {
        self.sources.values().filter(|s| s.done).count() >= self.need
    }
}

/// Whether a finished step's report still matters under the map's step in flight on its partition.
pub(super) fn still_wanted(report: &StepReport, change: Option<&ChainChange>) -> bool {
    match (report, change) {
        (StepReport::PreCopied { step, .. }, Some(ChainChange::Add { step: s, inserted: false, .. })) => step == s,
        (StepReport::Flushed { step, .. }, Some(ChainChange::Add { step: s, inserted: true, .. })) => step == s,
        _ => false,
    }
}

impl QuorumNode {
    /// A replica's page of keys for a joiner in the configuration it asked in; nothing if it is in another (the
    /// joiner asks again).
    pub(super) fn on_copy_req(&mut self, host: &mut Host, from: NodeId, req: CopyReq, out: &mut Fx) {
        let CopyReq { chain, fence, after } = req;
        let holds = self.config(chain).is_some_and(|c| c.fence == fence && c.holders.contains(&self.me));
        let Some(partitions) = self.map.as_ref().map(|m| m.partitions).filter(|_| holds) else { return };
        let page = self.store(host, chain).and_then(|s| replica::page(s, chain, partitions, after.as_ref(), PAGE_KEYS));
        match page {
            Ok((entries, more)) => out.send(from, QuorumMsg::CopyData(CopyData { chain, fence, entries, more })),
            Err(e) => tracing::warn!(%chain, "quorum replica cannot page its keys: {e}"),
        }
    }

    pub(super) fn on_copy_data(&mut self, host: &mut Host, from: NodeId, data: CopyData, out: &mut Fx) {
        let CopyData { chain, fence, entries, more } = data;
        let Some(copy) = self.copies.get_mut(&chain).filter(|c| c.fence == fence) else { return };
        let Some(source) = copy.sources.get_mut(&from).filter(|s| !s.done) else { return };
        source.heard = true;
        source.done = !more;
        source.after = entries.last().map(|(k, _)| k.clone()).or(source.after.take());
        if more {
            out.send(from, QuorumMsg::CopyReq(CopyReq { chain, fence, after: source.after.clone() }));
        }
        let finished = copy.finished().then_some(copy.step);
        let applied = self
            .store(host, chain)
            .and_then(|s| entries.iter().try_for_each(|(key, v)| replica::apply(s, chain, key, v).map(|_| ())));
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
