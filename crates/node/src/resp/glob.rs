//! The glob patterns of CONFIG GET: `*` (any run), `?` (any byte) and `\` (escape the next byte),
//! compared ASCII-case-insensitively as Redis compares parameter names. Bracket classes are not
//! supported and match literally; no Meridian parameter name contains a bracket.

pub(crate) fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was, and the text position it currently stands for, to backtrack to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        let step = match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
                continue;
            }
            Some(b'?') => Some(1),
            Some(b'\\') => pattern.get(p + 1).filter(|c| c.eq_ignore_ascii_case(&text[t])).map(|_| 2),
            Some(c) => c.eq_ignore_ascii_case(&text[t]).then_some(1),
            None => None,
        };
        match (step, star) {
            (Some(width), _) => {
                p += width;
                t += 1;
            }
            (None, Some((star_p, star_t))) => {
                star = Some((star_p, star_t + 1));
                p = star_p + 1;
                t = star_t + 1;
            }
            (None, None) => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn matches_like_redis_config_get() {
        assert!(glob_match(b"*", b"databases"));
        assert!(glob_match(b"DATA*", b"databases"));
        assert!(glob_match(b"*max*len", b"proto-max-bulk-len"));
        assert!(glob_match(b"d?tabases", b"databases"));
        assert!(glob_match(b"data\\bases", b"databases"));
        assert!(!glob_match(b"save", b"databases"));
        assert!(!glob_match(b"data", b"databases"));
        assert!(!glob_match(b"*x", b"databases"));
        assert!(glob_match(b"**", b""));
    }
}
