//! ACL users in the map (`meridian_core::acl`): `ACL SETUSER` and `ACL DELUSER` as log entries, so every node
//! enforces the same users and a restarted node keeps them. The map travels whole in every change, so it bounds
//! how many users it keeps and how many rules each may gather.

use super::{Applied, ClusterMap, MapError};
use meridian_core::acl::{AclError, AclRule, User, DEFAULT_USER};

/// Users the map keeps at most.
pub const USERS_MAX: usize = 1024;
/// Passwords, key patterns, keyspace patterns and command rules one user may have, together.
pub const USER_RULES_MAX: usize = 256;
/// The longest user name, in bytes.
pub const USER_NAME_MAX: usize = 128;

/// A user name is 1 to [`USER_NAME_MAX`] printable ASCII bytes other than the space, which separates the words
/// of `ACL LIST`.
pub fn validate_user_name(name: &str) -> Result<(), MapError> {
    let printable = name.bytes().all(|b| b.is_ascii_graphic());
    if name.is_empty() || name.len() > USER_NAME_MAX || !printable {
        return Err(MapError::BadUserName(name.into()));
    }
    Ok(())
}

fn size(user: &User) -> usize {
    user.passwords.len() + user.keys.len() + user.keyspaces.len() + user.commands.rules.len()
}

impl ClusterMap {
    /// Applies `rules` to user `name`; a user the map lacks starts as `base` (the `default` user as the node that
    /// took the command had it), or as a new user.
    pub(super) fn set_user(&mut self, name: &str, base: &Option<User>, rules: &[AclRule]) -> Result<Applied, MapError> {
        validate_user_name(name)?;
        let before = self.users.get(name);
        if before.is_none() && self.users.len() >= USERS_MAX {
            return Err(MapError::TooManyUsers);
        }
        let start = before.or(base.as_ref()).cloned().unwrap_or_default();
        let user = start.applied(rules).map_err(MapError::Acl)?;
        if size(&user) > USER_RULES_MAX {
            return Err(MapError::UserTooLarge(name.into()));
        }
        if before == Some(&user) {
            return Ok(Applied::Unchanged);
        }
        self.users.insert(name.into(), user);
        Ok(Applied::Changed)
    }

    /// Removes the users named; those the map lacks are no error.
    pub(super) fn del_users(&mut self, names: &[String]) -> Result<Applied, MapError> {
        if names.iter().any(|n| n == DEFAULT_USER) {
            return Err(MapError::Acl(AclError::DefaultUser));
        }
        let before = self.users.len();
        self.users.retain(|name, _| !names.contains(name));
        Ok(if self.users.len() == before { Applied::Unchanged } else { Applied::Changed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::acl::CommandItem;

    fn rules() -> Vec<AclRule> {
        vec![AclRule::On, AclRule::AddPassword("$argon2id$h".into()), AclRule::Allow(CommandItem::Category(1))]
    }

    #[test]
    fn users_are_set_once_and_deleted_but_never_the_default_one() {
        let mut map = ClusterMap::default();
        assert_eq!(map.set_user("alice", &None, &rules()), Ok(Applied::Changed));
        assert_eq!(map.set_user("alice", &None, &rules()), Ok(Applied::Unchanged), "the same rules again");
        assert!(map.users["alice"].enabled);
        let base = Some(User::default_user(Some("$argon2id$node".into())));
        assert_eq!(map.set_user(DEFAULT_USER, &base, &[AclRule::Off]), Ok(Applied::Changed));
        assert!(map.users[DEFAULT_USER].passwords.contains("$argon2id$node"), "from the node's own default user");
        assert_eq!(map.del_users(&["default".into()]), Err(MapError::Acl(AclError::DefaultUser)));
        assert_eq!(map.del_users(&["bob".into()]), Ok(Applied::Unchanged));
        assert_eq!(map.del_users(&["alice".into(), "bob".into()]), Ok(Applied::Changed));
        assert!(!map.users.contains_key("alice"));
    }

    #[test]
    fn bad_names_and_oversized_users_change_nothing() {
        let mut map = ClusterMap::default();
        for name in ["", "has space", &"x".repeat(USER_NAME_MAX + 1)] {
            assert_eq!(map.set_user(name, &None, &rules()), Err(MapError::BadUserName(name.into())));
        }
        let many: Vec<AclRule> = (0..=USER_RULES_MAX).map(|i| AclRule::AddPassword(format!("h{i}"))).collect();
        assert_eq!(map.set_user("big", &None, &many), Err(MapError::UserTooLarge("big".into())));
        let after_all = [AclRule::ResetKeyspaces, AclRule::AddKeyspaces("*".into()), AclRule::AddKeyspaces("x".into())];
        assert_eq!(map.set_user("u", &None, &after_all), Err(MapError::Acl(AclError::KeyspacesAfterAll)));
        assert!(map.users.is_empty());
    }
}
