//! The deterministic simulator (DESIGN.md §2, principle 2): the protocol cores of `meridian-proto` run over
//! virtual time and one seeded RNG, a network of FIFO links that break, partitions, pauses, crashes with disks
//! that lose unsynced writes, skewed clocks, joins, leaves and manager failover, while closed-loop clients record
//! histories that `meridian-check` judges; a trace hash proves a seed reproduces its run bit for bit. `meridian
//! sim` is its command line.
//!
//! Start with `world.rs` (how events and effects are carried out, as the real driver does), then `run.rs`,
//! `nemesis.rs` and `workload.rs`; `docs/simulator.md` describes it all.
//!
//! Modules:
//! - `clock`: per-node monotonic clocks (offset and drift) and wall clocks (which may step).
//! - `deadlines`: the check that no read returns a value past its deadline.
//! - `experiments`: seed experiments reproduced in the simulator (seed 003 §4.2's join).
//! - `nemesis`: the faults, swarm-randomised per seed: crashes, kills, clean stops, partitions, pauses, clocks,
//!   joins, leaves, manager crashes, and a live node cut off until the manager moves its chains on.
//! - `net`: one FIFO connection per ordered pair of nodes, with latency, jitter and bandwidth, that can break.
//! - `protocols`: how a protocol is booted in the simulator, and the cross-node invariants checked after every
//!   step.
//! - `rng`: the one seeded ChaCha stream, split into independent streams by name.
//! - `run`: one run from one seed: cluster, workload and nemesis, ending in a history, a trace hash and any
//!   failure.
//! - `scans`: SCAN pages in the workload, checked like GETs.
//! - `sweep`: many seeds of one protocol, each run checked, on every core, reported in seed order.
//! - `workload`: closed-loop clients that read, write and delete a few hot keys through random front-ends.
//! - `world`: the simulated cluster: the event queue, the nodes over simulated disks, the network and clocks.

pub mod clock;
pub mod deadlines;
pub mod experiments;
pub mod nemesis;
pub mod net;
pub mod protocols;
pub mod rng;
pub mod run;
pub mod scans;
pub mod sweep;
pub mod workload;
pub mod world;

pub use nemesis::{parse_kinds, FaultKind, UnknownFault};
pub use run::{run, RunOptions, RunReport};
