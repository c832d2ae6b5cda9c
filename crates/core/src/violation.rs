//! What an invariant check reports: the simulator checks every protocol core's invariants and the cluster
//! map's after each step (`KeyspaceProtocol::check_invariants`, `ClusterMap::check`), and a run that breaks
//! one fails with its description.

use std::fmt;

/// A broken invariant, described for the person who reads the failing run: which node, chain or map entry,
/// and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation(pub String);

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Violation {}

/// The checks build their descriptions with `format!`; `?` turns them into violations.
impl From<String> for Violation {
    fn from(description: String) -> Violation {
        Violation(description)
    }
}

impl From<&str> for Violation {
    fn from(description: &str) -> Violation {
        Violation(description.to_string())
    }
}
