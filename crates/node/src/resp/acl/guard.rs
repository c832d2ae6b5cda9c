//! What a connection may do, checked before each command runs: whether it has authenticated, and the rules of
//! its user (commands, key patterns, and the keyspace it is in). The rules are compiled for the session's user
//! and keyspace once, and again only when the cluster map's users or keyspaces change (the driver publishes
//! them: `Process::access`), the connection authenticates, or it selects another keyspace; a command of a user
//! who may do everything costs one atomic load.

use super::super::auth::{noauth, open_to_all};
use super::super::commands::{Action, Command, COMMANDS};
use super::super::frame::Frame;
use super::super::frontend::Frontend;
use super::categories::{by_subcommand, categories};
use bytes::Bytes;
use meridian_core::acl::{Access, User, DEFAULT_USER};
use meridian_core::KeyspaceId;
use std::sync::Arc;
use tokio::sync::watch;
use tracing::debug;

const _: () = assert!(COMMANDS.len() <= 128, "a user's commands are one bit each of a u128");

pub(crate) struct Guard {
    /// The users and keyspace names as the core last published them; None in sessions made for unit tests,
    /// which may do everything.
    access: Option<watch::Receiver<Option<Arc<Access>>>>,
    /// The user the connection authenticated as.
    user: Option<String>,
    /// What the user may do; None: to compile before the next command.
    grant: Option<Grant>,
}

enum Grant {
    /// Not authenticated: AUTH, HELLO and QUIT only.
    Nothing,
    /// Every command, on every key, in every keyspace.
    Everything,
    /// The user's rules, in the session's keyspace.
    Limited(Box<Limited>),
    /// The user was deleted: the connection is closed, as Redis closes it.
    Deleted,
}

struct Limited {
    user: User,
    /// Bit `i`: the user may run `COMMANDS[i]` (for a command filed by subcommand, see `user` instead).
    commands: u128,
    /// The keyspace's name if the user may not select it.
    forbidden_keyspace: Option<String>,
    access: Arc<Access>,
}

impl Guard {
    /// A guard that lets everything through, for unit tests' sessions.
    pub(crate) fn open() -> Guard {
        Guard { access: None, user: Some(DEFAULT_USER.into()), grant: Some(Grant::Everything) }
    }

    /// A new connection's guard: as the `default` user if it needs no password, else not authenticated.
    pub(crate) fn for_client(frontend: &Frontend) -> Guard {
        let mut guard = Guard { access: Some(frontend.access.clone()), user: None, grant: None };
        if guard.user_named(DEFAULT_USER, frontend).is_some_and(|u| u.enabled && u.nopass) {
            guard.user = Some(DEFAULT_USER.into());
        }
        guard
    }

    /// The client's TLS certificate names `user` (`--tls-auth-clients-user CN`): the connection starts as that
    /// user if it exists and is on, with no password asked, as the certificate the CA signed is the credential;
    /// else it stays as it started, as in Redis. Later changes to the user reach it as they reach one that used
    /// AUTH: the guard keeps only the name.
    pub(crate) fn start_as_certified(&mut self, user: String, frontend: &Frontend) {
        if self.user_named(&user, frontend).is_some_and(|u| u.enabled) {
            self.authenticate(user);
        } else {
            debug!(user, "a client certificate names no user that is on: the connection starts without it");
        }
    }

    /// The user the connection authenticated as.
    pub(crate) fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    pub(crate) fn authenticate(&mut self, user: String) {
        self.user = Some(user);
        self.grant = None;
    }

    /// The session moved to another keyspace.
    pub(crate) fn moved(&mut self) {
        self.grant = None;
    }

    /// The users and keyspaces as published now.
    pub(crate) fn access(&self) -> Arc<Access> {
        let published = self.access.as_ref().and_then(|rx| rx.borrow().clone());
        published.unwrap_or_default()
    }

    /// User `name` as this node has it: the map's, or this node's own `default` user if the map has none.
    pub(crate) fn user_named(&self, name: &str, frontend: &Frontend) -> Option<User> {
        let access = self.access();
        let mapped = access.users.get(name).cloned();
        mapped.or_else(|| (name == DEFAULT_USER).then(|| frontend.default_user.clone()))
    }

    /// Whether the user may select the keyspace `id`.
    pub(crate) fn may_select(&self, id: KeyspaceId, frontend: &Frontend) -> Result<(), Frame> {
        let Some(user) = self.user.as_deref().and_then(|u| self.user_named(u, frontend)) else {
            return if self.access.is_none() { Ok(()) } else { Err(noauth()) };
        };
        let access = self.access();
        let name = access.keyspaces.get(&id).map_or("", String::as_str);
        if user.may_select(name) {
            return Ok(());
        }
        Err(Frame::error(format!("NOPERM this user has no permissions to select keyspace '{name}'")))
    }

    /// Why the command at `index` may not run with `args` in `keyspace`, if it may not.
    pub(crate) fn refuse(
        &mut self,
        index: usize,
        args: &[Bytes],
        keyspace: KeyspaceId,
        frontend: &Frontend,
    ) -> Option<Action> {
        if self.access.as_ref().is_some_and(|rx| rx.has_changed().unwrap_or(false)) {
            self.grant = None;
        }
        if self.grant.is_none() {
            self.grant = Some(self.compile(keyspace, frontend));
        }
        match self.grant.as_ref()? {
            Grant::Everything => None,
            Grant::Nothing => (!open_to_all(COMMANDS[index].name)).then(|| noauth().into()),
            Grant::Limited(limited) => limited.refuse(index, args).map(Action::from),
            Grant::Deleted => {
                Some(Action::close_after(Frame::error("ERR the user of this connection was deleted (ACL DELUSER)")))
            }
        }
    }

    fn compile(&mut self, keyspace: KeyspaceId, frontend: &Frontend) -> Grant {
        let access = match &mut self.access {
            Some(rx) => rx.borrow_and_update().clone().unwrap_or_default(),
            None => return Grant::Everything,
        };
        let Some(name) = self.user.as_deref() else { return Grant::Nothing };
        let Some(user) = self.user_named(name, frontend) else { return Grant::Deleted };
        // `+@all` alone, the default user's rule: every command, known without asking each one's categories,
        // which cost a new connection about 500 instructions per command in the table.
        if user.commands.all && user.commands.rules.is_empty() && user.unrestricted_data() {
            return Grant::Everything;
        }
        let allowed = |i: usize| user.commands.allows(COMMANDS[i].name, categories(&COMMANDS[i], None));
        let commands = (0..COMMANDS.len()).filter(|&i| allowed(i)).fold(0u128, |bits, i| bits | 1 << i);
        let everything = commands.count_ones() as usize == COMMANDS.len() && user.commands.all;
        if everything && user.unrestricted_data() {
            return Grant::Everything;
        }
        let keyspace_name = access.keyspaces.get(&keyspace).cloned().unwrap_or_default();
        let forbidden_keyspace = (!user.may_select(&keyspace_name)).then_some(keyspace_name);
        Grant::Limited(Box::new(Limited { user, commands, forbidden_keyspace, access }))
    }
}

impl Limited {
    fn refuse(&self, index: usize, args: &[Bytes]) -> Option<Frame> {
        let command = &COMMANDS[index];
        let (allowed, name) = match (by_subcommand(command), args.get(1)) {
            (true, Some(sub)) => {
                let allowed = self.user.commands.allows(command.name, categories(command, Some(sub)));
                (allowed, format!("{}|{}", command.name, String::from_utf8_lossy(sub).to_lowercase()))
            }
            _ => (self.commands & 1 << index != 0, command.name.to_string()),
        };
        if !allowed {
            return Some(Frame::error(format!("NOPERM this user has no permissions to run the '{name}' command")));
        }
        let touches_data = command.flags.iter().any(|&f| f == "readonly" || f == "write");
        if let (true, Some(name)) = (touches_data, &self.forbidden_keyspace) {
            return Some(Frame::error(format!("NOPERM this user has no permissions to use keyspace '{name}'")));
        }
        if command.name == "flushall" && !self.access.keyspaces.values().all(|k| self.user.may_select(k)) {
            return Some(Frame::error("NOPERM this user has no permissions to flush every keyspace"));
        }
        let write = command.flags.contains(&"write");
        if keys(command, args).any(|key| !self.user.may_touch(key, write)) {
            return Some(Frame::error(
                "NOPERM this user has no permissions to access one of the keys used as arguments",
            ));
        }
        None
    }
}

/// The keys among `args` by the command's key positions (as COMMAND reports them); none for a command without
/// keys (its first key at 0).
fn keys<'a>(command: &Command, args: &'a [Bytes]) -> impl Iterator<Item = &'a [u8]> {
    let len = args.len() as i64;
    let last = if command.last_key < 0 { len + command.last_key } else { command.last_key.min(len - 1) };
    let first = if command.first_key > 0 { command.first_key } else { last + 1 };
    (first..=last).step_by(command.step.max(1) as usize).map(move |i| &args[i as usize][..])
}
