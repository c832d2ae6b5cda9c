//! The lock that keeps the encoding versions honest: `meridian_core::wire::WIRE_VERSION` for peer messages, which
//! peers compare on every frame, and [`MAP_FORMAT`] for the map and its commands as nodes store them (the map
//! file, the Raft log), which a node checks as it opens them. A node of another build is refused rather than
//! misread, but only if each version changes whenever its encoding does. These tests encode a sample of every
//! peer message and map command, and a map, and compare checksums of the bytes with what was recorded for the
//! current versions; the samples cover every variant of `ChainMsg`, `MgrMsg` and `MapCommand` (an exhaustive match
//! will not compile without a sample for a new one). A change fails here: bump the version it names, then record
//! the new figures below.

use super::NodeMsg;
use crate::chain::msg::{Answer, CopyData, CopyKind, CopyPart, CopyReq, KeyState, Outcome, Refusal};
use crate::chain::{ChainMsg, Change, Origin, Update};
use crate::lease::msg::{
    Beat, CopyFor as LeaseCopyFor, Extend, Extended, Extension, Fetch as LeaseFetch, Fetched as LeaseFetched,
    Forwarded, Given, Granted, Heartbeat as LeaseHeartbeat, Held, Hot, Pull, Push, Renew, Revocation, Secondary,
};
use crate::lease::{LeaseMsg, OpId as LeaseOpId};
use crate::manager::msg::{Heartbeat, HeartbeatReply, MgrMsg};
use crate::map::{ChainChange, ClusterMap, MapCommand, NodeAddrs, MAP_FORMAT};
use crate::meteor::msg::{Ack, LocalRead, MeteorMsg, Page, Status};
use crate::quorum::msg::{CopyData as QuorumCopyData, CopyReq as QuorumCopyReq};
use crate::quorum::{Fence, OpId, QuorumMsg, ReadReq, Versioned, WriteReq};
use crate::reports::{KeyMove, ReplicaReports, StepReport};
use bytes::Bytes;
use meridian_core::acl::{AclRule, CommandItem, KeyPattern, User};
use meridian_core::wire::WIRE_VERSION;
use meridian_core::{
    ChainId, Condition, Deadline, ErrorKind, ExpireWhen, KeyspaceConfig, KeyspaceId, LeaseOptions, Level, Location,
    MeteorOptions, NodeId, Placement, ProtocolConfig, QuorumOptions, Read, ReplicaKind, Reply, RequestId, Scan,
    ScanWant, Stamps, Theta, Write, WriteMode, WriteOp,
};
use std::time::Duration;

/// The wire version and the checksum of the peer messages' samples it was recorded for; the map format and the
/// checksum of the map's and its commands' samples; the variants of `ChainMsg`, `MgrMsg`, `MapCommand`,
/// `QuorumMsg`, `LeaseMsg` and `MeteorMsg`.
const RECORDED: ((u8, u32), (u8, u32), [usize; 6]) = ((16, 0xa2e0_cbc2), (11, 0xe635_c54a), [14, 9, 21, 8, 21, 11]);

fn origin() -> Origin {
    Origin { node: NodeId(2), incarnation: 7, id: RequestId(9) }
}

fn update(change: Change, answer: Answer) -> Update {
    let outcome = Outcome { applied: true, existed: false, answer };
    let also = vec![(Bytes::from_static(b"k2"), Change::Delete)];
    Update {
        chain: ChainId(4097),
        seq: 12,
        key: Bytes::from_static(b"k"),
        change,
        outcome,
        origin: Some(origin()),
        also,
    }
}

/// One of each `ChainMsg` variant, numbered by an exhaustive match: a new variant does not compile until it has
/// a sample here.
fn chain_messages() -> Vec<ChainMsg> {
    let (chain, view, key) = (ChainId(3), 4, Bytes::from_static(b"key"));
    let write = Write { cond: Condition::IfAbsent, ..Write::new(KeyspaceId(1), key.clone(), WriteOp::Delete) };
    let part = CopyPart::States { since: 1, first: 2, last: 3 };
    let states = vec![KeyState { key: key.clone(), seq: 5, value: Some(Bytes::from_static(b"v")) }];
    let history = vec![update(Change::Skip, Answer::Refused(Refusal::Overflow))];
    let scan = Scan { keyspace: KeyspaceId(0), from: 5, want: ScanWant::Keys(3), pattern: None, kind: None };
    let samples = vec![
        ChainMsg::Get { origin: origin(), view, chain, key: key.clone(), read: Read::Value },
        ChainMsg::Write { origin: origin(), view, chain, write },
        ChainMsg::Update { view, update: update(Change::Put(Bytes::from_static(b"v")), Answer::Integer(3)) },
        ChainMsg::Ack { chain, view, seq: 5 },
        ChainMsg::Sync { chain, view, lu: 6, la: 5 },
        ChainMsg::Probe { chain, view },
        ChainMsg::Reply { origin: origin(), reply: Reply::Error(ErrorKind::Timeout, "t".into()), confirm: None },
        ChainMsg::Confirm { chain, seq: 8 },
        ChainMsg::Bounce { origin: origin(), chain, view },
        ChainMsg::Invalidate { chain, view, seq: 9, key: key.clone(), also: vec![Bytes::from_static(b"k2")] },
        ChainMsg::Invalidated { chain, view, seq: 9 },
        ChainMsg::CopyReq(CopyReq { chain, view, kind: CopyKind::PreCopy { step: 2 }, part }),
        ChainMsg::CopyData(Box::new(CopyData {
            chain,
            view,
            kind: CopyKind::Flush,
            part: CopyPart::History { after: Some(4) },
            states,
            covered: 3,
            history,
            lu: 12,
            la: 11,
        })),
        ChainMsg::Scan { origin: origin(), view, chain, scan },
        ChainMsg::Update { view, update: update(Change::Delete, Answer::Old(None)) },
        ChainMsg::Write {
            origin: origin(),
            view,
            chain,
            write: Write::new(
                KeyspaceId(0),
                key.clone(),
                WriteOp::Expire { deadline: Some(Deadline::At(9)), when: ExpireWhen::XxLt },
            ),
        },
        ChainMsg::Get { origin: origin(), view, chain, key: key.clone(), read: Read::Deadline },
        ChainMsg::Write {
            origin: origin(),
            view,
            chain,
            write: Write::new(KeyspaceId(0), key.clone(), WriteOp::SetRange(3, key.clone())),
        },
        ChainMsg::Update { view, update: update(Change::Skip, Answer::Bulk(Bytes::from_static(b"1.5"))) },
        ChainMsg::Write {
            origin: origin(),
            view,
            chain,
            write: Write::new(KeyspaceId(0), key.clone(), WriteOp::Rename { to: key.clone(), replace: false }),
        },
        ChainMsg::Write {
            origin: origin(),
            view,
            chain,
            write: Write::new(KeyspaceId(0), key.clone(), WriteOp::Copy { to: key.clone(), replace: true }),
        },
        ChainMsg::Write {
            origin: origin(),
            view,
            chain,
            write: Write::new(KeyspaceId(0), key.clone(), WriteOp::SetAllAbsent(vec![(key.clone(), key)])),
        },
        ChainMsg::Update { view, update: update(Change::Skip, Answer::Refused(Refusal::NoSuchKey)) },
        ChainMsg::Reply {
            origin: origin(),
            reply: Reply::Error(ErrorKind::CrossSlot, "c".into()),
            confirm: Some((ChainId(1), 2)),
        },
    ];
    let numbered = |m: &ChainMsg| match m {
        ChainMsg::Get { .. } => 0,
        ChainMsg::Write { .. } => 1,
        ChainMsg::Update { .. } => 2,
        ChainMsg::Ack { .. } => 3,
        ChainMsg::Sync { .. } => 4,
        ChainMsg::Probe { .. } => 5,
        ChainMsg::Reply { .. } => 6,
        ChainMsg::Confirm { .. } => 7,
        ChainMsg::Bounce { .. } => 8,
        ChainMsg::Invalidate { .. } => 9,
        ChainMsg::Invalidated { .. } => 10,
        ChainMsg::CopyReq(_) => 11,
        ChainMsg::CopyData(_) => 12,
        ChainMsg::Scan { .. } => 13,
    };
    assert_covers(samples.iter().map(numbered), RECORDED.2[0] - 1, "ChainMsg");
    samples
}

fn addrs(node: u32) -> NodeAddrs {
    NodeAddrs { peer_addr: format!("p:{node}"), resp_addr: format!("r:{node}"), http_addr: Some(format!("h:{node}")) }
}

/// One of each `MapCommand` variant, as for [`chain_messages`].
fn commands() -> Vec<MapCommand> {
    let (chain, node) = (ChainId(1), NodeId(3));
    let placement = Placement::per_region("eu=1,us=1").unwrap().banning("asia");
    let config =
        KeyspaceConfig { placement, ..KeyspaceConfig::with_replicas(vec![ReplicaKind::Mem, ReplicaKind::Log]) };
    let regions = ["eu", "us", "eu/b"];
    let nodes = (1..=3).map(|i| (NodeId(i), addrs(i), regions[i as usize - 1].parse().unwrap())).collect();
    let location = Location::new("eu", Some("a"), Some("r1")).unwrap();
    let change = ChainChange::Add { node, position: 1, step: 4, inserted: false, kind: ReplicaKind::Buffered };
    let samples = vec![
        MapCommand::Bootstrap {
            nodes,
            default: KeyspaceConfig::durable(3),
            partitions: 4,
            vnodes: 2,
            voters: vec![NodeId(1), NodeId(2)],
        },
        MapCommand::AddNode { id: NodeId(4), addrs: addrs(4), vnodes: 2, location },
        MapCommand::RemoveNode { id: node },
        MapCommand::NodeFailed { id: node },
        MapCommand::NodeRecovered { id: node },
        MapCommand::StepStarted { chain, expected_view: 2, change },
        MapCommand::AddInserted { chain, step: 4 },
        MapCommand::StepDone { chain, step: 4 },
        MapCommand::StepAborted { chain, step: 4 },
        MapCommand::CreateKeyspace { name: "md".into(), config },
        MapCommand::CreateKeyspace { name: "q".into(), config: quorum_keyspace() },
        MapCommand::CreateKeyspace { name: "l".into(), config: lease_keyspace() },
        MapCommand::CreateKeyspace { name: "m".into(), config: meteor_keyspace() },
        MapCommand::DropKeyspace { name: "md".into() },
        MapCommand::ReplicaLost { chain, node, incarnation: 5 },
        MapCommand::ReplicaRestored { chain, node, incarnation: 5 },
        MapCommand::SetMasterRegion { name: "ll".into(), region: "us".into() },
        MapCommand::SetKeyMaster { name: "l".into(), key: "k".into(), region: "us".into() },
        MapCommand::AddAffiliate { id: NodeId(5), addrs: addrs(5), location: "eu".parse().unwrap(), host: NodeId(1) },
        MapCommand::SetUser { name: "alice".into(), base: None, rules: user_rules() },
        MapCommand::SetUser { name: "default".into(), base: Some(User::default_user(None)), rules: vec![AclRule::Off] },
        MapCommand::DelUsers { names: vec!["bob".into()] },
        MapCommand::CreateDatabase { number: 7, config: KeyspaceConfig::durable(2) },
        MapCommand::ManagerMembership { voters: vec![NodeId(1), NodeId(2)], learners: vec![NodeId(3)] },
        MapCommand::WantVoters { voters: vec![NodeId(1), NodeId(2), NodeId(3)] },
    ];
    let numbered = |c: &MapCommand| match c {
        MapCommand::Bootstrap { .. } => 0,
        MapCommand::AddNode { .. } => 1,
        MapCommand::RemoveNode { .. } => 2,
        MapCommand::NodeFailed { .. } => 3,
        MapCommand::NodeRecovered { .. } => 4,
        MapCommand::StepStarted { .. } => 5,
        MapCommand::AddInserted { .. } => 6,
        MapCommand::StepDone { .. } => 7,
        MapCommand::StepAborted { .. } => 8,
        MapCommand::CreateKeyspace { .. } => 9,
        MapCommand::DropKeyspace { .. } => 10,
        MapCommand::ReplicaLost { .. } => 11,
        MapCommand::ReplicaRestored { .. } => 12,
        MapCommand::SetMasterRegion { .. } => 13,
        MapCommand::SetKeyMaster { .. } => 14,
        MapCommand::AddAffiliate { .. } => 15,
        MapCommand::SetUser { .. } => 16,
        MapCommand::DelUsers { .. } => 17,
        MapCommand::CreateDatabase { .. } => 18,
        MapCommand::ManagerMembership { .. } => 19,
        MapCommand::WantVoters { .. } => 20,
    };
    assert_covers(samples.iter().map(numbered), RECORDED.2[2] - 1, "MapCommand");
    samples
}

/// One ACL rule of each kind.
fn user_rules() -> Vec<AclRule> {
    let keys = KeyPattern { pattern: Bytes::from_static(b"k:*"), read: true, write: false };
    let rules = vec![
        AclRule::Reset,
        AclRule::On,
        AclRule::Off,
        AclRule::NoPass,
        AclRule::ResetPass,
        AclRule::AddPassword("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".into()),
        AclRule::RemovePassword("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$b3RoZXI".into()),
        AclRule::NoCommands,
        AclRule::AllCommands,
        AclRule::Allow(CommandItem::Category(1)),
        AclRule::Deny(CommandItem::Command("keys".into())),
        AclRule::ResetKeys,
        AclRule::AddKeys(keys),
        AclRule::ResetKeyspaces,
        AclRule::AddKeyspaces("orders".into()),
        AclRule::On,
    ];
    let numbered = |r: &AclRule| match r {
        AclRule::On => 0,
        AclRule::Off => 1,
        AclRule::NoPass => 2,
        AclRule::ResetPass => 3,
        AclRule::AddPassword(_) => 4,
        AclRule::RemovePassword(_) => 5,
        AclRule::AllCommands => 6,
        AclRule::NoCommands => 7,
        AclRule::Allow(_) => 8,
        AclRule::Deny(_) => 9,
        AclRule::AddKeys(_) => 10,
        AclRule::ResetKeys => 11,
        AclRule::AddKeyspaces(_) => 12,
        AclRule::ResetKeyspaces => 13,
        AclRule::Reset => 14,
    };
    assert_covers(rules.iter().map(numbered), 14, "AclRule");
    rules
}

/// A quorum keyspace with every knob away from its default.
fn quorum_keyspace() -> KeyspaceConfig {
    let q = QuorumOptions { read: Level::One, write: Level::Count(3), timestamps: Stamps::Clock };
    KeyspaceConfig { protocol: ProtocolConfig::Quorum(q), ..KeyspaceConfig::durable(3) }
}

/// A lease keyspace with every knob away from its default.
fn lease_keyspace() -> KeyspaceConfig {
    let l = LeaseOptions { lease_ms: 5_000, write_mode: WriteMode::Passive };
    let placement = Placement::one_in_each("us,eu").unwrap();
    KeyspaceConfig { protocol: ProtocolConfig::Lease(l), placement, ..KeyspaceConfig::durable(2) }
}

/// A meteor keyspace with every knob away from its default.
fn meteor_keyspace() -> KeyspaceConfig {
    let m = MeteorOptions {
        status_interval_ms: 25,
        clock_bound_ms: 3,
        theta: Theta::Fixed(40),
        redundancy: 3,
        unsafe_theta: true,
    };
    KeyspaceConfig { protocol: ProtocolConfig::Meteor(m), ..KeyspaceConfig::durable(3) }
}

/// One of each `LeaseMsg` variant, as for [`chain_messages`].
fn lease_messages() -> Vec<LeaseMsg> {
    let (op, chain, fence, key) =
        (LeaseOpId { incarnation: 3, seq: 8 }, ChainId(5), Fence { view: 2, step: 7 }, Bytes::from_static(b"k"));
    let versioned = Versioned { version: 1 << 20 | 3, value: Some(Bytes::from_static(b"\x00v")) };
    let get = meridian_core::Request::Get { keyspace: KeyspaceId(1), key: key.clone(), read: Read::Value };
    let renew = Renew {
        origin: origin(),
        chain,
        fence,
        key: key.clone(),
        read: Read::Value,
        sent: meridian_core::Time::from_nanos(11),
        incarnation: 4,
        run: Some(2),
    };
    let push = Push {
        op: Some(op),
        chain,
        fence,
        epoch: 3,
        key: key.clone(),
        versioned: versioned.clone(),
        lease_ns: 9,
        withheld: Some(meridian_core::Time::from_nanos(17)),
    };
    let beat = Beat { chain, domain: "eu".into(), fence, epoch: 3, confirm_ns: 1_000 };
    let takeover = LeaseCopyFor::Takeover { domain: "eu".into(), epoch: 3 };
    let fetch = LeaseFetch { chain, domain: "us".into(), fence, epoch: 4, keys: vec![key.clone()] };
    let fetched =
        LeaseFetched { chain, domain: "us".into(), fence, epoch: 4, entries: vec![(key.clone(), versioned.clone())] };
    let at = Revocation { incarnation: 4, seq: 2 };
    let have = vec![Held { chain, key: key.clone(), version: 3, reads: 9 }];
    let pull = Pull { sent: meridian_core::Time::from_nanos(12), incarnation: 4, have };
    let given = [Given::Same(3), Given::New(versioned.clone())];
    let keys = given.map(|value| Secondary { chain, key: key.clone(), value, lease_ns: 5 }).to_vec();
    let hot = Hot { sent: meridian_core::Time::from_nanos(12), incarnation: 4, revoked: at, keys };
    let extension = Extension { chain, fence, key: key.clone(), run: 3 };
    let samples = vec![
        LeaseMsg::Request(Forwarded {
            origin: origin(),
            req: get,
            hops: 1,
            stamped: Some(3),
            withheld: Some(meridian_core::Time::from_nanos(14)),
        }),
        LeaseMsg::Answer { origin: origin(), reply: Reply::Written { applied: true, existed: false } },
        LeaseMsg::Bounce { origin: origin(), stamped: None },
        LeaseMsg::Renew(renew.clone()),
        LeaseMsg::Granted(Granted { renew, versioned: versioned.clone(), lease_ns: 60 }),
        LeaseMsg::Push(push),
        LeaseMsg::Stored { op, since: meridian_core::Time::from_nanos(13) },
        LeaseMsg::Released { op },
        LeaseMsg::Commit {
            chain,
            key: key.clone(),
            version: 7,
            leased: vec![(NodeId(2), meridian_core::Time::from_nanos(16))],
        },
        LeaseMsg::Heartbeat(LeaseHeartbeat { incarnation: 4, round: 6, acked: Some(5), beats: vec![beat] }),
        LeaseMsg::Promised { incarnation: 4, round: 6, domains: vec![(chain, "eu".into())] },
        LeaseMsg::CopyReq { req: QuorumCopyReq { chain, fence, after: None }, to: takeover },
        LeaseMsg::CopyData {
            data: QuorumCopyData { chain, fence, entries: vec![(key.clone(), versioned)], more: true },
            to: LeaseCopyFor::Joiner,
        },
        LeaseMsg::Fetch(fetch),
        LeaseMsg::Fetched(fetched),
        LeaseMsg::Pull(pull),
        LeaseMsg::Hot(hot),
        LeaseMsg::Revoke { chain, key: key.clone(), at },
        LeaseMsg::Revoked { chain, key: key.clone(), at },
        LeaseMsg::Extend(Extend {
            sent: meridian_core::Time::from_nanos(15),
            incarnation: 4,
            keys: vec![extension.clone()],
        }),
        LeaseMsg::Extended(Extended {
            sent: meridian_core::Time::from_nanos(15),
            incarnation: 4,
            keys: vec![(extension, 60)],
        }),
    ];
    let numbered = |m: &LeaseMsg| match m {
        LeaseMsg::Request(_) => 0,
        LeaseMsg::Answer { .. } => 1,
        LeaseMsg::Bounce { .. } => 2,
        LeaseMsg::Renew(_) => 3,
        LeaseMsg::Granted(_) => 4,
        LeaseMsg::Push(_) => 5,
        LeaseMsg::Stored { .. } => 6,
        LeaseMsg::Released { .. } => 7,
        LeaseMsg::Commit { .. } => 8,
        LeaseMsg::Heartbeat(_) => 9,
        LeaseMsg::Promised { .. } => 10,
        LeaseMsg::CopyReq { .. } => 11,
        LeaseMsg::CopyData { .. } => 12,
        LeaseMsg::Fetch(_) => 13,
        LeaseMsg::Fetched(_) => 14,
        LeaseMsg::Pull(_) => 15,
        LeaseMsg::Hot(_) => 16,
        LeaseMsg::Revoke { .. } => 17,
        LeaseMsg::Revoked { .. } => 18,
        LeaseMsg::Extend(_) => 19,
        LeaseMsg::Extended(_) => 20,
    };
    assert_covers(samples.iter().map(numbered), RECORDED.2[4] - 1, "LeaseMsg");
    samples
}

/// One of each `QuorumMsg` variant, as for [`chain_messages`].
fn quorum_messages() -> Vec<QuorumMsg> {
    let (op, chain, fence, key) =
        (OpId { incarnation: 3, seq: 8 }, ChainId(5), Fence { view: 2, step: 7 }, Bytes::from_static(b"k"));
    let versioned = Versioned { version: 1 << 20 | 3, value: Some(Bytes::from_static(b"\x00v")) };
    let samples = vec![
        QuorumMsg::Read(ReadReq { op, chain, fence, key: key.clone() }),
        QuorumMsg::Found { op, found: versioned.clone() },
        QuorumMsg::Write(WriteReq { op: Some(op), chain, fence, key: key.clone(), versioned: versioned.clone() }),
        QuorumMsg::Written { op, existed: true },
        QuorumMsg::Refused { op },
        QuorumMsg::Rejected { op, held: 1 << 21 | 4 },
        QuorumMsg::CopyReq(QuorumCopyReq { chain, fence, after: Some(key.clone()) }),
        QuorumMsg::CopyData(QuorumCopyData { chain, fence, entries: vec![(key, versioned)], more: false }),
    ];
    let numbered = |m: &QuorumMsg| match m {
        QuorumMsg::Read(_) => 0,
        QuorumMsg::Found { .. } => 1,
        QuorumMsg::Write(_) => 2,
        QuorumMsg::Written { .. } => 3,
        QuorumMsg::Refused { .. } => 4,
        QuorumMsg::CopyReq(_) => 5,
        QuorumMsg::CopyData(_) => 6,
        QuorumMsg::Rejected { .. } => 7,
    };
    assert_covers(samples.iter().map(numbered), RECORDED.2[3] - 1, "QuorumMsg");
    samples
}

/// One of each `MeteorMsg` variant, as for [`chain_messages`].
fn meteor_messages() -> Vec<MeteorMsg> {
    let (chain, fence, key) = (ChainId(5), Fence { view: 2, step: 7 }, Bytes::from_static(b"k"));
    let versioned = Versioned { version: 1 << 20 | 3, value: Some(Bytes::from_static(b"\x00v")) };
    let read = LocalRead { origin: origin(), chain, fence, key: key.clone(), read: Read::Value };
    let ack = Some(Ack { of: 4, seq: 9, gap: true });
    let changes = vec![(chain, key.clone(), 1 << 20 | 3)];
    let status = Status {
        incarnation: 3,
        seq: 10,
        covers_from: 8,
        sent_ms: 1_800_000,
        ack,
        changes,
        fences: vec![(chain, fence)],
        want: true,
    };
    let versions = vec![(key.clone(), 7)];
    let page = Page { incarnation: 3, chain, after: Some(key.clone()), seq: 6, fence, versions, more: true };
    let samples = vec![
        MeteorMsg::Quorum(QuorumMsg::Refused { op: OpId { incarnation: 3, seq: 8 } }),
        MeteorMsg::Read(read),
        MeteorMsg::Answer { origin: origin(), reply: Reply::Value(Some(Bytes::from_static(b"v"))) },
        MeteorMsg::Bounce { origin: origin() },
        MeteorMsg::Status(status),
        MeteorMsg::PageReq { chain, after: None },
        MeteorMsg::Page(page),
        MeteorMsg::Fetch { chain, key: key.clone(), version: 7 },
        MeteorMsg::Fetched { chain, key, found: Some(versioned) },
        MeteorMsg::Probe { sent_ns: 1_234_567 },
        MeteorMsg::ProbeAnswer { sent_ns: 7_654_321 },
    ];
    let numbered = |m: &MeteorMsg| match m {
        MeteorMsg::Quorum(_) => 0,
        MeteorMsg::Read(_) => 1,
        MeteorMsg::Answer { .. } => 2,
        MeteorMsg::Bounce { .. } => 3,
        MeteorMsg::Status(_) => 4,
        MeteorMsg::PageReq { .. } => 5,
        MeteorMsg::Page(_) => 6,
        MeteorMsg::Fetch { .. } => 7,
        MeteorMsg::Fetched { .. } => 8,
        MeteorMsg::Probe { .. } => 9,
        MeteorMsg::ProbeAnswer { .. } => 10,
    };
    assert_covers(samples.iter().map(numbered), RECORDED.2[5] - 1, "MeteorMsg");
    samples
}

/// A map the first commands made: nodes, keyspaces of several kinds, a step in flight.
fn map() -> ClusterMap {
    let mut map = ClusterMap::default();
    for cmd in commands().iter().filter(|c| {
        matches!(
            c,
            MapCommand::Bootstrap { .. }
                | MapCommand::CreateKeyspace { .. }
                | MapCommand::SetKeyMaster { .. }
                | MapCommand::AddAffiliate { .. }
                | MapCommand::SetUser { .. }
                | MapCommand::ManagerMembership { .. }
                | MapCommand::WantVoters { .. }
        )
    }) {
        map.apply(cmd).expect("a sample command applies");
    }
    map
}

/// One of each `MgrMsg` variant, as for [`chain_messages`].
fn manager_messages() -> Vec<MgrMsg> {
    let replicas = ReplicaReports {
        steps: vec![
            StepReport::PreCopied { chain: ChainId(1), step: 2 },
            StepReport::Flushed { chain: ChainId(1), step: 3 },
        ],
        incarnation: 6,
        lost: vec![(ChainId(2), 9)],
        moves: vec![KeyMove { keyspace: KeyspaceId(3), key: "k".into(), region: "us".into() }],
    };
    let samples = vec![
        MgrMsg::Heartbeat(Heartbeat { seq: 1, epoch: 2, replicas }),
        MgrMsg::HeartbeatReply(HeartbeatReply {
            seq: 1,
            leases: vec![(ChainId(1), 3)],
            hold: Duration::from_millis(2_000),
            map: Some(Box::new(map())),
        }),
        MgrMsg::NotLeader { leader: Some(NodeId(2)) },
        MgrMsg::Map(Box::new(map())),
        MgrMsg::Join {
            id: NodeId(4),
            addrs: addrs(4),
            vnodes: 2,
            location: "eu/a/r1".parse().unwrap(),
            host: Some(NodeId(1)),
        },
        MgrMsg::Leave { id: NodeId(4) },
        MgrMsg::Refused { reason: "no".into(), ask: Some(3) },
        MgrMsg::Admin { cmd: MapCommand::DropKeyspace { name: "md".into() }, ask: 3 },
        MgrMsg::Reported(vec![(NodeId(1), 7), (NodeId(3), 6)]),
    ];
    let numbered = |m: &MgrMsg| match m {
        MgrMsg::Heartbeat(_) => 0,
        MgrMsg::HeartbeatReply(_) => 1,
        MgrMsg::NotLeader { .. } => 2,
        MgrMsg::Map(_) => 3,
        MgrMsg::Join { .. } => 4,
        MgrMsg::Leave { .. } => 5,
        MgrMsg::Refused { .. } => 6,
        MgrMsg::Admin { .. } => 7,
        MgrMsg::Reported(_) => 8,
    };
    assert_covers(samples.iter().map(numbered), RECORDED.2[1] - 1, "MgrMsg");
    samples
}

/// The samples number every variant from 0 to `last`.
fn assert_covers(numbers: impl Iterator<Item = usize>, last: usize, what: &str) {
    let mut seen: Vec<usize> = numbers.collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen, (0..=last).collect::<Vec<_>>(), "a sample of every {what} variant");
}

/// The checksum of the encodings of `values`, in order.
fn checksum<T: serde::Serialize>(values: impl IntoIterator<Item = T>) -> u32 {
    let mut bytes = Vec::new();
    for value in values {
        let encoded = postcard::to_allocvec(&value).expect("samples encode");
        bytes.extend_from_slice(&(encoded.len() as u32).to_be_bytes());
        bytes.extend_from_slice(&encoded);
    }
    crc32c::crc32c(&bytes)
}

#[test]
fn the_wire_version_names_the_encoding_of_every_peer_message() {
    let chain = chain_messages().into_iter().map(NodeMsg::Chain);
    let quorum = quorum_messages().into_iter().map(NodeMsg::Quorum);
    let lease = lease_messages().into_iter().map(NodeMsg::Lease);
    let meteor = meteor_messages().into_iter().map(NodeMsg::Meteor);
    let messages =
        chain.chain(manager_messages().into_iter().map(NodeMsg::Mgr)).chain(quorum).chain(lease).chain(meteor);
    assert_eq!(
        (WIRE_VERSION, checksum(messages)),
        RECORDED.0,
        "peer messages encode differently from what WIRE_VERSION {} was recorded for: nodes of the two builds \
         would misread each other. Bump meridian_core::wire::WIRE_VERSION and record it with the new checksum",
        RECORDED.0 .0
    );
}

#[test]
fn the_map_format_names_the_encoding_of_the_map_and_its_commands() {
    assert_eq!(
        (MAP_FORMAT, checksum(commands()) ^ checksum([map()])),
        RECORDED.1,
        "the map or its commands encode differently from what MAP_FORMAT {} was recorded for: a node would misread \
         the files of the other build. Bump MAP_FORMAT and record it with the new checksum",
        RECORDED.1 .0
    );
}
