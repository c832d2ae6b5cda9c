//! Operation histories and a linearizability checker for key-value registers: how the simulator and the
//! real-process tests judge what clients saw.
//!
//! A [`History`] records what clients invoked, what they were told and when, in the JSON-lines format of
//! DESIGN.md §4; the deterministic simulator and real-process tests build one with a [`Recorder`] or read it from
//! JSON lines. [`check`] decides whether some order of the operations, consistent with real time, explains every
//! result under a per-key register model, and otherwise returns a small [`Counterexample`]. Present reads (a key
//! found holding some value) are left out of that search; [`present_violations`] judges them. [`staleness`]
//! measures how stale reads were, for configurations that promise less; [`check_sequential`] checks
//! per-key sequential consistency, for those that promise that.
//!
//! Start with `history.rs` (the format, and what `ok: null` means), then `linearizable.rs`, the entry point, and
//! `search.rs`.
//!
//! Modules:
//! - `counterexample`: the evidence for a violation, a few operations on one key that no register explains.
//! - `dataflow`: which value an operation writes and which it observes.
//! - `fingerprint`: 128-bit Zobrist fingerprints of search configurations, so the search skips one seen before.
//! - `history`: `History` and `Op`, the history format.
//! - `jsonl`: reading and writing a history as JSON lines, validating every operation.
//! - `linearizable`: `check`, key by key, with a budget, and the verdict.
//! - `prepare`: one key's operations turned into the calls the search must or may linearize.
//! - `recorder`: `Recorder`, building a history while operations run.
//! - `register`: the sequential specification, a register that starts absent, with values interned.
//! - `search`: the Wing–Gong search with Lowe's improvements, as in Porcupine, for one key.
//! - `sequential`: `check_sequential`, per-key sequential consistency (read-your-writes, monotonic reads) as a
//!   cycle search over the order of each key's writes.
//! - `shrink`: shrinking a violation to a 1-minimal set of operations.
//! - `sources`: the writes each observing operation could have read from.
//! - `staleness`: how stale reads were, and the present reads no linearization explains.
//! - `timeline`: one key's call and return events as a list the search unlinks and relinks in O(1).

mod counterexample;
mod dataflow;
mod fingerprint;
mod history;
mod jsonl;
mod linearizable;
mod prepare;
mod recorder;
mod register;
mod search;
mod sequential;
mod shrink;
mod sources;
mod staleness;
mod timeline;

pub use counterexample::Counterexample;
pub use history::{History, Op, OpError, OpKind};
pub use jsonl::HistoryError;
pub use linearizable::{check, Budget, Verdict};
pub use recorder::Recorder;
pub use sequential::{check_sequential, SequentialVerdict, SequentialViolation};
pub use staleness::{present_violations, staleness, Staleness};
