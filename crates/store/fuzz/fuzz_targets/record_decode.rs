//! Decodes arbitrary bytes as a run of log records: the decoder must never panic, and whatever it accepts must
//! re-encode to exactly the bytes it came from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use meridian_store::{decode_framed, encode_in_group};

fuzz_target!(|data: &[u8]| {
    decode_all(data);
    // Random bytes almost never pass the checksum; framing them with a valid one reaches the field checks.
    let mut framed = ((data.len() + 4) as u32).to_be_bytes().to_vec();
    framed.extend_from_slice(&crc32c::crc32c(data).to_be_bytes());
    framed.extend_from_slice(data);
    decode_all(&framed);
});

fn decode_all(mut rest: &[u8]) {
    while let Ok(Some(framed)) = decode_framed(rest) {
        let mut again = Vec::new();
        encode_in_group(&framed.rec, framed.more, &mut again).expect("a decoded record is within the limits");
        assert_eq!(again, rest[..framed.len]);
        rest = &rest[framed.len..];
    }
}
