//! Session order per key: a command waits to be submitted until every earlier command of its connection on
//! the same key has been answered.
//!
//! Pipelined commands go to the core without waiting for each other's replies, and a write goes to its chain's
//! head while a read goes to its query node, so `SET k v` then `GET k` in one pipeline could otherwise see the
//! old value: linearizable (the two overlap), but not what a Redis client expects of one connection. Holding
//! back only commands on a key that is still busy keeps pipelines of distinct keys, the common case, at full
//! depth.
//!
//! SCAN, DBSIZE, KEYS, FLUSHDB and FLUSHALL cover the whole keyspace. They see every earlier command's effect,
//! since the connection starts their walk only once it has answered everything before them (`pending.rs`); a
//! later command on any key waits for their answer, so it cannot change what they report or do (a write running
//! ahead of a SCAN could delete a key the SCAN was about to return, and one running ahead of a FLUSHDB be
//! flushed, which Redis' one-thread order never allows).

use super::commands::Command;
use bytes::Bytes;
use meridian_core::ring::key_hash;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// Which unanswered reply, by its position in the connection's queue, last touched each key.
///
/// Keys are tracked by a 64-bit hash of their bytes (`key_hash`) rather than the bytes: two keys that share a hash
/// only make one command wait for the other, which costs time, never order. Only commands still unanswered are kept, so the
/// list stays as short as the pipeline is deep. A short list is searched from its end, which costs less than
/// keeping a hash table in step with it; once it outgrows [`SEARCH_MAX`] (deep pipelines, commands of many
/// keys) a table indexes it until it empties again.
#[derive(Default)]
pub(crate) struct KeyOrder {
    /// The keys of the unanswered commands, as (position, token), in the order they were queued.
    unanswered: VecDeque<(u64, u64)>,
    /// The last unanswered position that touched each key token, while `unanswered` is too long to search.
    index: Option<HashMap<u64, u64, BuildHasherDefault<TokenHasher>>>,
    queued: u64,
    /// The position of the last command that covers the whole keyspace; every later keyed command waits for it.
    whole: u64,
    /// How many of the queued replies the connection has answered, in order.
    answered: u64,
}

/// The longest list of unanswered keys searched entry by entry; a longer one is indexed.
const SEARCH_MAX: usize = 64;

/// Key hashes are already xxh3 hashes, so the table uses them as they are.
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

impl KeyOrder {
    /// Counts `args`, of `command` in the table (none: unknown), as queued next. Returns how many replies must be
    /// answered before it may be submitted: the position of the last earlier command on one of its keys (or of a
    /// whole-keyspace read) still unanswered.
    pub(crate) fn admit(&mut self, command: Option<&Command>, args: &[Bytes]) -> Option<u64> {
        self.forget_answered();
        let position = self.queued + 1;
        let mut wait_for = None;
        let mut keyed = false;
        for key in keys_of(command, args) {
            keyed = true;
            wait_for = wait_for.max(self.touch(key_hash(key), position));
        }
        if keyed && self.whole > 0 {
            wait_for = wait_for.max(Some(self.whole));
        }
        self.queued = position;
        if command.is_some_and(covers_whole_keyspace) {
            self.whole = position;
        }
        wait_for.filter(|&p| p > self.answered)
    }

    /// Records that the command at `position` touches `token`; returns the last earlier unanswered position that
    /// did. A key named twice by one command must not make it wait for itself.
    fn touch(&mut self, token: u64, position: u64) -> Option<u64> {
        if self.index.is_none() && self.unanswered.len() >= SEARCH_MAX {
            self.index = Some(self.unanswered.iter().map(|&(p, t)| (t, p)).collect());
        }
        self.unanswered.push_back((position, token));
        let before = match &mut self.index {
            Some(index) => index.insert(token, position),
            None => self.unanswered.iter().rev().skip(1).find(|&&(_, t)| t == token).map(|&(p, _)| p),
        };
        before.filter(|&p| p != position)
    }

    /// Counts the next queued reply as answered.
    pub(crate) fn one_more(&mut self) {
        self.answered += 1;
    }

    /// How many queued replies have been answered.
    pub(crate) fn answered(&self) -> u64 {
        self.answered
    }

    /// Drops the entries of commands already answered: nothing needs to wait for them.
    fn forget_answered(&mut self) {
        let answered = self.answered;
        while let Some(&(position, token)) = self.unanswered.front().filter(|(position, _)| *position <= answered) {
            self.unanswered.pop_front();
            if let Some(index) = &mut self.index {
                if index.get(&token) == Some(&position) {
                    index.remove(&token);
                }
            }
        }
        if self.unanswered.is_empty() {
            self.index = None;
        }
    }

    /// Counts a reply queued without a command to admit (a protocol error, an oversized argument).
    pub(crate) fn queued_other(&mut self) {
        self.queued += 1;
    }
}

/// Whether a command covers the whole keyspace: a read or a write that names no key (SCAN, DBSIZE, FLUSHDB), by
/// the command table.
fn covers_whole_keyspace(command: &Command) -> bool {
    command.first_key == 0 && (command.flags.contains(&"readonly") || command.flags.contains(&"write"))
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
    use super::super::commands::{args, lookup};
    use super::*;

    fn admit(order: &mut KeyOrder, words: &[&str]) -> Option<u64> {
        let args = args(words);
        order.admit(lookup(&args[0]), &args)
    }

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

    #[test]
    fn a_command_on_a_busy_key_waits_for_its_answer_and_others_do_not() {
        let mut order = KeyOrder::default();
        assert_eq!(admit(&mut order, &["SET", "k", "v"]), None);
        assert_eq!(admit(&mut order, &["GET", "other"]), None);
        assert_eq!(admit(&mut order, &["GET", "k"]), Some(1), "GET k waits for SET k's answer");
        order.one_more();
        order.one_more();
        order.one_more();
        assert_eq!(admit(&mut order, &["GET", "k"]), None);
    }

    #[test]
    fn a_key_answered_already_makes_nothing_wait() {
        let mut order = KeyOrder::default();
        admit(&mut order, &["SET", "k", "v"]);
        admit(&mut order, &["SET", "j", "v"]);
        order.one_more();
        assert_eq!(admit(&mut order, &["GET", "k"]), None, "SET k is answered");
        assert_eq!(admit(&mut order, &["GET", "j"]), Some(2));
    }

    #[test]
    fn keyed_commands_wait_for_a_scan_before_them_and_others_do_not() {
        let mut order = KeyOrder::default();
        admit(&mut order, &["SCAN", "0"]);
        assert_eq!(admit(&mut order, &["PING"]), None);
        assert_eq!(admit(&mut order, &["SET", "k", "v"]), Some(1), "SET waits while SCAN is unanswered");
        order.one_more();
        assert_eq!(admit(&mut order, &["SET", "j", "v"]), None);
    }

    #[test]
    fn a_command_naming_a_key_twice_does_not_wait_for_itself() {
        let mut order = KeyOrder::default();
        assert_eq!(admit(&mut order, &["MSET", "k", "1", "k", "2"]), None);
    }

    #[test]
    fn only_unanswered_commands_are_remembered() {
        let mut order = KeyOrder::default();
        for i in 0..10_000 {
            admit(&mut order, &["SET", &format!("k{i}"), "v"]);
            order.one_more();
        }
        assert_eq!(admit(&mut order, &["GET", "k0"]), None);
        assert_eq!(order.unanswered.len(), 1, "only the GET just queued is unanswered");
        assert!(order.index.is_none());
    }

    /// Pipelines shallow and deep (past `SEARCH_MAX` keys, where the list is indexed, and back), with commands of
    /// one key and of several, some repeated: every command waits for exactly what a plain search of all
    /// unanswered commands finds.
    #[test]
    fn deep_and_shallow_pipelines_wait_as_a_full_search_says() {
        let mut order = KeyOrder::default();
        // Every command queued so far, by position (from 1), with its keys.
        let mut queued: Vec<Vec<String>> = Vec::new();
        let (mut answered, mut indexed, mut searched_after) = (0usize, false, false);
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        for round in 0..4_000 {
            // Stretches of few answers make the pipeline deep; then it drains.
            let (depth, answer_one_in) = if (round / 500) % 2 == 0 { (8, 2) } else { (200, 8) };
            if queued.len() - answered >= depth || next(answer_one_in) == 0 {
                for _ in 0..(1 + next(4) as usize).min(queued.len() - answered) {
                    order.one_more();
                    answered += 1;
                }
                continue;
            }
            let keys: Vec<String> = (0..1 + next(3)).map(|_| format!("k{}", next(150))).collect();
            let mut words = vec!["MSET".to_string()];
            keys.iter().for_each(|k| words.extend([k.clone(), "v".into()]));
            let position = queued.len() + 1;
            let expected = (answered..queued.len())
                .filter(|&i| queued[i].iter().any(|k| keys.contains(k)))
                .map(|i| i as u64 + 1)
                .max();
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            assert_eq!(admit(&mut order, &words), expected, "command {position}: {words:?}");
            queued.push(keys);
            indexed |= order.index.is_some();
            searched_after |= indexed && order.index.is_none();
        }
        assert!(queued.len() > 2_000, "{} commands", queued.len());
        assert!(indexed && searched_after, "the pipeline was indexed ({indexed}), then searched again");
    }
}
