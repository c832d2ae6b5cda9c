//! The binary's answers to wrong use: clear errors, a non-zero exit, nothing started.

mod support;

use std::process::Command;

fn meridian(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_meridian")).args(args).output().expect("run meridian");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_node_id_outside_peers_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("n9");
    let args = ["server", "--node-id", "9", "--peer-listen", "127.0.0.1:1", "--peers", "1=127.0.0.1:1"];
    let (code, err) = meridian(&[&args[..], &["--data-dir", data.to_str().unwrap()]].concat());
    assert_eq!(code, 2);
    assert!(err.contains("--node-id 9 is not in --peers"), "{err}");
}

#[test]
fn server_needs_peers_or_join() {
    let (code, err) =
        meridian(&["server", "--node-id", "1", "--peer-listen", "127.0.0.1:1", "--data-dir", "/nonexistent"]);
    assert_ne!(code, 0);
    assert!(err.contains("--peers") && err.contains("--join"), "{err}");
}

#[test]
fn joining_through_an_address_nobody_answers_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("n5");
    let args = ["server", "--node-id", "5", "--peer-listen", "127.0.0.1:1", "--join", "127.0.0.1:9"];
    let (code, err) = meridian(&[&args[..], &["--data-dir", data.to_str().unwrap()]].concat());
    assert_eq!(code, 2);
    assert!(err.contains("GET http://127.0.0.1:9/v1/cluster: cannot connect"), "{err}");
}

#[test]
fn ctl_against_nothing_says_so() {
    let (code, err) = meridian(&["ctl", "--addr", "127.0.0.1:9", "status"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot connect"), "{err}");
}

#[test]
fn a_second_server_on_a_data_directory_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let first = support::Server::single(dir.path(), &[]);
    let data = dir.path().join("node1");
    let peer = format!("127.0.0.1:{}", support::free_port("127.0.0.1"));
    let listen = format!("127.0.0.1:{}", support::free_port("127.0.0.1"));
    let args = ["server", "--node-id", "1", "--replication", "1", "--listen", &listen, "--peer-listen", &peer];
    let (code, err) =
        meridian(&[&args[..], &["--peers", &format!("1={peer}"), "--data-dir", data.to_str().unwrap()]].concat());
    assert_eq!(code, 2);
    assert!(err.contains("is in use by another meridian process (pid"), "{err}");
    let mut c = support::resp::Conn::connect(first.resp, std::time::Duration::from_secs(5)).unwrap();
    assert_eq!(c.cmd(&["PING"]).unwrap(), support::resp::Resp::Simple("PONG".into()), "the first one still serves");
}

#[test]
fn invalid_limits_are_refused_naming_the_flag() {
    let base =
        ["--node-id", "1", "--peer-listen", "127.0.0.1:1", "--peers", "1=127.0.0.1:1", "--data-dir", "/nonexistent"];
    let cases = [
        ("--max-key-bytes", "0"),
        ("--max-key-bytes", "65k"),
        ("--max-value-bytes", "0"),
        ("--max-value-bytes", "lots"),
        ("--max-value-bytes", "9mb"),
        ("--max-pipeline", "0"),
        ("--max-pipeline", "-3"),
        ("--max-connections", "0"),
        ("--max-connections", "many"),
    ];
    for (flag, value) in cases {
        let given = format!("{flag}={value}");
        let (code, err) = meridian(&[&["server"][..], &base, &[&given]].concat());
        assert_eq!(code, 2, "{flag} {value}: {err}");
        assert!(err.contains(&format!("invalid value '{value}' for '{flag}")), "{flag} {value}: {err}");
    }
    let (code, err) = meridian(&["demo", "--max-connections", "0"]);
    assert_eq!(code, 2);
    assert!(err.contains("invalid value '0' for '--max-connections"), "{err}");
}

/// `meridian topology show` prints a preset's round trips, and refuses a file that breaks a rule with the line and
/// field at fault, or a name that is neither a preset nor a file.
#[test]
fn topology_show_prints_presets_and_names_what_is_wrong_in_a_file() {
    let out = Command::new(env!("CARGO_BIN_EXE_meridian")).args(["topology", "show", "canopus-7"]).output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    let ff: Vec<&str> = shown.lines().find(|l| l.starts_with("ff ")).unwrap().split_whitespace().collect();
    assert_eq!(ff, ["ff", "22", "145", "89", "226", "156", "322", "0.23"], "seed 000 Table 4.1's last row");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("two.toml");
    std::fs::write(
        &file,
        "[[region]]\nname = \"eu\"\n[[region]]\nname = \"us\"\n[[link]]\nbetween = [\"eu\", \"asia\"]\nrtt_ms = 5\n",
    )
    .unwrap();
    let (code, err) = meridian(&["topology", "show", file.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("two.toml, line 5: between: no [[region]] is named 'asia'"), "{err}");
    let (code, err) = meridian(&["topology", "show", "mars-2"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown topology 'mars-2': not a preset (canopus-7, globlease-4, leads-3, lan)"), "{err}");
}

#[test]
fn globlease_settings_outside_its_experiment_are_refused() {
    for (args, flag) in [
        (&["sim", "--rate", "5", "--seeds", "1"][..], "--rate"),
        (
            &["sim", "--experiment", "geo", "--topology", "globlease-4", "--kill-master-after", "3"][..],
            "--kill-master-after",
        ),
    ] {
        let (code, err) = meridian(args);
        assert_eq!(code, 2, "{args:?}");
        assert!(err.contains(&format!("{flag} is a setting of --experiment globlease")), "{err}");
    }
}
