//! The ACL command (`ACL SETUSER`, `DELUSER`, `LIST`, `USERS`, `WHOAMI`, `CAT`, `HELP`) and the checks every
//! command passes (`guard`). Users live in the cluster map (`meridian_core::acl`): `SETUSER` and `DELUSER` go
//! to the manager and are answered once this node's map shows them, so every node enforces them from then on.
//!
//! - `rules`: `ACL SETUSER`'s words as rules, passwords hashed.
//! - `categories`: which categories (`@read`, `@dangerous`, ...) each command is in.
//! - `guard`: what a connection may do, compiled for its user and keyspace.

mod categories;
mod guard;
pub(crate) mod rules;

pub(crate) use categories::may_change_users;
pub(crate) use guard::Guard;

use super::admin::help;
use super::commands::{unknown_subcommand, wrong_arity, Action, Session};
use super::frame::Frame;
use super::frontend::Frontend;
use super::kv::failure;
use super::pending::Pending;
use bytes::Bytes;
use meridian_core::acl::{category, User, CATEGORIES, DEFAULT_USER};
use meridian_core::{Admin, Reply, Request, UserChange};

pub(super) fn acl(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let sub = args[1].to_ascii_uppercase();
    match (sub.as_slice(), args.len()) {
        (b"SETUSER", 3..) => set_user(&args[2..], session, frontend),
        (b"DELUSER", 3..) => del_users(&args[2..], session, frontend),
        (b"LIST", 2) => list(session, frontend).into(),
        (b"USERS", 2) => Frame::Array(names(session, frontend).into_iter().map(Frame::bulk).collect()).into(),
        (b"WHOAMI", 2) => session.guard.user().map_or(Frame::Null, Frame::bulk).into(),
        (b"CAT", 2) => Frame::Array(CATEGORIES.iter().map(|&c| Frame::bulk(c)).collect()).into(),
        (b"CAT", 3) => cat(&args[2]).into(),
        (b"HELP", _) => help(ACL_HELP),
        (b"SETUSER" | b"DELUSER" | b"LIST" | b"USERS" | b"WHOAMI" | b"CAT", _) => {
            wrong_arity(&format!("acl|{}", String::from_utf8_lossy(&sub).to_lowercase())).into()
        }
        _ => unknown_subcommand("ACL", &args[1]).into(),
    }
}

/// ACL SETUSER name rule...: the rules are checked against this node's user first, so a bad one is refused with
/// Redis' words naming it, before anything reaches the map.
fn set_user(args: &[Bytes], session: &Session, frontend: &Frontend) -> Action {
    let name = String::from_utf8_lossy(&args[0]).into_owned();
    let access = session.guard.access();
    // The default user starts, in the map, as this node has it: from its own password, not from none.
    let base = (name == DEFAULT_USER && !access.users.contains_key(&name)).then(|| frontend.default_user.clone());
    let user = access.users.get(&name).cloned().or(base.clone()).unwrap_or_default();
    let rules = match rules::applied(&name, user, &args[1..]) {
        Ok((_, rules)) => rules,
        Err(why) => return Frame::error(why).into(),
    };
    let change = UserChange { name, base, rules };
    let rx = frontend.core.submit(Request::Admin(Admin::SetUser(Box::new(change))));
    Pending::One { rx, shape: done }.into()
}

/// ACL DELUSER name...: how many of the users named existed.
fn del_users(args: &[Bytes], session: &Session, frontend: &Frontend) -> Action {
    let mut names: Vec<String> = args.iter().map(|n| String::from_utf8_lossy(n).into_owned()).collect();
    if names.iter().any(|n| n == DEFAULT_USER) {
        return Frame::error("ERR The 'default' user cannot be removed").into();
    }
    let access = session.guard.access();
    names.sort_unstable();
    names.dedup();
    names.retain(|n| access.users.contains_key(n));
    if names.is_empty() {
        return Frame::Integer(0).into();
    }
    let deleted = names.len() as i64;
    let rx = frontend.core.submit(Request::Admin(Admin::DelUsers { names }));
    Pending::Picked {
        rx,
        pick: Box::new(move |reply| match done(reply) {
            Frame::Simple(_) => Frame::Integer(deleted),
            e => e,
        }),
    }
    .into()
}

/// OK once the map shows the change; the map's refusal otherwise.
fn done(reply: Reply) -> Frame {
    match reply {
        Reply::Text(_) => Frame::ok(),
        other => failure(other),
    }
}

/// Every user's name, the `default` user's among them, in order.
fn names(session: &Session, frontend: &Frontend) -> Vec<String> {
    users(session, frontend).into_iter().map(|(name, _)| name).collect()
}

fn users(session: &Session, frontend: &Frontend) -> Vec<(String, User)> {
    let mut users: Vec<(String, User)> = session.guard.access().users.clone().into_iter().collect();
    if !users.iter().any(|(n, _)| n == DEFAULT_USER) {
        users.push((DEFAULT_USER.into(), frontend.default_user.clone()));
        users.sort_by(|a, b| a.0.cmp(&b.0));
    }
    users
}

/// ACL LIST: `user NAME RULES` for each user, whose rules `ACL SETUSER NAME` takes back.
fn list(session: &Session, frontend: &Frontend) -> Frame {
    let line = |(name, user): (String, User)| Frame::bulk(format!("user {name} {}", user.describe()));
    Frame::Array(users(session, frontend).into_iter().map(line).collect())
}

/// ACL CAT category: the commands in it.
fn cat(name: &[u8]) -> Frame {
    match std::str::from_utf8(name).ok().and_then(category) {
        Some(c) => Frame::Array(categories::commands_in(1 << c).into_iter().map(Frame::bulk).collect()),
        None => Frame::error(format!("ERR Unknown category '{}'", String::from_utf8_lossy(name))),
    }
}

const ACL_HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "LIST",
    "    Show users details in config file format.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes; 'ks~<pattern>' names keyspaces the user may select.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Print this help.",
];

#[cfg(test)]
mod tests {
    use super::super::auth::hash_for_user;
    use super::super::testing::{frontend_with_access, Scripted};
    use super::*;
    use meridian_core::acl::{Access, AclRule};
    use meridian_core::{KeyspaceId, KeyspaceRef};
    use std::sync::Arc;
    use tokio::sync::watch;

    /// A user `name` with password `pw` made by `rules`, as the map would hold it.
    fn user(name: &str, rules: &[&str]) -> (String, User) {
        let parsed: Vec<AclRule> = rules.iter().map(|w| rules::parse(name, w.as_bytes()).unwrap()).collect();
        (name.to_string(), User::default().applied(&parsed).unwrap())
    }

    fn access(users: Vec<(String, User)>) -> Option<Arc<Access>> {
        let keyspaces = [(KeyspaceId(0), "default".to_string()), (KeyspaceId(1), "orders".to_string())].into();
        Some(Arc::new(Access { users: users.into_iter().collect(), keyspaces }))
    }

    fn core() -> Arc<Scripted> {
        Scripted::new(|req| match req {
            Request::Admin(Admin::Resolve(KeyspaceRef::Name(n))) if n == "orders" => Reply::Keyspace(KeyspaceId(1)),
            Request::Admin(Admin::Resolve(_)) => Reply::Keyspace(KeyspaceId(0)),
            Request::Admin(_) => Reply::Text("done".into()),
            _ => Reply::Value(None),
        })
    }

    fn noperm_command(name: &str) -> Frame {
        Frame::error(format!("NOPERM this user has no permissions to run the '{name}' command"))
    }

    #[tokio::test]
    async fn users_run_only_what_their_rules_allow() {
        let users = vec![
            user("ro", &["on", ">pw", "~*", "+@read", "+@connection"]),
            user("cached", &["on", ">pw", "~cached:*", "%R~shared:*", "+@all"]),
            user("orders", &["on", ">pw", "~*", "+@all", "resetkeyspaces", "ks~ord*"]),
        ];
        let (_tx, rx) = watch::channel(access(users));
        let core = core();
        let f = frontend_with_access(core.clone(), rx);

        let mut ro = Session::for_client(1, &f);
        let wrong = core.run_on(&f, &mut ro, &["AUTH", "ro", "nope"]).await;
        assert!(matches!(wrong, Frame::Error(e) if e.starts_with("WRONGPASS")));
        assert_eq!(core.run_on(&f, &mut ro, &["AUTH", "ro", "pw"]).await, Frame::ok());
        assert_eq!(core.run_on(&f, &mut ro, &["GET", "k"]).await, Frame::Null);
        assert_eq!(core.run_on(&f, &mut ro, &["SET", "k", "v"]).await, noperm_command("set"));
        assert_eq!(core.run_on(&f, &mut ro, &["ACL", "SETUSER", "x"]).await, noperm_command("acl|setuser"));
        assert_eq!(core.run_on(&f, &mut ro, &["ACL", "WHOAMI"]).await, noperm_command("acl|whoami"), "no +@slow");

        let mut cached = Session::for_client(2, &f);
        assert_eq!(core.run_on(&f, &mut cached, &["AUTH", "cached", "pw"]).await, Frame::ok());
        let keys = Frame::error("NOPERM this user has no permissions to access one of the keys used as arguments");
        assert_eq!(core.run_on(&f, &mut cached, &["GET", "other"]).await, keys);
        assert_eq!(
            core.run_on(&f, &mut cached, &["MSET", "cached:a", "1", "other", "2"]).await,
            keys,
            "every key is checked"
        );
        assert_eq!(core.run_on(&f, &mut cached, &["GET", "shared:a"]).await, Frame::Null, "%R~ reads");
        assert_eq!(core.run_on(&f, &mut cached, &["SET", "shared:a", "1"]).await, keys, "and does not write");
        assert_eq!(core.run_on(&f, &mut cached, &["ACL", "WHOAMI"]).await, Frame::bulk("cached"));

        let mut orders = Session::for_client(3, &f);
        assert_eq!(core.run_on(&f, &mut orders, &["AUTH", "orders", "pw"]).await, Frame::ok());
        let here = Frame::error("NOPERM this user has no permissions to use keyspace 'default'");
        assert_eq!(core.run_on(&f, &mut orders, &["GET", "k"]).await, here);
        assert_eq!(core.run_on(&f, &mut orders, &["PING"]).await, Frame::Simple("PONG"), "commands on no data run");
        assert_eq!(core.run_on(&f, &mut orders, &["KEYSPACE", "orders"]).await, Frame::ok());
        assert_eq!(core.run_on(&f, &mut orders, &["GET", "k"]).await, Frame::Null);
        let select = Frame::error("NOPERM this user has no permissions to select keyspace 'default'");
        assert_eq!(core.run_on(&f, &mut orders, &["KEYSPACE", "default"]).await, select);
        assert_eq!(core.run_on(&f, &mut orders, &["GET", "k"]).await, Frame::Null, "still in orders");
        let flushall = Frame::error("NOPERM this user has no permissions to flush every keyspace");
        assert_eq!(core.run_on(&f, &mut orders, &["FLUSHALL"]).await, flushall);
    }

    #[tokio::test]
    async fn rule_changes_reach_connections_at_their_next_command() {
        let (tx, rx) = watch::channel(access(vec![user("u", &["on", ">pw", "~*", "+@all"])]));
        let core = core();
        let f = frontend_with_access(core.clone(), rx);
        let mut s = Session::for_client(1, &f);
        assert_eq!(core.run_on(&f, &mut s, &["AUTH", "u", "pw"]).await, Frame::ok());
        assert_eq!(core.run_on(&f, &mut s, &["GET", "k"]).await, Frame::Null);
        tx.send(access(vec![user("u", &["on", ">pw", "~*", "+@all", "-get"])])).unwrap();
        assert_eq!(core.run_on(&f, &mut s, &["GET", "k"]).await, noperm_command("get"));
        tx.send(access(vec![])).unwrap();
        let mut args = vec![Bytes::from_static(b"GET"), Bytes::from_static(b"k")];
        let action = super::super::commands::dispatch(Some(0), &mut args, &mut s, &f);
        assert!(action.close, "a deleted user's connection closes");
        let mut fresh = Session::for_client(2, &f);
        let wrong = core.run_on(&f, &mut fresh, &["AUTH", "u", "pw"]).await;
        assert!(matches!(wrong, Frame::Error(e) if e.starts_with("WRONGPASS")));
    }

    #[tokio::test]
    async fn a_client_certificate_names_the_user_a_connection_starts_as() {
        let alice = |on: &str| user("alice", &[on, ">pw", "~*", "+@read", "+acl", "-@admin"]);
        let default = user(DEFAULT_USER, &["on", ">s3cret", "~*", "+@all"]);
        let (tx, rx) =
            watch::channel(access(vec![alice("on"), user("bob", &["off", "nopass", "+@all"]), default.clone()]));
        let core = core();
        let f = frontend_with_access(core.clone(), rx);
        let certified = |name: &str| {
            let mut s = Session::for_client(1, &f);
            s.guard.start_as_certified(name.into(), &f);
            s
        };
        let mut s = certified("alice");
        assert_eq!(core.run_on(&f, &mut s, &["ACL", "WHOAMI"]).await, Frame::bulk("alice"), "no AUTH, no password");
        assert_eq!(core.run_on(&f, &mut s, &["GET", "k"]).await, Frame::Null);
        assert_eq!(core.run_on(&f, &mut s, &["SET", "k", "v"]).await, noperm_command("set"));
        for name in ["nobody", "bob"] {
            let mut other = certified(name);
            let noauth = Frame::error("NOAUTH Authentication required.");
            assert_eq!(
                core.run_on(&f, &mut other, &["GET", "k"]).await,
                noauth,
                "{name}: as default, which has a password"
            );
        }

        tx.send(access(vec![alice("off"), default.clone()])).unwrap();
        assert_eq!(core.run_on(&f, &mut s, &["GET", "k"]).await, Frame::Null, "an AUTH connection, too, goes on");
        assert_eq!(certified("alice").guard.user(), None, "a new one does not start as her");
        tx.send(access(vec![default])).unwrap();
        let mut args = vec![Bytes::from_static(b"GET"), Bytes::from_static(b"k")];
        assert!(super::super::commands::dispatch(Some(0), &mut args, &mut s, &f).close, "deleted: closed");
    }

    #[tokio::test]
    async fn setuser_hashes_passwords_and_refuses_a_bad_rule_naming_it() {
        let core = core();
        let (_tx, rx) = watch::channel(access(vec![]));
        let f = frontend_with_access(core.clone(), rx);
        let mut s = Session::for_client(1, &f);
        let bad = core.run_on(&f, &mut s, &["ACL", "SETUSER", "a", "on", "+@nosuch"]).await;
        let expected = "ERR Error in ACL SETUSER modifier '+@nosuch': Unknown command or category name in ACL";
        assert_eq!(bad, Frame::error(expected));
        for word in ["bogus", "&chan", "+get|x", "#5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"] {
            let refused = core.run_on(&f, &mut s, &["ACL", "SETUSER", "a", word]).await;
            assert!(matches!(&refused, Frame::Error(e) if e.contains(word)), "{word}: {refused:?}");
        }
        let after_all = core.run_on(&f, &mut s, &["ACL", "SETUSER", "a", "allkeys", "~x"]).await;
        assert!(matches!(&after_all, Frame::Error(e) if e.contains("after the * pattern")), "{after_all:?}");
        assert!(core.asked().is_empty(), "nothing reached the map");

        let set = ["ACL", "SETUSER", "a", "on", ">s3cret", "~k*", "+@read", "-keys", "resetkeyspaces", "ks~orders"];
        assert_eq!(core.run_on(&f, &mut s, &set).await, Frame::ok());
        let asked = core.asked();
        let [Request::Admin(Admin::SetUser(change))] = asked.as_slice() else { panic!("one SETUSER asked") };
        assert_eq!(change.name, "a");
        assert!(change.rules.contains(&AclRule::AddPassword(hash_for_user("a", b"s3cret"))));
        assert!(!format!("{change:?}").contains("s3cret"), "only the hash leaves the node");
        let default = Frame::error("ERR The 'default' user cannot be removed");
        assert_eq!(core.run_on(&f, &mut s, &["ACL", "DELUSER", "default"]).await, default);
        assert_eq!(core.run_on(&f, &mut s, &["ACL", "DELUSER", "nobody"]).await, Frame::Integer(0));
    }

    #[tokio::test]
    async fn list_users_and_categories_read_as_redis_prints_them() {
        let core = core();
        let (_tx, rx) = watch::channel(access(vec![user("ro", &["on", "nopass", "~*", "+@read"])]));
        let f = frontend_with_access(core.clone(), rx);
        let mut s = Session::for_client(1, &f);
        let listed = Frame::Array(vec![
            Frame::bulk("user default on nopass ~* ks~* +@all"),
            Frame::bulk("user ro on nopass ~* ks~* -@all +@read"),
        ]);
        assert_eq!(core.run_on(&f, &mut s, &["ACL", "LIST"]).await, listed);
        let users = Frame::Array(vec![Frame::bulk("default"), Frame::bulk("ro")]);
        assert_eq!(core.run_on(&f, &mut s, &["ACL", "USERS"]).await, users);
        assert_eq!(core.run_on(&f, &mut s, &["ACL", "WHOAMI"]).await, Frame::bulk("default"));
        let Frame::Array(cats) = core.run_on(&f, &mut s, &["ACL", "CAT"]).await else { panic!("an array") };
        assert_eq!(cats.len(), 21);
        let Frame::Array(hash) = core.run_on(&f, &mut s, &["ACL", "CAT", "hash"]).await else { panic!("an array") };
        assert!(hash.contains(&Frame::bulk("hget")) && !hash.contains(&Frame::bulk("get")));
        let unknown = core.run_on(&f, &mut s, &["ACL", "CAT", "nope"]).await;
        assert_eq!(unknown, Frame::error("ERR Unknown category 'nope'"));
        let help = core.run_on(&f, &mut s, &["ACL", "NOPE"]).await;
        assert!(matches!(help, Frame::Error(e) if e.contains("Try ACL HELP")));
    }
}
