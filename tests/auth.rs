//! `meridian server --requirepass` on a real process (docs/security.md): redis-cli and redis-py are refused
//! without the password and with a wrong one, and served with the right one, given by AUTH, by `redis-cli -a`,
//! by redis-py's `password=` or by `HELLO 3 AUTH default PASSWORD`.

mod support;

use std::process::Command;
use std::time::Duration;
use support::resp::{Conn, Resp};
use support::Server;

#[test]
fn clients_are_served_only_once_they_name_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::single(dir.path(), &["--requirepass", "s3cret"]);

    assert_eq!(server.redis_cli(0, &["SET", "k", "v"]), "NOAUTH Authentication required.");
    let wrong = server.redis_cli(0, &["-a", "nope", "--no-auth-warning", "GET", "k"]);
    assert_eq!(wrong, "NOAUTH Authentication required.", "its AUTH failed, so its GET is refused");
    assert_eq!(server.redis_cli(0, &["-a", "s3cret", "--no-auth-warning", "SET", "k", "v"]), "OK");
    assert_eq!(server.redis_cli(0, &["--user", "default", "--pass", "s3cret", "--no-auth-warning", "GET", "k"]), "v");

    let mut c = Conn::connect(server.resp, Duration::from_secs(5)).unwrap();
    assert_eq!(c.cmd(&["GET", "k"]).unwrap(), Resp::Error("NOAUTH Authentication required.".into()));
    assert!(matches!(c.cmd(&["HELLO", "3"]).unwrap(), Resp::Error(e) if e.starts_with("NOAUTH HELLO must be called")));
    assert!(matches!(c.cmd(&["HELLO", "2", "AUTH", "default", "s3cret"]).unwrap(), Resp::Array(Some(_))));
    assert_eq!(c.cmd(&["GET", "k"]).unwrap(), Resp::bulk("v"), "authenticated by HELLO");

    let script = "import redis, sys\n\
        port = int(sys.argv[1])\n\
        for password in (None, 'nope'):\n\
        \x20   try:\n\
        \x20       redis.Redis(host='127.0.0.1', port=port, password=password).get('k')\n\
        \x20       print('served without the password')\n\
        \x20   except (redis.exceptions.AuthenticationError, redis.exceptions.ResponseError) as e:\n\
        \x20       print('refused:', e)\n\
        print(redis.Redis(host='127.0.0.1', port=port, password='s3cret').get('k').decode())\n";
    let out = Command::new(support::python_with("redis", "python3-redis"))
        .args(["-c", script, &server.resp.port().to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), 3, "{printed}");
    assert!(lines[0].starts_with("refused: Authentication required"), "{printed}");
    assert!(lines[1].starts_with("refused: WRONGPASS"), "{printed}");
    assert_eq!(lines[2], "v");
}

#[test]
fn an_empty_password_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["server", "--node-id", "1", "--peers", "1=127.0.0.1:1", "--peer-listen", "127.0.0.1:0"])
        .args(["--data-dir", &dir.path().display().to_string(), "--requirepass", ""])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--requirepass: the password is empty"), "{err}");
}
