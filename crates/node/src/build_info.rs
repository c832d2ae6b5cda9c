//! The commit this build was made from, as `build.rs` found it.

/// HEAD's short hash when built, or `unknown` outside a git checkout (INFO's `meridian_git_sha1`).
pub const GIT_SHA1: &str = env!("MERIDIAN_GIT_SHA1");
/// `1` if tracked files had uncommitted changes when built, else `0` (INFO's `meridian_git_dirty`, as Redis'
/// `redis_git_dirty`).
pub const GIT_DIRTY: &str = env!("MERIDIAN_GIT_DIRTY");
/// How the binary was compiled: `debug` or `release` (INFO's `build_profile`).
pub const PROFILE: &str = if cfg!(debug_assertions) { "debug" } else { "release" };
/// The version with its commit, as `meridian --version` shows it: `0.1.0 (abc1234)`, or `0.1.0
/// (abc1234-dirty)`.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("MERIDIAN_GIT_COMMIT"), ")");
