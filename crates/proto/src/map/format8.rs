//! Maps of formats 7 and 8, read to upgrade: the map as builds before ACL users wrote it. Their commands decode
//! as the current ones (`SetUser` and `DelUsers` came as new variants at the end); their maps lack
//! [`ClusterMap::users`], which this frozen copy of the format-8 shape reads as none. Format 8 only added a
//! protocol variant to format 7, and format 7's shape is format 6's followed by the affiliated nodes' hosts.
//!
//! Never change this type: it describes bytes already on disks.

use super::format6::Map6;
use super::ClusterMap;
use meridian_core::NodeId;
use serde::Deserialize;
use std::collections::BTreeMap;

/// Decodes a map of format 7 or 8.
pub fn map(bytes: &[u8]) -> postcard::Result<ClusterMap> {
    postcard::from_bytes::<Map8>(bytes).map(Map8::upgrade)
}

#[derive(Deserialize)]
pub(super) struct Map8 {
    pub(super) format6: Map6,
    pub(super) hosts: BTreeMap<NodeId, NodeId>,
}

impl Map8 {
    pub(super) fn upgrade(self) -> ClusterMap {
        self.format6.format5.upgrade(self.format6.masters, self.hosts)
    }
}
