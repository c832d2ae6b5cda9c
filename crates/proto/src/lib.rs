//! Protocol cores. Each is a sans-IO [`meridian_core::Process`]: the tokio driver in `meridian-node`
//! and the simulator in `meridian-sim` run the same code.

pub mod chain;
pub mod manager;
