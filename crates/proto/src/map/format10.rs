//! Maps of formats 9 and 10, read to upgrade: the map as builds before the manager's learners wrote it. Their
//! commands decode as the current ones (`ManagerMembership` and `WantVoters` came as new variants at the end);
//! their maps lack [`ClusterMap::manager_learners`] and [`ClusterMap::voters_wanted`], which this frozen copy of
//! the format-10 shape reads as none. Format 10 only added a command to format 9, whose shape is format 8's
//! followed by the ACL users.
//!
//! Never change this type: it describes bytes already on disks.

use super::format8::Map8;
use super::ClusterMap;
use meridian_core::acl::User;
use serde::Deserialize;
use std::collections::BTreeMap;

/// Decodes a map of format 9 or 10.
pub fn map(bytes: &[u8]) -> postcard::Result<ClusterMap> {
    postcard::from_bytes::<Map10>(bytes).map(|m| ClusterMap { users: m.users, ..m.format8.upgrade() })
}

#[derive(Deserialize)]
struct Map10 {
    format8: Map8,
    users: BTreeMap<String, User>,
}
