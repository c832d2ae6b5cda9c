//! Who may use the HTTP API (docs/security.md). A node with neither a token (`--http-token-file`) nor client
//! certificates (`--http-tls-ca-cert-file`) admits every request. Otherwise a request needs the token, or a
//! connection whose certificate, signed by the CA, names a node of the cluster (`node-N`: a joining node
//! presents its own) or an ACL user who may change users (`ACL SETUSER`: such a user can already give itself
//! every right, so the API grants it nothing more). The probes (`GET /health`, `/ready`, `/metrics`) go without
//! either if the operator leaves them open (`--http-open-probes`). Anything else gets 401 or 403 and reaches no
//! handler.

use super::tls::Caller;
use super::token::HttpToken;
use crate::resp::acl::may_change_users;
use crate::transport::node_named;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use meridian_core::acl::{Access, User, DEFAULT_USER};
use serde_json::json;
use std::sync::Arc;
use tokio::sync::watch;

/// What the HTTP API asks of callers.
#[derive(Clone)]
pub(crate) struct Admission {
    token: Option<HttpToken>,
    /// Whether the port asks callers for a certificate (it is TLS, with a CA to check them against).
    certificates: bool,
    open_probes: bool,
    users: Users,
}

/// The ACL users a certificate may name: the map's as the core publishes them, and this node's own `default`
/// user if the map has none.
#[derive(Clone)]
pub(crate) struct Users {
    pub(crate) access: watch::Receiver<Option<Arc<Access>>>,
    pub(crate) default_user: User,
}

impl Users {
    fn named(&self, name: &str) -> Option<User> {
        let mapped = self.access.borrow().as_ref().and_then(|a| a.users.get(name).cloned());
        mapped.or_else(|| (name == DEFAULT_USER).then(|| self.default_user.clone()))
    }
}

/// What becomes of a request.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Admitted,
    /// Neither the token nor a certificate came with it.
    Unauthenticated,
    /// A certificate came with it, but does not admit it: why.
    Forbidden(String),
}

impl Admission {
    pub(crate) fn new(token: Option<HttpToken>, certificates: bool, open_probes: bool, users: Users) -> Admission {
        Admission { token, certificates, open_probes, users }
    }

    fn judge(&self, method: &Method, path: &str, authorization: Option<&[u8]>, caller: Option<&Caller>) -> Verdict {
        if self.token.is_none() && !self.certificates {
            return Verdict::Admitted;
        }
        let probe = *method == Method::GET && matches!(path, "/health" | "/ready" | "/metrics");
        if (probe && self.open_probes) || self.token.as_ref().is_some_and(|t| t.admits(authorization)) {
            return Verdict::Admitted;
        }
        match caller.and_then(|c| c.certificate.as_ref()) {
            None => Verdict::Unauthenticated,
            Some(Err(why)) => Verdict::Forbidden(format!("the client certificate names no one: {why}")),
            Some(Ok(name)) => self.judge_certificate(name),
        }
    }

    fn judge_certificate(&self, name: &str) -> Verdict {
        if node_named(name).is_some() {
            return Verdict::Admitted;
        }
        let refused = |why: &str| Verdict::Forbidden(format!("the client certificate is for {name:?}, {why}"));
        match self.users.named(name) {
            None => refused("which is neither a node (node-N) nor an ACL user"),
            Some(user) if !user.enabled => refused("an ACL user who is off"),
            Some(user) if !may_change_users(&user) => {
                refused("an ACL user who may not change users (ACL SETUSER), which the HTTP API asks of a user")
            }
            Some(_) => Verdict::Admitted,
        }
    }

    fn unauthenticated(&self) -> &'static str {
        match (&self.token, self.certificates) {
            (Some(_), true) => {
                "this node's HTTP API needs its token (`Authorization: Bearer TOKEN`: `meridian ctl --token-file \
                 FILE`, or MERIDIAN_TOKEN) or a client certificate of its CA (`meridian ctl --cert --key`)"
            }
            (Some(_), false) => {
                "this node's HTTP API needs its token: send `Authorization: Bearer TOKEN` (`meridian ctl \
                 --token-file FILE`, or MERIDIAN_TOKEN)"
            }
            (None, _) => "this node's HTTP API needs a client certificate of its CA (`meridian ctl --cert --key`)",
        }
    }
}

/// The axum middleware: lets admitted requests through, answers the others 401 or 403.
pub(crate) async fn check(State(admission): State<Admission>, request: Request, next: Next) -> Response {
    let authorization = request.headers().get(header::AUTHORIZATION).map(|v| v.as_bytes());
    let caller = request.extensions().get::<ConnectInfo<Caller>>().map(|c| &c.0);
    match admission.judge(request.method(), request.uri().path(), authorization, caller) {
        Verdict::Admitted => next.run(request).await,
        Verdict::Unauthenticated => {
            let error = admission.unauthenticated();
            (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], Json(json!({ "error": error })))
                .into_response()
        }
        Verdict::Forbidden(error) => (StatusCode::FORBIDDEN, Json(json!({ "error": error }))).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::acl::AclRule;

    fn admission(token: Option<&str>, certificates: bool, open_probes: bool, access: Access) -> Admission {
        let users = Users { access: watch::channel(Some(Arc::new(access))).1, default_user: User::default_user(None) };
        Admission::new(token.map(|t| HttpToken::new(t).unwrap()), certificates, open_probes, users)
    }

    fn by(name: &str) -> Caller {
        Caller { certificate: Some(Ok(name.to_string())) }
    }

    fn post(admission: &Admission, authorization: Option<&[u8]>, caller: Option<&Caller>) -> Verdict {
        admission.judge(&Method::POST, "/v1/keyspaces", authorization, caller)
    }

    #[test]
    fn the_token_admits_and_probes_go_without_it_only_when_left_open() {
        let closed = admission(Some("s3cret"), false, false, Access::default());
        assert_eq!(post(&closed, Some(b"Bearer s3cret"), None), Verdict::Admitted);
        assert_eq!(post(&closed, Some(b"Bearer s3cre"), None), Verdict::Unauthenticated);
        assert_eq!(closed.judge(&Method::GET, "/metrics", None, None), Verdict::Unauthenticated);
        let open = admission(Some("s3cret"), false, true, Access::default());
        assert_eq!(open.judge(&Method::GET, "/metrics", None, None), Verdict::Admitted);
        assert_eq!(open.judge(&Method::GET, "/health", None, None), Verdict::Admitted);
        assert_eq!(open.judge(&Method::GET, "/v1/cluster", None, None), Verdict::Unauthenticated);
        assert_eq!(open.judge(&Method::POST, "/ready", None, None), Verdict::Unauthenticated);
        let unguarded = admission(None, false, false, Access::default());
        assert_eq!(post(&unguarded, None, None), Verdict::Admitted);
    }

    #[test]
    fn a_certificate_admits_a_node_or_a_user_who_may_change_users() {
        let user = |rules: &[AclRule]| User::default().applied(rules).unwrap();
        let access = Access {
            users: [
                ("admin".to_string(), user(&[AclRule::On, AclRule::AllCommands])),
                ("reader".to_string(), user(&[AclRule::On, AclRule::AllCommands, AclRule::Deny(admin())])),
                ("asleep".to_string(), user(&[AclRule::AllCommands])),
            ]
            .into(),
            keyspaces: Default::default(),
        };
        let certificates = admission(None, true, false, access);
        for admitted in ["node-3", "admin", DEFAULT_USER] {
            assert_eq!(post(&certificates, None, Some(&by(admitted))), Verdict::Admitted, "{admitted}");
        }
        for refused in ["reader", "asleep", "nobody", "node-03"] {
            let verdict = post(&certificates, None, Some(&by(refused)));
            assert!(matches!(&verdict, Verdict::Forbidden(why) if why.contains(refused)), "{refused}: {verdict:?}");
        }
        let nameless = Caller { certificate: Some(Err("no common name".into())) };
        assert!(matches!(post(&certificates, None, Some(&nameless)), Verdict::Forbidden(_)));
        assert_eq!(post(&certificates, None, None), Verdict::Unauthenticated);
        assert_eq!(post(&certificates, Some(b"Bearer s3cret"), None), Verdict::Unauthenticated, "no token is set");
    }

    fn admin() -> meridian_core::acl::CommandItem {
        meridian_core::acl::CommandItem::Category(meridian_core::acl::category("admin").unwrap())
    }
}
