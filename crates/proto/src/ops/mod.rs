//! Redis command semantics that any replication protocol can use: what a write does to its key, what a read or
//! a SCAN page answers, from a key's stored state or one store. Nothing here knows of chains, views or
//! replicas; it depends on `meridian_core`'s values and the [`meridian_store::Datastore`] trait only.
//!
//! - `decide.rs` (with `decide/more.rs`): a write decided against its key's state, once, into a [`Change`]
//!   every replica applies and an [`Outcome`] for the client (read-modify-write commands replicate as plain puts
//!   and deletes);
//! - `outcome.rs`: [`Change`], [`Outcome`], [`Answer`] and [`Refusal`], which the chain's updates carry (and
//!   `chain::msg` re-exports);
//! - `read.rs`: a stored value taken apart, the reply to GET and its kin, and what a read covers;
//! - `scan.rs`: a SCAN or DBSIZE page over one store, in token order, cut by COUNT and bytes.
//!
//! [`Change`]: outcome::Change
//! [`Outcome`]: outcome::Outcome
//! [`Answer`]: outcome::Answer
//! [`Refusal`]: outcome::Refusal

pub(crate) mod decide;
pub mod outcome;
pub(crate) mod read;
pub(crate) mod scan;
