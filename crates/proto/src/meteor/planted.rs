//! Deliberately wrong variants of the meteor core, switched on only by [`MeteorConfig::planted_bug`], which
//! exists only with the `planted-bugs` feature: they prove that the simulator's checkers catch what the meteor
//! protocol must not do (`tests/sim_planted_bugs.rs`). Each is a one-line hook where it breaks, always false
//! without the feature.

use super::MeteorConfig;

/// Deliberately wrong variants of the meteor core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeteorPlantedBug {
    /// A read counts a peer's status however old it is, not only one sent after the read arrived: a majority
    /// may agree on a version older than a write that succeeded before the read began.
    CountsStaleStatuses,
}

/// Whether `bug` is planted in a core of configuration `cfg`: never, without the `planted-bugs` feature.
#[inline(always)]
pub(super) fn planted_in(cfg: &MeteorConfig, bug: MeteorPlantedBug) -> bool {
    #[cfg(feature = "planted-bugs")]
    return cfg.planted_bug == Some(bug);
    #[cfg(not(feature = "planted-bugs"))]
    {
        let _ = (cfg, bug);
        false
    }
}
