//! Closed-loop clients that read, write and delete a few hot keys through random front-ends and
//! record every operation in the history format of DESIGN.md §4. Values are unique per write, so a
//! read names exactly the write it observed.
//!
//! After the faults end, a grace period lets the cluster heal; from then on every operation must
//! succeed (a timeout then is reported as a liveness failure), and the clients turn to reads only, so
//! the history ends with reads of every key that expose any lost acknowledged write.

use crate::rng::SimRng;
use crate::world::{Event, World};
use bytes::Bytes;
use meridian_check::{History, OpKind, Recorder};
use meridian_core::{Condition, NodeId, Process, Reply, Request, Write};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientEvent {
    Next { client: usize },
    Timeout { client: usize, op: usize },
}

#[derive(Clone, Debug)]
pub struct WorkloadParams {
    pub clients: usize,
    pub keys: usize,
    pub read_ratio: f64,
    pub delete_ratio: f64,
    /// How long a client waits before recording the outcome as unknown.
    pub timeout: Duration,
    pub think_max: Duration,
}

impl WorkloadParams {
    pub fn random(rng: &mut SimRng) -> WorkloadParams {
        WorkloadParams {
            clients: rng.range(2, 8) as usize,
            keys: rng.range(1, 6) as usize,
            read_ratio: 0.2 + rng.unit() * 0.6,
            delete_ratio: rng.unit() * 0.2,
            timeout: Duration::from_secs(3),
            think_max: rng.duration(Duration::from_micros(100), Duration::from_millis(20)),
        }
    }
}

/// Phases of a run, in virtual nanoseconds.
#[derive(Clone, Copy, Debug)]
pub struct Phases {
    /// Faults stop and everything heals.
    pub faults_end: u64,
    /// From here on every operation must succeed, and clients only read.
    pub must_progress: u64,
    /// No new operations after this.
    pub end: u64,
}

struct Client {
    pending: Option<usize>,
    writes: u64,
}

pub struct Workload {
    params: WorkloadParams,
    phases: Phases,
    rng: SimRng,
    clients: Vec<Client>,
    recorder: Recorder,
    /// Kind and invocation time of every operation, by index.
    ops: Vec<(OpKind, u64)>,
    nodes: Vec<NodeId>,
    /// The first operation that failed to complete once progress was required.
    pub stall: Option<String>,
}

impl Workload {
    pub fn new(params: WorkloadParams, phases: Phases, rng: SimRng, nodes: Vec<NodeId>) -> Workload {
        let clients = (0..params.clients).map(|_| Client { pending: None, writes: 0 }).collect();
        Workload { params, phases, rng, clients, recorder: Recorder::new(), ops: Vec::new(), nodes, stall: None }
    }

    pub fn start<P: Process>(&mut self, world: &mut World<P>) {
        for client in 0..self.clients.len() {
            let at = world.now() + self.think();
            world.schedule(at, Event::Client(ClientEvent::Next { client }));
        }
    }

    fn think(&mut self) -> u64 {
        self.rng.range(0, self.params.think_max.as_nanos() as u64)
    }

    pub fn handle<P: Process>(&mut self, event: ClientEvent, world: &mut World<P>) {
        match event {
            ClientEvent::Next { client } => self.issue(client, world),
            ClientEvent::Timeout { client, op } => {
                if self.clients[client].pending == Some(op) {
                    self.clients[client].pending = None;
                    self.note_stall(op, "timed out");
                    self.next(client, world);
                }
            }
        }
    }

    fn issue<P: Process>(&mut self, client: usize, world: &mut World<P>) {
        let now = world.now();
        if now >= self.phases.end {
            return;
        }
        let key = format!("k{}", self.rng.index(self.params.keys));
        let roll = self.rng.unit();
        let (kind, value) = if now >= self.phases.must_progress || roll < self.params.read_ratio {
            (OpKind::Get, None)
        } else if roll < self.params.read_ratio + self.params.delete_ratio {
            (OpKind::Delete, None)
        } else {
            self.clients[client].writes += 1;
            (OpKind::Put, Some(format!("c{client}-{}", self.clients[client].writes)))
        };
        let req = match kind {
            OpKind::Get => Request::Get { key: Bytes::from(key.clone()) },
            _ => Request::Write(Write {
                key: Bytes::from(key.clone()),
                value: value.clone().map(Bytes::from),
                cond: Condition::Always,
            }),
        };
        let op = self.recorder.invoke(client as u64, kind, key, value, None, now);
        self.ops.push((kind, now));
        self.clients[client].pending = Some(op);
        let node = self.nodes[self.rng.index(self.nodes.len())];
        world.client_send(client, op, node, req);
        let deadline = now + self.params.timeout.as_nanos() as u64;
        world.schedule(deadline, Event::Client(ClientEvent::Timeout { client, op }));
    }

    fn next<P: Process>(&mut self, client: usize, world: &mut World<P>) {
        let at = world.now() + self.think();
        world.schedule(at, Event::Client(ClientEvent::Next { client }));
    }

    /// A front-end's answer reached the client.
    pub fn on_response<P: Process>(&mut self, client: usize, op: usize, reply: Reply, world: &mut World<P>) {
        if self.clients[client].pending != Some(op) {
            return;
        }
        self.clients[client].pending = None;
        let now = world.now();
        match (self.ops[op].0, reply) {
            (OpKind::Get, Reply::Value(v)) => {
                let v = v.map(|b| String::from_utf8_lossy(&b).into_owned());
                self.recorder.complete(op, Some(true), v, now);
            }
            (OpKind::Put | OpKind::Delete, Reply::Written { applied: true, .. }) => {
                self.recorder.complete(op, Some(true), None, now);
            }
            (_, Reply::Error(kind, msg)) => {
                if kind.certainly_not_applied() {
                    self.recorder.complete(op, Some(false), None, now);
                }
                self.note_stall(op, &format!("failed: {kind} {msg}"));
            }
            (kind, other) => self.note_stall(op, &format!("{kind:?} got an impossible answer {other:?}")),
        }
        self.next(client, world);
    }

    fn note_stall(&mut self, op: usize, what: &str) {
        let invoked = self.ops[op].1;
        if invoked >= self.phases.must_progress && self.stall.is_none() {
            self.stall =
                Some(format!("operation {op} invoked at {} ms, after the cluster healed, {what}", invoked / 1_000_000));
        }
    }

    pub fn finish(self) -> History {
        self.recorder.finish()
    }
}
