//! `meridian server --config FILE` and `--print-config`: the server's settings as a TOML file
//! (docs/configuration.md).
//!
//! The file has no schema of its own. Its fields are the flags of `meridian server` (clap's argument ids: the
//! long flag with `_` for `-`), and a field's value is what the flag would be given, as a TOML string or, for a
//! number, an integer. Before clap parses the command line for real, the file's fields are appended to it as
//! flags (`--max-value-bytes=1mb`), leaving out those the command line gives itself or rules out (`--join`
//! rules out a file's `peers`). So each setting's doc, default and checks stay written once, in its clap
//! declaration, and a value from the file meets the same parser as one typed after the flag; each field is
//! also parsed alone first, so that a bad value is reported with the file and the field it came from. The
//! required settings stay required by clap, and may come from either side. `--print-config` turns clap's
//! matches back into such a file.

use clap::builder::Resettable;
use clap::error::{ContextKind, ContextValue};
use clap::parser::ValueSource;
use clap::{Arg, ArgMatches, Command};
use std::any::TypeId;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// The subcommand whose flags a file may give.
const SERVER: &str = "server";
/// The one flag of `meridian server` with a value that is not a setting: the file itself.
const CONFIG: &str = "config";

/// The command line `meridian` is to parse: `argv` itself or, when it runs `meridian server --config FILE`,
/// `argv` followed by the file's fields as flags. `cli` is the whole `meridian` command.
pub fn expand(cli: &Command, argv: Vec<OsString>) -> Result<Vec<OsString>, String> {
    // A lenient parse, with nothing required, finds the file and the flags given: the required settings may
    // be in the file. Whatever it cannot parse, the strict parse that follows reports.
    let Ok(matches) = cli.clone().mut_subcommand(SERVER, all_optional).try_get_matches_from(&argv) else {
        return Ok(argv);
    };
    let Some((given, path)) = matches.subcommand_matches(SERVER).and_then(|m| Some((m, m.get_one::<PathBuf>(CONFIG)?)))
    else {
        return Ok(argv);
    };
    let fields = read(path)?;
    let flags = as_flags(&server(cli), &fields, given).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(argv.into_iter().chain(flags).collect())
}

/// The settings `meridian server` runs with (from its command line, its file and the defaults) as a config
/// file: a field for each setting that has a value, except a default that an alternative given replaces
/// (`replication` beside `replicas`). `given` is the server's matches from the strict parse.
pub fn resolved(cli: &Command, given: &ArgMatches) -> String {
    let server = server(cli);
    let table: toml::Table = fields(&server)
        .filter(|arg| {
            given.value_source(id(arg)) != Some(ValueSource::DefaultValue) || !overridden(&server, arg, given)
        })
        .filter_map(|arg| Some((id(arg).to_string(), value(arg, given.get_raw(id(arg))?.next()?))))
        .collect();
    toml::to_string(&table).expect("a table of strings and integers is TOML")
}

/// `meridian server` as parsed: built, so it holds the global flags too (`--log-format`).
fn server(cli: &Command) -> Command {
    let mut cli = cli.clone();
    cli.build();
    cli.find_subcommand(SERVER).expect("meridian has a server subcommand").clone()
}

/// `server` with no flag or group of flags required.
fn all_optional(server: Command) -> Command {
    let required: Vec<String> = server.get_arguments().filter(|a| a.is_required_set()).map(|a| id(a).into()).collect();
    let groups: Vec<String> =
        server.get_groups().filter(|g| g.is_required_set()).map(|g| g.get_id().to_string()).collect();
    let server = required.iter().fold(server, |s, a| s.mut_arg(a, |a| a.required(false)));
    groups.iter().fold(server, |s, g| s.mut_group(g, |g| g.required(false)))
}

fn read(path: &Path) -> Result<toml::Table, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    text.parse().map_err(|e| format!("{}: {e}", path.display()))
}

/// The file's fields as flags, without those the command line gives or rules out.
fn as_flags(server: &Command, fields: &toml::Table, given: &ArgMatches) -> Result<Vec<OsString>, String> {
    let mut taken: Vec<&Arg> = Vec::new();
    let mut flags = Vec::new();
    for (name, value) in fields {
        let arg = field(server, name)?;
        let text = checked(arg, value).map_err(|e| format!("{name}: {e}"))?;
        if overridden(server, arg, given) {
            continue;
        }
        if let Some(other) = taken.iter().find(|other| excludes(server, arg, other)) {
            return Err(format!("{name}: not allowed beside {}", id(other)));
        }
        taken.push(arg);
        flags.push(flag(arg, &text));
    }
    match missing(server, fields, given) {
        Some(missing) => Err(format!("missing required settings: {missing}; give them in the file or as flags")),
        None => Ok(flags),
    }
}

/// The settings a file may give: every flag that takes a value (the global `--log-format` too), but `--config`.
fn fields(server: &Command) -> impl Iterator<Item = &Arg> {
    server.get_arguments().filter(|a| a.get_action().takes_values() && id(a) != CONFIG)
}

fn field<'a>(server: &'a Command, name: &str) -> Result<&'a Arg, String> {
    let named = |name: &str| fields(server).find(|a| id(a) == name);
    named(name).ok_or_else(|| match named(&name.replace('-', "_")) {
        Some(arg) => format!("unknown field {name:?} (fields are written with _, as {:?})", id(arg)),
        None => format!("unknown field {name:?} (the fields are the flags of `meridian server`, with _ for -)"),
    })
}

/// A field's value as the text its flag would be given (a string as it is, an integer in decimal), parsed
/// with the flag's own parser (its type, range and custom checks) as clap would on the command line; alone,
/// so without the relations between flags, which are checked with the other fields.
fn checked(arg: &Arg, value: &toml::Value) -> Result<String, String> {
    let text = match value {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(n) => n.to_string(),
        other => return Err(format!("expected a string or an integer, found {} {other}", other.type_str())),
    };
    let alone = arg.clone().required(false).conflicts_with(Resettable::Reset).global(false);
    let probe = Command::new(SERVER).arg(alone).try_get_matches_from([OsString::from(SERVER), flag(arg, &text)]);
    probe.map(|_| text).map_err(|e| format!("invalid value {value}: {}", reason(&e)))
}

/// The required settings, or groups of alternatives, that neither the file nor the command line gives.
fn missing(server: &Command, fields: &toml::Table, given: &ArgMatches) -> Option<String> {
    let set = |a: &&Arg| fields.contains_key(id(a)) || given.value_source(id(a)) == Some(ValueSource::CommandLine);
    let named = |id: &clap::Id| server.get_arguments().find(|a| a.get_id() == id).expect("a group of known flags");
    let required = server.get_arguments().filter(|a| a.is_required_set()).map(|a| vec![a]);
    let groups = server.get_groups().filter(|g| g.is_required_set()).map(|g| g.get_args().map(named).collect());
    let unset: Vec<String> = required
        .chain(groups)
        .filter(|alternatives: &Vec<&Arg>| !alternatives.iter().any(set))
        .map(|alternatives| {
            let names: Vec<&str> = alternatives.iter().map(|a| id(a)).collect();
            let flags: Vec<String> = alternatives.iter().map(|a| format!("--{}", long(a))).collect();
            format!("{} ({})", names.join(" or "), flags.join(" or "))
        })
        .collect();
    (!unset.is_empty()).then(|| unset.join(", "))
}

/// What clap found wrong with a value, without the command-line dressing around it.
fn reason(e: &clap::Error) -> String {
    if let Some(source) = std::error::Error::source(e) {
        return source.to_string();
    }
    match e.get(ContextKind::ValidValue) {
        Some(ContextValue::Strings(valid)) => format!("expected one of {}", valid.join(", ")),
        _ => e.kind().to_string(),
    }
}

/// `--name=text`: with `=`, so that a value starting with `-` stays a value.
fn flag(arg: &Arg, text: &str) -> OsString {
    format!("--{}={text}", long(arg)).into()
}

/// Whether the command line gives this setting, or one that rules it out: a flag that conflicts with it
/// (`--join` for `peers`, `--replicas` for `replication`, whichever of the two declares the conflict).
fn overridden(server: &Command, arg: &Arg, given: &ArgMatches) -> bool {
    let on_command_line = |a: &Arg| given.value_source(id(a)) == Some(ValueSource::CommandLine);
    on_command_line(arg) || fields(server).any(|other| excludes(server, arg, other) && on_command_line(other))
}

/// Whether two settings may not be given together: a conflict declared on either of them.
fn excludes(server: &Command, a: &Arg, b: &Arg) -> bool {
    let conflict = |a: &Arg, b: &Arg| server.get_arg_conflicts_with(a).iter().any(|c| c.get_id() == b.get_id());
    conflict(a, b) || conflict(b, a)
}

/// A setting as TOML: an integer where the flag takes a number and was given a plain one, a string otherwise
/// (sizes like `1mb`, addresses, paths).
fn value(arg: &Arg, raw: &OsStr) -> toml::Value {
    let raw = raw.to_string_lossy();
    let parsed = arg.get_value_parser().type_id();
    let numeric = [TypeId::of::<u16>(), TypeId::of::<u32>(), TypeId::of::<u64>(), TypeId::of::<usize>()]
        .into_iter()
        .any(|t| parsed == t);
    match raw.parse::<i64>() {
        Ok(n) if numeric => toml::Value::Integer(n),
        _ => toml::Value::String(raw.into_owned()),
    }
}

fn id(arg: &Arg) -> &str {
    arg.get_id().as_str()
}

fn long(arg: &Arg) -> &str {
    arg.get_long().expect("settings are long flags")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    const REQUIRED: &str = "node_id = 1\npeer_listen = \"127.0.0.1:7001\"\ndata_dir = \"/tmp/n1\"\n";

    /// `meridian server --config FILE FLAGS` with `file` as FILE: the flags the file adds, or the error
    /// without the file's name.
    fn added(file: &str, flags: &[&str]) -> Result<Vec<String>, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meridian.toml");
        std::fs::write(&path, file).unwrap();
        let argv: Vec<OsString> = ["meridian", "server", "--config"]
            .into_iter()
            .map(OsString::from)
            .chain([path.clone().into_os_string()])
            .chain(flags.iter().map(OsString::from))
            .collect();
        let given = argv.len();
        let prefix = format!("{}: ", path.display());
        let expanded = expand(&crate::Cli::command(), argv).map_err(|e| e.trim_start_matches(&prefix).to_string())?;
        Ok(expanded[given..].iter().map(|a| a.to_string_lossy().into_owned()).collect())
    }

    /// What `--print-config` prints for `meridian server FLAGS`.
    fn printed(flags: &[&str]) -> String {
        let cli = crate::Cli::command();
        let matches = cli.clone().try_get_matches_from([&["meridian", "server"][..], flags].concat()).unwrap();
        resolved(&cli, matches.subcommand_matches(SERVER).unwrap())
    }

    #[test]
    fn fields_become_the_flags_the_command_line_does_not_give() {
        let file =
            format!("{REQUIRED}peers = \"1=127.0.0.1:7001\"\nlisten = \"127.0.0.1:1\"\nmax_value_bytes = \"2mb\"\n");
        let flags = added(&file, &["--listen", "127.0.0.1:2", "--node-id=3"]).unwrap();
        assert_eq!(
            flags,
            ["--peer-listen=127.0.0.1:7001", "--data-dir=/tmp/n1", "--peers=1=127.0.0.1:7001", "--max-value-bytes=2mb"]
        );
        assert_eq!(
            added(
                "log_format = \"json\"\nmax_pipeline = 8\n",
                &["--peers", "1=a:1", "--node-id", "1", "--peer-listen", "127.0.0.1:1", "--data-dir", "d"]
            )
            .unwrap(),
            ["--log-format=json", "--max-pipeline=8"]
        );
    }

    #[test]
    fn an_alternative_on_the_command_line_overrides_the_file() {
        let file = format!("{REQUIRED}peers = \"1=127.0.0.1:7001\"\nreplication = 2\n");
        let flags = added(&file, &["--join", "127.0.0.1:8380", "--replicas", "mem,log"]).unwrap();
        assert_eq!(flags, ["--node-id=1", "--peer-listen=127.0.0.1:7001", "--data-dir=/tmp/n1"]);
        let file = format!("{REQUIRED}peers = \"1=127.0.0.1:7001\"\njoin = \"127.0.0.1:8380\"\n");
        assert_eq!(added(&file, &[]).unwrap_err(), "join: not allowed beside peers");
    }

    #[test]
    fn a_bad_field_is_named_with_what_is_wrong() {
        let cases = [
            (
                "listne = \"x\"",
                "unknown field \"listne\" (the fields are the flags of `meridian server`, with _ for -)",
            ),
            ("max-pipeline = 8", "unknown field \"max-pipeline\" (fields are written with _, as \"max_pipeline\")"),
            ("config = \"other.toml\"", "unknown field \"config\""),
            ("max_pipeline = true", "max_pipeline: expected a string or an integer, found boolean true"),
            ("max_pipeline = [8]", "max_pipeline: expected a string or an integer, found array [8]"),
            ("max_pipeline = 0", "max_pipeline: invalid value 0: 0 is not in 1..=1048576"),
            ("max_value_bytes = \"9mb\"", "max_value_bytes: invalid value \"9mb\": 9437184 bytes is not between 1 and"),
            ("durability = \"fast\"", "durability: invalid value \"fast\": unknown durability mode \"fast\"; expected"),
            ("log_format = \"xml\"", "log_format: invalid value \"xml\": expected one of text, json"),
            ("vnodes = \"one\"", "vnodes: invalid value \"one\": invalid digit found in string"),
            ("listen = 6380", "listen: invalid value 6380: \"6380\" is not HOST:PORT or off"),
            (
                "tls_auth_clients = \"maybe\"",
                "tls_auth_clients: invalid value \"maybe\": unknown tls-auth-clients \"maybe\"; expected one of yes, no, optional",
            ),
            (
                "tls_auth_clients_user = \"URI\"",
                "tls_auth_clients_user: invalid value \"URI\": unknown tls-auth-clients-user \"URI\"; expected one of off, CN",
            ),
        ];
        for (file, error) in cases {
            let e = added(&format!("{REQUIRED}peers = \"1=a:1\"\n{file}\n"), &[]).unwrap_err();
            assert!(e.starts_with(error), "{file}: {e}");
        }
    }

    #[test]
    fn a_required_setting_missing_from_both_is_named() {
        let e = added("node_id = 1\n", &["--data-dir", "d"]).unwrap_err();
        assert_eq!(
            e,
            "missing required settings: peer_listen (--peer-listen), peers or join (--peers or --join); give them in \
             the file or as flags"
        );
    }

    #[test]
    fn the_file_is_read_and_parsed_or_the_error_says_where() {
        let argv = |path: &str| ["meridian", "server", "--config", path].map(OsString::from).to_vec();
        let e = expand(&crate::Cli::command(), argv("/nonexistent/meridian.toml")).unwrap_err();
        assert!(e.starts_with("cannot read /nonexistent/meridian.toml: "), "{e}");
        let e = added("node_id = 1\nnode_id = 2\n", &[]).unwrap_err();
        assert!(e.contains("line 2") && e.contains("duplicate key"), "{e}");
    }

    #[test]
    fn without_a_file_the_command_line_is_left_alone() {
        let argv = ["meridian", "server", "--node-id", "1"].map(OsString::from).to_vec();
        assert_eq!(expand(&crate::Cli::command(), argv.clone()).unwrap(), argv);
        let argv = ["meridian", "server", "--no-such-flag"].map(OsString::from).to_vec();
        assert_eq!(expand(&crate::Cli::command(), argv.clone()).unwrap(), argv, "the strict parse reports it");
    }

    #[test]
    fn the_resolved_configuration_is_typed_and_leaves_out_what_is_unset_or_replaced() {
        let required = ["--node-id", "1", "--peer-listen", "127.0.0.1:7001", "--data-dir", "d", "--peers", "1=a:1"];
        let text = printed(&[&required[..], &["--replicas", "mem,log", "--max-value-bytes", "2mb"]].concat());
        let table: toml::Table = text.parse().unwrap();
        assert_eq!(table["node_id"], toml::Value::Integer(1));
        assert_eq!(table["max_pipeline"], toml::Value::Integer(1024));
        assert_eq!(table["max_value_bytes"], toml::Value::String("2mb".into()));
        assert_eq!(table["durability"], toml::Value::String("group".into()));
        assert!(!table.contains_key("replication"), "its default gives way to replicas: {text}");
        for unset in ["http", "join", "vnodes", "config", "print_config", "help"] {
            assert!(!table.contains_key(unset), "{unset}: {text}");
        }
        assert!(text.starts_with("node_id = 1\nlisten = \"127.0.0.1:6380\"\n"), "in the flags' order: {text}");
        assert!(text.ends_with("log_format = \"text\"\n"), "{text}");
        let replication = printed(&required);
        assert!(replication.contains("replication = 3\n"), "{replication}");
    }
}
