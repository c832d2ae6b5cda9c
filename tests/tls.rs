//! The client TLS port and `meridian cert` on real processes (docs/security.md): certificates made by `meridian
//! cert` serve redis-cli (`--tls`) and redis-py (`ssl=True`); a client without a certificate, or with one of
//! another CA, and a client that does not trust the node's CA, are refused; garbage and silence on the TLS port
//! hold up no one else; `--listen off` really closes the plain port; bad TLS settings stop the node before
//! anything starts; with `--tls-auth-clients-user CN` a certificate names the ACL user a connection starts as.

mod support;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use support::{free_port, Server};

/// Runs `meridian ARGS` to completion.
fn meridian(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_meridian")).args(args).output().expect("run meridian")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A CA, a node certificate for 127.0.0.1 and localhost, and a client certificate for `alice`, in `dir`.
fn certs(dir: &Path) -> PathBuf {
    let d = dir.display().to_string();
    for args in [
        vec!["cert", "create-ca", "--certs-dir", &d],
        vec!["cert", "create-node", "--certs-dir", &d, "--node-id", "1", "--host", "127.0.0.1", "--host", "localhost"],
        vec!["cert", "create-client", "alice", "--certs-dir", &d],
    ] {
        let out = meridian(&args);
        assert!(out.status.success(), "meridian {args:?}: {}", stderr(&out));
    }
    dir.to_path_buf()
}

fn path(dir: &Path, file: &str) -> String {
    dir.join(file).display().to_string()
}

/// One node with a plain port and a TLS port at `tls`, whose certificate and CA are in `certs`, with `extra`
/// flags; ready.
fn tls_node(dir: &Path, certs: &Path, tls: SocketAddr, extra: &[&str]) -> Server {
    let tls = tls.to_string();
    let mut flags = vec!["--tls-port", &tls];
    let (cert, key, ca) = (path(certs, "node.crt"), path(certs, "node.key"), path(certs, "ca.crt"));
    flags.extend(["--tls-cert-file", &cert, "--tls-key-file", &key, "--tls-ca-cert-file", &ca]);
    flags.extend(extra);
    Server::single(dir, &flags)
}

fn tls_addr() -> SocketAddr {
    format!("127.0.0.1:{}", free_port("127.0.0.1")).parse().unwrap()
}

/// A test's node with a TLS port, its certificates made for it in a directory of its own.
struct TlsNode {
    server: Server,
    tls: SocketAddr,
    /// The CA file clients trust.
    ca: String,
    certs: PathBuf,
    /// Last, so that it is removed after the server has stopped.
    dir: tempfile::TempDir,
}

impl TlsNode {
    /// [`tls_node`] with `extra` flags, over [`certs`]; ready.
    fn start(extra: &[&str]) -> TlsNode {
        let dir = tempfile::tempdir().unwrap();
        let certs = certs(&dir.path().join("certs"));
        let tls = tls_addr();
        let server = tls_node(dir.path(), &certs, tls, extra);
        TlsNode { server, tls, ca: path(&certs, "ca.crt"), certs, dir }
    }
}

/// `redis-cli --tls` against `addr`, trusting `ca`, with the client certificate of `client` (in `certs`) if
/// given; what it printed to stdout and stderr, trimmed. Bounded by coreutils' `timeout`.
fn redis_cli_tls(addr: SocketAddr, ca: &str, client: Option<(&Path, &str)>, words: &[&str]) -> String {
    let mut cmd = Command::new("timeout");
    cmd.args(["20", "redis-cli", "--tls", "--cacert", ca, "-h", "127.0.0.1", "-p", &addr.port().to_string()]);
    if let Some((certs, user)) = client {
        cmd.args(["--cert", &path(certs, &format!("client.{user}.crt"))]);
        cmd.args(["--key", &path(certs, &format!("client.{user}.key"))]);
    }
    let out = cmd.args(words).output().expect("redis-cli (apt-get install redis-tools)");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    text.trim().to_string()
}

#[test]
fn cert_commands_make_owner_only_keys_and_refuse_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("certs");
    let ds = d.display().to_string();
    let no_ca = meridian(&["cert", "create-client", "bob", "--certs-dir", &ds]);
    assert!(!no_ca.status.success());
    assert!(stderr(&no_ca).contains("make one first with `meridian cert create-ca"), "{}", stderr(&no_ca));

    certs(&d);
    for key in ["ca.key", "node.key", "client.alice.key"] {
        let mode = std::fs::metadata(d.join(key)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{key}");
    }
    let before = std::fs::read(d.join("ca.crt")).unwrap();
    let again = meridian(&["cert", "create-ca", "--certs-dir", &ds]);
    assert!(!again.status.success());
    assert!(stderr(&again).contains("ca.crt exists; give --overwrite to replace it"), "{}", stderr(&again));
    let again = meridian(&["cert", "create-client", "alice", "--certs-dir", &ds]);
    assert!(stderr(&again).contains("client.alice.crt exists"), "{}", stderr(&again));
    assert_eq!(std::fs::read(d.join("ca.crt")).unwrap(), before, "a refused command changes nothing");

    let other = dir.path().join("other").display().to_string();
    assert!(meridian(&["cert", "create-ca", "--certs-dir", &other]).status.success());
    let foreign_key = format!("{other}/ca.key");
    let mismatch = meridian(&["cert", "create-client", "bob", "--certs-dir", &ds, "--ca-key", &foreign_key]);
    assert!(stderr(&mismatch).contains("is not this certificate's key"), "{}", stderr(&mismatch));

    let overwrite =
        meridian(&["cert", "create-client", "alice", "--certs-dir", &ds, "--overwrite", "--lifetime", "30d"]);
    assert!(overwrite.status.success(), "{}", stderr(&overwrite));
}

#[test]
fn redis_cli_and_redis_py_are_served_over_tls_only_with_a_client_certificate() {
    let node = TlsNode::start(&[]);
    let (tls, ca, certs) = (node.tls, node.ca.as_str(), node.certs.as_path());

    assert_eq!(redis_cli_tls(tls, ca, Some((certs, "alice")), &["SET", "k", "v"]), "OK");
    assert_eq!(redis_cli_tls(tls, ca, Some((certs, "alice")), &["GET", "k"]), "v");
    let without = redis_cli_tls(tls, ca, None, &["GET", "k"]);
    assert!(without.starts_with("Error"), "served without a client certificate: {without}");

    let script = "import redis, sys\n\
        port, certs = int(sys.argv[1]), sys.argv[2]\n\
        def client(**kw):\n\
        \x20   return redis.Redis(host='127.0.0.1', port=port, ssl=True, ssl_ca_certs=certs + '/ca.crt', **kw)\n\
        try:\n\
        \x20   client().get('k')\n\
        \x20   print('served without a certificate')\n\
        except redis.exceptions.ConnectionError:\n\
        \x20   print('refused')\n\
        c = client(ssl_certfile=certs + '/client.alice.crt', ssl_keyfile=certs + '/client.alice.key')\n\
        c.set('py', 'yes')\n\
        print(c.get('k').decode(), c.get('py').decode())\n\
        big = bytes(range(256)) * 1200\n\
        c.set('big', big)\n\
        p = c.pipeline(transaction=False)\n\
        for _ in range(40):\n\
        \x20   p.get('big')\n\
        print(all(v == big for v in p.execute()))\n";
    let out = Command::new("timeout")
        .args(["30", support::python_with("redis", "python3-redis"), "-c", script])
        .args([&tls.port().to_string(), &certs.display().to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    // The pipeline's 12 MB of replies outrun the socket's buffers: written by the outbox and by the connection.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "refused\nv yes\nTrue\n");
}

#[test]
fn optional_client_certificates_serve_clients_without_one() {
    let node = TlsNode::start(&["--tls-auth-clients", "optional"]);
    let (tls, ca, certs) = (node.tls, node.ca.as_str(), node.certs.as_path());
    assert_eq!(redis_cli_tls(tls, ca, None, &["SET", "k", "v"]), "OK");
    assert_eq!(redis_cli_tls(tls, ca, Some((certs, "alice")), &["GET", "k"]), "v");
}

#[test]
fn certificates_of_another_ca_are_refused_on_either_side() {
    let node = TlsNode::start(&[]);
    let (tls, certs, server) = (node.tls, node.certs.as_path(), &node.server);
    let other = certs_of_other_ca(&node.dir.path().join("other"));

    let foreign_client = redis_cli_tls(tls, &node.ca, Some((&other, "alice")), &["PING"]);
    assert_ne!(foreign_client, "PONG", "a client certificate of another CA was accepted");
    let untrusted_node = redis_cli_tls(tls, &path(&other, "ca.crt"), Some((&other, "alice")), &["PING"]);
    assert!(untrusted_node.contains("certificate verify failed"), "{untrusted_node}");
    assert_eq!(redis_cli_tls(tls, &node.ca, Some((certs, "alice")), &["PING"]), "PONG");
    assert!(handshake_failures(server) >= 1, "the refused handshakes are counted");
}

fn certs_of_other_ca(dir: &Path) -> PathBuf {
    let d = dir.display().to_string();
    assert!(meridian(&["cert", "create-ca", "--certs-dir", &d]).status.success());
    assert!(meridian(&["cert", "create-client", "alice", "--certs-dir", &d]).status.success());
    dir.to_path_buf()
}

/// `meridian_tls_handshake_failures_total{reason="error"}` from the node's /metrics.
fn handshake_failures(server: &Server) -> u64 {
    let metrics = server.http_get("/metrics");
    let line = metrics.lines().find(|l| l.starts_with("meridian_tls_handshake_failures_total{reason=\"error\"}"));
    line.and_then(|l| l.rsplit(' ').next()?.parse().ok()).expect("the handshake failure counter in /metrics")
}

#[test]
fn garbage_and_silence_on_the_tls_port_hold_up_no_other_client() {
    let node = TlsNode::start(&[]);
    let (tls, certs, server) = (node.tls, node.certs.as_path(), &node.server);
    let failures = handshake_failures(server);

    let silent: Vec<TcpStream> = (0..8).map(|_| TcpStream::connect(tls).unwrap()).collect();
    let mut garbage = TcpStream::connect(tls).unwrap();
    garbage.write_all(b"*1\r\n$4\r\nPING\r\n not TLS at all \x00\xff\x16\x03\x01").unwrap();
    let started = Instant::now();
    assert_eq!(redis_cli_tls(tls, &node.ca, Some((certs, "alice")), &["SET", "k", "v"]), "OK");
    assert!(started.elapsed() < Duration::from_secs(5), "served in {:?}", started.elapsed());

    let deadline = Instant::now() + Duration::from_secs(10);
    while handshake_failures(server) <= failures {
        assert!(Instant::now() < deadline, "the garbage handshake was never counted");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(silent);
}

#[test]
fn listen_off_leaves_only_the_tls_port() {
    let dir = tempfile::tempdir().unwrap();
    let certs = certs(&dir.path().join("certs"));
    let (plain, tls) = (tls_addr(), tls_addr());
    let peer = tls_addr();
    // The file asks for a plain port; --listen off on the command line overrides it.
    let config = dir.path().join("meridian.toml");
    std::fs::write(&config, format!("listen = \"{plain}\"\ntls_port = {}\n", tls.port())).unwrap();
    let data = dir.path().join("data").display().to_string();
    let (cert, key, ca) = (path(&certs, "node.crt"), path(&certs, "node.key"), path(&certs, "ca.crt"));
    let args: Vec<String> = [
        "server",
        "--config",
        &config.display().to_string(),
        "--listen",
        "off",
        "--node-id",
        "1",
        "--replication",
        "1",
        "--peers",
        &format!("1={peer}"),
        "--peer-listen",
        &peer.to_string(),
        "--data-dir",
        &data,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca,
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let printed = meridian(&[args.iter().map(String::as_str).collect::<Vec<_>>(), vec!["--print-config"]].concat());
    let printed = String::from_utf8_lossy(&printed.stdout).into_owned();
    assert!(
        printed.contains("listen = \"off\"") && printed.contains(&format!("tls_port = \"{}\"", tls.port())),
        "{printed}"
    );

    let _server = Server::run(1, plain, tls_addr(), args, dir.path());
    let deadline = Instant::now() + Duration::from_secs(20);
    while redis_cli_tls(tls, &ca, Some((&certs, "alice")), &["SET", "k", "v"]) != "OK" {
        assert!(Instant::now() < deadline, "never served over TLS");
        std::thread::sleep(Duration::from_millis(100));
    }
    let refused = TcpStream::connect_timeout(&plain, Duration::from_secs(2)).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
}

#[test]
fn bad_tls_settings_stop_the_node_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let certs = certs(&dir.path().join("certs"));
    let other = certs_of_other_ca(&dir.path().join("other"));
    let (cert, key) = (path(&certs, "node.crt"), path(&certs, "node.key"));
    let foreign_key = path(&other, "ca.key");
    let missing = path(dir.path(), "missing.crt");
    let cases: [(&[&str], &str); 8] = [
        (&["--tls-port", "0"], "--tls-port needs --tls-cert-file"),
        (&["--tls-port", "0", "--tls-cert-file", &cert], "--tls-port needs --tls-key-file"),
        (&["--tls-cert-file", &cert, "--tls-key-file", &key], "--tls-cert-file is given without --tls-port"),
        (&["off"], "--listen off leaves the node no client port"),
        (&["--tls-port", "0", "--tls-cert-file", &missing, "--tls-key-file", &key], "cannot read the certificate file"),
        (
            &["--tls-port", "0", "--tls-cert-file", &cert, "--tls-key-file", &foreign_key],
            "does not belong to the certificate",
        ),
        (
            &["--tls-port", "0", "--tls-cert-file", &cert, "--tls-key-file", &key, "--tls-auth-clients", "yes"],
            "needs a CA file",
        ),
        (
            &["--tls-port", "0", "--tls-cert-file", &cert, "--tls-key-file", &key, "--tls-auth-clients-user", "CN"],
            "tls-auth-clients-user CN takes users from client certificates, which the port does not ask for",
        ),
    ];
    let data = dir.path().join("data");
    for (flags, error) in cases {
        // `["off"]` stands for `--listen off`; the other cases have a plain port.
        let (listen, flags) = if flags == ["off"] { ("off", &[][..]) } else { ("127.0.0.1:0", flags) };
        let out = Command::new(env!("CARGO_BIN_EXE_meridian"))
            .args(["server", "--node-id", "1", "--peers", "1=127.0.0.1:1", "--peer-listen", "127.0.0.1:0"])
            .args(["--listen", listen, "--data-dir", &data.display().to_string()])
            .args(flags)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(error), "{flags:?}: {}", stderr(&out));
        assert!(!data.exists(), "{flags:?}: the data directory was claimed");
    }
}

/// `meridian bench ycsb --tls`, the client of bench/compare's TLS rows, loads and reads through the TLS port
/// with a client certificate, and without the CA file it is refused before it connects.
#[test]
fn bench_ycsb_drives_the_tls_port() {
    let node = TlsNode::start(&[]);
    let (tls, certs) = (node.tls, node.certs.as_path());
    let (ca, cert, key) = (node.ca.as_str(), path(certs, "client.alice.crt"), path(certs, "client.alice.key"));
    let addr = tls.to_string();
    let common = ["bench", "ycsb", "--addr", &addr, "--workload", "c", "--records", "200", "--clients", "4"];
    let tls_flags = ["--tls", "--cacert", ca, "--cert", &cert, "--key", &key, "--duration", "1"];
    let json = path(node.dir.path(), "report.json");
    let out = meridian(&[&common[..], &tls_flags[..], &["--json", &json]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for phase in report["phases"].as_array().unwrap() {
        assert_eq!(phase["errors"], 0, "{phase}");
        assert!(phase["operations"].as_u64().unwrap() >= 200, "{phase}");
    }
    let without_ca = meridian(&[&common[..], &["--tls"]].concat());
    assert!(!without_ca.status.success() && stderr(&without_ca).contains("--cacert"), "{}", stderr(&without_ca));
}

/// ACL users over the TLS port: `redis-cli --tls --user --pass`, a read-only user refused a write with NOPERM,
/// a wrong password refused, and the default user turned off so that only named users are served.
#[test]
fn acl_users_authenticate_over_tls() {
    let node = TlsNode::start(&["--tls-auth-clients", "optional"]);
    let (tls, ca) = (node.tls, node.ca.as_str());
    let as_user = |user: &str, pass: &str, words: &[&str]| {
        let auth = ["--user", user, "--pass", pass, "--no-auth-warning"];
        redis_cli_tls(tls, ca, None, &[&auth[..], words].concat())
    };
    assert_eq!(redis_cli_tls(tls, ca, None, &["ACL", "SETUSER", "ro", "on", ">pw", "~*", "+@read"]), "OK");
    assert_eq!(redis_cli_tls(tls, ca, None, &["SET", "k", "v"]), "OK");
    assert_eq!(as_user("ro", "pw", &["GET", "k"]), "v");
    assert_eq!(as_user("ro", "pw", &["SET", "k", "w"]), "NOPERM this user has no permissions to run the 'set' command");
    assert!(as_user("ro", "nope", &["GET", "k"]).contains("WRONGPASS"));
    assert_eq!(redis_cli_tls(tls, ca, None, &["ACL", "SETUSER", "default", "off"]), "OK");
    assert!(redis_cli_tls(tls, ca, None, &["GET", "k"]).contains("NOAUTH"), "the default user is off");
    assert_eq!(as_user("ro", "pw", &["GET", "k"]), "v");
}

/// `--tls-auth-clients-user CN` (Redis 8.6): a client certificate names the ACL user its connection starts as,
/// without AUTH and without the user's password, if that user exists and is on; any other certificate, and every
/// certificate without the flag, starts as `default`. Later changes to the user reach such a connection as they
/// reach one that used AUTH: turned off, it goes on (new ones start as `default`); deleted, it is closed.
#[test]
fn a_client_certificate_names_the_acl_user_with_tls_auth_clients_user_cn() {
    let dir = tempfile::tempdir().unwrap();
    let certs = certs(&dir.path().join("certs"));
    let made = meridian(&["cert", "create-client", "bob", "--certs-dir", &certs.display().to_string()]);
    assert!(made.status.success(), "{}", stderr(&made));
    let (tls, ca) = (tls_addr(), path(&certs, "ca.crt"));
    let server = tls_node(dir.path(), &certs, tls, &["--tls-auth-clients-user", "CN"]);
    let as_cert = |user: &str, words: &[&str]| redis_cli_tls(tls, &ca, Some((&certs, user)), words);

    assert_eq!(as_cert("alice", &["ACL", "WHOAMI"]), "default", "no user alice yet");
    // A password alice never sends; `+acl -@admin` lets her run ACL WHOAMI but not ACL SETUSER.
    let alice = ["ACL", "SETUSER", "alice", "on", ">pw", "~*", "+@read", "+acl", "-@admin"];
    assert_eq!(server.redis_cli(0, &alice), "OK");
    assert_eq!(server.redis_cli(0, &["SET", "k", "v"]), "OK");
    assert_eq!(as_cert("alice", &["ACL", "WHOAMI"]), "alice");
    assert_eq!(as_cert("alice", &["GET", "k"]), "v");
    assert_eq!(as_cert("alice", &["SET", "k", "w"]), "NOPERM this user has no permissions to run the 'set' command");
    assert_eq!(as_cert("bob", &["ACL", "WHOAMI"]), "default", "no user bob");

    let script = "import redis, sys\n\
        port, certs = int(sys.argv[1]), sys.argv[2]\n\
        def client(user):\n\
        \x20   return redis.Redis(host='127.0.0.1', port=port, ssl=True, ssl_ca_certs=certs + '/ca.crt',\n\
        \x20                      ssl_certfile=f'{certs}/client.{user}.crt', ssl_keyfile=f'{certs}/client.{user}.key')\n\
        def whoami(c):\n\
        \x20   return c.execute_command('ACL', 'WHOAMI').decode()\n\
        alice, admin = client('alice'), client('bob')\n\
        print(whoami(alice), whoami(admin))\n\
        admin.execute_command('ACL', 'SETUSER', 'alice', 'off')\n\
        print(alice.get('k').decode(), whoami(client('alice')))\n\
        admin.execute_command('ACL', 'DELUSER', 'alice')\n\
        try:\n\
        \x20   alice.get('k')\n\
        except redis.exceptions.ResponseError as e:\n\
        \x20   print(e)\n";
    let out = Command::new("timeout")
        .args(["30", support::python_with("redis", "python3-redis"), "-c", script])
        .args([&tls.port().to_string(), &certs.display().to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "alice default\nv default\nthe user of this connection was deleted (ACL DELUSER)\n"
    );

    let off_dir = dir.path().join("off");
    std::fs::create_dir_all(&off_dir).unwrap();
    let off_tls = tls_addr();
    let off = tls_node(&off_dir, &certs, off_tls, &[]);
    assert_eq!(off.redis_cli(0, &alice), "OK");
    let whoami = redis_cli_tls(off_tls, &ca, Some((&certs, "alice")), &["ACL", "WHOAMI"]);
    assert_eq!(whoami, "default", "without the flag, alice's certificate names no one");
}
