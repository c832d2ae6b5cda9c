//! Access control lists as Redis 6 and 7 have them (`ACL SETUSER`), plus one rule of Meridian's own: which
//! keyspaces a user may select (`docs/security.md`, "ACL users").
//!
//! Users live in the cluster map, so every node enforces the same rules and a restarted node keeps them. The map
//! changes a user only by applying [`AclRule`]s to it ([`User::apply`]), in order, as `ACL SETUSER` words them.
//! Applying is deterministic and needs no secret: a password arrives already hashed (its Argon2id PHC string,
//! hashed by the node that took the command), so the map never sees a password.
//!
//! Applying the same rules twice leaves the user as applying them once did ([`CommandRules::push`] keeps only the
//! last rule naming each command or category), so a node tells that its `ACL SETUSER` took by the map's user
//! already being what the rules make of it.

use crate::glob::glob_match;
use crate::ids::KeyspaceId;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};

/// The user a connection is until it authenticates as another, and the one `--requirepass` gives a password.
pub const DEFAULT_USER: &str = "default";

/// Redis' command categories, in the order `ACL CAT` lists them. Meridian keeps all of them, so rules written for
/// Redis apply unchanged; a category none of Meridian's commands belongs to (`list`, say) names no command.
pub const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The place of category `name` in [`CATEGORIES`].
pub fn category(name: &str) -> Option<u8> {
    CATEGORIES.iter().position(|&c| c.eq_ignore_ascii_case(name)).map(|i| i as u8)
}

/// The bit of category `name` in a command's category set.
pub fn category_bit(name: &str) -> u32 {
    1 << category(name).unwrap_or_else(|| panic!("{name} is one of CATEGORIES"))
}

/// What a `+`/`-` command rule names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommandItem {
    /// `@name`: the commands of a category, by its place in [`CATEGORIES`].
    Category(u8),
    /// A command by its lowercase name.
    Command(String),
}

impl fmt::Display for CommandItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandItem::Category(c) => write!(f, "@{}", CATEGORIES[*c as usize]),
            CommandItem::Command(name) => f.write_str(name),
        }
    }
}

/// A key pattern a user may touch keys by (`~pattern`, or `%R~`, `%W~`, `%RW~` for reads or writes only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyPattern {
    pub pattern: Bytes,
    pub read: bool,
    pub write: bool,
}

impl KeyPattern {
    fn is_everything(&self) -> bool {
        self.read && self.write && self.pattern[..] == *b"*"
    }
}

impl fmt::Display for KeyPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let access = match (self.read, self.write) {
            (true, true) => "",
            (true, false) => "%R",
            _ => "%W",
        };
        write!(f, "{access}~{}", String::from_utf8_lossy(&self.pattern))
    }
}

/// One `ACL SETUSER` rule, passwords already hashed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AclRule {
    On,
    Off,
    /// Any password authenticates the user; its passwords are forgotten.
    NoPass,
    /// No password authenticates the user, until one is added.
    ResetPass,
    AddPassword(String),
    RemovePassword(String),
    /// `+@all`, `allcommands`.
    AllCommands,
    /// `-@all`, `nocommands`.
    NoCommands,
    Allow(CommandItem),
    Deny(CommandItem),
    AddKeys(KeyPattern),
    ResetKeys,
    /// `ks~pattern`: a keyspace the user may select, by a glob of its name (Meridian's own rule).
    AddKeyspaces(String),
    ResetKeyspaces,
    /// A user as new: off, no passwords, no commands, no keys, every keyspace.
    Reset,
}

/// Why a rule cannot apply to a user.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AclError {
    #[error(
        "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. \
         Try 'resetkeys' to start with an empty list of patterns"
    )]
    KeysAfterAll,
    #[error(
        "Adding a keyspace pattern after ks~* (or the 'allkeyspaces' flag) has no effect. Try 'resetkeyspaces' to \
         start with an empty list of keyspaces"
    )]
    KeyspacesAfterAll,
    #[error("The 'default' user cannot be removed")]
    DefaultUser,
}

/// Which commands a user may run: every one, or none, then the rules in order; the last rule naming a command
/// (itself or a category of it) decides.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CommandRules {
    pub all: bool,
    pub rules: Vec<(bool, CommandItem)>,
}

impl CommandRules {
    fn set_all(&mut self, all: bool) {
        self.all = all;
        self.rules.clear();
    }

    /// Adds a rule after the others, dropping an earlier one naming the same item: the new one overrides it for
    /// every command the item covers, so the list stays as short as its effect and a repeated rule changes nothing.
    fn push(&mut self, allow: bool, item: CommandItem) {
        self.rules.retain(|(_, i)| *i != item);
        self.rules.push((allow, item));
    }

    /// Whether the command `name`, of the categories in `categories` (bits by [`CATEGORIES`]), is allowed.
    pub fn allows(&self, name: &str, categories: u32) -> bool {
        let covers = |item: &CommandItem| match item {
            CommandItem::Category(c) => categories & (1 << c) != 0,
            CommandItem::Command(n) => n == name,
        };
        self.rules.iter().rev().find(|(_, item)| covers(item)).map_or(self.all, |(allow, _)| *allow)
    }
}

/// One ACL user.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub enabled: bool,
    pub nopass: bool,
    /// Argon2id PHC strings.
    pub passwords: BTreeSet<String>,
    pub commands: CommandRules,
    pub keys: Vec<KeyPattern>,
    /// Globs of the names of the keyspaces the user may select.
    pub keyspaces: Vec<String>,
}

impl Default for User {
    /// A new user, as Redis makes one: off, no password, no commands, no keys; and every keyspace.
    fn default() -> User {
        User {
            enabled: false,
            nopass: false,
            passwords: BTreeSet::new(),
            commands: CommandRules::default(),
            keys: Vec::new(),
            keyspaces: vec!["*".into()],
        }
    }
}

impl User {
    /// The `default` user as a node has it until `ACL SETUSER default` puts one in the map: every command, key
    /// and keyspace, and `--requirepass`'s password if one was given (else any password).
    pub fn default_user(password: Option<String>) -> User {
        User {
            enabled: true,
            nopass: password.is_none(),
            passwords: password.into_iter().collect(),
            commands: CommandRules { all: true, rules: Vec::new() },
            keys: vec![KeyPattern { pattern: Bytes::from_static(b"*"), read: true, write: true }],
            keyspaces: vec!["*".into()],
        }
    }

    /// Applies `rule`; on an error the user is as it was.
    pub fn apply(&mut self, rule: &AclRule) -> Result<(), AclError> {
        match rule {
            AclRule::On => self.enabled = true,
            AclRule::Off => self.enabled = false,
            AclRule::NoPass => {
                self.nopass = true;
                self.passwords.clear();
            }
            AclRule::ResetPass => {
                self.nopass = false;
                self.passwords.clear();
            }
            AclRule::AddPassword(hash) => {
                self.nopass = false;
                self.passwords.insert(hash.clone());
            }
            AclRule::RemovePassword(hash) => {
                self.passwords.remove(hash);
            }
            AclRule::AllCommands => self.commands.set_all(true),
            AclRule::NoCommands => self.commands.set_all(false),
            AclRule::Allow(item) => self.commands.push(true, item.clone()),
            AclRule::Deny(item) => self.commands.push(false, item.clone()),
            AclRule::AddKeys(pattern) => self.add_keys(pattern)?,
            AclRule::ResetKeys => self.keys.clear(),
            AclRule::AddKeyspaces(pattern) => self.add_keyspaces(pattern)?,
            AclRule::ResetKeyspaces => self.keyspaces.clear(),
            AclRule::Reset => *self = User::default(),
        }
        Ok(())
    }

    /// Applies every rule in order, or none of them.
    pub fn applied(&self, rules: &[AclRule]) -> Result<User, AclError> {
        let mut user = self.clone();
        rules.iter().try_for_each(|r| user.apply(r))?;
        Ok(user)
    }

    fn add_keys(&mut self, pattern: &KeyPattern) -> Result<(), AclError> {
        if pattern.is_everything() {
            self.keys = vec![pattern.clone()];
        } else if self.keys.iter().any(KeyPattern::is_everything) {
            return Err(AclError::KeysAfterAll);
        } else if !self.keys.contains(pattern) {
            self.keys.push(pattern.clone());
        }
        Ok(())
    }

    fn add_keyspaces(&mut self, pattern: &str) -> Result<(), AclError> {
        if pattern == "*" {
            self.keyspaces = vec!["*".into()];
        } else if self.keyspaces.iter().any(|k| k == "*") {
            return Err(AclError::KeyspacesAfterAll);
        } else if !self.keyspaces.iter().any(|k| k == pattern) {
            self.keyspaces.push(pattern.into());
        }
        Ok(())
    }

    /// Whether `password` may authenticate the user, given how to check it against one of its hashes.
    pub fn accepts(&self, check: impl Fn(&str) -> bool) -> bool {
        self.enabled && (self.nopass || self.passwords.iter().any(|h| check(h)))
    }

    /// Whether the user may touch `key` for a read (`write` false) or a write.
    pub fn may_touch(&self, key: &[u8], write: bool) -> bool {
        self.keys.iter().any(|p| (if write { p.write } else { p.read }) && glob_match(&p.pattern, key))
    }

    /// Whether the user may select the keyspace named `name`.
    pub fn may_select(&self, name: &str) -> bool {
        self.keyspaces.iter().any(|k| glob_match(k.as_bytes(), name.as_bytes()))
    }

    /// Whether the user may touch every key and select every keyspace.
    pub fn unrestricted_data(&self) -> bool {
        self.keys.iter().any(KeyPattern::is_everything) && self.keyspaces.iter().any(|k| k == "*")
    }

    /// The user's rules as `ACL LIST` shows them after `user NAME`: words `ACL SETUSER` takes back.
    pub fn describe(&self) -> String {
        let mut out = String::from(if self.enabled { "on" } else { "off" });
        if self.nopass {
            out.push_str(" nopass");
        }
        self.passwords.iter().for_each(|h| write!(out, " #{h}").expect("a String takes writes"));
        self.keys.iter().for_each(|k| write!(out, " {k}").expect("a String takes writes"));
        // A user starts with every keyspace: any other list must say it starts afresh.
        if self.keyspaces != ["*"] {
            out.push_str(" resetkeyspaces");
        }
        self.keyspaces.iter().for_each(|k| write!(out, " ks~{k}").expect("a String takes writes"));
        out.push_str(if self.commands.all { " +@all" } else { " -@all" });
        for (allow, item) in &self.commands.rules {
            write!(out, " {}{item}", if *allow { '+' } else { '-' }).expect("a String takes writes");
        }
        out
    }
}

/// What a node's client connections check commands against: the map's users, and the keyspace names that
/// `ks~` patterns match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    pub users: BTreeMap<String, User>,
    pub keyspaces: BTreeMap<KeyspaceId, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(p: &str) -> AclRule {
        AclRule::AddKeys(KeyPattern { pattern: Bytes::copy_from_slice(p.as_bytes()), read: true, write: true })
    }

    const READ: u32 = 1 << 1;
    const WRITE: u32 = 1 << 2;

    #[test]
    fn the_last_rule_naming_a_command_decides() {
        let rules = [AclRule::AllCommands, AclRule::Deny(CommandItem::Category(2)), AclRule::Allow(cmd("set"))];
        let user = User::default().applied(&rules).unwrap();
        assert!(user.commands.allows("get", READ));
        assert!(user.commands.allows("set", WRITE), "named after the category");
        assert!(!user.commands.allows("del", WRITE));
        let none = User::default();
        assert!(!none.commands.allows("get", READ));
        assert_eq!(user.describe(), "off ks~* +@all -@write +set");
    }

    fn cmd(name: &str) -> CommandItem {
        CommandItem::Command(name.into())
    }

    #[test]
    fn applying_rules_twice_is_applying_them_once() {
        let rules = [
            AclRule::On,
            AclRule::AddPassword("$argon2id$h".into()),
            AclRule::Allow(CommandItem::Category(1)),
            AclRule::Deny(cmd("keys")),
            AclRule::Allow(CommandItem::Category(1)),
            keys("cached:*"),
            AclRule::ResetKeyspaces,
            AclRule::AddKeyspaces("orders".into()),
        ];
        let once = User::default().applied(&rules).unwrap();
        assert_eq!(once.applied(&rules).unwrap(), once);
        assert!(once.commands.allows("keys", READ), "the later +@read overrides -keys");
        assert!(once.may_touch(b"cached:1", false) && !once.may_touch(b"other", false));
        assert!(once.may_select("orders") && !once.may_select("default"));
        assert_eq!(once.describe(), "on #$argon2id$h ~cached:* resetkeyspaces ks~orders -@all -keys +@read");
    }

    #[test]
    fn patterns_after_everything_are_refused_and_change_nothing() {
        let all = User::default().applied(&[keys("*")]).unwrap();
        assert_eq!(all.applied(&[keys("a*")]), Err(AclError::KeysAfterAll));
        assert_eq!(User::default().applied(&[AclRule::AddKeyspaces("x".into())]), Err(AclError::KeyspacesAfterAll));
        let narrowed = all.applied(&[AclRule::ResetKeys, keys("a*"), keys("a*")]).unwrap();
        assert_eq!(narrowed.keys.len(), 1);
    }

    #[test]
    fn read_and_write_patterns_split_access() {
        let read_only = KeyPattern { pattern: Bytes::from_static(b"r:*"), read: true, write: false };
        let user = User::default().applied(&[AclRule::AddKeys(read_only)]).unwrap();
        assert!(user.may_touch(b"r:1", false) && !user.may_touch(b"r:1", true));
        assert_eq!(user.describe(), "off %R~r:* ks~* -@all");
    }

    #[test]
    fn passwords_authenticate_only_enabled_users() {
        let user = User::default().applied(&[AclRule::AddPassword("h1".into())]).unwrap();
        assert!(!user.accepts(|h| h == "h1"), "off");
        let on = user.applied(&[AclRule::On]).unwrap();
        assert!(on.accepts(|h| h == "h1") && !on.accepts(|h| h == "h2"));
        let nopass = on.applied(&[AclRule::NoPass]).unwrap();
        assert!(nopass.accepts(|_| false) && nopass.passwords.is_empty());
        assert!(!nopass.applied(&[AclRule::ResetPass]).unwrap().accepts(|_| true));
        assert!(User::default_user(None).accepts(|_| false));
        assert_eq!(User::default_user(None).describe(), "on nopass ~* ks~* +@all");
    }
}
