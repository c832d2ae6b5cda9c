//! Fitting the client connection cap to the open-file limit, as Redis fits `maxclients`: each client holds
//! a socket, and a node that runs out of descriptors fails to accept, to open a log segment, to reach a
//! peer. At start the soft limit is raised as far as the hard limit allows; if the cap still does not fit,
//! it is lowered to what does, with a warning, so the client past it gets Redis' `max number of clients
//! reached` rather than the node an `EMFILE` somewhere that matters.
//!
//! Nodes that share a process (`meridian demo`) share its limit; each fits its own cap to it.

use tracing::warn;

/// Descriptors a node keeps for other things than clients: peer connections both ways, HTTP, the store
/// files of its keyspaces, the map and the manager's log. An idle three-node demo process holds about 45.
pub(crate) const RESERVED: u64 = 256;

/// The client cap that fits: `wanted`, or less if the open-file limit cannot be raised to fit it; an
/// error if not even one client fits.
pub(crate) fn fit_connections(wanted: usize) -> Result<usize, String> {
    let needed = wanted as u64 + RESERVED;
    let Ok(limit) = rlimit::increase_nofile_limit(needed) else {
        return Ok(wanted); // the limit cannot be read here: nothing to fit to
    };
    fit(wanted, limit)
}

fn fit(wanted: usize, limit: u64) -> Result<usize, String> {
    let fits = limit.saturating_sub(RESERVED);
    match usize::try_from(fits).unwrap_or(usize::MAX) {
        0 => Err(format!(
            "the open-file limit ({limit}) leaves no descriptor for clients beside the {RESERVED} a node keeps; \
             raise it (ulimit -n)"
        )),
        fits if fits < wanted => {
            warn!(
                limit,
                wanted,
                serving = fits,
                "the open-file limit is too low for --max-connections; serving fewer clients (raise ulimit -n)"
            );
            Ok(fits)
        }
        _ => Ok(wanted),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_shrinks_to_what_the_limit_leaves() {
        assert_eq!(fit(10_000, 20_000), Ok(10_000));
        assert_eq!(fit(10_000, 1_024), Ok(1_024 - RESERVED as usize));
        assert!(fit(10, RESERVED).unwrap_err().contains("raise it"));
    }

    #[test]
    fn the_soft_limit_is_raised_to_fit() {
        let fitted = fit_connections(100).unwrap();
        assert_eq!(fitted, 100, "any hard limit allows 356 descriptors");
        let (soft, _) = rlimit::Resource::NOFILE.get().unwrap();
        assert!(soft >= 100 + RESERVED);
    }
}
