//! `meridian server --config FILE` and `--print-config` on the real binary: a node started from a file, flags
//! over the file, the printed configuration as a file, bad files refused naming the field, and the example
//! file and docs/configuration.md kept true to the flags.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::resp::{Conn, Resp};

const REQUIRED: &str = "node_id = 1\npeer_listen = \"127.0.0.1:7001\"\npeers = \"1=127.0.0.1:7001\"\n";

/// `meridian server ARGS`: its exit code, stdout and stderr.
fn server(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_meridian")).arg("server").args(args).output().expect("run meridian");
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (out.status.code().unwrap_or(-1), text(out.stdout), text(out.stderr))
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn info_field(conn: &mut Conn, section: &str, name: &str) -> String {
    let Ok(Resp::Bulk(Some(info))) = conn.cmd(&["INFO", section]) else { panic!("INFO {section} failed") };
    let info = String::from_utf8(info).unwrap();
    let line = info.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).unwrap_or_else(|| panic!("{info}"));
    line.to_string()
}

#[test]
fn a_node_starts_from_a_config_file_with_flags_over_it() {
    let dir = tempfile::tempdir().unwrap();
    let port = |_| -> SocketAddr { format!("127.0.0.1:{}", support::free_port("127.0.0.1")).parse().unwrap() };
    let [resp, peer, http] = [0, 1, 2].map(port);
    let data = dir.path().join("node1");
    let file = format!(
        "node_id = 1\nlisten = \"{resp}\"\npeer_listen = \"{peer}\"\nhttp = \"{http}\"\npeers = \"1={peer}\"\n\
         data_dir = \"{}\"\nreplication = 1\ndurability = \"sync\"\nmax_value_bytes = \"2mb\"\n",
        data.display()
    );
    let config = write(dir.path(), "meridian.toml", &file);
    let args = ["server", "--config", &config, "--durability", "async"].map(String::from).to_vec();
    let node = support::Server::run(1, resp, http, args, dir.path());
    node.wait_ready(Duration::from_secs(20));
    let mut conn = Conn::connect(resp, Duration::from_secs(5)).unwrap();
    assert_eq!(conn.cmd(&["PING"]).unwrap(), Resp::Simple("PONG".into()));
    let bulk_max = conn.cmd(&["CONFIG", "GET", "proto-max-bulk-len"]).unwrap();
    let expected = ["proto-max-bulk-len", "2097152"].map(|s| Resp::Bulk(Some(s.into()))).to_vec();
    assert_eq!(bulk_max, Resp::Array(Some(expected)), "max_value_bytes from the file");
    assert_eq!(info_field(&mut conn, "persistence", "durability"), "async", "the flag over the file's sync");
    assert!(data.join("LOCK").exists(), "data_dir from the file: {:?}", std::fs::read_dir(dir.path()).unwrap());
}

#[test]
fn print_config_round_trips_and_touches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("never-made");
    let data = data.to_str().unwrap();
    let args = ["--node-id", "2", "--peer-listen", "127.0.0.1:7002", "--peers", "1=127.0.0.1:7001,2=127.0.0.1:7002"];
    let (code, printed, err) =
        server(&[&args[..], &["--data-dir", data, "--replicas", "mem,log", "--print-config"]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(printed.contains("node_id = 2\n") && printed.contains("replicas = \"mem,log\"\n"), "{printed}");
    assert!(printed.contains("max_value_bytes = 1048576\n") && !printed.contains("replication"), "{printed}");
    let config = write(dir.path(), "printed.toml", &printed);
    let (code, again, err) = server(&["--config", &config, "--print-config"]);
    assert_eq!((code, again.as_str()), (0, printed.as_str()), "{err}");
    assert!(!Path::new(data).exists(), "--print-config made the data directory");
}

#[test]
fn flags_override_the_file_and_the_fields_they_rule_out() {
    let dir = tempfile::tempdir().unwrap();
    let file = format!("{REQUIRED}data_dir = \"d\"\nreplication = 2\nmax_pipeline = 8\nlisten = \"127.0.0.1:1\"\n");
    let config = write(dir.path(), "meridian.toml", &file);
    let flags = ["--listen", "127.0.0.1:2", "--join", "127.0.0.1:8380", "--replicas", "log", "--print-config"];
    let (code, printed, err) = server(&[&["--config", &config][..], &flags].concat());
    assert_eq!(code, 0, "{err}");
    let table: toml::Table = printed.parse().unwrap();
    assert_eq!(table["listen"].as_str(), Some("127.0.0.1:2"));
    assert_eq!(table["max_pipeline"].as_integer(), Some(8), "the file's, where no flag is given");
    assert_eq!((table["join"].as_str(), table["replicas"].as_str()), (Some("127.0.0.1:8380"), Some("log")));
    assert!(!table.contains_key("peers") && !table.contains_key("replication"), "{printed}");
}

#[test]
fn bad_config_files_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("listne = \"127.0.0.1:6380\"", "unknown field \"listne\""),
        ("max_connections = \"many\"", "max_connections: invalid value \"many\": invalid digit found in string"),
        ("max_pipeline = 1.5", "max_pipeline: expected a string or an integer, found float 1.5"),
        ("max_value_bytes = \"9mb\"", "max_value_bytes: invalid value \"9mb\": 9437184 bytes is not between 1 and"),
        ("manager_tick_ms = 5", "manager_tick_ms: invalid value 5: 5 is not in 10..=10000"),
        ("durability = \"fast\"", "durability: invalid value \"fast\": unknown durability mode \"fast\""),
        ("join = \"127.0.0.1:8380\"", "join: not allowed beside peers"),
    ];
    for (line, error) in cases {
        let config = write(dir.path(), "bad.toml", &format!("{REQUIRED}data_dir = \"d\"\n{line}\n"));
        let (code, _, err) = server(&["--config", &config]);
        assert_eq!(code, 2, "{line}: {err}");
        assert!(err.starts_with(&format!("meridian: {config}: {error}")), "{line}: {err}");
    }
    let config = write(dir.path(), "partial.toml", "node_id = 1\n");
    let (code, _, err) = server(&["--config", &config, "--peer-listen", "127.0.0.1:7001"]);
    assert_eq!(code, 2);
    let missing = "missing required settings: data_dir (--data-dir), peers or join (--peers or --join)";
    assert!(err.contains(missing), "{err}");
}

#[test]
fn the_example_file_is_valid_and_every_field_is_in_it_and_documented() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/meridian.toml");
    let (code, printed, err) = server(&["--config", example, "--print-config"]);
    assert_eq!(code, 0, "{err}");
    let example = std::fs::read_to_string(example).unwrap();
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md")).unwrap();
    let (_, help, _) = server(&["--help"]);
    let fields: Vec<String> = help
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("--")?.split(' ').next())
        .filter(|flag| !["config", "print-config", "help"].contains(flag))
        .map(|flag| flag.replace('-', "_"))
        .collect();
    assert!(["node_id", "log_format", "max_connections"].iter().all(|f| fields.contains(&f.to_string())), "{help}");
    for field in &fields {
        let set = |text: &str| text.lines().any(|l| l.trim_start_matches("# ").starts_with(&format!("{field} = ")));
        assert!(set(&example), "{field} is not in examples/meridian.toml");
        assert!(
            docs.contains(&format!("| `{field}` | `--{}` |", field.replace('_', "-"))),
            "{field} is not documented"
        );
    }
    assert!(printed.contains("max_value_bytes = \"1mb\"\n"), "{printed}");
}

#[test]
fn the_documented_defaults_are_the_flags_defaults_and_the_docs_example_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "required.toml", &format!("{REQUIRED}data_dir = \"d\"\n"));
    let (code, printed, err) = server(&["--config", &config, "--print-config"]);
    assert_eq!(code, 0, "{err}");
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md")).unwrap();
    let given = std::fs::read_to_string(&config).unwrap().parse::<toml::Table>().unwrap();
    let defaults = printed.parse::<toml::Table>().unwrap();
    for (field, default) in defaults.iter().filter(|(f, _)| !given.contains_key(*f)) {
        let row = docs.lines().find(|l| l.starts_with(&format!("| `{field}` |"))).unwrap();
        assert_eq!(row.split(" | ").nth(2), Some(format!("`{default}`").as_str()), "{row}");
    }
    let example = docs.split("```toml\n").nth(1).and_then(|rest| rest.split("```").next()).unwrap();
    let config = write(dir.path(), "docs.toml", example);
    let (code, _, err) = server(&["--config", &config, "--print-config"]);
    assert_eq!(code, 0, "the example in docs/configuration.md: {err}");
}
