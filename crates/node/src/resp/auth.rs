//! Client authentication as Redis 6 does it for its `default` user (`docs/security.md`): with `--requirepass`,
//! a connection may run only AUTH, HELLO and QUIT until `AUTH [default] PASSWORD` or `HELLO 3 AUTH default
//! PASSWORD` names the password; every other command gets `-NOAUTH`. Without it every connection starts
//! authenticated, and `AUTH PASSWORD` gets Redis' error for a server without a password.
//!
//! The password is kept only as an Argon2id hash (its PHC string), taken once when the node starts; checking one
//! costs tens of milliseconds of the connection's worker, paid once per connection that authenticates.

use super::commands::{Action, Session};
use super::frame::Frame;
use super::frontend::Frontend;
use argon2::password_hash::{rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use bytes::Bytes;

/// The one user there is until ACL users exist: the one `--requirepass` gives a password.
const DEFAULT_USER: &[u8] = b"default";

/// The `default` user's password, as its hash.
#[derive(Debug, Clone)]
pub struct Password {
    phc: String,
}

impl Password {
    /// Hashes `plain` with a fresh salt.
    pub fn new(plain: &str) -> Result<Password, String> {
        if plain.is_empty() {
            return Err("the password is empty".into());
        }
        let salt = SaltString::generate(&mut OsRng);
        let hash = Argon2::default().hash_password(plain.as_bytes(), &salt).map_err(|e| e.to_string())?;
        Ok(Password { phc: hash.to_string() })
    }

    fn verify(&self, plain: &[u8]) -> bool {
        let hash = PasswordHash::new(&self.phc).expect("a hash this type made parses");
        Argon2::default().verify_password(plain, &hash).is_ok()
    }
}

/// Whether a connection that has not authenticated may run the command named `name`.
pub(super) fn open_to_all(name: &str) -> bool {
    matches!(name, "auth" | "hello" | "quit")
}

/// Redis' reply to any other command before the connection authenticated.
pub(super) fn noauth() -> Frame {
    Frame::error("NOAUTH Authentication required.")
}

/// Redis' reply to a HELLO without AUTH before the connection authenticated.
pub(super) fn hello_noauth() -> Frame {
    Frame::error(
        "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH \
         <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the \
         same time",
    )
}

/// AUTH [username] password.
pub(super) fn auth(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    match args.len() {
        2 if frontend.password.is_none() => Frame::error(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your \
             configuration is correct?",
        )
        .into(),
        2 => check(DEFAULT_USER, &args[1], session, frontend).into(),
        3 => check(&args[1], &args[2], session, frontend).into(),
        _ => Frame::error("ERR syntax error").into(),
    }
}

/// Authenticates `session` as `user` if `password` is that user's: OK, or Redis' WRONGPASS. Without a password
/// configured the `default` user takes any (Redis' `nopass`).
pub(super) fn check(user: &[u8], password: &[u8], session: &mut Session, frontend: &Frontend) -> Frame {
    let valid = user == DEFAULT_USER && frontend.password.as_ref().is_none_or(|p| p.verify(password));
    if !valid {
        return Frame::error("WRONGPASS invalid username-password pair or user is disabled.");
    }
    session.authenticated = true;
    Frame::ok()
}

#[cfg(test)]
mod tests {
    use super::super::commands::wrong_arity;
    use super::super::testing::{frontend_with_password, Scripted};
    use super::*;
    use meridian_core::Reply;

    fn session() -> Session {
        let mut s = Session::new(1);
        s.authenticated = false;
        s
    }

    #[tokio::test]
    async fn commands_wait_for_the_password_and_a_wrong_one_changes_nothing() {
        let core = Scripted::new(|_| Reply::Value(None));
        let f = frontend_with_password(core.clone(), "s3cret");
        let mut s = session();
        assert_eq!(core.run_on(&f, &mut s, &["GET", "k"]).await, noauth());
        assert_eq!(core.run_on(&f, &mut s, &["PING"]).await, noauth());
        assert_eq!(core.run_on(&f, &mut s, &["HELLO", "3"]).await, hello_noauth());
        let wrong = Frame::error("WRONGPASS invalid username-password pair or user is disabled.");
        assert_eq!(core.run_on(&f, &mut s, &["AUTH", "nope"]).await, wrong);
        assert_eq!(core.run_on(&f, &mut s, &["AUTH", "alice", "s3cret"]).await, wrong, "no such user");
        assert_eq!(core.run_on(&f, &mut s, &["GET", "k"]).await, noauth(), "still not authenticated");
        assert!(core.asked().is_empty(), "nothing reached the core");
        assert_eq!(core.run_on(&f, &mut s, &["AUTH", "s3cret"]).await, Frame::ok());
        assert_eq!(core.run_on(&f, &mut s, &["GET", "k"]).await, Frame::Null);
        let mut named = session();
        assert_eq!(core.run_on(&f, &mut named, &["AUTH", "default", "s3cret"]).await, Frame::ok());
        let mut hello = session();
        let Frame::Map(_) = core.run_on(&f, &mut hello, &["HELLO", "3", "AUTH", "default", "s3cret"]).await else {
            panic!("HELLO with the password answers who the server is");
        };
        assert!(hello.authenticated);
        assert_eq!(core.run_on(&f, &mut session(), &["AUTH"]).await, wrong_arity("auth"));
        assert_eq!(core.run_on(&f, &mut session(), &["AUTH", "a", "b", "c"]).await, Frame::error("ERR syntax error"));
    }

    #[tokio::test]
    async fn without_a_password_auth_is_refused_as_redis_refuses_it() {
        let core = Scripted::new(|_| Reply::Value(None));
        let mut s = Session::new(1);
        let refused = core.run(&mut s, &["AUTH", "x"]).await;
        assert!(matches!(&refused, Frame::Error(e) if e.contains("without any password configured")), "{refused:?}");
        assert_eq!(core.run(&mut s, &["AUTH", "default", "anything"]).await, Frame::ok(), "nopass");
    }

    #[test]
    fn a_password_is_kept_hashed() {
        let p = Password::new("s3cret").unwrap();
        assert!(!p.phc.contains("s3cret") && p.phc.starts_with("$argon2id$"), "{}", p.phc);
        assert!(p.verify(b"s3cret") && !p.verify(b"s3cre"));
        assert!(Password::new("").is_err());
    }
}
