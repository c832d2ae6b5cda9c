//! The ACL categories of Meridian's commands (`+@read`, `-@dangerous`, ...), as Redis files the same commands.
//! Read, write, fast and slow follow a command's COMMAND flags; the data-type and admin categories are listed by
//! name here. ACL and CLIENT are filed by their subcommand, as Redis files them: `ACL WHOAMI` is harmless,
//! `ACL SETUSER` is not.

use super::super::commands::{Command, COMMANDS};
use meridian_core::acl::{category_bit, User};

const STRING: &[&str] = &[
    "get",
    "set",
    "mget",
    "mset",
    "incr",
    "decr",
    "incrby",
    "decrby",
    "append",
    "getdel",
    "strlen",
    "incrbyfloat",
    "setrange",
    "getex",
    "setnx",
    "setex",
    "psetex",
    "getset",
    "getrange",
    "substr",
    "msetnx",
];
const HASH: &[&str] = &[
    "hset",
    "hmset",
    "hdel",
    "hget",
    "hmget",
    "hgetall",
    "hlen",
    "hexists",
    "hsetnx",
    "hincrby",
    "hincrbyfloat",
    "hkeys",
    "hvals",
    "hstrlen",
    "hrandfield",
];
const KEYSPACE: &[&str] = &[
    "del",
    "exists",
    "type",
    "expire",
    "pexpire",
    "expireat",
    "pexpireat",
    "persist",
    "ttl",
    "pttl",
    "expiretime",
    "pexpiretime",
    "scan",
    "dbsize",
    "keys",
    "flushdb",
    "flushall",
    "rename",
    "renamenx",
    "copy",
    "unlink",
];
const CONNECTION: &[&str] = &["ping", "echo", "select", "keyspace", "quit", "hello", "auth", "client", "command"];
/// Commands that can hurt a server beyond the keys they name: whole-keyspace walks and deletes, introspection.
const DANGEROUS: &[&str] = &["keys", "flushdb", "flushall", "info", "config"];

/// ACL subcommands that only look at the connection or list categories; every other one administers users.
const ACL_HARMLESS: &[&str] = &["whoami", "cat", "help"];
/// CLIENT subcommands about the connection itself; Meridian has no other.
const CLIENT_OWN: &[&str] = &["id", "getname", "setname", "help"];

/// Whether the command's categories depend on its subcommand.
pub(crate) fn by_subcommand(command: &Command) -> bool {
    matches!(command.name, "acl" | "client")
}

/// The categories of `command` (bits by `meridian_core::acl::CATEGORIES`), with `sub` its first argument for
/// the commands filed [`by_subcommand`].
pub(crate) fn categories(command: &Command, sub: Option<&[u8]>) -> u32 {
    let name = command.name;
    let has = |flag: &str| command.flags.contains(&flag);
    let mut bits = 0;
    let mut add = |category: &str, yes: bool| {
        if yes {
            bits |= category_bit(category);
        }
    };
    add("read", has("readonly"));
    add("write", has("write"));
    add("fast", has("fast"));
    add("slow", !has("fast"));
    add("string", STRING.contains(&name));
    add("hash", HASH.contains(&name));
    add("keyspace", KEYSPACE.contains(&name));
    add("connection", CONNECTION.contains(&name));
    add("dangerous", DANGEROUS.contains(&name));
    add("admin", has("admin"));
    let sub = sub.map(|s| String::from_utf8_lossy(s).to_ascii_lowercase());
    let sub = sub.as_deref().unwrap_or("");
    let administers = match name {
        "acl" => !ACL_HARMLESS.contains(&sub),
        "client" => !CLIENT_OWN.contains(&sub),
        _ => false,
    };
    add("admin", administers);
    add("dangerous", administers);
    bits
}

/// Whether `user` may run `ACL SETUSER`: the right that stands for every other, since its holder can grant
/// itself anything.
pub(crate) fn may_change_users(user: &User) -> bool {
    let acl = COMMANDS.iter().find(|c| c.name == "acl").expect("ACL is a command");
    user.commands.allows(acl.name, categories(acl, Some(b"setuser")))
}

/// The commands in category `bit`, as `ACL CAT name` lists them: a command filed by subcommand under each
/// subcommand of it that is in the category, as `name|sub`.
pub(crate) fn commands_in(bit: u32) -> Vec<String> {
    let mut names = Vec::new();
    for command in COMMANDS {
        if !by_subcommand(command) {
            if categories(command, None) & bit != 0 {
                names.push(command.name.to_string());
            }
            continue;
        }
        for sub in subcommands(command) {
            if categories(command, Some(sub.as_bytes())) & bit != 0 {
                names.push(format!("{}|{sub}", command.name));
            }
        }
    }
    names
}

fn subcommands(command: &Command) -> &'static [&'static str] {
    match command.name {
        "acl" => &["cat", "deluser", "help", "list", "setuser", "users", "whoami"],
        _ => CLIENT_OWN,
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::commands::lookup;
    use super::*;

    fn of(name: &str, sub: Option<&str>) -> u32 {
        categories(lookup(name.as_bytes()).unwrap(), sub.map(str::as_bytes))
    }

    #[test]
    fn commands_are_filed_as_redis_files_them() {
        let bit = category_bit;
        assert_eq!(of("get", None), bit("read") | bit("fast") | bit("string"));
        assert_eq!(of("hset", None), bit("write") | bit("fast") | bit("hash"));
        assert_eq!(of("flushall", None), bit("write") | bit("slow") | bit("keyspace") | bit("dangerous"));
        assert_eq!(of("hello", None), bit("fast") | bit("connection"));
        assert_eq!(of("acl", Some("WHOAMI")), bit("slow"));
        assert_eq!(of("acl", Some("setuser")), bit("slow") | bit("admin") | bit("dangerous"));
        assert!(commands_in(bit("connection")).contains(&"client|setname".to_string()));
        assert!(commands_in(bit("admin")).contains(&"acl|deluser".to_string()));
        assert!(commands_in(bit("list")).is_empty(), "Meridian has no lists");
        for name in STRING.iter().chain(HASH).chain(KEYSPACE).chain(CONNECTION).chain(DANGEROUS) {
            assert!(lookup(name.as_bytes()).is_some(), "{name} is a command");
        }
    }
}
