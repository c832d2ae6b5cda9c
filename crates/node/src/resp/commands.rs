//! The command table and dispatch: names are matched case-insensitively, arity is checked as Redis
//! checks it (a positive arity is exact, a negative one a minimum, both counting the name), and
//! errors are worded as Redis words them so clients and their users recognise them.

use super::acl::{self, Guard};
use super::admin;
use super::atomic;
use super::auth;
use super::expiry;
use super::flush;
use super::frame::{Frame, Protocol};
use super::frontend::Frontend;
use super::hash_fields;
use super::hashes;
use super::hrandfield;
use super::info;
use super::keys;
use super::kv;
use super::pending::Pending;
use super::ranges;
use super::scan;
use super::set_forms;
use super::strings;
use crate::inbox::{Answer, Handover};
use bytes::Bytes;
use meridian_core::KeyspaceId;
use std::borrow::Cow;

/// Per-connection state.
pub(crate) struct Session {
    /// CLIENT ID.
    pub(crate) id: u64,
    /// Set by CLIENT SETNAME (or HELLO … SETNAME).
    pub(crate) name: Option<Bytes>,
    /// Where the connection's keys live: `default` until SELECT or KEYSPACE chooses another.
    pub(crate) keyspace: KeyspaceId,
    /// RESP2 until HELLO 3.
    pub(crate) protocol: Protocol,
    /// Whether more of the client's commands were already read when this one was parsed (it pipelines): its
    /// requests then queue for the core task's batch rather than step the core one at a time ([`Frontend::submit`]).
    pub(crate) pipelining: bool,
    /// Requests of the pipeline not yet handed to the core ([`Frontend::flush`]).
    pub(crate) queued: Handover,
    /// Who the connection authenticated as, and what that user may do (`acl/guard.rs`).
    pub(crate) guard: Guard,
}

impl Session {
    pub(crate) fn new(id: u64) -> Session {
        Session {
            id,
            name: None,
            keyspace: KeyspaceId::DEFAULT,
            protocol: Protocol::Resp2,
            pipelining: false,
            queued: Handover::default(),
            guard: Guard::open(),
        }
    }

    /// A client connection's session: authenticated only if the `default` user needs no password.
    pub(crate) fn for_client(id: u64, frontend: &Frontend) -> Session {
        Session { guard: Guard::for_client(frontend), ..Session::new(id) }
    }
}

/// What a command produces: its reply, and whether the connection closes after it.
pub(crate) struct Action {
    pub(crate) reply: Pending,
    pub(crate) close: bool,
    /// The command's place in [`COMMANDS`], for its statistics; None for what is not a known command.
    pub(crate) command: Option<usize>,
    /// SELECT and KEYSPACE: the core's answer naming the keyspace to switch to. The connection waits for
    /// it before it runs its next command, which must already see the new keyspace; the reply comes from it.
    pub(crate) switch: Option<Answer>,
}

impl Action {
    pub(crate) fn close_after(frame: Frame) -> Action {
        Action { reply: Pending::Ready(frame), close: true, command: None, switch: None }
    }

    pub(crate) fn switch(rx: Answer) -> Action {
        Action { reply: Pending::Ready(Frame::ok()), close: false, command: None, switch: Some(rx) }
    }
}

impl From<Frame> for Action {
    fn from(frame: Frame) -> Action {
        Action { reply: Pending::Ready(frame), close: false, command: None, switch: None }
    }
}

impl From<Pending> for Action {
    fn from(reply: Pending) -> Action {
        Action { reply, close: false, command: None, switch: None }
    }
}

/// A command's handler. It may take its arguments out (`std::mem::take`) rather than clone them: they are not read
/// after it returns, and a key or value moved into a request is two shared-count updates fewer, each on the
/// command's buffer, which the connection's and the core's threads both touch.
type Handler = fn(&mut [Bytes], &mut Session, &Frontend) -> Action;

/// One implemented command, with the key positions and flags that COMMAND reports.
pub(crate) struct Command {
    pub(crate) name: &'static str,
    pub(crate) arity: i64,
    pub(crate) flags: &'static [&'static str],
    pub(crate) first_key: i64,
    pub(crate) last_key: i64,
    pub(crate) step: i64,
    run: Handler,
}

const fn command(name: &'static str, arity: i64, flags: &'static [&'static str], run: Handler) -> Command {
    Command { name, arity, flags, first_key: 0, last_key: 0, step: 0, run }
}

const fn keyed(
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
    keys: (i64, i64, i64),
    run: Handler,
) -> Command {
    Command { name, arity, flags, first_key: keys.0, last_key: keys.1, step: keys.2, run }
}

pub(crate) const COMMANDS: &[Command] = &[
    keyed("get", 2, &["readonly", "fast"], (1, 1, 1), kv::get),
    keyed("set", -3, &["write", "denyoom"], (1, 1, 1), kv::set),
    keyed("del", -2, &["write"], (1, -1, 1), kv::del),
    keyed("exists", -2, &["readonly", "fast"], (1, -1, 1), kv::exists),
    keyed("mget", -2, &["readonly", "fast"], (1, -1, 1), kv::mget),
    keyed("mset", -3, &["write", "denyoom"], (1, -1, 2), kv::mset),
    keyed("incr", 2, &["write", "denyoom", "fast"], (1, 1, 1), strings::incr),
    keyed("decr", 2, &["write", "denyoom", "fast"], (1, 1, 1), strings::decr),
    keyed("incrby", 3, &["write", "denyoom", "fast"], (1, 1, 1), strings::incrby),
    keyed("decrby", 3, &["write", "denyoom", "fast"], (1, 1, 1), strings::decrby),
    keyed("append", 3, &["write", "denyoom"], (1, 1, 1), strings::append),
    keyed("getdel", 2, &["write", "fast"], (1, 1, 1), strings::getdel),
    keyed("strlen", 2, &["readonly", "fast"], (1, 1, 1), strings::strlen),
    keyed("type", 2, &["readonly", "fast"], (1, 1, 1), kv::key_type),
    keyed("hset", -4, &["write", "denyoom", "fast"], (1, 1, 1), hashes::hset),
    keyed("hmset", -4, &["write", "denyoom", "fast"], (1, 1, 1), hashes::hmset),
    keyed("hdel", -3, &["write", "fast"], (1, 1, 1), hashes::hdel),
    keyed("hget", 3, &["readonly", "fast"], (1, 1, 1), hashes::hget),
    keyed("hmget", -3, &["readonly", "fast"], (1, 1, 1), hashes::hmget),
    keyed("hgetall", 2, &["readonly"], (1, 1, 1), hashes::hgetall),
    keyed("hlen", 2, &["readonly", "fast"], (1, 1, 1), hashes::hlen),
    keyed("hexists", 3, &["readonly", "fast"], (1, 1, 1), hashes::hexists),
    keyed("expire", -3, &["write", "fast"], (1, 1, 1), expiry::expire),
    keyed("pexpire", -3, &["write", "fast"], (1, 1, 1), expiry::expire),
    keyed("expireat", -3, &["write", "fast"], (1, 1, 1), expiry::expire),
    keyed("pexpireat", -3, &["write", "fast"], (1, 1, 1), expiry::expire),
    keyed("persist", 2, &["write", "fast"], (1, 1, 1), expiry::persist),
    keyed("ttl", 2, &["readonly", "fast"], (1, 1, 1), expiry::ttl),
    keyed("pttl", 2, &["readonly", "fast"], (1, 1, 1), expiry::pttl),
    keyed("expiretime", 2, &["readonly", "fast"], (1, 1, 1), expiry::expiretime),
    keyed("pexpiretime", 2, &["readonly", "fast"], (1, 1, 1), expiry::pexpiretime),
    keyed("incrbyfloat", 3, &["write", "denyoom", "fast"], (1, 1, 1), strings::incrbyfloat),
    keyed("setrange", 4, &["write", "denyoom"], (1, 1, 1), strings::setrange),
    keyed("getex", -2, &["write", "fast"], (1, 1, 1), strings::getex),
    keyed("hsetnx", 4, &["write", "denyoom", "fast"], (1, 1, 1), hashes::hsetnx),
    keyed("hincrby", 4, &["write", "denyoom", "fast"], (1, 1, 1), hashes::hincrby),
    keyed("hincrbyfloat", 4, &["write", "denyoom", "fast"], (1, 1, 1), hashes::hincrbyfloat),
    command("scan", -2, &["readonly"], scan::scan),
    command("dbsize", 1, &["readonly", "fast"], scan::dbsize),
    command("ping", -1, &["fast"], admin::ping),
    command("echo", 2, &["fast"], admin::echo),
    command("select", 2, &["loading", "stale", "fast"], admin::select),
    command("keyspace", 2, &["loading", "stale", "fast"], admin::keyspace),
    command("quit", -1, &["loading", "stale", "fast"], admin::quit),
    command("command", -1, &["loading", "stale"], admin::command),
    command("config", -2, &["admin", "loading", "stale"], admin::config),
    command("info", -1, &["loading", "stale"], info::info),
    command("client", -2, &["loading", "stale"], admin::client),
    command("auth", -2, &["noscript", "loading", "stale", "fast", "no_auth"], auth::auth),
    command("hello", -1, &["noscript", "loading", "stale", "fast"], admin::hello),
    command("acl", -2, &["loading", "stale"], acl::acl),
    keyed("setnx", 3, &["write", "denyoom", "fast"], (1, 1, 1), set_forms::setnx),
    keyed("setex", 4, &["write", "denyoom"], (1, 1, 1), set_forms::setex),
    keyed("psetex", 4, &["write", "denyoom"], (1, 1, 1), set_forms::psetex),
    keyed("getset", 3, &["write", "denyoom", "fast"], (1, 1, 1), set_forms::getset),
    keyed("unlink", -2, &["write", "fast"], (1, -1, 1), kv::del),
    keyed("getrange", 4, &["readonly"], (1, 1, 1), ranges::getrange),
    keyed("substr", 4, &["readonly"], (1, 1, 1), ranges::getrange),
    keyed("hkeys", 2, &["readonly"], (1, 1, 1), hash_fields::hkeys),
    keyed("hvals", 2, &["readonly"], (1, 1, 1), hash_fields::hvals),
    keyed("hstrlen", 3, &["readonly", "fast"], (1, 1, 1), hash_fields::hstrlen),
    keyed("hrandfield", -2, &["readonly"], (1, 1, 1), hrandfield::hrandfield),
    command("keys", 2, &["readonly"], keys::keys),
    command("time", 1, &["loading", "stale", "fast"], info::time),
    command("flushdb", -1, &["write"], flush::flushdb),
    command("flushall", -1, &["write"], flush::flushall),
    keyed("rename", 3, &["write"], (1, 2, 1), atomic::rename),
    keyed("renamenx", 3, &["write", "fast"], (1, 2, 1), atomic::renamenx),
    keyed("copy", -3, &["write", "denyoom"], (1, 2, 1), atomic::copy),
    keyed("msetnx", -3, &["write", "denyoom"], (1, -1, 2), atomic::msetnx),
];

pub(crate) fn lookup(name: &[u8]) -> Option<&'static Command> {
    position(name).map(|i| &COMMANDS[i])
}

/// Where the command `name` is in [`COMMANDS`], whatever its case. Names are compared folded into one number
/// each ([`folded`]): a byte-by-byte case-insensitive comparison cost about 50 instructions per command tried.
pub(crate) fn position(name: &[u8]) -> Option<usize> {
    let name = folded(name)?;
    FOLDED.iter().position(|&n| n == name)
}

/// The names of [`COMMANDS`], in its order, as [`folded`] folds them.
const FOLDED: [u128; COMMANDS.len()] = {
    let mut folded_names = [0; COMMANDS.len()];
    let mut i = 0;
    while i < COMMANDS.len() {
        match folded(COMMANDS[i].name.as_bytes()) {
            Some(n) => folded_names[i] = n,
            None => panic!("a command name is longer than 15 bytes"),
        }
        i += 1;
    }
    folded_names
};

/// A name of up to 15 bytes as one number: its bytes with bit 5 set, and its length in the top byte. Every
/// command name is lowercase letters, and a byte with bit 5 set is a lowercase letter only if it was that letter
/// in either case, so two names fold alike exactly when they are the same but for the case of their letters.
/// Folded as one number, with the bits set by a mask of the name's length, rather than byte by byte: a shift of a
/// `u128` per byte cost more than the comparisons it saved.
const fn folded(name: &[u8]) -> Option<u128> {
    if name.len() > 15 {
        return None;
    }
    let mut bytes = [0; 16];
    let (head, _) = bytes.split_at_mut(name.len());
    head.copy_from_slice(name);
    bytes[15] = name.len() as u8;
    Some(u128::from_le_bytes(bytes) | CASE_BITS[name.len()])
}

/// Bit 5 of each of the first `n` bytes, by `n`.
const CASE_BITS: [u128; 16] = {
    let mut masks = [0; 16];
    let mut n = 1;
    while n < 16 {
        masks[n] = masks[n - 1] | 0x20 << (8 * (n - 1));
        n += 1;
    }
    masks
};

/// Runs one parsed command (`args[0]` is its name; the parser never yields an empty command), found at `index`
/// in [`COMMANDS`] (none: unknown).
pub(crate) fn dispatch(index: Option<usize>, args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let Some(index) = index else {
        return unknown_command(args).into();
    };
    let command = &COMMANDS[index];
    if let Some(mut refusal) = session.guard.refuse(index, args, session.keyspace, frontend) {
        refusal.command = Some(index);
        return refusal;
    }
    let argc = args.len() as i64;
    let arity_ok = if command.arity >= 0 { argc == command.arity } else { argc >= -command.arity };
    let mut action = if arity_ok { (command.run)(args, session, frontend) } else { wrong_arity(command.name).into() };
    action.command = Some(index);
    action
}

pub(crate) fn wrong_arity(name: &str) -> Frame {
    Frame::error(format!("ERR wrong number of arguments for '{name}' command"))
}

pub(crate) fn syntax_error() -> Frame {
    Frame::error("ERR syntax error")
}

/// A whole-number argument (a TTL, a COUNT, a database number, INCRBY's amount), or Redis' error for anything
/// else. Redis' `string2ll` is stricter than Rust's parse: no leading `+`, no leading zero, and no `-0`.
pub(crate) fn integer_argument(arg: &[u8]) -> Result<i64, Frame> {
    let digits = arg.strip_prefix(b"-").unwrap_or(arg);
    let canonical = arg == b"0" || matches!(digits.first(), Some(b'1'..=b'9'));
    let parsed = canonical.then(|| std::str::from_utf8(arg).ok()?.parse().ok()).flatten();
    parsed.ok_or_else(not_an_integer)
}

pub(crate) fn not_an_integer() -> Frame {
    Frame::error("ERR value is not an integer or out of range")
}

/// Redis' wording for a subcommand a container command (COMMAND, CONFIG, CLIENT) does not have.
pub(crate) fn unknown_subcommand(command: &str, sub: &[u8]) -> Frame {
    Frame::error(format!("ERR unknown subcommand '{}'. Try {command} HELP.", truncated(sub, 128)))
}

/// Redis' exact wording: the name, then the first arguments quoted, each followed by a space, until
/// 128 bytes of them have been listed.
fn unknown_command(args: &[Bytes]) -> Frame {
    let mut listed = String::new();
    for arg in &args[1..] {
        if listed.len() >= 128 {
            break;
        }
        let room = 128 - listed.len();
        listed.push_str(&format!("'{}' ", truncated(arg, room)));
    }
    Frame::error(format!("ERR unknown command '{}', with args beginning with: {listed}", truncated(&args[0], 128)))
}

fn truncated(bytes: &[u8], max: usize) -> Cow<'_, str> {
    String::from_utf8_lossy(&bytes[..bytes.len().min(max)])
}

/// A command's arguments as the parser hands them over, from words (for tests).
#[cfg(test)]
pub(crate) fn args(words: &[&str]) -> Vec<Bytes> {
    words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_commands_are_worded_like_redis() {
        assert_eq!(
            unknown_command(&args(&["foo", "a", "b"])),
            Frame::error("ERR unknown command 'foo', with args beginning with: 'a' 'b' ")
        );
        assert_eq!(
            unknown_command(&args(&["foo"])),
            Frame::error("ERR unknown command 'foo', with args beginning with: ")
        );
        let long = "x".repeat(300);
        let Frame::Error(line) = unknown_command(&args(&["foo", &long, "next"])) else { panic!("not an error") };
        assert!(line.ends_with(&format!("'{}' ", "x".repeat(128))), "{line}");
    }

    #[test]
    fn integers_are_parsed_as_redis_parses_them() {
        for (arg, want) in [("0", Some(0)), ("7", Some(7)), ("-12", Some(-12)), ("9223372036854775807", Some(i64::MAX))]
        {
            assert_eq!(integer_argument(arg.as_bytes()).ok(), want, "{arg}");
        }
        for arg in ["+5", "05", "-0", "-", "", " 1", "1 ", "1.0", "9223372036854775808", "0x10"] {
            assert!(integer_argument(arg.as_bytes()).is_err(), "{arg:?} is refused");
        }
    }

    #[test]
    fn lookup_ignores_case_and_names_are_unique() {
        assert_eq!(lookup(b"GeT").map(|c| c.name), Some("get"));
        assert!(lookup(b"xyzzy").is_none());
        // Against a plain case-insensitive search: every name in other cases, with a byte changed so that its bit
        // 5 alone would still make it a letter of the name (0x40: a letter to a digit or punctuation), cut short
        // or run on.
        let plain = |name: &[u8]| COMMANDS.iter().position(|c| c.name.as_bytes().eq_ignore_ascii_case(name));
        for command in COMMANDS {
            let name = command.name.as_bytes();
            assert!(name.iter().all(u8::is_ascii_lowercase), "{} is lowercase letters", command.name);
            let mut tries = vec![name.to_ascii_uppercase(), name[1..].to_vec(), [name, b"s"].concat()];
            for at in 0..name.len() {
                for flip in [0x20, 0x40, 0x60, 0x80, 0xa0, 0x01] {
                    let mut near = name.to_vec();
                    near[at] ^= flip;
                    tries.push(near);
                }
            }
            for name in tries {
                assert_eq!(position(&name), plain(&name), "{:?}", String::from_utf8_lossy(&name));
            }
        }
        assert_eq!(position(&[b'a'; 16]), None);
        let mut names: Vec<_> = COMMANDS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), COMMANDS.len());
    }
}
