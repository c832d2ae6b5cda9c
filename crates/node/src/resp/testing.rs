//! For unit tests: a frontend over a scripted core, so a command's handler can be run as a connection runs it
//! and both the requests it makes and the reply it gives can be checked.

use super::auth::Password;
use super::commands::{dispatch, position, Session};
use super::connection::switch_keyspace;
use super::frame::Frame;
use super::frontend::Frontend;
use crate::drain::Drain;
use crate::durability::{Persistence, SyncPolicy};
use crate::inbox::{Answer, ClientRequest, CoreInbox};
use crate::metrics::NodeMetrics;
use bytes::Bytes;
use meridian_core::acl::{Access, User};
use meridian_core::{Limits, NodeId, Reply, Request, Write};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// A frontend of node 1 with the default limits, over `core`.
pub(crate) fn frontend(core: Arc<dyn CoreInbox>) -> Arc<Frontend> {
    Arc::new(frontend_of(core, None, watch::channel(None).1))
}

/// The same, with the `default` user's password `password` (`--requirepass`).
pub(crate) fn frontend_with_password(core: Arc<dyn CoreInbox>, password: &str) -> Arc<Frontend> {
    let phc = Password::new(password).expect("a password").phc;
    Arc::new(frontend_of(core, Some(phc), watch::channel(None).1))
}

/// The same, without a password, with the users and keyspaces that `access` publishes.
pub(crate) fn frontend_with_access(
    core: Arc<dyn CoreInbox>,
    access: watch::Receiver<Option<Arc<Access>>>,
) -> Arc<Frontend> {
    Arc::new(frontend_of(core, None, access))
}

fn frontend_of(
    core: Arc<dyn CoreInbox>,
    password: Option<String>,
    access: watch::Receiver<Option<Arc<Access>>>,
) -> Frontend {
    let persistence = Arc::new(Persistence::new(SyncPolicy::default()));
    Frontend {
        core,
        limits: Limits::default(),
        resp: Default::default(),
        node: NodeId(1),
        resp_port: 0,
        cluster_nodes: 1,
        metrics: Arc::new(NodeMetrics::new(Arc::default(), persistence, None)),
        client_ids: AtomicU64::new(0),
        drain: Drain::switch().1,
        outbox: Default::default(),
        default_user: User::default_user(password),
        access,
    }
}

/// A core that answers each request at once, as `answer` says, and keeps every request it was given.
pub(crate) struct Scripted {
    answer: Box<dyn Fn(&Request) -> Reply + Send + Sync>,
    asked: Mutex<Vec<Request>>,
}

impl Scripted {
    pub(crate) fn new(answer: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Arc<Scripted> {
        Arc::new(Scripted { answer: Box::new(answer), asked: Mutex::default() })
    }

    /// The requests given so far.
    pub(crate) fn asked(&self) -> Vec<Request> {
        self.asked.lock().unwrap().clone()
    }

    /// The one write given so far; panics if there was anything else.
    pub(crate) fn written(&self) -> Write {
        match self.asked().as_slice() {
            [Request::Write(w)] => w.clone(),
            other => panic!("one write expected, got {other:?}"),
        }
    }

    /// Runs `words` as a connection in `session` would, with this core behind it, and waits for the reply.
    pub(crate) async fn run(self: &Arc<Self>, session: &mut Session, words: &[&str]) -> Frame {
        self.run_on(&frontend(self.clone()), session, words).await
    }

    /// The same, through `frontend` (which should be over this core).
    pub(crate) async fn run_on(&self, frontend: &Frontend, session: &mut Session, words: &[&str]) -> Frame {
        let mut args: Vec<Bytes> = words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect();
        let mut action = dispatch(position(&args[0]), &mut args, session, frontend);
        match action.switch.take() {
            Some(answer) => switch_keyspace(answer, session, frontend).await,
            None => action.reply.take().await,
        }
    }
}

impl CoreInbox for Scripted {
    fn submit(&self, req: Request) -> Answer {
        let reply = (self.answer)(&req);
        self.asked.lock().unwrap().push(req);
        Answer::Given(Some(reply))
    }

    fn enqueue(&self, reqs: Vec<ClientRequest>) {
        for (req, tx) in reqs {
            let _ = tx.send((self.answer)(&req));
            self.asked.lock().unwrap().push(req);
        }
    }

    fn request_shutdown(&self) {}
}
