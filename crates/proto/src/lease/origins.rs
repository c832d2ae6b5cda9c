//! Migration by write origin: GlobLease moves "the master of the keys close to their most written places"
//! (seed 001 §4.1; the seed's evaluation did it offline, from a script). A master counts, per key, the regions
//! its writes come from (the region of the node the client sent the write to), and asks the manager to move a
//! key whose writes come mostly from one other region holding a replica; the manager proposes the move as
//! `ctl keyspace master NAME KEY REGION` would, and the map refuses what it would refuse the operator.
//!
//! A key's writes are counted until [`OriginsConfig::min_writes`] have come in (or forgotten if that takes more than
//! [`STALE_WINDOWS`] windows); it then leans to a region if at least three in four came from there, and moves
//! once it leans to the same other region twice in a row. A key written evenly from two regions stays put: 16
//! writes (the default) lean 3:1 one way by chance about one time in 26, twice in a row the same way one in 1,400. At most
//! [`TRACKED_MAX`] keys are counted at once, so the tracker's memory is bounded whatever the keyspace's size.

use crate::reports::KeyMove;
use bytes::Bytes;
use meridian_core::ChainId;
use std::collections::BTreeMap;

/// How quickly keys move: the defaults suit a production cluster; the simulator, whose runs last seconds, judges
/// sooner on fewer writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OriginsConfig {
    /// Ticks between judgements.
    pub window_ticks: u64,
    /// Writes of a key counted before it is judged.
    pub min_writes: u32,
}

impl Default for OriginsConfig {
    /// 5 s windows at the default 50 ms tick, 16 writes.
    fn default() -> OriginsConfig {
        OriginsConfig { window_ticks: 100, min_writes: 16 }
    }
}

/// Windows a key's count or lean lasts without reaching a judgement.
const STALE_WINDOWS: u64 = 12;
/// Keys counted at once.
const TRACKED_MAX: usize = 4096;
/// Ticks a move stays in the node's reports to the manager (several heartbeats, against their loss).
const ASK_TICKS: u64 = 40;

type Key = (ChainId, Bytes);

#[derive(Debug, Default)]
pub(super) struct Origins {
    cfg: OriginsConfig,
    /// Judgements so far.
    window: u64,
    /// The tick the current window began at.
    began: u64,
    /// Writes counted since the key's last judgement, by origin region, with the window counting began in.
    counts: BTreeMap<Key, (BTreeMap<String, u32>, u64)>,
    /// The region each key leaned to at its last judgement, where it could move, with the window of it.
    leaning: BTreeMap<Key, (String, u64)>,
    /// Moves asked, with the tick they were asked at.
    asked: Vec<(KeyMove, u64)>,
}

impl Origins {
    pub fn new(cfg: OriginsConfig) -> Origins {
        Origins { cfg, ..Origins::default() }
    }

    /// A write of `key` this node took as its master, sent by a client in `region`.
    pub fn count(&mut self, chain: ChainId, key: &Bytes, region: &str) {
        let k = (chain, key.clone());
        if self.counts.len() >= TRACKED_MAX && !self.counts.contains_key(&k) {
            return;
        }
        let (by_region, _) = self.counts.entry(k).or_insert_with(|| (BTreeMap::new(), self.window));
        // Every write of a key comes through here: allocate a region's name once per key, not per write.
        match by_region.get_mut(region) {
            Some(n) => *n += 1,
            None => _ = by_region.insert(region.to_string(), 1),
        }
    }

    /// Judges the keys counted enough once a window has lasted; `movable(chain, key, region)` says whether the
    /// key could move to `region` (another region than its own, with a replica). Returns the moves it asked.
    pub fn judge(&mut self, tick: u64, movable: impl Fn(ChainId, &Bytes, &str) -> bool) -> u64 {
        self.asked.retain(|&(_, at)| tick.saturating_sub(at) < ASK_TICKS);
        if tick < self.began + self.cfg.window_ticks {
            return 0;
        }
        (self.began, self.window) = (tick, self.window + 1);
        let fresh = |since: u64| self.window - since <= STALE_WINDOWS;
        self.counts.retain(|_, (_, since)| fresh(*since));
        self.leaning.retain(|_, (_, since)| fresh(*since));
        let ripe: Vec<Key> = self
            .counts
            .iter()
            .filter(|(_, (c, _))| c.values().sum::<u32>() >= self.cfg.min_writes)
            .map(|(k, _)| k.clone())
            .collect();
        let mut asked = 0;
        for k in ripe {
            let (by_region, _) = self.counts.remove(&k).expect("listed");
            let Some(region) = leans(&by_region).filter(|r| movable(k.0, &k.1, r)) else {
                self.leaning.remove(&k);
                continue;
            };
            match self.leaning.remove(&k) {
                Some((before, _)) if before == region => {
                    let to = KeyMove { keyspace: k.0.keyspace(), key: k.1, region: region.to_string() };
                    self.asked.push((to, tick));
                    asked += 1;
                }
                _ => {
                    self.leaning.insert(k, (region.to_string(), self.window));
                }
            }
        }
        asked
    }

    /// The moves to tell the manager of.
    pub fn asked(&self) -> impl Iterator<Item = &KeyMove> {
        self.asked.iter().map(|(m, _)| m)
    }
}

/// The region that sent at least three in four of a key's counted writes.
fn leans(by_region: &BTreeMap<String, u32>) -> Option<&str> {
    let total: u32 = by_region.values().sum();
    let (region, &most) = by_region.iter().max_by_key(|&(_, n)| n)?;
    (4 * most >= 3 * total).then_some(region.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::KeyspaceId;

    /// The default window.
    const WINDOW_TICKS: u64 = 100;

    fn window(o: &mut Origins, chain: ChainId, key: &Bytes, writes: &[(&str, u32)]) {
        for &(region, n) in writes {
            (0..n).for_each(|_| o.count(chain, key, region));
        }
    }

    #[test]
    fn a_key_written_from_one_other_region_moves_once_it_leaned_there_twice() {
        let (mut o, chain, key) =
            (Origins::new(OriginsConfig::default()), ChainId::new(KeyspaceId(2), 1), Bytes::from("k"));
        let anywhere_but_eu = |_: ChainId, _: &Bytes, r: &str| r != "eu";
        window(&mut o, chain, &key, &[("us", 9), ("eu", 1)]);
        assert_eq!(o.judge(WINDOW_TICKS, anywhere_but_eu), 0, "too few writes to judge");
        window(&mut o, chain, &key, &[("us", 8)]);
        assert_eq!(o.judge(2 * WINDOW_TICKS, anywhere_but_eu), 0, "one lean is not enough");
        window(&mut o, chain, &key, &[("us", 13), ("eu", 3)]);
        assert_eq!(o.judge(2 * WINDOW_TICKS + 1, anywhere_but_eu), 0, "judged once a window");
        assert_eq!(o.judge(3 * WINDOW_TICKS, anywhere_but_eu), 1);
        let moves: Vec<_> = o.asked().cloned().collect();
        assert_eq!(moves, [KeyMove { keyspace: chain.keyspace(), key: key.clone(), region: "us".into() }]);
        assert_eq!(o.judge(4 * WINDOW_TICKS, anywhere_but_eu), 0);
        assert_eq!(o.asked().count(), 0, "asked for a while only");
    }

    #[test]
    fn keys_written_evenly_rarely_or_from_their_own_region_stay() {
        let (mut o, chain) = (Origins::new(OriginsConfig::default()), ChainId::new(KeyspaceId(2), 1));
        let (even, rare, home) = (Bytes::from("even"), Bytes::from("rare"), Bytes::from("home"));
        let anywhere_but_eu = |_: ChainId, _: &Bytes, r: &str| r != "eu";
        for w in 1..=4 {
            window(&mut o, chain, &even, &[("us", 10), ("asia", 10)]);
            window(&mut o, chain, &home, &[("eu", 40)]);
            window(&mut o, chain, &rare, &[("us", 1)]);
            assert_eq!(o.judge(w * WINDOW_TICKS, anywhere_but_eu), 0);
        }
        window(&mut o, chain, &even, &[("us", 20)]);
        assert_eq!(o.judge(5 * WINDOW_TICKS, anywhere_but_eu), 0);
        window(&mut o, chain, &even, &[("asia", 20)]);
        assert_eq!(o.judge(6 * WINDOW_TICKS, anywhere_but_eu), 0, "a lean that changes region starts over");
        for w in 7..=20 {
            window(&mut o, chain, &rare, &[("us", 1)]);
            assert_eq!(o.judge(w * WINDOW_TICKS, anywhere_but_eu), 0, "a count that takes too long is forgotten");
        }
    }
}
