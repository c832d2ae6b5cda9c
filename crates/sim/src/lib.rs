//! The deterministic simulator (DESIGN.md §2, principle 2): virtual time and one seeded RNG, a
//! network of FIFO links that break, partitions, pauses, crashes with disks that lose unsynced
//! writes, skewed clocks, closed-loop clients that record histories, and a trace hash that proves a
//! seed reproduces its run bit for bit.

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

pub use nemesis::{parse_kinds, FaultKind};
pub use run::{run, RunOptions, RunReport};
