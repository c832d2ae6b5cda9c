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
