//! Logging refused peer connections without flooding the log: a refused node (no certificate, another CA's, the
//! wrong cluster) redials about once a second until it is stopped, so each refusal (an address and a reason:
//! callers on one host share its address) is warned of once per [`WARN_EVERY`], and repeated in between at debug.

use std::collections::HashMap;
use std::fmt::Display;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;
use tracing::{debug, warn};

/// How often one refusal is warned of.
const WARN_EVERY: Duration = Duration::from_secs(60);
/// Refusals remembered at most: beyond, they are forgotten (and warned of again) rather than kept without bound.
const REFUSALS_MAX: usize = 1024;

/// When each refusal was last warned of; shared by every connection of the peer port.
#[derive(Clone, Debug, Default)]
pub(crate) struct RefusalLog(Arc<Mutex<HashMap<(IpAddr, String), Instant>>>);

impl RefusalLog {
    /// Logs that the caller at `addr` is refused, and why.
    pub(crate) fn refused(&self, addr: SocketAddr, why: &dyn Display) {
        if self.warn_now((addr.ip(), why.to_string()), Instant::now()) {
            warn!(%addr, "refusing peer connection: {why} (warned of once a minute)");
        } else {
            debug!(%addr, "refusing peer connection: {why}");
        }
    }

    fn warn_now(&self, refusal: (IpAddr, String), now: Instant) -> bool {
        let mut warned = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if warned.get(&refusal).is_some_and(|&last| now.duration_since(last) < WARN_EVERY) {
            return false;
        }
        if warned.len() >= REFUSALS_MAX {
            warned.clear();
        }
        warned.insert(refusal, now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_warned_of_once_a_minute() {
        let log = RefusalLog::default();
        let at = |ip: [u8; 4], why: &str| (IpAddr::from(ip), why.to_string());
        let t0 = Instant::now();
        assert!(log.warn_now(at([127, 0, 0, 1], "plain"), t0));
        assert!(!log.warn_now(at([127, 0, 0, 1], "plain"), t0 + Duration::from_secs(1)), "a redial a second later");
        assert!(log.warn_now(at([127, 0, 0, 1], "expired"), t0 + Duration::from_secs(1)), "another reason");
        assert!(log.warn_now(at([127, 0, 0, 6], "plain"), t0 + Duration::from_secs(1)), "another address");
        assert!(!log.warn_now(at([127, 0, 0, 1], "plain"), t0 + Duration::from_secs(59)));
        assert!(log.warn_now(at([127, 0, 0, 1], "plain"), t0 + WARN_EVERY));
        for i in 0..REFUSALS_MAX as u32 {
            log.warn_now((IpAddr::from((10 << 24 | i).to_be_bytes()), "plain".into()), t0);
        }
        assert!(log.0.lock().unwrap().len() <= REFUSALS_MAX, "bounded");
    }
}
