//! Peer frames: `len:u32 | version:u8 | crc32c(payload):u32 | payload`, big-endian, where the payload
//! is a postcard-encoded message and `len` counts everything after itself. The checksum catches
//! corruption a TCP checksum can miss; the version byte lets a node refuse a peer it cannot understand
//! instead of misreading it. [`WIRE_VERSION`] names the encoding of every peer message and of the cluster map
//! it carries: it must change whenever they do, which the schema lock in `meridian-proto`
//! (`node/schema_lock.rs`) enforces.

use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::ids::NodeId;

pub const WIRE_VERSION: u8 = 16;
/// Frames above this are refused on both ends; it bounds a reader's buffer.
pub const FRAME_MAX: usize = 16 << 20;
const HEADER: usize = 4 + 1 + 4;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    #[error("frame of {0} bytes exceeds the {FRAME_MAX}-byte limit")]
    TooLarge(usize),
    #[error("frame version {0} is not supported (this node speaks {WIRE_VERSION})")]
    Version(u8),
    #[error("frame checksum mismatch")]
    Checksum,
    #[error("frame shorter than its header")]
    Short,
    #[error("cannot decode frame payload: {0}")]
    Decode(String),
    #[error("cannot encode message: {0}")]
    Encode(String),
}

/// First frame on every peer connection: who is calling and for which cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub node: NodeId,
    /// [`crate::ClusterConfig::fingerprint`]; nodes with different configs refuse each other.
    pub cluster: u64,
    /// The region the caller runs in: a node that emulates a WAN delays what it receives by it.
    pub region: String,
}

/// Appends one frame holding `msg` to `out`.
pub fn encode<M: Serialize>(msg: &M, out: &mut Vec<u8>) -> Result<(), WireError> {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER]);
    // Appends in place; on failure the partial frame is cut so earlier frames in `out` stay intact.
    if let Err(e) = postcard::to_io(msg, &mut *out) {
        out.truncate(start);
        return Err(WireError::Encode(e.to_string()));
    }
    let len = out.len() - start - 4;
    if len + 4 > FRAME_MAX {
        out.truncate(start);
        return Err(WireError::TooLarge(len + 4));
    }
    let crc = crc32c::crc32c(&out[start + HEADER..]);
    out[start..start + 4].copy_from_slice(&(len as u32).to_be_bytes());
    out[start + 4] = WIRE_VERSION;
    out[start + 5..start + HEADER].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

/// What starts the text a node writes back on a peer connection it refuses, before closing it: plain text, not
/// a frame, so that a caller of any version can read why.
pub const REFUSAL_PREFIX: &[u8] = b"MERIDIAN REFUSED ";

/// The bytes of a refusal: [`REFUSAL_PREFIX`], the reason, a newline.
pub fn refusal(reason: &str) -> Vec<u8> {
    [REFUSAL_PREFIX, reason.as_bytes(), b"\n"].concat()
}

/// The reason in bytes a refused caller read back, if they are a refusal.
pub fn refusal_reason(bytes: &[u8]) -> Option<String> {
    let reason = bytes.strip_prefix(REFUSAL_PREFIX)?;
    let end = reason.iter().position(|&b| b == b'\n').unwrap_or(reason.len());
    Some(String::from_utf8_lossy(&reason[..end]).into_owned())
}

/// The size of the frame at the front of `buf`, once its length prefix has arrived.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, WireError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize + 4;
    if len > FRAME_MAX {
        return Err(WireError::TooLarge(len));
    }
    if len < HEADER {
        return Err(WireError::Short);
    }
    Ok(Some(len))
}

/// Decodes the frame at the front of `buf`: `Ok(None)` until the whole frame has arrived, otherwise the
/// message and the number of bytes it used.
pub fn decode<M: DeserializeOwned>(buf: &[u8]) -> Result<Option<(M, usize)>, WireError> {
    let Some(len) = frame_len(buf)? else {
        return Ok(None);
    };
    if buf.len() < len {
        return Ok(None);
    }
    if buf[4] != WIRE_VERSION {
        return Err(WireError::Version(buf[4]));
    }
    let crc = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]);
    let payload = &buf[HEADER..len];
    if crc32c::crc32c(payload) != crc {
        return Err(WireError::Checksum);
    }
    let msg = postcard::from_bytes(payload).map_err(|e| WireError::Decode(e.to_string()))?;
    Ok(Some((msg, len)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_several_frames() {
        let mut buf = Vec::new();
        encode(&Hello { node: NodeId(7), cluster: 42, region: "eu".into() }, &mut buf).unwrap();
        encode(&(1u8, "two".to_string()), &mut buf).unwrap();
        let (h, used): (Hello, usize) = decode(&buf).unwrap().unwrap();
        assert_eq!(h, Hello { node: NodeId(7), cluster: 42, region: "eu".into() });
        let (t, used2): ((u8, String), usize) = decode(&buf[used..]).unwrap().unwrap();
        assert_eq!(t, (1, "two".to_string()));
        assert_eq!(used + used2, buf.len());
    }

    #[test]
    fn partial_frames_wait() {
        let mut buf = Vec::new();
        encode(&123u64, &mut buf).unwrap();
        for cut in 0..buf.len() {
            assert_eq!(decode::<u64>(&buf[..cut]).unwrap(), None);
        }
    }

    #[test]
    fn corruption_is_detected() {
        let mut buf = Vec::new();
        encode(&"hello".to_string(), &mut buf).unwrap();
        let last = buf.len() - 1;
        buf[last] ^= 1;
        assert_eq!(decode::<String>(&buf), Err(WireError::Checksum));
        buf[last] ^= 1;
        let newer = WIRE_VERSION + 1;
        buf[4] = newer;
        assert_eq!(decode::<String>(&buf), Err(WireError::Version(newer)));
    }

    #[test]
    fn oversized_length_prefix_is_refused_before_buffering() {
        let buf = (FRAME_MAX as u32).to_be_bytes();
        assert!(matches!(decode::<u8>(&buf), Err(WireError::TooLarge(_))));
    }
}
