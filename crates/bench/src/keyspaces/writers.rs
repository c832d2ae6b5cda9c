//! Closed-loop write clients. Each has one connection to one node, in the keyspace measured, and sends one
//! SET at a time, each with a key never written before. A client only sends keys whose chain its node heads:
//! the head orders a chain's writes (and under `ausi` and `au` answers them), and a SET sent to another node
//! would be forwarded, one more hop timed into every figure. Each SET is timed from sending to its reply.

use super::configs::Keyspace;
use crate::latency::Latency;
use crate::local::resp::{Conn, Reply};
use crate::local::{Cluster, MapView};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Errors after which a client gives up: a cluster refusing this many of one client's writes is not being
/// measured any more.
const ERRORS_MAX: u64 = 100;
const RECONNECT_PAUSE: Duration = Duration::from_millis(100);
/// How long filling a keyspace may take.
const FILL_MAX: Duration = Duration::from_secs(600);

/// What the clients write, and until when.
pub(super) struct Load<'a> {
    pub keyspace: &'a Keyspace,
    /// Where the keyspace's chains are.
    pub map: &'a MapView,
    /// Each node's RESP address.
    pub addrs: &'a BTreeMap<u32, SocketAddr>,
    pub clients: usize,
    pub value: &'a [u8],
    /// Keys are `<prefix>:<client>:<n>`: each load of a keyspace takes a prefix of its own, so every key is new.
    pub prefix: &'a str,
    /// SETs sent before this much time has passed are not timed or counted in the rate.
    pub warmup: Duration,
    /// No SET is sent after this, nor more than `sets_max` in all.
    pub until: Instant,
    pub sets_max: u64,
}

/// What the clients got.
#[derive(Clone, Debug)]
pub(super) struct Written {
    /// The acknowledged SETs sent after the warm-up.
    pub latency: Latency,
    /// From the end of the warm-up to the last of those acknowledgements.
    pub window: Duration,
    /// Acknowledged SETs, warm-up included, and the bytes of their keys and values per chain id.
    pub acked: u64,
    pub bytes_per_chain: BTreeMap<u32, u64>,
    pub errors: u64,
    pub first_error: Option<String>,
}

impl Written {
    fn new() -> Written {
        Written {
            latency: Latency::new(),
            window: Duration::ZERO,
            acked: 0,
            bytes_per_chain: BTreeMap::new(),
            errors: 0,
            first_error: None,
        }
    }

    /// A SET of `bytes` to `chain`, sent at `sent`, acknowledged now; timed if sent after `counted_from`.
    fn ack(&mut self, chain: u32, bytes: u64, sent: Instant, counted_from: Instant) {
        self.acked += 1;
        *self.bytes_per_chain.entry(chain).or_default() += bytes;
        if sent >= counted_from {
            let now = Instant::now();
            self.latency.record(now - sent);
            self.window = self.window.max(now - counted_from);
        }
    }

    fn error(&mut self, what: String) {
        self.errors += 1;
        self.first_error.get_or_insert(what);
    }

    /// Adds another client's figures; the window is the longest (they all start with the warm-up's end).
    fn add(&mut self, other: Written) {
        self.latency.merge(&other.latency);
        self.window = self.window.max(other.window);
        self.acked += other.acked;
        for (chain, bytes) in other.bytes_per_chain {
            *self.bytes_per_chain.entry(chain).or_default() += bytes;
        }
        self.errors += other.errors;
        self.first_error = self.first_error.take().or(other.first_error);
    }

    /// Bytes of keys and values acknowledged.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes_per_chain.values().sum()
    }

    /// Acknowledged SETs per second after the warm-up.
    pub(super) fn per_second(&self) -> f64 {
        crate::per_second(self.latency.count(), self.window)
    }
}

/// Runs `load`'s clients until its deadline or its count, or until `stop` is set.
pub(super) fn run(load: &Load, stop: &AtomicBool) -> Result<Written, String> {
    let heads: BTreeSet<u32> =
        load.map.chains_in(load.keyspace.id).filter_map(|c| c.members.first().copied()).collect();
    let heads: Vec<u32> = heads.into_iter().collect();
    if heads.is_empty() {
        return Err(format!("keyspace {} has no chains in the map", load.keyspace.name));
    }
    let clients: Vec<(u32, SocketAddr)> = (0..load.clients)
        .map(|c| {
            let node = heads[c % heads.len()];
            load.addrs.get(&node).map(|&a| (node, a)).ok_or_else(|| format!("node {node} is a head but not running"))
        })
        .collect::<Result<_, _>>()?;
    let counted_from = Instant::now() + load.warmup;
    let claimed = AtomicU64::new(0);
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..)
            .zip(clients)
            .map(|(index, (node, addr))| {
                let client = Client { load, index, node, addr, counted_from, claimed: &claimed, stop };
                s.spawn(move || client.run())
            })
            .collect();
        threads.into_iter().try_fold(Written::new(), |mut all, t| {
            all.add(t.join().map_err(|_| "a write client panicked")?);
            Ok(all)
        })
    })
}

/// Fills `keyspace` with `bytes` of values of `value_len` bytes (rounded up to a whole value), through
/// `clients` clients: what a keyspace holds before its memory is read or a node of it is crashed. The
/// clients' latency is not the point here, so nothing is left out as warm-up.
pub(super) fn fill(
    cluster: &Cluster,
    keyspace: &Keyspace,
    bytes: u64,
    value_len: usize,
    clients: usize,
    stop: &AtomicBool,
) -> Result<Written, String> {
    let map = MapView::read(cluster.nodes.first().ok_or("no node")?.http)?;
    let value = crate::incompressible(value_len);
    let sets = bytes.div_ceil(value_len as u64);
    let addrs = cluster.resp_addrs();
    let load = Load {
        keyspace,
        map: &map,
        addrs: &addrs,
        clients,
        value: &value,
        prefix: "fill",
        warmup: Duration::ZERO,
        until: Instant::now() + FILL_MAX,
        sets_max: sets,
    };
    let written = run(&load, stop)?;
    if written.acked < sets {
        let why = written.first_error.as_deref().unwrap_or("interrupted or out of time");
        return Err(format!("filling {}: {} of {sets} SETs acknowledged ({why})", keyspace.name, written.acked));
    }
    Ok(written)
}

/// One client's share of a [`Load`].
struct Client<'a> {
    load: &'a Load<'a>,
    index: usize,
    /// The node it sends to, and that node's RESP address.
    node: u32,
    addr: SocketAddr,
    counted_from: Instant,
    /// SETs the clients have begun, against `sets_max`.
    claimed: &'a AtomicU64,
    stop: &'a AtomicBool,
}

impl Client<'_> {
    fn run(&self) -> Written {
        let mut tally = Written::new();
        let mut conn = None;
        let mut n = 0;
        while !self.stop.load(Ordering::Relaxed) && Instant::now() < self.load.until && tally.errors < ERRORS_MAX {
            let c = match conn.as_mut() {
                Some(c) => c,
                None => match self.connect() {
                    Ok(c) => conn.insert(c),
                    Err(e) => {
                        tally.error(e);
                        std::thread::sleep(RECONNECT_PAUSE);
                        continue;
                    }
                },
            };
            if self.claimed.fetch_add(1, Ordering::Relaxed) >= self.load.sets_max {
                break;
            }
            let (key, chain) = self.next_key(&mut n);
            let sent = Instant::now();
            match c.call(&[b"SET", &key, self.load.value]) {
                Ok(Reply::Ok) => tally.ack(chain, (key.len() + self.load.value.len()) as u64, sent, self.counted_from),
                Ok(other) => tally.error(format!("node {}: SET answered {other:?}", self.node)),
                Err(e) => {
                    // The outcome is unknown; the key is never used again, so it does not matter.
                    tally.error(format!("node {}: {e}", self.node));
                    conn = None;
                    std::thread::sleep(RECONNECT_PAUSE);
                }
            }
        }
        tally
    }

    /// A connection to the client's node, in the keyspace measured.
    fn connect(&self) -> Result<Conn, String> {
        let fail = |e: &dyn std::fmt::Display| format!("node {}: {e}", self.node);
        let mut c = Conn::connect(self.addr).map_err(|e| fail(&e))?;
        match c.call(&[b"KEYSPACE", self.load.keyspace.name.as_bytes()]).map_err(|e| fail(&e))? {
            Reply::Ok => Ok(c),
            other => Err(fail(&format!("KEYSPACE {} answered {other:?}", self.load.keyspace.name))),
        }
    }

    /// The next key after the `n`-th whose chain the client's node heads, and that chain. The node heads one
    /// at least (clients are only given heads), so one key in a few does.
    fn next_key(&self, n: &mut u64) -> (Vec<u8>, u32) {
        loop {
            *n += 1;
            let key = format!("{}:{}:{n}", self.load.prefix, self.index).into_bytes();
            let chain = self.load.map.chain_of(self.load.keyspace.id, &key);
            if let Some(chain) = chain.filter(|c| c.members.first() == Some(&self.node)) {
                return (key, chain.id);
            }
        }
    }
}
