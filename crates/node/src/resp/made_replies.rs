//! Replies the node makes up itself, whose size no argument of the command bounds: KEYS gathers a whole
//! keyspace's keys, and HRANDFIELD with a negative count repeats fields as often as it is asked. Each is
//! refused rather than built past [`MADE_REPLY_MAX`], as a SCAN page stops at its byte bound.

use super::frame::Frame;

/// What one such reply may cost at most, counted as its entries' bytes plus [`ENTRY_COST`] each.
pub(super) const MADE_REPLY_MAX: usize = 64 << 20;

/// What an entry costs the node beside its bytes: its handle and frame in the reply (72 bytes together on a
/// 64-bit machine, less the share of a handle it may have with other entries) and its RESP header.
const ENTRY_COST: usize = 64;

/// The cost of an entry of `bytes` bytes.
pub(super) fn cost(bytes: usize) -> usize {
    bytes.saturating_add(ENTRY_COST)
}

/// The refusal of a reply past [`MADE_REPLY_MAX`], with what to use instead.
pub(super) fn too_large(command: &str, instead: &str) -> Frame {
    Frame::error(format!("ERR {command} would answer more than {MADE_REPLY_MAX} bytes; {instead}"))
}
