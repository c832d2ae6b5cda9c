//! The hint file format: a checksummed summary of one sealed log segment, so a restart can rebuild the index
//! without reading the segment (Bitcask's hint files; FAWN-DS rebuilt from a checkpoint instead).
//!
//! A hint lists the segment's index entries — the records that were the latest of their key when the hint was
//! written —, the segment's latest ack mark of each chain and every range drop in it, plus the segment's length
//! and record count. Layout, big-endian:
//!
//! ```text
//! magic "MRDNHNT2" | segment_len:u64 | records:u64 | n_acks:u32 | n_drops:u32 | n_entries:u32
//! n_acks    × (chain:u32 | seq:u64 | offset:u32 | len:u32)
//! n_drops   × (chain:u32 | start_exclusive:u64 | end_inclusive:u64 | offset:u32 | len:u32)
//! n_entries × (token_prefix:u48 | offset:u32 | len:u32 | flags:u8)
//! crc:u32 (crc32c of everything before it)
//! ```
//!
//! `token_prefix` is the top 48 bits of the key's ring token. Flags: bit 0 tombstone; bit 1 "shared prefix":
//! when the hint was written another indexed key had the same prefix, so whoever loads the entry must read the
//! key from the segment to tell the two apart. Every list is sorted by offset, and a loader applies the three in
//! offset order, since a range drop takes out what precedes it (in earlier segments, and in this one up to its
//! offset) and nothing that follows it. Decoding checks everything a loader relies on (checksum, counts,
//! lengths, ordering, bounds), so a damaged hint is rejected rather than trusted.
//!
//! Version 1 (`MRDNHNT1`) had no drops; it is rejected like a damaged hint, so the first open after an upgrade
//! scans those segments once and rewrites their hints.

use crate::datastore::StoreError;
use crate::record::{FRAME_MAX, FRAME_MIN};

/// Bits of the ring token a hint (and the index) keeps.
pub const TOKEN_PREFIX_BITS: u32 = 48;

/// A hint file's first bytes, which name its version.
pub const MAGIC: &[u8; 8] = b"MRDNHNT2";
const HEADER: usize = 8 + 8 + 8 + 4 + 4 + 4;
const ACK_SIZE: usize = 4 + 8 + 4 + 4;
const DROP_SIZE: usize = 4 + 8 + 8 + 4 + 4;
const ENTRY_SIZE: usize = 6 + 4 + 4 + 1;
const CRC_SIZE: usize = 4;
const FLAG_TOMBSTONE: u8 = 1;
const FLAG_SHARED: u8 = 2;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hint {
    pub segment_len: u64,
    pub records: u64,
    /// The segment's last ack mark of each chain, by offset.
    pub acks: Vec<HintAck>,
    /// Every range drop in the segment, by offset.
    pub drops: Vec<HintDrop>,
    /// By offset.
    pub entries: Vec<HintEntry>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HintAck {
    pub chain: u32,
    pub seq: u64,
    pub offset: u32,
    pub len: u32,
}

/// A [`crate::Body::DropRange`] record: what it drops, and where it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HintDrop {
    pub chain: u32,
    pub start_exclusive: u64,
    pub end_inclusive: u64,
    pub offset: u32,
    pub len: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HintEntry {
    /// The key's ring token shifted right by `64 - TOKEN_PREFIX_BITS`.
    pub token_prefix: u64,
    pub offset: u32,
    pub len: u32,
    pub tombstone: bool,
    pub shared_prefix: bool,
}

pub fn encode(hint: &Hint) -> Vec<u8> {
    let lists = hint.acks.len() * ACK_SIZE + hint.drops.len() * DROP_SIZE + hint.entries.len() * ENTRY_SIZE;
    let mut out = Vec::with_capacity(HEADER + lists + CRC_SIZE);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&hint.segment_len.to_be_bytes());
    out.extend_from_slice(&hint.records.to_be_bytes());
    out.extend_from_slice(&(hint.acks.len() as u32).to_be_bytes());
    out.extend_from_slice(&(hint.drops.len() as u32).to_be_bytes());
    out.extend_from_slice(&(hint.entries.len() as u32).to_be_bytes());
    for a in &hint.acks {
        out.extend_from_slice(&a.chain.to_be_bytes());
        out.extend_from_slice(&a.seq.to_be_bytes());
        out.extend_from_slice(&a.offset.to_be_bytes());
        out.extend_from_slice(&a.len.to_be_bytes());
    }
    for d in &hint.drops {
        out.extend_from_slice(&d.chain.to_be_bytes());
        out.extend_from_slice(&d.start_exclusive.to_be_bytes());
        out.extend_from_slice(&d.end_inclusive.to_be_bytes());
        out.extend_from_slice(&d.offset.to_be_bytes());
        out.extend_from_slice(&d.len.to_be_bytes());
    }
    for e in &hint.entries {
        out.extend_from_slice(&e.token_prefix.to_be_bytes()[2..]);
        out.extend_from_slice(&e.offset.to_be_bytes());
        out.extend_from_slice(&e.len.to_be_bytes());
        out.push((u8::from(e.tombstone) * FLAG_TOMBSTONE) | (u8::from(e.shared_prefix) * FLAG_SHARED));
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// Decodes and validates a whole hint file. A `Corrupt` error's offset is where in `buf` the problem is.
pub fn decode(buf: &[u8]) -> Result<Hint, StoreError> {
    if buf.len() < HEADER + CRC_SIZE || &buf[..8] != MAGIC {
        return Err(StoreError::corrupt(0, "not a hint file"));
    }
    let (body, crc) = buf.split_at(buf.len() - CRC_SIZE);
    if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().expect("4-byte slice")) {
        return Err(StoreError::corrupt(body.len() as u64, "hint checksum mismatch"));
    }
    let mut r = Reader { buf: body, at: 8 };
    let (segment_len, records) = (r.u64(), r.u64());
    let (n_acks, n_drops, n_entries) = (r.u32() as usize, r.u32() as usize, r.u32() as usize);
    let lists = [(n_acks, ACK_SIZE), (n_drops, DROP_SIZE), (n_entries, ENTRY_SIZE)];
    let want = lists.iter().try_fold(HEADER, |sum, &(n, size)| sum.checked_add(n.checked_mul(size)?));
    if want != Some(body.len()) {
        return Err(StoreError::corrupt(HEADER as u64, "hint counts do not match its length"));
    }
    let acks: Vec<HintAck> =
        (0..n_acks).map(|_| HintAck { chain: r.u32(), seq: r.u64(), offset: r.u32(), len: r.u32() }).collect();
    let drops: Vec<HintDrop> = (0..n_drops)
        .map(|_| HintDrop {
            chain: r.u32(),
            start_exclusive: r.u64(),
            end_inclusive: r.u64(),
            offset: r.u32(),
            len: r.u32(),
        })
        .collect();
    let entries = (0..n_entries).map(|_| r.entry()).collect::<Result<Vec<_>, _>>()?;
    let hint = Hint { segment_len, records, acks, drops, entries };
    check_spans(&hint, hint.acks.iter().map(|a| (a.offset, a.len)))?;
    check_spans(&hint, hint.drops.iter().map(|d| (d.offset, d.len)))?;
    check_spans(&hint, hint.entries.iter().map(|e| (e.offset, e.len)))?;
    Ok(hint)
}

/// Each record span must have a possible length, lie inside the segment, and follow the previous one.
fn check_spans(hint: &Hint, spans: impl Iterator<Item = (u32, u32)>) -> Result<(), StoreError> {
    let mut next_free = 0;
    for (offset, len) in spans {
        let end = u64::from(offset) + u64::from(len);
        let possible = (FRAME_MIN..=FRAME_MAX).contains(&(len as usize));
        if !possible || u64::from(offset) < next_free || end > hint.segment_len {
            return Err(StoreError::corrupt(0, format!("hint lists an impossible record at {offset}+{len}")));
        }
        next_free = end;
    }
    Ok(())
}

/// Reads fixed-width fields from a buffer whose length the caller has already checked.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let out = self.buf[self.at..self.at + N].try_into().expect("length checked by the caller");
        self.at += N;
        out
    }

    fn u32(&mut self) -> u32 {
        u32::from_be_bytes(self.take())
    }

    fn u64(&mut self) -> u64 {
        u64::from_be_bytes(self.take())
    }

    fn entry(&mut self) -> Result<HintEntry, StoreError> {
        let at = self.at as u64;
        let mut prefix = [0; 8];
        prefix[2..].copy_from_slice(&self.take::<6>());
        let (offset, len, [flags]) = (self.u32(), self.u32(), self.take::<1>());
        if flags & !(FLAG_TOMBSTONE | FLAG_SHARED) != 0 {
            return Err(StoreError::corrupt(at, format!("unknown hint entry flags {flags:#x}")));
        }
        Ok(HintEntry {
            token_prefix: u64::from_be_bytes(prefix),
            offset,
            len,
            tombstone: flags & FLAG_TOMBSTONE != 0,
            shared_prefix: flags & FLAG_SHARED != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::splitmix::SplitMix64;

    fn sample() -> Hint {
        Hint {
            segment_len: 1000,
            records: 9,
            acks: vec![
                HintAck { chain: 2, seq: 40, offset: 0, len: 25 },
                HintAck { chain: 3, seq: 7, offset: 25, len: 25 },
            ],
            drops: vec![
                HintDrop { chain: 3, start_exclusive: u64::MAX, end_inclusive: 9, offset: 176, len: 41 },
                HintDrop { chain: 4, start_exclusive: 5, end_inclusive: 5, offset: 217, len: 41 },
            ],
            entries: vec![
                HintEntry {
                    token_prefix: 0xffff_ffff_ffff,
                    offset: 50,
                    len: 100,
                    tombstone: false,
                    shared_prefix: true,
                },
                HintEntry { token_prefix: 0, offset: 150, len: 26, tombstone: true, shared_prefix: false },
                HintEntry { token_prefix: 77, offset: 900, len: 100, tombstone: false, shared_prefix: false },
            ],
        }
    }

    fn assert_corrupt(buf: &[u8], needle: &str) {
        match decode(buf) {
            Err(StoreError::Corrupt { reason, .. }) => assert!(reason.contains(needle), "{reason}"),
            other => panic!("expected Corrupt({needle}), got {other:?}"),
        }
    }

    /// Rewrites the trailing checksum after a hand edit, so decoding gets past it to the field checks.
    fn reseal(buf: &mut Vec<u8>) {
        buf.truncate(buf.len() - CRC_SIZE);
        let crc = crc32c::crc32c(buf);
        buf.extend_from_slice(&crc.to_be_bytes());
    }

    #[test]
    fn hints_round_trip() {
        assert_eq!(decode(&encode(&sample())).unwrap(), sample());
        assert_eq!(decode(&encode(&Hint::default())).unwrap(), Hint::default());
    }

    #[test]
    fn every_truncation_and_flip_is_rejected() {
        let buf = encode(&sample());
        for cut in 0..buf.len() {
            assert!(decode(&buf[..cut]).is_err(), "cut at {cut}");
        }
        let mut rng = SplitMix64::new(4);
        for _ in 0..2000 {
            let mut damaged = buf.clone();
            let at = rng.below(buf.len());
            damaged[at] ^= 1 << rng.below(8);
            assert!(decode(&damaged).is_err());
        }
    }

    #[test]
    fn impossible_contents_are_rejected_even_when_checksummed() {
        let mut past_end = sample();
        past_end.entries[2].offset = 901;
        assert_corrupt(&encode(&past_end), "impossible record");
        let mut overlapping = sample();
        overlapping.entries[1].offset = 149;
        assert_corrupt(&encode(&overlapping), "impossible record");
        let mut tiny = sample();
        tiny.acks[0].len = 3;
        assert_corrupt(&encode(&tiny), "impossible record");
        let mut unordered = sample();
        unordered.drops.swap(0, 1);
        assert_corrupt(&encode(&unordered), "impossible record");

        let mut flags = encode(&sample());
        let last_flag = flags.len() - CRC_SIZE - 1;
        flags[last_flag] = 4;
        reseal(&mut flags);
        assert_corrupt(&flags, "flags");
        for count in [31, 35] {
            let mut counts = encode(&sample());
            counts[count] += 1;
            reseal(&mut counts);
            assert_corrupt(&counts, "counts");
        }
        assert_corrupt(b"MRDNHNT0 and some more bytes to pass the length check", "not a hint");
        let mut version1 = encode(&sample());
        version1[..8].copy_from_slice(b"MRDNHNT1");
        reseal(&mut version1);
        assert_corrupt(&version1, "not a hint");
    }

    #[test]
    fn garbage_never_panics() {
        let mut rng = SplitMix64::new(8);
        for _ in 0..5000 {
            let len = rng.below(120);
            let mut buf: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            if len >= HEADER + CRC_SIZE && rng.coin() {
                buf[..8].copy_from_slice(MAGIC);
                reseal(&mut buf);
            }
            let _ = decode(&buf);
        }
    }
}
