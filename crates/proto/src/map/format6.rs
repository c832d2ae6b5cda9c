//! Maps of format 6, read to upgrade: the map as builds before affiliated nodes wrote it. Its commands decode
//! as the current ones (`AddAffiliate` came as a new variant at the end); its maps lack [`ClusterMap::hosts`],
//! which this frozen copy of the format-6 shape reads as empty. Postcard encodes a struct as its fields in
//! order, so format 5's fields followed by the masters are format 6's.
//!
//! Never change this type: it describes bytes already on disks.

use super::format5::Map5;
use super::{ClusterMap, KeyMasters};
use meridian_core::KeyspaceId;
use serde::Deserialize;
use std::collections::BTreeMap;

/// Decodes a map of format 6.
pub fn map(bytes: &[u8]) -> postcard::Result<ClusterMap> {
    postcard::from_bytes::<Map6>(bytes).map(|m| m.format5.upgrade(m.masters, BTreeMap::new()))
}

#[derive(Deserialize)]
pub(super) struct Map6 {
    pub(super) format5: Map5,
    pub(super) masters: BTreeMap<KeyspaceId, KeyMasters>,
}
