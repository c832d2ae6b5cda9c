//! Administration requests (`meridian ctl`, the HTTP admin API, RESP's `SELECT`, `KEYSPACE` and `ACL`), served
//! by the node a client asks: the ones about nodes are handed to the manager's leader and answered at once; the
//! ones about keyspaces, ACL users and the manager's voters are checked against this node's map, handed to the
//! leader, and answered once this node's map shows the change (or the leader refuses it, or
//! [`KEYSPACE_TIMEOUT_TICKS`] pass).

use super::{ClusterNode, NodeFx};
use crate::manager::msg::MgrMsg;
use crate::map::{ClusterMap, MapCommand, NodeAddrs};
use meridian_core::keyspace::database_number;
use meridian_core::{
    Admin, ErrorKind, KeyspaceConfig, KeyspaceRef, NodeId, NodeToAdd, Reply, RequestId, Time, UserChange,
};

/// Manager ticks a keyspace command may wait for this node's map to show it.
pub const KEYSPACE_TIMEOUT_TICKS: u32 = 100;
/// Manager ticks between two sends of a waiting keyspace command (to whoever leads then).
const RESEND_TICKS: u32 = 10;

/// A keyspace command waiting for the map to show it.
#[derive(Debug)]
pub(super) struct PendingAdmin {
    id: RequestId,
    cmd: MapCommand,
    /// Manager ticks waited so far.
    ticks: u32,
}

impl PendingAdmin {
    /// The answer once `map` shows the command carried out.
    fn done(&self, map: &ClusterMap) -> Option<String> {
        match &self.cmd {
            MapCommand::CreateKeyspace { name, config } => created(map, name, config),
            MapCommand::CreateDatabase { number, config } => created(map, &format!("db{number}"), config),
            MapCommand::DropKeyspace { name } => {
                map.keyspace_named(name).is_none().then(|| format!("dropped keyspace {name}"))
            }
            MapCommand::SetMasterRegion { name, region } => {
                let (_, k) = map.keyspace_named(name)?;
                let home = k.config.placement.home() == Some(region.as_str());
                home.then(|| format!("keyspace {name} is mastered in region {region}"))
            }
            MapCommand::SetKeyMaster { name, key, region } => {
                let (id, _) = map.keyspace_named(name)?;
                let pin = map.key_masters(id)?.pinned.get(key)?;
                let key = String::from_utf8_lossy(key);
                (pin.region == *region).then(|| format!("key {key} of keyspace {name} is mastered in region {region}"))
            }
            MapCommand::SetUser { name, base, rules } => {
                let user = map.users.get(name).or(base.as_ref());
                let shown = user.is_some_and(|u| u.applied(rules).as_ref() == Ok(u));
                shown.then(|| format!("user {name} set"))
            }
            MapCommand::DelUsers { names } => {
                names.iter().all(|n| !map.users.contains_key(n)).then(|| format!("deleted {}", names.join(" ")))
            }
            MapCommand::WantVoters { voters } => wanted_voters(map, voters),
            _ => unreachable!("only keyspace, ACL and voter commands wait"),
        }
    }
}

impl ClusterNode {
    pub(super) fn admin(&mut self, now: Time, id: RequestId, admin: Admin, out: &mut NodeFx) {
        match admin {
            Admin::Status => out.reply(id, Reply::Text(self.status(now).to_string())),
            Admin::Metrics => out.reply(id, Reply::Text(self.metrics(now))),
            Admin::RemoveNode { id: node } => {
                let done = format!("asked the manager to drain and remove node {}", node.0);
                self.forward_to_leader(now, id, MgrMsg::Leave { id: node }, done, out);
            }
            Admin::AddNode(node) => {
                let NodeToAdd { id: node, peer_addr, resp_addr, http_addr, vnodes, location } = *node;
                let done = format!("asked the manager to add node {}", node.0);
                let addrs = NodeAddrs { peer_addr, resp_addr, http_addr };
                self.forward_to_leader(
                    now,
                    id,
                    MgrMsg::Join { id: node, addrs, vnodes, location, host: None },
                    done,
                    out,
                );
            }
            Admin::CreateKeyspace { name, config } => {
                // A database's name, whoever asks (SELECT, or an operator): the map keeps SELECT's numbers stable.
                let cmd = match database_number(&name) {
                    Some(number) => MapCommand::CreateDatabase { number, config: *config },
                    None => MapCommand::CreateKeyspace { name, config: *config },
                };
                self.keyspace_command(now, id, cmd, out)
            }
            Admin::DropKeyspace { name } => self.keyspace_command(now, id, MapCommand::DropKeyspace { name }, out),
            Admin::SetMasterRegion { name, region } => {
                self.keyspace_command(now, id, MapCommand::SetMasterRegion { name, region }, out)
            }
            Admin::SetKeyMaster { name, key, region } => {
                self.keyspace_command(now, id, MapCommand::SetKeyMaster { name, key, region }, out)
            }
            Admin::Keyspaces => match self.agent.map() {
                Some(map) => out.reply(id, Reply::Text(self.keyspaces_json(map).to_string())),
                None => out.reply(id, no_map()),
            },
            Admin::Resolve(what) => out.reply(id, self.resolve(&what)),
            Admin::SetUser(change) => {
                let UserChange { name, base, rules } = *change;
                self.keyspace_command(now, id, MapCommand::SetUser { name, base, rules }, out)
            }
            Admin::DelUsers { names } => self.keyspace_command(now, id, MapCommand::DelUsers { names }, out),
            Admin::SetVoters { voters } => self.keyspace_command(now, id, MapCommand::WantVoters { voters }, out),
        }
    }

    /// The keyspace a client names, by this node's map.
    fn resolve(&self, what: &KeyspaceRef) -> Reply {
        let Some(map) = self.agent.map() else { return no_map() };
        let found = match what {
            KeyspaceRef::Name(name) => map.keyspace_named(name).map(|(id, _)| id),
            KeyspaceRef::Id(id) => map.keyspaces.contains_key(id).then_some(*id),
        };
        match (found, what) {
            (Some(id), _) => Reply::Keyspace(id),
            (None, KeyspaceRef::Name(name)) => Reply::Error(ErrorKind::Invalid, format!("unknown keyspace {name:?}")),
            (None, KeyspaceRef::Id(id)) => {
                Reply::Error(ErrorKind::Invalid, format!("unknown keyspace number {}", id.0))
            }
        }
    }

    /// Refuses at once what this node's map refuses; otherwise hands the command to the leader and waits.
    fn keyspace_command(&mut self, now: Time, id: RequestId, cmd: MapCommand, out: &mut NodeFx) {
        let Some(map) = self.agent.map() else { return out.reply(id, no_map()) };
        if let Err(e) = (**map).clone().apply(&cmd) {
            return out.reply(id, Reply::Error(ErrorKind::Invalid, e.to_string()));
        }
        let pending = PendingAdmin { id, cmd, ticks: 0 };
        if let Some(done) = pending.done(map) {
            // Already in effect: no new map would come to say so.
            return out.reply(id, Reply::Text(done));
        }
        self.pending_admin.push(pending);
        self.send_pending(now, self.pending_admin.len() - 1, out);
    }

    fn send_pending(&mut self, now: Time, i: usize, out: &mut NodeFx) {
        let Some(leader) = self.agent.leader_guess() else { return };
        let p = &self.pending_admin[i];
        let msg = MgrMsg::Admin { cmd: p.cmd.clone(), ask: p.id.0 };
        self.deliver_mgr(now, leader, msg, out);
    }

    /// Answers the keyspace commands the newest map shows carried out.
    pub(super) fn settle_admin(&mut self, out: &mut NodeFx) {
        let Some(map) = self.agent.map().cloned() else { return };
        self.pending_admin.retain(|p| match p.done(&map) {
            Some(text) => {
                out.reply(p.id, Reply::Text(text));
                false
            }
            None => true,
        });
    }

    /// The leader refused command `ask`: unless the map already shows it done (a resent command is refused
    /// once the first one took), the client hears why.
    pub(super) fn admin_refused(&mut self, ask: u64, reason: String, out: &mut NodeFx) {
        self.settle_admin(out);
        if let Some(i) = self.pending_admin.iter().position(|p| p.id.0 == ask) {
            let p = self.pending_admin.remove(i);
            out.reply(p.id, Reply::Error(ErrorKind::Invalid, reason));
        }
    }

    /// Every manager tick: resends what still waits, and gives up on what waited too long.
    pub(super) fn tend_admin(&mut self, now: Time, out: &mut NodeFx) {
        let mut due = Vec::new();
        for p in &mut self.pending_admin {
            p.ticks += 1;
            if p.ticks.is_multiple_of(RESEND_TICKS) {
                due.push(p.id);
            }
        }
        // A send to a leader on this node is answered at once, and the answer may settle commands of the list.
        for id in due {
            if let Some(i) = self.pending_admin.iter().position(|p| p.id == id) {
                self.send_pending(now, i, out);
            }
        }
        self.pending_admin.retain(|p| {
            let expired = p.ticks >= KEYSPACE_TIMEOUT_TICKS;
            if expired {
                let msg = "the cluster map did not show the change in time; `keyspace list` tells whether it took";
                out.reply(p.id, Reply::Error(ErrorKind::Timeout, msg.to_string()));
            }
            !expired
        });
    }

    /// Forwards an administration request to the manager's leader, and tells the client so. The request is
    /// idempotent; whether it took shows in the map (`Admin::Status`).
    fn forward_to_leader(&mut self, now: Time, id: RequestId, msg: MgrMsg, done: String, out: &mut NodeFx) {
        let Some(leader) = self.agent.leader_guess() else {
            let msg = "no manager leader is known yet; retry".to_string();
            return out.reply(id, Reply::Error(ErrorKind::Unavailable, msg));
        };
        self.deliver_mgr(now, leader, msg, out);
        out.reply(id, Reply::Text(done));
    }
}

/// The answer to a create of keyspace `name` with `config` once `map` has it.
fn created(map: &ClusterMap, name: &str, config: &KeyspaceConfig) -> Option<String> {
    let (id, k) = map.keyspace_named(name)?;
    (k.config == *config).then(|| format!("created keyspace {name} (number {})", id.0))
}

/// The answer to `WantVoters { voters }` once `map` records the wish.
fn wanted_voters(map: &ClusterMap, voters: &[NodeId]) -> Option<String> {
    let mut wanted = voters.to_vec();
    wanted.sort_unstable();
    if map.voters_wanted != wanted {
        return None;
    }
    let names = wanted.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    Some(match (wanted.is_empty(), map.manager_voters == wanted) {
        (true, _) => "the manager chooses its voters".to_string(),
        (false, true) => format!("the manager's voters are {names}"),
        (false, false) => format!("the manager is moving its voters to {names}"),
    })
}

fn no_map() -> Reply {
    Reply::Error(ErrorKind::Unavailable, "this node has not yet received the cluster map; retry".to_string())
}
