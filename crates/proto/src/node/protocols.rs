//! The registry of keyspace protocols: one line per protocol, naming its `meridian_core::Protocol` variant, the
//! field the node keeps its core in, and the type implementing [`KeyspaceProtocol`]. From it come the node's
//! message and timer enums (a protocol's messages travel as its own `NodeMsg` variant, which is the protocol's
//! tag on the wire: no envelope, no second lookup) and [`Protocols`], which dispatches by keyspace, message or
//! timer with a `match` (static dispatch, so a protocol's at-once path inlines into the node's). The `match` on
//! `Protocol` is exhaustive: a variant without a line here does not compile.
//!
//! Order matters twice: variants are numbered on the wire in the order listed (append only), and timers of the
//! same deadline fire in `NodeTimer` order.

use super::NodeFx;
use crate::chain::ReplicaStatus;
use crate::host::{Host, Syncs};
use crate::map::ClusterMap;
use crate::protocol::{Capabilities, Claim, KeyspaceProtocol, PreviousRun};
use crate::reports::ReplicaReports;
use crate::requests::Origin;
use crate::stores::Stores;
use meridian_core::{ChainId, Effects, KeyspaceId, NodeId, Protocol, Reply, Request, Time, Violation};
use meridian_store::StoreError;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Declares the node's message and timer enums and [`Protocols`] from the registry's lines.
macro_rules! protocols {
    ($($variant:ident => $field:ident: $core:ty),+ $(,)?) => {
        /// What nodes send each other: the manager's Raft and agent messages, then each protocol's own.
        #[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        pub enum NodeMsg {
            Raft(crate::manager::raft::RaftMsg),
            Mgr(crate::manager::msg::MgrMsg),
            $($variant(<$core as KeyspaceProtocol>::Msg),)+
        }

        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
        pub enum NodeTimer {
            /// The node's housekeeping: request expiry and retries, then each protocol's own upkeep.
            Tick,
            $($variant(<$core as KeyspaceProtocol>::Timer),)+
            Manager,
        }

        /// Every protocol's node-level knobs.
        #[derive(Clone, Debug, Default)]
        pub struct ProtocolConfigs {
            $(pub $field: <$core as KeyspaceProtocol>::Config,)+
        }

        /// One core per protocol, each serving every keyspace of its protocol on this node.
        pub struct Protocols {
            $(pub $field: Plug<$core>,)+
            /// Which protocol each keyspace of the map runs.
            table: KeyspaceTable,
        }

        impl Protocols {
            pub fn open(
                me: NodeId,
                cfg: ProtocolConfigs,
                stores: &mut Stores,
                incarnation: u64,
                previous: PreviousRun,
            ) -> Result<Protocols, StoreError> {
                Ok(Protocols {
                    $($field: Plug::new(<$core>::open(me, cfg.$field, stores, incarnation, previous)?),)+
                    table: KeyspaceTable::default(),
                })
            }

            pub fn adopt(&mut self, host: &mut Host, map: &Arc<ClusterMap>, now: Time, out: &mut NodeFx) {
                self.table = KeyspaceTable::of(map);
                $(self.$field.step(host, out, NodeMsg::$variant, NodeTimer::$variant, |p, h, fx| p.adopt(h, map, now, fx));)+
            }

            /// Hands an accepted request to its keyspace's protocol, or answers it if the map has no such keyspace.
            pub fn on_request(&mut self, host: &mut Host, now: Time, origin: Origin, req: Request, out: &mut NodeFx) {
                match req.keyspace().and_then(|k| self.table.protocol_of(k)) {
                    $(Some(Protocol::$variant) => {
                        self.$field.step(host, out, NodeMsg::$variant, NodeTimer::$variant, |p, h, fx| p.on_request(h, now, origin, req, fx))
                    })+
                    None => {
                        let keyspace = req.keyspace().expect("a request the node accepted names its keyspace");
                        if let Some((id, refusal)) = host.unknown_keyspace(&origin, keyspace) {
                            out.reply(id, refusal);
                        }
                    }
                }
            }

            /// A protocol's message; the manager's are the node's.
            pub fn on_message(&mut self, host: &mut Host, now: Time, from: NodeId, msg: NodeMsg, out: &mut NodeFx) {
                match msg {
                    $(NodeMsg::$variant(m) => {
                        self.$field.step(host, out, NodeMsg::$variant, NodeTimer::$variant, |p, h, fx| p.on_message(h, now, from, m, fx))
                    })+
                    NodeMsg::Raft(_) | NodeMsg::Mgr(_) => unreachable!("the node handles the manager's messages"),
                }
            }

            /// A protocol's timer; the node's own are the node's.
            pub fn on_timer(&mut self, host: &mut Host, now: Time, timer: NodeTimer, out: &mut NodeFx) {
                match timer {
                    $(NodeTimer::$variant(t) => {
                        self.$field.step(host, out, NodeMsg::$variant, NodeTimer::$variant, |p, h, fx| p.on_timer(h, now, t, fx))
                    })+
                    NodeTimer::Tick | NodeTimer::Manager => unreachable!("the node handles its own timers"),
                }
            }

            pub fn on_tick(&mut self, host: &mut Host, now: Time, out: &mut NodeFx) {
                $(self.$field.step(host, out, NodeMsg::$variant, NodeTimer::$variant, |p, h, fx| p.on_tick(h, now, fx));)+
            }

            pub fn on_leases(&mut self, host: &mut Host, chains: &[(ChainId, u64)], until: Time, now: Time, out: &mut NodeFx) {
                $(self.$field.step(host, out, NodeMsg::$variant, NodeTimer::$variant, |p, h, fx| p.on_leases(h, chains, until, now, fx));)+
            }

            #[inline]
            pub fn read_at_once(&mut self, host: &mut Host, now: Time, req: &Request) -> Option<Reply> {
                match req.keyspace().and_then(|k| self.table.protocol_of(k))? {
                    $(Protocol::$variant => self.$field.core.read_at_once(host, now, req),)+
                }
            }

            #[inline]
            pub fn write_at_once(&mut self, host: &mut Host, now: Time, req: &mut Option<Request>) -> Option<Reply> {
                match req.as_ref()?.keyspace().and_then(|k| self.table.protocol_of(k))? {
                    $(Protocol::$variant => self.$field.core.write_at_once(host, now, req),)+
                }
            }

            pub fn reports(&self, syncs: Syncs, incarnation: u64) -> ReplicaReports {
                let mut reports = ReplicaReports { incarnation, ..ReplicaReports::default() };
                $(self.$field.core.reports(syncs, &mut reports);)+
                reports
            }

            pub fn lost_chains(&self) -> BTreeSet<ChainId> {
                let mut lost = BTreeSet::new();
                $(lost.extend(self.$field.core.lost_chains());)+
                lost
            }

            pub fn status(&self, stores: &Stores, now: Time) -> Vec<ReplicaStatus> {
                let mut status = Vec::new();
                $(status.extend(self.$field.core.status(stores, now));)+
                status.sort_by_key(|s| s.chain);
                status
            }

            pub fn check_invariants(&self) -> Result<(), Violation> {
                $(self.$field.core.check_invariants()?;)+
                Ok(())
            }

            pub fn counters(&self) -> Vec<(&'static str, u64)> {
                let mut counters = Vec::new();
                $(counters.extend(self.$field.core.counters());)+
                counters
            }

            pub fn gauges(&self) -> Vec<(&'static str, u64)> {
                let mut gauges = Vec::new();
                $(gauges.extend(self.$field.core.gauges());)+
                gauges
            }

            pub fn keyspace_gauges(&self, keyspace: meridian_core::KeyspaceId) -> Vec<(&'static str, u64)> {
                let mut gauges = Vec::new();
                $(gauges.extend(self.$field.core.keyspace_gauges(keyspace));)+
                gauges
            }

            pub fn latencies(&self) -> Vec<(&'static str, meridian_core::exposition::Latencies)> {
                let mut latencies = Vec::new();
                $(latencies.extend(self.$field.core.latencies());)+
                latencies
            }

            /// What a keyspace configured so promises, as its protocol says.
            pub fn claim(config: &meridian_core::KeyspaceConfig) -> Claim {
                match config.protocol.protocol() {
                    $(Protocol::$variant => <$core>::claim(config),)+
                }
            }

            /// What a keyspace configured so takes besides plain reads, puts and deletes.
            pub fn capabilities(config: &meridian_core::KeyspaceConfig) -> Capabilities {
                match config.protocol.protocol() {
                    $(Protocol::$variant => <$core>::capabilities(config),)+
                }
            }

            /// The kind of a protocol's message (None for the manager's).
            pub fn label(msg: &NodeMsg) -> Option<&'static str> {
                match msg {
                    $(NodeMsg::$variant(m) => Some(<$core>::label(m)),)+
                    NodeMsg::Raft(_) | NodeMsg::Mgr(_) => None,
                }
            }
        }
    };
}

protocols! {
    Chain => chain: crate::chain::ChainNode,
    Quorum => quorum: crate::quorum::QuorumNode,
    Lease => lease: crate::lease::LeaseNode,
    Meteor => meteor: crate::meteor::MeteorNode,
}

/// A protocol's core, with the collector its effects go into before the node wraps them into its own (kept, so
/// that a step allocates nothing).
pub struct Plug<P: KeyspaceProtocol> {
    pub core: P,
    fx: Effects<P::Msg, P::Timer>,
}

impl<P: KeyspaceProtocol> Plug<P> {
    fn new(core: P) -> Plug<P> {
        Plug { core, fx: Effects::new() }
    }

    /// Runs one step of the core, then moves its effects into the node's, wrapping messages and timers.
    #[inline]
    fn step(
        &mut self,
        host: &mut Host,
        out: &mut NodeFx,
        msg: impl Fn(P::Msg) -> NodeMsg,
        timer: impl Fn(P::Timer) -> NodeTimer,
        f: impl FnOnce(&mut P, &mut Host, &mut Effects<P::Msg, P::Timer>),
    ) {
        f(&mut self.core, host, &mut self.fx);
        out.absorb(&mut self.fx, msg, timer);
    }
}

/// Which protocol each keyspace runs, as the map says. While every keyspace runs the same one (the common case,
/// and the state before any map), a request's protocol costs one compare.
#[derive(Debug)]
struct KeyspaceTable {
    uniform: Option<Protocol>,
    by_keyspace: Vec<(KeyspaceId, Protocol)>,
}

impl Default for KeyspaceTable {
    fn default() -> Self {
        KeyspaceTable { uniform: Some(Protocol::default()), by_keyspace: Vec::new() }
    }
}

impl KeyspaceTable {
    fn of(map: &ClusterMap) -> KeyspaceTable {
        let by_keyspace: Vec<_> = map.keyspaces.iter().map(|(&id, k)| (id, k.config.protocol.protocol())).collect();
        let first = by_keyspace.first().map_or(Protocol::default(), |&(_, p)| p);
        let uniform = by_keyspace.iter().all(|&(_, p)| p == first).then_some(first);
        KeyspaceTable { uniform, by_keyspace }
    }

    /// The protocol of `keyspace`; under a uniform table, that protocol even for a keyspace the map lacks (which
    /// refuses it as unknown).
    #[inline]
    fn protocol_of(&self, keyspace: KeyspaceId) -> Option<Protocol> {
        if let Some(p) = self.uniform {
            return Some(p);
        }
        self.by_keyspace.iter().find(|&&(k, _)| k == keyspace).map(|&(_, p)| p)
    }
}
