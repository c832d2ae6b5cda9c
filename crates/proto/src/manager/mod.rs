pub mod map;
pub mod placement;
pub mod plan;
pub mod raft;
