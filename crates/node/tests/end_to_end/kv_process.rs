//! A test-only protocol core: an in-memory key-value store that serves the keys it owns ([`owner`]) and
//! forwards the others to their owner, relaying the reply. Writes are acknowledged only after sync, as a
//! real store would.

use bytes::Bytes;
use meridian_core::ring::key_token;
use meridian_core::{
    Admin, ClusterConfig, Effects, ErrorKind, KeyExpiry, NodeId, Process, Read, Reply, Request, RequestId, Time, Write,
    WriteOp,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum KvMsg {
    Forward { tag: u64, req: Request },
    Answer { tag: u64, reply: Reply },
}

/// The node that serves `key`: spread by the key's ring token over the cluster's nodes.
pub fn owner(cluster: &ClusterConfig, key: &[u8]) -> NodeId {
    cluster.nodes[(key_token(key) % cluster.nodes.len() as u64) as usize].id
}

pub struct KvNode {
    me: NodeId,
    cluster: ClusterConfig,
    data: BTreeMap<Bytes, Bytes>,
    /// Forwarded requests waiting for their owner's answer.
    relays: BTreeMap<u64, RequestId>,
    next_tag: u64,
}

type Out = Effects<KvMsg, ()>;

/// The one keyspace, as `Admin::Keyspaces` lists keyspaces.
const KEYSPACES: &str = r#"[{"id": 0, "name": "default", "replicas": ["mem"], "update": "su", "read_from": "tail",
    "durability": null, "maxmemory": null}]"#;

impl KvNode {
    pub fn new(me: NodeId, cluster: &ClusterConfig) -> KvNode {
        KvNode { me, cluster: cluster.clone(), data: BTreeMap::new(), relays: BTreeMap::new(), next_tag: 0 }
    }

    /// Applies a request to the local map; the flag says whether it wrote.
    fn apply(&mut self, req: Request) -> (Reply, bool) {
        match req {
            // One keyspace: requests for any other are answered from the same map.
            // Keys never expire here: an expiry read (EXISTS asks for one) says only whether the key is there.
            Request::Get { key, read: Read::Expiry, .. } => {
                let expiry = if self.data.contains_key(&key) { KeyExpiry::Never } else { KeyExpiry::Absent };
                (Reply::Expiry(expiry), false)
            }
            Request::Get { key, .. } => (Reply::Value(self.data.get(&key).cloned()), false),
            Request::Write(Write { key, op, cond, .. }) => {
                let existed = self.data.contains_key(&key);
                if !cond.holds(existed) {
                    return (Reply::Written { applied: false, existed }, false);
                }
                match op {
                    WriteOp::Put { value, .. } => self.data.insert(key, value),
                    WriteOp::Delete => self.data.remove(&key),
                    _ => return (Reply::Error(ErrorKind::Invalid, "not in this test process".into()), false),
                };
                (Reply::Written { applied: true, existed }, true)
            }
            Request::Scan(_) => (Reply::Error(ErrorKind::Invalid, "not in this test process".into()), false),
            Request::Admin(Admin::Status) => (Reply::Text(format!("{{\"keys\":{}}}", self.data.len())), false),
            // SELECT reads the keyspace list: here `default` alone.
            Request::Admin(Admin::Keyspaces) => (Reply::Text(KEYSPACES.into()), false),
            Request::Admin(Admin::Resolve(_)) => (Reply::Error(ErrorKind::Invalid, "unknown keyspace".into()), false),
            Request::Admin(_) => (Reply::Error(ErrorKind::Invalid, "no administration here".into()), false),
        }
    }
}

impl Process for KvNode {
    type Msg = KvMsg;
    type Timer = ();

    fn start(&mut self, _: Time, _: &mut Out) {}

    fn on_message(&mut self, _: Time, from: NodeId, msg: KvMsg, out: &mut Out) {
        match msg {
            KvMsg::Forward { tag, req } => {
                let (reply, wrote) = self.apply(req);
                if wrote {
                    out.mark_dirty();
                    out.send_after_sync(from, KvMsg::Answer { tag, reply });
                } else {
                    out.send(from, KvMsg::Answer { tag, reply });
                }
            }
            KvMsg::Answer { tag, reply } => {
                if let Some(id) = self.relays.remove(&tag) {
                    out.reply(id, reply);
                }
            }
        }
    }

    fn on_timer(&mut self, _: Time, _: (), _: &mut Out) {}

    fn on_request(&mut self, _: Time, id: RequestId, req: Request, out: &mut Out) {
        let owner = req.key().map_or(self.me, |key| owner(&self.cluster, key));
        if owner != self.me {
            let tag = self.next_tag;
            self.next_tag += 1;
            self.relays.insert(tag, id);
            out.send(owner, KvMsg::Forward { tag, req });
            return;
        }
        let (reply, wrote) = self.apply(req);
        if wrote {
            out.mark_dirty();
            out.reply_after_sync(id, reply);
        } else {
            out.reply(id, reply);
        }
    }

    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    // The map is the whole store: there is no buffer to hand over.
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
