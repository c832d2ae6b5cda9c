//! Copying a chain's data to a node that joins it (seed 003 §2.5), both ends.
//!
//! **Pre-copy** (phase 1): while the map has an Add step in flight for a node that is not yet inserted, the
//! joiner copies the partition from its source, whose history keeps moving: the nearest member among those that
//! will follow it in the chain, the tail in one region (`ClusterMap::precopy_source`). It copies in rounds:
//! round `k` asks, token sub-range by sub-range, for the latest state of every key whose last update is above
//! `since_k`, and `since_{k+1}` is the source's LA when round `k` began: what the tail holds (at the tail itself
//! LA = LU). After a round the joiner's data reflects at least the state after `since_{k+1}` for every key
//! (some keys are newer, even unacknowledged, which the flush copies again), which it logs as an ack watermark;
//! a round that moved little ends the pre-copy. Requests are paced to the configured
//! migration bandwidth, so a join costs the source a bounded share of its disk and network.
//!
//! **Flush** (phase 2): once inserted, the member copies from its successor what changed after its
//! watermark, then the successor's unacknowledged history. The successor's history stands still meanwhile:
//! in the new view its only predecessor is the flushing member, which forwards nothing until it is complete.
//! A source whose LU moves anyway (it restarted and lost an unsynced tail) makes the flush start again. Updates
//! that the flushing member's own predecessor sends meanwhile wait in the temporary store (`mod.rs`), to be
//! played forward after the flush.
//!
//! The source side answers from its index ([`answer_states`]) and its unacknowledged history
//! ([`answer_history`]); an answer is cut at [`COPY_CHUNK_BYTES`] but always carries at least one key.

use super::msg::{CopyData, CopyKind, CopyPart, CopyReq, KeyState, Update};
use super::replica::Replica;
use meridian_core::ring::key_token;
use meridian_core::{ChainId, NodeId, Time};
use meridian_store::{Datastore, StoreError};
use std::ops::RangeInclusive;
use std::time::Duration;

/// Bytes of keys and values one copy answer carries at most (one key always fits, whatever its size).
pub const COPY_CHUNK_BYTES: usize = 256 << 10;
/// A pre-copy round that moved less than this is the last: the flush, which blocks the chain, copies the rest.
const PRECOPY_SETTLED_BYTES: u64 = 64 << 10;
/// Rounds after which a pre-copy stops even if the chain writes faster than the joiner copies.
const PRECOPY_ROUNDS_MAX: u32 = 8;
/// Ticks after which an unanswered copy request is sent again (requests are idempotent).
const RESEND_TICKS: u64 = 10;

/// What the copying node must do with an answer.
#[derive(Debug)]
pub enum Progress {
    /// Log these states (possibly none); the copy goes on.
    States(Vec<KeyState>),
    /// Log these states; the copied data now reflects every update up to `lu`, which the node logs as its
    /// watermark. `settled` ends a pre-copy.
    Round { states: Vec<KeyState>, lu: u64, settled: bool },
    /// The flush is complete: the node holds the source's state, and takes its acknowledgement point and the
    /// history after it.
    Flushed { la: u64, history: Vec<Update> },
    /// The source's history moved during a flush; the copy starts again and nothing is lost.
    Restart,
    /// An answer to a request this copy no longer waits for.
    Stale,
}

/// The collected history of a flush: consecutive updates after `la`.
#[derive(Debug)]
struct History {
    la: u64,
    updates: Vec<Update>,
}

/// The copying end of one pre-copy or flush.
#[derive(Debug)]
pub struct Copier {
    pub chain: ChainId,
    pub kind: CopyKind,
    pub source: NodeId,
    pub view: u64,
    range: RangeInclusive<u64>,
    since: u64,
    /// The first token of the next States request; None once the states of this round are all in.
    next: Option<u64>,
    /// Tokens per request, adapted to how dense the partition is.
    span: u64,
    /// Where the round began in the source's history: its LU for a flush (which must stand still), its LA for a
    /// pre-copy (the watermark the round earns, already at the tail).
    round_mark: Option<u64>,
    round_bytes: u64,
    /// Bytes of keys and values copied so far, all rounds together.
    pub copied: u64,
    pub rounds: u32,
    history: Option<History>,
    /// The request waiting for an answer and the tick it was sent at.
    outstanding: Option<(CopyPart, u64)>,
    /// Pacing: no request before this time.
    not_before: Time,
    /// A pre-copy that has settled waits for its insertion.
    pub settled: bool,
}

impl Copier {
    /// A copy of `range` (the chain's partition) from `source` into a node whose data reflects every update up
    /// to `since`.
    pub fn new(
        chain: ChainId,
        kind: CopyKind,
        source: NodeId,
        view: u64,
        range: RangeInclusive<u64>,
        since: u64,
    ) -> Self {
        let width = range.end() - range.start();
        Copier {
            chain,
            kind,
            source,
            view,
            next: Some(*range.start()),
            span: (width / 8).max(1),
            range,
            since,
            round_mark: None,
            round_bytes: 0,
            copied: 0,
            rounds: 0,
            history: None,
            outstanding: None,
            not_before: Time::ZERO,
            settled: false,
        }
    }

    /// The request to send now, if one is due: none while one is outstanding (unless it is overdue), none
    /// before the pacing allows, none once a pre-copy settled.
    pub fn request(&mut self, now: Time, tick: u64) -> Option<CopyReq> {
        if self.settled || now < self.not_before {
            return None;
        }
        if let Some((part, sent)) = self.outstanding {
            return (tick >= sent + RESEND_TICKS).then(|| self.send(part, tick));
        }
        let part = match (self.next, &self.history) {
            (Some(first), _) => {
                let last = first.saturating_add(self.span - 1).min(*self.range.end());
                CopyPart::States { since: self.since, first, last }
            }
            (None, None) => CopyPart::History { after: None },
            (None, Some(h)) => CopyPart::History { after: Some(h.updates.last().map_or(h.la, |u| u.seq)) },
        };
        Some(self.send(part, tick))
    }

    /// How long until [`Self::request`] has something to send: None while a request is outstanding or the
    /// pre-copy has settled, zero when one is due now.
    pub fn due_in(&self, now: Time) -> Option<Duration> {
        (!self.settled && self.outstanding.is_none()).then(|| self.not_before.since(now))
    }

    fn send(&mut self, part: CopyPart, tick: u64) -> CopyReq {
        self.outstanding = Some((part, tick));
        CopyReq { chain: self.chain, view: self.view, kind: self.kind, part }
    }

    /// Takes an answer; `bandwidth` (bytes per second, 0 for unlimited) paces a pre-copy's next request.
    pub fn on_data(&mut self, data: CopyData, now: Time, bandwidth: u64) -> Progress {
        if self.outstanding.map(|(p, _)| p) != Some(data.part) || data.view != self.view || data.kind != self.kind {
            return Progress::Stale;
        }
        self.outstanding = None;
        match data.part {
            CopyPart::States { last, .. } => self.on_states(data, last, now, bandwidth),
            CopyPart::History { .. } => self.on_history(data),
        }
    }

    fn on_states(&mut self, data: CopyData, last: u64, now: Time, bandwidth: u64) -> Progress {
        if self.kind == CopyKind::Flush && self.round_mark.is_some_and(|lu| lu != data.lu) {
            return self.restart();
        }
        // A flush checks the source's history stands still; a pre-copy's watermark must be at the tail already.
        self.round_mark.get_or_insert(if self.kind == CopyKind::Flush { data.lu } else { data.la });
        let bytes: u64 = data.states.iter().map(state_bytes).sum::<usize>() as u64;
        self.round_bytes += bytes;
        self.copied += bytes;
        self.pace(bytes, now, bandwidth);
        self.adapt_span(data.covered < last, bytes);
        self.next = (data.covered < *self.range.end()).then(|| data.covered + 1);
        if self.next.is_some() {
            return Progress::States(data.states);
        }
        self.finish_round(data.states)
    }

    fn pace(&mut self, bytes: u64, now: Time, bandwidth: u64) {
        if bandwidth > 0 && matches!(self.kind, CopyKind::PreCopy { .. }) {
            self.not_before = now.plus(Duration::from_secs_f64(bytes as f64 / bandwidth as f64));
        }
    }

    /// Narrower requests after a cut answer, wider ones after a small answer, so each answer is a good fraction
    /// of a chunk without the source reading far more than it sends.
    fn adapt_span(&mut self, cut: bool, bytes: u64) {
        let width = self.range.end() - self.range.start();
        if cut {
            self.span = (self.span / 2).max(1);
        } else if bytes < COPY_CHUNK_BYTES as u64 / 4 {
            self.span = self.span.saturating_mul(2).min(width.max(1));
        }
    }

    fn finish_round(&mut self, states: Vec<KeyState>) -> Progress {
        let lu = self.round_mark.take().expect("a round has answers");
        self.rounds += 1;
        if self.kind == CopyKind::Flush {
            // The states are in; the history part follows, checked against the same LU.
            self.round_mark = Some(lu);
            return Progress::States(states);
        }
        let settled = self.round_bytes <= PRECOPY_SETTLED_BYTES || self.rounds >= PRECOPY_ROUNDS_MAX;
        self.settled = settled;
        self.since = lu;
        self.round_bytes = 0;
        if !settled {
            self.next = Some(*self.range.start());
        }
        Progress::Round { states, lu, settled }
    }

    fn on_history(&mut self, data: CopyData) -> Progress {
        if self.round_mark != Some(data.lu) {
            return self.restart();
        }
        let h = self.history.get_or_insert(History { la: data.la, updates: Vec::new() });
        if data.la > h.la {
            // The tail acknowledged more meanwhile: those updates are in the states already.
            h.updates.retain(|u| u.seq > data.la);
            h.la = data.la;
        }
        let expected = h.updates.last().map_or(h.la, |u| u.seq) + 1;
        match data.history.first() {
            Some(u) if u.seq != expected => return self.restart(),
            _ => h.updates.extend(data.history),
        }
        let have = h.updates.last().map_or(h.la, |u| u.seq);
        if have < data.lu {
            return Progress::States(Vec::new());
        }
        let h = self.history.take().expect("just used");
        Progress::Flushed { la: h.la, history: h.updates }
    }

    fn restart(&mut self) -> Progress {
        self.next = Some(*self.range.start());
        self.round_mark = None;
        self.round_bytes = 0;
        self.history = None;
        Progress::Restart
    }
}

/// The source's answer to a States request: the latest state of every key of the range updated after
/// `since`, sorted by token and cut after [`COPY_CHUNK_BYTES`] (never between two keys of one token).
pub fn answer_states(
    store: &dyn Datastore,
    req: &CopyReq,
    replica: &Replica,
    since: u64,
    first: u64,
    last: u64,
) -> Result<CopyData, StoreError> {
    let mut found: Vec<(u64, KeyState)> = Vec::new();
    let chain = req.chain.0;
    store.scan_range(first.wrapping_sub(1), last, &mut |key, entry| {
        if entry.chain == chain && entry.seq > since {
            found.push((key_token(&key), KeyState { key, seq: entry.seq, value: entry.value }));
        }
    })?;
    found.sort_unstable_by(|a, b| (a.0, &a.1.key).cmp(&(b.0, &b.1.key)));
    let (states, covered) = cut(found, last);
    Ok(CopyData {
        chain: req.chain,
        view: req.view,
        kind: req.kind,
        part: req.part,
        states,
        covered,
        history: Vec::new(),
        lu: replica.lu,
        la: replica.la,
    })
}

/// Keeps whole tokens until the byte budget is spent; returns the states and the last token covered.
fn cut(found: Vec<(u64, KeyState)>, last: u64) -> (Vec<KeyState>, u64) {
    let mut bytes = 0usize;
    let mut states = Vec::new();
    let mut iter = found.into_iter().peekable();
    while let Some((token, s)) = iter.next() {
        bytes += state_bytes(&s);
        states.push(s);
        let next_token = iter.peek().map(|(t, _)| *t);
        if bytes >= COPY_CHUNK_BYTES && next_token.is_some_and(|t| t != token) {
            return (states, token);
        }
    }
    (states, last)
}

/// The source's answer to a History request: its unacknowledged updates after `after` (or from its LA), up
/// to [`COPY_CHUNK_BYTES`].
pub fn answer_history(req: &CopyReq, replica: &Replica, after: Option<u64>) -> CopyData {
    let from = after.unwrap_or(replica.la).max(replica.la);
    let (mut history, mut bytes) = (Vec::new(), 0usize);
    for u in replica.missing_after(from, usize::MAX) {
        if !history.is_empty() && bytes >= COPY_CHUNK_BYTES {
            break;
        }
        bytes += update_bytes(u);
        history.push(u.clone());
    }
    CopyData {
        chain: req.chain,
        view: req.view,
        kind: req.kind,
        part: req.part,
        states: Vec::new(),
        covered: 0,
        history,
        lu: replica.lu,
        la: replica.la,
    }
}

fn state_bytes(s: &KeyState) -> usize {
    s.key.len() + s.value.as_ref().map_or(0, |v| v.len())
}

fn update_bytes(u: &Update) -> usize {
    let bytes = |key: &bytes::Bytes, change: &super::msg::Change| match change {
        super::msg::Change::Put(v) => key.len() + v.len(),
        _ => key.len(),
    };
    u.changes().map(|(k, c)| bytes(k, c)).sum()
}
