//! Deliberately wrong variants of the chain core, compiled into every build but switched on only by
//! [`ChainConfig::planted_bug`], which exists only with the `planted-bugs` feature: they prove that the
//! simulator's checkers catch what they claim to (`tests/sim_planted_bugs.rs`). Each is a one-line hook at the
//! place it breaks (`if self.planted(PlantedBug::X) { ... }`), always false without the feature, so the data
//! path reads as it runs; what a bug does beyond a line lives here.

use super::msg::Update;
use super::{ChainConfig, ChainNode, ChainStep, Fx};
use meridian_core::ring::key_token;
use meridian_core::{ChainId, Scan, Scanned};
use meridian_store::{Body, Record, StoreError};

/// Deliberately wrong variants, to prove the simulator's checkers catch them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlantedBug {
    /// The head answers a write once it has logged it, before the tail has it.
    HeadAcksEarly,
    /// The tail acknowledges (upstream and to the client) before its log is durable, so a crash can
    /// take back a write its predecessors have already dropped from their unacknowledged history.
    TailAcksEarly,
    /// Predecessors ignore Sync, so an update lost with a broken connection is never resent.
    IgnoresSync,
    /// A tail answers without a lease, so a tail removed from its chain without knowing serves stale reads.
    IgnoresLease,
    /// Only the fast path (`read_at_once`) answers without a lease; the long way (`on_get`, `serving`) keeps it.
    FastReadIgnoresLease,
    /// The fast path (`write_at_once`) also takes writes to a store that must make them durable, and answers
    /// them before it has.
    FastWriteSkipsSync,
    /// A member inserted by a join takes part at once, without flushing what it missed since its pre-copy.
    SkipsFlush,
    /// A node that restarts trusts its replicas of kinds that do not survive a restart, as if they were whole.
    TrustsLostReplicas,
    /// A node that restarts trusts its log replicas of chains it headed passing updates on before its fsync, as
    /// if its log held everything it passed on.
    TrustsEarlyHead,
    /// A query node before the tail answers reads of keys with unacknowledged writes from its own state.
    ReadsTentative,
    /// Under `ausi`, the head answers a read of a key whose write is not yet invalidated everywhere.
    ShowsUninvalidated,
    /// The head deletes keys a second before their deadline.
    ExpiresEarly,
    /// A member answers a read of a key past its deadline from its store, before the head's delete reaches it.
    ReadsPastDeadline,
    /// A sync hands the writes to the OS but takes no fsync (`begin_sync` says there is nothing to make durable),
    /// so a power loss takes back writes that were acknowledged.
    SkipsFsync,
    /// Instead of the head ordering evictions, the tail evicts on its own, from its own store, after each
    /// update it commits: the members before it keep what it dropped.
    EvictsLocally,
    /// A query node answers SCAN pages without a lease (GETs keep theirs), so a tail removed without knowing
    /// answers pages from a store the chain has moved on from.
    ScanIgnoresLease,
    /// A SCAN page leaves out the keys on its first token (an off-by-one on the range's start) while its
    /// answer claims the whole range from there.
    ScanSkipsFirstToken,
    /// A SCAN page also lists the keys of its range whose latest record is a delete, taking every key the
    /// store's range read yields for a present one (`Datastore::scan_range` yields tombstones too).
    ScanShowsTombstones,
    /// The head's store says a key is absent when a conditional write asks whether it exists, as a store that
    /// lost the key would (a compaction that took unsynced records for durable once did, after a power loss).
    /// Reads go to the tail, so only the outcome of a SET NX shows it.
    HeadStoreForgets,
    /// A member after the head logs only the first key of an update of several keys (RENAME, MSETNX), as a log
    /// that kept only a group's first record would.
    LogsFirstKeyOnly,
}

/// Whether `bug` is planted in a core of configuration `cfg`: never, without the `planted-bugs` feature.
#[inline(always)]
pub(super) fn planted_in(cfg: &ChainConfig, bug: PlantedBug) -> bool {
    #[cfg(feature = "planted-bugs")]
    return cfg.planted_bug == Some(bug);
    #[cfg(not(feature = "planted-bugs"))]
    {
        let _ = (cfg, bug);
        false
    }
}

impl ChainNode {
    /// Whether `bug` is planted in this node (`planted_in`).
    #[inline(always)]
    pub fn planted(&self, bug: PlantedBug) -> bool {
        planted_in(&self.cfg, bug)
    }
}

impl ChainStep<'_> {
    /// [`PlantedBug::HeadAcksEarly`]: the head answers `u`'s client once it has logged it.
    pub(super) fn ack_early_at_head(&mut self, u: &Update, out: &mut Fx) {
        if let (true, Some(origin)) = (self.s.replicas[&u.chain].is_head(), u.origin) {
            self.answer(origin, u.outcome.reply(), true, out);
        }
    }

    /// The planted bug [`PlantedBug::EvictsLocally`]: the tail drops `chain`'s oldest keys from its own
    /// store, unordered, until the chain is within its share.
    pub(super) fn evict_locally(&mut self, chain: ChainId, seq: u64) {
        let tail = self.s.replicas[&chain].is_tail();
        let Some(&budget) = self.s.budgets.get(&chain).filter(|_| tail) else { return };
        while let Some(key) =
            self.ledger(chain).filter(|l| l.chain_bytes(chain.0) > budget).and_then(|l| l.oldest(chain.0, 1).pop())
        {
            if self.store_mut(chain).append(&Record { chain: chain.0, seq, key, body: Body::Tombstone }).is_err() {
                return;
            }
        }
    }

    /// With `ScanShowsTombstones`: the answer with the deleted keys of the range it covered added.
    pub(super) fn with_tombstones(
        &self,
        chain: ChainId,
        scan: &Scan,
        mut scanned: Scanned,
    ) -> Result<Scanned, StoreError> {
        if !self.s.planted(PlantedBug::ScanShowsTombstones) {
            return Ok(scanned);
        }
        let last = scanned.next.map_or(u64::MAX, |next| next - 1);
        self.store(chain).scan_range(scan.from.wrapping_sub(1), last, &mut |key, entry| {
            if entry.value.is_none() && entry.chain == chain.0 {
                scanned.keys.push(key);
            }
        })?;
        scanned.keys.sort_by_key(|key| key_token(key));
        Ok(scanned)
    }
}
