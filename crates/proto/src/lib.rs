//! The protocol cores, sans-IO: the tokio driver in `meridian-node` and the simulator in `meridian-sim` run the
//! same code. [`node::ClusterNode`] is the [`meridian_core::Process`] a Meridian node runs: a core per keyspace
//! protocol (chain replication, [`chain`]; leaderless quorums, [`quorum`]) with the replicated manager
//! ([`manager`]), all reading the cluster map ([`map`]).
//!
//! Start with `map/placement.rs` (partitions and chains on the ring), then `chain/mod.rs` with
//! `docs/protocols/chain.md` (the data path and why it is correct), then `node/mod.rs`, `chain/membership.rs`,
//! `chain/copy.rs` and `manager/core.rs` with `docs/protocols/ouroboros.md` (how chains change as nodes come and
//! go, and the manager that drives it). `docs/glossary.md` defines the terms they use.
//!
//! Modules:
//! - `chain`: chain replication on fixed partitions: the data path, views, pre-copy and flush for joins, and
//!   leases for tails and the other members that answer clients. Among its files:
//!   - `serve.rs`: ordering at the head, passing updates down, acknowledging back up, `su` and `au`;
//!   - `invalidate.rs`: `ausi`'s invalidations, sent down ahead of the update;
//!   - `at_once.rs`: reads, and a lone memory replica's writes, answered within their step;
//!   - `expiry.rs`: heads deleting keys past their deadline;
//!   - `scan.rs`: SCAN and DBSIZE answered by a query node, a token range at a time;
//!   - `recovery.rs`: replicas rebuilt from the logs at start, and those lost to a restart.
//! - `ops`: Redis command semantics any protocol can use, independent of chains: a write decided against its key's
//!   state (`decide.rs`: the `Change` every replica applies and the `Outcome` for the client, `outcome.rs`), a
//!   read's reply (`read.rs`) and a SCAN page over one store (`scan.rs`).
//! - `quorum`: leaderless quorum replication, the second keyspace protocol: consistency levels, clock or ABD
//!   stamps, read repair, fenced membership changes (`docs/protocols/quorum.md`).
//! - `protocol`: the contract between the node and a keyspace protocol (`KeyspaceProtocol`); the registry that
//!   dispatches to each is `node/protocols.rs`.
//! - `manager`: the cluster map as a Raft state machine on raft-rs, the leader's failure detection, step
//!   driving and lease fencing, and the agent every node runs.
//! - `map`: the cluster map (nodes, keyspaces, chains and their views, the commands that change it) and
//!   `placement.rs`, partitions and chains on the virtual-id ring; what every core reads.
//! - `reports`: what a node's chain core tells the manager's leader in every heartbeat (steps done, replicas
//!   lost), kept apart so that neither core imports the other.
//! - `stores`: the node's datastores, one per keyspace and replica type, each with its ledger (`ledger.rs`: the
//!   keys that expire, by chain and deadline, and a cache keyspace's write order); what every protocol's replicas
//!   keep their data in, owned by the node.
//! - `requests`: the front-end's request table (`RequestTable`): the client requests a node accepted and waits
//!   on, by `Origin`, with their timeouts and bounce retries; owned by the node.
//! - `host`: what the node lends the protocol core it steps (`Host`): the stores, the request table, the tick, the
//!   wall clock and the request limits; and how it accepts a client request and times it out.
//! - `node`: `ClusterNode`, one node's chain replica, manager agent and (on a voter) manager replica as one core.
//!   Among its files:
//!   - `admin.rs`: administration requests, and keyspace commands that wait until the map shows them;
//!   - `status.rs`: the JSON of `/v1/cluster`;
//!   - `metrics.rs`: the core's part of `/metrics`;
//!   - `clean_stop.rs`: the marker a clean stop leaves, which spares the next start's head replicas a copy.

pub mod chain;
pub mod host;
pub mod lease;
pub mod manager;
pub mod map;
pub mod meteor;
pub mod node;
pub mod ops;
pub mod protocol;
pub mod quorum;
pub mod reports;
pub mod requests;
pub mod stores;
pub mod versioned;
