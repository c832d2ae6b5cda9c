//! Experiments that reproduce a seed's headline result in the simulator (DESIGN.md §6), each with its own
//! load and measurement rather than the correctness runs' nemesis and checker.

pub mod affiliates;
pub mod failover;
pub mod geo;
pub mod globlease;
pub mod join;
pub mod meteor;
pub mod wan;
