//! Connection and introspection commands: PING, ECHO, SELECT, KEYSPACE, QUIT, HELLO, COMMAND, CONFIG GET and
//! CLIENT SETNAME/GETNAME/ID (INFO and TIME: `info.rs`). They answer from this node alone; SELECT and KEYSPACE
//! ask its core's map which keyspace a number or name stands for, and SELECT may create one (`databases.rs`).
//!
//! They report only what is true of Meridian: COMMAND lists the commands this server implements (and
//! COMMAND DOCS answers an empty array, as there are no docs to serve), and CONFIG GET knows only the
//! parameters Meridian actually has.

use super::commands::{integer_argument, unknown_subcommand, wrong_arity, Action, Command, Session, COMMANDS};
use super::databases::{self, DATABASES};
use super::frame::{Frame, Protocol};
use super::frontend::Frontend;
use bytes::Bytes;
use meridian_core::glob::glob_match_nocase;
use meridian_core::{Admin, KeyspaceRef, Request};

pub(super) fn ping(args: &mut [Bytes], _: &mut Session, _: &Frontend) -> Action {
    match args {
        [_] => Frame::Simple("PONG").into(),
        [_, msg] => Frame::Bulk(msg.clone()).into(),
        _ => wrong_arity("ping").into(),
    }
}

pub(super) fn echo(args: &mut [Bytes], _: &mut Session, _: &Frontend) -> Action {
    Frame::Bulk(args[1].clone()).into()
}

/// SELECT n chooses Redis' database n: a keyspace, made on demand below 16 (`databases.rs`).
pub(super) fn select(args: &mut [Bytes], _: &mut Session, frontend: &Frontend) -> Action {
    match integer_argument(&args[1]).map(u32::try_from) {
        Ok(Ok(n)) => Action::switch(databases::selecting(frontend.core.clone(), n)),
        Ok(Err(_)) => Frame::error("ERR DB index is out of range").into(),
        Err(not_an_integer) => not_an_integer.into(),
    }
}

/// KEYSPACE name: SELECT by name.
pub(super) fn keyspace(args: &mut [Bytes], _: &mut Session, frontend: &Frontend) -> Action {
    let name = String::from_utf8_lossy(&args[1]).into_owned();
    Action::switch(frontend.core.submit(Request::Admin(Admin::Resolve(KeyspaceRef::Name(name)))))
}

pub(super) fn quit(_: &mut [Bytes], _: &mut Session, _: &Frontend) -> Action {
    Action::close_after(Frame::ok())
}

pub(super) fn command(args: &mut [Bytes], _: &mut Session, _: &Frontend) -> Action {
    let Some(sub) = args.get(1) else {
        return Frame::Array(COMMANDS.iter().map(describe).collect()).into();
    };
    match sub.to_ascii_uppercase().as_slice() {
        b"COUNT" if args.len() == 2 => Frame::Integer(COMMANDS.len() as i64).into(),
        b"DOCS" => Frame::Array(Vec::new()).into(),
        b"INFO" => Frame::Array(args[2..].iter().map(|name| lookup_described(name)).collect()).into(),
        b"HELP" => help(COMMAND_HELP),
        b"COUNT" => wrong_arity("command|count").into(),
        _ => unknown_subcommand("COMMAND", sub).into(),
    }
}

pub(super) fn config(args: &mut [Bytes], _: &mut Session, frontend: &Frontend) -> Action {
    match args[1].to_ascii_uppercase().as_slice() {
        b"GET" if args.len() >= 3 => config_get(&args[2..], frontend).into(),
        b"GET" => wrong_arity("config|get").into(),
        b"HELP" => help(CONFIG_HELP),
        _ => unknown_subcommand("CONFIG", &args[1]).into(),
    }
}

pub(super) fn client(args: &mut [Bytes], session: &mut Session, _: &Frontend) -> Action {
    match (args[1].to_ascii_uppercase().as_slice(), args.len()) {
        (b"SETNAME", 3) => set_name(&args[2], session).into(),
        (b"SETNAME", _) => wrong_arity("client|setname").into(),
        (b"GETNAME", 2) => session.name.clone().map_or(Frame::Null, Frame::Bulk).into(),
        (b"GETNAME", _) => wrong_arity("client|getname").into(),
        (b"ID", 2) => Frame::Integer(session.id as i64).into(),
        (b"ID", _) => wrong_arity("client|id").into(),
        (b"HELP", _) => help(CLIENT_HELP),
        _ => unknown_subcommand("CLIENT", &args[1]).into(),
    }
}

/// HELLO [protover [AUTH username password] [SETNAME name]]: switches the connection to RESP2 or RESP3 and
/// answers who the server is, in the protocol just chosen; AUTH authenticates the connection first
/// (`auth.rs`). An unknown version gets Redis' NOPROTO error, on which clients fall back to RESP2.
pub(super) fn hello(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let protocol = match args.get(1).map(|v| v.as_ref()) {
        None => session.protocol,
        Some(b"2") => Protocol::Resp2,
        Some(b"3") => Protocol::Resp3,
        Some(v) if std::str::from_utf8(v).is_ok_and(|v| v.parse::<i64>().is_ok()) => {
            return Frame::error("NOPROTO unsupported protocol version").into()
        }
        Some(_) => return Frame::error("ERR Protocol version is not an integer or out of range").into(),
    };
    let (mut name, mut auth) = (None, None);
    let mut options = args.iter().skip(2);
    while let Some(option) = options.next() {
        match option.to_ascii_uppercase().as_slice() {
            b"SETNAME" => match options.next() {
                Some(n) => name = Some(n),
                None => return syntax_error_in("HELLO"),
            },
            b"AUTH" => match (options.next(), options.next()) {
                (Some(user), Some(password)) => auth = Some((user, password)),
                _ => return syntax_error_in("HELLO"),
            },
            _ => return syntax_error_in("HELLO"),
        }
    }
    match auth {
        Some((user, password)) => {
            if let e @ Frame::Error(_) = super::auth::check(user, password, session, frontend) {
                return e.into();
            }
        }
        None if session.guard.user().is_none() => return super::auth::hello_noauth().into(),
        None => {}
    }
    if let Some(name) = name {
        if let e @ Frame::Error(_) = set_name(name, session) {
            return e.into();
        }
    }
    session.protocol = protocol;
    Frame::Map(vec![
        (Frame::bulk("server"), Frame::bulk("meridian")),
        // Clients read `version` to choose what to ask for: the Redis whose behaviour Meridian follows, as INFO says.
        (Frame::bulk("version"), Frame::bulk(super::info::REDIS_VERSION)),
        (Frame::bulk("meridian_version"), Frame::bulk(env!("CARGO_PKG_VERSION"))),
        (Frame::bulk("proto"), Frame::Integer(protocol.version())),
        (Frame::bulk("id"), Frame::Integer(session.id as i64)),
        (Frame::bulk("mode"), Frame::bulk("standalone")),
        (Frame::bulk("role"), Frame::bulk("master")),
        (Frame::bulk("modules"), Frame::Array(Vec::new())),
        (Frame::bulk("node_id"), Frame::Integer(i64::from(frontend.node.0))),
    ])
    .into()
}

fn syntax_error_in(command: &str) -> Action {
    Frame::error(format!("ERR Syntax error in {command} option")).into()
}

/// Redis allows printable ASCII without spaces in names; an empty name clears it.
fn set_name(name: &Bytes, session: &mut Session) -> Frame {
    if !name.iter().all(|b| (b'!'..=b'~').contains(b)) {
        return Frame::error("ERR Client names cannot contain spaces, newlines or special characters.");
    }
    session.name = if name.is_empty() { None } else { Some(name.clone()) };
    Frame::ok()
}

/// The parameters Meridian has, as CONFIG GET names them. `save` and `appendonly` are Redis' snapshot and
/// append-only-file settings, which redis-benchmark reads at start-up: Meridian has neither (its datastores are
/// its logs, and each keyspace's durability is its own: INFO persistence), so they say so.
fn parameters(frontend: &Frontend) -> [(&'static str, String); 5] {
    [
        ("save", String::new()),
        ("appendonly", "no".to_string()),
        ("databases", DATABASES.to_string()),
        ("maxclients", frontend.resp.connections_max.to_string()),
        ("proto-max-bulk-len", frontend.bulk_max().to_string()),
    ]
}

fn config_get(patterns: &[Bytes], frontend: &Frontend) -> Frame {
    let matches = |name: &str| patterns.iter().any(|p| glob_match_nocase(p, name.as_bytes()));
    let pairs = parameters(frontend).into_iter().filter(|(name, _)| matches(name));
    Frame::Map(pairs.map(|(name, value)| (Frame::bulk(name), Frame::bulk(value))).collect())
}

/// COMMAND's classic per-command entry: name, arity, flags, first key, last key, key step.
fn describe(command: &Command) -> Frame {
    Frame::Array(vec![
        Frame::bulk(command.name),
        Frame::Integer(command.arity),
        Frame::Array(command.flags.iter().map(|&f| Frame::Simple(f)).collect()),
        Frame::Integer(command.first_key),
        Frame::Integer(command.last_key),
        Frame::Integer(command.step),
    ])
}

fn lookup_described(name: &[u8]) -> Frame {
    super::commands::lookup(name).map_or(Frame::Null, describe)
}

const COMMAND_HELP: &[&str] = &[
    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "(no subcommand)",
    "    Return details about all commands this server implements.",
    "COUNT",
    "    Return the number of commands this server implements.",
    "DOCS [<command-name> ...]",
    "    Return an empty array: this server has no command documentation to serve.",
    "INFO [<command-name> ...]",
    "    Return details about the given commands.",
    "HELP",
    "    Print this help.",
];

const CONFIG_HELP: &[&str] = &[
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern> [<pattern> ...]",
    "    Return the parameters matching the glob-like patterns and their values.",
    "HELP",
    "    Print this help.",
];

const CLIENT_HELP: &[&str] = &[
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "HELP",
    "    Print this help.",
];

pub(super) fn help(lines: &'static [&'static str]) -> Action {
    Frame::Array(lines.iter().map(|&line| Frame::Simple(line)).collect()).into()
}
