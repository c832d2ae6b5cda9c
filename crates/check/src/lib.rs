//! Operation histories and a linearizability checker for key-value registers.
//!
//! A [`History`] records what clients invoked, what they were told and when; the deterministic simulator and
//! real-process tests build one with a [`Recorder`] or read it from JSON lines. [`check`] decides whether some
//! order of the operations, consistent with real time, explains every result under a per-key register model, and
//! otherwise returns a small [`Counterexample`]. Present reads (a key found holding some value) are left out of
//! that search; [`present_violations`] judges them. [`staleness`] measures how stale reads were, for
//! configurations that promise less.

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
mod shrink;
mod sources;
mod staleness;
mod timeline;

pub use counterexample::Counterexample;
pub use history::{History, Op, OpError, OpKind};
pub use jsonl::HistoryError;
pub use linearizable::{check, Budget, Verdict};
pub use recorder::Recorder;
pub use staleness::{present_violations, staleness, Staleness};
