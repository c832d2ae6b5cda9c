//! A node's durable copy of the newest cluster map it has adopted.
//!
//! A node acts on a map (drops the data of a chain it left, copies into one it joins) only after the map is
//! durable here, so after a restart it never adopts an older map than one it acted on: an older map, say from
//! a deposed leader, could tell it to drop the data of a chain it has since joined. The file is
//! `"MMAP" | version:u8 | len:u32 | crc32c:u32 | postcard(map)`, replaced atomically (written to a temporary
//! file, synced, renamed). The version is [`MAP_FORMAT`], the map's encoding. A file of version 1 is read as
//! such (`map/format1.rs`) and written back in the current version with the next map; a file of a newer version
//! is refused with both versions named, rather than misread. A file without the magic was written before files
//! had versions: version 1.

use crate::map::{older_map, ClusterMap, ENCODED_AS_CURRENT, MAP_FORMAT};
use meridian_store::Vfs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const FILE: &str = "map";
const TMP: &str = "map.tmp";

#[derive(Debug)]
pub struct MapFile {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
}

impl MapFile {
    pub fn new(vfs: Arc<dyn Vfs>, dir: &Path) -> io::Result<MapFile> {
        vfs.create_dir_all(dir)?;
        Ok(MapFile { vfs, dir: dir.to_path_buf() })
    }

    /// The stored map, if any. A damaged file is an error: the node must not guess which chains it is in.
    pub fn load(&self) -> io::Result<Option<ClusterMap>> {
        let path = self.dir.join(FILE);
        if !self.vfs.exists(&path) {
            return Ok(None);
        }
        let file = self.vfs.open(&path)?;
        let mut bytes = vec![0; file.len()? as usize];
        file.read_exact_at(0, &mut bytes)?;
        decode(&bytes)
            .map(Some)
            .map_err(|why| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {why}", path.display())))
    }

    /// Replaces the stored map by `map`, durably.
    pub fn store(&self, map: &ClusterMap) -> io::Result<()> {
        let tmp = self.dir.join(TMP);
        if self.vfs.exists(&tmp) {
            self.vfs.remove_file(&tmp)?;
        }
        let mut file = self.vfs.open(&tmp)?;
        file.append(&encode(map))?;
        file.sync()?;
        self.vfs.rename(&tmp, &self.dir.join(FILE))
    }
}

/// What starts a map file that names its version.
const MAGIC: &[u8; 4] = b"MMAP";
/// The version of a map file written before files named theirs.
const UNNAMED_VERSION: u8 = 1;

fn encode(map: &ClusterMap) -> Vec<u8> {
    let body = postcard::to_allocvec(map).expect("maps serialize");
    let mut out = Vec::with_capacity(body.len() + 13);
    out.extend_from_slice(MAGIC);
    out.push(MAP_FORMAT);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

fn decode(bytes: &[u8]) -> Result<ClusterMap, String> {
    let (version, bytes) = match bytes.strip_prefix(MAGIC) {
        Some(rest) => rest.split_first().map(|(&v, rest)| (v, rest)).ok_or("shorter than its header")?,
        None => (UNNAMED_VERSION, bytes),
    };
    if version != MAP_FORMAT && version != 1 && !ENCODED_AS_CURRENT.contains(&version) {
        return Err(format!(
            "written in map format {version}, and this build reads formats 1 to {MAP_FORMAT}; run the build that \
             wrote it"
        ));
    }
    let (head, body) = bytes.split_at_checked(8).ok_or("shorter than its header")?;
    let len = u32::from_be_bytes(head[..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_be_bytes(head[4..].try_into().expect("4 bytes"));
    if body.len() != len || crc32c::crc32c(body) != crc {
        return Err("length or checksum mismatch".into());
    }
    match version {
        MAP_FORMAT => postcard::from_bytes(body),
        older => older_map(older, body),
    }
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::NodeId;
    use meridian_store::SimVfs;

    #[test]
    fn a_stored_map_loads_back_and_damage_is_an_error() {
        let disk = SimVfs::new();
        let file = MapFile::new(Arc::new(disk.clone()), Path::new("/m")).unwrap();
        assert!(file.load().unwrap().is_none());
        let map = ClusterMap { epoch: 7, ..ClusterMap::default() };
        file.store(&map).unwrap();
        assert_eq!(file.load().unwrap(), Some(map.clone()));
        let newer = ClusterMap { epoch: 8, ..map };
        file.store(&newer).unwrap();
        disk.crash(1);
        assert_eq!(file.load().unwrap(), Some(newer), "a stored map survives a crash");
        let mut f = disk.open(Path::new("/m/map")).unwrap();
        f.append(b"x").unwrap();
        assert!(file.load().is_err());
    }

    /// A map stored by a build of a newer version is refused with both versions named.
    #[test]
    fn a_map_of_a_newer_format_is_refused() {
        let map = ClusterMap { epoch: 3, ..ClusterMap::default() };
        let mut newer = encode(&map);
        newer[MAGIC.len()] = MAP_FORMAT + 1;
        let err = decode(&newer).unwrap_err();
        let (theirs, ours) = (format!("map format {}", MAP_FORMAT + 1), format!("formats 1 to {MAP_FORMAT}"));
        assert!(err.contains(&theirs) && err.contains(&ours), "{err}");
    }

    /// Maps of formats 2 to 5 (before per-key masters: the map without its last three fields) read with every key
    /// mastered in its keyspace's home region, of format 6 (before affiliated nodes) with none affiliated, and of
    /// formats 7 and 8 (before ACL users) with no users, and of formats 9 and 10 (before the manager's learners)
    /// with no learners and no voters wanted.
    #[test]
    fn maps_of_formats_2_to_10_read_without_their_missing_fields() {
        let users = [("alice".to_string(), meridian_core::acl::User::default_user(None))].into();
        let hosts = [(NodeId(4), NodeId(1))].into();
        let map = ClusterMap { epoch: 5, next_step: 9, hosts, users, ..ClusterMap::default() };
        let m = &map;
        let fields = (m.epoch, m.partitions, &m.nodes, &m.chains, &m.manager_voters, m.next_step, &m.keyspaces);
        let format5 = postcard::to_allocvec(&(fields, m.next_keyspace)).unwrap();
        let format6 = postcard::to_allocvec(&(fields, m.next_keyspace, &m.masters)).unwrap();
        let format8 = postcard::to_allocvec(&(fields, m.next_keyspace, &m.masters, &m.hosts)).unwrap();
        let format10 = postcard::to_allocvec(&(fields, m.next_keyspace, &m.masters, &m.hosts, &m.users)).unwrap();
        for version in 2..=10 {
            let body = match version {
                9 | 10 => &format10,
                7 | 8 => &format8,
                6 => &format6,
                _ => &format5,
            };
            let mut map = map.clone();
            if version < 9 {
                map.users.clear();
            }
            if version < 7 {
                map.hosts.clear();
            }
            let mut older = MAGIC.to_vec();
            older.push(version);
            older.extend_from_slice(&(body.len() as u32).to_be_bytes());
            older.extend_from_slice(&crc32c::crc32c(body).to_be_bytes());
            older.extend_from_slice(body);
            assert_eq!(decode(&older), Ok(map.clone()), "format {version}");
        }
    }

    /// The map file of a node that a format-1 build ran (`tests/fixtures/format1-node`: one node, keyspaces
    /// `default` and `cache`) reads with its nodes in region `default` and its keyspaces spread; so does the
    /// same map from before files named a version.
    #[test]
    fn a_format_1_map_reads_with_default_locations() {
        let named: &[u8] = include_bytes!("../../../../tests/fixtures/format1-node/map/map");
        assert_eq!(named[MAGIC.len()], 1);
        let map = decode(named).unwrap();
        assert_eq!(decode(&named[MAGIC.len() + 1..]).unwrap(), map, "a file from before versions");
        let node = &map.nodes[&meridian_core::NodeId(1)];
        assert_eq!((node.addrs.peer_addr.as_str(), &node.location), ("127.0.0.1:17101", &Default::default()));
        let names: Vec<&str> = map.keyspaces.values().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["default", "cache"]);
        assert!(map.keyspaces.values().all(|k| k.config.placement.is_spread()));
        assert_eq!(map.chains.len(), 2 * map.partitions as usize);
        assert!(map.check().is_ok());
    }
}
