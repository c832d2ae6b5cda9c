//! The vocabulary every Meridian crate shares: identifiers, keyspace configurations, client requests and
//! replies, the sans-IO [`Process`] contract that protocol cores implement, the consistent-hashing ring ([`ring`]), the
//! static [`ClusterConfig`] and the peer [`wire`] codec. It depends on no other Meridian crate.
//!
//! Start with `process.rs`: what a core takes in, the `Effects` it gives out, and what `after_sync` means. Then
//! `kv.rs` for what clients ask, and `keyspace.rs` for how a keyspace is configured.
//!
//! Modules:
//! - `acl`: ACL users (Redis' `ACL SETUSER` rules, and the keyspaces a user may select) as the cluster map keeps
//!   them.
//! - `chain_map`: a map keyed by chain id that finds an entry by keyspace and partition index and iterates in
//!   chain-id order (a node's replicas and leases, the cluster map's chains).
//! - `config`: the initial cluster configuration every node starts from, and its fingerprint.
//! - `exposition`: the Prometheus text writer that both the protocol core and the runner use for `/metrics`.
//! - `glob`: Redis' glob patterns, for SCAN's MATCH and CONFIG GET.
//! - `hash`: how a hash value's fields are encoded in a datastore.
//! - `ids`: node, chain, keyspace and request ids; a chain id names its keyspace and partition.
//! - `keyspace`: a keyspace's replica types, update mode (`su`, `ausi`, `au`), query node and durability mode.
//! - `kv`: client requests and replies: reads of a value or an expiry; puts, deletes and expiry changes; scans of
//!   a keyspace by ring position; administration; size limits.
//! - `location`: where a node runs (region, zone, rack), and the rule for their names.
//! - `placement`: where a keyspace asks its replicas to run (regions and counts, or a spread, minus banned
//!   regions).
//! - `process`: the `Process` trait, `Effects` and the durability order (`after_sync`, `Dirt`, `SyncJob`).
//! - `ring`: ring tokens of keys and virtual ids on the 64-bit consistent-hashing ring.
//! - `size`: byte counts as people write them (`64k`, `256mb`).
//! - `splitmix`: a tiny seeded PRNG for replayable draws.
//! - `stored`: how a value is stored, with its type and deadline, ahead of the client's bytes.
//! - `time`: `Time`, the monotonic clock as cores see it.
//! - `topology`: regions and the links between them (round trips, bandwidth, jitter), and the named presets.
//! - `wire`: the peer frame codec, with its version byte and checksum.

pub mod acl;
pub mod chain_map;
pub mod config;
pub mod exposition;
pub mod glob;
pub mod hash;
pub mod ids;
pub mod keyspace;
pub mod kv;
pub mod location;
pub mod placement;
pub mod process;
pub mod ring;
pub mod size;
pub mod splitmix;
pub mod stored;
pub mod time;
pub mod topology;
pub mod violation;
pub mod wire;

pub use chain_map::ChainMap;
pub use config::{ClusterConfig, ConfigError, NodeSpec};
pub use ids::{ChainId, KeyspaceId, NodeId, RequestId};
pub use keyspace::{
    DurabilityMode, KeyspaceConfig, LeaseOptions, Level, MeteorOptions, Protocol, ProtocolConfig, ProtocolKnobs,
    QueryNode, QuorumOptions, ReplicaKind, Stamps, Theta, UpdateMode, WriteMode, LEASE_MIN_MS,
};
pub use kv::{
    Admin, Condition, Deadline, ErrorKind, ExpireWhen, KeyExpiry, KeyspaceRef, Limits, NodeToAdd, OverLimit, Read,
    Reply, Request, Scan, ScanWant, Scanned, Ttl, UserChange, Write, WriteOp, SCAN_COUNT_MAX, SCAN_REPLY_BYTES,
};
pub use location::Location;
pub use placement::Placement;
pub use process::{write_taken, Dirt, Effect, Effects, Process, SyncJob};
pub use stored::{Kind, Stored, Unreadable};
pub use time::Time;
pub use violation::Violation;
