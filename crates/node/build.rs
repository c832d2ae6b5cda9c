//! Records the commit the node is built from, for INFO's `meridian_git_sha1` and `meridian_git_dirty` and for
//! `meridian --version` (`src/build_info.rs`): HEAD's short hash and whether tracked files had uncommitted
//! changes, or `unknown` (and clean) outside a git checkout or without git.
//!
//! The script reruns when HEAD moves (a commit, a checkout), not at every build, so the dirty flag is as of
//! the last time HEAD moved or this script changed: edits made since then are not seen.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let sha1 = git(&["rev-parse", "--short", "HEAD"]);
    // --no-optional-locks: `git status` would otherwise refresh the index. Untracked files do not make the
    // tree dirty, as with `git describe --dirty`.
    let status = || git(&["--no-optional-locks", "status", "--porcelain", "--untracked-files=no"]);
    let dirty = sha1.is_some() && status().is_some_and(|changes| !changes.is_empty());
    let sha1 = sha1.unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=MERIDIAN_GIT_SHA1={sha1}");
    println!("cargo:rustc-env=MERIDIAN_GIT_DIRTY={}", u8::from(dirty));
    println!("cargo:rustc-env=MERIDIAN_GIT_COMMIT={sha1}{}", if dirty { "-dirty" } else { "" });
    for path in moved_by_commits() {
        println!("cargo:rerun-if-changed={path}");
    }
}

/// HEAD, and the ref it names as a loose file or in packed-refs: what a commit or a checkout changes. In a
/// worktree HEAD is the worktree's own while refs are the main repository's; `--git-path` finds each. Only
/// files that exist: cargo reruns a script every time for a missing one.
fn moved_by_commits() -> Vec<String> {
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    ["HEAD".to_string(), "packed-refs".into()]
        .into_iter()
        .chain(branch)
        .filter_map(|name| git(&["rev-parse", "--path-format=absolute", "--git-path", &name]))
        .filter(|path| Path::new(path).exists())
        .collect()
}

/// What `git args` printed, trimmed, if git is there and succeeded.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}
