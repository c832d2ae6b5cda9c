//! Deterministic tests of the manager's Raft. Each replica has its own `SimVfs`; a tiny router in this file
//! carries messages (seeded reordering, loss, duplication and partitions) instead of the simulator, so a
//! failure replays from its seed alone.
//!
//! The safety check runs after every input: every command any replica ever applied goes into one history
//! keyed by index, and each replica's state machine must equal that history up to its applied index. That is
//! state machine safety (every replica's applied sequence is a prefix of the longest one), and since the
//! history survives crashes, a converged cluster that still holds all of it proves nothing committed was lost.

use super::*;
use meridian_core::splitmix::SplitMix64;
use meridian_store::SimVfs;
use std::collections::{BTreeMap, BTreeSet};

const DIR: &str = "/raft";

trait Percent {
    fn percent(&mut self, p: u64) -> bool;
}

impl Percent for SplitMix64 {
    fn percent(&mut self, p: u64) -> bool {
        (self.below(100) as u64) < p
    }
}

/// One applied command: index, term, data. A replica's state machine is the list of them, in order.
type Applied = (u64, u64, Vec<u8>);

struct Replica {
    disk: SimVfs,
    jitter: u64,
    core: Option<RaftCore>,
    state: Vec<Applied>,
    /// Index of the last committed item applied (entry or snapshot).
    applied: u64,
    snapshots_installed: u64,
    reads: Vec<ReadIndex>,
    /// The membership changes applied, in order.
    memberships: Vec<Membership>,
}

struct Cluster {
    rng: SplitMix64,
    ids: Vec<NodeId>,
    /// The replicas whose logs start bootstrapped; the others start empty, to be added as learners.
    voters: Vec<NodeId>,
    config: RaftConfig,
    replicas: BTreeMap<NodeId, Replica>,
    /// Messages in flight: (from, to, message).
    wire: Vec<(NodeId, NodeId, RaftMsg)>,
    /// Directed links that lose everything sent over them.
    cut: BTreeSet<(NodeId, NodeId)>,
    /// Every command any replica ever applied, by index.
    history: BTreeMap<u64, (u64, Vec<u8>)>,
    sent: u64,
    delivered: u64,
    /// Crashes, those that struck in the middle of an input (a power cut), and opens that cut a torn tail.
    crashes: u64,
    mid_input_crashes: u64,
    torn_tails: u64,
    /// FNV-1a over every message sent, in order: equal traces hash equal.
    trace: u64,
}

impl Cluster {
    fn new(n: u32, config: RaftConfig, seed: u64) -> Cluster {
        Cluster::with_spares(n, 0, config, seed)
    }

    /// `n` bootstrapped voters and `spares` more replicas that start empty.
    fn with_spares(n: u32, spares: u32, config: RaftConfig, seed: u64) -> Cluster {
        let mut rng = SplitMix64::new(seed);
        let ids: Vec<NodeId> = (0..n + spares).map(NodeId).collect();
        let replicas = ids.iter().map(|&id| (id, Replica::new(rng.next_u64()))).collect();
        let wire = Vec::new();
        let (cut, history) = (BTreeSet::new(), BTreeMap::new());
        let mut c = Cluster {
            rng,
            voters: ids[..n as usize].to_vec(),
            ids,
            config,
            replicas,
            wire,
            cut,
            history,
            sent: 0,
            delivered: 0,
            crashes: 0,
            mid_input_crashes: 0,
            torn_tails: 0,
            trace: FNV,
        };
        for id in c.ids.clone() {
            c.start(id);
        }
        c
    }

    fn replica(&mut self, id: NodeId) -> &mut Replica {
        self.replicas.get_mut(&id).expect("known replica")
    }

    fn up(&self, id: NodeId) -> bool {
        self.replicas[&id].core.is_some()
    }

    fn core(&self, id: NodeId) -> &RaftCore {
        self.replicas[&id].core.as_ref().expect("replica is up")
    }

    /// Opens a down replica from its disk; a power cut during the open leaves it down.
    fn start(&mut self, id: NodeId) {
        let ids = if self.voters.contains(&id) { self.voters.clone() } else { Vec::new() };
        let config = self.config.clone();
        let r = self.replica(id);
        let mut out = RaftOutput::default();
        let vfs: Arc<dyn Vfs> = Arc::new(r.disk.clone());
        let opened = RaftCore::open(vfs, Path::new(DIR), id, &ids, &config, r.jitter, &mut out);
        (r.state, r.applied, r.reads) = (Vec::new(), 0, Vec::new());
        match opened {
            Ok(core) => {
                let torn = core.log().recovery().dropped_bytes > 0;
                r.core = Some(core);
                self.torn_tails += u64::from(torn);
                self.absorb(id, out);
            }
            Err(RaftError::Log(LogError::Io(_))) => self.crash(id),
            Err(e) => panic!("{id} failed to open: {e}"),
        }
    }

    /// Power loss: the core is gone, the disk keeps what the crash spares, volatile state is lost.
    fn crash(&mut self, id: NodeId) {
        let entropy = self.rng.next_u64();
        self.crashes += 1;
        let r = self.replica(id);
        r.core = None;
        r.disk.crash(entropy);
        (r.state, r.applied) = (Vec::new(), 0);
    }

    /// Feeds one input to a replica (if up) and takes its output; a fatal error crashes it.
    fn input(&mut self, id: NodeId, f: impl FnOnce(&mut RaftCore, &mut RaftOutput) -> Option<RaftError>) {
        let Some(core) = self.replica(id).core.as_mut() else {
            return;
        };
        let mut out = RaftOutput::default();
        let fatal = f(core, &mut out);
        self.absorb(id, out);
        if let Some(e) = fatal {
            assert!(matches!(e, RaftError::Log(LogError::Io(_))), "{id}: unexpected fatal error {e}");
            self.mid_input_crashes += 1;
            self.crash(id);
        }
    }

    fn tick(&mut self, id: NodeId) {
        self.input(id, |core, out| core.tick(out).err());
    }

    fn propose(&mut self, id: NodeId, data: &[u8]) {
        self.input(id, |core, out| match core.propose(data.to_vec(), out) {
            Err(ProposeError::Fatal(e)) => Some(e),
            _ => None,
        });
    }

    fn read_index(&mut self, id: NodeId, ctx: &[u8]) {
        self.input(id, |core, out| core.read_index(ctx.to_vec(), out).err());
    }

    fn compact(&mut self, id: NodeId) {
        let r = &self.replicas[&id];
        let (applied, state) = (r.applied, postcard::to_stdvec(&r.state).unwrap());
        self.input(id, |core, _| match core.compact(applied, state) {
            Err(RaftError::Invalid(e)) => panic!("{id}: compaction refused: {e}"),
            result => result.err(),
        });
    }

    /// Delivers (or loses, on a cut link or at a down replica) the message at `at` in the wire.
    fn deliver(&mut self, at: usize) {
        let (from, to, msg) = self.wire.remove(at);
        if self.cut.contains(&(from, to)) || !self.up(to) {
            return;
        }
        self.delivered += 1;
        self.input(to, |core, out| match core.step(from, &msg, out) {
            Err(StepError::Fatal(e)) => Some(e),
            Err(e @ (StepError::Decode { .. } | StepError::Refused { .. })) => panic!("{to}: {e}"),
            Ok(()) => None,
        });
    }

    fn absorb(&mut self, id: NodeId, out: RaftOutput) {
        for (to, msg) in out.messages {
            self.sent += 1;
            self.trace = fnv(fnv(self.trace, &[id.0 as u8, to.0 as u8]), &msg.0);
            self.wire.push((id, to, msg));
        }
        let applied_any = !out.committed.is_empty();
        let r = self.replica(id);
        r.reads.extend(out.reads);
        for item in out.committed {
            r.apply(item);
        }
        if applied_any {
            self.check(id);
        }
    }

    /// Records what `id` applied in the history and checks its state machine equals the history up to its
    /// applied index; a newly recorded index must not lie behind what another replica already applied.
    fn check(&mut self, id: NodeId) {
        let r = &self.replicas[&id];
        for (index, term, data) in &r.state {
            match self.history.get(index) {
                Some(known) => assert_eq!(known, &(*term, data.clone()), "{id} applied a different entry {index}"),
                None => {
                    let skipped =
                        self.replicas.iter().find(|(&o, r)| o != id && r.core.is_some() && r.applied >= *index);
                    assert!(skipped.is_none(), "{:?} applied past {index} without it", skipped.map(|s| s.0));
                    self.history.insert(*index, (*term, data.clone()));
                }
            }
        }
        let expected: Vec<Applied> = self.history.range(..=r.applied).map(|(&i, (t, d))| (i, *t, d.clone())).collect();
        assert_eq!(r.state, expected, "{id}'s state machine is not a prefix of the committed history");
    }

    /// Cuts `id` off from everyone, both ways.
    fn isolate(&mut self, id: NodeId) {
        for &other in self.ids.iter().filter(|&&o| o != id) {
            self.cut.insert((id, other));
            self.cut.insert((other, id));
        }
    }

    /// One round of a healthy network: every message in flight is delivered in order, then every replica ticks.
    fn round(&mut self) {
        while !self.wire.is_empty() {
            self.deliver(0);
        }
        for id in self.ids.clone() {
            self.tick(id);
        }
    }

    fn rounds_until(&mut self, max: usize, done: impl Fn(&Cluster) -> bool) {
        for _ in 0..max {
            if done(self) {
                return;
            }
            self.round();
        }
        assert!(done(self), "cluster did not get there in {max} rounds");
    }

    fn leader(&self) -> Option<NodeId> {
        self.ids.iter().copied().find(|&id| self.up(id) && self.core(id).is_leader())
    }

    fn has_data(&self, id: NodeId, data: &[u8]) -> bool {
        self.replicas[&id].state.iter().any(|(_, _, d)| d == data)
    }

    /// Every replica up and holding the whole history.
    fn converged(&self) -> bool {
        let full: Vec<Applied> = self.history.iter().map(|(&i, (t, d))| (i, *t, d.clone())).collect();
        self.replicas.values().all(|r| r.core.is_some() && r.state == full)
    }

    /// Heals the network, restarts everyone, commits a probe and waits until every replica has it all.
    fn heal_and_converge(&mut self) {
        self.cut.clear();
        for id in self.ids.clone() {
            self.replica(id).disk.cut_power_after(None);
            if !self.up(id) {
                self.start(id);
            }
        }
        for round in 0..400 {
            let probed = self.ids.iter().all(|&id| self.has_data(id, b"probe"));
            if probed && self.converged() {
                return;
            }
            if let Some(leader) = self.leader().filter(|_| round % 25 == 0 && !probed) {
                self.propose(leader, b"probe");
            }
            self.round();
        }
        panic!("no convergence after healing; {} commands in the history", self.history.len());
    }
}

impl Replica {
    fn new(jitter: u64) -> Replica {
        let disk = SimVfs::new();
        let (state, reads, memberships) = (Vec::new(), Vec::new(), Vec::new());
        Replica { disk, jitter, core: None, state, applied: 0, snapshots_installed: 0, reads, memberships }
    }

    fn apply(&mut self, item: Committed) {
        match item {
            Committed::Entry { index, term, data } => {
                assert!(index > self.applied, "entry {index} applied after {}", self.applied);
                self.state.push((index, term, data));
                self.applied = index;
            }
            Committed::Snapshot { index, data, .. } => {
                assert!(index > self.applied, "snapshot {index} installed after {}", self.applied);
                self.state = postcard::from_bytes(&data).expect("snapshots hold what compact was given");
                self.applied = index;
                self.snapshots_installed += 1;
            }
            Committed::Membership { index, membership } => {
                assert!(index > self.applied, "membership {index} applied after {}", self.applied);
                self.applied = index;
                self.memberships.push(membership);
            }
        }
    }
}

const FNV: u64 = 0xcbf2_9ce4_8422_2325;

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn fast_config() -> RaftConfig {
    RaftConfig { election_ticks: 8, heartbeat_ticks: 2, ..RaftConfig::default() }
}

fn elected(c: &mut Cluster) -> NodeId {
    let ids = c.ids.clone();
    elected_among(c, &ids)
}

#[test]
fn three_replicas_elect_one_leader_and_apply_the_same_sequence() {
    let mut c = Cluster::new(3, fast_config(), 1);
    let leader = elected(&mut c);
    let proposals: Vec<Vec<u8>> = (0..20).map(|i| format!("cmd-{i}").into_bytes()).collect();
    for p in &proposals {
        c.propose(leader, p);
    }
    c.rounds_until(20, |c| c.converged() && c.history.len() == proposals.len());
    let data: Vec<&Vec<u8>> = c.history.values().map(|(_, d)| d).collect();
    assert_eq!(data, proposals.iter().collect::<Vec<_>>(), "commands apply in proposal order");
    assert_eq!(c.ids.iter().filter(|&&id| c.core(id).is_leader()).count(), 1);
    let mut out = RaftOutput::default();
    let follower = *c.ids.iter().find(|&&id| id != leader).unwrap();
    let refused = c.replica(follower).core.as_mut().unwrap().propose(b"x".to_vec(), &mut out);
    assert!(matches!(refused, Err(ProposeError::NotLeader { leader: Some(l) }) if l == leader));
}

#[test]
fn an_isolated_leader_steps_down_and_its_proposals_never_commit() {
    let mut c = Cluster::new(3, fast_config(), 2);
    let old = elected(&mut c);
    c.propose(old, b"before");
    c.rounds_until(10, |c| c.converged() && c.history.len() == 1);

    c.isolate(old);
    for i in 0..3 {
        c.propose(old, format!("lost-{i}").as_bytes());
    }
    c.read_index(old, b"stale-read");
    // check_quorum: the old leader gives up on its own, without hearing of the new term.
    c.rounds_until(100, |c| c.leader().is_some_and(|l| l != old) && !c.core(old).is_leader());
    let new = c.leader().unwrap();
    let mut out = RaftOutput::default();
    let refused = c.replica(old).core.as_mut().unwrap().propose(b"late".to_vec(), &mut out);
    assert!(matches!(refused, Err(ProposeError::NotLeader { .. })));
    assert!(c.replicas[&old].reads.is_empty(), "a deposed leader must not confirm reads");

    c.propose(new, b"after");
    c.read_index(new, b"fresh-read");
    c.rounds_until(10, |c| c.ids.iter().filter(|&&id| c.has_data(id, b"after")).count() == 2);
    let read = c.replicas[&new].reads.first().expect("the majority's leader confirms reads").clone();
    let before = c.history.iter().find(|(_, (_, d))| d == b"before").map(|(&i, _)| i).unwrap();
    assert!(read.ctx == b"fresh-read" && read.index >= before, "a read point covers what was committed before");

    c.cut.clear();
    c.rounds_until(50, |c| c.converged() && c.ids.iter().all(|&id| c.has_data(id, b"after")));
    for id in c.ids.clone() {
        assert!((0..3).all(|i| !c.has_data(id, format!("lost-{i}").as_bytes())), "{id} applied a lost proposal");
    }
}

#[test]
fn undecodable_and_misaddressed_messages_are_refused_not_fatal() {
    let mut c = Cluster::new(3, fast_config(), 5);
    let leader = elected(&mut c);
    c.propose(leader, b"x");
    let follower = *c.ids.iter().find(|&&id| id != leader).unwrap();
    let other = *c.ids.iter().find(|&&id| id != leader && id != follower).unwrap();
    let heartbeat = Message {
        msg_type: MessageType::MsgHeartbeat,
        from: raft_id(leader),
        to: raft_id(follower),
        ..Message::default()
    };
    let propose = Message { msg_type: MessageType::MsgPropose, ..heartbeat.clone() };
    let core = c.replica(follower).core.as_mut().unwrap();
    let mut out = RaftOutput::default();
    assert!(matches!(core.step(leader, &RaftMsg(vec![0xff; 9]), &mut out), Err(StepError::Decode { .. })));
    let spoofed = core.step(other, &RaftMsg::encode(&heartbeat), &mut out);
    assert!(matches!(spoofed, Err(StepError::Refused { .. })), "the sender must match the link");
    assert!(matches!(core.step(leader, &RaftMsg::encode(&propose), &mut out), Err(StepError::Refused { .. })));
    assert!(out.messages.is_empty() && out.committed.is_empty());
    c.rounds_until(10, |c| c.converged() && c.history.len() == 1);
}

/// Swarm-randomised faults for one seed: which faults and how often are themselves drawn from the seed.
struct Faults {
    drop: u64,
    duplicate: u64,
    crash: u64,
    power_cut: u64,
    partition: u64,
}

/// What a chaos run produced, for comparing runs.
#[derive(Debug, Default, PartialEq, Eq)]
struct Outcome {
    states: Vec<Vec<Applied>>,
    sent: u64,
    delivered: u64,
    trace: u64,
    snapshots_installed: u64,
    crashes: u64,
    mid_input_crashes: u64,
    torn_tails: u64,
}

/// Inputs per chaos run, before the final healing.
const STEPS: usize = 1500;

fn chaos(seed: u64, steps: usize) -> Outcome {
    let mut rng = SplitMix64::new(seed);
    let n = if rng.percent(25) { 5 } else { 3 };
    let config = RaftConfig {
        election_ticks: 5 + rng.below(6),
        heartbeat_ticks: 1 + rng.below(2),
        max_size_per_msg: [64, 1 << 20][rng.below(2)],
        max_inflight_msgs: 1 + rng.below(8),
        ..RaftConfig::default()
    };
    let faults = Faults {
        drop: rng.below(15) as u64,
        duplicate: rng.below(10) as u64,
        crash: rng.below(3) as u64,
        power_cut: rng.below(3) as u64,
        partition: rng.below(3) as u64,
    };
    let mut c = Cluster::new(n, config, rng.next_u64());
    for step in 0..steps {
        chaos_step(&mut c, &faults, step);
    }
    c.heal_and_converge();
    Outcome {
        states: c.replicas.values().map(|r| r.state.clone()).collect(),
        sent: c.sent,
        delivered: c.delivered,
        trace: c.trace,
        snapshots_installed: c.replicas.values().map(|r| r.snapshots_installed).sum(),
        crashes: c.crashes,
        mid_input_crashes: c.mid_input_crashes,
        torn_tails: c.torn_tails,
    }
}

fn chaos_step(c: &mut Cluster, f: &Faults, step: usize) {
    let id = c.ids[c.rng.below(c.ids.len())];
    match c.rng.below(100) {
        0..=49 if !c.wire.is_empty() => {
            let at = c.rng.below(c.wire.len());
            if c.rng.percent(f.duplicate) {
                c.wire.push(c.wire[at].clone());
            }
            if c.rng.percent(f.drop) {
                c.wire.remove(at);
            } else {
                c.deliver(at);
            }
        }
        50..=74 => c.tick(id),
        75..=86 => {
            let target = c.leader().filter(|_| c.rng.percent(80)).unwrap_or(id);
            c.propose(target, format!("step-{step}").as_bytes());
        }
        87..=89 if c.up(id) && c.rng.percent(f.crash * 30) => c.crash(id),
        90..=92 if !c.up(id) => c.start(id),
        93..=94 if c.up(id) => c.compact(id),
        95 if c.rng.percent(f.power_cut * 30) => {
            let ops = c.rng.below(8) as u64;
            c.replica(id).disk.cut_power_after(Some(ops));
        }
        96..=97 if c.rng.percent(f.partition * 30) => c.isolate(id),
        98..=99 => c.cut.clear(),
        _ => {}
    }
}

#[test]
fn crashes_at_any_point_lose_nothing_committed() {
    let mut total = Outcome::default();
    for seed in 0..200 {
        let o = chaos(seed, STEPS);
        total.states.push(o.states[0].clone());
        total.snapshots_installed += o.snapshots_installed;
        total.crashes += o.crashes;
        total.mid_input_crashes += o.mid_input_crashes;
        total.torn_tails += o.torn_tails;
    }
    // Not vacuous: the runs committed work and went through every kind of fault and recovery.
    let committed: usize = total.states.iter().map(Vec::len).sum();
    let faults = (total.snapshots_installed, total.crashes, total.mid_input_crashes, total.torn_tails);
    assert!(committed > 200 * 20, "only {committed} commands committed over 200 seeds");
    assert!(faults.0 > 100 && faults.1 > 200 && faults.2 > 50 && faults.3 > 20, "snapshots, crashes: {faults:?}");
}

#[test]
fn the_same_seed_replays_exactly() {
    for seed in [3, 17, 101] {
        assert_eq!(chaos(seed, STEPS), chaos(seed, STEPS), "seed {seed}");
    }
    assert_ne!(chaos(3, STEPS).trace, chaos(4, STEPS).trace);
}

#[test]
fn compaction_shrinks_the_log_and_a_lagging_follower_catches_up_by_snapshot() {
    let mut c = Cluster::new(3, fast_config(), 4);
    let leader = elected(&mut c);
    let lagging = *c.ids.iter().find(|&&id| id != leader).unwrap();
    c.propose(leader, b"early");
    c.rounds_until(10, |c| c.converged() && c.history.len() == 1);
    c.crash(lagging);
    for i in 0..30 {
        c.propose(leader, format!("while-down-{i}").as_bytes());
        c.round();
    }
    let others: Vec<NodeId> = c.ids.iter().copied().filter(|&id| id != lagging).collect();
    for &id in &others {
        let before = c.core(id).log().file_len().unwrap();
        c.compact(id);
        let after = c.core(id).log().file_len().unwrap();
        assert!(after < before / 2, "{id}: log went from {before} to {after} bytes");
        assert_eq!(c.core(id).log().snapshot_index(), c.replicas[&id].applied);
    }
    c.propose(leader, b"after-compaction");
    c.start(lagging);
    c.rounds_until(30, |c| c.converged() && c.history.len() == 32);
    assert_eq!(c.replicas[&lagging].snapshots_installed, 1, "the follower caught up through the snapshot");

    // A compacted replica restarts from its snapshot, then re-applies the entries after it.
    c.crash(others[0]);
    c.start(others[0]);
    assert_eq!(c.replicas[&others[0]].snapshots_installed, 1);
    c.rounds_until(30, |c| c.converged());
}

// RaftLog on its own: recovery from torn tails, corruption, truncation and interrupted rewrites.

fn entry(index: u64, term: u64) -> Entry {
    Entry { index, term, data: format!("e{index}t{term}").into_bytes().into(), ..Entry::default() }
}

fn hard_state(term: u64, commit: u64) -> raft::eraftpb::HardState {
    raft::eraftpb::HardState { term, vote: 1, commit, ..Default::default() }
}

fn open_log(disk: &SimVfs) -> Result<RaftLog, LogError> {
    RaftLog::open(Arc::new(disk.clone()), Path::new(DIR))
}

fn terms(log: &RaftLog) -> Vec<u64> {
    use raft::Storage as _;
    let (first, last) = (log.first_index().unwrap(), log.last_index().unwrap());
    (first..=last).map(|i| log.term(i).unwrap()).collect()
}

/// A bootstrapped log with entries 1..=5 synced and 6..=8 not.
fn log_with_unsynced_tail(disk: &SimVfs) -> RaftLog {
    let mut log = open_log(disk).unwrap();
    log.bootstrap(ConfState::from((vec![1, 2, 3], vec![]))).unwrap();
    log.save(&(1..=5).map(|i| entry(i, 1)).collect::<Vec<_>>(), Some(&hard_state(1, 5))).unwrap();
    log.sync().unwrap();
    for i in 6..=8 {
        log.save(&[entry(i, 1)], None).unwrap();
    }
    log
}

#[test]
fn a_torn_tail_is_cut_off_on_open() {
    let mut torn = 0;
    for entropy in 0..200 {
        let disk = SimVfs::new();
        drop(log_with_unsynced_tail(&disk));
        disk.crash(entropy);
        let log = open_log(&disk).unwrap();
        let len = terms(&log).len();
        assert!((5..=8).contains(&len), "entropy {entropy}: {len} entries survived");
        assert_eq!(log.hard_state().commit, 5);
        assert_eq!(log.file_len().unwrap(), log.recovery().kept_bytes);
        torn += u64::from(log.recovery().dropped_bytes > 0);
        drop(log);
        assert_eq!(open_log(&disk).unwrap().recovery().dropped_bytes, 0, "the cut is durable");
    }
    assert!(torn > 10, "only {torn} crashes tore the tail");
}

#[test]
fn a_readys_entries_and_hard_state_survive_a_crash_together_or_not_at_all() {
    let (mut kept, mut lost) = (0, 0);
    for entropy in 0..200 {
        let disk = SimVfs::new();
        let mut log = log_with_unsynced_tail(&disk);
        log.sync().unwrap();
        log.save(&[entry(7, 2), entry(8, 2), entry(9, 2)], Some(&hard_state(2, 8))).unwrap();
        drop(log);
        disk.crash(entropy);
        let log = open_log(&disk).unwrap();
        match (log.hard_state().term, terms(&log).as_slice()) {
            (2, [.., 1, 2, 2, 2]) => kept += 1,
            (1, [1, 1, 1, 1, 1, 1, 1, 1]) => lost += 1,
            other => panic!("entropy {entropy}: the crash split a Ready: {other:?}"),
        }
    }
    assert!(kept > 0 && lost > 0, "kept {kept}, lost {lost}");
}

fn rewrite_file(disk: &SimVfs, edit: impl FnOnce(&mut Vec<u8>)) {
    let path = Path::new(DIR).join("raft.log");
    let file = disk.open(&path).unwrap();
    let mut buf = vec![0; file.len().unwrap() as usize];
    file.read_exact_at(0, &mut buf).unwrap();
    drop(file);
    edit(&mut buf);
    disk.remove_file(&path).unwrap();
    let mut file = disk.open(&path).unwrap();
    file.append(&buf).unwrap();
    file.sync().unwrap();
}

#[test]
fn corruption_in_the_middle_is_an_error_not_a_cut() {
    let disk = SimVfs::new();
    let mut log = log_with_unsynced_tail(&disk);
    log.sync().unwrap();
    let len = log.file_len().unwrap() as usize;
    drop(log);
    rewrite_file(&disk, |buf| buf[len / 2] ^= 0x10);
    assert!(matches!(open_log(&disk), Err(LogError::Corrupt { .. })));

    rewrite_file(&disk, |buf| {
        buf[len / 2] ^= 0x10;
        buf.extend_from_slice(&[0, 0, 1]);
    });
    let log = open_log(&disk).unwrap();
    assert_eq!((terms(&log).len(), log.recovery().dropped_bytes), (8, 3), "garbage at the end is a torn tail");
}

#[test]
fn overwritten_suffixes_replay_as_written() {
    let disk = SimVfs::new();
    let mut log = log_with_unsynced_tail(&disk);
    log.save(&[entry(4, 2), entry(5, 2)], Some(&hard_state(2, 3))).unwrap();
    log.save(&[entry(6, 3)], Some(&hard_state(3, 3))).unwrap();
    log.sync().unwrap();
    drop(log);
    let log = open_log(&disk).unwrap();
    assert_eq!(terms(&log), vec![1, 1, 1, 2, 2, 3]);
}

#[test]
fn storage_answers_raft_about_compacted_and_missing_entries() {
    use raft::{Storage as _, StorageError};
    let disk = SimVfs::new();
    let mut log = log_with_unsynced_tail(&disk);
    assert!(log.compact(3, ConfState::from((vec![1, 2, 3], vec![])), b"state".to_vec()).unwrap());
    let ctx = || raft::GetEntriesContext::empty(false);
    assert_eq!((log.first_index().unwrap(), log.last_index().unwrap()), (4, 8));
    assert_eq!(log.term(3).unwrap(), 1, "the snapshot keeps its term");
    assert_eq!(log.term(2), Err(raft::Error::Store(StorageError::Compacted)));
    assert_eq!(log.term(9), Err(raft::Error::Store(StorageError::Unavailable)));
    assert_eq!(log.entries(3, 5, None, ctx()), Err(raft::Error::Store(StorageError::Compacted)));
    assert_eq!(log.entries(4, 9, 0, ctx()).unwrap(), vec![entry(4, 1)], "a size limit still returns one entry");
    assert_eq!(log.snapshot(0, 2).unwrap().data.as_ref(), b"state");
    assert!(log.compact(6, ConfState::default(), vec![]).is_err(), "only committed entries can be compacted");
}

#[test]
fn a_compaction_interrupted_at_any_write_leaves_the_old_or_the_new_log() {
    for ops in 0..8 {
        let disk = SimVfs::new();
        let mut log = log_with_unsynced_tail(&disk);
        log.sync().unwrap();
        disk.cut_power_after(Some(ops));
        let done = log.compact(4, ConfState::from((vec![1, 2, 3], vec![])), b"state".to_vec());
        drop(log);
        disk.crash(ops);
        let log = open_log(&disk).unwrap();
        let expected = if done.is_ok() { (5, 4) } else { (1, 0) };
        assert_eq!((raft::Storage::first_index(&log).unwrap(), log.snapshot_index()), expected, "cut after {ops}");
        assert_eq!(raft::Storage::last_index(&log).unwrap(), 8);
    }
}

/// A log names its format first; one written by a build of another format is refused with both versions named,
/// rather than replayed under a guess.
#[test]
fn a_log_of_another_format_is_refused() {
    use crate::map::MAP_FORMAT;
    let disk = SimVfs::new();
    let mut log = open_log(&disk).unwrap();
    log.bootstrap(ConfState { voters: vec![1], ..ConfState::default() }).unwrap();
    drop(log);
    assert!(open_log(&disk).is_ok(), "its own format");

    let disk = SimVfs::new();
    disk.create_dir_all(Path::new(DIR)).unwrap();
    let mut newer = Vec::new();
    super::frame::encode(super::storage::KIND_FORMAT, &[MAP_FORMAT + 1], &mut newer);
    disk.open(&Path::new(DIR).join("raft.log")).unwrap().append(&newer).unwrap();
    let Err(err) = open_log(&disk).map(|_| ()) else { panic!("a log of another format opened") };
    let err = err.to_string();
    let (theirs, ours) = (format!("format {}", MAP_FORMAT + 1), format!("formats 1 to {MAP_FORMAT}"));
    assert!(err.contains(&theirs) && err.contains(&ours), "{err}");
}

/// The raft log of a node that a format-1 build ran (`tests/fixtures/format1-node`) opens with its entries
/// re-encoded, and is rewritten in the current format, so that the next open reads it as such.
#[test]
fn a_format_1_log_is_upgraded_on_open() {
    use crate::map::{MapCommand, MAP_FORMAT};
    let disk = SimVfs::new();
    disk.create_dir_all(Path::new(DIR)).unwrap();
    let old: &[u8] = include_bytes!("../../../../../tests/fixtures/format1-node/raft/raft.log");
    disk.open(&Path::new(DIR).join("raft.log")).unwrap().append(old).unwrap();
    let commands = |log: &RaftLog| -> Vec<MapCommand> {
        let last = raft::Storage::last_index(log).unwrap();
        let entries = raft::Storage::entries(log, 1, last + 1, None, raft::GetEntriesContext::empty(false)).unwrap();
        entries.iter().filter(|e| !e.data.is_empty()).map(|e| postcard::from_bytes(&e.data).unwrap()).collect()
    };
    let upgraded = commands(&open_log(&disk).unwrap());
    let [MapCommand::Bootstrap { nodes, .. }, MapCommand::CreateKeyspace { name, config }] = &upgraded[..] else {
        panic!("the fixture's bootstrap and keyspace: {upgraded:?}")
    };
    assert_eq!((nodes[0].2.region.as_str(), name.as_str()), ("default", "cache"));
    assert!(config.placement.is_spread());
    let file = disk.open(&Path::new(DIR).join("raft.log")).unwrap();
    let mut head = vec![0; file.len().unwrap() as usize];
    file.read_exact_at(0, &mut head).unwrap();
    let (frames, _) = super::frame::scan(&head);
    assert_eq!((frames[0].kind, frames[0].payload), (super::storage::KIND_FORMAT, &[MAP_FORMAT][..]));
    assert_eq!(commands(&open_log(&disk).unwrap()), upgraded, "reopened in the current format");
}

/// Four replicas, the fourth not bootstrapped: it joins as a learner, starts from a snapshot (the leader
/// compacts as soon as it applies the change, as the manager does), and then replaces a voter through a joint
/// configuration, after which the group commits with the new voter and without the old one.
#[test]
fn a_learner_starts_from_a_snapshot_and_replaces_a_voter() {
    let mut c = Cluster::with_spares(3, 1, fast_config(), 11);
    let spare = NodeId(3);
    let leader = elected_among(&mut c, &[NodeId(0), NodeId(1), NodeId(2)]);
    for i in 0..5u8 {
        c.propose(leader, &[b'a', i]);
    }
    c.rounds_until(50, |c| (0..3).all(|i| c.has_data(NodeId(i), &[b'a', 4])));
    change(&mut c, leader, &[MemberChange::AddLearner(spare)]);
    while c.core(leader).membership().learners != [spare] {
        c.deliver(0);
    }
    c.compact(leader);
    c.rounds_until(100, |c| c.core(leader).caught_up(spare, 0) && c.has_data(spare, &[b'a', 4]));
    assert!(c.replicas[&spare].snapshots_installed > 0, "the learner started from a snapshot");
    assert!(!c.core(spare).membership().voters.contains(&spare));
    let old = [NodeId(0), NodeId(1), NodeId(2)].into_iter().find(|&v| v != leader).unwrap();
    change(&mut c, leader, &[MemberChange::AddVoter(spare), MemberChange::Remove(old)]);
    let mut voters: Vec<NodeId> = [NodeId(0), NodeId(1), NodeId(2), spare].into_iter().filter(|&v| v != old).collect();
    voters.sort_unstable();
    let settled = Membership { voters: voters.clone(), learners: vec![], joint: false };
    c.rounds_until(100, |c| voters.iter().all(|&v| c.core(v).membership() == settled));
    let joints = c.replicas[&leader].memberships.iter().filter(|m| m.joint).count();
    assert_eq!(joints, 1, "the replacement went through one joint configuration");
    let other = voters.iter().copied().find(|&v| v != leader && v != spare).unwrap();
    c.isolate(old);
    c.isolate(other);
    c.propose(leader, b"with the new voter");
    c.rounds_until(50, |c| c.has_data(spare, b"with the new voter") && c.has_data(leader, b"with the new voter"));
}

/// A replica that knows no configuration refuses entries from the log's start, which would leave it without
/// the voters the log was bootstrapped with.
#[test]
fn an_empty_replica_refuses_entries_from_the_start() {
    let disk = SimVfs::new();
    let mut out = RaftOutput::default();
    let mut core = RaftCore::open(Arc::new(disk), Path::new(DIR), NodeId(3), &[], &fast_config(), 1, &mut out).unwrap();
    assert_eq!(core.membership(), Membership::default());
    let mut m = Message { msg_type: MessageType::MsgAppend, from: 1, to: 4, term: 2, index: 0, ..Message::default() };
    m.set_entries(vec![entry(1, 1)].into());
    let refused = core.step(NodeId(0), &RaftMsg::encode(&m), &mut out);
    assert!(matches!(refused, Err(StepError::Refused { .. })), "{refused:?}");
    assert_eq!(raft::Storage::last_index(core.log()).unwrap(), 0, "nothing appended");
}

fn change(c: &mut Cluster, leader: NodeId, changes: &[MemberChange]) {
    c.input(leader, |core, out| match core.change_membership(changes, out) {
        Err(ProposeError::Fatal(e)) => Some(e),
        Err(e) => panic!("change refused: {e}"),
        Ok(_) => None,
    });
}

fn elected_among(c: &mut Cluster, voters: &[NodeId]) -> NodeId {
    c.rounds_until(100, |c| c.leader().is_some_and(|l| voters.iter().all(|&id| c.core(id).leader() == Some(l))));
    c.leader().expect("leader")
}

/// A group shrunk to its leader alone stays so across a power loss right after the change: the commit index
/// that covers a membership change is synced before the change is applied, so the restarted replica does not
/// fall back to a configuration that needs the votes of the replicas taken out (which no longer answer).
#[test]
fn a_membership_change_applied_survives_a_power_loss() {
    let mut c = Cluster::new(3, fast_config(), 5);
    let leader = elected(&mut c);
    let others: Vec<NodeId> = c.ids.iter().copied().filter(|&v| v != leader).collect();
    change(&mut c, leader, &[MemberChange::Remove(others[0]), MemberChange::Remove(others[1])]);
    let alone = Membership { voters: vec![leader], learners: vec![], joint: false };
    for _ in 0..200 {
        if c.core(leader).membership() == alone {
            break;
        }
        if c.wire.is_empty() {
            c.tick(leader);
        } else {
            c.deliver(0);
        }
    }
    assert_eq!(c.core(leader).membership(), alone);
    others.iter().for_each(|&o| c.isolate(o));
    c.crash(leader);
    c.start(leader);
    assert_eq!(c.core(leader).membership(), alone, "the restarted replica knows it is alone");
    c.rounds_until(100, |c| c.core(leader).is_leader());
    c.propose(leader, b"alone");
    c.rounds_until(20, |c| c.has_data(leader, b"alone"));
}
