//! Client-facing key-value operations, independent of the protocol that serves them and of RESP.

use crate::acl::{AclRule, User};
use crate::ids::{KeyspaceId, NodeId};
use crate::keyspace::KeyspaceConfig;
use crate::location::Location;
use crate::ring::key_token;
use crate::stored::Kind;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::fmt;

/// What a client asks a front-end for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    Get {
        keyspace: KeyspaceId,
        key: Bytes,
        read: Read,
    },
    Write(Write),
    /// Cluster administration (`meridian ctl`), carried out by the manager's leader.
    Admin(Admin),
    /// SCAN, DBSIZE: keys of a keyspace from a ring position on. New variants go last, so the others keep
    /// their encoding.
    Scan(Scan),
}

/// A node an operator adds: its addresses (host:port; RESP and HTTP may be empty), ring points and location.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeToAdd {
    pub id: NodeId,
    pub peer_addr: String,
    pub resp_addr: String,
    pub http_addr: Option<String>,
    pub vnodes: u32,
    pub location: Location,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Admin {
    /// Add a node; it takes its share of the chains once it runs and heartbeats the manager. Boxed: requests
    /// travel by value on the data path, and this one is rare and large.
    AddNode(Box<NodeToAdd>),
    /// Drain the node out of its chains, then remove it (a graceful leave).
    RemoveNode { id: NodeId },
    /// The cluster as this node sees it, as JSON text.
    Status,
    /// What the protocol core measures (its chains, replicas, copies, stores and requests by keyspace), in
    /// the Prometheus text format ([`crate::exposition`]).
    Metrics,
    /// A new keyspace with its own chains; answered once this node's map has it. Boxed: a config is the largest
    /// thing a request carries, and the rarest.
    CreateKeyspace { name: String, config: Box<KeyspaceConfig> },
    /// Removes a keyspace and all its data; answered once this node's map no longer has it.
    DropKeyspace { name: String },
    /// Moves a lease keyspace's master region to `region`, one its placement names; answered once this node's
    /// map shows it.
    SetMasterRegion { name: String, region: String },
    /// Masters `key` of a lease keyspace in `region`, one its placement names, whatever the keyspace's master
    /// region is; answered once this node's map shows it.
    SetKeyMaster { name: String, key: Bytes, region: String },
    /// Every keyspace with its id and configuration, as JSON text.
    Keyspaces,
    /// The keyspace a client selects, by name (`KEYSPACE name`) or by number (`SELECT n`).
    Resolve(KeyspaceRef),
    /// `ACL SETUSER`: applies `rules` to user `name` (starting from `base` if the map lacks it); answered once
    /// this node's map shows the user so. Boxed as `CreateKeyspace` is.
    SetUser(Box<UserChange>),
    /// `ACL DELUSER`: removes the users named; answered once this node's map lacks them.
    DelUsers { names: Vec<String> },
    /// The manager's voters an operator wants (none: the manager chooses); answered once this node's map shows
    /// the wish recorded or met.
    SetVoters { voters: Vec<NodeId> },
}

/// An `ACL SETUSER` as the map applies it ([`crate::acl`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserChange {
    pub name: String,
    pub base: Option<User>,
    pub rules: Vec<AclRule>,
}

/// How a client names a keyspace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyspaceRef {
    Name(String),
    Id(KeyspaceId),
}

/// What a read asks of its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Read {
    /// GET: the value.
    Value,
    /// TTL, PTTL: when the key expires.
    Expiry,
    /// HGET, HMGET, HGETALL, HLEN, HEXISTS: a hash's fields ([`Reply::Fields`]).
    Hash,
    /// TYPE: what kind of value the key holds ([`Reply::Kind`]).
    Kind,
    /// EXPIRETIME, PEXPIRETIME: when the key expires, as a Unix time ([`KeyExpiry::At`]).
    Deadline,
}

/// Keys a [`Scan`] examines at most: COUNT is clamped to it, so one answer is bounded work for the chain that
/// gives it.
pub const SCAN_COUNT_MAX: usize = 4096;
/// Bytes of keys one [`Scan`] answer carries at most (plus the rest of the last token's keys), whatever the
/// key limit: with keys of up to 64 KiB the answer still fits in a peer frame (`wire::FRAME_MAX`, 16 MiB).
pub const SCAN_REPLY_BYTES: usize = 1 << 20;

/// A walk over a keyspace's keys in ring-token order (SCAN, DBSIZE; docs/resp.md, "SCAN and DBSIZE").
///
/// A key's place on the ring is its token ([`key_token`]), and a ring position outlives every membership
/// change and rebalancing (partitions never move on the ring, only between nodes), so a position is a cursor
/// that needs no state anywhere: the front-end sends the walk to the chain owning `from`, whose query node
/// answers from its own store with the keys of a token range starting at `from` and the position after it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scan {
    pub keyspace: KeyspaceId,
    /// The first ring token to look at (a SCAN cursor).
    pub from: u64,
    pub want: ScanWant,
    /// MATCH: only keys this glob ([`crate::glob::glob_match`]) matches.
    pub pattern: Option<Bytes>,
    /// TYPE: only keys holding this kind of value.
    pub kind: Option<Kind>,
}

/// What a [`Scan`] answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScanWant {
    /// SCAN: the keys, examining about this many (COUNT; at most [`SCAN_COUNT_MAX`]).
    Keys(usize),
    /// DBSIZE: only how many keys there are, over as wide a range as one answer can cheaply cover.
    Count,
}

/// A [`Scan`]'s answer ([`Reply::Scanned`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scanned {
    /// The keys that passed the filters, in token order (none for [`ScanWant::Count`]).
    pub keys: Vec<Bytes>,
    /// How many keys passed the filters.
    pub matched: u64,
    /// How many present keys were looked at, filters aside: what COUNT bounds.
    pub examined: u64,
    /// The first token not covered, where the walk goes on; None once it passed the end of the ring.
    pub next: Option<u64>,
}

/// A single-key update, ordered by the head of the key's chain against the key's current state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Write {
    pub keyspace: KeyspaceId,
    pub key: Bytes,
    pub op: WriteOp,
    pub cond: Condition,
    /// SET … GET, GETDEL: the answer is the value the key had when the head ordered the write
    /// ([`Reply::Value`]) instead of the write's outcome.
    pub get_old: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WriteOp {
    /// SET: the key takes `value`; `ttl` says what becomes of its expiry.
    Put { value: Bytes, ttl: Ttl },
    /// DEL: stored as a tombstone.
    Delete,
    /// EXPIRE and its kin (`Some`), PERSIST (`None`): a present key keeps its value under a new expiry. Applies
    /// only if the key is present, `when` admits the new deadline against the key's, and for PERSIST only if the
    /// key has an expiry; a deadline already past deletes the key, as in Redis.
    Expire { deadline: Option<Deadline>, when: ExpireWhen },
    /// INCR, DECR, INCRBY, DECRBY: the key's value, a decimal 64-bit integer (an absent key counts as 0), plus
    /// this amount; the key keeps its expiry. Answered with [`Reply::Integer`], the new value.
    IncrBy(i64),
    /// APPEND: the key's value followed by these bytes (an absent key counts as empty); the key keeps its
    /// expiry. Answered with [`Reply::Integer`], the new length.
    Append(Bytes),
    /// HSET, HMSET: the hash's fields take these values (an absent key counts as an empty hash); the key keeps
    /// its expiry. Answered with [`Reply::Integer`], the number of fields that are new.
    HashSet(Vec<(Bytes, Bytes)>),
    /// HDEL: the hash loses these fields, and the key goes with its last field. Answered with
    /// [`Reply::Integer`], the number of fields removed.
    HashDel(Vec<Bytes>),
    /// INCRBYFLOAT: the key's value, a decimal number (an absent key counts as 0), plus this one (its text, which
    /// the front-end has checked), written back as Redis writes it; the key keeps its expiry. Answered with
    /// [`Reply::Value`], the new value.
    IncrByFloat(Bytes),
    /// HINCRBY: the field's value, a decimal 64-bit integer (an absent field counts as 0), plus this amount.
    /// Answered with [`Reply::Integer`], the new value.
    HashIncrBy(Bytes, i64),
    /// HINCRBYFLOAT: as [`WriteOp::IncrByFloat`], for a field of a hash. Answered with [`Reply::Value`].
    HashIncrByFloat(Bytes, Bytes),
    /// HSETNX: the field takes the value only if the hash lacks it. Answered with [`Reply::Integer`], 1 or 0.
    HashSetNx(Bytes, Bytes),
    /// SETRANGE: the value overwritten from this offset on by these bytes, padded with zero bytes up to it (an
    /// absent key counts as empty; nothing to write leaves it absent); the key keeps its expiry. Answered with
    /// [`Reply::Integer`], the new length.
    SetRange(u64, Bytes),
    /// RENAME (`replace`), RENAMENX: the key's value and expiry move to `to`, replacing what it holds (RENAMENX:
    /// only if `to` is absent), in one update of both keys; an absent key is refused (`ERR no such key`).
    /// Answered with whether it applied. The two keys must share a chain ([`Write::keys`]).
    Rename { to: Bytes, replace: bool },
    /// COPY: the key's value and expiry are copied to `to`, if the key is present and `to` absent (or
    /// `replace`). Answered with whether it applied.
    Copy { to: Bytes, replace: bool },
    /// MSETNX: every pair's key takes its value, without expiry, if none of them is present; otherwise none.
    /// The write's own key is the first pair's; the keys are distinct. Answered with whether it applied.
    SetAllAbsent(Vec<(Bytes, Bytes)>),
}

/// What a put does to its key's expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ttl {
    /// SET: the key no longer expires.
    Clear,
    /// SET … KEEPTTL: the key keeps the expiry it has.
    Keep,
    /// SET … EX, PX, EXAT, PXAT.
    Expire(Deadline),
}

/// Redis 7's EXPIRE options (NX, XX, GT, LT): whether a key takes a new deadline, given the one it has. A key that
/// does not expire counts as expiring never: GT never applies to it, LT always does (unless with XX).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExpireWhen {
    #[default]
    Always,
    /// NX: only a key that does not expire.
    Nx,
    /// XX: only a key that expires.
    Xx,
    /// GT (with or without XX): only a later deadline than the key's.
    Gt,
    /// LT: only an earlier deadline than the key's, or a key that does not expire.
    Lt,
    /// XX LT: only an earlier deadline than the key's own.
    XxLt,
}

impl ExpireWhen {
    /// Whether a key expiring at `current` (None: never) takes the deadline `new` (Unix milliseconds).
    pub fn admits(self, current: Option<u64>, new: u64) -> bool {
        match (self, current) {
            (ExpireWhen::Always, _) | (ExpireWhen::Lt, None) => true,
            (ExpireWhen::Nx, current) => current.is_none(),
            (ExpireWhen::Xx, current) => current.is_some(),
            (ExpireWhen::Gt, Some(at)) => new > at,
            (ExpireWhen::Lt | ExpireWhen::XxLt, Some(at)) => new < at,
            (ExpireWhen::Gt | ExpireWhen::XxLt, None) => false,
        }
    }
}

/// When a key expires. A front-end turns `In` into `At` on its own wall clock as it takes the request, so a
/// request sent again after a bounce keeps the same deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Deadline {
    /// Milliseconds from now.
    In(u64),
    /// A Unix time in milliseconds.
    At(u64),
}

impl Deadline {
    /// The Unix time in milliseconds this deadline falls on, for a wall clock reading `now_ms`.
    pub fn at(self, now_ms: u64) -> u64 {
        match self {
            Deadline::In(ms) => now_ms.saturating_add(ms),
            Deadline::At(at) => at,
        }
    }
}

impl Write {
    /// An unconditional put of a value that does not expire.
    pub fn put(keyspace: KeyspaceId, key: Bytes, value: Bytes) -> Write {
        Write::new(keyspace, key, WriteOp::Put { value, ttl: Ttl::Clear })
    }

    /// An unconditional delete.
    pub fn delete(keyspace: KeyspaceId, key: Bytes) -> Write {
        Write::new(keyspace, key, WriteOp::Delete)
    }

    /// An unconditional write answered with its outcome.
    pub fn new(keyspace: KeyspaceId, key: Bytes, op: WriteOp) -> Write {
        Write { keyspace, key, op, cond: Condition::Always, get_old: false }
    }

    /// The bytes a put writes or an append adds.
    pub fn value(&self) -> Option<&Bytes> {
        match &self.op {
            WriteOp::Put { value, .. } | WriteOp::Append(value) | WriteOp::SetRange(_, value) => Some(value),
            WriteOp::Delete
            | WriteOp::Expire { .. }
            | WriteOp::IncrBy(_)
            | WriteOp::HashSet(_)
            | WriteOp::HashDel(_)
            | WriteOp::IncrByFloat(_)
            | WriteOp::HashIncrBy(..)
            | WriteOp::HashIncrByFloat(..)
            | WriteOp::HashSetNx(..)
            | WriteOp::Rename { .. }
            | WriteOp::Copy { .. }
            | WriteOp::SetAllAbsent(_) => None,
        }
    }

    /// Every key the write changes, its own first: more than one for RENAME, COPY and MSETNX, which a protocol
    /// changes in one step, and so only where all of them are in one place (the same chain).
    pub fn keys(&self) -> impl Iterator<Item = &Bytes> {
        let others: &[(Bytes, Bytes)] = match &self.op {
            WriteOp::SetAllAbsent(pairs) => pairs.get(1..).unwrap_or_default(),
            _ => &[],
        };
        let to = match &self.op {
            WriteOp::Rename { to, .. } | WriteOp::Copy { to, .. } => Some(to),
            _ => None,
        };
        std::iter::once(&self.key).chain(to).chain(others.iter().map(|(k, _)| k))
    }

    /// Whether the write is one of those that name several keys ([`Write::keys`]): RENAME, COPY or MSETNX, even
    /// when it names only one (a key renamed onto itself, MSETNX of one pair).
    pub fn is_multi_key(&self) -> bool {
        matches!(self.op, WriteOp::Rename { .. } | WriteOp::Copy { .. } | WriteOp::SetAllAbsent(_))
    }

    /// The same write with every relative deadline fixed on a wall clock reading `now_ms`.
    pub fn fixed_at(mut self, now_ms: u64) -> Write {
        let fix = |d: &mut Deadline| *d = Deadline::At(d.at(now_ms));
        match &mut self.op {
            WriteOp::Put { ttl: Ttl::Expire(d), .. } | WriteOp::Expire { deadline: Some(d), .. } => fix(d),
            _ => {}
        }
        self
    }
}

/// Redis' SET NX / XX: the write applies only if the key is absent / present when it is ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Condition {
    Always,
    IfAbsent,
    IfPresent,
}

impl Condition {
    pub fn holds(self, present: bool) -> bool {
        match self {
            Condition::Always => true,
            Condition::IfAbsent => !present,
            Condition::IfPresent => present,
        }
    }
}

impl Request {
    /// Whether it only reads (GET and its kin, SCAN): a runner need not read the wall clock before asking
    /// [`crate::Process::read_at_once`] about it.
    pub fn is_read(&self) -> bool {
        matches!(self, Request::Get { .. } | Request::Scan(_))
    }

    /// The key a data request is about; None for administration.
    pub fn key(&self) -> Option<&Bytes> {
        match self {
            Request::Get { key, .. } => Some(key),
            Request::Write(w) => Some(&w.key),
            Request::Scan(_) | Request::Admin(_) => None,
        }
    }

    /// The keyspace a data request is about; None for administration.
    pub fn keyspace(&self) -> Option<KeyspaceId> {
        match self {
            Request::Get { keyspace, .. } => Some(*keyspace),
            Request::Write(w) => Some(w.keyspace),
            Request::Scan(s) => Some(s.keyspace),
            Request::Admin(_) => None,
        }
    }

    /// The ring position whose chain serves a data request: its key's token, or where a scan starts.
    pub fn token(&self) -> Option<u64> {
        match self {
            Request::Scan(s) => Some(s.from),
            other => other.key().map(|k| key_token(k)),
        }
    }
}

/// The answer to a [`Request`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// A get's result: `None` when the key is absent or deleted.
    Value(Option<Bytes>),
    /// A write's result: whether it applied (its condition held) and whether the key existed before.
    Written {
        applied: bool,
        existed: bool,
    },
    /// A write's numeric result ([`WriteOp::IncrBy`], [`WriteOp::Append`], the hash writes).
    Integer(i64),
    /// A [`Read::Hash`]: the hash's fields and values in field order (none when the key is absent).
    Fields(Vec<(Bytes, Bytes)>),
    /// An administration answer: what happens next, or (for a status) JSON.
    Text(String),
    /// The keyspace an [`Admin::Resolve`] names.
    Keyspace(KeyspaceId),
    /// When the key a [`Read::Expiry`] asked about expires.
    Expiry(KeyExpiry),
    Error(ErrorKind, String),
    /// A [`Request::Scan`]'s keys and where the walk goes on.
    Scanned(Scanned),
    /// A [`Read::Kind`]: the key's kind of value, None when it is absent.
    Kind(Option<Kind>),
}

/// A key's expiry as its query node sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyExpiry {
    Absent,
    /// The key does not expire.
    Never,
    /// The key expires in this many milliseconds on the query node's clock (0: due, its delete on the way).
    In(u64),
    /// The key expires at this Unix time in milliseconds.
    At(u64),
}

/// Why a request failed, and whether its outcome is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    /// No answer in time: a write may or may not have been applied.
    Timeout,
    /// Refused before being ordered (queue full): certainly not applied.
    Busy,
    /// Refused as invalid (too large, wrong node): certainly not applied.
    Invalid,
    /// The datastore failed (I/O error, corrupt record): a write was not applied.
    Storage,
    /// The node cannot serve the request yet (no cluster map, a chain being repaired): certainly not applied;
    /// retry.
    Unavailable,
    /// The command does not apply to the kind of value the key holds (a hash command on a string, or the
    /// reverse): certainly not applied.
    WrongType,
    /// A command that changes several keys in one step names keys of different chains: certainly not applied.
    CrossSlot,
}

impl ErrorKind {
    /// True when the failed request certainly had no effect.
    pub fn certainly_not_applied(self) -> bool {
        !matches!(self, ErrorKind::Timeout)
    }

    /// The Redis-style error prefix (first word of a RESP error).
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::Timeout => "TIMEOUT",
            ErrorKind::Busy => "BUSY",
            ErrorKind::Invalid => "ERR",
            ErrorKind::Storage => "IOERR",
            ErrorKind::Unavailable => "TRYAGAIN",
            ErrorKind::WrongType => "WRONGTYPE",
            ErrorKind::CrossSlot => "CROSSSLOT",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// Size limits applied at the front-end, before anything is ordered, so an oversized request changes
/// nothing anywhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub max_key_bytes: usize,
    pub max_value_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_key_bytes: 4096, max_value_bytes: 1 << 20 }
    }
}

impl Limits {
    /// Checks a request against the limits; an error says, for the client, which limit it is over.
    pub fn check(&self, req: &Request) -> Result<(), OverLimit> {
        if let Request::Scan(Scan { pattern: Some(p), .. }) = req {
            // A pattern is matched against every key examined; one longer than any key is no use, and bounding
            // it bounds a match's cost (at most pattern × key bytes).
            if p.len() > self.max_key_bytes {
                return Err(OverLimit::Pattern { len: p.len(), limit: self.max_key_bytes });
            }
        }
        let Some(key) = req.key() else { return Ok(()) };
        self.check_key(key)?;
        // The other keys of a write of several, by its operation: most requests are one match arm away.
        match req {
            Request::Write(Write { op: WriteOp::Rename { to, .. } | WriteOp::Copy { to, .. }, .. }) => {
                self.check_key(to)?
            }
            Request::Write(Write { op: WriteOp::SetAllAbsent(pairs), .. }) => {
                pairs.iter().try_for_each(|(k, _)| self.check_key(k))?
            }
            _ => {}
        }
        let value_len = match req {
            Request::Write(Write { op: WriteOp::HashSet(fields), .. }) => {
                fields.iter().map(|(f, v)| f.len() + v.len()).sum()
            }
            Request::Write(Write { op: WriteOp::SetAllAbsent(pairs), .. }) => {
                pairs.iter().map(|(_, v)| v.len()).max().unwrap_or(0)
            }
            Request::Write(Write { op: WriteOp::HashSetNx(field, value), .. }) => field.len() + value.len(),
            Request::Write(w) => w.value().map_or(0, Bytes::len),
            _ => 0,
        };
        if value_len > self.max_value_bytes {
            return Err(OverLimit::Value { len: value_len, limit: self.max_value_bytes });
        }
        Ok(())
    }

    fn check_key(&self, key: &[u8]) -> Result<(), OverLimit> {
        if key.is_empty() {
            return Err(OverLimit::EmptyKey);
        }
        if key.len() > self.max_key_bytes {
            return Err(OverLimit::Key { len: key.len(), limit: self.max_key_bytes });
        }
        Ok(())
    }
}

/// Which limit a request is over ([`Limits::check`]); the text is what a client is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverLimit {
    #[error("empty keys are not allowed")]
    EmptyKey,
    #[error("key is {len} bytes; the limit is {limit}")]
    Key { len: usize, limit: usize },
    #[error("value is {len} bytes; the limit is {limit}")]
    Value { len: usize, limit: usize },
    #[error("pattern is {len} bytes; the limit is {limit}")]
    Pattern { len: usize, limit: usize },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_reject_oversized_and_empty_keys() {
        let l = Limits { max_key_bytes: 3, max_value_bytes: 4 };
        let get = |k: &'static str| Request::Get {
            keyspace: KeyspaceId::DEFAULT,
            key: Bytes::from_static(k.as_bytes()),
            read: Read::Value,
        };
        assert!(l.check(&get("abc")).is_ok());
        assert_eq!(l.check(&get("abcd")), Err(OverLimit::Key { len: 4, limit: 3 }));
        assert_eq!(l.check(&get("")), Err(OverLimit::EmptyKey));
        let put =
            Request::Write(Write::put(KeyspaceId::DEFAULT, Bytes::from_static(b"k"), Bytes::from_static(b"12345")));
        assert_eq!(l.check(&put).unwrap_err().to_string(), "value is 5 bytes; the limit is 4");
        let scan = |p: &'static str| {
            let pattern = Some(Bytes::from_static(p.as_bytes()));
            Request::Scan(Scan { keyspace: KeyspaceId::DEFAULT, from: 0, want: ScanWant::Count, pattern, kind: None })
        };
        assert!(l.check(&scan("a*c")).is_ok());
        assert_eq!(l.check(&scan("a**c")), Err(OverLimit::Pattern { len: 4, limit: 3 }));
    }

    #[test]
    fn front_ends_fix_relative_deadlines() {
        let put =
            |ttl| Write { op: WriteOp::Put { value: Bytes::new(), ttl }, ..Write::delete(KeyspaceId(1), Bytes::new()) };
        let fixed = put(Ttl::Expire(Deadline::In(500))).fixed_at(1_000);
        assert_eq!(fixed, put(Ttl::Expire(Deadline::At(1_500))));
        assert_eq!(fixed.clone().fixed_at(9_999), fixed, "fixing twice changes nothing");
        assert_eq!(put(Ttl::Keep).fixed_at(1_000), put(Ttl::Keep));
        let expire = |d| WriteOp::Expire { deadline: Some(d), when: ExpireWhen::Gt };
        let write = Write { op: expire(Deadline::In(1)), ..Write::delete(KeyspaceId(1), Bytes::new()) };
        assert_eq!(write.fixed_at(7).op, expire(Deadline::At(8)));
    }

    #[test]
    fn conditions_follow_redis_nx_xx() {
        assert!(Condition::IfAbsent.holds(false) && !Condition::IfAbsent.holds(true));
        assert!(Condition::IfPresent.holds(true) && !Condition::IfPresent.holds(false));
        assert!(Condition::Always.holds(true) && Condition::Always.holds(false));
    }

    #[test]
    fn expire_options_follow_redis() {
        use ExpireWhen::*;
        let cases = [
            (Always, None, true),
            (Always, Some(5), true),
            (Nx, None, true),
            (Nx, Some(5), false),
            (Xx, None, false),
            (Xx, Some(5), true),
            (Gt, None, false),
            (Gt, Some(5), true),
            (Gt, Some(10), false),
            (Lt, None, true),
            (Lt, Some(20), true),
            (Lt, Some(10), false),
            (XxLt, None, false),
            (XxLt, Some(20), true),
        ];
        for (when, current, admitted) in cases {
            assert_eq!(when.admits(current, 10), admitted, "{when:?} with the key expiring at {current:?}");
        }
    }
}
