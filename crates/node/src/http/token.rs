//! The HTTP API's token (`meridian server --http-token-file`, `docs/security.md`): with one, every request must
//! carry `Authorization: Bearer TOKEN`, but for the probes (`GET /health`, `/ready`, `/metrics`) if the operator
//! leaves them open (`--http-open-probes`); anything else gets 401 and reaches no handler. Every node of a
//! cluster is given the same token, and uses it itself to join through another node.

use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use std::fmt;
use std::sync::Arc;

/// The token, and which requests go without it.
#[derive(Clone)]
pub struct HttpToken {
    token: Arc<str>,
    open_probes: bool,
}

/// Why a token cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BadToken {
    #[error("the token is empty")]
    Empty,
    #[error("the token must be printable ASCII without spaces (it travels in an HTTP header)")]
    NotPrintable,
}

/// Never printed: a node's debug output of its options must not give the token away.
impl fmt::Debug for HttpToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpToken").field("open_probes", &self.open_probes).finish_non_exhaustive()
    }
}

impl HttpToken {
    /// `token` as read from its file: surrounding whitespace (a file's last newline) is not part of it.
    pub fn new(token: &str, open_probes: bool) -> Result<HttpToken, BadToken> {
        let token = token.trim();
        if token.is_empty() {
            return Err(BadToken::Empty);
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(BadToken::NotPrintable);
        }
        Ok(HttpToken { token: token.into(), open_probes })
    }

    /// Whether a request for `path` with `authorization` (the header's value) may go on.
    fn admits(&self, method: &Method, path: &str, authorization: Option<&[u8]>) -> bool {
        let probe = *method == Method::GET && matches!(path, "/health" | "/ready" | "/metrics");
        if probe && self.open_probes {
            return true;
        }
        let given = authorization.and_then(|a| a.strip_prefix(b"Bearer ")).unwrap_or_default();
        same(given, self.token.as_bytes())
    }
}

/// Compares in time that depends on the lengths only, so a caller cannot find the token a byte at a time.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// The axum middleware: lets admitted requests through, answers the others 401.
pub(crate) async fn check(State(token): State<Option<HttpToken>>, request: Request, next: Next) -> Response {
    let Some(token) = token else { return next.run(request).await };
    let authorization = request.headers().get(header::AUTHORIZATION).map(|v| v.as_bytes());
    if token.admits(request.method(), request.uri().path(), authorization) {
        return next.run(request).await;
    }
    let error = "this node's HTTP API needs its token: send `Authorization: Bearer TOKEN` (`meridian ctl --token-file \
                 FILE`, or MERIDIAN_TOKEN)";
    (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], Json(json!({ "error": error }))).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_token_admits_and_probes_only_when_left_open() {
        let closed = HttpToken::new("s3cret\n", false).unwrap();
        let bearer = |t: &str| format!("Bearer {t}").into_bytes();
        assert!(closed.admits(&Method::POST, "/v1/keyspaces", Some(&bearer("s3cret"))));
        for wrong in [Some(bearer("s3cre")), Some(bearer("s3crets")), Some(b"s3cret".to_vec()), None] {
            assert!(!closed.admits(&Method::POST, "/v1/keyspaces", wrong.as_deref()), "{wrong:?}");
        }
        assert!(!closed.admits(&Method::GET, "/metrics", None));
        let open = HttpToken::new("s3cret", true).unwrap();
        assert!(open.admits(&Method::GET, "/metrics", None) && open.admits(&Method::GET, "/health", None));
        assert!(!open.admits(&Method::GET, "/v1/cluster", None), "the cluster's layout is not a probe");
        assert!(!open.admits(&Method::POST, "/ready", None));
        assert_eq!(HttpToken::new(" \n", false).unwrap_err(), BadToken::Empty);
        assert_eq!(HttpToken::new("two words", false).unwrap_err(), BadToken::NotPrintable);
        assert!(!format!("{closed:?}").contains("s3cret"));
    }
}
