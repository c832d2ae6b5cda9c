//! The head's decisions for the commands that change several keys in one step: RENAME, RENAMENX, COPY and
//! MSETNX. Each is decided against the state of every key it names and yields one change per key it changes,
//! which a chain logs as one update (a group of records that a crash keeps whole or drops:
//! `meridian_store::Datastore::append_group`), so no replica ever holds some of the changes without the rest.

use crate::ops::outcome::{Answer, Change, Outcome, Refusal};
use bytes::Bytes;
use meridian_core::{Stored, Write, WriteOp};

/// A decision on a write of several keys: what each key it changes becomes, the first key's change first, at
/// least one entry (a skip of the write's key when it changes nothing), no key twice.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct KeysDecision {
    pub changes: Vec<(Bytes, Change)>,
    pub outcome: Outcome,
}

impl KeysDecision {
    fn applied(changes: Vec<(Bytes, Change)>) -> KeysDecision {
        KeysDecision { changes, outcome: Outcome { applied: true, existed: true, answer: Answer::Outcome } }
    }

    /// Nothing changes: the write's key consumes the sequence number.
    fn skipped(key: Bytes, applied: bool, answer: Answer) -> KeysDecision {
        KeysDecision { changes: vec![(key, Change::Skip)], outcome: Outcome { applied, existed: applied, answer } }
    }
}

/// Decides `write` (one that [`Write::is_multi_key`]) against `current`, the state of each of [`Write::keys`] in that
/// order, at wall-clock time `now_ms`: a key past its deadline counts as absent, as every read treats it.
pub(crate) fn decide_keys(write: Write, current: Vec<Option<Stored>>, now_ms: u64) -> KeysDecision {
    debug_assert_eq!(current.len(), write.keys().count(), "{write:?} was decided without every key's state");
    let live: Vec<Option<Stored>> =
        current.into_iter().map(|s| s.filter(|s| s.expires_ms.is_none_or(|at| at > now_ms))).collect();
    let present = |i: usize| live.get(i).is_some_and(Option::is_some);
    let moved = |s: &Stored| Change::Put(Stored::wrap_as(s.kind, &s.data, s.expires_ms));
    let key = write.key;
    match write.op {
        WriteOp::Rename { to, replace } => match &live[0] {
            None => KeysDecision::skipped(key, false, Answer::Refused(Refusal::NoSuchKey)),
            // Redis answers a rename onto itself as done (RENAME) or not (RENAMENX), and changes nothing.
            Some(_) if to == key => KeysDecision::skipped(key, replace, Answer::Outcome),
            Some(_) if !replace && present(1) => KeysDecision::skipped(key, false, Answer::Outcome),
            Some(src) => KeysDecision::applied(vec![(key, Change::Delete), (to, moved(src))]),
        },
        WriteOp::Copy { to, replace } => match &live[0] {
            Some(src) if to != key && (replace || !present(1)) => KeysDecision::applied(vec![(to, moved(src))]),
            _ => KeysDecision::skipped(key, false, Answer::Outcome),
        },
        WriteOp::SetAllAbsent(pairs) if (0..pairs.len()).any(present) => {
            KeysDecision::skipped(key, false, Answer::Outcome)
        }
        WriteOp::SetAllAbsent(pairs) => {
            KeysDecision::applied(pairs.into_iter().map(|(k, v)| (k, Change::Put(Stored::wrap(&v, None)))).collect())
        }
        other => unreachable!("{other:?} is decided by decide"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::{KeyspaceId, Kind};

    fn write(key: &'static str, op: WriteOp) -> Write {
        Write::new(KeyspaceId::DEFAULT, Bytes::from_static(key.as_bytes()), op)
    }

    fn value(data: &'static str, expires_ms: Option<u64>) -> Option<Stored> {
        Some(Stored { data: Bytes::from_static(data.as_bytes()), expires_ms, kind: Kind::String })
    }

    fn rename(replace: bool) -> Write {
        write("a", WriteOp::Rename { to: Bytes::from_static(b"b"), replace })
    }

    fn changed(d: &KeysDecision) -> Vec<(&str, &Change)> {
        d.changes.iter().map(|(k, c)| (std::str::from_utf8(k).unwrap(), c)).collect()
    }

    #[test]
    fn rename_moves_the_value_and_its_deadline_in_one_decision() {
        let d = decide_keys(rename(true), vec![value("v", Some(90)), value("old", None)], 10);
        let moved = Change::Put(Stored::wrap(b"v", Some(90)));
        assert_eq!(changed(&d), [("a", &Change::Delete), ("b", &moved)]);
        assert!(d.outcome.applied);
        let nx = decide_keys(rename(false), vec![value("v", None), value("old", None)], 10);
        assert_eq!((changed(&nx), nx.outcome.applied), (vec![("a", &Change::Skip)], false));
        let nx = decide_keys(rename(false), vec![value("v", None), value("old", Some(5))], 10);
        assert!(nx.outcome.applied, "a destination past its deadline is absent");
    }

    #[test]
    fn rename_of_an_absent_or_expired_key_is_refused_and_onto_itself_changes_nothing() {
        for gone in [None, value("v", Some(10))] {
            let d = decide_keys(rename(true), vec![gone, value("b", None)], 10);
            assert_eq!(d.outcome.answer, Answer::Refused(Refusal::NoSuchKey));
            assert_eq!(changed(&d), [("a", &Change::Skip)]);
        }
        for replace in [true, false] {
            let itself = write("a", WriteOp::Rename { to: Bytes::from_static(b"a"), replace });
            let d = decide_keys(itself, vec![value("v", None), value("v", None)], 10);
            assert_eq!((changed(&d), d.outcome.applied), (vec![("a", &Change::Skip)], replace));
        }
    }

    #[test]
    fn copy_writes_only_the_destination() {
        let copy = |replace| write("a", WriteOp::Copy { to: Bytes::from_static(b"b"), replace });
        let d = decide_keys(copy(false), vec![value("v", None), None], 10);
        assert_eq!(changed(&d), [("b", &Change::Put(Stored::wrap(b"v", None)))]);
        assert!(!decide_keys(copy(false), vec![value("v", None), value("w", None)], 10).outcome.applied);
        assert!(decide_keys(copy(true), vec![value("v", None), value("w", None)], 10).outcome.applied);
        assert!(!decide_keys(copy(true), vec![None, value("w", None)], 10).outcome.applied);
    }

    #[test]
    fn msetnx_sets_every_key_or_none() {
        let pairs = vec![(Bytes::from_static(b"a"), Bytes::from_static(b"1")), ("b".into(), "2".into())];
        let msetnx = write("a", WriteOp::SetAllAbsent(pairs));
        let d = decide_keys(msetnx.clone(), vec![None, value("x", Some(5))], 10);
        let put = |v: &[u8]| Change::Put(Stored::wrap(v, None));
        assert_eq!(changed(&d), [("a", &put(b"1")), ("b", &put(b"2"))]);
        let d = decide_keys(msetnx, vec![None, value("x", None)], 10);
        assert_eq!((changed(&d), d.outcome.applied), (vec![("a", &Change::Skip)], false));
    }
}
