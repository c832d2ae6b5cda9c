//! SCAN pages in the workload, and what an answer says about the workload's keys.
//!
//! A page asks the chain owning ring position `from` for the keys of a token range starting there; its answer
//! covers exactly `from ..` its `next` (to the ring's end when `next` is None), as `chain/scan.rs` documents. For
//! each of the workload's keys in the scanned keyspace whose token lies in that range, the answer says whether
//! the key was present when the query node answered:
//!
//! - A key the page leaves out was absent: a read of nothing, which the workload records as a get of the absent
//!   value between the page's invocation and its answer. So the history holds a page to what it holds a GET to
//!   (linearizable under `su`, bounded staleness otherwise), which implies SCAN's own guarantee: a key present for
//!   the whole of a scan is returned (docs/resp.md, "SCAN and DBSIZE").
//! - A key the page returns was present with some value: a present read, recorded between the page's invocation
//!   and its answer. The linearizability search leaves present reads out (one could be read from any write, which
//!   would keep every unknown write in the search); `meridian_check::present_violations` judges them instead,
//!   soundly but not completely: it reports a page that lists a key after a delete was acknowledged that
//!   certainly followed every write of a value, or a key no write of a value could have put there. Under
//!   bounded staleness they are judged with the GETs.
//!
//! What the answer itself must get right is checked here too: every key it returns is one of the keyspace's
//! workload keys, inside the range it claims to cover.

use crate::rng::SimRng;
use bytes::Bytes;
use meridian_core::ring::key_token;
use meridian_core::{KeyspaceId, Request, Scan, ScanWant, Scanned};

/// Keys a page examines at most: small, so that pages end inside partitions as well as at their ends.
const COUNT_MAX: u64 = 3;

/// A key a page's answer returned though it is no workload key or lies outside the range the answer covers.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "a scan of keyspace {keyspace} from {from} to {} returned {key:?} (token {})",
    .next.map_or("the ring's end".to_string(), |n| n.to_string()),
    key_token(.key)
)]
pub struct StrayKey {
    pub keyspace: KeyspaceId,
    pub from: u64,
    /// Where the answer's range ends; None for the ring's end.
    pub next: Option<u64>,
    pub key: Bytes,
}

/// A page sent and not yet answered.
#[derive(Clone, Copy, Debug)]
pub struct Page {
    pub keyspace: KeyspaceId,
    pub from: u64,
    pub invoke_ns: u64,
}

impl Page {
    /// A page of `keyspace` from the ring's start, from a token of one of `keys` (a key on the range's first
    /// token), or from anywhere, with a COUNT of 1 to `COUNT_MAX`.
    pub fn random(rng: &mut SimRng, keyspace: KeyspaceId, keys: &[Bytes], invoke_ns: u64) -> (Page, Request) {
        let from = match rng.index(3) {
            0 => 0,
            1 if !keys.is_empty() => key_token(&keys[rng.index(keys.len())]),
            _ => rng.u64(),
        };
        let want = ScanWant::Keys(rng.range(1, COUNT_MAX + 1) as usize);
        let scan = Scan { keyspace, from, want, pattern: None, kind: None };
        (Page { keyspace, from, invoke_ns }, Request::Scan(scan))
    }

    /// Of `keys` (the keyspace's workload keys, by history key index), those the answer covered, each with
    /// whether it returned it (present) or left it out (absent); or the first key it returned that it should not
    /// have.
    pub fn covered(&self, scanned: &Scanned, keys: &[(usize, Bytes)]) -> Result<Vec<(usize, bool)>, StrayKey> {
        let in_range = |key: &[u8]| {
            let token = key_token(key);
            token >= self.from && scanned.next.is_none_or(|next| token < next)
        };
        if let Some(stray) = scanned.keys.iter().find(|&r| !keys.iter().any(|(_, k)| k == r) || !in_range(r)) {
            let (keyspace, from, next) = (self.keyspace, self.from, scanned.next);
            return Err(StrayKey { keyspace, from, next, key: stray.clone() });
        }
        let found = keys.iter().filter(|(_, k)| in_range(k));
        Ok(found.map(|(index, k)| (*index, scanned.keys.contains(k))).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> Vec<(usize, Bytes)> {
        (0..40).map(|i| (i, Bytes::from(format!("k{i}")))).collect()
    }

    fn page(from: u64) -> Page {
        Page { keyspace: KeyspaceId::DEFAULT, from, invoke_ns: 0 }
    }

    #[test]
    fn keys_in_the_covered_range_are_present_if_returned_and_absent_if_not() {
        let keys = keys();
        let mut tokens: Vec<(u64, usize)> = keys.iter().map(|(i, k)| (key_token(k), *i)).collect();
        tokens.sort_unstable();
        // A page over the 10th to the 19th key by token that returns the 12th and 15th.
        let (from, next) = (tokens[10].0, tokens[20].0);
        let returned = [tokens[12].1, tokens[15].1].map(|i| keys[i].1.clone()).to_vec();
        let scanned = Scanned { keys: returned, next: Some(next), ..Scanned::default() };
        let mut covered = page(from).covered(&scanned, &keys).unwrap();
        covered.sort_unstable();
        let mut expected: Vec<(usize, bool)> = (10..20).map(|n| (tokens[n].1, n == 12 || n == 15)).collect();
        expected.sort_unstable();
        assert_eq!(covered, expected);
        // To the ring's end: every key from the 30th on, all absent.
        let to_end = Scanned { next: None, ..Scanned::default() };
        let covered = page(tokens[30].0).covered(&to_end, &keys).unwrap();
        assert_eq!((covered.len(), covered.iter().any(|&(_, present)| present)), (10, false));
    }

    #[test]
    fn a_returned_key_outside_the_range_or_unknown_is_a_wrong_answer() {
        let keys = keys();
        let token = key_token(&keys[0].1);
        let outside = Scanned { keys: vec![keys[0].1.clone()], next: Some(token), ..Scanned::default() };
        let stray = page(0).covered(&outside, &keys).unwrap_err();
        let why = format!(
            "a scan of keyspace {} from 0 to {token} returned {:?} (token {token})",
            KeyspaceId::DEFAULT,
            keys[0].1
        );
        assert_eq!(stray.to_string(), why);
        let unknown = Scanned { keys: vec![Bytes::from_static(b"elsewhere")], next: None, ..Scanned::default() };
        let stray = page(0).covered(&unknown, &keys).unwrap_err();
        assert!(stray.to_string().contains("to the ring's end returned b\"elsewhere\""), "{stray}");
    }
}
