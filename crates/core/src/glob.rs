//! Redis' glob patterns, as SCAN's MATCH and CONFIG GET use them: `*` (any run of bytes), `?` (any byte),
//! `[abc]`, `[^abc]` and `[a-z]` (a byte of, or not of, a class), and `\` (the next byte literally), over bytes
//! rather than characters. SCAN compares case-sensitively, CONFIG GET ignoring ASCII case, as in Redis.
//!
//! The matcher backtracks only to the last `*`, so a match costs at most `pattern.len() × text.len()` steps
//! whatever the pattern (Redis' recursive matcher can take exponential time on patterns with many stars).

/// Whether `text` matches the whole of `pattern`, comparing bytes exactly.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    matches(pattern, text, false)
}

/// [`glob_match`] ignoring ASCII case (CONFIG GET's parameter names).
pub fn glob_match_nocase(pattern: &[u8], text: &[u8]) -> bool {
    matches(pattern, text, true)
}

fn matches(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was, and the text position it currently stands for, to backtrack to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if pattern.get(p) == Some(&b'*') {
            star = Some((p, t));
            p += 1;
            continue;
        }
        match (one_byte(&pattern[p.min(pattern.len())..], text[t], nocase), star) {
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
    pattern[p.min(pattern.len())..].iter().all(|&c| c == b'*')
}

/// Whether the pattern element at the start of `pattern` (not a `*`) matches byte `c`: the pattern bytes it
/// took if so.
fn one_byte(pattern: &[u8], c: u8, nocase: bool) -> Option<usize> {
    let same = |a: u8| if nocase { a.eq_ignore_ascii_case(&c) } else { a == c };
    match pattern {
        [] => None,
        [b'?', ..] => Some(1),
        [b'\\', escaped, ..] => same(*escaped).then_some(2),
        [b'[', class @ ..] => {
            let (hit, width) = in_class(class, c, nocase);
            hit.then_some(1 + width)
        }
        [literal, ..] => same(*literal).then_some(1),
    }
}

/// Whether `c` is in the class that `class` opens (the bytes after `[`), and how many bytes the class takes
/// with its `]`. An unterminated class runs to the end of the pattern, as in Redis.
fn in_class(class: &[u8], c: u8, nocase: bool) -> (bool, usize) {
    let fold = |b: u8| if nocase { b.to_ascii_lowercase() } else { b };
    let negated = class.first() == Some(&b'^');
    let mut i = usize::from(negated);
    let mut hit = false;
    while i < class.len() && class[i] != b']' {
        match class[i..] {
            [b'\\', escaped, ..] => {
                hit |= fold(escaped) == fold(c);
                i += 2;
            }
            [lo, b'-', hi, ..] => {
                let (lo, hi) = (fold(lo.min(hi)), fold(lo.max(hi)));
                hit |= (lo..=hi).contains(&fold(c));
                i += 3;
            }
            [literal, ..] => {
                hit |= fold(literal) == fold(c);
                i += 1;
            }
            [] => unreachable!("i < class.len()"),
        }
    }
    (hit != negated, (i + 1).min(class.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_like_redis_config_get() {
        assert!(glob_match_nocase(b"*", b"databases"));
        assert!(glob_match_nocase(b"DATA*", b"databases"));
        assert!(glob_match_nocase(b"*max*len", b"proto-max-bulk-len"));
        assert!(glob_match_nocase(b"d?tabases", b"databases"));
        assert!(glob_match_nocase(b"data\\bases", b"databases"));
        assert!(!glob_match_nocase(b"save", b"databases"));
        assert!(!glob_match_nocase(b"data", b"databases"));
        assert!(!glob_match_nocase(b"*x", b"databases"));
        assert!(glob_match_nocase(b"**", b""));
        assert!(glob_match_nocase(b"[D]atabases", b"databases"));
    }

    #[test]
    fn keys_match_case_sensitively_with_classes() {
        assert!(glob_match(b"user:*", b"user:42"));
        assert!(!glob_match(b"USER:*", b"user:42"));
        assert!(glob_match(b"h[ae]llo", b"hallo") && glob_match(b"h[ae]llo", b"hello"));
        assert!(!glob_match(b"h[ae]llo", b"hillo"));
        assert!(glob_match(b"h[^e]llo", b"hallo") && !glob_match(b"h[^e]llo", b"hello"));
        assert!(glob_match(b"k[0-9]", b"k7") && glob_match(b"k[9-0]", b"k7") && !glob_match(b"k[0-9]", b"kx"));
        assert!(glob_match(b"a[\\]]b", b"a]b"));
        assert!(glob_match(b"a\\*", b"a*") && !glob_match(b"a\\*", b"ab"));
        assert!(glob_match(b"ab[c", b"abc"), "an unterminated class runs to the pattern's end");
        assert!(!glob_match(b"ab[c", b"abd"));
        assert!(glob_match(b"*[0-9]*x", b"key-5-x") && !glob_match(b"*[0-9]*x", b"key-x"));
        assert!(glob_match(b"", b"") && !glob_match(b"", b"a") && !glob_match(b"a", b""));
        assert!(glob_match(&[b'*', 0xff], &[1, 2, 0xff]), "bytes, not characters");
    }

    #[test]
    fn many_stars_cost_no_more_than_pattern_times_text() {
        let pattern = [b"*a".repeat(50), b"b".to_vec()].concat();
        assert!(!glob_match(&pattern, &b"a".repeat(4000)));
    }
}
