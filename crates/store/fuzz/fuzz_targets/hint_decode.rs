//! Decodes arbitrary bytes as a hint file: the decoder must never panic, and whatever it accepts must re-encode
//! to exactly the bytes it came from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use meridian_store::hint::{decode, encode, MAGIC};

fuzz_target!(|data: &[u8]| {
    check(data);
    // Random bytes almost never carry the magic and checksum; adding both reaches the field checks.
    let mut framed = MAGIC.to_vec();
    framed.extend_from_slice(data);
    framed.extend_from_slice(&crc32c::crc32c(&framed).to_be_bytes());
    check(&framed);
});

fn check(data: &[u8]) {
    if let Ok(hint) = decode(data) {
        assert_eq!(encode(&hint), data);
    }
}
