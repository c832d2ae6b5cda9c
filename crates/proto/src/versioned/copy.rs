//! A copy of a partition's newest versions from some of its replicas, a page at a time. The copier asks every
//! source for its keys in order and is done once `need` of them have sent all of theirs; the protocol says which
//! sources and how many make the copy whole (a quorum joiner: N − W + 1, which meet every write quorum), and
//! what it does with each page. Pages go out only in the configuration they were asked in, so a source's keys
//! include every write it took in an older one.

use super::cells;
use super::{Fence, Versioned};
use crate::map::ChainChange;
use crate::reports::StepReport;
use bytes::Bytes;
use meridian_core::{ChainId, NodeId};
use meridian_store::{Datastore, StoreError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Keys per page of a copy.
const PAGE_KEYS: usize = 256;

/// Copier → source: the partition's keys after `after` (None: from the start), in this configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyReq {
    pub chain: ChainId,
    pub fence: Fence,
    pub after: Option<Bytes>,
}

/// Source → copier: keys in order with their versions; `more` says whether keys follow the last one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyData {
    pub chain: ChainId,
    pub fence: Fence,
    pub entries: Vec<(Bytes, Versioned)>,
    pub more: bool,
}

#[derive(Debug)]
struct Source {
    /// The last key received from it.
    after: Option<Bytes>,
    done: bool,
    /// A page came since the last tick; a source that sent none is asked again.
    heard: bool,
}

/// A copy under way: who is asked, how far each has sent, and how many must have sent everything.
#[derive(Debug)]
pub struct Copy {
    pub chain: ChainId,
    pub fence: Fence,
    sources: BTreeMap<NodeId, Source>,
    need: usize,
}

impl Copy {
    /// A copy from `sources`, whole once `need` of them have sent every key; with the first requests to send.
    pub fn start(chain: ChainId, fence: Fence, sources: &[NodeId], need: usize) -> (Copy, Vec<(NodeId, CopyReq)>) {
        let sources: BTreeMap<_, _> =
            sources.iter().map(|&s| (s, Source { after: None, done: false, heard: true })).collect();
        let asks = sources.keys().map(|&s| (s, CopyReq { chain, fence, after: None })).collect();
        (Copy { chain, fence, sources, need }, asks)
    }

    /// On a tick: the requests again to every source that sent nothing since the last one.
    pub fn prod(&mut self) -> Vec<(NodeId, CopyReq)> {
        let (chain, fence) = (self.chain, self.fence);
        let mut asks = Vec::new();
        for (&s, source) in self.sources.iter_mut().filter(|(_, s)| !s.done) {
            if !source.heard {
                asks.push((s, CopyReq { chain, fence, after: source.after.clone() }));
            }
            source.heard = false;
        }
        asks
    }

    /// Notes a page from `from`: None if it is not one this copy waits for (drop it), otherwise the request for
    /// its next page, if more follow.
    pub fn on_page(&mut self, from: NodeId, data: &CopyData) -> Option<Option<CopyReq>> {
        if data.fence != self.fence {
            return None;
        }
        let source = self.sources.get_mut(&from).filter(|s| !s.done)?;
        source.heard = true;
        source.done = !data.more;
        source.after = data.entries.last().map(|(k, _)| k.clone()).or(source.after.take());
        let next = data.more.then(|| CopyReq { chain: self.chain, fence: self.fence, after: source.after.clone() });
        Some(next)
    }

    /// Whether enough sources have sent every key.
    pub fn finished(&self) -> bool {
        self.sources.values().filter(|s| s.done).count() >= self.need
    }
}

/// A joiner's copy for its step (a quorum or lease partition's Add): from `sources`, whole once `need` have sent
/// everything. The joiner reports `PreCopied` then; once the map shows it inserted, it has taken every write
/// since, and reports `Flushed`.
#[derive(Debug)]
pub struct JoinCopy {
    pub copy: Copy,
    pub step: u64,
}

impl JoinCopy {
    pub fn start(
        chain: ChainId,
        step: u64,
        fence: Fence,
        sources: &[NodeId],
        need: usize,
    ) -> (JoinCopy, Vec<(NodeId, CopyReq)>) {
        let (copy, asks) = Copy::start(chain, fence, sources, need);
        (JoinCopy { copy, step }, asks)
    }
}

/// Whether a finished step's report still matters under the map's step in flight on its partition.
pub fn still_wanted(report: &StepReport, change: Option<&ChainChange>) -> bool {
    match (report, change) {
        (StepReport::PreCopied { step, .. }, Some(ChainChange::Add { step: s, inserted: false, .. })) => step == s,
        (StepReport::Flushed { step, .. }, Some(ChainChange::Add { step: s, inserted: true, .. })) => step == s,
        _ => false,
    }
}

/// A source's answer to `req`: the next page of its keys of the partition (of `partitions`).
pub fn page(store: &dyn Datastore, partitions: u32, req: CopyReq) -> Result<CopyData, StoreError> {
    let CopyReq { chain, fence, after } = req;
    let (entries, more) = cells::page(store, chain, partitions, after.as_ref(), PAGE_KEYS)?;
    Ok(CopyData { chain, fence, entries, more })
}
