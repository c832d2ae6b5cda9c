//! `meridian --version` and a node's INFO name the commit the binary was built from.

mod support;

use std::process::Command;
use support::resp::{Conn, Resp};

#[test]
fn version_and_info_name_the_same_commit() {
    let out = Command::new(env!("CARGO_BIN_EXE_meridian")).arg("--version").output().unwrap();
    let version = String::from_utf8(out.stdout).unwrap();
    // `meridian 0.1.0 (abc1234)`, `(abc1234-dirty)` or `(unknown)`.
    let (release, commit) = version.trim_end().strip_prefix("meridian ").unwrap().split_once(" (").unwrap();
    let (sha1, dirty) = match commit.strip_suffix(')').unwrap().strip_suffix("-dirty") {
        Some(sha1) => (sha1, "1"),
        None => (commit.strip_suffix(')').unwrap(), "0"),
    };
    assert!(sha1 == "unknown" || (sha1.len() >= 7 && sha1.bytes().all(|b| b.is_ascii_hexdigit())), "{version}");

    let dir = tempfile::tempdir().unwrap();
    let server = support::Server::single(dir.path(), &[]);
    let mut conn = Conn::connect(server.resp, std::time::Duration::from_secs(5)).unwrap();
    let Ok(Resp::Bulk(Some(info))) = conn.cmd(&["INFO", "server"]) else { panic!("INFO failed") };
    let info = String::from_utf8(info).unwrap();
    let expected = format!("meridian_version:{release}\r\nmeridian_git_sha1:{sha1}\r\nmeridian_git_dirty:{dirty}\r\n");
    assert!(info.contains(&expected), "{info}");
}

/// A peer that frames its messages in another version of the protocol is refused at its hello, and told why in
/// plain text that a build of any version can read: both versions are named, in the reply and in the log. This
/// is what keeps a rolling upgrade's mixed cluster from misreading itself.
#[test]
fn a_peer_of_a_newer_protocol_is_refused_with_both_versions_named() {
    use meridian_core::wire::{self, Hello, WIRE_VERSION};
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let server = support::Server::single(dir.path(), &[]);
    let mut peer = std::net::TcpStream::connect(server.peer()).unwrap();
    peer.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    let mut hello = Vec::new();
    wire::encode(&Hello { node: meridian_core::NodeId(9), cluster: 0, region: "default".into() }, &mut hello).unwrap();
    // Byte 4 is the frame's version (`wire.rs`); a newer build writes its own.
    hello[4] = WIRE_VERSION + 1;
    peer.write_all(&hello).unwrap();
    let mut said = Vec::new();
    peer.read_to_end(&mut said).unwrap();
    let reason = wire::refusal_reason(&said).unwrap_or_else(|| panic!("a refusal: {said:?}"));
    let (theirs, ours) = (format!("frame version {}", WIRE_VERSION + 1), format!("speaks {WIRE_VERSION}"));
    assert!(reason.contains(&theirs) && reason.contains(&ours), "{reason}");
    assert!(server.log().contains(&reason), "the node logs it too:\n{}", server.log());
}
