//! SCAN and DBSIZE over one store, as Redis answers them: the keys of a token range in token order, filtered
//! by MATCH and TYPE, and cut after COUNT keys (or [`SCAN_REPLY_BYTES`] of them) but never inside a group of keys
//! that share a token, so the answer's `next` loses none of them (docs/resp.md, "SCAN and DBSIZE"). Which
//! member answers a page, and when, is the protocol's: the chain's is `chain/scan.rs`.

use super::read::corrupt;
use bytes::Bytes;
use meridian_core::glob::glob_match;
use meridian_core::ring::key_token;
use meridian_core::{ChainId, Scan, ScanWant, Scanned, Stored, SCAN_COUNT_MAX, SCAN_REPLY_BYTES};
use meridian_store::{Datastore, StoreError};

/// A key of the scanned range: its token, the key, and whether it passes the scan's filters.
type Found = (u64, Bytes, bool);

/// The last token an answer from `from` covers: the partition's end `end`, or nearer when the partition holds
/// about `keys` keys, many more than the `want` an answer examines, so the range holds about `2 × want` and the
/// answer reads little more than it sends. An estimate that misses costs only an answer that is cut or short.
pub(crate) fn range_end(from: u64, end: u64, partitions: u32, want: u64, keys: u64) -> u64 {
    let width = (1u128 << 64) / u128::from(partitions);
    let span = width * u128::from(2 * want) / u128::from(keys.max(1));
    u64::try_from(u128::from(from) + span.max(1) - 1).map_or(end, |last| last.min(end))
}

/// The answer to `scan` over `scan.from ..= last` from `store`, which holds `chain`'s keys (and maybe other
/// chains').
pub(crate) fn answer(store: &dyn Datastore, chain: ChainId, scan: &Scan, last: u64) -> Result<Scanned, StoreError> {
    let mut found: Vec<Found> = Vec::new();
    let mut failed = None;
    store.scan_range(scan.from.wrapping_sub(1), last, &mut |key, entry| {
        let Some(raw) = entry.value.filter(|_| entry.chain == chain.0) else { return };
        match passes(scan, &key, &raw) {
            Ok(pass) => found.push((key_token(&key), key, pass)),
            Err(e) => failed = Some(e),
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    found.sort_unstable_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    Ok(cut(found, scan.want, last))
}

/// Whether a present key with stored value `raw` is one `scan` asks for: of the kind TYPE names, matching MATCH.
fn passes(scan: &Scan, key: &[u8], raw: &Bytes) -> Result<bool, StoreError> {
    let (stored_kind, _) = Stored::header(raw).map_err(corrupt)?;
    Ok(scan.kind.is_none_or(|kind| kind == stored_kind) && scan.pattern.as_ref().is_none_or(|p| glob_match(p, key)))
}

/// Takes `found` (sorted by token) in order until COUNT keys were examined or [`SCAN_REPLY_BYTES`] of keys
/// taken, never stopping inside a token's group; `next` is the token after the last one taken, or after `last`
/// when all were.
fn cut(found: Vec<Found>, want: ScanWant, last: u64) -> Scanned {
    let (count, keep) = match want {
        ScanWant::Keys(count) => (count.clamp(1, SCAN_COUNT_MAX) as u64, true),
        ScanWant::Count => (u64::MAX, false),
    };
    let mut out = Scanned { next: last.checked_add(1), ..Scanned::default() };
    let mut bytes = 0;
    let mut iter = found.into_iter().peekable();
    while let Some((token, key, pass)) = iter.next() {
        out.examined += 1;
        if pass {
            out.matched += 1;
            bytes += key.len();
            if keep {
                out.keys.push(key);
            }
        }
        let full = out.examined >= count || (keep && bytes >= SCAN_REPLY_BYTES);
        if full && iter.peek().is_some_and(|(t, ..)| *t != token) {
            // A later token is still in the range, so this one is below `last` and has a successor.
            out.next = Some(token + 1);
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::{KeyspaceId, Kind, Stored};
    use meridian_store::{Body, MemStore, Record};

    fn scan(from: u64, want: ScanWant) -> Scan {
        Scan { keyspace: KeyspaceId::DEFAULT, from, want, pattern: None, kind: None }
    }

    fn found(items: &[(u64, &'static str, bool)]) -> Vec<Found> {
        items.iter().map(|&(t, k, pass)| (t, Bytes::from_static(k.as_bytes()), pass)).collect()
    }

    fn keys(s: &Scanned) -> Vec<&[u8]> {
        s.keys.iter().map(|k| k.as_ref()).collect()
    }

    #[test]
    fn answers_are_cut_after_count_but_never_inside_a_token() {
        let f = found(&[(5, "a", true), (7, "b", true), (7, "c", true), (7, "d", false), (9, "e", true)]);
        let two = cut(f.clone(), ScanWant::Keys(2), 100);
        assert_eq!((keys(&two), two.examined, two.matched, two.next), (vec![&b"a"[..], b"b", b"c"], 4, 3, Some(8)));
        let one = cut(f.clone(), ScanWant::Keys(1), 100);
        assert_eq!((keys(&one), one.next), (vec![&b"a"[..]], Some(6)));
        let all = cut(f.clone(), ScanWant::Keys(10), 100);
        assert_eq!((all.examined, all.next), (5, Some(101)), "the whole range: go on after its end");
        let count = cut(f, ScanWant::Count, u64::MAX);
        assert_eq!((count.keys.len(), count.matched, count.next), (0, 4, None), "the ring's end: done");
        let last = cut(found(&[(u64::MAX, "x", true), (u64::MAX, "y", true)]), ScanWant::Keys(1), u64::MAX);
        assert_eq!((last.keys.len(), last.next), (2, None), "a group at the ring's end is taken whole");
    }

    #[test]
    fn answers_are_cut_by_bytes_whatever_the_count() {
        let big = Bytes::from(vec![b'k'; SCAN_REPLY_BYTES / 2]);
        let f: Vec<Found> = (0..4).map(|t| (t, big.clone(), true)).collect();
        let s = cut(f, ScanWant::Keys(SCAN_COUNT_MAX), 50);
        assert_eq!((s.keys.len(), s.next), (2, Some(2)));
    }

    #[test]
    fn a_range_holds_about_twice_the_keys_wanted() {
        let end = u64::MAX / 4;
        assert_eq!(range_end(0, end, 4, 10, 0), end, "an empty store: the whole partition");
        assert_eq!(range_end(0, end, 4, 10, 20), end);
        assert_eq!(range_end(0, end, 4, 10, 40), end / 2);
        assert_eq!(range_end(end - 5, end, 4, 10, 40), end, "never past the partition");
        assert_eq!(range_end(7, u64::MAX, 1, 1, u64::MAX), 8, "at least one token");
    }

    fn store_with(keys: &[(&str, Kind, Option<u64>)], chain: u32) -> MemStore {
        let mut s = MemStore::new();
        for (seq, &(key, kind, expires_ms)) in keys.iter().enumerate() {
            let body = Body::Value(Stored::wrap_as(kind, b"v", expires_ms));
            let rec = Record { chain, seq: seq as u64 + 1, key: Bytes::from(key.to_string()), body };
            s.append(&rec).unwrap();
        }
        s
    }

    #[test]
    fn keys_past_their_deadline_are_kept_and_other_kinds_and_chains_skipped() {
        let mut s =
            store_with(&[("s", Kind::String, None), ("h", Kind::Hash, None), ("old", Kind::String, Some(10))], 0);
        s.append(&Record {
            chain: 1,
            seq: 1,
            key: Bytes::from_static(b"other"),
            body: Body::Value(Stored::wrap(b"v", None)),
        })
        .unwrap();
        s.append(&Record { chain: 0, seq: 9, key: Bytes::from_static(b"gone"), body: Body::Tombstone }).unwrap();
        let all = answer(&s, ChainId(0), &scan(0, ScanWant::Keys(10)), u64::MAX).unwrap();
        let mut got = keys(&all);
        got.sort();
        // "old" is past its deadline: a page over it waits before it gets here (`page_elsewhere`).
        assert_eq!((got, all.examined, all.next), (vec![&b"h"[..], b"old", b"s"], 3, None));
        let hashes = Scan { kind: Some(Kind::Hash), ..scan(0, ScanWant::Keys(10)) };
        assert_eq!(keys(&answer(&s, ChainId(0), &hashes, u64::MAX).unwrap()), vec![&b"h"[..]]);
        let matching = Scan { pattern: Some(Bytes::from_static(b"?")), ..scan(0, ScanWant::Count) };
        assert_eq!(answer(&s, ChainId(0), &matching, u64::MAX).unwrap().matched, 2);
    }

    #[test]
    fn a_range_is_scanned_in_token_order_from_its_first_token() {
        let names: Vec<String> = (0..50).map(|i| format!("key{i}")).collect();
        let s = store_with(&names.iter().map(|n| (n.as_str(), Kind::String, None)).collect::<Vec<_>>(), 0);
        let mut tokens: Vec<u64> = names.iter().map(|n| key_token(n.as_bytes())).collect();
        tokens.sort_unstable();
        let (from, last) = (tokens[10], tokens[30]);
        let got = answer(&s, ChainId(0), &scan(from, ScanWant::Keys(100)), last).unwrap();
        let got_tokens: Vec<u64> = got.keys.iter().map(|k| key_token(k)).collect();
        assert_eq!(got_tokens, tokens[10..=30], "from and last both included, in order");
        assert_eq!(got.next, Some(last + 1));
        let page = answer(&s, ChainId(0), &scan(from, ScanWant::Keys(5)), last).unwrap();
        assert_eq!((page.keys.len(), page.next), (5, Some(tokens[14] + 1)));
    }
}
