//! What a keyspace is configured with (seed 003 §5.3, Flex-KV's four knobs): its chain, replica by replica
//! (replication factor and replica types), when writes are acknowledged (update mode) and who answers reads
//! (query node). The manager keeps every keyspace's configuration in the cluster map; each
//! keyspace gets its own chains and, on every node, its own datastores.

use crate::placement::{Placement, PlacementError};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The keyspace every cluster starts with: keyspace id 0, the one clients use until they choose another.
pub const DEFAULT_KEYSPACE: &str = "default";
/// Keyspaces a cluster may have at once, `default` included.
pub const KEYSPACES_MAX: usize = 256;
/// Longest keyspace name, in bytes.
pub const NAME_MAX: usize = 64;
/// Longest chain a keyspace may ask for.
pub const REPLICAS_MAX: usize = 7;

/// A name that is not one of a knob's values; the message lists the ones it takes.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown {knob} {given:?}; expected one of {expected}")]
pub struct UnknownName {
    knob: &'static str,
    given: String,
    expected: String,
}

impl UnknownName {
    /// `given` is not one of the names `expected` that `knob` takes.
    pub fn new(knob: &'static str, given: &str, expected: &[&str]) -> UnknownName {
        UnknownName { knob, given: given.into(), expected: expected.join(", ") }
    }
}

/// Why a keyspace's name or configuration was refused.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyspaceError {
    #[error("invalid keyspace name {0:?}: use 1 to {NAME_MAX} ASCII letters, digits, '_', '-' or '.'")]
    Name(String),
    #[error("a keyspace needs 1 to {REPLICAS_MAX} replicas, not {0}")]
    Replicas(usize),
    #[error("a cache keyspace's maxmemory must be more than 0 bytes")]
    NoMemory,
    #[error(transparent)]
    Placement(#[from] PlacementError),
    #[error("{knob} is not an option of protocol {protocol}")]
    NotForProtocol { knob: &'static str, protocol: Protocol },
    #[error("a {protocol} keyspace keeps log replicas (a replica that forgets its writes on restart would leave a majority without them), not {kind}")]
    MajorityReplica { protocol: Protocol, kind: ReplicaKind },
    #[error(
        "a lease keyspace needs --regions (or --placement): each region it names holds a replica, the first its master"
    )]
    LeaseWithoutRegions,
    #[error("a lease of {0} ms is shorter than the least a lease keyspace grants, {LEASE_MIN_MS} ms")]
    LeaseTooShort(u32),
    #[error("a meteor keyspace needs at least {METEOR_REPLICAS_MIN} replicas (a majority that survives one failure), not {0}")]
    MeteorTooFewReplicas(usize),
    #[error("a meteor keyspace's status interval must be at least 1 ms")]
    MeteorIntervalZero,
    #[error("a meteor keyspace's status redundancy must be 1 to {METEOR_REDUNDANCY_MAX} statuses, not {0}")]
    MeteorRedundancy(u32),
    #[error("--unsafe forces a fixed --theta-ms above its measured bound; θt {0} needs no forcing")]
    MeteorUnsafeWithoutFixedTheta(Theta),
    #[error("consistency level {level} is more than the keyspace's {replicas} replicas")]
    LevelAbove { level: Level, replicas: usize },
    #[error(transparent)]
    Knob(#[from] UnknownName),
}

/// A knob's values with their names: `name()`, `ALL`, `Display` and `FromStr` (which lists the names it takes).
macro_rules! named {
    ($(#[$meta:meta])* $ty:ident ($label:literal) { $($(#[$vmeta:meta])* $variant:ident = $name:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "lowercase")]
        pub enum $ty {
            $($(#[$vmeta])* $variant,)+
        }

        impl $ty {
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $ty {
            type Err = UnknownName;

            fn from_str(s: &str) -> Result<Self, UnknownName> {
                $ty::ALL.iter().copied().find(|k| k.name() == s).ok_or_else(|| {
                    let names: Vec<&str> = $ty::ALL.iter().map(|k| k.name()).collect();
                    UnknownName::new($label, s, &names)
                })
            }
        }
    };
}

named! {
    /// The datastore a replica keeps its data in (seed 003 §5.3, "replica types").
    ReplicaKind("replica type") {
        /// `mem`: memory only (the seed's "M"); a restart loses it.
        Mem = "mem",
        /// `log`: FAWN-DS, the durable append-only log with an in-memory index (the seed's "D").
        Log = "log",
        /// `buffered`: memory over a log written a batch at a time (the seed's "M_b…D"); a crash loses the
        /// batch not yet on disk.
        Buffered = "buffered",
    }
}

impl ReplicaKind {
    /// Whether a replica of this kind is whole after its node restarts: only a log fsynced before every
    /// acknowledgement is. A replica of another kind may miss writes it acknowledged, so after a restart it is
    /// not trusted until copied again (or, if no replica of its chain is whole, kept as the best there is).
    pub fn survives_restart(self) -> bool {
        matches!(self, ReplicaKind::Log)
    }
}

named! {
    /// When a write is acknowledged (seed 003 §5.3, "update plumbing").
    UpdateMode("update mode") {
        /// `su`: once every replica has it (the tail committed it): chain replication.
        Su = "su",
        /// `au`: once the primary (the head) has logged it; the other replicas get it afterwards.
        Au = "au",
        /// `ausi`: once the head has logged it and every other replica holds an invalidation of its key in
        /// memory; the other replicas get the write afterwards and meanwhile send reads of the key to the head.
        Ausi = "ausi",
    }
}

named! {
    /// Which member of a chain answers reads (seed 003 §5.3, "query node").
    QueryNode("query node") {
        /// `tail`: the last member, which holds only committed writes.
        Tail = "tail",
        /// `mid`: the middle member (the head of a chain of one or two).
        Mid = "mid",
        /// `head`: the first member, which has every write first.
        Head = "head",
    }
}

named! {
    /// When a keyspace's writes are fsynced relative to their acknowledgement (docs/durability.md). Declared
    /// from the laxest to the strictest, so the strictest of several is their maximum.
    DurabilityMode("durability mode") {
        /// `async`: acknowledged once handed to the OS; fsynced within the node's async interval. A process
        /// crash loses nothing, a power loss up to one interval.
        Async = "async",
        /// `group`: acknowledged after the fsync that ends its batch (group commit).
        Group = "group",
        /// `sync`: acknowledged after an fsync of its own.
        Sync = "sync",
    }
}

named! {
    /// How a keyspace's replicas agree on its writes (docs/keyspaces.md, docs/protocols/).
    Protocol("protocol") {
        /// `chain`: chain replication (FAWN-KV, seed 003), with the update modes and query nodes above.
        Chain = "chain",
        /// `quorum`: leaderless quorums (Cassandra's consistency levels; ABD with quorum timestamps).
        Quorum = "quorum",
        /// `lease`: GlobLease (seed 001 §4.1): a master per key, leases that let every region read locally.
        Lease = "lease",
        /// `meteor`: MeteorShower (seed 001 §4.2): majority quorums whose reads are answered from the status
        /// messages replicas push to each other, without a round trip of their own.
        Meteor = "meteor",
    }
}

impl Protocol {
    /// Whether the planner brings a replacement in before it lets a failed member go: a protocol that counts
    /// majorities (dropping a replica could leave a written value on fewer than it needs), unlike a chain,
    /// which repairs around a failed member first.
    pub fn replaces_before_removing(self) -> bool {
        matches!(self, Protocol::Quorum | Protocol::Lease | Protocol::Meteor)
    }
}

named! {
    /// How a lease keyspace's master updates the other replicas on a write (seed 001 §4.1.3).
    WriteMode("write mode") {
        /// `active`: the value and a lease go to every replica; the write succeeds once a majority that includes
        /// every replica still holding a lease has it.
        Active = "active",
        /// `passive`: while no replica holds a lease of the key, the master writes locally and answers at once,
        /// updating the others in the background (a master that fails before they have it loses the write).
        Passive = "passive",
    }
}

named! {
    /// How a quorum keyspace stamps its writes' versions (docs/protocols/quorum.md).
    Stamps("timestamps") {
        /// `clock`: the coordinator's wall clock, one round trip; a clock ahead lets an older write win.
        Clock = "clock",
        /// `quorum`: the next after the highest a read quorum holds (ABD); reads write back what they return.
        Quorum = "quorum",
    }
}

/// How many of a quorum keyspace's N replicas an operation waits for: Cassandra's consistency levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    One,
    /// A majority: N / 2 + 1.
    Quorum,
    All,
    /// K replicas (at most N).
    Count(u8),
}

impl Level {
    /// The replies to wait for among `n` replicas (at least one, at most `n`).
    pub fn of(self, n: usize) -> usize {
        let k = match self {
            Level::One => 1,
            Level::Quorum => n / 2 + 1,
            Level::All => n,
            Level::Count(k) => usize::from(k),
        };
        k.clamp(1, n.max(1))
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Level::One => f.write_str("one"),
            Level::Quorum => f.write_str("quorum"),
            Level::All => f.write_str("all"),
            Level::Count(k) => write!(f, "{k}"),
        }
    }
}

impl FromStr for Level {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<Self, UnknownName> {
        match s {
            "one" => Ok(Level::One),
            "quorum" => Ok(Level::Quorum),
            "all" => Ok(Level::All),
            k => match k.parse::<u8>() {
                Ok(k) if (1..=REPLICAS_MAX as u8).contains(&k) => Ok(Level::Count(k)),
                _ => Err(UnknownName {
                    knob: "consistency level",
                    given: s.into(),
                    expected: format!("one, quorum, all, 1 to {REPLICAS_MAX}"),
                }),
            },
        }
    }
}

/// A quorum keyspace's knobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumOptions {
    pub read: Level,
    pub write: Level,
    pub timestamps: Stamps,
}

impl Default for QuorumOptions {
    fn default() -> Self {
        QuorumOptions { read: Level::Quorum, write: Level::Quorum, timestamps: Stamps::Quorum }
    }
}

impl QuorumOptions {
    /// Whether every read quorum meets every write quorum among `n` replicas (R + W > N), which ABD needs to be
    /// linearizable and clock stamps need to never read stale without clock faults.
    pub fn intersecting(&self, n: usize) -> bool {
        self.read.of(n) + self.write.of(n) > n
    }
}

/// Shortest lease a lease keyspace may grant, in milliseconds: a renewal costs a round trip to the master, so
/// a lease much shorter than a WAN round trip would be spent before it is used.
pub const LEASE_MIN_MS: u32 = 100;

/// A lease keyspace's knobs. Its master region is its placement's home region (the first of `--regions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseOptions {
    /// How long a lease lets a replica answer reads of a key without asking the master.
    pub lease_ms: u32,
    pub write_mode: WriteMode,
}

impl Default for LeaseOptions {
    fn default() -> Self {
        LeaseOptions { lease_ms: 60_000, write_mode: WriteMode::Active }
    }
}

/// Fewest replicas a meteor keyspace keeps.
pub const METEOR_REPLICAS_MIN: usize = 3;
/// Most statuses a change rides in before it is left to the receiver's acknowledgement.
pub const METEOR_REDUNDANCY_MAX: u32 = 8;

/// θt, how old a status a read may count (seed 001 §4.2.2, "Summary of θt"): 0 counts only statuses sent after
/// the read arrived (MeteorShower1); `auto` the largest θt its replicas' measured round trips make safe
/// (MeteorShower2); a fixed N at most N, and no more than that bound unless the keyspace is `unsafe`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Theta {
    Fixed(u32),
    Auto,
}

impl fmt::Display for Theta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Theta::Fixed(ms) => write!(f, "{ms}"),
            Theta::Auto => f.write_str("auto"),
        }
    }
}

impl FromStr for Theta {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<Self, UnknownName> {
        match s {
            "auto" => Ok(Theta::Auto),
            ms => ms.parse().map(Theta::Fixed).map_err(|_| UnknownName {
                knob: "θt",
                given: s.into(),
                expected: "auto, 0 (MeteorShower1) or milliseconds".into(),
            }),
        }
    }
}

/// A meteor keyspace's knobs (docs/protocols/meteor.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeteorOptions {
    /// How often a replica tells each other replica which versions it took since (the seed's dispatchInterval).
    pub status_interval_ms: u32,
    /// ε: how far apart any two nodes' wall clocks may be. A read counts a status only if it was sent after the
    /// read arrived, less θt, by more than this, so clocks that stay within it never let a read count an older
    /// status.
    pub clock_bound_ms: u32,
    pub theta: Theta,
    /// How many statuses in a row carry a change before it is left to the receiver's acknowledgement (the seed's
    /// repeated messages against loss): a status lost now and then then costs nothing.
    pub redundancy: u32,
    /// A fixed θt is applied even above the bound measured round trips make safe: reads may then miss their own
    /// writes.
    pub unsafe_theta: bool,
}

impl Default for MeteorOptions {
    fn default() -> Self {
        MeteorOptions {
            status_interval_ms: 10,
            clock_bound_ms: 10,
            theta: Theta::Fixed(0),
            redundancy: 2,
            unsafe_theta: false,
        }
    }
}

impl MeteorOptions {
    /// How a meteor keyspace's writes go: to every replica, stamped by the coordinator's clock, acknowledged by
    /// a majority (its reads are its own).
    pub const QUORUMS: QuorumOptions =
        QuorumOptions { read: Level::Quorum, write: Level::Quorum, timestamps: Stamps::Clock };
}

/// The protocol knobs `keyspace create` and `sim` take by name, each None when not given.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProtocolKnobs<'a> {
    pub read: Option<&'a str>,
    pub write: Option<&'a str>,
    pub timestamps: Option<&'a str>,
    pub lease_ms: Option<u32>,
    pub write_mode: Option<&'a str>,
    pub status_interval_ms: Option<u32>,
    pub clock_bound_ms: Option<u32>,
    pub theta: Option<&'a str>,
    pub redundancy: Option<u32>,
    pub unsafe_theta: bool,
}

/// A keyspace's protocol with its own knobs. Chain replication keeps its knobs (`update`, `read_from`) in the
/// keyspace config beside it, where they have always been; the encoding of `Chain` is that of the protocol name
/// alone, so maps written before quorum keyspaces existed read as they are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProtocolConfig {
    #[default]
    Chain,
    Quorum(QuorumOptions),
    Lease(LeaseOptions),
    Meteor(MeteorOptions),
}

impl ProtocolConfig {
    pub fn protocol(&self) -> Protocol {
        match self {
            ProtocolConfig::Chain => Protocol::Chain,
            ProtocolConfig::Quorum(_) => Protocol::Quorum,
            ProtocolConfig::Lease(_) => Protocol::Lease,
            ProtocolConfig::Meteor(_) => Protocol::Meteor,
        }
    }

    /// The knobs of `protocol` at their defaults.
    pub fn default_for(protocol: Protocol) -> ProtocolConfig {
        match protocol {
            Protocol::Chain => ProtocolConfig::Chain,
            Protocol::Quorum => ProtocolConfig::Quorum(QuorumOptions::default()),
            Protocol::Lease => ProtocolConfig::Lease(LeaseOptions::default()),
            Protocol::Meteor => ProtocolConfig::Meteor(MeteorOptions::default()),
        }
    }

    /// `protocol` with the knobs given by name (the defaults for those not given), as `keyspace create` and
    /// `sim` take them: `read`/`write` consistency levels and `timestamps` for a quorum keyspace, `lease_ms` and
    /// `write_mode` for a lease keyspace. A knob of another protocol is refused.
    pub fn from_options(protocol: Protocol, k: &ProtocolKnobs) -> Result<ProtocolConfig, KeyspaceError> {
        let given = [
            ("--read-quorum", k.read.is_some(), Protocol::Quorum),
            ("--write-quorum", k.write.is_some(), Protocol::Quorum),
            ("--timestamps", k.timestamps.is_some(), Protocol::Quorum),
            ("--lease-ms", k.lease_ms.is_some(), Protocol::Lease),
            ("--write-mode", k.write_mode.is_some(), Protocol::Lease),
            ("--status-interval-ms", k.status_interval_ms.is_some(), Protocol::Meteor),
            ("--clock-bound-ms", k.clock_bound_ms.is_some(), Protocol::Meteor),
            ("--theta-ms", k.theta.is_some(), Protocol::Meteor),
            ("--redundancy", k.redundancy.is_some(), Protocol::Meteor),
            ("--unsafe", k.unsafe_theta, Protocol::Meteor),
        ];
        if let Some((knob, ..)) = given.into_iter().find(|&(_, set, owner)| set && owner != protocol) {
            return Err(KeyspaceError::NotForProtocol { knob, protocol });
        }
        match ProtocolConfig::default_for(protocol) {
            ProtocolConfig::Quorum(q) => Ok(ProtocolConfig::Quorum(QuorumOptions {
                read: k.read.map_or(Ok(q.read), str::parse)?,
                write: k.write.map_or(Ok(q.write), str::parse)?,
                timestamps: k.timestamps.map_or(Ok(q.timestamps), str::parse)?,
            })),
            ProtocolConfig::Lease(l) => Ok(ProtocolConfig::Lease(LeaseOptions {
                lease_ms: k.lease_ms.unwrap_or(l.lease_ms),
                write_mode: k.write_mode.map_or(Ok(l.write_mode), str::parse)?,
            })),
            ProtocolConfig::Meteor(m) => Ok(ProtocolConfig::Meteor(MeteorOptions {
                status_interval_ms: k.status_interval_ms.unwrap_or(m.status_interval_ms),
                clock_bound_ms: k.clock_bound_ms.unwrap_or(m.clock_bound_ms),
                theta: k.theta.map_or(Ok(m.theta), str::parse)?,
                redundancy: k.redundancy.unwrap_or(m.redundancy),
                unsafe_theta: k.unsafe_theta,
            })),
            chain => Ok(chain),
        }
    }

    /// The quorum knobs, for a quorum keyspace, and the quorums a meteor keyspace's writes use.
    pub fn quorum(&self) -> Option<&QuorumOptions> {
        match self {
            ProtocolConfig::Quorum(q) => Some(q),
            ProtocolConfig::Meteor(_) => Some(&MeteorOptions::QUORUMS),
            ProtocolConfig::Chain | ProtocolConfig::Lease(_) => None,
        }
    }

    /// The knobs as `keyspace create` and `sim` take them, each with a leading space (none for a chain).
    pub fn as_args(&self) -> String {
        match self {
            ProtocolConfig::Chain => String::new(),
            ProtocolConfig::Quorum(q) => {
                format!(" --read-quorum {} --write-quorum {} --timestamps {}", q.read, q.write, q.timestamps)
            }
            ProtocolConfig::Lease(l) => format!(" --lease-ms {} --write-mode {}", l.lease_ms, l.write_mode),
            ProtocolConfig::Meteor(m) => format!(
                " --status-interval-ms {} --clock-bound-ms {} --theta-ms {} --redundancy {}{}",
                m.status_interval_ms,
                m.clock_bound_ms,
                m.theta,
                m.redundancy,
                if m.unsafe_theta { " --unsafe" } else { "" }
            ),
        }
    }

    /// The meteor knobs, for a meteor keyspace.
    pub fn meteor(&self) -> Option<&MeteorOptions> {
        match self {
            ProtocolConfig::Meteor(m) => Some(m),
            _ => None,
        }
    }

    /// The lease knobs, for a lease keyspace.
    pub fn lease(&self) -> Option<&LeaseOptions> {
        match self {
            ProtocolConfig::Lease(l) => Some(l),
            ProtocolConfig::Chain | ProtocolConfig::Quorum(_) | ProtocolConfig::Meteor(_) => None,
        }
    }
}

// By hand: `named!` derives the same traits for every knob, and only this one has a default.
#[allow(clippy::derivable_impls)]
impl Default for Protocol {
    fn default() -> Self {
        Protocol::Chain
    }
}

impl QueryNode {
    /// The position of the query node in a chain of `len` members (`len` ≥ 1).
    pub fn position(self, len: usize) -> usize {
        match self {
            QueryNode::Tail => len - 1,
            QueryNode::Mid => (len - 1) / 2,
            QueryNode::Head => 0,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyspaceConfig {
    /// One entry per replica of each chain, head first: the keyspace's replication factor is its length.
    pub replicas: Vec<ReplicaKind>,
    pub update: UpdateMode,
    pub read_from: QueryNode,
    /// A cache keyspace's cap: the memory each node may hold of it, counted as its keys' and values' bytes plus a
    /// fixed overhead per key; chains' heads evict the least recently written keys to stay within it
    /// (docs/keyspaces.md, "Cache mode"). None: the keyspace never evicts.
    pub maxmemory: Option<u64>,
    /// When the keyspace's writes are fsynced. None: each node's own `--durability`.
    pub durability: Option<DurabilityMode>,
    #[serde(default)]
    pub protocol: ProtocolConfig,
    /// Where the replicas run: regions and counts, or a spread over regions, zones and racks.
    #[serde(default)]
    pub placement: Placement,
}

impl KeyspaceConfig {
    /// A chain of `replication` log replicas: FAWN-KV's durable, strongly consistent store.
    pub fn durable(replication: usize) -> KeyspaceConfig {
        KeyspaceConfig::with_replicas(vec![ReplicaKind::Log; replication])
    }

    /// Chain replication (`su`, reads at the tail) over these replicas.
    pub fn with_replicas(replicas: Vec<ReplicaKind>) -> KeyspaceConfig {
        KeyspaceConfig {
            replicas,
            update: UpdateMode::Su,
            read_from: QueryNode::Tail,
            maxmemory: None,
            durability: None,
            protocol: ProtocolConfig::Chain,
            placement: Placement::default(),
        }
    }

    /// R: how many replicas each chain of the keyspace keeps (fewer while the cluster has fewer nodes).
    pub fn replication(&self) -> usize {
        self.replicas.len()
    }

    /// Parses a comma-separated replica list, head first: `log,log,log`.
    pub fn parse_replicas(list: &str) -> Result<Vec<ReplicaKind>, UnknownName> {
        list.split(',').map(|s| s.trim().parse()).collect()
    }

    pub fn validate(&self) -> Result<(), KeyspaceError> {
        if !(1..=REPLICAS_MAX).contains(&self.replicas.len()) {
            return Err(KeyspaceError::Replicas(self.replicas.len()));
        }
        if self.maxmemory == Some(0) {
            return Err(KeyspaceError::NoMemory);
        }
        match &self.protocol {
            ProtocolConfig::Quorum(q) => self.validate_quorum(q)?,
            ProtocolConfig::Lease(l) => self.validate_lease(l)?,
            ProtocolConfig::Meteor(m) => self.validate_meteor(m)?,
            ProtocolConfig::Chain => {}
        }
        Ok(self.placement.validate(self.replicas.len())?)
    }

    fn validate_quorum(&self, q: &QuorumOptions) -> Result<(), KeyspaceError> {
        self.validate_majorities(Protocol::Quorum)?;
        let replicas = self.replicas.len();
        for level in [q.read, q.write] {
            if matches!(level, Level::Count(k) if usize::from(k) > replicas) {
                return Err(KeyspaceError::LevelAbove { level, replicas });
            }
        }
        Ok(())
    }

    /// What a protocol that counts majorities asks of a keyspace: none of the chain's knobs, and only `log`
    /// replicas (a replica that forgets its writes on restart would leave a majority without them).
    fn validate_majorities(&self, protocol: Protocol) -> Result<(), KeyspaceError> {
        let chain_only = [
            ("--update", self.update != UpdateMode::Su),
            ("--read-from", self.read_from != QueryNode::Tail),
            ("--maxmemory", self.maxmemory.is_some()),
        ];
        if let Some(&(knob, _)) = chain_only.iter().find(|(_, set)| *set) {
            return Err(KeyspaceError::NotForProtocol { knob, protocol });
        }
        match self.replicas.iter().find(|&&k| k != ReplicaKind::Log) {
            Some(&kind) => Err(KeyspaceError::MajorityReplica { protocol, kind }),
            None => Ok(()),
        }
    }

    /// A lease keyspace has a replica in each region it names, the first its master region.
    fn validate_lease(&self, l: &LeaseOptions) -> Result<(), KeyspaceError> {
        self.validate_majorities(Protocol::Lease)?;
        if self.placement.regions.is_empty() {
            return Err(KeyspaceError::LeaseWithoutRegions);
        }
        if l.lease_ms < LEASE_MIN_MS {
            return Err(KeyspaceError::LeaseTooShort(l.lease_ms));
        }
        Ok(())
    }

    /// A meteor keyspace's reads need a majority of replicas that still stands after one fails.
    fn validate_meteor(&self, m: &MeteorOptions) -> Result<(), KeyspaceError> {
        self.validate_majorities(Protocol::Meteor)?;
        if self.replicas.len() < METEOR_REPLICAS_MIN {
            return Err(KeyspaceError::MeteorTooFewReplicas(self.replicas.len()));
        }
        if m.status_interval_ms == 0 {
            return Err(KeyspaceError::MeteorIntervalZero);
        }
        if !(1..=METEOR_REDUNDANCY_MAX).contains(&m.redundancy) {
            return Err(KeyspaceError::MeteorRedundancy(m.redundancy));
        }
        if m.unsafe_theta && matches!(m.theta, Theta::Auto | Theta::Fixed(0)) {
            return Err(KeyspaceError::MeteorUnsafeWithoutFixedTheta(m.theta));
        }
        Ok(())
    }

    /// The replica list as `--replicas` takes it.
    pub fn replicas_text(&self) -> String {
        self.replicas.iter().map(|r| r.name()).collect::<Vec<_>>().join(",")
    }
}

/// n, for a keyspace named `db<n>` (Redis' database n, which `SELECT n` makes) with n written as Redis writes
/// it: no sign, no leading zero.
pub fn database_number(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("db")?;
    let canonical = digits == "0" || digits.starts_with(|c: char| ('1'..='9').contains(&c));
    (canonical && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok()).flatten()
}

/// Checks a keyspace name: 1 to [`NAME_MAX`] bytes of ASCII letters, digits, `_`, `-` and `.`.
pub fn validate_name(name: &str) -> Result<(), KeyspaceError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if name.is_empty() || name.len() > NAME_MAX || !name.chars().all(allowed) {
        return Err(KeyspaceError::Name(name.into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consistency_levels_parse_and_count_replicas() {
        let of = |l: &str, n| l.parse::<Level>().unwrap().of(n);
        assert_eq!((of("one", 3), of("quorum", 3), of("all", 3), of("2", 3)), (1, 2, 3, 2));
        assert_eq!((of("quorum", 4), of("quorum", 5), of("3", 2)), (3, 3, 2), "a count is at most N");
        assert!("0".parse::<Level>().is_err() && "most".parse::<Level>().is_err());
        let q = |r, w| QuorumOptions { read: r, write: w, timestamps: Stamps::Quorum };
        assert!(q(Level::Quorum, Level::Quorum).intersecting(3) && q(Level::One, Level::All).intersecting(3));
        assert!(!q(Level::One, Level::Quorum).intersecting(3), "1 + 2 meets nothing new among 3");
    }

    #[test]
    fn protocol_options_belong_to_their_protocol() {
        let knobs = ProtocolKnobs { read: Some("one"), timestamps: Some("clock"), ..ProtocolKnobs::default() };
        let quorum = ProtocolConfig::from_options(Protocol::Quorum, &knobs).unwrap();
        let expected = QuorumOptions { read: Level::One, write: Level::Quorum, timestamps: Stamps::Clock };
        assert_eq!(quorum, ProtocolConfig::Quorum(expected));
        let none = ProtocolKnobs::default();
        assert_eq!(ProtocolConfig::from_options(Protocol::Chain, &none).unwrap(), ProtocolConfig::Chain);
        let write_all = ProtocolKnobs { write: Some("all"), ..none };
        let err = ProtocolConfig::from_options(Protocol::Chain, &write_all).unwrap_err();
        assert_eq!(err.to_string(), "--write-quorum is not an option of protocol chain");
        let config = KeyspaceConfig { protocol: quorum, ..KeyspaceConfig::with_replicas(vec![ReplicaKind::Log; 2]) };
        assert!(config.validate().is_ok());
        let mem = KeyspaceConfig { replicas: vec![ReplicaKind::Mem], ..config.clone() };
        assert!(mem.validate().unwrap_err().to_string().contains("keeps log replicas"));
        let au = KeyspaceConfig { update: UpdateMode::Au, ..config.clone() };
        assert_eq!(au.validate().unwrap_err().to_string(), "--update is not an option of protocol quorum");
        let four = ProtocolConfig::Quorum(QuorumOptions { read: Level::Count(4), ..expected });
        let above = KeyspaceConfig { protocol: four, ..config };
        assert!(above.validate().unwrap_err().to_string().contains("more than the keyspace's 2 replicas"));
    }

    #[test]
    fn a_lease_keyspace_names_its_regions_and_a_lease_long_enough() {
        let knobs = ProtocolKnobs { lease_ms: Some(5_000), write_mode: Some("passive"), ..ProtocolKnobs::default() };
        let lease = ProtocolConfig::from_options(Protocol::Lease, &knobs).unwrap();
        assert_eq!(lease.lease(), Some(&LeaseOptions { lease_ms: 5_000, write_mode: WriteMode::Passive }));
        let quorum_knob = ProtocolKnobs { read: Some("one"), ..knobs };
        let err = ProtocolConfig::from_options(Protocol::Lease, &quorum_knob).unwrap_err();
        assert_eq!(err.to_string(), "--read-quorum is not an option of protocol lease");
        let err = ProtocolConfig::from_options(Protocol::Quorum, &knobs).unwrap_err();
        assert_eq!(err.to_string(), "--lease-ms is not an option of protocol quorum");
        let unplaced = KeyspaceConfig { protocol: lease, ..KeyspaceConfig::durable(3) };
        assert_eq!(unplaced.validate(), Err(KeyspaceError::LeaseWithoutRegions));
        let placement = Placement::one_in_each("va,or,ir").unwrap();
        let placed = KeyspaceConfig { placement, ..unplaced };
        assert_eq!(placed.validate(), Ok(()));
        let short = ProtocolConfig::Lease(LeaseOptions { lease_ms: LEASE_MIN_MS - 1, ..LeaseOptions::default() });
        let short = KeyspaceConfig { protocol: short, ..placed };
        assert_eq!(short.validate(), Err(KeyspaceError::LeaseTooShort(LEASE_MIN_MS - 1)));
    }

    #[test]
    fn meteor_knobs_parse_print_and_refuse_what_cannot_work() {
        let knobs = |theta, unsafe_theta| ProtocolKnobs { theta, unsafe_theta, ..ProtocolKnobs::default() };
        let meteor = |k: &ProtocolKnobs| ProtocolConfig::from_options(Protocol::Meteor, k);
        let config = |p| KeyspaceConfig { protocol: p, ..KeyspaceConfig::durable(3) };
        let auto = meteor(&knobs(Some("auto"), false)).unwrap();
        assert_eq!(auto.meteor().map(|m| m.theta), Some(Theta::Auto));
        assert!(auto.as_args().ends_with(" --theta-ms auto --redundancy 2"), "{}", auto.as_args());
        let none = ProtocolKnobs { redundancy: Some(0), ..ProtocolKnobs::default() };
        assert_eq!(config(meteor(&none).unwrap()).validate(), Err(KeyspaceError::MeteorRedundancy(0)));
        let forced = meteor(&knobs(Some("40"), true)).unwrap();
        assert!(forced.as_args().ends_with(" --theta-ms 40 --redundancy 2 --unsafe"), "{}", forced.as_args());
        assert_eq!(config(forced).validate(), Ok(()));
        let pointless = meteor(&knobs(Some("auto"), true)).unwrap();
        assert_eq!(config(pointless).validate(), Err(KeyspaceError::MeteorUnsafeWithoutFixedTheta(Theta::Auto)));
        let wrong = meteor(&knobs(Some("soon"), false)).unwrap_err().to_string();
        assert!(wrong.contains("expected one of auto, 0 (MeteorShower1) or milliseconds"), "{wrong}");
        let chain = ProtocolConfig::from_options(Protocol::Chain, &knobs(Some("5"), false));
        assert_eq!(chain, Err(KeyspaceError::NotForProtocol { knob: "--theta-ms", protocol: Protocol::Chain }));
    }

    #[test]
    fn replica_lists_parse_and_print() {
        let config = KeyspaceConfig::with_replicas(KeyspaceConfig::parse_replicas("mem, log,buffered").unwrap());
        assert_eq!((config.replication(), config.replicas_text()), (3, "mem,log,buffered".to_string()));
        assert!(KeyspaceConfig::parse_replicas("log,disk")
            .unwrap_err()
            .to_string()
            .contains("unknown replica type \"disk\""));
        assert!(KeyspaceConfig::durable(0).validate().is_err());
        assert!(KeyspaceConfig::durable(REPLICAS_MAX + 1).validate().is_err());
        assert!(KeyspaceConfig::durable(3).validate().is_ok());
    }

    #[test]
    fn names_are_short_and_plain() {
        assert!(validate_name("users_v2.eu-west").is_ok());
        assert_eq!("au".parse::<UpdateMode>(), Ok(UpdateMode::Au));
        let wrong = "middle".parse::<QueryNode>().unwrap_err();
        assert_eq!(wrong.to_string(), "unknown query node \"middle\"; expected one of tail, mid, head");
        assert_eq!([1, 2, 3].map(|n| QueryNode::Mid.position(n)), [0, 0, 1]);
        assert_eq!(DurabilityMode::Async.max(DurabilityMode::Sync).max(DurabilityMode::Group), DurabilityMode::Sync);
        for bad in ["", "a b", "ключ", &"x".repeat(NAME_MAX + 1)] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
    }
}
