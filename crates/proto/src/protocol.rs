//! The contract between the node and a keyspace's replication protocol: every protocol is a sans-IO core behind
//! [`KeyspaceProtocol`], chosen per keyspace by its config, and the node dispatches each keyspace's requests,
//! and each protocol's messages and timers, to it (`node/protocols.rs`, the registry). ARCHITECTURE.md,
//! "Protocols are plugs", says what the node owns and what a protocol owns.
//!
//! The node calls a protocol in this order: [`KeyspaceProtocol::open`] once, then any of `adopt`, `on_request`,
//! `on_message`, `on_timer`, `on_tick` and `on_leases`, and `read_at_once` or `write_at_once` whenever the runner asks. Each call
//! is one step: the protocol reads and writes the node's [`Host`] (stores, request table, tick, wall clock) and
//! says what to send, answer and time through its [`Effects`], `after_sync` stating every fsync-before-send rule.
//! One instance serves every keyspace of its protocol on the node; its state is keyed by `ChainId`, which names
//! the keyspace.

use crate::chain::ReplicaStatus;
use crate::host::{Host, Syncs};
use crate::map::ClusterMap;
use crate::reports::ReplicaReports;
use crate::requests::Origin;
use crate::stores::Stores;
use meridian_core::exposition::Latencies;
use meridian_core::{ChainId, Effects, KeyspaceConfig, KeyspaceId, NodeId, Protocol, Reply, Request, Time, Violation};
use meridian_store::StoreError;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::Arc;

/// What a keyspace's protocol promises its clients in a configuration, as the simulator checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Every history is linearizable per key.
    Linearizable,
    /// Reads may be stale; no read returns a value no write wrote. The simulator measures the staleness.
    Staleness,
    /// Per key, one order of the writes that every client's reads follow in its own order, reading its own
    /// writes and never going back (sequential consistency with session guarantees).
    Sequential,
}

/// The requests beyond plain reads, puts and deletes that a keyspace's protocol takes in a configuration; it
/// refuses the others with a clear error, changing nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Conditional and read-modify-write writes (SET NX/XX/GET, INCR, APPEND, hashes, …).
    pub conditional: bool,
    /// Times to live and expiry commands.
    pub expiry: bool,
    /// SCAN and DBSIZE.
    pub scan: bool,
}

/// A protocol's effects: its own messages and timers, which the node wraps into its own.
pub type Fx<P> = Effects<<P as KeyspaceProtocol>::Msg, <P as KeyspaceProtocol>::Timer>;

/// What a node knows of its run before this start, as a protocol judges the replicas it recovers by it.
#[derive(Clone, Copy, Debug)]
pub struct PreviousRun<'a> {
    /// The map the node stored last, if it ran before.
    pub map: Option<&'a ClusterMap>,
    /// The run made every write durable as it stopped (`node/clean_stop.rs`).
    pub clean_stop: bool,
    /// The chains whose replicas it had counted lost and neither left nor had restored (`node/lost_replicas.rs`).
    pub lost: &'a BTreeSet<ChainId>,
}

/// A keyspace replication protocol, as the node runs it.
pub trait KeyspaceProtocol: Sized {
    /// The keyspace configs that name this protocol.
    const PROTOCOL: Protocol;
    type Msg: Clone + Debug + PartialEq + Eq + Serialize + DeserializeOwned;
    type Timer: Clone + Debug + PartialEq + Eq + PartialOrd + Ord;
    /// The node-level knobs (a keyspace's own are in its config).
    type Config: Clone + Debug + Default;

    /// Builds the protocol's state from what the node's datastores hold of its keyspaces.
    fn open(
        me: NodeId,
        cfg: Self::Config,
        stores: &mut Stores,
        incarnation: u64,
        previous: PreviousRun,
    ) -> Result<Self, StoreError>;

    /// A newer cluster map: the protocol's keyspaces, their partitions and who replicates each.
    fn adopt(&mut self, host: &mut Host, map: &Arc<ClusterMap>, now: Time, out: &mut Fx<Self>);

    /// A client request the node accepted for one of the protocol's keyspaces ([`Host::accept`]), tracked in
    /// `host.requests` under `origin`; the protocol answers it there, or from another node to `origin`.
    fn on_request(&mut self, host: &mut Host, now: Time, origin: Origin, req: Request, out: &mut Fx<Self>);

    fn on_message(&mut self, host: &mut Host, now: Time, from: NodeId, msg: Self::Msg, out: &mut Fx<Self>);

    fn on_timer(&mut self, host: &mut Host, now: Time, timer: Self::Timer, out: &mut Fx<Self>);

    /// The protocol's share of the node's housekeeping tick, after the node expired and retried its requests.
    fn on_tick(&mut self, host: &mut Host, now: Time, out: &mut Fx<Self>);

    /// Leases the manager's leader granted this node until `until`, per chain and view.
    fn on_leases(
        &mut self,
        _host: &mut Host,
        _chains: &[(ChainId, u64)],
        _until: Time,
        _now: Time,
        _out: &mut Fx<Self>,
    ) {
    }

    /// The reply to the read `req` within this step, if the protocol can give it without waiting for anything;
    /// otherwise None, for `on_request` (`Process::read_at_once`).
    fn read_at_once(&mut self, _host: &mut Host, _now: Time, _req: &Request) -> Option<Reply> {
        None
    }

    /// The same for any other request, which the protocol takes (leaving None) exactly when it answers
    /// (`Process::write_at_once`).
    fn write_at_once(&mut self, _host: &mut Host, _now: Time, _req: &mut Option<Request>) -> Option<Reply> {
        None
    }

    /// Adds what the manager's leader should hear in the next heartbeat: steps this node finished its part of,
    /// durably (`syncs`), and replicas it lost.
    fn reports(&self, syncs: Syncs, into: &mut ReplicaReports);

    /// The chains whose replicas here are lost: what a restart must count lost again.
    fn lost_chains(&self) -> BTreeSet<ChainId>;

    /// Where this node stands in every partition of the protocol it holds data for or takes part in.
    fn status(&self, stores: &Stores, now: Time) -> Vec<ReplicaStatus>;

    /// The protocol's local invariants, checked by the simulator after every step.
    fn check_invariants(&self) -> Result<(), Violation>;

    /// What the protocol did over this node's life, by name, for the simulator's summary.
    fn counters(&self) -> Vec<(&'static str, u64)>;

    /// Where the protocol stands now, by name (values that go down as well as up), for the node's metrics.
    fn gauges(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// Where the protocol stands now for one keyspace on this node, by name: what `keyspace list` shows beside
    /// the keyspace's configuration (`here`).
    fn keyspace_gauges(&self, _keyspace: KeyspaceId) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// How long the protocol's waits took, by name, for the node's metrics.
    fn latencies(&self) -> Vec<(&'static str, Latencies)> {
        Vec::new()
    }

    /// The kind of a message, for the simulator's traffic counts.
    fn label(msg: &Self::Msg) -> &'static str;

    /// What a keyspace configured so (naming this protocol) promises: what the simulator's `--check auto` checks.
    fn claim(config: &KeyspaceConfig) -> Claim;

    /// What a keyspace configured so takes besides plain reads, puts and deletes.
    fn capabilities(config: &KeyspaceConfig) -> Capabilities;
}
