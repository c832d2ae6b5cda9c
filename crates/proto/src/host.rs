//! What a node owns and lends to the protocol core it steps: the datastores every keyspace keeps its replicas in
//! ([`Stores`]), the front-end's table of the client requests it waits on ([`RequestTable`]), the housekeeping
//! tick those requests time out by, the wall clock keys' deadlines are judged by, and the request limits. A
//! protocol reaches all of them through `&mut Host` for the length of one step, so no protocol owns what every
//! protocol shares, and the node syncs every store as one job whichever protocol wrote to it.

use crate::requests::{Origin, RequestTable};
use crate::stores::Stores;
use meridian_core::{ErrorKind, KeyspaceId, Limits, NodeId, Reply, Request, RequestId, SyncJob};
use std::time::Duration;

/// How a node takes client requests and how long it waits for them.
#[derive(Clone, Debug)]
pub struct RequestConfig {
    /// Period of the node's housekeeping tick: request expiry, retries, then each protocol's own upkeep.
    pub tick: Duration,
    /// How long a front-end waits for a request's answer before answering "outcome unknown".
    pub request_timeout: Duration,
    pub limits: Limits,
}

impl Default for RequestConfig {
    fn default() -> Self {
        RequestConfig {
            tick: Duration::from_millis(50),
            request_timeout: Duration::from_secs(2),
            limits: Limits::default(),
        }
    }
}

impl RequestConfig {
    /// The request timeout in ticks, at least one.
    pub fn timeout_ticks(&self) -> u64 {
        (self.request_timeout.as_nanos() / self.tick.as_nanos().max(1)).max(1) as u64
    }
}

/// Syncs begun and syncs completed, in the same order (the runner runs one at a time): something written before
/// the `n`-th sync began is durable once more than `n` have completed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Syncs {
    pub begun: u64,
    pub done: u64,
}

pub struct Host {
    pub me: NodeId,
    pub cfg: RequestConfig,
    /// Ticks so far: what requests time out by, so a paused node expires its requests by its own progress.
    pub tick: u64,
    /// The wall clock as the runner last gave it (Unix milliseconds): what deadlines are judged by.
    pub wall_ms: u64,
    pub requests: RequestTable,
    pub stores: Stores,
    pub syncs: Syncs,
}

impl Host {
    /// The host of node `me` in its run `incarnation`, with its datastores open.
    pub fn new(me: NodeId, incarnation: u64, cfg: RequestConfig, stores: Stores) -> Host {
        let requests = RequestTable::new(me, incarnation);
        Host { me, cfg, tick: 0, wall_ms: 0, requests, stores, syncs: Syncs::default() }
    }

    /// Takes client request `id` into the request table for the step under way, or says why it is refused: over
    /// the limits, an administration request (the manager's), or no cluster map yet (`has_map`). A relative
    /// deadline is fixed here, so a request sent again after a bounce keeps it. The step must end with
    /// [`RequestTable::settle`].
    pub fn accept(&mut self, id: RequestId, req: Request, has_map: bool) -> Result<(Origin, Request), Reply> {
        if let Err(over) = self.cfg.limits.check(&req) {
            return Err(Reply::Error(ErrorKind::Invalid, over.to_string()));
        }
        if let Request::Admin(_) = req {
            let msg = "administration is the manager's, not a keyspace protocol's".to_string();
            return Err(Reply::Error(ErrorKind::Invalid, msg));
        }
        if !has_map {
            let msg = format!("{} has not yet received the cluster map; retry", self.me);
            return Err(Reply::Error(ErrorKind::Unavailable, msg));
        }
        let req = match req {
            Request::Write(w) => Request::Write(w.fixed_at(self.wall_ms)),
            other => other,
        };
        let origin = self.requests.track(id, matches!(req, Request::Write(_)), self.tick);
        Ok((origin, req))
    }

    /// Answers the request `origin` names, for a keyspace the map does not have (dropped since the client chose
    /// it), if it is still waited on here.
    pub fn unknown_keyspace(&mut self, origin: &Origin, keyspace: KeyspaceId) -> Option<(RequestId, Reply)> {
        let id = self.requests.complete(origin)?;
        Some((id, Reply::Error(ErrorKind::Invalid, format!("unknown keyspace {}", keyspace.0))))
    }

    /// Advances the tick and answers the requests that waited too long, each with why and whether anything may
    /// have changed; returns the requests to send again (bounced since the last tick).
    pub fn tick(&mut self, mut give_up: impl FnMut(RequestId, Reply)) -> Vec<(Origin, Request)> {
        self.tick += 1;
        for (id, write) in self.requests.expire(self.tick, self.cfg.timeout_ticks()) {
            give_up(id, timed_out(write, &format!("no answer within {:?}", self.cfg.request_timeout)));
        }
        self.requests.take_retries()
    }

    /// Makes every write so far durable at once: a node stores a newer map only once what a restart would judge
    /// by it is durable (`ClusterNode::adopt_map`).
    pub fn sync_now(&mut self) -> std::io::Result<()> {
        self.stores.sync_now().map_err(std::io::Error::other)
    }

    pub fn sync(&mut self) -> std::io::Result<()> {
        self.syncs.begun += 1;
        self.stores.sync().map_err(std::io::Error::other)?;
        self.syncs.done += 1;
        Ok(())
    }

    /// [`meridian_core::Process::begin_sync`]: the fsyncs of every store's writes so far, as one job; with
    /// `skip`, a planted bug, only a flush.
    pub fn begin_sync(&mut self, skip: bool) -> std::io::Result<Option<SyncJob>> {
        self.syncs.begun += 1;
        if skip {
            return self.flush().map(|()| None);
        }
        self.stores.begin_sync().map_err(std::io::Error::other)
    }

    /// After the job of [`Host::begin_sync`] has succeeded.
    pub fn end_sync(&mut self) {
        self.stores.end_sync();
        self.syncs.done += 1;
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.stores.flush().map_err(std::io::Error::other)
    }
}

/// The answer to a request that will get none from its protocol (`why`), saying whether anything may have changed.
pub fn timed_out(write: bool, why: &str) -> Reply {
    let outcome = if write { "the write may or may not have been applied" } else { "nothing was changed" };
    Reply::Error(ErrorKind::Timeout, format!("{why}; {outcome}"))
}
