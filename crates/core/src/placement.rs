//! What a keyspace asks of where its replicas run (docs/regions.md, "Placement"): a number of replicas in each
//! of some regions, the first of them the keyspace's home, or else a spread over as many distinct regions,
//! then zones, then racks as the cluster has, as Cassandra's NetworkTopologyStrategy does; in either case
//! minus regions the keyspace is banned from. The manager's placement (`meridian_proto::map::placement`)
//! turns it into each chain's members.

use crate::location::{validate_region_name, BadRegionName};
use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Placement {
    /// Replicas per region, the home region first; empty: spread over every region not banned.
    pub regions: Vec<(String, u32)>,
    /// Regions that hold none of the keyspace's replicas.
    pub banned: Vec<String>,
}

/// Why a placement was refused.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlacementError {
    #[error(transparent)]
    Name(#[from] BadRegionName),
    #[error("'{0}' is not REGION=COUNT")]
    Syntax(String),
    #[error("region '{0}' is named twice")]
    Twice(String),
    #[error("region '{0}' is given 0 replicas")]
    Zero(String),
    #[error("region '{0}' is both placed and banned")]
    PlacedAndBanned(String),
    #[error("region '{0}' is not one the placement names (give it in --regions or --placement)")]
    HomeNotPlaced(String),
    #[error("the placement puts {placed} replicas, and the keyspace has {replicas}")]
    Count { placed: u32, replicas: usize },
}

impl Placement {
    /// `--regions eu,us,asia`: one replica in each, home first.
    pub fn one_in_each(list: &str) -> Result<Placement, PlacementError> {
        let regions = names(list).map(|r| (r.to_string(), 1)).collect();
        Ok(Placement { regions, banned: Vec::new() })
    }

    /// `--placement eu=2,us=1`: replicas per region, home first.
    pub fn per_region(list: &str) -> Result<Placement, PlacementError> {
        let entry = |e: &str| {
            let (region, count) = e.split_once('=').ok_or_else(|| PlacementError::Syntax(e.into()))?;
            let count = count.trim().parse().map_err(|_| PlacementError::Syntax(e.into()))?;
            Ok((region.trim().to_string(), count))
        };
        let regions = names(list).map(entry).collect::<Result<_, PlacementError>>()?;
        Ok(Placement { regions, banned: Vec::new() })
    }

    /// The home region: the first the placement names (a lease keyspace's master region), if it names any.
    pub fn home(&self) -> Option<&str> {
        self.regions.first().map(|(r, _)| r.as_str())
    }

    /// `--master-region`: makes `region`, which the placement must name, its home (its first region).
    pub fn homed_in(mut self, region: &str) -> Result<Placement, PlacementError> {
        let at = self.regions.iter().position(|(r, _)| r == region);
        let at = at.ok_or_else(|| PlacementError::HomeNotPlaced(region.into()))?;
        let home = self.regions.remove(at);
        self.regions.insert(0, home);
        Ok(self)
    }

    /// Adds `--ban-region` names (comma-separated).
    pub fn banning(self, list: &str) -> Placement {
        Placement { banned: names(list).map(String::from).collect(), ..self }
    }

    pub fn is_spread(&self) -> bool {
        self.regions.is_empty()
    }

    /// The replicas the placement puts, if it names regions.
    pub fn placed(&self) -> Option<u32> {
        (!self.is_spread()).then(|| self.regions.iter().map(|(_, n)| n).sum())
    }

    /// Checks names and counts against a keyspace of `replicas` replicas.
    pub fn validate(&self, replicas: usize) -> Result<(), PlacementError> {
        let mut seen: Vec<&str> = Vec::new();
        for name in self.regions.iter().map(|(r, _)| r).chain(&self.banned) {
            validate_region_name(name)?;
            if seen.contains(&name.as_str()) {
                let placed = self.regions.iter().any(|(r, _)| r == name);
                let banned = self.banned.contains(name);
                return Err(match placed && banned {
                    true => PlacementError::PlacedAndBanned(name.clone()),
                    false => PlacementError::Twice(name.clone()),
                });
            }
            seen.push(name);
        }
        if let Some((region, _)) = self.regions.iter().find(|(_, n)| *n == 0) {
            return Err(PlacementError::Zero(region.clone()));
        }
        match self.placed() {
            Some(placed) if placed as usize != replicas => Err(PlacementError::Count { placed, replicas }),
            _ => Ok(()),
        }
    }
}

fn names(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// `spread`, or `eu=2,us=1`, then ` not asia,sa` for banned regions: as `keyspace list` shows it.
impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.is_spread() {
            true => f.write_str("spread")?,
            false => {
                let each: Vec<String> = self.regions.iter().map(|(r, n)| format!("{r}={n}")).collect();
                f.write_str(&each.join(","))?;
            }
        }
        match self.banned.is_empty() {
            true => Ok(()),
            false => write!(f, " not {}", self.banned.join(",")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_shows_each_form() {
        let each = Placement::one_in_each("eu, us,asia").unwrap();
        assert_eq!((each.to_string(), each.regions[0].0.as_str()), ("eu=1,us=1,asia=1".into(), "eu"));
        let counted = Placement::per_region("eu=2,us=1").unwrap().banning("asia");
        assert_eq!((counted.to_string(), counted.placed()), ("eu=2,us=1 not asia".into(), Some(3)));
        assert_eq!(Placement::default().to_string(), "spread");
        assert!(counted.validate(3).is_ok() && Placement::default().banning("eu").validate(5).is_ok());
        let homed = Placement::one_in_each("va,or,tk").unwrap().homed_in("tk").unwrap();
        assert_eq!(homed.to_string(), "tk=1,va=1,or=1", "the master region becomes the home, the rest keep order");
        let absent = Placement::one_in_each("va,or").unwrap().homed_in("ir");
        assert_eq!(absent.unwrap_err(), PlacementError::HomeNotPlaced("ir".into()));
    }

    #[test]
    fn refuses_what_cannot_mean_anything() {
        let err = |p: Result<Placement, PlacementError>, r| p.and_then(|p| p.validate(r)).unwrap_err();
        assert_eq!(err(Placement::per_region("eu"), 1), PlacementError::Syntax("eu".into()));
        assert_eq!(err(Placement::per_region("eu=x"), 1), PlacementError::Syntax("eu=x".into()));
        assert_eq!(err(Placement::per_region("eu=0,us=1"), 1), PlacementError::Zero("eu".into()));
        assert_eq!(err(Placement::one_in_each("eu,eu"), 2), PlacementError::Twice("eu".into()));
        assert_eq!(err(Placement::one_in_each("eu,us"), 3), PlacementError::Count { placed: 2, replicas: 3 });
        let both = Placement::one_in_each("eu").map(|p| p.banning("eu"));
        assert_eq!(err(both, 1), PlacementError::PlacedAndBanned("eu".into()));
        assert_eq!(err(Placement::one_in_each("EU"), 1), PlacementError::Name(BadRegionName("EU".into())));
    }
}
