//! The cluster manager (seed 003 §2.1, §2.5–2.6, Listing 2), replicated on Raft (DESIGN.md §2, principle 4):
//! the steps it plans to change the map ([`crate::map`]) by (`plan`), the log (`raft`), the voters' core (`core`) with the
//! leader's volatile state (`leader`), and the agent every node runs (`agent`, `mapfile`, `msg`).
//!
//! Both cores speak the node's grammar: inputs in (a tick, a message), effects out ([`msg::MgrFx`]: only sends,
//! of Raft's messages and the manager's own); the agent returns what it learned and leaves the order a
//! restart depends on (data durable before the map that judges it) to the node.

pub mod agent;
pub mod core;
pub mod leader;
pub mod mapfile;
pub mod msg;
pub mod plan;
pub mod raft;
