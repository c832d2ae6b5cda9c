//! Session order per key: a command waits to be submitted until every earlier command of its connection on
//! the same key has been answered.
//!
//! Pipelined commands go to the core without waiting for each other's replies, and a write goes to its chain's
//! head while a read goes to its query node, so `SET k v` then `GET k` in one pipeline could otherwise see the
//! old value: linearizable (the two overlap), but not what a Redis client expects of one connection. Holding
//! back only commands on a key that is still busy keeps pipelines of distinct keys, the common case, at full
//! depth.
//!
//! SCAN and DBSIZE read the whole keyspace. They see every earlier command's effect, since the writer starts
//! their walk only once it has answered everything before them (`pending.rs`); a later command on any key
//! waits for their answer, so it cannot change what they report (a write running ahead of a SCAN could
//! delete a key the SCAN was about to return, which Redis' one-thread order never allows).

use super::commands::{lookup, Command};
use bytes::Bytes;
use meridian_core::ring::key_token;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use tokio::sync::Notify;

/// The reader's side: which unanswered reply, by its position in the connection's queue, last touched each key.
///
/// Keys are tracked by their 64-bit ring token rather than their bytes: two keys that share a token only make one
/// command wait for the other, which costs time, never order. Only commands still unanswered are kept, so the
/// tables stay as small as the pipeline is deep.
pub(crate) struct KeyOrder {
    /// The last unanswered position that touched each key token.
    last: HashMap<u64, u64, BuildHasherDefault<TokenHasher>>,
    /// The same entries in the order they were queued, so answered ones can be dropped from the front.
    unanswered: VecDeque<(u64, u64)>,
    queued: u64,
    /// The position of the last command that reads the whole keyspace; every later keyed command waits for it.
    whole: u64,
    answered: Arc<Progress>,
}

/// How many replies the writer has resolved, shared with the reader. The reader rarely waits (only for a
/// command on a key still busy), so the writer wakes it only when it does: most replies cost one atomic add.
#[derive(Default)]
struct Progress {
    answered: AtomicU64,
    /// Set while the reader waits; the writer checks it after each add (both sequentially consistent, so
    /// one of them always sees the other's write and no wake-up is lost).
    waiting: AtomicBool,
    wake: Notify,
}

/// Ring tokens are already xxh3 hashes, so the table uses them as they are.
#[derive(Default)]
struct TokenHasher(u64);

impl Hasher for TokenHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only u64 tokens are hashed here; fold anything else in rather than lose it.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, token: u64) {
        self.0 = token;
    }
}

/// The writer's side: counts the replies it has resolved, in order.
pub(crate) struct Answered(Arc<Progress>);

impl Answered {
    pub(crate) fn one_more(&self) {
        self.0.answered.fetch_add(1, SeqCst);
        if self.0.waiting.load(SeqCst) {
            self.0.wake.notify_one();
        }
    }
}

/// A writer that stops (its client is gone) answers nothing more, so nothing waits for it any longer.
impl Drop for Answered {
    fn drop(&mut self) {
        self.0.answered.store(u64::MAX, SeqCst);
        self.0.wake.notify_one();
    }
}

pub(crate) fn key_order() -> (KeyOrder, Answered) {
    let progress = Arc::new(Progress::default());
    let order = KeyOrder {
        last: HashMap::default(),
        unanswered: VecDeque::new(),
        queued: 0,
        whole: 0,
        answered: progress.clone(),
    };
    (order, Answered(progress))
}

impl KeyOrder {
    /// Waits until the earlier commands on `args`' keys are answered, then counts `args` as queued next.
    pub(crate) async fn admit(&mut self, args: &[Bytes]) {
        let command = lookup(&args[0]);
        self.forget_answered();
        // The command is recorded before it waits: nothing else is admitted meanwhile, and each key's token is
        // hashed once. A key named twice by the command must not make it wait for itself.
        let position = self.queued + 1;
        let mut wait_for = None;
        let mut keyed = false;
        for key in keys_of(command, args) {
            keyed = true;
            let token = key_token(key);
            wait_for = wait_for.max(self.last.insert(token, position).filter(|&p| p != position));
            self.unanswered.push_back((position, token));
        }
        if keyed && self.whole > 0 {
            wait_for = wait_for.max(Some(self.whole));
        }
        if let Some(position) = wait_for {
            self.answered_up_to(position).await;
        }
        self.queued = position;
        if command.is_some_and(reads_whole_keyspace) {
            self.whole = position;
        }
    }

    /// Waits until the writer has resolved `position` replies (or stopped).
    async fn answered_up_to(&self, position: u64) {
        let progress = &self.answered;
        if progress.answered.load(SeqCst) >= position {
            return;
        }
        progress.waiting.store(true, SeqCst);
        while progress.answered.load(SeqCst) < position {
            progress.wake.notified().await;
        }
        progress.waiting.store(false, SeqCst);
    }

    /// Drops the entries of commands already answered: nothing needs to wait for them.
    fn forget_answered(&mut self) {
        let answered = self.answered.answered.load(SeqCst);
        while let Some(&(position, token)) = self.unanswered.front().filter(|(position, _)| *position <= answered) {
            self.unanswered.pop_front();
            if self.last.get(&token) == Some(&position) {
                self.last.remove(&token);
            }
        }
    }

    /// Counts a reply queued without a command to admit (a protocol error, an oversized argument).
    pub(crate) fn queued_other(&mut self) {
        self.queued += 1;
    }
}

/// Whether a command reads the whole keyspace: a read that names no key (SCAN, DBSIZE), by the command table.
fn reads_whole_keyspace(command: &Command) -> bool {
    command.first_key == 0 && command.flags.contains(&"readonly")
}

/// The keys a command names, by the positions COMMAND reports for it; none for an unknown command or one of
/// the wrong arity (it gets an error without touching a key).
fn keys_of<'a>(command: Option<&Command>, args: &'a [Bytes]) -> impl Iterator<Item = &'a Bytes> {
    let (first, last, step) = match command {
        Some(c) if c.first_key > 0 && c.step > 0 => {
            (c.first_key, if c.last_key < 0 { args.len() as i64 + c.last_key } else { c.last_key }, c.step)
        }
        _ => (1, 0, 1),
    };
    (first..=last.min(args.len() as i64 - 1)).step_by(step as usize).map(|i| &args[i as usize])
}

#[cfg(test)]
mod tests {
    use super::super::commands::args;
    use super::*;

    #[test]
    fn keys_follow_the_command_table() {
        let keys = |w: &[&str]| {
            let args = args(w);
            keys_of(lookup(&args[0]), &args).map(|k| k.to_vec()).collect::<Vec<_>>()
        };
        assert_eq!(keys(&["GET", "a"]), vec![b"a".to_vec()]);
        assert_eq!(keys(&["MSET", "a", "1", "b", "2"]), vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(keys(&["DEL", "a", "b", "c"]).len(), 3);
        assert!(keys(&["PING"]).is_empty());
        assert!(keys(&["NOSUCH", "a"]).is_empty());
    }

    #[tokio::test]
    async fn a_command_on_a_busy_key_waits_for_its_answer_and_others_do_not() {
        let (mut order, answered) = key_order();
        order.admit(&args(&["SET", "k", "v"])).await;
        order.admit(&args(&["GET", "other"])).await;
        let get_k = args(&["GET", "k"]);
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), order.admit(&get_k));
        assert!(waiting.await.is_err(), "GET k waits while SET k is unanswered");
        answered.one_more();
        order.admit(&args(&["GET", "k"])).await;
    }

    #[tokio::test]
    async fn a_writer_that_stops_releases_a_waiting_command() {
        let (mut order, answered) = key_order();
        order.admit(&args(&["SET", "k", "v"])).await;
        let get = args(&["GET", "k"]);
        let waiting = tokio::spawn(async move { order.admit(&get).await });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "GET k waits while SET k is unanswered");
        drop(answered);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting).await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn keyed_commands_wait_for_a_scan_before_them_and_others_do_not() {
        let (mut order, answered) = key_order();
        order.admit(&args(&["SCAN", "0"])).await;
        order.admit(&args(&["PING"])).await;
        let set = args(&["SET", "k", "v"]);
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), order.admit(&set));
        assert!(waiting.await.is_err(), "SET waits while SCAN is unanswered");
        answered.one_more();
        order.admit(&set).await;
    }

    #[tokio::test]
    async fn a_command_naming_a_key_twice_does_not_wait_for_itself() {
        let (mut order, _answered) = key_order();
        let mset = args(&["MSET", "k", "1", "k", "2"]);
        let admitted = tokio::time::timeout(std::time::Duration::from_secs(5), order.admit(&mset));
        assert!(admitted.await.is_ok(), "MSET k 1 k 2 is admitted at once");
    }

    #[tokio::test]
    async fn only_unanswered_commands_are_remembered() {
        let (mut order, answered) = key_order();
        for i in 0..10_000 {
            order.admit(&args(&["SET", &format!("k{i}"), "v"])).await;
            answered.one_more();
        }
        order.admit(&args(&["GET", "k0"])).await;
        assert_eq!(order.last.len(), 1, "only the GET just queued is unanswered");
        assert_eq!(order.unanswered.len(), 1);
    }
}
