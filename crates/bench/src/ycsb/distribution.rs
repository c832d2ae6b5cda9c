//! Which record an operation touches: YCSB's request distributions (uniform, scrambled zipfian, latest), each
//! drawn as YCSB's generators draw it, and the operation mix. YCSB's zipfian generator (Gray et al.) holds only
//! for exponents below 1; under any `zipfianconstant` other than YCSB's own 0.99 the same distributions draw from
//! `rand_distr`'s Zipf law (rejection-inversion, exact for any exponent and item count) instead.

use super::keys::fnvhash64;
use super::workload::{Distribution, Workload};
use meridian_core::splitmix::SplitMix64;

/// YCSB's zipfian constant.
pub(super) const THETA: f64 = 0.99;
/// The scrambled zipfian draws from this many items, then folds them onto the records by hash, so that its
/// popular items do not depend on the record count (YCSB's `ScrambledZipfianGenerator.ITEM_COUNT`).
const SCRAMBLED_ITEMS: u64 = 10_000_000_000;
/// zeta(`SCRAMBLED_ITEMS`, 0.99), as YCSB precomputes it (summing ten billion terms takes a minute).
const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// A connection's own random numbers: seeded, so a run's choices can be replayed.
#[derive(Clone, Debug)]
pub(super) struct Rng(SplitMix64);

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
        Rng(SplitMix64::new(seed))
    }

    /// Uniform in [0, 1): 53 random bits.
    pub(super) fn unit(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n`, `n` non-zero; the modulo bias is below 2^-30 for any record count allowed.
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.0.next_u64() % n
    }
}

/// So that `rand_distr`'s laws draw from a connection's own stream.
impl rand::TryRng for Rng {
    type Error = std::convert::Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok((self.0.next_u64() >> 32) as u32)
    }

    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        Ok(self.0.next_u64())
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        for chunk in dst.chunks_mut(8) {
            chunk.copy_from_slice(&self.0.next_u64().to_le_bytes()[..chunk.len()]);
        }
        Ok(())
    }
}

/// `sum` plus the terms of zeta for items `from..to`: 1/(i+1)^theta.
fn zeta(from: u64, to: u64, theta: f64, sum: f64) -> f64 {
    (from..to).fold(sum, |s, i| s + 1.0 / ((i + 1) as f64).powf(theta))
}

/// Gray et al.'s zipfian over `0..items`, item 0 the most popular (YCSB's `ZipfianGenerator`): one uniform draw
/// per item, no table.
#[derive(Clone, Debug)]
pub(super) struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zeta2: f64,
    zetan: f64,
    eta: f64,
}

impl Zipfian {
    pub(super) fn new(items: u64, theta: f64) -> Zipfian {
        Zipfian::with_zetan(items, theta, zeta(0, items, theta, 0.0))
    }

    fn with_zetan(items: u64, theta: f64, zetan: f64) -> Zipfian {
        let zeta2 = zeta(0, 2, theta, 0.0);
        let mut z = Zipfian { items, theta, alpha: 1.0 / (1.0 - theta), zeta2, zetan, eta: 0.0 };
        z.eta = z.eta();
        z
    }

    fn eta(&self) -> f64 {
        (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan)
    }

    /// Extends the distribution to `items` items, adding only the new terms of zeta (YCSB does this as inserts
    /// add records under the latest distribution).
    pub(super) fn grow(&mut self, items: u64) {
        if items > self.items {
            self.zetan = zeta(self.items, items, self.theta, self.zetan);
            self.items = items;
            self.eta = self.eta();
        }
    }

    pub(super) fn next(&self, rng: &mut Rng) -> u64 {
        let u = rng.unit();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        let item = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        item.min(self.items - 1)
    }
}

/// A zipfian over `0..items`, item 0 the most popular: YCSB's generator at its own constant, otherwise the
/// exact law of the given exponent.
#[derive(Clone, Debug)]
pub(super) enum Skewed {
    Ycsb(Zipfian),
    Law { items: u64, theta: f64, law: rand_distr::Zipf<f64> },
}

impl Skewed {
    fn new(items: u64, theta: f64) -> Skewed {
        match theta == THETA {
            true => Skewed::Ycsb(Zipfian::new(items, theta)),
            false => Skewed::law(items, theta),
        }
    }

    /// Over YCSB's ten billion scrambled items.
    fn scrambled(theta: f64) -> Skewed {
        match theta == THETA {
            true => Skewed::Ycsb(Zipfian::with_zetan(SCRAMBLED_ITEMS, THETA, SCRAMBLED_ZETAN)),
            false => Skewed::law(SCRAMBLED_ITEMS, theta),
        }
    }

    fn law(items: u64, theta: f64) -> Skewed {
        let law = rand_distr::Zipf::new(items as f64, theta).expect("a validated exponent over at least one item");
        Skewed::Law { items, theta, law }
    }

    fn grow(&mut self, to: u64) {
        match self {
            Skewed::Ycsb(z) => z.grow(to),
            Skewed::Law { items, theta, .. } if to > *items => *self = Skewed::law(to, *theta),
            Skewed::Law { .. } => {}
        }
    }

    fn next(&self, rng: &mut Rng) -> u64 {
        match self {
            Skewed::Ycsb(z) => z.next(rng),
            // The law draws ranks 1..=items.
            Skewed::Law { items, law, .. } => (rand_distr::Distribution::sample(law, rng) as u64).clamp(1, *items) - 1,
        }
    }
}

/// How a phase's connection picks the record of a read, update or read-modify-write.
#[derive(Clone, Debug)]
pub(super) enum KeyChooser {
    /// Any of the records loaded, alike (YCSB's uniform never picks records inserted during the run).
    Uniform { records: u64 },
    /// A zipfian over ten billion items, each folded onto a record by its hash: the popular records are
    /// scattered over the key space, not the first ones loaded. Records up to `items`, which leaves room for
    /// inserts; a record not inserted yet is drawn again.
    Zipfian { zipfian: Skewed, items: u64 },
    /// The most recent record the most popular: the last acknowledged record less a zipfian draw over all of them.
    Latest(Skewed),
}

impl KeyChooser {
    /// For `workload`'s run phase, which may insert up to `inserts_expected` records (YCSB sizes the zipfian's
    /// range by twice the inserts it expects).
    pub(super) fn new(workload: &Workload, inserts_expected: u64) -> KeyChooser {
        let records = workload.record_count;
        match workload.distribution {
            Distribution::Uniform => KeyChooser::Uniform { records },
            Distribution::Zipfian => KeyChooser::Zipfian {
                zipfian: Skewed::scrambled(workload.zipfian_constant),
                items: records.saturating_add(inserts_expected.saturating_mul(2)),
            },
            Distribution::Latest => KeyChooser::Latest(Skewed::new(records, workload.zipfian_constant)),
        }
    }

    /// A record, given that records `0..=last` exist.
    pub(super) fn next(&mut self, rng: &mut Rng, last: u64) -> u64 {
        match self {
            KeyChooser::Uniform { records } => rng.below(*records),
            KeyChooser::Zipfian { zipfian, items } => loop {
                let record = fnvhash64(zipfian.next(rng)) as u64 % *items;
                if record <= last {
                    return record;
                }
            },
            KeyChooser::Latest(zipfian) => {
                zipfian.grow(last + 1);
                last - zipfian.next(rng)
            }
        }
    }
}

/// The operations of the run phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpKind {
    Insert,
    Read,
    Update,
    ReadModifyWrite,
}

impl OpKind {
    /// As YCSB prints them.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Insert => "INSERT",
            OpKind::Read => "READ",
            OpKind::Update => "UPDATE",
            OpKind::ReadModifyWrite => "READ-MODIFY-WRITE",
        }
    }
}

/// Draws operations in a workload's proportions (YCSB's `DiscreteGenerator`).
#[derive(Clone, Debug)]
pub(super) struct Mix {
    /// Each operation with the sum of its and the earlier ones' proportions.
    cumulative: Vec<(OpKind, f64)>,
}

impl Mix {
    pub(super) fn new(workload: &Workload) -> Mix {
        let p = &workload.proportions;
        let weights = [
            (OpKind::Read, p.read),
            (OpKind::Update, p.update),
            (OpKind::Insert, p.insert),
            (OpKind::ReadModifyWrite, p.read_modify_write),
        ];
        let mut sum = 0.0;
        let cumulative = weights
            .into_iter()
            .filter(|&(_, w)| w > 0.0)
            .map(|(op, w)| {
                sum += w;
                (op, sum)
            })
            .collect();
        Mix { cumulative }
    }

    pub(super) fn next(&self, rng: &mut Rng) -> OpKind {
        let total = self.cumulative.last().expect("a validated workload has an operation").1;
        let u = rng.unit() * total;
        self.cumulative.iter().find(|&&(_, upto)| u < upto).unwrap_or(&self.cumulative[self.cumulative.len() - 1]).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const DRAWS: u64 = 1_000_000;

    fn counts(mut draw: impl FnMut() -> u64) -> BTreeMap<u64, u64> {
        let mut counts = BTreeMap::new();
        (0..DRAWS).for_each(|_| *counts.entry(draw()).or_default() += 1);
        counts
    }

    fn share(count: u64) -> f64 {
        count as f64 / DRAWS as f64
    }

    #[test]
    fn zipfian_matches_the_theory_for_the_most_popular_items() {
        let (items, mut rng) = (1000, Rng::new(1));
        let z = Zipfian::new(items, THETA);
        let c = counts(|| z.next(&mut rng));
        let zetan = zeta(0, items, THETA, 0.0);
        // Item i's probability is 1 / ((i+1)^theta * zeta(n)): exact for the two most popular items, which the
        // generator draws by their own cases; its closed form for the rest approximates the tail, whose mass
        // over a range is still close to the theory's.
        let expected = |i: u64| 1.0 / (((i + 1) as f64).powf(THETA) * zetan);
        for i in [0u64, 1] {
            let got = share(c[&i]);
            assert!((got - expected(i)).abs() < expected(i) * 0.03, "item {i}: {got} against {}", expected(i));
        }
        for (from, to) in [(2, 10), (10, 100), (100, 1000)] {
            let got = share((from..to).map(|i| c.get(&i).copied().unwrap_or(0)).sum());
            let theory: f64 = (from..to).map(expected).sum();
            assert!((got - theory).abs() < theory * 0.1, "items {from}..{to}: {got} against {theory}");
        }
        assert!(c.keys().all(|&i| i < items));
        assert!(c.len() > 900, "the tail is drawn too: {} distinct items", c.len());
    }

    #[test]
    fn zipfian_grows_as_if_built_for_the_larger_count() {
        let mut grown = Zipfian::new(100, THETA);
        grown.grow(5000);
        let built = Zipfian::new(5000, THETA);
        assert!((grown.zetan - built.zetan).abs() < 1e-9 && (grown.eta - built.eta).abs() < 1e-9);
    }

    #[test]
    fn scrambled_zipfian_keeps_the_skew_but_scatters_the_popular_records() {
        let mut rng = Rng::new(2);
        let workload = Workload::preset('a').unwrap();
        let mut chooser = KeyChooser::new(&workload, 0);
        let c = counts(|| chooser.next(&mut rng, 999));
        assert!(c.keys().all(|&r| r < 1000));
        let mut by_count: Vec<(u64, u64)> = c.into_iter().map(|(r, n)| (n, r)).collect();
        by_count.sort_unstable_by(|a, b| b.cmp(a));
        // The most popular item has 1/zeta(10^10) of the draws, plus the few items of the tail that fold onto it.
        let top = share(by_count[0].0);
        assert!((1.0 / SCRAMBLED_ZETAN..1.0 / SCRAMBLED_ZETAN + 0.005).contains(&top), "top share {top}");
        let top_ten: Vec<u64> = by_count[..10].iter().map(|&(_, r)| r).collect();
        assert!(top_ten.iter().any(|&r| r > 100), "popular records spread out: {top_ten:?}");
    }

    #[test]
    fn latest_prefers_the_newest_records_and_follows_inserts() {
        let mut rng = Rng::new(3);
        let workload = Workload::preset('d').unwrap();
        let mut chooser = KeyChooser::new(&workload, 0);
        let c = counts(|| chooser.next(&mut rng, 999));
        let expected = 1.0 / zeta(0, 1000, THETA, 0.0);
        assert!((share(c[&999]) - expected).abs() < expected * 0.05, "newest record's share {}", share(c[&999]));
        assert!(c.keys().all(|&r| r <= 999));
        let after = counts(|| chooser.next(&mut rng, 1499));
        assert!(after.keys().all(|&r| r <= 1499) && after[&1499] > after.get(&999).copied().unwrap_or(0));
    }

    #[test]
    fn other_exponents_follow_their_law() {
        let mut rng = Rng::new(6);
        // Exponent 4, GlobLease's skewed workload: the most popular record takes 1/zeta(4) = 90/pi^4 of the
        // draws, the second 1/16 of that.
        let skewed = Workload { zipfian_constant: 4.0, ..Workload::preset('b').unwrap() };
        let mut chooser = KeyChooser::new(&skewed, 0);
        let c = counts(|| chooser.next(&mut rng, 9999));
        let mut by_count: Vec<u64> = c.values().copied().collect();
        by_count.sort_unstable_by(|a, b| b.cmp(a));
        let top = 90.0 / std::f64::consts::PI.powi(4);
        assert!((share(by_count[0]) - top).abs() < 0.005, "top share {} against {top}", share(by_count[0]));
        assert!((share(by_count[1]) - top / 16.0).abs() < 0.003, "second share {}", share(by_count[1]));
        // Exponent 0.5 over 1000 items, against the theory range by range.
        let z = Skewed::new(1000, 0.5);
        let c = counts(|| z.next(&mut rng));
        let zetan = zeta(0, 1000, 0.5, 0.0);
        let expected = |i: u64| 1.0 / (((i + 1) as f64).powf(0.5) * zetan);
        for (from, to) in [(0, 1), (1, 10), (10, 100), (100, 1000)] {
            let got = share((from..to).map(|i| c.get(&i).copied().unwrap_or(0)).sum());
            let theory: f64 = (from..to).map(expected).sum();
            assert!((got - theory).abs() < theory * 0.03, "items {from}..{to}: {got} against {theory}");
        }
        // Latest at exponent 4 follows inserts: the newest record is the most popular.
        let mut latest = KeyChooser::new(&Workload { zipfian_constant: 4.0, ..Workload::preset('d').unwrap() }, 0);
        let c = counts(|| latest.next(&mut rng, 1499));
        assert!((share(c[&1499]) - top).abs() < 0.005, "newest record's share {}", share(c[&1499]));
    }

    #[test]
    fn uniform_covers_the_loaded_records_evenly() {
        let mut rng = Rng::new(4);
        let mut chooser =
            KeyChooser::new(&Workload { distribution: Distribution::Uniform, ..Workload::preset('a').unwrap() }, 0);
        let c = counts(|| chooser.next(&mut rng, 5000));
        assert_eq!(c.len(), 1000, "only the 1000 loaded records");
        assert!(c.values().all(|&n| (800..1200).contains(&n)));
    }

    #[test]
    fn mixes_draw_the_standard_proportions() {
        let expect = [
            ('a', vec![(OpKind::Read, 0.5), (OpKind::Update, 0.5)]),
            ('b', vec![(OpKind::Read, 0.95), (OpKind::Update, 0.05)]),
            ('c', vec![(OpKind::Read, 1.0)]),
            ('d', vec![(OpKind::Read, 0.95), (OpKind::Insert, 0.05)]),
            ('f', vec![(OpKind::Read, 0.5), (OpKind::ReadModifyWrite, 0.5)]),
        ];
        for (letter, shares) in expect {
            let (mix, mut rng) = (Mix::new(&Workload::preset(letter).unwrap()), Rng::new(5));
            let mut c: BTreeMap<OpKind, u64> = BTreeMap::new();
            (0..DRAWS).for_each(|_| *c.entry(mix.next(&mut rng)).or_default() += 1);
            assert_eq!(c.len(), shares.len(), "workload {letter}: {c:?}");
            for (op, expected) in shares {
                let got = share(c[&op]);
                assert!((got - expected).abs() < 0.003, "workload {letter} {op:?}: {got} against {expected}");
            }
        }
    }
}
