//! `ACL SETUSER`'s rule parser on arbitrary words: it must never panic, and whatever it takes must apply, as the
//! cluster map will apply it, without error.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use meridian_core::acl::User;
use meridian_node::fuzzing::acl_setuser;

fuzz_target!(|data: &[u8]| {
    // Words as a client sends them; '>' and '<' words are hashed with Argon2 (tens of ms), so keep few of them.
    let words: Vec<Bytes> = data.split(|&b| b == b' ').take(64).map(Bytes::copy_from_slice).collect();
    if words.iter().filter(|w| matches!(w.first(), Some(b'>' | b'<'))).count() > 2 {
        return;
    }
    if let Ok((user, rules)) = acl_setuser("fuzz", User::default(), &words) {
        assert_eq!(User::default().applied(&rules).as_ref(), Ok(&user), "the map applies what the node took");
    }
});
