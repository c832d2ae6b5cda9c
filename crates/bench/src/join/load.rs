//! The data and the load: the preload writes every key once, through its chain's head; the readers then get
//! random preloaded keys from the node that is their chain's tail, each client bound to one node, so that
//! every node is driven to its own capacity and no node's slowness holds back another's clients.

use crate::local::resp::{Conn, Reply};
use crate::local::MapView;
use meridian_core::splitmix::SplitMix64;
use meridian_core::KeyspaceId;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// SETs in flight per connection during the preload: deep enough for group commit to batch them.
const PRELOAD_WINDOW: usize = 256;
/// Passes over the SETs the cluster refused (a chain whose tail has no lease yet) before giving up.
const PRELOAD_ATTEMPTS: u32 = 10;
/// The preload's time limit.
const PRELOAD_MAX: Duration = Duration::from_secs(600);
/// GETs each client keeps in flight: a small pipeline, so a node's quota rather than the clients' round trips
/// bounds what it serves.
pub(super) const PIPELINE: usize = 4;
/// GETs one client sends at most (the load's duration bounds it first).
const GETS_MAX: u64 = 1 << 32;
/// How long a client waits before reconnecting after a broken connection.
const RECONNECT_PAUSE: Duration = Duration::from_millis(100);

/// The name of preloaded key `i`.
fn key(i: u64) -> Vec<u8> {
    format!("bench-join:{i:09}").into_bytes()
}

/// Writes keys `0..keys` with `value`, each SET to its chain's head in `map` (`addrs`: each node's RESP
/// address), one connection per head.
pub(super) fn preload(
    map: &MapView,
    addrs: &BTreeMap<u32, SocketAddr>,
    keys: u64,
    value: &[u8],
    stop: &AtomicBool,
) -> Result<(), String> {
    let mut by_head: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for i in 0..keys {
        let head = map
            .chain_of(KeyspaceId::DEFAULT.0, &key(i))
            .and_then(|c| c.members.first())
            .ok_or("the map has no chain for a key")?;
        by_head.entry(*head).or_default().push(i);
    }
    let deadline = Instant::now() + PRELOAD_MAX;
    std::thread::scope(|s| {
        let writers: Vec<_> = by_head
            .into_iter()
            .map(|(head, keys)| {
                let addr = *addrs.get(&head).ok_or_else(|| format!("node {head} is a head but not running"))?;
                Ok(s.spawn(move || write_all(addr, keys, value, deadline, stop)))
            })
            .collect::<Result<_, String>>()?;
        writers.into_iter().try_for_each(|w| w.join().map_err(|_| "a preload thread panicked".to_string())?)
    })
}

/// Sets every key in `pending` through `addr`, again for those refused, until all are set.
fn write_all(
    addr: SocketAddr,
    mut pending: Vec<u64>,
    value: &[u8],
    deadline: Instant,
    stop: &AtomicBool,
) -> Result<(), String> {
    let mut last_error = String::new();
    for _ in 0..PRELOAD_ATTEMPTS {
        let mut refused = Vec::new();
        let mut conn = Conn::connect(addr).map_err(|e| format!("preload: cannot connect to {addr}: {e}"))?;
        for window in pending.chunks(PRELOAD_WINDOW) {
            if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
                return Err(format!("preload through {addr} stopped before it was done"));
            }
            match set_window(&mut conn, window, value) {
                Ok(failed) => refused.extend(failed.into_iter().map(|(i, why)| {
                    last_error = why;
                    i
                })),
                Err(e) => {
                    // The connection broke: the outcome of the whole window is unknown, so it is set again.
                    last_error = e.to_string();
                    refused.extend_from_slice(window);
                    conn = Conn::connect(addr).map_err(|e| format!("preload: cannot reconnect to {addr}: {e}"))?;
                }
            }
        }
        if refused.is_empty() {
            return Ok(());
        }
        pending = refused;
        std::thread::sleep(Duration::from_millis(500));
    }
    Err(format!("preload through {addr}: {} SETs still refused ({last_error})", pending.len()))
}

/// Sends one window of SETs and reads their replies; the keys refused, with why.
fn set_window(conn: &mut Conn, window: &[u64], value: &[u8]) -> std::io::Result<Vec<(u64, String)>> {
    for &i in window {
        conn.queue(&[b"SET", &key(i), value])?;
    }
    conn.flush()?;
    let mut refused = Vec::new();
    for &i in window {
        match conn.read()? {
            Reply::Ok => {}
            other => refused.push((i, format!("{other:?}"))),
        }
    }
    Ok(refused)
}

/// The preloaded keys, and for each node the ones whose chain it is the tail of in the newest map the bench
/// has seen. Clients read from the node they were given, always keys it is the tail of: when a join moves a
/// chain's tail, the old tail's clients move on to its remaining chains instead of having it forward their
/// reads to the new tail, which would tie one node's figures to another's.
pub(super) struct KeySets {
    keys: Vec<Vec<u8>>,
    /// The chain of each key.
    chains: Vec<u32>,
    /// The epoch of the map followed, and each chain's tail in it.
    tails: Mutex<(u64, Vec<u32>)>,
    /// Indexes into `keys`, per node that had some when the load began.
    per_node: BTreeMap<u32, Mutex<Arc<Vec<u32>>>>,
}

impl KeySets {
    /// Keys `0..keys`, grouped by their chains' tails in `map`.
    pub(super) fn new(map: &MapView, keys: u64) -> Result<KeySets, String> {
        let keys: Vec<Vec<u8>> = (0..keys).map(key).collect();
        let chains = keys
            .iter()
            .map(|k| {
                map.chain_of(KeyspaceId::DEFAULT.0, k)
                    .map(|c| c.id)
                    .ok_or_else(|| "the map has no chain for a key".to_string())
            })
            .collect::<Result<_, _>>()?;
        let mut sets = KeySets { keys, chains, tails: Mutex::new((0, Vec::new())), per_node: BTreeMap::new() };
        let tails = tails(map)?;
        sets.per_node = sets.group(&tails).into_iter().map(|(node, set)| (node, Mutex::new(Arc::new(set)))).collect();
        *sets.tails.lock().expect("not poisoned") = (map.epoch, tails);
        Ok(sets)
    }

    /// Bytes of keys and values per chain, with values of `value_len` bytes.
    pub(super) fn bytes_per_chain(&self, chains: usize, value_len: usize) -> Vec<u64> {
        let mut bytes = vec![0; chains];
        for (key, &chain) in self.keys.iter().zip(&self.chains) {
            bytes[chain as usize] += (key.len() + value_len) as u64;
        }
        bytes
    }

    /// The nodes with keys to read, in order.
    pub(super) fn nodes(&self) -> Vec<u32> {
        self.per_node.keys().copied().collect()
    }

    /// Regroups the keys if `map` is newer than the one followed and moved a chain's tail. A node left
    /// without any keeps its old ones (its clients' reads are then forwarded): it has nothing else to serve.
    pub(super) fn follow(&self, map: &MapView) {
        let mut current = self.tails.lock().expect("not poisoned");
        if map.epoch <= current.0 {
            return;
        }
        let Ok(tails) = self::tails(map) else { return };
        if tails != current.1 {
            for (node, set) in self.group(&tails) {
                if let Some(slot) = self.per_node.get(&node) {
                    *slot.lock().expect("not poisoned") = Arc::new(set);
                }
            }
        }
        *current = (map.epoch, tails);
    }

    fn group(&self, tails: &[u32]) -> BTreeMap<u32, Vec<u32>> {
        let mut by_tail: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for (i, &chain) in self.chains.iter().enumerate() {
            if let Some(&tail) = tails.get(chain as usize) {
                by_tail.entry(tail).or_default().push(i as u32);
            }
        }
        by_tail
    }

    fn of(&self, node: u32) -> Arc<Vec<u32>> {
        self.per_node.get(&node).map(|s| s.lock().expect("not poisoned").clone()).unwrap_or_default()
    }
}

/// The tail of every chain, by chain id.
fn tails(map: &MapView) -> Result<Vec<u32>, String> {
    map.chains
        .iter()
        .map(|c| c.members.last().copied().ok_or_else(|| format!("chain {} has no members", c.id)))
        .collect()
}

/// What the clients got back.
#[derive(Clone, Debug, Default)]
pub(super) struct Tally {
    /// GETs answered with the preloaded value.
    pub found: u64,
    /// GETs of a preloaded key answered with nil: data lost.
    pub missing: u64,
    /// Error replies (`-TIMEOUT` and the like), values of the wrong length, and broken connections.
    pub errors: u64,
    pub first_error: Option<String>,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.found += other.found;
        self.missing += other.missing;
        self.errors += other.errors;
        self.first_error = self.first_error.take().or(other.first_error);
    }

    fn error(&mut self, what: String) {
        self.errors += 1;
        self.first_error.get_or_insert(what);
    }
}

/// Read clients running until a deadline.
pub(super) struct Readers {
    threads: Vec<JoinHandle<Tally>>,
    stop: Arc<AtomicBool>,
}

impl Readers {
    /// `clients` clients, spread over the nodes of `sets` in turn (`addrs`: their RESP addresses), each
    /// sending GETs of its node's keys to that node until `until`.
    pub(super) fn start(
        sets: &Arc<KeySets>,
        addrs: &BTreeMap<u32, SocketAddr>,
        clients: usize,
        value_len: usize,
        until: Instant,
    ) -> Result<Readers, String> {
        let nodes = sets.nodes();
        let clients: Vec<Client> = (0..clients)
            .map(|c| {
                let node = nodes[c % nodes.len()];
                let addr = *addrs.get(&node).ok_or_else(|| format!("node {node} is a tail but not running"))?;
                Ok(Client { node, addr, sets: sets.clone(), value_len })
            })
            .collect::<Result<_, String>>()?;
        let stop = Arc::new(AtomicBool::new(false));
        let threads = clients
            .into_iter()
            .zip(0..)
            .map(|(client, seed)| {
                let stop = stop.clone();
                std::thread::spawn(move || client.run(seed, until, &stop))
            })
            .collect();
        Ok(Readers { threads, stop })
    }

    /// Stops the clients (they are done anyway after their deadline) and adds up what they got.
    pub(super) fn finish(self) -> Tally {
        self.stop.store(true, Ordering::Relaxed);
        let mut total = Tally::default();
        for t in self.threads {
            total.add(
                t.join()
                    .unwrap_or_else(|_| Tally { first_error: Some("a client panicked".into()), ..Tally::default() }),
            );
        }
        total
    }
}

struct Client {
    node: u32,
    addr: SocketAddr,
    sets: Arc<KeySets>,
    value_len: usize,
}

impl Client {
    /// Pipelines of [`PIPELINE`] GETs of uniformly random keys of its node, closed loop, until `until`.
    fn run(&self, seed: u64, until: Instant, stop: &AtomicBool) -> Tally {
        let mut tally = Tally::default();
        let mut rng = SplitMix64::new(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ u64::from(self.node));
        let mut conn = None;
        let mut sent = 0;
        while sent < GETS_MAX && Instant::now() < until && !stop.load(Ordering::Relaxed) {
            let c = match conn.as_mut() {
                Some(c) => c,
                None => match Conn::connect(self.addr) {
                    Ok(c) => conn.insert(c),
                    Err(e) => {
                        tally.error(format!("connect to node {}: {e}", self.node));
                        std::thread::sleep(RECONNECT_PAUSE);
                        continue;
                    }
                },
            };
            sent += PIPELINE as u64;
            if let Err(e) = self.pipeline(c, &mut rng, &mut tally) {
                tally.error(format!("node {}: {e}", self.node));
                conn = None;
                std::thread::sleep(RECONNECT_PAUSE);
            }
        }
        tally
    }

    fn pipeline(&self, c: &mut Conn, rng: &mut SplitMix64, tally: &mut Tally) -> std::io::Result<()> {
        let set = self.sets.of(self.node);
        for _ in 0..PIPELINE {
            let i = set[rng.below(set.len())];
            c.queue(&[b"GET", &self.sets.keys[i as usize]])?;
        }
        c.flush()?;
        for _ in 0..PIPELINE {
            match c.read()? {
                Reply::Bulk(Some(len)) if len == self.value_len => tally.found += 1,
                Reply::Bulk(None) => tally.missing += 1,
                other => tally.error(format!("node {}: GET answered {other:?}", self.node)),
            }
        }
        Ok(())
    }
}
