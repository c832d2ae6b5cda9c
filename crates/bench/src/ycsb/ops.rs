//! YCSB's operations as Redis commands, and what their replies mean.
//!
//! A record of one field is a plain string: insert and update are `SET key value`, read is `GET key`. A record
//! of more fields is a hash, as in go-ycsb's Redis binding with its `hash` datatype: insert is one `HSET key
//! field0 v0 field1 v1 …`, update an `HSET` of one field (of every field with `writeallfields`), read an
//! `HGETALL key` (an `HMGET key fieldN` of one field without `readallfields`). A read-modify-write is a read
//! and then, once it is answered, an update of the same record, timed as one operation.

use super::distribution::{KeyChooser, Mix, OpKind, Rng};
use super::keys::{key_name, KeySpace};
use super::protocol::{Protocol, Reply};
use super::resp::encode;
use super::workload::Workload;
use std::sync::Arc;

/// Random printable bytes that values are cut from: fresh bytes for every value would cost the load
/// generator more CPU than the server spends storing them.
const POOL_BYTES: usize = 1 << 16;

/// YCSB's name for field `f` of a record.
fn field_name(f: usize) -> String {
    format!("field{f}")
}

/// Which command of an operation a reply answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stage {
    Read,
    Write,
}

/// How a command went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    Done,
    /// A read found no such record.
    Missing,
    Failed(String),
}

/// One connection's source of operations and the commands that carry them.
pub(super) struct Ops {
    workload: Arc<Workload>,
    /// How string records are read and written; hashes are RESP's only.
    protocol: Protocol,
    keys: Arc<KeySpace>,
    mix: Mix,
    chooser: KeyChooser,
    rng: Rng,
    pool: Vec<u8>,
}

impl Ops {
    /// `chooser` is cloned from one built per phase, as building the latest distribution sums its zeta.
    pub(super) fn new(
        workload: Arc<Workload>,
        protocol: Protocol,
        keys: Arc<KeySpace>,
        chooser: KeyChooser,
        seed: u64,
    ) -> Ops {
        let mut rng = Rng::new(seed);
        let len = POOL_BYTES.max(2 * workload.field_length);
        let pool = (0..len).map(|_| b' ' + 1 + rng.below(94) as u8).collect();
        Ops { mix: Mix::new(&workload), workload, protocol, keys, chooser, rng, pool }
    }

    /// Draws the next operation, appends its first command to `out`, and returns it with its record.
    pub(super) fn next(&mut self, out: &mut Vec<u8>) -> (OpKind, u64) {
        let op = self.mix.next(&mut self.rng);
        let record = match op {
            OpKind::Insert => self.keys.claim(),
            _ => self.chooser.next(&mut self.rng, self.keys.last()),
        };
        match op {
            OpKind::Insert => self.write(out, record, true),
            OpKind::Update => self.write(out, record, self.workload.write_all_fields),
            OpKind::Read | OpKind::ReadModifyWrite => self.read(out, record),
        }
        (op, record)
    }

    /// Appends the update that completes a read-modify-write of `record`.
    pub(super) fn modify(&mut self, out: &mut Vec<u8>, record: u64) {
        self.write(out, record, self.workload.write_all_fields);
    }

    fn read(&mut self, out: &mut Vec<u8>, record: u64) {
        let key = key_name(record, self.workload.ordered_inserts);
        if !self.workload.is_hash() {
            self.protocol.get(out, key.as_bytes());
        } else if self.workload.read_all_fields {
            encode(out, &[b"HGETALL", key.as_bytes()]);
        } else {
            let field = field_name(self.rng.below(self.workload.field_count as u64) as usize);
            encode(out, &[b"HMGET", key.as_bytes(), field.as_bytes()]);
        }
    }

    fn write(&mut self, out: &mut Vec<u8>, record: u64, all_fields: bool) {
        let key = key_name(record, self.workload.ordered_inserts);
        if !self.workload.is_hash() {
            let value = self.value();
            self.protocol.set(out, key.as_bytes(), &self.pool[value]);
            return;
        }
        let fields: Vec<usize> = if all_fields {
            (0..self.workload.field_count).collect()
        } else {
            vec![self.rng.below(self.workload.field_count as u64) as usize]
        };
        let names: Vec<String> = fields.iter().map(|&f| field_name(f)).collect();
        let values: Vec<_> = fields.iter().map(|_| self.value()).collect();
        let mut args: Vec<&[u8]> = vec![b"HSET", key.as_bytes()];
        for (name, value) in names.iter().zip(values) {
            args.extend([name.as_bytes(), &self.pool[value]]);
        }
        encode(out, &args);
    }

    /// Where in the pool the next value lies.
    fn value(&mut self) -> std::ops::Range<usize> {
        let len = self.workload.field_length;
        let start = self.rng.below((self.pool.len() - len + 1) as u64) as usize;
        start..start + len
    }

    /// What `reply` to `stage` of an operation means: a read of a string wants a bulk string, of a hash an
    /// array; a write of a string wants `+OK`, of a hash the number of new fields.
    pub(super) fn outcome(&self, stage: Stage, reply: &Reply) -> Outcome {
        let hash = self.workload.is_hash();
        match (stage, reply) {
            (_, Reply::Error(e)) => Outcome::Failed(e.clone()),
            (Stage::Read, Reply::Bulk(Some(_))) if !hash => Outcome::Done,
            (Stage::Read, Reply::Bulk(None)) if !hash => Outcome::Missing,
            (Stage::Read, Reply::Array(Some((len, nils)))) if hash => {
                if nils < len {
                    Outcome::Done
                } else {
                    Outcome::Missing
                }
            }
            (Stage::Write, Reply::Simple) if !hash => Outcome::Done,
            (Stage::Write, Reply::Integer) if hash => Outcome::Done,
            _ => Outcome::Failed(format!("unexpected reply to a {stage:?}: {reply:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ycsb::resp::parse;

    /// The arguments of the commands in `out`, as text.
    fn commands(mut out: &[u8]) -> Vec<Vec<String>> {
        let mut commands = Vec::new();
        let line = |buf: &mut &[u8]| {
            let end = buf.windows(2).position(|w| w == b"\r\n").unwrap();
            let n: usize = std::str::from_utf8(&buf[1..end]).unwrap().parse().unwrap();
            *buf = &buf[end + 2..];
            n
        };
        while !out.is_empty() {
            let args = (0..line(&mut out))
                .map(|_| {
                    let len = line(&mut out);
                    let arg = String::from_utf8(out[..len].to_vec()).unwrap();
                    out = &out[len + 2..];
                    arg
                })
                .collect();
            commands.push(args);
        }
        commands
    }

    fn ops_for(workload: &Workload, keys: &Arc<KeySpace>) -> Vec<Vec<String>> {
        let chooser = KeyChooser::new(workload, 0);
        let mut ops = Ops::new(Arc::new(workload.clone()), Protocol::Resp, keys.clone(), chooser, 1);
        let mut out = Vec::new();
        let (op, record) = ops.next(&mut out);
        assert_eq!(parse(&out).unwrap().unwrap().1, out.len(), "one whole command");
        if op == OpKind::ReadModifyWrite {
            ops.modify(&mut out, record);
        }
        commands(&out)
    }

    #[test]
    fn strings_for_one_field_hashes_for_more() {
        let keys = Arc::new(KeySpace::new(1000));
        let mut w = Workload::preset('f').unwrap();
        w.proportions.read = 0.0;
        w.field_length = 7;
        let cmds = ops_for(&w, &keys);
        assert_eq!((cmds[0][0].as_str(), cmds[1][0].as_str()), ("GET", "SET"), "{cmds:?}");
        assert_eq!(cmds[0][1], cmds[1][1], "a read-modify-write writes the record it read");
        assert!(cmds[0][1].starts_with("user") && cmds[1][2].len() == 7);

        w.apply("fieldcount=4").unwrap();
        let cmds = ops_for(&w, &keys);
        assert_eq!((cmds[0].len(), cmds[1][0].as_str(), cmds[1].len()), (2, "HSET", 4), "HGETALL, one field: {cmds:?}");
        w.apply("readallfields=false").unwrap();
        w.apply("writeallfields=true").unwrap();
        let cmds = ops_for(&w, &keys);
        assert_eq!((cmds[0][0].as_str(), cmds[0].len(), cmds[1].len()), ("HMGET", 3, 10), "{cmds:?}");

        let load = Workload::preset('a').unwrap().for_load();
        let cmds = ops_for(&Workload { field_count: 3, ..load }, &Arc::new(KeySpace::new(0)));
        assert_eq!(cmds[0][..3], ["HSET", "user6284781860667377211", "field0"], "the load inserts record 0 first");
        assert_eq!(cmds[0].len(), 8);
    }

    #[test]
    fn replies_are_judged_by_the_record_type() {
        let keys = Arc::new(KeySpace::new(1));
        let string = Workload::preset('a').unwrap();
        let hash = Workload { field_count: 2, ..string.clone() };
        let ops = |w: &Workload| Ops::new(Arc::new(w.clone()), Protocol::Resp, keys.clone(), KeyChooser::new(w, 0), 1);
        let (s, h) = (ops(&string), ops(&hash));
        assert_eq!(s.outcome(Stage::Read, &Reply::Bulk(Some(100))), Outcome::Done);
        assert_eq!(s.outcome(Stage::Read, &Reply::Bulk(None)), Outcome::Missing);
        assert_eq!(s.outcome(Stage::Write, &Reply::Simple), Outcome::Done);
        assert!(matches!(s.outcome(Stage::Write, &Reply::Integer), Outcome::Failed(_)));
        assert_eq!(h.outcome(Stage::Read, &Reply::Array(Some((4, 0)))), Outcome::Done);
        assert_eq!(h.outcome(Stage::Read, &Reply::Array(Some((0, 0)))), Outcome::Missing);
        assert_eq!(h.outcome(Stage::Read, &Reply::Array(Some((1, 1)))), Outcome::Missing);
        assert_eq!(h.outcome(Stage::Write, &Reply::Integer), Outcome::Done);
        assert_eq!(h.outcome(Stage::Write, &Reply::Error("WRONGTYPE".into())), Outcome::Failed("WRONGTYPE".into()));
    }
}
