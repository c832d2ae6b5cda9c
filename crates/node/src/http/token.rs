//! The HTTP API's token (`meridian server --http-token-file`, `docs/security.md`): a request that carries
//! `Authorization: Bearer TOKEN` is admitted (`admission.rs`). Every node of a cluster is given the same token,
//! and uses it itself to join through another node.

use std::fmt;
use std::sync::Arc;

/// The token.
#[derive(Clone)]
pub struct HttpToken {
    token: Arc<str>,
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
        f.debug_struct("HttpToken").finish_non_exhaustive()
    }
}

impl HttpToken {
    /// `token` as read from its file: surrounding whitespace (a file's last newline) is not part of it.
    pub fn new(token: &str) -> Result<HttpToken, BadToken> {
        let token = token.trim();
        if token.is_empty() {
            return Err(BadToken::Empty);
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(BadToken::NotPrintable);
        }
        Ok(HttpToken { token: token.into() })
    }

    /// Whether `authorization` (the header's value) carries the token.
    pub(crate) fn admits(&self, authorization: Option<&[u8]>) -> bool {
        let given = authorization.and_then(|a| a.strip_prefix(b"Bearer ")).unwrap_or_default();
        same(given, self.token.as_bytes())
    }
}

/// Compares in time that depends on the lengths only, so a caller cannot find the token a byte at a time.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_token_admits() {
        let token = HttpToken::new("s3cret\n").unwrap();
        let bearer = |t: &str| format!("Bearer {t}").into_bytes();
        assert!(token.admits(Some(&bearer("s3cret"))));
        for wrong in [Some(bearer("s3cre")), Some(bearer("s3crets")), Some(b"s3cret".to_vec()), None] {
            assert!(!token.admits(wrong.as_deref()), "{wrong:?}");
        }
        assert_eq!(HttpToken::new(" \n").unwrap_err(), BadToken::Empty);
        assert_eq!(HttpToken::new("two words").unwrap_err(), BadToken::NotPrintable);
        assert!(!format!("{token:?}").contains("s3cret"));
    }
}
