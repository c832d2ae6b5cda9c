//! The RESP server (RESP2, and RESP3 after HELLO 3): Redis clients (redis-cli, redis-benchmark, redis-py,
//! go-ycsb) talk to a node unchanged for the commands it implements.
//!
//! - `parser`: incremental, bounded request parser (multibulk and inline).
//! - `frame`: replies and their encoding.
//! - `connection`: one task per client that reads, dispatches and writes, pipelining with replies in order.
//! - `stream`: the streams a connection is served over, plain TCP or TLS.
//! - `commands`: the command table and dispatch. These turn commands into core requests: `kv` (GET, SET, DEL and
//!   UNLINK, EXISTS, MGET, MSET), `set_forms` (SETNX, SETEX, PSETEX, GETSET), `strings` (INCR and its kin,
//!   APPEND, GETDEL, STRLEN), `ranges` (GETRANGE, SUBSTR), `expiry` (EXPIRE and its kin, PERSIST, TTL, PTTL),
//!   `hashes`, `hash_fields` (HKEYS, HVALS, HSTRLEN) and `hrandfield` the hash commands; `scan` (SCAN, DBSIZE)
//!   and `keys` (KEYS) walk the keyspace's ring, bounded by `made_replies`. `admin` answers connection and
//!   introspection commands, `info` INFO and TIME, locally; `databases` maps SELECT's numbers to keyspaces.
//! - `auth` and `acl`: who a connection is (AUTH, HELLO AUTH) and what its user may do (the ACL command, and
//!   the check before every command).
//! - `pending`: replies still on their way from the core.
//! - `outbox`: replies written at the end of the worker's turn, every connection's together.
//! - `frontend`: what all connections share (CONFIG GET's patterns are `meridian_core::glob`).

pub(crate) mod acl;
mod admin;
mod atomic;
mod auth;
mod commands;
mod connection;
mod databases;
mod expiry;
mod flush;
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
pub(crate) mod parser;
mod pending;
mod ranges;
mod scan;
mod set_forms;
mod stats;
mod stream;
mod strings;
#[cfg(test)]
mod testing;

pub use auth::{EmptyPassword, Password};
pub(crate) use connection::{serve, ClientListeners};
pub(crate) use frontend::Frontend;
pub use frontend::{BadRespLimits, RespLimits, DEFAULT_CONNECTIONS_MAX, DEFAULT_PIPELINE_MAX};
pub(crate) use stats::CommandStats;
