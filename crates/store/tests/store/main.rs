//! Integration tests of the log store and the storage interface, over the simulated disk. One test binary,
//! so the helpers in `common` are shared without being compiled once per file.

mod common;
mod compaction;
mod drops;
mod faults;
mod hints;
mod recovery;
mod streaming;
