//! The committer thread: the node's core reduced to what a store sees. Writers hand it puts; it
//! appends each to the store as it takes it and acknowledges it at the durability point of the mode,
//! with the node's batch bounds ([`BATCH_MAX`] puts, [`GROUP_BYTES_MAX`] value bytes):
//!
//! - `Sync`: one put, its fsync, its acknowledgement; no fsync is shared.
//! - `Group`: every put already queued (or arriving within `max_wait`), one fsync, then all their
//!   acknowledgements.
//! - `Async`: acknowledged as soon as appended; an fsync one interval after the oldest unsynced put, and
//!   when the writers are done.

use bytes::Bytes;
use meridian_core::DurabilityMode;
use meridian_node::{SyncPolicy, BATCH_MAX, GROUP_BYTES_MAX};
use meridian_store::{Body, Datastore, Record};
use std::io;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::time::{Duration, Instant};

pub(crate) struct Put {
    pub(crate) writer: usize,
    pub(crate) key: Bytes,
    pub(crate) value: Bytes,
}

/// What the committer did.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Commits {
    pub(crate) syncs: u64,
    /// Async: the longest an acknowledged put waited for its fsync.
    pub(crate) loss_window_max: Duration,
}

struct Committer<'a> {
    store: &'a mut dyn Datastore,
    policy: SyncPolicy,
    acks: Vec<SyncSender<()>>,
    /// Writers whose puts await the next sync.
    waiting: Vec<usize>,
    batch_bytes: usize,
    unsynced_since: Option<Instant>,
    seq: u64,
    commits: Commits,
}

/// Runs until every writer has hung up; `acks[w]` acknowledges writer `w`.
pub(crate) fn run(
    store: &mut dyn Datastore,
    policy: SyncPolicy,
    puts: Receiver<Put>,
    acks: Vec<SyncSender<()>>,
) -> io::Result<Commits> {
    let waiting = Vec::with_capacity(acks.len());
    let mut c = Committer {
        store,
        policy,
        acks,
        waiting,
        batch_bytes: 0,
        unsynced_since: None,
        seq: 0,
        commits: Commits::default(),
    };
    loop {
        let first = match c.next_deadline() {
            Some(deadline) => puts.recv_timeout(deadline.saturating_duration_since(Instant::now())),
            None => puts.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match first {
            Ok(put) => c.batch(put, &puts)?,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        c.commit()?;
    }
    if c.unsynced_since.is_some() {
        c.sync()?;
    }
    Ok(c.commits)
}

impl Committer<'_> {
    /// Async: when the oldest unsynced put's interval runs out.
    fn next_deadline(&self) -> Option<Instant> {
        match self.policy.default {
            DurabilityMode::Async => {
                self.unsynced_since.and_then(|since| since.checked_add(self.policy.async_interval))
            }
            DurabilityMode::Sync | DurabilityMode::Group => None,
        }
    }

    /// Takes `first` and, except in sync mode, what else the batch bounds let in.
    fn batch(&mut self, first: Put, puts: &Receiver<Put>) -> io::Result<()> {
        self.batch_bytes = 0;
        self.put(first)?;
        let close = match self.policy.default {
            DurabilityMode::Sync => return Ok(()),
            DurabilityMode::Group => Instant::now().checked_add(self.policy.group_max_wait),
            DurabilityMode::Async => None,
        };
        let mut taken = 1;
        while taken < BATCH_MAX && self.batch_bytes < GROUP_BYTES_MAX {
            let next = match close {
                Some(close) => puts.recv_timeout(close.saturating_duration_since(Instant::now())).ok(),
                None => puts.try_recv().ok(),
            };
            let Some(put) = next else { break };
            self.put(put)?;
            taken += 1;
        }
        Ok(())
    }

    fn put(&mut self, put: Put) -> io::Result<()> {
        self.seq += 1;
        self.batch_bytes += put.value.len();
        let record = Record { chain: 0, seq: self.seq, key: put.key, body: Body::Value(put.value) };
        self.store.append(&record).map_err(io::Error::other)?;
        self.unsynced_since.get_or_insert_with(Instant::now);
        match self.policy.default {
            DurabilityMode::Async => self.ack(put.writer),
            DurabilityMode::Sync | DurabilityMode::Group => self.waiting.push(put.writer),
        }
        Ok(())
    }

    /// Syncs if a sync is owed now, then acknowledges the puts it covered.
    fn commit(&mut self) -> io::Result<()> {
        let owed = match (self.unsynced_since, self.policy.default) {
            (None, _) => false,
            (Some(since), DurabilityMode::Async) => since.elapsed() >= self.policy.async_interval,
            (Some(_), DurabilityMode::Sync | DurabilityMode::Group) => true,
        };
        if owed {
            self.sync()?;
        }
        for writer in std::mem::take(&mut self.waiting) {
            self.ack(writer);
        }
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        self.store.sync().map_err(io::Error::other)?;
        self.commits.syncs += 1;
        if let (Some(since), DurabilityMode::Async) = (self.unsynced_since.take(), self.policy.default) {
            self.commits.loss_window_max = self.commits.loss_window_max.max(since.elapsed());
        }
        Ok(())
    }

    fn ack(&self, writer: usize) {
        // A writer that stopped waiting (its time ran out) needs no acknowledgement.
        let _ = self.acks[writer].send(());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_store::MemStore;
    use std::sync::mpsc::sync_channel;

    /// Queues `n` puts from writer 0 before the committer starts, so they are all waiting together.
    fn commit_queued(policy: SyncPolicy, n: usize, value_bytes: usize) -> (Commits, MemStore, usize) {
        let (tx, rx) = sync_channel(n);
        let (ack_tx, ack_rx) = sync_channel(n);
        let value = Bytes::from(vec![b'v'; value_bytes]);
        for i in 0..n {
            tx.send(Put { writer: 0, key: Bytes::from(format!("k{i}")), value: value.clone() }).unwrap();
        }
        drop(tx);
        let mut store = MemStore::new();
        let commits = run(&mut store, policy, rx, vec![ack_tx]).unwrap();
        (commits, store, ack_rx.try_iter().count())
    }

    #[test]
    fn sync_mode_syncs_every_put_and_group_mode_once_per_batch() {
        let (commits, store, acks) = commit_queued(SyncPolicy::with_default(DurabilityMode::Sync), 5, 10);
        assert_eq!((commits.syncs, store.stats().live_keys, acks), (5, 5, 5));
        let (commits, _, acks) = commit_queued(SyncPolicy::default(), 5, 10);
        assert_eq!((commits.syncs, acks), (1, 5));
    }

    #[test]
    fn a_group_stops_at_the_byte_bound() {
        let (commits, _, acks) = commit_queued(SyncPolicy::default(), 5, GROUP_BYTES_MAX / 2);
        assert_eq!((commits.syncs, acks), (3, 5), "batches of two half-bound puts");
    }

    #[test]
    fn async_mode_acknowledges_at_once_and_syncs_when_the_writers_leave() {
        let (commits, _, acks) = commit_queued(
            SyncPolicy { async_interval: Duration::from_secs(3600), ..SyncPolicy::with_default(DurabilityMode::Async) },
            5,
            10,
        );
        assert_eq!((commits.syncs, acks), (1, 5));
        assert!(commits.loss_window_max > Duration::ZERO);
    }
}
