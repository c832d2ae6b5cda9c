//! The on-disk record format, and what a datastore keeps per key.
//!
//! A record is, big-endian:
//!
//! ```text
//! len:u32 | crc:u32 | kind:u8 | chain:u32 | seq:u64 | key_len:u32 | key | value
//! ```
//!
//! `len` counts every byte after itself, `crc` is crc32c over every byte after itself, and the value runs to
//! the end of the record (its length is implied by `len`). Kinds: 1 value, 2 tombstone, 3 skip, 4 ack mark,
//! 5 range drop. Tombstones, skips and ack marks carry no value bytes; a range drop carries no key and exactly
//! 16 value bytes, `start_exclusive:u64 | end_inclusive:u64`. The kind's high bit (`0x80`, on values,
//! tombstones and skips only) says that the next record belongs to the same group: records appended as one
//! ([`crate::Datastore::append_group`]), which recovery keeps whole or drops whole. The length prefix lets a reader frame a record
//! before trusting it; the checksum is what lets recovery tell a torn or damaged record from a good one.
//!
//! Fuzzing: `cd crates/store/fuzz && cargo +nightly fuzz run record_decode` (or `hint_decode` for
//! [`crate::hint::decode`]); needs `cargo install cargo-fuzz`. The fuzz crate is outside the workspace, and
//! `cargo check` builds it on stable.

use bytes::Bytes;

use crate::datastore::StoreError;

pub const KEY_MAX: usize = 64 << 10;
pub const VALUE_MAX: usize = 16 << 20;

const KIND_VALUE: u8 = 1;
const KIND_TOMBSTONE: u8 = 2;
const KIND_SKIP: u8 = 3;
const KIND_ACK_MARK: u8 = 4;
const KIND_DROP_RANGE: u8 = 5;
/// The kind's high bit: the record is not the last of its group.
const MORE: u8 = 0x80;
/// A range drop's value: its two ring tokens.
const DROP_RANGE_VALUE: usize = 16;

/// `len` and `crc`.
const PREFIX: usize = 8;
/// `kind`, `chain`, `seq` and `key_len`: the part of the checksummed body that every record has.
const FIXED: usize = 1 + 4 + 8 + 4;
const LEN_MIN: usize = 4 + FIXED;
const LEN_MAX: usize = 4 + FIXED + KEY_MAX + VALUE_MAX;
/// Smallest and largest encoded record, length prefix included.
pub(crate) const FRAME_MIN: usize = 4 + LEN_MIN;
pub(crate) const FRAME_MAX: usize = 4 + LEN_MAX;

/// What a record says about its key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    Value(Bytes),
    /// A delete: replaces the key's value.
    Tombstone,
    /// Replication metadata: consumes a sequence number without changing data (the key may be empty).
    Skip,
    /// Replication metadata: an acknowledgement watermark, `seq` being the last acknowledged sequence number.
    AckMark,
    /// Takes out every key whose ring token (`meridian_core::ring::key_token`) lies in `(start_exclusive,
    /// end_inclusive]` (wrapping; equal ends mean the whole ring, as for [`crate::Datastore::scan_range`]), and
    /// every skip and ack mark of the record's chain, appended before it: a node leaving a chain discards the
    /// chain's data this way. The key is empty. The marker itself is never indexed and is kept for good.
    DropRange {
        start_exclusive: u64,
        end_inclusive: u64,
    },
}

impl Body {
    fn kind(&self) -> u8 {
        match self {
            Body::Value(_) => KIND_VALUE,
            Body::Tombstone => KIND_TOMBSTONE,
            Body::Skip => KIND_SKIP,
            Body::AckMark => KIND_ACK_MARK,
            Body::DropRange { .. } => KIND_DROP_RANGE,
        }
    }

    fn value_len(&self) -> usize {
        match self {
            Body::Value(v) => v.len(),
            Body::DropRange { .. } => DROP_RANGE_VALUE,
            Body::Tombstone | Body::Skip | Body::AckMark => 0,
        }
    }

    fn write_value(&self, out: &mut Vec<u8>) {
        match self {
            Body::Value(v) => out.extend_from_slice(v),
            Body::DropRange { start_exclusive, end_inclusive } => {
                out.extend_from_slice(&start_exclusive.to_be_bytes());
                out.extend_from_slice(&end_inclusive.to_be_bytes());
            }
            Body::Tombstone | Body::Skip | Body::AckMark => {}
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub chain: u32,
    pub seq: u64,
    pub key: Bytes,
    pub body: Body,
}

/// Latest indexed state of a key. value None = tombstone (deleted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub chain: u32,
    pub seq: u64,
    pub value: Option<Bytes>,
}

impl Record {
    /// The index entry this record sets for its key, or `None` for replication metadata, which is never indexed.
    pub fn entry(&self) -> Option<Entry> {
        let value = match &self.body {
            Body::Value(v) => Some(v.clone()),
            Body::Tombstone => None,
            Body::Skip | Body::AckMark | Body::DropRange { .. } => return None,
        };
        Some(Entry { chain: self.chain, seq: self.seq, value })
    }

    /// Length of the record's encoding.
    pub fn encoded_len(&self) -> usize {
        PREFIX + FIXED + self.key.len() + self.body.value_len()
    }

    /// Rejects keys and values over [`KEY_MAX`] / [`VALUE_MAX`], and a range drop with a key, so every store
    /// enforces the limits the log format can represent.
    pub fn check_limits(&self) -> Result<(), StoreError> {
        let key_max = if matches!(self.body, Body::DropRange { .. }) { 0 } else { KEY_MAX };
        if self.key.len() > key_max {
            return Err(StoreError::TooLarge(format!("key is {} bytes; the limit is {key_max}", self.key.len())));
        }
        let value = self.body.value_len();
        if value > VALUE_MAX {
            return Err(StoreError::TooLarge(format!("value is {value} bytes; the limit is {VALUE_MAX}")));
        }
        Ok(())
    }
}

/// Appends the encoding of `rec` to `out`, leaving `out` untouched if the record is over the limits.
pub fn encode(rec: &Record, out: &mut Vec<u8>) -> Result<(), StoreError> {
    encode_in_group(rec, false, out)
}

/// [`encode`], marking the record as followed by more of its group if `more` (see the module docs). Only
/// values, tombstones and skips belong to groups.
pub fn encode_in_group(rec: &Record, more: bool, out: &mut Vec<u8>) -> Result<(), StoreError> {
    rec.check_limits()?;
    debug_assert!(!more || rec.entry().is_some() || rec.body == Body::Skip, "{rec:?} cannot be grouped");
    let start = out.len();
    out.extend_from_slice(&[0; PREFIX]);
    out.push(rec.body.kind() | if more { MORE } else { 0 });
    out.extend_from_slice(&rec.chain.to_be_bytes());
    out.extend_from_slice(&rec.seq.to_be_bytes());
    out.extend_from_slice(&(rec.key.len() as u32).to_be_bytes());
    out.extend_from_slice(&rec.key);
    rec.body.write_value(out);
    let len = (out.len() - start - 4) as u32;
    let crc = crc32c::crc32c(&out[start + PREFIX..]);
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
    out[start + 4..start + PREFIX].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

/// A record as [`decode_framed`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Framed {
    pub rec: Record,
    /// Bytes the encoding took.
    pub len: usize,
    /// Whether the next record belongs to the same group.
    pub more: bool,
}

/// Decodes the record at the front of `buf`: `Ok(None)` if `buf` holds only part of it, otherwise the record
/// and the number of bytes it used, whatever its place in a group. A `Corrupt` error's offset is relative to
/// `buf`, i.e. 0.
pub fn decode(buf: &[u8]) -> Result<Option<(Record, usize)>, StoreError> {
    Ok(decode_framed(buf)?.map(|f| (f.rec, f.len)))
}

/// [`decode`], with the record's place in its group.
pub fn decode_framed(buf: &[u8]) -> Result<Option<Framed>, StoreError> {
    let Some(len) = buf.get(..4).map(be_u32) else {
        return Ok(None);
    };
    let len = len as usize;
    if !(LEN_MIN..=LEN_MAX).contains(&len) {
        return Err(StoreError::corrupt(0, format!("impossible record length {len}")));
    }
    let Some(frame) = buf.get(..4 + len) else {
        return Ok(None);
    };
    let body = &frame[PREFIX..];
    if crc32c::crc32c(body) != be_u32(&frame[4..PREFIX]) {
        return Err(StoreError::corrupt(0, "checksum mismatch"));
    }
    let more = body[0] & MORE != 0 && matches!(body[0] & !MORE, KIND_VALUE | KIND_TOMBSTONE | KIND_SKIP);
    let rec = parse_body(body, if more { body[0] & !MORE } else { body[0] })?;
    Ok(Some(Framed { rec, len: frame.len(), more }))
}

/// Parses a checksummed body, at least `FIXED` bytes long, of kind `kind` (its group bit taken off).
fn parse_body(body: &[u8], kind: u8) -> Result<Record, StoreError> {
    let chain = be_u32(&body[1..5]);
    let seq = u64::from_be_bytes(body[5..13].try_into().expect("8-byte slice"));
    let key_len = be_u32(&body[13..FIXED]) as usize;
    let rest = &body[FIXED..];
    if key_len > KEY_MAX || key_len > rest.len() {
        return Err(StoreError::corrupt(0, format!("impossible key length {key_len}")));
    }
    let (key, value) = rest.split_at(key_len);
    if value.len() > VALUE_MAX {
        return Err(StoreError::corrupt(0, format!("impossible value length {}", value.len())));
    }
    let body = match (kind, value.is_empty()) {
        (KIND_VALUE, _) => Body::Value(Bytes::copy_from_slice(value)),
        (KIND_TOMBSTONE, true) => Body::Tombstone,
        (KIND_SKIP, true) => Body::Skip,
        (KIND_ACK_MARK, true) => Body::AckMark,
        (KIND_TOMBSTONE | KIND_SKIP | KIND_ACK_MARK, false) => {
            return Err(StoreError::corrupt(0, "metadata record carries value bytes"))
        }
        (KIND_DROP_RANGE, _) => parse_drop_range(key, value)?,
        (kind, _) => return Err(StoreError::corrupt(0, format!("unknown record kind {kind}"))),
    };
    Ok(Record { chain, seq, key: Bytes::copy_from_slice(key), body })
}

fn parse_drop_range(key: &[u8], value: &[u8]) -> Result<Body, StoreError> {
    if !key.is_empty() {
        return Err(StoreError::corrupt(0, "range drop carries a key"));
    }
    let Ok(range) = <[u8; DROP_RANGE_VALUE]>::try_from(value) else {
        return Err(StoreError::corrupt(
            0,
            format!("range drop carries {} value bytes, not {DROP_RANGE_VALUE}", value.len()),
        ));
    };
    let (start, end) = range.split_at(8);
    let token = |b: &[u8]| u64::from_be_bytes(b.try_into().expect("8-byte slice"));
    Ok(Body::DropRange { start_exclusive: token(start), end_inclusive: token(end) })
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b.try_into().expect("4-byte slice"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::splitmix::SplitMix64;

    fn rec(seq: u64, key: &'static [u8], body: Body) -> Record {
        Record { chain: 7, seq, key: Bytes::from_static(key), body }
    }

    fn samples() -> Vec<Record> {
        vec![
            rec(1, b"alpha", Body::Value(Bytes::from_static(b"one"))),
            rec(2, b"alpha", Body::Tombstone),
            rec(3, b"", Body::Skip),
            rec(4, b"beta", Body::Value(Bytes::new())),
            rec(5, b"", Body::AckMark),
            Record { chain: u32::MAX, seq: u64::MAX, key: Bytes::from(vec![0xff; 300]), body: Body::Skip },
            rec(0, b"", Body::DropRange { start_exclusive: u64::MAX - 1, end_inclusive: 0x0102_0304_0506_0708 }),
        ]
    }

    fn encode_all(recs: &[Record]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in recs {
            encode(r, &mut out).unwrap();
        }
        out
    }

    /// Decodes records from the front of `buf` until it runs out or hits an error.
    fn decode_all(buf: &[u8]) -> (Vec<Record>, Result<usize, StoreError>) {
        let mut recs = Vec::new();
        let mut pos = 0;
        loop {
            match decode(&buf[pos..]) {
                Ok(Some((r, n))) => {
                    recs.push(r);
                    pos += n;
                }
                Ok(None) => return (recs, Ok(pos)),
                Err(e) => return (recs, Err(e)),
            }
        }
    }

    /// Re-signs a hand-edited record so the decoder gets past the checksum to the field checks.
    fn reseal(buf: &mut [u8]) {
        let crc = crc32c::crc32c(&buf[PREFIX..]);
        buf[4..PREFIX].copy_from_slice(&crc.to_be_bytes());
    }

    fn assert_corrupt(buf: &[u8], needle: &str) {
        match decode(buf) {
            Err(StoreError::Corrupt { offset: 0, reason }) => assert!(reason.contains(needle), "{reason}"),
            other => panic!("expected Corrupt({needle}), got {other:?}"),
        }
    }

    #[test]
    fn records_round_trip() {
        let recs = samples();
        let buf = encode_all(&recs);
        assert_eq!(recs.iter().map(Record::encoded_len).sum::<usize>(), buf.len());
        let (back, end) = decode_all(&buf);
        assert_eq!(back, recs);
        assert_eq!(end.unwrap(), buf.len());
    }

    #[test]
    fn limits_are_inclusive_and_enforced() {
        let mut out = vec![9];
        let max =
            Record { chain: 0, seq: 0, key: vec![1; KEY_MAX].into(), body: Body::Value(vec![2; VALUE_MAX].into()) };
        encode(&max, &mut out).unwrap();
        assert_eq!(decode(&out[1..]).unwrap().unwrap().0, max);

        out.truncate(1);
        let long_key = Record { key: vec![1; KEY_MAX + 1].into(), ..max.clone() };
        assert!(matches!(encode(&long_key, &mut out), Err(StoreError::TooLarge(_))));
        let long_value = Record { body: Body::Value(vec![2; VALUE_MAX + 1].into()), ..max };
        assert!(matches!(encode(&long_value, &mut out), Err(StoreError::TooLarge(_))));
        assert_eq!(out, [9]);
    }

    #[test]
    fn every_truncation_is_incomplete_not_an_error() {
        let buf = encode_all(&samples());
        let boundaries: Vec<usize> = {
            let mut at = vec![0];
            let mut pos = 0;
            while let Some((_, n)) = decode(&buf[pos..]).unwrap() {
                pos += n;
                at.push(pos);
            }
            at
        };
        for cut in 0..=buf.len() {
            let (recs, end) = decode_all(&buf[..cut]);
            let end = end.unwrap();
            assert_eq!(end, *boundaries.iter().rfind(|&&b| b <= cut).unwrap());
            assert_eq!(recs, samples()[..recs.len()]);
        }
    }

    #[test]
    fn random_byte_flips_never_panic_or_fake_a_record() {
        let recs = samples();
        let clean = encode_all(&recs);
        let mut rng = SplitMix64::new(3);
        for _ in 0..5000 {
            let mut buf = clean.clone();
            for _ in 0..=rng.below(3) {
                let at = rng.below(buf.len());
                buf[at] ^= 1 << rng.below(8);
            }
            let (back, _) = decode_all(&buf);
            // Decoding stops at the first damaged record; everything before it must be exactly what was written.
            for (got, want) in back.iter().zip(&recs) {
                assert_eq!(got, want);
            }
        }
    }

    #[test]
    fn garbage_never_panics() {
        let mut rng = SplitMix64::new(11);
        for _ in 0..5000 {
            let len = rng.below(64);
            let mut buf: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            if len >= 4 && rng.coin() {
                // Plausible lengths get past the framing check to the checksum and field checks.
                let claimed = (LEN_MIN + rng.below(len)) as u32;
                buf[..4].copy_from_slice(&claimed.to_be_bytes());
            }
            let _ = decode_all(&buf);
        }
    }

    #[test]
    fn checksum_mismatch_is_corrupt() {
        let mut buf = encode_all(&samples()[..1]);
        let last = buf.len() - 1;
        buf[last] ^= 0x40;
        assert_corrupt(&buf, "checksum");
    }

    #[test]
    fn impossible_lengths_are_corrupt() {
        assert_corrupt(&(LEN_MIN as u32 - 1).to_be_bytes(), "length");
        assert_corrupt(&(LEN_MAX as u32 + 1).to_be_bytes(), "length");
        let mut buf = encode_all(&samples()[..1]);
        buf[PREFIX + 13..PREFIX + FIXED].copy_from_slice(&1000u32.to_be_bytes());
        reseal(&mut buf);
        assert_corrupt(&buf, "key length");
    }

    #[test]
    fn unknown_kinds_and_metadata_values_are_corrupt() {
        let mut buf = encode_all(&samples()[..1]);
        buf[PREFIX] = 0;
        reseal(&mut buf);
        assert_corrupt(&buf, "unknown record kind 0");
        buf[PREFIX] = KIND_SKIP;
        reseal(&mut buf);
        assert_corrupt(&buf, "metadata");
    }

    #[test]
    fn range_drops_encode_their_tokens_and_nothing_else() {
        let drop = samples().pop().unwrap();
        let buf = encode_all(std::slice::from_ref(&drop));
        assert_eq!(buf.len(), FRAME_MIN + 16);
        assert_eq!(buf[PREFIX], KIND_DROP_RANGE);
        assert_eq!(buf[FRAME_MIN..], [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 1, 2, 3, 4, 5, 6, 7, 8]);
        let keyed = Record { key: Bytes::from_static(b"k"), ..drop };
        assert!(matches!(encode(&keyed, &mut Vec::new()), Err(StoreError::TooLarge(_))));
    }

    #[test]
    fn malformed_range_drops_are_corrupt() {
        // A value record re-labelled as a range drop has a key.
        let mut keyed = encode_all(&samples()[..1]);
        keyed[PREFIX] = KIND_DROP_RANGE;
        reseal(&mut keyed);
        assert_corrupt(&keyed, "carries a key");
        // Keyless records whose value is not exactly 16 bytes: an ack mark's none, and 15 or 17 bytes.
        let mut empty = encode_all(&samples()[4..5]);
        empty[PREFIX] = KIND_DROP_RANGE;
        reseal(&mut empty);
        assert_corrupt(&empty, "0 value bytes");
        for len in [15, 17] {
            let value = Body::Value(vec![0; len].into());
            let mut buf = encode_all(&[rec(1, b"", value)]);
            buf[PREFIX] = KIND_DROP_RANGE;
            reseal(&mut buf);
            assert_corrupt(&buf, &format!("{len} value bytes"));
        }
    }

    #[test]
    fn a_group_marks_every_record_but_its_last() {
        let group = &samples()[..4];
        let mut buf = Vec::new();
        for (i, r) in group.iter().enumerate() {
            encode_in_group(r, i + 1 < group.len(), &mut buf).unwrap();
        }
        let (mut pos, mut back) = (0, Vec::new());
        while let Some(f) = decode_framed(&buf[pos..]).unwrap() {
            pos += f.len;
            back.push((f.rec, f.more));
        }
        let want: Vec<(Record, bool)> = group.iter().cloned().zip([true, true, true, false]).collect();
        assert_eq!(back, want);
        assert_eq!(decode_all(&buf).0, group, "decode reads grouped records as any others");
    }

    #[test]
    fn metadata_outside_groups_with_the_group_bit_is_corrupt() {
        let mut buf = encode_all(&samples()[4..5]);
        buf[PREFIX] |= MORE;
        reseal(&mut buf);
        assert_corrupt(&buf, "unknown record kind 132");
    }

    #[test]
    fn entry_reflects_the_body() {
        let [value, tomb, skip, .., drop] = &samples()[..] else { unreachable!() };
        assert_eq!(value.entry(), Some(Entry { chain: 7, seq: 1, value: Some(Bytes::from_static(b"one")) }));
        assert_eq!(tomb.entry(), Some(Entry { chain: 7, seq: 2, value: None }));
        assert_eq!(skip.entry(), None);
        assert_eq!(drop.entry(), None);
    }
}
