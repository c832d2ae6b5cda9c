//! The frame format of the Raft log file, and the scan that tells a torn tail from corruption.
//!
//! A frame is, big-endian (the same shape as `meridian_store::record` and `meridian_core::wire`):
//!
//! ```text
//! len:u32 | crc:u32 | kind:u8 | payload
//! ```
//!
//! `len` counts every byte after itself and `crc` is crc32c over `kind | payload`. The length lets the scan
//! frame a record before trusting it; the checksum tells a torn or damaged frame from a good one.
//!
//! A batch frame carries records nested in its payload as `kind:u8 | len:u32 | payload`, without checksums of
//! their own (the batch's covers them), so that nothing inside a frame looks like a frame to the scan below.
//!
//! A crash can only damage what was appended after the last fsync, and only at the end of the file. So a bad
//! frame (incomplete, impossible length or checksum mismatch) is a torn tail, to be cut off, unless a good
//! frame starts anywhere after it: good data after bad data cannot come from a torn write, and cutting it away
//! could drop synced entries, so the scan reports corruption instead. The search is byte by byte, because the
//! damage may be in a length field. It assumes the application's bytes (commands and snapshot state, which
//! payloads carry) never embed a whole valid frame; the log's own nested records carry no checksum for that
//! reason.

/// `len` and `crc`.
const PREFIX: usize = 8;
/// Largest `len`: a snapshot of the manager's state must fit, and so must a corrupt length never make the
/// scan allocate or read absurd amounts.
pub(super) const LEN_MAX: usize = 64 << 20;

/// A checksummed frame found by [`scan`]: its kind and payload, borrowed from the scanned buffer.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Frame<'a> {
    pub kind: u8,
    pub payload: &'a [u8],
    /// Offset of the frame in the scanned buffer, for error messages.
    pub offset: u64,
}

impl Frame<'_> {
    fn encoded_len(&self) -> usize {
        PREFIX + 1 + self.payload.len()
    }
}

/// How a scan ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Tail {
    /// Every byte belonged to a good frame.
    Clean,
    /// The bytes from `at` on are a torn write: cut them off.
    Torn { at: u64, reason: String },
    /// A bad frame at `at` is followed by a good one: damage in the middle, outside the crash model.
    Corrupt { at: u64, reason: String },
}

/// Appends one record, to be nested in a batch frame, to `out`.
pub(super) fn encode_nested(kind: u8, payload: &[u8], out: &mut Vec<u8>) {
    out.push(kind);
    out.extend_from_slice(&u32::try_from(payload.len()).expect("bounded by LEN_MAX").to_be_bytes());
    out.extend_from_slice(payload);
}

/// The records nested in a batch frame's payload (their offsets are the batch's).
pub(super) fn parse_nested<'a>(batch: &Frame<'a>) -> Result<Vec<Frame<'a>>, String> {
    let mut rest = batch.payload;
    let mut records = Vec::new();
    while let Some((&kind, after)) = rest.split_first() {
        let len = after.get(..4).map(|b| u32::from_be_bytes(b.try_into().expect("4-byte slice")) as usize);
        let payload = len.and_then(|len| after.get(4..4 + len)).ok_or("batch ends inside a record")?;
        records.push(Frame { kind, payload, offset: batch.offset });
        rest = &after[4 + payload.len()..];
    }
    Ok(records)
}

/// Appends one frame to `out`.
pub(super) fn encode(kind: u8, payload: &[u8], out: &mut Vec<u8>) {
    let len = 4 + 1 + payload.len();
    assert!(len <= LEN_MAX, "raft log frame of {len} bytes exceeds {LEN_MAX}; callers bound what they write");
    let mut crc = crc32c::crc32c(&[kind]);
    crc = crc32c::crc32c_append(crc, payload);
    out.extend_from_slice(&(len as u32).to_be_bytes());
    out.extend_from_slice(&crc.to_be_bytes());
    out.push(kind);
    out.extend_from_slice(payload);
}

/// The frames of `buf` up to its first bad one, and how the scan ended.
pub(super) fn scan(buf: &[u8]) -> (Vec<Frame<'_>>, Tail) {
    let mut frames = Vec::new();
    let mut pos = 0;
    loop {
        let at = pos as u64;
        match decode(&buf[pos..]) {
            Ok(Some(frame)) => {
                pos += frame.encoded_len();
                frames.push(Frame { offset: at, ..frame });
            }
            Ok(None) if pos == buf.len() => return (frames, Tail::Clean),
            Ok(None) => return (frames, bad_frame(&buf[pos..], at, "incomplete frame".into())),
            Err(reason) => return (frames, bad_frame(&buf[pos..], at, reason)),
        }
    }
}

/// Judges the bad frame at the front of `rest` (at offset `at`): torn unless a good frame starts after it.
fn bad_frame(rest: &[u8], at: u64, reason: String) -> Tail {
    if (1..rest.len()).any(|i| matches!(decode(&rest[i..]), Ok(Some(_)))) {
        Tail::Corrupt { at, reason }
    } else {
        Tail::Torn { at, reason }
    }
}

/// Decodes the frame at the front of `buf` (its offset left 0): `Ok(None)` if `buf` holds only part of one.
fn decode(buf: &[u8]) -> Result<Option<Frame<'_>>, String> {
    let Some(len) = declared_len(buf) else {
        return Ok(None);
    };
    if !(5..=LEN_MAX).contains(&len) {
        return Err(format!("impossible frame length {len}"));
    }
    let Some(frame) = buf.get(..4 + len) else {
        return Ok(None);
    };
    let body = &frame[PREFIX..];
    if crc32c::crc32c(body) != u32::from_be_bytes(frame[4..PREFIX].try_into().expect("4-byte slice")) {
        return Err("checksum mismatch".into());
    }
    Ok(Some(Frame { kind: body[0], payload: &body[1..], offset: 0 }))
}

fn declared_len(buf: &[u8]) -> Option<usize> {
    Some(u32::from_be_bytes(buf.get(..4)?.try_into().expect("4-byte slice")) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three_frames() -> (Vec<u8>, [usize; 3]) {
        let mut buf = Vec::new();
        let mut starts = [0; 3];
        for (i, payload) in [&b"first"[..], b"", b"third frame"].into_iter().enumerate() {
            starts[i] = buf.len();
            encode(i as u8 + 1, payload, &mut buf);
        }
        (buf, starts)
    }

    #[test]
    fn frames_round_trip() {
        let (buf, starts) = three_frames();
        let (frames, tail) = scan(&buf);
        assert_eq!(tail, Tail::Clean);
        let got: Vec<_> = frames.iter().map(|f| (f.kind, f.payload, f.offset as usize)).collect();
        assert_eq!(
            got,
            vec![(1, &b"first"[..], starts[0]), (2, &b""[..], starts[1]), (3, &b"third frame"[..], starts[2])]
        );
    }

    #[test]
    fn every_cut_of_the_last_frame_is_a_torn_tail() {
        let (buf, starts) = three_frames();
        for cut in starts[2] + 1..buf.len() {
            let (frames, tail) = scan(&buf[..cut]);
            assert_eq!(frames.len(), 2, "cut at {cut}");
            assert!(matches!(tail, Tail::Torn { at, .. } if at == starts[2] as u64), "cut at {cut}: {tail:?}");
        }
    }

    #[test]
    fn nested_records_round_trip_and_a_torn_batch_is_torn() {
        let mut nested = Vec::new();
        for (kind, payload) in [(1, &b"one"[..]), (2, b""), (3, b"three")] {
            encode_nested(kind, payload, &mut nested);
        }
        let mut buf = Vec::new();
        encode(6, &nested, &mut buf);
        let (frames, tail) = scan(&buf);
        assert_eq!((frames.len(), tail), (1, Tail::Clean));
        let records = parse_nested(&frames[0]).unwrap();
        assert_eq!(records.iter().map(|r| r.kind).collect::<Vec<_>>(), vec![1, 2, 3]);
        // Nested records carry no checksum, so none of them passes for a frame after a torn batch.
        for cut in 1..buf.len() {
            assert!(matches!(scan(&buf[..cut]).1, Tail::Torn { at: 0, .. }), "cut at {cut}");
        }
        let short = Frame { kind: 6, payload: &nested[..nested.len() - 1], offset: 0 };
        assert!(parse_nested(&short).is_err());
    }

    #[test]
    fn garbage_at_the_end_is_torn_but_damage_before_a_good_frame_is_corrupt() {
        let (mut buf, starts) = three_frames();
        let last = buf.len() - 1;
        buf[last] ^= 0x40;
        assert!(matches!(scan(&buf).1, Tail::Torn { at, .. } if at == starts[2] as u64));
        buf[last] ^= 0x40;
        buf[starts[1] + PREFIX] ^= 0x01;
        assert!(matches!(scan(&buf).1, Tail::Corrupt { at, .. } if at == starts[1] as u64));
        buf[starts[1] + PREFIX] ^= 0x01;
        buf[starts[1] + 3] ^= 0x20;
        assert!(matches!(scan(&buf).1, Tail::Corrupt { at, .. } if at == starts[1] as u64), "damaged length");
    }
}
