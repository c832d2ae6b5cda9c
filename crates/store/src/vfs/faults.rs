//! Faults a [`super::SimVfs`] can inject on top of crashes: bit flips on read, a full disk, and a power cut after
//! a chosen number of writes. Every choice comes from a seeded generator, so a run replays exactly.

use std::io;

use meridian_core::splitmix::SplitMix64;

pub(super) struct Faults {
    flip_chance: f64,
    rng: SplitMix64,
    /// Total bytes the disk holds before appends fail with `StorageFull`.
    capacity: Option<u64>,
    /// Mutating calls left before the simulated power cut; `Some(0)` means power is already off.
    ops_left: Option<u64>,
}

impl Default for Faults {
    fn default() -> Faults {
        Faults { flip_chance: 0.0, rng: SplitMix64::new(0), capacity: None, ops_left: None }
    }
}

impl Faults {
    pub(super) fn set_read_flips(&mut self, chance: f64, seed: u64) {
        self.flip_chance = chance;
        self.rng = SplitMix64::new(seed);
    }

    pub(super) fn set_capacity(&mut self, bytes: Option<u64>) {
        self.capacity = bytes;
    }

    pub(super) fn capacity(&self) -> Option<u64> {
        self.capacity
    }

    pub(super) fn cut_power_after(&mut self, ops: Option<u64>) {
        self.ops_left = ops;
    }

    /// With the configured chance, flips one bit of what a read returns (the disk itself is unchanged).
    pub(super) fn maybe_flip(&mut self, buf: &mut [u8]) {
        if buf.is_empty() || self.flip_chance <= 0.0 || !self.rng.chance(self.flip_chance) {
            return;
        }
        let at = self.rng.below(buf.len());
        buf[at] ^= 1 << self.rng.below(8);
    }

    /// Accounts for one mutating call, failing it (with no effect) once the power is cut.
    pub(super) fn charge(&mut self) -> io::Result<()> {
        match &mut self.ops_left {
            Some(0) => Err(io::Error::other("simulated power cut")),
            Some(n) => {
                *n -= 1;
                Ok(())
            }
            None => Ok(()),
        }
    }
}
