//! The vocabulary every Meridian crate shares: identifiers, client requests and replies, the sans-IO
//! [`Process`] contract that protocol cores implement, the consistent-hashing [`Ring`], the static
//! [`ClusterConfig`] and the peer [`wire`] codec.

pub mod config;
pub mod ids;
pub mod keyspace;
pub mod kv;
pub mod process;
pub mod ring;
pub mod splitmix;
pub mod time;
pub mod wire;

pub use config::{ClusterConfig, ConfigError, NodeSpec};
pub use ids::{ChainId, KeyspaceId, NodeId, RequestId};
pub use keyspace::{KeyspaceConfig, QueryNode, ReplicaKind, UpdateMode};
pub use kv::{Admin, Condition, ErrorKind, KeyspaceRef, Limits, Reply, Request, Write};
pub use process::{Effect, Effects, Process};
pub use time::Time;
