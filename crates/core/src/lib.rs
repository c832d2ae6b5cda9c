//! The vocabulary every Meridian crate shares: identifiers, client requests and replies, the sans-IO
//! [`Process`] contract that protocol cores implement, the consistent-hashing [`Ring`], the static
//! [`ClusterConfig`] and the peer [`wire`] codec.

pub mod chain_map;
pub mod config;
pub mod exposition;
pub mod glob;
pub mod hash;
pub mod ids;
pub mod keyspace;
pub mod kv;
pub mod process;
pub mod ring;
pub mod size;
pub mod splitmix;
pub mod stored;
pub mod time;
pub mod wire;

pub use chain_map::ChainMap;
pub use config::{ClusterConfig, ConfigError, NodeSpec};
pub use ids::{ChainId, KeyspaceId, NodeId, RequestId};
pub use keyspace::{DurabilityMode, KeyspaceConfig, QueryNode, ReplicaKind, UpdateMode};
pub use kv::{
    Admin, Condition, Deadline, ErrorKind, ExpireWhen, KeyExpiry, KeyspaceRef, Limits, Read, Reply, Request, Scan,
    ScanWant, Scanned, Ttl, Write, WriteOp, SCAN_COUNT_MAX, SCAN_REPLY_BYTES,
};
pub use process::{Dirt, Effect, Effects, Process, SyncJob};
pub use stored::{Kind, Stored};
pub use time::Time;
