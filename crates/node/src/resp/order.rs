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

use super::commands::lookup;
use bytes::Bytes;
use std::collections::HashMap;
use tokio::sync::watch;

/// Entries kept before those already answered are dropped.
const TRACKED_MAX: usize = 4096;

/// The reader's side: which reply, by its position in the connection's queue, last touched each key.
pub(crate) struct KeyOrder {
    last: HashMap<Bytes, u64>,
    queued: u64,
    /// The position of the last command that reads the whole keyspace; every later keyed command waits for it.
    whole: u64,
    answered: watch::Receiver<u64>,
}

/// The writer's side: counts the replies it has resolved, in order.
pub(crate) struct Answered(watch::Sender<u64>);

impl Answered {
    pub(crate) fn one_more(&self) {
        self.0.send_modify(|n| *n += 1);
    }
}

pub(crate) fn key_order() -> (KeyOrder, Answered) {
    let (tx, rx) = watch::channel(0);
    (KeyOrder { last: HashMap::new(), queued: 0, whole: 0, answered: rx }, Answered(tx))
}

impl KeyOrder {
    /// Waits until the earlier commands on `args`' keys are answered, then counts `args` as queued next.
    pub(crate) async fn admit(&mut self, args: &[Bytes]) {
        let keys = keys_of(args);
        let wait_for = keys.iter().filter_map(|k| self.last.get(*k)).copied().chain(self.whole_before(&keys)).max();
        if let Some(position) = wait_for {
            // The writer outlives the reader's wait (it drains the queue), so an error means it failed, and the
            // connection is going anyway.
            let _ = self.answered.wait_for(|&n| n >= position).await;
        }
        self.queued += 1;
        if reads_whole_keyspace(args) {
            self.whole = self.queued;
        }
        for key in keys {
            self.last.insert(key.clone(), self.queued);
        }
        if self.last.len() > TRACKED_MAX {
            let answered = *self.answered.borrow();
            self.last.retain(|_, &mut position| position > answered);
        }
    }

    /// The whole-keyspace read a command on `keys` must wait for, if it has keys and there was one.
    fn whole_before(&self, keys: &[&Bytes]) -> Option<u64> {
        (!keys.is_empty() && self.whole > 0).then_some(self.whole)
    }

    /// Counts a reply queued without a command to admit (a protocol error, an oversized argument).
    pub(crate) fn queued_other(&mut self) {
        self.queued += 1;
    }
}

/// Whether a command reads the whole keyspace: a read that names no key (SCAN, DBSIZE), by the command table.
fn reads_whole_keyspace(args: &[Bytes]) -> bool {
    lookup(&args[0]).is_some_and(|c| c.first_key == 0 && c.flags.contains(&"readonly"))
}

/// The keys a command names, by the positions COMMAND reports for it; none for an unknown command or one of
/// the wrong arity (it gets an error without touching a key).
fn keys_of(args: &[Bytes]) -> Vec<&Bytes> {
    let Some(command) = lookup(&args[0]) else { return Vec::new() };
    if command.first_key <= 0 || command.step <= 0 {
        return Vec::new();
    }
    let last = if command.last_key < 0 { args.len() as i64 + command.last_key } else { command.last_key };
    let positions = (command.first_key..=last.min(args.len() as i64 - 1)).step_by(command.step as usize);
    positions.map(|i| &args[i as usize]).collect()
}

#[cfg(test)]
mod tests {
    use super::super::commands::args;
    use super::*;

    #[test]
    fn keys_follow_the_command_table() {
        let keys = |w: &[&str]| keys_of(&args(w)).into_iter().map(|k| k.to_vec()).collect::<Vec<_>>();
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
}
