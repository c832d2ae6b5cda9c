//! `ACL SETUSER`'s words as rules (`meridian_core::acl::AclRule`), with Redis' wording for the ones it refuses.
//! Passwords are hashed here, on the node that took the command, so the cluster map never holds one.

use super::super::auth::{hash_for_user, is_password_hash};
use super::super::commands::lookup;
use bytes::Bytes;
use meridian_core::acl::{category, AclRule, CommandItem, KeyPattern, User};

/// Why a word is not a rule: Redis' text after "Error in ACL SETUSER modifier '...': ".
pub(crate) type RuleError = String;

/// The rules `words` give user `name`, and what they make of `user` (its state now): Redis' error for the
/// first word that is not a rule or cannot apply.
pub fn applied(name: &str, mut user: User, words: &[Bytes]) -> Result<(User, Vec<AclRule>), String> {
    let mut rules = Vec::with_capacity(words.len());
    for word in words {
        let rule = parse(name, word).and_then(|rule| user.apply(&rule).map(|()| rule).map_err(|e| e.to_string()));
        match rule {
            Ok(rule) => rules.push(rule),
            Err(why) => {
                let word = String::from_utf8_lossy(word);
                return Err(format!("ERR Error in ACL SETUSER modifier '{word}': {why}"));
            }
        }
    }
    Ok((user, rules))
}

/// The rule `word` gives user `user`.
pub(crate) fn parse(user: &str, word: &[u8]) -> Result<AclRule, RuleError> {
    let text = String::from_utf8_lossy(word);
    if let Some(rule) = flag(&text.to_ascii_lowercase()) {
        return Ok(rule);
    }
    let (first, rest) = (word.first().copied().unwrap_or(b' '), word.get(1..).unwrap_or_default());
    let rest_text = String::from_utf8_lossy(rest);
    match first {
        b'>' => Ok(AclRule::AddPassword(hash_for_user(user, rest))),
        b'<' => Ok(AclRule::RemovePassword(hash_for_user(user, rest))),
        b'#' => Ok(AclRule::AddPassword(password_hash(&rest_text)?)),
        b'!' => Ok(AclRule::RemovePassword(password_hash(&rest_text)?)),
        b'~' => Ok(keys(rest, true, true)),
        b'%' => key_access(rest),
        b'+' if rest_text.eq_ignore_ascii_case("@all") => Ok(AclRule::AllCommands),
        b'-' if rest_text.eq_ignore_ascii_case("@all") => Ok(AclRule::NoCommands),
        b'+' => command_item(&rest_text).map(AclRule::Allow),
        b'-' => command_item(&rest_text).map(AclRule::Deny),
        b'&' => Err(no_channels()),
        _ if matches!(text.to_ascii_lowercase().as_str(), "allchannels" | "resetchannels") => Err(no_channels()),
        _ if text.starts_with("ks~") && text.len() > 3 => Ok(AclRule::AddKeyspaces(text[3..].to_string())),
        _ => Err("Syntax error".into()),
    }
}

/// The rules that are one word.
fn flag(word: &str) -> Option<AclRule> {
    Some(match word {
        "on" => AclRule::On,
        "off" => AclRule::Off,
        "nopass" => AclRule::NoPass,
        "resetpass" => AclRule::ResetPass,
        "allkeys" => keys(b"*", true, true),
        "resetkeys" => AclRule::ResetKeys,
        "allcommands" => AclRule::AllCommands,
        "nocommands" => AclRule::NoCommands,
        "allkeyspaces" => AclRule::AddKeyspaces("*".into()),
        "resetkeyspaces" => AclRule::ResetKeyspaces,
        "reset" => AclRule::Reset,
        _ => return None,
    })
}

fn keys(pattern: &[u8], read: bool, write: bool) -> AclRule {
    AclRule::AddKeys(KeyPattern { pattern: Bytes::copy_from_slice(pattern), read, write })
}

/// `%R~pattern`, `%W~pattern`, `%RW~pattern` (after the `%`).
fn key_access(rest: &[u8]) -> Result<AclRule, RuleError> {
    let tilde = rest.iter().position(|&b| b == b'~').ok_or("Syntax error")?;
    let (mut read, mut write) = (false, false);
    for flag in &rest[..tilde] {
        match flag.to_ascii_uppercase() {
            b'R' => read = true,
            b'W' => write = true,
            _ => return Err("Syntax error".into()),
        }
    }
    if !read && !write {
        return Err("Syntax error".into());
    }
    Ok(keys(&rest[tilde + 1..], read, write))
}

/// A stored hash given as `#hash`: Meridian keeps Argon2id hashes only, so Redis' SHA-256 ones cannot be taken.
fn password_hash(hash: &str) -> Result<String, RuleError> {
    if !is_password_hash(hash) {
        return Err("The password hash must be an Argon2id hash in PHC form ($argon2id$...), as ACL LIST shows \
                    them; give a password in clear with '>'"
            .into());
    }
    Ok(hash.to_string())
}

/// What `+`/`-` name: `@category`, `@all` (every command), or a command.
fn command_item(name: &str) -> Result<CommandItem, RuleError> {
    let lower = name.to_ascii_lowercase();
    if let Some(cat) = lower.strip_prefix('@') {
        return category(cat).map(CommandItem::Category).ok_or_else(unknown);
    }
    if lower.contains('|') {
        return Err(format!(
            "Meridian takes no rules for single subcommands or first arguments ('{name}'): allow or deny the whole \
             command"
        ));
    }
    lookup(lower.as_bytes()).map(|c| CommandItem::Command(c.name.to_string())).ok_or_else(unknown)
}

fn unknown() -> RuleError {
    "Unknown command or category name in ACL".into()
}

fn no_channels() -> RuleError {
    "Meridian has no Pub/Sub, so no channel rules".into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::splitmix::SplitMix64;

    /// A word built from the pieces rules are made of, so random words reach every branch of the parser.
    fn word(rng: &mut SplitMix64) -> Bytes {
        const WORDS: &[&str] = &["on", "allkeys", "~k:*", "%R~r*", "+@read", "-get", "ks~a", "resetkeyspaces", "+@all"];
        if rng.coin() {
            return Bytes::from(WORDS[rng.below(WORDS.len())].as_bytes().to_vec());
        }
        const PIECES: &[&[u8]] = &[
            b"on",
            b"off",
            b"nopass",
            b"reset",
            b"~",
            b"%",
            b"R",
            b"W",
            b"RW",
            b"+",
            b"-",
            b"@",
            b"all",
            b"read",
            b"get",
            b"|",
            b"ks~",
            b"*",
            b"#",
            b"!",
            b"$argon2id$",
            b"&",
            b"allkeys",
            b"resetkeys",
            b"x",
            b"\xff",
            b"",
        ];
        let mut w = Vec::new();
        for _ in 0..=rng.below(4) {
            w.extend_from_slice(PIECES[rng.below(PIECES.len())]);
        }
        Bytes::from(w)
    }

    #[test]
    fn any_words_are_taken_or_refused_and_what_is_taken_applies_alike_in_the_map() {
        let mut rng = SplitMix64::new(43);
        let (mut taken, mut refused) = (0, 0);
        for _ in 0..3000 {
            let words: Vec<Bytes> = (0..=rng.below(6)).map(|_| word(&mut rng)).collect();
            match applied("u", User::default(), &words) {
                Ok((user, rules)) => {
                    taken += 1;
                    assert_eq!(User::default().applied(&rules), Ok(user), "{words:?}");
                }
                Err(why) => {
                    refused += 1;
                    assert!(why.starts_with("ERR Error in ACL SETUSER modifier '"), "{why}");
                }
            }
        }
        assert!(taken > 300 && refused > 300, "{taken} taken, {refused} refused");
    }

    #[test]
    fn what_acl_list_prints_sets_the_same_user_again() {
        let words =
            ["on", ">pw", "~a*", "%R~b*", "%W~c*", "+@read", "-keys", "+set", "resetkeyspaces", "ks~o*", "ks~p"];
        let words: Vec<Bytes> = words.iter().map(|w| Bytes::from(w.as_bytes().to_vec())).collect();
        let (user, _) = applied("u", User::default(), &words).unwrap();
        let listed: Vec<Bytes> = user.describe().split(' ').map(|w| Bytes::from(w.as_bytes().to_vec())).collect();
        assert_eq!(applied("u", User::default(), &listed).unwrap().0, user, "{}", user.describe());
        let everything = User::default_user(None);
        let listed: Vec<Bytes> = everything.describe().split(' ').map(|w| Bytes::from(w.as_bytes().to_vec())).collect();
        assert_eq!(applied("u", User::default(), &listed).unwrap().0, everything);
    }
}
