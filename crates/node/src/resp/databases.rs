//! Redis' numbered databases over Meridian's named keyspaces: which keyspace `SELECT n` chooses, and which
//! number INFO's `db<n>` lines give a keyspace (docs/keyspaces.md, "Choosing a keyspace from a Redis client").
//!
//! `SELECT n` chooses the keyspace named `db<n>`; failing that, keyspace number n as `keyspace list` shows it,
//! unless that one is itself another database (`db<m>`), so that a keyspace made with `meridian ctl` keeps its
//! number and no two numbers name one keyspace; failing both, for n below [`DATABASES`], it creates `db<n>` with
//! the `default` keyspace's configuration, through the administration request `meridian ctl keyspace create`
//! sends, and chooses it once this node's map shows it. A fresh cluster so has Redis' sixteen databases, each
//! made on its first SELECT; from 16 on, a number without a keyspace is out of range, as in Redis.

use crate::http::NewKeyspace;
use crate::inbox::{Answer, CoreInbox};
use meridian_core::keyspace::database_number;
use meridian_core::{Admin, ErrorKind, KeyspaceId, KeyspaceRef, Reply, Request};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Redis' default `databases`: SELECT creates the numbers below it that have no keyspace.
pub(super) const DATABASES: u32 = 16;

/// A keyspace as `Admin::Keyspaces` lists it.
#[derive(Debug)]
pub(super) struct Listed {
    pub(super) id: KeyspaceId,
    pub(super) name: String,
    /// The whole entry: configuration included.
    entry: serde_json::Value,
}

impl Listed {
    /// A cache keyspace's cap per node; None for a keyspace without one.
    pub(super) fn maxmemory(&self) -> Option<u64> {
        self.entry["maxmemory"].as_u64()
    }
}

/// The core's answer to SELECT n, on its way: the keyspace to switch to, once it exists.
pub(super) fn selecting(core: Arc<dyn CoreInbox>, n: u32) -> Answer {
    let (tx, rx) = oneshot::channel();
    // A task of its own, as creating a database takes a few requests in turn; the connection waits for its
    // answer before it runs its next command, as for any SELECT.
    tokio::spawn(async move {
        // The connection has gone if nobody waits for the answer; the database stays either way.
        let _ = tx.send(selected(core.as_ref(), n).await);
    });
    Answer::Coming(rx)
}

/// SELECT n: the keyspace it chooses, creating `db<n>` if need be (the module's rules).
async fn selected(core: &dyn CoreInbox, n: u32) -> Reply {
    let listed = match keyspaces(core).await {
        Ok(listed) => listed,
        Err(failed) => return failed,
    };
    if let Some(id) = chosen(n, &listed) {
        return Reply::Keyspace(id);
    }
    if n >= DATABASES {
        return Reply::Error(ErrorKind::Invalid, "DB index is out of range".into());
    }
    let config = match default_config(&listed) {
        Ok(config) => config,
        Err(why) => return Reply::Error(ErrorKind::Invalid, why),
    };
    let name = format!("db{n}");
    let created = admin(core, Admin::CreateKeyspace { name: name.clone(), config: Box::new(config) }).await;
    // By name, whether this create made it or a concurrent SELECT (here or on another node) did first.
    match admin(core, Admin::Resolve(KeyspaceRef::Name(name))).await {
        Reply::Keyspace(id) => Reply::Keyspace(id),
        // The map refuses `db<n>` while keyspace number n has another name (made elsewhere, not yet in this
        // node's map, which SELECT n then chooses): it shows here within a heartbeat or two.
        _ if matches!(created, Reply::Error(..)) => chosen_within(core, n, MAP_LAG_MAX).await.unwrap_or(created),
        not_there => not_there,
    }
}

/// How long SELECT waits for this node's map to show a keyspace the cluster's map has.
const MAP_LAG_MAX: Duration = Duration::from_secs(1);

/// The keyspace SELECT n chooses, once this node's map shows one, if it does within `limit`.
async fn chosen_within(core: &dyn CoreInbox, n: u32, limit: Duration) -> Option<Reply> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(id) = keyspaces(core).await.ok().and_then(|listed| chosen(n, &listed)) {
            return Some(Reply::Keyspace(id));
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every keyspace, as this node's map has them.
pub(super) async fn keyspaces(core: &dyn CoreInbox) -> Result<Vec<Listed>, Reply> {
    match admin(core, Admin::Keyspaces).await {
        Reply::Text(json) => parsed(&json)
            .ok_or_else(|| Reply::Error(ErrorKind::Invalid, format!("internal error: a keyspace list of {json}"))),
        other => Err(other),
    }
}

fn parsed(json: &str) -> Option<Vec<Listed>> {
    let entries: Vec<serde_json::Value> = serde_json::from_str(json).ok()?;
    let listed = |entry: serde_json::Value| {
        let id = KeyspaceId(u32::try_from(entry["id"].as_u64()?).ok()?);
        Some(Listed { id, name: entry["name"].as_str()?.to_string(), entry })
    };
    entries.into_iter().map(listed).collect()
}

async fn admin(core: &dyn CoreInbox, admin: Admin) -> Reply {
    super::pending::receive(&mut core.submit(Request::Admin(admin))).await
}

/// The keyspace SELECT n chooses among `listed`, if there is one.
pub(super) fn chosen(n: u32, listed: &[Listed]) -> Option<KeyspaceId> {
    let named = listed.iter().find(|k| database_number(&k.name) == Some(n));
    let numbered = || listed.iter().find(|k| k.id.0 == n && database_number(&k.name).is_none_or(|m| m == n));
    named.or_else(numbered).map(|k| k.id)
}

/// The number SELECT chooses `keyspace` by, if any: none for one whose number another keyspace's name
/// (`db<n>`) has taken, which only KEYSPACE reaches.
pub(super) fn number_of(keyspace: &Listed, listed: &[Listed]) -> Option<u32> {
    let n = database_number(&keyspace.name).unwrap_or(keyspace.id.0);
    (chosen(n, listed) == Some(keyspace.id)).then_some(n)
}

/// The `default` keyspace's configuration, which a new database takes.
fn default_config(listed: &[Listed]) -> Result<meridian_core::KeyspaceConfig, String> {
    let default = listed.iter().find(|k| k.id == KeyspaceId::DEFAULT).ok_or("no default keyspace is listed")?;
    let spec: NewKeyspace = serde_json::from_value(default.entry.clone()).map_err(|e| e.to_string())?;
    spec.config()
}

#[cfg(test)]
mod tests {
    use super::super::commands::Session;
    use super::super::frame::Frame;
    use super::super::testing::Scripted;
    use super::*;
    use meridian_core::{KeyspaceConfig, ReplicaKind};
    use std::sync::Mutex;

    /// A keyspace list entry as the core writes it for a chain keyspace: other protocols' knobs null.
    fn entry(id: u32, name: &str, replicas: &[&str], maxmemory: Option<u64>) -> serde_json::Value {
        serde_json::json!({
            "id": id, "name": name, "replication": replicas.len(), "replicas": replicas, "update": "su",
            "read_from": "tail", "durability": null, "maxmemory": maxmemory, "protocol": "chain",
            "placement": [], "ban_regions": [], "read_quorum": null, "write_quorum": null, "timestamps": null,
            "lease_ms": null, "write_mode": null, "status_interval_ms": null, "clock_bound_ms": null,
            "theta_ms": null, "redundancy": null, "unsafe": null,
        })
    }

    fn listed(names: &[(u32, &str)]) -> Vec<Listed> {
        let entries: Vec<_> = names.iter().map(|&(id, name)| entry(id, name, &["log"], None)).collect();
        parsed(&serde_json::Value::Array(entries).to_string()).unwrap()
    }

    #[test]
    fn database_names_are_db_and_a_number_as_redis_writes_it() {
        assert_eq!(database_number("db0"), Some(0));
        assert_eq!(database_number("db15"), Some(15));
        assert_eq!(database_number("db4294967295"), Some(u32::MAX));
        for name in ["db", "db01", "db-1", "db+1", "db1x", "DB1", "xdb1", "db4294967296", "default"] {
            assert_eq!(database_number(name), None, "{name}");
        }
    }

    #[test]
    fn select_prefers_the_database_name_then_the_keyspace_number() {
        // `cache` was made with ctl (number 1); db9 was made by a SELECT 9 (number 2), db1 by a SELECT 1.
        let ks = listed(&[(0, "default"), (1, "cache"), (2, "db9"), (3, "db1")]);
        assert_eq!(chosen(0, &ks), Some(KeyspaceId(0)));
        assert_eq!(chosen(9, &ks), Some(KeyspaceId(2)));
        assert_eq!(chosen(1, &ks), Some(KeyspaceId(3)), "the name db1 comes before number 1");
        assert_eq!(chosen(2, &ks), None, "number 2 is db9's, not database 2");
        assert_eq!(chosen(3, &ks), None, "number 3 is db1's");
        assert_eq!(chosen(5, &ks), None);
        let numbers: Vec<_> = ks.iter().map(|k| number_of(k, &ks)).collect();
        assert_eq!(numbers, [Some(0), None, Some(9), Some(1)], "cache is reached by KEYSPACE only");
        let ctl_made = listed(&[(0, "default"), (1, "cache"), (2, "md")]);
        assert_eq!(chosen(2, &ctl_made), Some(KeyspaceId(2)), "a ctl keyspace keeps its number");
        assert_eq!(number_of(&ctl_made[2], &ctl_made), Some(2));
    }

    /// A core holding keyspaces, which creates them as the leader would, noting each create.
    fn cluster(names: &[(u32, &str)]) -> (Arc<Scripted>, Arc<Mutex<Vec<serde_json::Value>>>) {
        let held: Vec<_> = names.iter().map(|&(id, name)| entry(id, name, &["mem", "log"], None)).collect();
        let held = Arc::new(Mutex::new(held));
        let map = held.clone();
        let core = Scripted::new(move |req| {
            let mut map = map.lock().unwrap();
            match req {
                Request::Admin(Admin::Keyspaces) => Reply::Text(serde_json::Value::Array(map.clone()).to_string()),
                Request::Admin(Admin::CreateKeyspace { name, config }) => {
                    assert_eq!(config.replicas, [ReplicaKind::Mem, ReplicaKind::Log], "default's configuration");
                    let id = map.len() as u32;
                    map.push(entry(id, name, &["mem", "log"], None));
                    Reply::Text(format!("created keyspace {name} (number {id})"))
                }
                Request::Admin(Admin::Resolve(KeyspaceRef::Name(name))) => {
                    match map.iter().find(|e| e["name"] == name.as_str()) {
                        Some(e) => Reply::Keyspace(KeyspaceId(e["id"].as_u64().unwrap() as u32)),
                        None => Reply::Error(ErrorKind::Invalid, format!("unknown keyspace {name:?}")),
                    }
                }
                other => panic!("SELECT asked {other:?}"),
            }
        });
        (core, held)
    }

    #[tokio::test]
    async fn select_creates_a_missing_database_below_16_with_default_s_configuration() {
        let (core, held) = cluster(&[(0, "default"), (1, "cache")]);
        assert_eq!(selected(core.as_ref(), 9).await, Reply::Keyspace(KeyspaceId(2)));
        assert_eq!(held.lock().unwrap()[2]["name"], "db9");
        assert_eq!(selected(core.as_ref(), 9).await, Reply::Keyspace(KeyspaceId(2)), "made once");
        assert_eq!(selected(core.as_ref(), 1).await, Reply::Keyspace(KeyspaceId(1)), "cache keeps its number");
        assert_eq!(selected(core.as_ref(), 2).await, Reply::Keyspace(KeyspaceId(3)), "not db9's number");
        let creates = core.asked().iter().filter(|r| matches!(r, Request::Admin(Admin::CreateKeyspace { .. }))).count();
        assert_eq!(creates, 2);
        let out_of_range = Reply::Error(ErrorKind::Invalid, "DB index is out of range".into());
        assert_eq!(selected(core.as_ref(), 16).await, out_of_range);
        assert_eq!(held.lock().unwrap().len(), 4, "nothing made from 16 on");
    }

    #[tokio::test]
    async fn a_database_someone_else_made_first_is_chosen() {
        // The create is refused (the name is taken by then), and the keyspace is there by that name.
        let core = Scripted::new(|req| match req {
            Request::Admin(Admin::Keyspaces) => Reply::Text(format!("[{}]", entry(0, "default", &["log"], None))),
            Request::Admin(Admin::CreateKeyspace { .. }) => {
                Reply::Error(ErrorKind::Invalid, "keyspace \"db3\" already exists".into())
            }
            Request::Admin(Admin::Resolve(_)) => Reply::Keyspace(KeyspaceId(7)),
            other => panic!("SELECT asked {other:?}"),
        });
        assert_eq!(selected(core.as_ref(), 3).await, Reply::Keyspace(KeyspaceId(7)));
        let refused = Scripted::new(|req| match req {
            Request::Admin(Admin::Keyspaces) => Reply::Text(format!("[{}]", entry(0, "default", &["log"], None))),
            Request::Admin(Admin::CreateKeyspace { .. }) => Reply::Error(ErrorKind::Invalid, "too many".into()),
            _ => Reply::Error(ErrorKind::Invalid, "unknown keyspace".into()),
        });
        assert_eq!(selected(refused.as_ref(), 3).await, Reply::Error(ErrorKind::Invalid, "too many".into()));
    }

    /// A keyspace made as number 1 on another node, which this node's map does not show yet: the map refuses
    /// `db1` (it would take SELECT 1 from it), and SELECT 1 chooses that keyspace once this node's map shows it.
    #[tokio::test]
    async fn a_keyspace_this_node_has_not_seen_yet_keeps_its_number() {
        let lists = std::sync::atomic::AtomicU32::new(0);
        let core = Scripted::new(move |req| match req {
            Request::Admin(Admin::Keyspaces) => {
                let mut shown = vec![entry(0, "default", &["log"], None)];
                if lists.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= 3 {
                    shown.push(entry(1, "orders", &["log"], None));
                }
                Reply::Text(serde_json::Value::Array(shown).to_string())
            }
            Request::Admin(Admin::CreateKeyspace { .. }) => {
                Reply::Error(ErrorKind::Invalid, "keyspace number 1 is \"orders\", which SELECT 1 chooses".into())
            }
            Request::Admin(Admin::Resolve(_)) => Reply::Error(ErrorKind::Invalid, "unknown keyspace".into()),
            other => panic!("SELECT asked {other:?}"),
        });
        assert_eq!(selected(core.as_ref(), 1).await, Reply::Keyspace(KeyspaceId(1)));
    }

    #[tokio::test]
    async fn select_switches_the_connection_and_refuses_what_redis_refuses() {
        let (core, _) = cluster(&[(0, "default")]);
        let mut session = Session::new(1);
        assert_eq!(core.run(&mut session, &["SELECT", "4"]).await, Frame::ok());
        assert_eq!(session.keyspace, KeyspaceId(1), "db4, made as number 1");
        for (n, error) in [
            ("16", "ERR DB index is out of range"),
            ("-1", "ERR DB index is out of range"),
            ("4294967296", "ERR DB index is out of range"),
            ("01", "ERR value is not an integer or out of range"),
        ] {
            assert_eq!(core.run(&mut session, &["SELECT", n]).await, Frame::error(error), "SELECT {n}");
        }
        assert_eq!(session.keyspace, KeyspaceId(1), "a refused SELECT leaves the connection where it was");
    }

    #[test]
    fn a_new_database_takes_default_s_whole_configuration() {
        let cache = entry(0, "default", &["mem", "mem"], Some(1 << 20));
        let ks = parsed(&format!("[{cache}]")).unwrap();
        let config = default_config(&ks).unwrap();
        let want =
            KeyspaceConfig { maxmemory: Some(1 << 20), ..KeyspaceConfig::with_replicas(vec![ReplicaKind::Mem; 2]) };
        assert_eq!(config, want);
    }
}
