//! The RESP2 server: Redis clients (redis-cli, redis-benchmark, redis-py, go-ycsb) talk to a node
//! unchanged for the commands it implements.
//!
//! - `parser`: incremental, bounded request parser (multibulk and inline).
//! - `frame`: replies and their encoding.
//! - `connection`: one task per client that reads, dispatches and writes, pipelining with replies in order.
//! - `commands`: the command table and dispatch; `kv` (GET, SET, DEL, EXISTS, MGET, MSET), `strings` (INCR and
//!   its kin, APPEND, GETDEL, STRLEN) and `expiry` (EXPIRE and its kin, PERSIST, TTL, PTTL) turn commands into
//!   core requests, `hashes` the hash commands, `scan` (SCAN, DBSIZE) walks the keyspace's ring, `admin` answers
//!   connection and introspection commands locally.
//! - `pending`: replies still on their way from the core.
//! - `outbox`: replies written at the end of the worker's turn, every connection's together.
//! - `frontend`: what all connections share (CONFIG GET's patterns are `meridian_core::glob`).

mod admin;
mod commands;
mod connection;
mod databases;
mod expiry;
mod frame;
mod frontend;
mod hash_fields;
mod hashes;
mod hrandfield;
mod info;
mod keys;
mod kv;
mod made_replies;
pub(crate) mod order;
mod outbox;
mod parser;
mod pending;
mod ranges;
mod scan;
mod set_forms;
mod stats;
mod strings;
#[cfg(test)]
mod testing;

pub(crate) use connection::serve;
pub(crate) use frontend::Frontend;
pub use frontend::{RespLimits, DEFAULT_CONNECTIONS_MAX, DEFAULT_PIPELINE_MAX};
pub(crate) use stats::CommandStats;
