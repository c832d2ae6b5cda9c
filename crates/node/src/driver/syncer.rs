//! The core's fsync thread: one per core, started at its first fsync on a multi-threaded runtime.
//!
//! An fsync blocks, so it must not run on a runtime worker. tokio's blocking pool would take it, but the pool
//! is shared by every core of the process (three in `meridian demo --nodes 3`) and by anything else that
//! blocks: each hand-off takes the pool's one lock and wakes whichever idle thread its condition variable
//! picks. Under group commit the cores hand off thousands of fsyncs a second, and the profile showed the
//! lock's spinning and sleeping (`sched_yield`, `futex`) beside the fsyncs. A thread of the core's own takes
//! each fsync job ([`SyncJob`]) from a channel nobody else uses, while the core goes on with its inputs.

use meridian_core::SyncJob;
use std::any::Any;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, Notify};

/// How a job ended (its result, or its panic), and how long it ran.
pub(super) type Outcome = (Result<io::Result<()>, Box<dyn Any + Send>>, Duration);

pub(super) struct Syncer {
    jobs: mpsc::Sender<(SyncJob, oneshot::Sender<Outcome>)>,
}

impl Syncer {
    /// Starts the thread; it ends once the syncer is dropped. `wake` is notified after each outcome is sent, so
    /// that an idle core, which does not hold the receiver while it waits, looks for it.
    pub(super) fn start(name: String, wake: Arc<Notify>) -> io::Result<Self> {
        let (jobs, rx) = mpsc::channel::<(SyncJob, oneshot::Sender<Outcome>)>();
        thread::Builder::new().name(name).spawn(move || {
            for (job, done) in rx {
                let started = Instant::now();
                let result = catch_unwind(AssertUnwindSafe(job));
                // The core waits for the outcome; it is gone only when the runtime is shutting down.
                let _ = done.send((result, started.elapsed()));
                wake.notify_one();
            }
        })?;
        Ok(Syncer { jobs })
    }

    /// Runs `job` on the thread. The receiver resolves with its outcome, or fails if the thread has stopped.
    pub(super) fn submit(&self, job: SyncJob) -> oneshot::Receiver<Outcome> {
        let (done, outcome) = oneshot::channel();
        // A failed send drops `done` with the job, which the receiver reports.
        let _ = self.jobs.send((job, done));
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[tokio::test]
    async fn each_job_runs_on_the_one_thread_in_order() {
        let syncer = Syncer::start("fsync-test".into(), Arc::default()).unwrap();
        let threads = Arc::new(Mutex::new(Vec::new()));
        let outcomes: Vec<_> = (0..3)
            .map(|n| {
                let threads = threads.clone();
                syncer.submit(Box::new(move || {
                    threads.lock().unwrap().push((n, thread::current().id()));
                    Ok(())
                }))
            })
            .collect();
        for outcome in outcomes {
            assert!(outcome.await.unwrap().0.unwrap().is_ok());
        }
        let threads = threads.lock().unwrap();
        assert_eq!(threads.iter().map(|&(n, _)| n).collect::<Vec<_>>(), [0, 1, 2]);
        assert!(threads.iter().all(|&(_, t)| t == threads[0].1 && t != thread::current().id()), "{threads:?}");
    }

    #[tokio::test]
    async fn a_panic_in_a_job_comes_back_to_the_caller_and_the_thread_goes_on() {
        let syncer = Syncer::start("fsync-test".into(), Arc::default()).unwrap();
        let panicked = syncer.submit(Box::new(|| panic!("planted panic"))).await.unwrap().0.unwrap_err();
        assert_eq!(panicked.downcast_ref::<&str>(), Some(&"planted panic"));
        let failed = syncer.submit(Box::new(|| Err(io::Error::other("planted")))).await.unwrap().0.unwrap();
        assert_eq!(failed.unwrap_err().to_string(), "planted");
        assert!(syncer.submit(Box::new(|| Ok(()))).await.unwrap().0.unwrap().is_ok());
    }
}
