//! Where a node runs: its region, and within it optionally a zone and a rack (docs/regions.md). Placement
//! spreads a keyspace's replicas over distinct regions first, then zones, then racks; the WAN emulation and
//! the simulator's topologies delay messages by the round trip between two nodes' regions.
//!
//! A node given no location is in region [`DEFAULT_REGION`], with no zone and no rack: a cluster that never
//! names a region is one region, and places replicas exactly as it did before locations existed.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The region of a node that names none.
pub const DEFAULT_REGION: &str = "default";
/// Longest region, zone or rack name, in bytes.
pub const REGION_NAME_MAX: usize = 32;

/// A name that [`validate_region_name`] refuses.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "'{0}' is not a region name: 1 to {REGION_NAME_MAX} lower-case letters, digits and dashes, starting with a letter"
)]
pub struct BadRegionName(pub String);

/// A region's name: 1 to [`REGION_NAME_MAX`] lower-case letters, digits and dashes, starting with a letter, as
/// it appears on command lines, in status tables and in metric labels unquoted. Zones and racks follow the
/// same rule.
pub fn validate_region_name(name: &str) -> Result<(), BadRegionName> {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    let starts = name.starts_with(|c: char| c.is_ascii_lowercase());
    match name.len() <= REGION_NAME_MAX && starts && name.chars().all(allowed) {
        true => Ok(()),
        false => Err(BadRegionName(name.into())),
    }
}

/// A node's place in the infrastructure, coarsest first. A rack is named only within a zone.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Location {
    pub region: String,
    pub zone: Option<String>,
    pub rack: Option<String>,
}

impl Default for Location {
    fn default() -> Self {
        Location { region: DEFAULT_REGION.into(), zone: None, rack: None }
    }
}

/// Why a location was refused.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum LocationError {
    #[error(transparent)]
    Name(#[from] BadRegionName),
    #[error("a rack ('{0}') is named only within a zone: give --zone too")]
    RackWithoutZone(String),
    #[error("'{0}' is not a location: REGION, REGION/ZONE or REGION/ZONE/RACK")]
    Syntax(String),
}

impl Location {
    /// A location from its parts, each checked.
    pub fn new(region: &str, zone: Option<&str>, rack: Option<&str>) -> Result<Location, LocationError> {
        let location = Location { region: region.into(), zone: zone.map(Into::into), rack: rack.map(Into::into) };
        location.validate().map(|()| location)
    }

    /// How many levels, coarsest first, this location shares with `other`: 0 in another region, 1 in the same
    /// region, 2 in the same zone, 3 on the same rack. The more, the nearer.
    pub fn shared_levels(&self, other: &Location) -> u8 {
        let zone = self.zone.is_some() && self.zone == other.zone;
        let rack = zone && self.rack.is_some() && self.rack == other.rack;
        u8::from(self.region == other.region) * (1 + u8::from(zone) + u8::from(rack))
    }

    /// Every name follows [`validate_region_name`], and a rack has a zone: what a location from elsewhere (a
    /// join request, a configuration) must show before the cluster map takes it.
    pub fn validate(&self) -> Result<(), LocationError> {
        for name in [Some(&self.region), self.zone.as_ref(), self.rack.as_ref()].into_iter().flatten() {
            validate_region_name(name)?;
        }
        match (&self.zone, &self.rack) {
            (None, Some(rack)) => Err(LocationError::RackWithoutZone(rack.clone())),
            _ => Ok(()),
        }
    }

    /// The location of a node in region `region`, with no zone or rack.
    pub fn region(region: &str) -> Result<Location, LocationError> {
        Location::new(region, None, None)
    }

    /// The zone, qualified by its region: zones of two regions never count as one.
    pub fn zone_key(&self) -> (&str, Option<&str>) {
        (&self.region, self.zone.as_deref())
    }
}

/// `REGION`, `REGION/ZONE` or `REGION/ZONE/RACK`, as `--peers` and status tables write it.
impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.region)?;
        for part in [&self.zone, &self.rack].into_iter().flatten() {
            write!(f, "/{part}")?;
        }
        Ok(())
    }
}

impl FromStr for Location {
    type Err = LocationError;

    fn from_str(s: &str) -> Result<Location, LocationError> {
        let parts: Vec<&str> = s.split('/').collect();
        match parts[..] {
            [region] => Location::new(region, None, None),
            [region, zone] => Location::new(region, Some(zone), None),
            [region, zone, rack] => Location::new(region, Some(zone), Some(rack)),
            _ => Err(LocationError::Syntax(s.into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_every_level() {
        for text in ["eu", "eu/a", "eu/a/r1", "default"] {
            assert_eq!(text.parse::<Location>().unwrap().to_string(), text);
        }
        let full: Location = "us-east/b/r-2".parse().unwrap();
        assert_eq!(
            (full.region.as_str(), full.zone.as_deref(), full.rack.as_deref()),
            ("us-east", Some("b"), Some("r-2"))
        );
        assert_eq!(Location::default().to_string(), DEFAULT_REGION);
    }

    #[test]
    fn refuses_bad_names_and_shapes() {
        assert_eq!("EU".parse::<Location>(), Err(LocationError::Name(BadRegionName("EU".into()))));
        assert_eq!("eu//r1".parse::<Location>(), Err(LocationError::Name(BadRegionName(String::new()))));
        assert_eq!("a/b/c/d".parse::<Location>(), Err(LocationError::Syntax("a/b/c/d".into())));
        assert_eq!(Location::new("eu", None, Some("r1")), Err(LocationError::RackWithoutZone("r1".into())));
        assert!(validate_region_name(&"a".repeat(REGION_NAME_MAX)).is_ok());
        assert!(validate_region_name(&"a".repeat(REGION_NAME_MAX + 1)).is_err());
        assert!(validate_region_name("1eu").is_err() && validate_region_name("eu_1").is_err());
    }

    #[test]
    fn nearness_counts_the_levels_shared_coarsest_first() {
        let at = |text: &str| text.parse::<Location>().unwrap();
        let levels = |a: &str, b: &str| at(a).shared_levels(&at(b));
        assert_eq!(levels("eu/a/r1", "eu/a/r1"), 3);
        assert_eq!(levels("eu/a/r1", "eu/a/r2"), 2);
        assert_eq!(levels("eu/a", "eu/b"), 1);
        assert_eq!(levels("eu", "eu"), 1);
        assert_eq!(levels("eu/a/r1", "us/a/r1"), 0, "a zone's name means nothing in another region");
    }

    #[test]
    fn zones_of_two_regions_differ() {
        let (a, b): (Location, Location) = ("eu/a".parse().unwrap(), "us/a".parse().unwrap());
        assert_ne!(a.zone_key(), b.zone_key());
    }
}
