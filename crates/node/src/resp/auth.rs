//! Client authentication as Redis 6 does it (`docs/security.md`): a connection may run only AUTH, HELLO and QUIT
//! until `AUTH [user] PASSWORD` or `HELLO 3 AUTH user PASSWORD` names a password of an enabled user, unless the
//! `default` user takes any password (`nopass`), in which case every connection starts as it. Users are the
//! cluster map's (`acl/`); without a `default` user there, each node's is its own, with the `--requirepass`
//! password if it was given one.
//!
//! Passwords are kept only as Argon2id hashes (PHC strings). Checking one costs tens of milliseconds, paid once
//! per connection that authenticates, on a thread of its own (`off_the_worker`) so that the connections sharing
//! the connection's tokio worker are not held up by a flood of AUTH commands.

use super::commands::{Action, Session};
use super::frame::Frame;
use super::frontend::Frontend;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use bytes::Bytes;
use meridian_core::acl::DEFAULT_USER;
use meridian_core::ring::key_token;

/// Why a password cannot be used: it is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the password is empty")]
pub struct EmptyPassword;

/// A node's `--requirepass` password, as its hash.
#[derive(Debug, Clone)]
pub struct Password {
    pub(crate) phc: String,
}

impl Password {
    /// Hashes `plain` as the `default` user's password: as `ACL SETUSER default >plain` would, so that once the
    /// node's default user is put in the map, `<plain` removes this password there.
    pub fn new(plain: &str) -> Result<Password, EmptyPassword> {
        if plain.is_empty() {
            return Err(EmptyPassword);
        }
        Ok(Password { phc: hash_for_user(DEFAULT_USER, plain.as_bytes()) })
    }
}

/// The hash `ACL SETUSER user >plain` keeps. Its salt is made from the user's name, not drawn at random: the same
/// password of the same user hashes alike on every node, so `<plain` can name the hash to remove and setting a
/// password twice keeps one hash. Users with the same password still get different hashes.
pub(crate) fn hash_for_user(user: &str, plain: &[u8]) -> String {
    let [a, b] = [1u8, 2].map(|n| key_token(&[b"meridian acl salt ", &[n][..], user.as_bytes()].concat()));
    let salt_bytes = [a.to_le_bytes(), b.to_le_bytes()].concat();
    let salt = SaltString::encode_b64(&salt_bytes).expect("16 bytes make a salt");
    let hash = || Argon2::default().hash_password(plain, &salt).expect("Argon2's default parameters take any password");
    off_the_worker(hash).to_string()
}

/// Whether `hash` is an Argon2id hash in PHC form.
pub(crate) fn is_password_hash(hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| h.algorithm.as_str() == "argon2id" && h.hash.is_some())
}

/// Whether `plain` is the password hashed as `phc`.
pub(crate) fn verify(phc: &str, plain: &[u8]) -> bool {
    let check = |hash: PasswordHash| off_the_worker(|| Argon2::default().verify_password(plain, &hash).is_ok());
    PasswordHash::new(phc).is_ok_and(check)
}

/// Runs `work`, an Argon2 hash or check, so that it holds up no other task: on a multi-threaded runtime (a
/// node's) the worker hands the tasks queued on it to another thread while it runs; elsewhere (unit tests, the
/// CLI hashing `--requirepass` before the runtime starts) it just runs.
fn off_the_worker<T>(work: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
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
        2 if session.guard.user_named(DEFAULT_USER, frontend).is_some_and(|u| u.nopass) => Frame::error(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your \
             configuration is correct?",
        )
        .into(),
        2 => check(DEFAULT_USER.as_bytes(), &args[1], session, frontend).into(),
        3 => check(&args[1], &args[2], session, frontend).into(),
        _ => Frame::error("ERR syntax error").into(),
    }
}

/// Authenticates `session` as `user` if `password` is one of that user's and the user is on: OK, or Redis'
/// WRONGPASS, leaving the session as it was.
pub(super) fn check(user: &[u8], password: &[u8], session: &mut Session, frontend: &Frontend) -> Frame {
    let name = String::from_utf8_lossy(user);
    let known = session.guard.user_named(&name, frontend);
    if !known.is_some_and(|u| u.accepts(|hash| verify(hash, password))) {
        return Frame::error("WRONGPASS invalid username-password pair or user is disabled.");
    }
    session.guard.authenticate(name.into_owned());
    Frame::ok()
}

#[cfg(test)]
mod tests {
    use super::super::commands::wrong_arity;
    use super::super::testing::{frontend_with_password, Scripted};
    use super::*;
    use meridian_core::Reply;

    #[tokio::test]
    async fn commands_wait_for_the_password_and_a_wrong_one_changes_nothing() {
        let core = Scripted::new(|_| Reply::Value(None));
        let f = frontend_with_password(core.clone(), "s3cret");
        let session = || Session::for_client(1, &f);
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
        assert_eq!(core.run_on(&f, &mut hello, &["GET", "k"]).await, Frame::Null);
        assert_eq!(core.run_on(&f, &mut session(), &["AUTH"]).await, wrong_arity("auth"));
        let mut many = session();
        assert_eq!(core.run_on(&f, &mut many, &["AUTH", "a", "b", "c"]).await, Frame::error("ERR syntax error"));
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
    fn passwords_are_kept_hashed() {
        let p = Password::new("s3cret").unwrap();
        assert!(!p.phc.contains("s3cret") && is_password_hash(&p.phc), "{}", p.phc);
        assert!(verify(&p.phc, b"s3cret") && !verify(&p.phc, b"s3cre"));
        assert!(Password::new("").is_err());
        assert_eq!(p.phc, hash_for_user(DEFAULT_USER, b"s3cret"), "as ACL SETUSER default >s3cret hashes it");
        let alice = hash_for_user("alice", b"pw");
        assert_eq!(alice, hash_for_user("alice", b"pw"), "one user's password hashes alike");
        assert_ne!(alice, hash_for_user("bob", b"pw"), "another user's does not");
        assert!(verify(&alice, b"pw") && !is_password_hash("5e88489") && !verify("garbage", b"pw"));
    }
}
