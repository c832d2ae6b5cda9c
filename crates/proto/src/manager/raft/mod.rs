//! The cluster manager's replicated log: a sans-IO wrapper around raft-rs (tikv/raft-rs 0.7) over a durable
//! [`RaftLog`] kept behind the project's `Vfs`. DESIGN.md §2, principle 4: the control plane is consensus, not
//! a hand-made register; membership, ring, keyspace configs and topology are commands in this log.
//!
//! Guarantee: Raft's safety (every replica applies the same commands in the same order, and a command that
//! was committed, i.e. applied anywhere, is never lost) under crash-restart of any replicas at any point
//! (unsynced writes lost, the last write torn), message loss, reordering and duplication, and partitions.
//! Liveness needs a majority of voters up and connected for a few election timeouts; `pre_vote` keeps a
//! rejoining or partitioned node from disrupting a working leader, and `check_quorum` makes a leader cut off
//! from the majority step down within one election timeout.
//!
//! How durability holds: raft-rs counts an entry, vote or term as persisted once the application calls
//! `advance` on the Ready that carried it. [`RaftCore`] writes the Ready's snapshot, entries and hard state to
//! the [`RaftLog`] and fsyncs *before* `advance`, inline. So every message raft-rs produces, whether from
//! `messages()` (which a leader may send before persisting) or `persisted_messages()`, depends only on
//! durable state and may leave at once: [`RaftOutput::messages`] needs no `after_sync` handling. This costs
//! one fsync per Ready that carries entries or a vote, which the control plane affords (its traffic is small);
//! heartbeats and commit-index updates persist nothing that needs a sync.
//!
//! Determinism (principle 1): raft-rs draws a follower's election timeout from a thread-local, OS-seeded RNG
//! in `[election_ticks, 2 * election_ticks)` each time it resets its election timer. We overwrite that draw
//! with one from a generator seeded by the caller's `election_jitter` before raft can consult it (see
//! `RaftCore::redraw_election_timeout`). A fixed timeout per replica (`max = min + 1`) would be
//! deterministic too, but it breaks liveness: the replicas with the shortest timeouts always campaign first,
//! and if their logs are behind they lose every election while each lost election's new term resets the
//! timers of the up-to-date replicas, forever (the chaos test found such a livelock with five replicas).
//! Nothing else in raft-rs 0.7 is random, and its progress map uses a fixed hasher, so the same inputs give
//! the same outputs.
//!
//! What a caller may read: the state it built by applying [`Committed`] items is a consistent prefix of the
//! history but may be stale on any replica, the leader included (a deposed leader learns of it only when it
//! hears the new term or misses a quorum for an election timeout). For a linearizable read call
//! [`RaftCore::read_index`] and serve the read once the applied index reaches the [`ReadIndex`] it yields:
//! the leader confirms with a heartbeat round that it still led when the read arrived.
//!
//! Membership changes (raft-rs's `ConfChangeV2`): [`RaftCore::change_membership`] adds learners, promotes
//! them and removes voters, several at once through a joint configuration that raft-rs leaves on its own
//! (`Auto`), or explicitly when a leader change lost that step ([`Membership::joint`]). A committed change
//! is applied to raft-rs when it is handed out, so the configuration is always the one at the applied
//! index, and surfaces as [`Committed::Membership`]. A replica opened without voters
//! ([`RaftCore::open`] with none) knows no configuration: it waits for a snapshot, which carries one, and
//! drops appends until then, since entries alone would leave it without the configuration the log was
//! bootstrapped with (the caller compacts when it applies a change that adds a learner, so a snapshot that
//! names the learner exists on every replica that could lead).

mod frame;
mod msg;
mod storage;
#[cfg(test)]
mod tests;

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use meridian_core::{wire, NodeId};
use meridian_store::Vfs;
use protobuf::Message as _;
use raft::eraftpb::{
    ConfChangeSingle, ConfChangeTransition, ConfChangeType, ConfChangeV2, ConfState, Entry, EntryType, Message,
    MessageType, Snapshot,
};
use raft::{RawNode, ReadOnlyOption, Ready, SnapshotStatus, StateRole};

pub use msg::RaftMsg;
pub use storage::{LogError, RaftLog, Recovery};

use meridian_core::splitmix::SplitMix64;
use msg::{node_id, raft_id};

/// Largest proposal. Manager commands are small; the bound keeps every append message far below the wire's
/// frame limit.
pub const PROPOSAL_MAX: usize = 1 << 20;
/// Largest application state a snapshot may carry: a snapshot travels to a follower whole, in one message,
/// which must fit one wire frame with room to spare.
pub const SNAPSHOT_MAX: usize = wire::FRAME_MAX / 2;

/// Timing and flow-control settings, the same on every replica. Times are in ticks of the caller's timer.
#[derive(Clone, Debug)]
pub struct RaftConfig {
    /// Ticks without a leader before a follower campaigns (each replica adds its own jitter of up to as
    /// much again); also how long a leader may go without hearing from a majority before it steps down.
    pub election_ticks: usize,
    /// Ticks between a leader's heartbeats; less than `election_ticks`.
    pub heartbeat_ticks: usize,
    /// Bytes of entries per append message (one entry is always sent, whatever its size).
    pub max_size_per_msg: u64,
    /// Append messages in flight to one follower.
    pub max_inflight_msgs: usize,
    /// Bytes of proposed but uncommitted entries a leader holds; proposals beyond are dropped.
    pub max_uncommitted_bytes: u64,
}

impl Default for RaftConfig {
    fn default() -> Self {
        RaftConfig {
            election_ticks: 10,
            heartbeat_ticks: 2,
            max_size_per_msg: 1 << 20,
            max_inflight_msgs: 64,
            max_uncommitted_bytes: 16 << 20,
        }
    }
}

impl RaftConfig {
    fn validate(&self) -> Result<(), RaftError> {
        let problem = if self.heartbeat_ticks == 0 || self.election_ticks <= self.heartbeat_ticks {
            "need 0 < heartbeat_ticks < election_ticks"
        } else if self.max_inflight_msgs == 0 {
            "max_inflight_msgs must be positive"
        } else if self.max_size_per_msg > SNAPSHOT_MAX as u64 {
            "max_size_per_msg must leave an append message within a wire frame"
        } else if self.max_uncommitted_bytes < self.max_size_per_msg.max(PROPOSAL_MAX as u64) {
            "max_uncommitted_bytes must hold at least one message and one proposal"
        } else {
            return Ok(());
        };
        Err(RaftError::Invalid(problem.into()))
    }

    /// raft-rs's config for one replica; `applied` is where the restored snapshot leaves the state machine.
    fn for_replica(&self, id: NodeId, applied: u64) -> raft::Config {
        raft::Config {
            id: raft_id(id),
            election_tick: self.election_ticks,
            heartbeat_tick: self.heartbeat_ticks,
            applied,
            max_size_per_msg: self.max_size_per_msg,
            max_inflight_msgs: self.max_inflight_msgs,
            max_uncommitted_size: self.max_uncommitted_bytes,
            check_quorum: true,
            pre_vote: true,
            min_election_tick: self.election_ticks,
            max_election_tick: 2 * self.election_ticks,
            read_only_option: ReadOnlyOption::Safe,
            ..raft::Config::default()
        }
    }
}

/// What the core asks of its caller after an input. Nothing in it waits for a sync: the core has already
/// made durable everything these items depend on.
#[derive(Debug, Default)]
pub struct RaftOutput {
    /// Messages for peers; send them now, in any order, over any transport that may lose or reorder them.
    pub messages: Vec<(NodeId, RaftMsg)>,
    /// Commands to apply to the state machine, in this order.
    pub committed: Vec<Committed>,
    /// Answers to [`RaftCore::read_index`].
    pub reads: Vec<ReadIndex>,
}

/// An item of the committed history, in log order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Committed {
    /// A proposal, as passed to [`RaftCore::propose`]. raft's own empty entries are not surfaced, so indexes
    /// may skip.
    Entry { index: u64, term: u64, data: Vec<u8> },
    /// Replace the whole state machine by `data`: the state after applying every entry up to `index`, as some
    /// replica passed it to [`RaftCore::compact`].
    Snapshot { index: u64, term: u64, data: Vec<u8> },
    /// A membership change took effect: the configuration from `index` on.
    Membership { index: u64, membership: Membership },
}

/// A configuration of the group: who votes (the union of both sides while `joint`) and who only learns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Membership {
    pub voters: Vec<NodeId>,
    pub learners: Vec<NodeId>,
    /// Between an old and a new voter set: a decision needs a majority of each.
    pub joint: bool,
}

impl Membership {
    fn of(cs: &ConfState) -> Membership {
        let ids = |raw: &[u64]| -> Vec<NodeId> { raw.iter().filter_map(|&r| node_id(r)).collect() };
        let mut voters = ids(&cs.voters);
        voters.extend(ids(&cs.voters_outgoing));
        voters.sort_unstable();
        voters.dedup();
        let mut learners = ids(&cs.learners);
        learners.extend(ids(&cs.learners_next));
        learners.sort_unstable();
        learners.dedup();
        Membership { voters, learners, joint: !cs.voters_outgoing.is_empty() }
    }
}

/// One step of a membership change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberChange {
    AddLearner(NodeId),
    /// Makes a learner (or a new node) a voter.
    AddVoter(NodeId),
    /// Takes a voter or a learner out.
    Remove(NodeId),
}

impl Committed {
    fn from_snapshot(s: &Snapshot) -> Committed {
        let meta = s.get_metadata();
        Committed::Snapshot { index: meta.index, term: meta.term, data: s.data.to_vec() }
    }
}

/// Once the state machine has applied `index`, it reflects every command committed before the matching
/// [`RaftCore::read_index`] call, so a read served from it then is linearizable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadIndex {
    pub index: u64,
    /// The context passed to `read_index`.
    pub ctx: Vec<u8>,
}

/// Where a proposal went: it is committed if and only if the entry committed at `index` has this `term`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proposal {
    pub index: u64,
    pub term: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum RaftError {
    /// The log could not be read or written (fatal: stop and reopen, fail-stop), or is corrupt (fatal: the
    /// replica needs an operator, e.g. to wipe it and let it rejoin as a new replica).
    #[error(transparent)]
    Log(#[from] LogError),
    /// raft-rs refused to start (invalid configuration or an inconsistent log): fatal.
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    /// The caller passed something unusable; nothing changed and the node may carry on.
    #[error("invalid raft request: {0}")]
    Invalid(String),
}

impl From<std::io::Error> for RaftError {
    fn from(e: std::io::Error) -> Self {
        RaftError::Log(LogError::Io(e))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("raft message from {from} does not decode: {reason}")]
    Decode { from: NodeId, reason: String },
    /// The header names other peers than the link it came over, or is a kind peers never send.
    #[error("raft message from {from} refused: {reason}")]
    Refused { from: NodeId, reason: String },
    #[error(transparent)]
    Fatal(#[from] RaftError),
}

#[derive(Debug, thiserror::Error)]
pub enum ProposeError {
    #[error("not the leader; the leader is {leader:?}")]
    NotLeader { leader: Option<NodeId> },
    /// Empty entries are how raft marks a new term; a command must carry bytes.
    #[error("empty proposal")]
    Empty,
    #[error("proposal of {len} bytes exceeds {PROPOSAL_MAX}")]
    TooLarge { len: usize },
    /// The leader holds too many uncommitted bytes or is handing leadership over; retry later.
    #[error("proposal dropped by raft")]
    Dropped,
    #[error(transparent)]
    Fatal(#[from] RaftError),
}

/// One replica of the manager's log. Every input handles raft's Ready cycle to the end before it returns;
/// after a `Fatal`/`RaftError` (other than `Invalid`) the core must be dropped and reopened.
pub struct RaftCore {
    node: RawNode<RaftLog>,
    id: NodeId,
    /// Draws the election timeouts, seeded by the caller's `election_jitter`.
    timeouts: SplitMix64,
}

impl fmt::Debug for RaftCore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.node.raft;
        f.debug_struct("RaftCore").field("id", &self.id).field("term", &r.term).field("role", &r.state).finish()
    }
}

impl RaftCore {
    /// Opens (or creates) the replica whose log lives in `dir`. An empty log is bootstrapped with `voters`,
    /// which must contain `id` and be the same on every replica; a log with state ignores `voters`. With no
    /// voters an empty log stays empty: the replica joins a running group as a learner the leader added, and
    /// learns the configuration from the snapshot the leader sends it.
    /// `election_jitter` comes from the caller's seeded RNG, different per replica: it seeds the draws of
    /// this replica's election timeouts.
    ///
    /// A restarted replica re-applies from scratch: `out` receives the last snapshot (if any) and then every
    /// entry committed after it that the log knows of; the rest arrives through later inputs.
    pub fn open(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        id: NodeId,
        voters: &[NodeId],
        config: &RaftConfig,
        election_jitter: u64,
        out: &mut RaftOutput,
    ) -> Result<RaftCore, RaftError> {
        config.validate()?;
        let mut log = RaftLog::open(vfs, dir)?;
        if log.is_blank() && !voters.is_empty() {
            log.bootstrap(initial_conf_state(id, voters)?)?;
        }
        let snapshot = log.last_snapshot().clone();
        let raft_config = config.for_replica(id, log.snapshot_index());
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let node = RawNode::new(&raft_config, log, &logger)?;
        let mut core = RaftCore { node, id, timeouts: SplitMix64::new(election_jitter) };
        if !snapshot.is_empty() {
            out.committed.push(Committed::from_snapshot(&snapshot));
        }
        core.drive(out)?;
        Ok(core)
    }

    /// Advances raft's logical clock by one tick: elections, heartbeats, the leader's quorum check.
    pub fn tick(&mut self, out: &mut RaftOutput) -> Result<(), RaftError> {
        self.node.tick();
        self.drive(out)
    }

    /// Handles a message that arrived from peer `from`.
    pub fn step(&mut self, from: NodeId, msg: &RaftMsg, out: &mut RaftOutput) -> Result<(), StepError> {
        let m = msg.decode().map_err(|reason| StepError::Decode { from, reason })?;
        let refuse = |reason: String| Err(StepError::Refused { from, reason });
        if m.from != raft_id(from) || m.to != raft_id(self.id) {
            return refuse(format!("addressed from raft id {} to raft id {}", m.from, m.to));
        }
        // Proposals enter only through `propose`, which checks them; followers never forward any.
        if m.get_msg_type() == MessageType::MsgPropose {
            return refuse("peers do not send proposals".into());
        }
        // Entries from the log's start would build a configuration without the bootstrapped voters; other
        // appends are rejected by raft itself, which tells the leader to go back to where a snapshot starts.
        let from_start = m.get_msg_type() == MessageType::MsgAppend && m.index == 0 && !m.entries.is_empty();
        if from_start && self.knows_no_configuration() {
            return refuse("a replica without a configuration takes a snapshot first".into());
        }
        let stepped = self.node.step(m);
        self.drive(out)?;
        match stepped {
            // A response from a peer the configuration no longer (or not yet) has: stale, nothing to act on.
            Ok(()) | Err(raft::Error::StepPeerNotFound) => Ok(()),
            Err(e) => refuse(e.to_string()),
        }
    }

    /// Appends a command to the log if this replica leads. `Ok` says where it went, not that it will commit:
    /// watch [`RaftOutput::committed`] for an entry at that index with that term.
    pub fn propose(&mut self, data: Vec<u8>, out: &mut RaftOutput) -> Result<Proposal, ProposeError> {
        if !self.is_leader() {
            return Err(ProposeError::NotLeader { leader: self.leader() });
        }
        if data.is_empty() {
            return Err(ProposeError::Empty);
        }
        if data.len() > PROPOSAL_MAX {
            return Err(ProposeError::TooLarge { len: data.len() });
        }
        let proposed = self.node.propose(Vec::new(), data);
        self.settle_proposal(proposed, out)
    }

    /// Proposes one membership change made of `changes` if this replica leads: one voter added or removed (any
    /// number of learners) is a simple change; more go through a joint configuration that raft-rs leaves by
    /// itself once it is committed. No changes proposes leaving a joint configuration. raft-rs turns a
    /// change into an empty entry while another is unapplied (or one is joint and this is not the leave), so
    /// `Ok` does not promise it: watch [`Committed::Membership`].
    pub fn change_membership(
        &mut self,
        changes: &[MemberChange],
        out: &mut RaftOutput,
    ) -> Result<Proposal, ProposeError> {
        if !self.is_leader() {
            return Err(ProposeError::NotLeader { leader: self.leader() });
        }
        let mut cc = ConfChangeV2::default();
        cc.set_transition(ConfChangeTransition::Auto);
        cc.set_changes(changes.iter().map(|&c| single(c)).collect::<Vec<_>>().into());
        let proposed = self.node.propose_conf_change(Vec::new(), cc);
        self.settle_proposal(proposed, out)
    }

    /// Where raft-rs put the entry just proposed (the log's last, whether raft took it or turned it into an
    /// empty entry), after handing out what the proposal caused.
    fn settle_proposal(&mut self, proposed: raft::Result<()>, out: &mut RaftOutput) -> Result<Proposal, ProposeError> {
        let proposal = Proposal { index: self.node.raft.raft_log.last_index(), term: self.term() };
        self.drive(out)?;
        match proposed {
            Ok(()) => Ok(proposal),
            Err(raft::Error::ProposalDropped) => Err(ProposeError::Dropped),
            Err(e) => Err(RaftError::Raft(e).into()),
        }
    }

    /// The configuration this replica has applied.
    pub fn membership(&self) -> Membership {
        Membership::of(&self.node.raft.prs().conf().to_conf_state())
    }

    /// Whether a membership change is proposed and not yet applied here (raft-rs takes one at a time).
    pub fn membership_pending(&self) -> bool {
        self.node.raft.has_pending_conf()
    }

    /// On the leader: whether `peer`'s log holds everything committed but the last `slack` entries.
    pub fn caught_up(&self, peer: NodeId, slack: u64) -> bool {
        let committed = self.commit_index();
        let pr = self.node.raft.prs().get(raft_id(peer));
        self.is_leader() && pr.is_some_and(|p| p.matched + slack >= committed)
    }

    /// Asks the leader to hand leadership to `to`, a voter; it stops taking proposals until `to` leads or an
    /// election timeout passes.
    pub fn transfer_leadership(&mut self, to: NodeId, out: &mut RaftOutput) -> Result<(), RaftError> {
        self.node.transfer_leader(raft_id(to));
        self.drive(out)
    }

    /// A replica opened without voters that no snapshot has reached yet.
    fn knows_no_configuration(&self) -> bool {
        self.membership() == Membership::default()
    }

    /// Asks for a linearizable read point; the answer arrives in [`RaftOutput::reads`] with the same `ctx`,
    /// now or after a heartbeat round. It may never arrive (no leader, a leader that has not yet committed in
    /// its term, lost messages): time out and retry.
    pub fn read_index(&mut self, ctx: Vec<u8>, out: &mut RaftOutput) -> Result<(), RaftError> {
        self.node.read_index(ctx);
        self.drive(out)
    }

    /// Replaces the log up to `applied_index` by `state`, the state machine after applying it, and shrinks the
    /// log file; typically `applied_index()` once everything handed out is applied (raft's empty entries
    /// change no state). Returns whether anything changed. Each replica compacts on its own schedule; a follower that
    /// needs compacted entries gets the leader's snapshot instead.
    pub fn compact(&mut self, applied_index: u64, state: Vec<u8>) -> Result<bool, RaftError> {
        let applied = self.applied_index();
        if applied_index > applied {
            return Err(RaftError::Invalid(format!("compaction to {applied_index} beyond applied index {applied}")));
        }
        if state.len() > SNAPSHOT_MAX {
            return Err(RaftError::Invalid(format!("snapshot of {} bytes exceeds {SNAPSHOT_MAX}", state.len())));
        }
        let conf_state = self.node.raft.prs().conf().to_conf_state();
        Ok(self.node.mut_store().compact(applied_index, conf_state, state)?)
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    pub fn is_leader(&self) -> bool {
        self.node.raft.state == StateRole::Leader
    }

    /// Whether this replica leads and has applied everything committed before its term: only then is its
    /// state machine at least as new as anything another replica has applied.
    pub fn leader_ready(&self) -> bool {
        let log = &self.node.raft.raft_log;
        self.is_leader() && log.term(log.committed).ok() == Some(self.term()) && log.applied >= log.committed
    }

    /// The leader as far as this replica knows; it may be stale (see the module docs on reads).
    pub fn leader(&self) -> Option<NodeId> {
        node_id(self.node.raft.leader_id)
    }

    pub fn term(&self) -> u64 {
        self.node.raft.term
    }

    pub fn commit_index(&self) -> u64 {
        self.node.raft.raft_log.committed
    }

    /// The index of the last item handed out in [`RaftOutput::committed`] (raft's empty entries included).
    pub fn applied_index(&self) -> u64 {
        self.node.raft.raft_log.applied
    }

    pub fn log(&self) -> &RaftLog {
        self.node.store()
    }

    /// Runs raft's Ready cycle until nothing is pending: persist and fsync, then hand out messages and
    /// committed items, then `advance` and handle the LightReady it returns.
    fn drive(&mut self, out: &mut RaftOutput) -> Result<(), RaftError> {
        while self.node.has_ready() {
            let mut rd = self.node.ready();
            self.persist(&rd)?;
            let mut snapshots_to = Vec::new();
            release(&mut rd, out, &mut snapshots_to);
            self.surface(rd.take_committed_entries(), out)?;
            let mut light = self.node.advance(rd);
            if let Some(commit) = light.commit_index() {
                self.node.mut_store().set_commit(commit)?;
            }
            send(light.take_messages(), out, &mut snapshots_to);
            self.surface(light.take_committed_entries(), out)?;
            self.node.advance_apply();
            // raft-rs pauses a follower's replication after sending it a snapshot until told how the send
            // went; we cannot know, so say "finished": replication resumes on the next heartbeat response,
            // and a lost snapshot is simply sent again.
            for to in snapshots_to {
                self.node.report_snapshot(to, SnapshotStatus::Finish);
            }
        }
        self.redraw_election_timeout();
        Ok(())
    }

    /// Replaces raft-rs's thread-local draw of the election timeout by a seeded one. raft consults the timeout
    /// only when a tick advances the election timer, and every reset (which draws) leaves the timer at zero
    /// with nothing later in the same input advancing it. So redrawing at the end of each input that leaves
    /// the timer at zero overwrites every draw before its first use. A zero timer without a reset (a message
    /// from the leader) just gets a fresh draw, as it would with a reset.
    fn redraw_election_timeout(&mut self) {
        let raft = &mut self.node.raft;
        if raft.election_elapsed == 0 {
            let ticks = raft.election_timeout();
            raft.set_randomized_election_timeout(ticks + self.timeouts.below(ticks));
        }
    }

    /// Hands committed proposals to the caller, leaving out raft's empty new-term entries, and applies
    /// membership changes to raft as they go by, so the configuration is the applied index's.
    fn surface(&mut self, entries: Vec<Entry>, out: &mut RaftOutput) -> Result<(), RaftError> {
        // The commit index is written without a sync, so a power loss may take it back. Not past a membership
        // change this replica applied: once the change shows, the voters it took out close their replicas, and a
        // replica that restarted into the configuration before it could need their votes to elect anyone.
        if entries.iter().any(|e| e.get_entry_type() == EntryType::EntryConfChangeV2) {
            self.node.mut_store().sync()?;
        }
        for e in entries {
            match e.get_entry_type() {
                EntryType::EntryNormal if e.data.is_empty() => {}
                EntryType::EntryNormal => {
                    out.committed.push(Committed::Entry { index: e.index, term: e.term, data: e.data.to_vec() })
                }
                EntryType::EntryConfChangeV2 => {
                    let cc = ConfChangeV2::parse_from_bytes(&e.data)
                        .map_err(|err| RaftError::Invalid(format!("undecodable membership change: {err}")))?;
                    let cs = self.node.apply_conf_change(&cc)?;
                    out.committed.push(Committed::Membership { index: e.index, membership: Membership::of(&cs) });
                }
                EntryType::EntryConfChange => unreachable!("this core proposes only ConfChangeV2"),
            }
        }
        Ok(())
    }

    /// Writes what the Ready asks to persist and fsyncs when raft needs it durable (entries, snapshot, vote
    /// or term); a commit-index-only change is written without a sync.
    fn persist(&mut self, rd: &Ready) -> Result<(), RaftError> {
        let log = self.node.mut_store();
        if !rd.snapshot().is_empty() {
            log.apply_snapshot(rd.snapshot().clone())?;
        }
        log.save(rd.entries(), rd.hs())?;
        if rd.must_sync() {
            log.sync()?;
        }
        Ok(())
    }
}

/// Hands out what a persisted Ready holds for the caller: its messages (a leader's and a follower's alike
/// may leave now), the snapshot and committed entries to apply, and the answered reads.
fn release(rd: &mut Ready, out: &mut RaftOutput, snapshots_to: &mut Vec<u64>) {
    send(rd.take_messages(), out, snapshots_to);
    send(rd.take_persisted_messages(), out, snapshots_to);
    if !rd.snapshot().is_empty() {
        out.committed.push(Committed::from_snapshot(rd.snapshot()));
    }
    let reads = rd.take_read_states().into_iter();
    out.reads.extend(reads.map(|r| ReadIndex { index: r.index, ctx: r.request_ctx }));
}

fn initial_conf_state(id: NodeId, voters: &[NodeId]) -> Result<ConfState, RaftError> {
    if !voters.contains(&id) {
        return Err(RaftError::Invalid(format!("{id} bootstraps a log without being one of its voters")));
    }
    let mut ids: Vec<u64> = voters.iter().map(|&v| raft_id(v)).collect();
    ids.sort_unstable();
    ids.dedup();
    Ok(ConfState::from((ids, vec![])))
}

/// Queues raft's messages for the caller, noting the peers that were sent a snapshot.
fn send(msgs: Vec<Message>, out: &mut RaftOutput, snapshots_to: &mut Vec<u64>) {
    for m in msgs {
        let to = node_id(m.to).expect("raft addresses only voters, and every voter id came from a NodeId");
        if m.get_msg_type() == MessageType::MsgSnapshot {
            snapshots_to.push(m.to);
        }
        out.messages.push((to, RaftMsg::encode(&m)));
    }
}

fn single(change: MemberChange) -> ConfChangeSingle {
    let (kind, node) = match change {
        MemberChange::AddLearner(n) => (ConfChangeType::AddLearnerNode, n),
        MemberChange::AddVoter(n) => (ConfChangeType::AddNode, n),
        MemberChange::Remove(n) => (ConfChangeType::RemoveNode, n),
    };
    let mut single = ConfChangeSingle::default();
    single.set_change_type(kind);
    single.node_id = raft_id(node);
    single
}
