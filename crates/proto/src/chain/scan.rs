//! SCAN and DBSIZE at a chain's query node: the keys of a token range of the chain's partition, in token order
//! (docs/resp.md, "SCAN and DBSIZE").
//!
//! A [`Scan`] names a ring position `from`; the front-end sends it to the chain whose partition holds `from`
//! ([`ChainNode::route`](super::ChainNode)), and the member that answers the chain's reads answers it, while
//! it holds its lease, from the keys its own store holds: those of `from ..= last`, where `last` is the end of
//! the partition or, for a partition holding many more keys than one answer examines, a nearer token chosen so
//! that the range holds about twice as many ([`range_end`]). An answer (`ops/scan.rs`, the command's semantics
//! over one store) is cut after COUNT keys (or [`SCAN_REPLY_BYTES`](meridian_core::SCAN_REPLY_BYTES) of them)
//! but never inside a group of keys that share a token, so `next` (the first token it did not cover) loses none
//! of them.
//!
//! Why this gives Redis' guarantee (every key present for the whole of a scan is returned at least once): the
//! answers' ranges tile the ring from 0 to its end, as every answer covers exactly `from .. next`; partitions
//! never move on the ring, only between nodes, so a range means the same keys whichever node answers it; and
//! the answering member holds every write that was acknowledged before it answers (under `su` every member
//! does; under `au` the query node, as for GET, may lag the head: docs/resp.md). Keys written or deleted during a
//! scan may or may not be returned, and a key may be returned twice if a client repeats a cursor, both as in
//! Redis.
//!
//! A page holds to more than that: to what a GET of each key of its range holds to, so under `su` and `ausi` a
//! page is linearizable, per key, with every other read and write. Where a GET of one of its keys would be
//! answered by another member ([`ChainNode::page_elsewhere`]: a write the tail has not acknowledged, under `su`,
//! at a query node before the tail; an invalidation, under `ausi`, after the head), the whole page goes there;
//! an `ausi` head leaves a page over a write that is not yet invalidated everywhere to the front-end's next try,
//! where a GET of that key would wait. The simulator records every workload key a page covers and leaves out
//! as a read of nothing, and checks it with the GETs; a key it lists, as a present read (`crates/sim/src/scans.rs`).
//!
//! A page over a key past its deadline on this node's clock waits, as a GET of that key does (`expiry.rs`): it
//! goes back to the front-end's next try until the head's delete reaches this node, so a page never lists a key
//! past its deadline. Skipping the key on this node's own clock instead, as Redis' SCAN does, would let a page
//! call a key absent that a GET just after it still finds (the head's clock behind this one's, or a PERSIST the
//! head applies first): the simulator's check of pages against GETs found exactly that.

use super::msg::{ChainMsg, Origin};
use super::PlantedBug;
use super::{ChainStep, Fx};
use crate::map::placement::partition_range;
use crate::ops::read::Span;
use crate::ops::scan::{answer, range_end};
use meridian_core::{ChainId, ErrorKind, NodeId, Reply, Request, Scan, ScanWant, Time, UpdateMode, SCAN_COUNT_MAX};
use std::ops::RangeInclusive;

/// Keys a [`ScanWant::Count`] answer is sized to examine: a whole partition in one answer for keyspaces of up
/// to a few million keys, and a bounded pause of the node's core for larger ones.
pub const COUNT_SPAN_KEYS: u64 = 1 << 16;

/// Where a page goes instead of being answered here ([`ChainNode::page_elsewhere`]).
enum Elsewhere {
    Member(NodeId),
    /// Nowhere yet: the front-end tries again at its next tick.
    Later,
}

impl ChainStep<'_> {
    pub(super) fn on_scan(&mut self, now: Time, origin: Origin, chain: ChainId, scan: Scan, out: &mut Fx) {
        let unleased = self.s.planted(PlantedBug::ScanIgnoresLease)
            && self.s.replicas.get(&chain).is_some_and(|r| r.is_active() && self.s.reads_here(chain));
        let leased = unleased || self.s.replicas.get(&chain).is_some_and(|r| self.s.lease_ok(chain, r, now));
        // No lease: the front-end tries again at its next tick, routed by its map as it is then.
        if !leased {
            return self.bounce(origin, chain, Request::Scan(scan), out);
        }
        let last = match self.page_end(chain, &scan) {
            Ok(last) => last,
            Err(refusal) => return self.answer(origin, refusal, true, out),
        };
        match self.page_elsewhere(chain, scan.from..=last) {
            Some(Elsewhere::Member(to)) => return self.send_page(origin, chain, scan, to, out),
            Some(Elsewhere::Later) => return self.bounce(origin, chain, Request::Scan(scan), out),
            None => {}
        }
        self.note_answered(now, chain);
        let reply = self.scan_here(chain, &scan, last);
        // The store may hold writes this batch logged but has not made durable; the answer must not leave first.
        self.answer(origin, reply, true, out);
    }

    /// The last token a page of `chain` from `scan.from` covers, or the refusal of a position outside the
    /// chain's partition.
    fn page_end(&self, chain: ChainId, scan: &Scan) -> Result<u64, Reply> {
        let partitions = self.s.map.as_ref().expect("a lease implies a map").partitions;
        let partition = partition_range(chain, partitions);
        if !partition.contains(&scan.from) {
            let msg = format!("token {} is not in chain {chain}'s partition", scan.from);
            return Err(Reply::Error(ErrorKind::Invalid, msg));
        }
        let want = match scan.want {
            ScanWant::Keys(count) => count.clamp(1, SCAN_COUNT_MAX) as u64,
            ScanWant::Count => COUNT_SPAN_KEYS,
        };
        Ok(range_end(scan.from, *partition.end(), partitions, want, self.keys_per_chain(chain)))
    }

    /// Where a page over `range` must be answered instead of here: where a GET of one of its keys would be
    /// (`read_elsewhere`), except at an `ausi` head holding a write in the range that is not yet invalidated
    /// everywhere, or over a key past its deadline here, which leave the page to the front-end's next try (a GET
    /// waits for its one key).
    fn page_elsewhere(&self, chain: ChainId, range: RangeInclusive<u64>) -> Option<Elsewhere> {
        if self.overdue_within(chain, &range) {
            return Some(Elsewhere::Later);
        }
        let (r, update, span) = (&self.s.replicas[&chain], self.s.update_mode(chain), Span::Tokens(range));
        if update == UpdateMode::Ausi && r.is_head() {
            return r.awaiting.values().any(|a| a.keys().any(|k| span.holds(k))).then_some(Elsewhere::Later);
        }
        self.read_elsewhere(chain, &span, update).map(Elsewhere::Member)
    }

    /// Sends a page on to `to`, the member `page_elsewhere` named, keeping a copy for the front-end if it is ours.
    fn send_page(&mut self, origin: Origin, chain: ChainId, scan: Scan, to: NodeId, out: &mut Fx) {
        let Some(view) = self.s.replicas[&chain].view() else {
            return self.bounce(origin, chain, Request::Scan(scan), out);
        };
        if origin.node == self.s.me {
            self.host.requests.keep(&origin, Request::Scan(scan.clone()));
        }
        out.send(to, ChainMsg::Scan { origin, view, chain, scan })
    }

    /// The answer to a page from `scan.from` to `last` from this member's store.
    fn scan_here(&self, chain: ChainId, scan: &Scan, last: u64) -> Reply {
        let skipped = self
            .s
            .planted(PlantedBug::ScanSkipsFirstToken)
            .then(|| Scan { from: scan.from.saturating_add(1), ..scan.clone() });
        let scan = skipped.as_ref().unwrap_or(scan);
        let answered = answer(self.store(chain), chain, scan, last);
        let answered = answered.and_then(|scanned| self.with_tombstones(chain, scan, scanned));
        match answered {
            Ok(scanned) => Reply::Scanned(scanned),
            Err(e) => Reply::Error(ErrorKind::Storage, e.to_string()),
        }
    }

    /// About how many keys each chain kept in `chain`'s store holds: the store's keys shared evenly, as tokens
    /// are uniform.
    fn keys_per_chain(&self, chain: ChainId) -> u64 {
        let kind = self.s.replicas[&chain].kind;
        let sharing = self.s.replicas.iter().filter(|(c, r)| c.keyspace() == chain.keyspace() && r.kind == kind);
        self.store(chain).stats().live_keys / sharing.count().max(1) as u64
    }
}
