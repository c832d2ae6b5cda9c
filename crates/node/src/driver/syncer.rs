//! The core's fsync thread: one per core, started at its first fsync on a multi-threaded runtime.
//!
//! An fsync blocks, so it must not run on a runtime worker. tokio's blocking pool would take it, but the pool
//! is shared by every core of the process (three in `meridian demo --nodes 3`) and by anything else that
//! blocks: each hand-off takes the pool's one lock and wakes whichever idle thread its condition variable
//! picks. Under group commit the cores hand off thousands of fsyncs a second, and the profile showed the
//! lock's spinning and sleeping (`sched_yield`, `futex`) beside the fsyncs. A thread of the core's own takes
//! each fsync from a channel nobody else uses.

use std::any::Any;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::thread;
use tokio::sync::oneshot;

/// What a sync returns: the process, and the sync's result or its panic.
pub(super) type Synced<P> = (P, Result<io::Result<()>, Box<dyn Any + Send>>);

type Job<P> = (P, oneshot::Sender<Synced<P>>);

pub(super) struct Syncer<P> {
    jobs: mpsc::Sender<Job<P>>,
}

impl<P: Send + 'static> Syncer<P> {
    /// Starts the thread; it ends once the syncer is dropped.
    pub(super) fn start(name: String, sync: fn(&mut P) -> io::Result<()>) -> io::Result<Self> {
        let (jobs, rx) = mpsc::channel::<Job<P>>();
        thread::Builder::new().name(name).spawn(move || {
            for (mut process, done) in rx {
                let result = catch_unwind(AssertUnwindSafe(|| sync(&mut process)));
                // The core task waits for the answer; it is gone only when the runtime is shutting down.
                let _ = done.send((process, result));
            }
        })?;
        Ok(Syncer { jobs })
    }

    /// Runs `sync` on the thread with `process` moved there, and hands both back.
    pub(super) async fn sync(&self, process: P) -> io::Result<Synced<P>> {
        let (done, answer) = oneshot::channel();
        self.jobs.send((process, done)).map_err(|_| io::Error::other("the fsync thread has stopped"))?;
        answer.await.map_err(|_| io::Error::other("the fsync thread has stopped"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record_thread(threads: &mut Vec<thread::ThreadId>) -> io::Result<()> {
        threads.push(thread::current().id());
        Ok(())
    }

    #[tokio::test]
    async fn each_sync_runs_on_the_one_thread_and_hands_the_process_back() {
        let syncer = Syncer::start("fsync-test".into(), record_thread).unwrap();
        let mut threads = Vec::new();
        for _ in 0..3 {
            let (back, result) = syncer.sync(threads).await.unwrap();
            assert!(result.unwrap().is_ok());
            threads = back;
        }
        assert_eq!(threads.len(), 3);
        assert!(threads.iter().all(|&t| t == threads[0] && t != thread::current().id()), "{threads:?}");
    }

    #[tokio::test]
    async fn a_panic_in_the_sync_comes_back_to_the_caller_and_the_thread_goes_on() {
        let syncer = Syncer::start("fsync-test".into(), |n: &mut u32| {
            *n += 1;
            assert!(*n != 2, "planted panic");
            Ok(())
        })
        .unwrap();
        let (n, result) = syncer.sync(1).await.unwrap();
        let panic = result.unwrap_err();
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"planted panic"));
        let (n, result) = syncer.sync(n).await.unwrap();
        assert!(result.unwrap().is_ok());
        assert_eq!(n, 3);
    }
}
