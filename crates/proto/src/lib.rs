//! Protocol cores, sans-IO: the tokio driver in `meridian-node` and the simulator in `meridian-sim` run the
//! same code. [`node::ClusterNode`] is the [`meridian_core::Process`] a Meridian node runs: chain replication
//! ([`chain`]) with its replicated manager ([`manager`]).

pub mod chain;
pub mod manager;
pub mod map;
pub mod node;
pub mod reports;
