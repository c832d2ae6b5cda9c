//! YCSB's core workloads A–F and the properties that shape them, settable the way YCSB sets them: a preset,
//! then a properties file (`-P`), then single properties (`-p name=value`), then `meridian bench ycsb`'s own
//! flags, each over the one before.

use serde::Serialize;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why workload E (and any mix with scans) is refused: YCSB's scan reads up to `maxscanlength` records in key
/// order from a start key. Over RESP, neither Redis nor Meridian has such a range: Redis keeps no order among
/// keys and its SCAN walks hash buckets; Meridian hash-partitions keys over a ring and its SCAN walks ring
/// positions. A SCAN of the keyspace would be timed as something YCSB does not mean, so no figure is made up.
pub const SCAN_REFUSED: &str = "YCSB scans (workload E, scanproportion > 0) read records in key order from a \
    start key; neither Redis nor Meridian has an ordered key range over RESP (SCAN walks hash buckets or ring \
    positions, not key order), and go-ycsb's Redis binding refuses scans too, so this load generator does not \
    run them rather than time something else under their name";

/// Records one run may load at most.
pub const RECORDS_MAX: u64 = 1_000_000_000;
/// Connections unless told otherwise.
pub const DEFAULT_CLIENTS: usize = 16;
/// Fields per record at most.
pub const FIELDS_MAX: usize = 1024;
/// Bytes per field at most.
pub const FIELD_BYTES_MAX: usize = 1 << 20;
/// The largest `zipfianconstant`: beyond it the most popular record takes all but a 10^-30 share.
pub const ZIPFIAN_CONSTANT_MAX: f64 = 100.0;

/// Which records the run phase's reads and updates choose (YCSB's `requestdistribution`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    Uniform,
    /// YCSB's scrambled zipfian, constant 0.99: popular records are spread over the key space.
    Zipfian,
    /// Skewed towards the most recently inserted records.
    Latest,
}

impl Distribution {
    fn parse(s: &str) -> Option<Distribution> {
        match s {
            "uniform" => Some(Distribution::Uniform),
            "zipfian" => Some(Distribution::Zipfian),
            "latest" => Some(Distribution::Latest),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Distribution::Uniform => "uniform",
            Distribution::Zipfian => "zipfian",
            Distribution::Latest => "latest",
        }
    }
}

/// The share of each operation in the run phase; YCSB normalises them by their sum.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Proportions {
    pub read: f64,
    pub update: f64,
    pub insert: f64,
    pub scan: f64,
    pub read_modify_write: f64,
}

/// A workload's properties, named as YCSB names them where YCSB has them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Workload {
    /// The preset it started from (`a` to `f`).
    pub preset: char,
    pub record_count: u64,
    /// `operationcount`: operations of the run phase at most.
    pub operation_count: Option<u64>,
    /// `maxexecutiontime`: seconds of the run phase at most.
    pub max_execution_time: Option<Duration>,
    /// `threadcount`: connections, each with its own task (YCSB's threads).
    pub thread_count: usize,
    /// `target`: operations per second of the run phase; an open loop when set.
    pub target: Option<f64>,
    pub field_count: usize,
    pub field_length: usize,
    pub proportions: Proportions,
    pub distribution: Distribution,
    /// `zipfianconstant`: the exponent of the zipfian and latest distributions.
    pub zipfian_constant: f64,
    /// A read gets every field of a record (HGETALL), or one (HMGET).
    pub read_all_fields: bool,
    /// An update writes every field of a record, or one.
    pub write_all_fields: bool,
    /// `insertorder=ordered`: key `user<n>` for record n instead of `user<hash of n>`.
    pub ordered_inserts: bool,
}

/// A preset letter that is not one of YCSB's workloads `a` to `f`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("workload {0:?}: expected one of a, b, c, d, e, f")]
pub struct UnknownPreset(pub char);

/// A property that [`Workload::apply`] refuses: malformed, of a bad value, or not supported.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PropertyError {
    #[error("{0:?} is not name=value")]
    NotNameValue(String),
    #[error("{name}={value}: {why}")]
    BadValue { name: String, value: String, why: String },
    #[error("requestdistribution {0:?}: expected uniform, zipfian or latest")]
    Distribution(String),
    #[error("property {name} is not supported (or not with value {value:?})")]
    Unsupported { name: String, value: String },
}

/// Why [`Workload::apply_file`] stopped: the file cannot be read, or one of its lines is refused.
#[derive(Debug, thiserror::Error)]
pub enum PropertiesFileError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path} line {line}: {source}")]
    Line { path: PathBuf, line: usize, source: PropertyError },
}

/// A workload that cannot be run, which [`Workload::validate`] refuses.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InvalidWorkload {
    #[error("{SCAN_REFUSED}")]
    Scans,
    #[error("the operation proportions are all zero")]
    NoOperations,
    #[error("recordcount must be from 1 to {RECORDS_MAX}")]
    RecordCount,
    #[error("fieldcount must be from 1 to {FIELDS_MAX}")]
    FieldCount,
    #[error("fieldlength must be from 1 to {FIELD_BYTES_MAX} bytes")]
    FieldLength,
}

impl Workload {
    /// YCSB's `workloads/workload<letter>`, with records of one field of 100 bytes (YCSB's default is ten).
    pub fn preset(letter: char) -> Result<Workload, UnknownPreset> {
        let mix = |read, update, insert, scan, read_modify_write| Proportions {
            read,
            update,
            insert,
            scan,
            read_modify_write,
        };
        let (proportions, distribution) = match letter.to_ascii_lowercase() {
            'a' => (mix(0.5, 0.5, 0.0, 0.0, 0.0), Distribution::Zipfian),
            'b' => (mix(0.95, 0.05, 0.0, 0.0, 0.0), Distribution::Zipfian),
            'c' => (mix(1.0, 0.0, 0.0, 0.0, 0.0), Distribution::Zipfian),
            'd' => (mix(0.95, 0.0, 0.05, 0.0, 0.0), Distribution::Latest),
            'e' => (mix(0.0, 0.0, 0.05, 0.95, 0.0), Distribution::Zipfian),
            'f' => (mix(0.5, 0.0, 0.0, 0.0, 0.5), Distribution::Zipfian),
            other => return Err(UnknownPreset(other)),
        };
        Ok(Workload {
            preset: letter.to_ascii_lowercase(),
            record_count: 1000,
            operation_count: None,
            max_execution_time: None,
            thread_count: DEFAULT_CLIENTS,
            target: None,
            field_count: 1,
            field_length: 100,
            proportions,
            distribution,
            zipfian_constant: super::distribution::THETA,
            read_all_fields: true,
            write_all_fields: false,
            ordered_inserts: false,
        })
    }

    /// Applies a YCSB properties file: `name=value` lines, `#` comments.
    pub fn apply_file(&mut self, path: &Path) -> Result<(), PropertiesFileError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| PropertiesFileError::Read { path: path.into(), source })?;
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            self.apply(line).map_err(|source| PropertiesFileError::Line { path: path.into(), line: n + 1, source })?;
        }
        Ok(())
    }

    /// Applies one `name=value` property.
    pub fn apply(&mut self, property: &str) -> Result<(), PropertyError> {
        let (name, value) = property.split_once('=').ok_or_else(|| PropertyError::NotNameValue(property.into()))?;
        let (name, value) = (name.trim(), value.trim());
        let bad = |e: &dyn std::fmt::Display| PropertyError::BadValue {
            name: name.into(),
            value: value.into(),
            why: e.to_string(),
        };
        let number = || value.parse::<u64>().map_err(|e| bad(&e));
        let fraction = || match value.parse::<f64>() {
            Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
            _ => Err(bad(&"expected a proportion from 0 to 1")),
        };
        let flag = || value.parse::<bool>().map_err(|e| bad(&e));
        match name {
            "recordcount" => self.record_count = number()?,
            "operationcount" => self.operation_count = Some(number()?),
            "maxexecutiontime" => self.max_execution_time = Some(Duration::from_secs(number()?)),
            "threadcount" => self.thread_count = number()? as usize,
            "target" => self.target = Some(number()? as f64),
            "fieldcount" => self.field_count = number()? as usize,
            "fieldlength" => self.field_length = number()? as usize,
            "readproportion" => self.proportions.read = fraction()?,
            "updateproportion" => self.proportions.update = fraction()?,
            "insertproportion" => self.proportions.insert = fraction()?,
            "scanproportion" => self.proportions.scan = fraction()?,
            "readmodifywriteproportion" => self.proportions.read_modify_write = fraction()?,
            "requestdistribution" => {
                self.distribution =
                    Distribution::parse(value).ok_or_else(|| PropertyError::Distribution(value.into()))?
            }
            "zipfianconstant" => {
                self.zipfian_constant = match value.parse::<f64>() {
                    Ok(s) if s > 0.0 && s <= ZIPFIAN_CONSTANT_MAX => s,
                    _ => {
                        return Err(bad(&format_args!("expected an exponent above 0, at most {ZIPFIAN_CONSTANT_MAX}")))
                    }
                }
            }
            "readallfields" => self.read_all_fields = flag()?,
            "writeallfields" => self.write_all_fields = flag()?,
            "insertorder" => {
                self.ordered_inserts = match value {
                    "hashed" => false,
                    "ordered" => true,
                    _ => return Err(bad(&"expected hashed or ordered")),
                }
            }
            // YCSB's workload files name the workload class and describe scans, which are refused anyway
            // (`SCAN_REFUSED`), and fields of a constant length, the only kind generated here.
            "workload" | "maxscanlength" | "scanlengthdistribution" => {}
            "fieldlengthdistribution" if value == "constant" => {}
            _ => return Err(PropertyError::Unsupported { name: name.into(), value: value.into() }),
        }
        Ok(())
    }

    /// Refuses what cannot be run: scans, an empty mix, records of no or too many bytes.
    pub fn validate(&self) -> Result<(), InvalidWorkload> {
        let p = &self.proportions;
        if p.scan > 0.0 {
            return Err(InvalidWorkload::Scans);
        }
        if p.read + p.update + p.insert + p.read_modify_write <= 0.0 {
            return Err(InvalidWorkload::NoOperations);
        }
        if !(1..=RECORDS_MAX).contains(&self.record_count) {
            return Err(InvalidWorkload::RecordCount);
        }
        if !(1..=FIELDS_MAX).contains(&self.field_count) {
            return Err(InvalidWorkload::FieldCount);
        }
        if !(1..=FIELD_BYTES_MAX).contains(&self.field_length) {
            return Err(InvalidWorkload::FieldLength);
        }
        Ok(())
    }

    /// The load phase: every record inserted once, in order of record number.
    pub(super) fn for_load(&self) -> Workload {
        Workload {
            proportions: Proportions { read: 0.0, update: 0.0, insert: 1.0, scan: 0.0, read_modify_write: 0.0 },
            distribution: Distribution::Uniform,
            ..self.clone()
        }
    }

    /// A record is a Redis hash when it has more than one field, else a plain string (`ops`).
    pub(super) fn is_hash(&self) -> bool {
        self.field_count > 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_follow_ycsb_and_properties_override_them() {
        let mut w = Workload::preset('D').unwrap();
        assert_eq!((w.preset, w.proportions.read, w.proportions.insert), ('d', 0.95, 0.05));
        assert_eq!(w.distribution, Distribution::Latest);
        w.apply("requestdistribution = uniform").unwrap();
        w.apply("fieldcount=10").unwrap();
        w.apply("workload=site.ycsb.workloads.CoreWorkload").unwrap();
        assert_eq!((w.distribution, w.field_count), (Distribution::Uniform, 10));
        assert!(w.is_hash());
        let refused = |w: &mut Workload, property| w.apply(property).unwrap_err().to_string();
        assert_eq!(refused(&mut w, "readproportion=1.5"), "readproportion=1.5: expected a proportion from 0 to 1");
        assert!(refused(&mut w, "fieldlengthdistribution=zipfian").contains("not supported"));
        w.apply("zipfianconstant=4").unwrap();
        assert_eq!(w.zipfian_constant, 4.0);
        for bad in ["0", "-1", "NaN", "101", "x"] {
            let why = w.apply(&format!("zipfianconstant={bad}")).unwrap_err().to_string();
            assert_eq!(why, format!("zipfianconstant={bad}: expected an exponent above 0, at most 100"));
        }
        assert_eq!(w.zipfian_constant, 4.0, "a refused value changes nothing");
        assert_eq!(refused(&mut w, "nonsense"), "\"nonsense\" is not name=value");
        assert_eq!(
            refused(&mut w, "requestdistribution=x"),
            "requestdistribution \"x\": expected uniform, zipfian or latest"
        );
        assert_eq!(Workload::preset('G').unwrap_err().to_string(), "workload 'g': expected one of a, b, c, d, e, f");
    }

    #[test]
    fn scans_are_refused_with_the_reason() {
        let e = Workload::preset('e').unwrap();
        assert_eq!(e.validate().unwrap_err().to_string(), SCAN_REFUSED);
        let mut a = Workload::preset('a').unwrap();
        a.validate().unwrap();
        a.apply("scanproportion=0.1").unwrap();
        assert_eq!(a.validate(), Err(InvalidWorkload::Scans));
    }

    #[test]
    fn a_properties_file_applies_line_by_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("workloadx");
        std::fs::write(&path, "# comment\nrecordcount=5000\n\nreadproportion=0.8\nupdateproportion=0.2\n").unwrap();
        let mut w = Workload::preset('c').unwrap();
        w.apply_file(&path).unwrap();
        assert_eq!((w.record_count, w.proportions.read, w.proportions.update), (5000, 0.8, 0.2));
        std::fs::write(&path, "recordcount=5000\nbogus=1\n").unwrap();
        let refused = w.apply_file(&path).unwrap_err().to_string();
        assert_eq!(
            refused,
            format!("{} line 2: property bogus is not supported (or not with value \"1\")", path.display())
        );
    }
}
