//! Where nodes are, as a network sees it: named regions, the round trip within each, and between every two of
//! them a link with its round trip and, optionally, a bandwidth and a jitter (docs/regions.md), written in TOML:
//!
//! ```toml
//! description = "two regions"
//! [[region]]
//! name = "eu"
//! rtt_ms = 0.2          # within the region; 0.2 if left out
//! [[region]]
//! name = "us"
//! [[link]]
//! between = ["eu", "us"]
//! rtt_ms = 80
//! bandwidth_mbps = 100  # optional: unlimited if left out
//! jitter_ms = 2         # optional: 0 if left out
//! ```
//!
//! Every two distinct regions need exactly one link. Named presets ship with the binary ([`PRESETS`]: the
//! regions of the seeds' evaluations, named by their tables' codes in lower case), and a name that is not a
//! preset is read as a file. A file that breaks a rule is refused with the line and the field at fault.
//! `meridian topology show` checks and prints one.

use crate::location::validate_region_name;
use serde::Deserialize;
use std::fmt;
use std::ops::Range;
use toml::Spanned;

/// The presets, by name, in the order `meridian topology show` lists them.
pub const PRESETS: [(&str, &str); 4] = [
    ("canopus-7", include_str!("../topologies/canopus-7.toml")),
    ("globlease-4", include_str!("../topologies/globlease-4.toml")),
    ("leads-3", include_str!("../topologies/leads-3.toml")),
    ("lan", include_str!("../topologies/lan.toml")),
];

/// The round trip within a region whose entry gives none: a local network's.
pub const WITHIN_RTT_MS: f64 = 0.2;

#[derive(Clone, Debug, PartialEq)]
pub struct Region {
    pub name: String,
    /// Round trip between two nodes of the region, in milliseconds.
    pub rtt_ms: f64,
}

/// What connects two regions, or a region to itself.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    /// Round trip, in milliseconds.
    pub rtt_ms: f64,
    /// Capacity in megabits per second; None: unlimited.
    pub bandwidth_mbps: Option<f64>,
    /// Up to this much more or less than half the round trip, each way, in milliseconds.
    pub jitter_ms: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    /// The preset's name, or the file it was read from.
    pub source: String,
    pub description: String,
    regions: Vec<Region>,
    /// Between regions i < j, at `i * n + j`; None on and below the diagonal.
    links: Vec<Option<Link>>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TopologyError {
    #[error("unknown topology '{name}': not a preset ({presets}) and not a readable file: {why}")]
    Unknown { name: String, presets: String, why: String },
    #[error("{source_name}: {why}")]
    Malformed { source_name: String, why: String },
    #[error("{source_name}, line {line}: {field}: {why}")]
    Invalid { source_name: String, line: usize, field: String, why: String },
    #[error("{source_name}: no link between regions '{a}' and '{b}'; every two regions need one")]
    MissingLink { source_name: String, a: String, b: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TopologyFile {
    #[serde(default)]
    description: String,
    #[serde(default)]
    region: Vec<Spanned<RegionEntry>>,
    #[serde(default)]
    link: Vec<Spanned<LinkEntry>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegionEntry {
    name: String,
    rtt_ms: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkEntry {
    between: [String; 2],
    rtt_ms: f64,
    bandwidth_mbps: Option<f64>,
    jitter_ms: Option<f64>,
}

impl Topology {
    /// The preset `name`, or else the topology in the file at `name`.
    pub fn load(name: &str) -> Result<Topology, TopologyError> {
        if let Some(text) = preset(name) {
            return Topology::parse(text, name);
        }
        match std::fs::read_to_string(name) {
            Ok(text) => Topology::parse(&text, name),
            Err(e) => Err(TopologyError::Unknown { name: name.into(), presets: preset_names(), why: e.to_string() }),
        }
    }

    /// Reads a topology from `text`; `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<Topology, TopologyError> {
        let file: TopologyFile = toml::from_str(text)
            .map_err(|e| TopologyError::Malformed { source_name: source.into(), why: e.to_string() })?;
        let invalid = |span: Range<usize>, field: &str, why: String| TopologyError::Invalid {
            source_name: source.into(),
            line: line_of(text, span.start),
            field: field.into(),
            why,
        };
        let mut regions: Vec<Region> = Vec::new();
        for entry in &file.region {
            let (span, r) = (entry.span(), entry.get_ref());
            if let Err(bad) = validate_region_name(&r.name) {
                return Err(invalid(span, "name", bad.to_string()));
            }
            if regions.iter().any(|known| known.name == r.name) {
                return Err(invalid(span, "name", format!("region '{}' is named twice", r.name)));
            }
            let rtt_ms = r.rtt_ms.unwrap_or(WITHIN_RTT_MS);
            check_ms(rtt_ms, true).map_err(|why| invalid(span.clone(), "rtt_ms", why))?;
            regions.push(Region { name: r.name.clone(), rtt_ms });
        }
        if regions.is_empty() {
            let why = "no [[region]]: a topology has at least one".into();
            return Err(TopologyError::Malformed { source_name: source.into(), why });
        }
        let n = regions.len();
        let mut links = vec![None; n * n];
        for entry in &file.link {
            let (span, l) = (entry.span(), entry.get_ref());
            let index = |name: &str| regions.iter().position(|r| r.name == name);
            let (a, b) = match (index(&l.between[0]), index(&l.between[1])) {
                (Some(a), Some(b)) if a != b => (a.min(b), a.max(b)),
                (Some(_), Some(_)) => {
                    return Err(invalid(span, "between", "a link joins two different regions".into()))
                }
                _ => {
                    let unknown = l.between.iter().find(|name| index(name).is_none()).expect("one is unknown");
                    return Err(invalid(span, "between", format!("no [[region]] is named '{unknown}'")));
                }
            };
            check_ms(l.rtt_ms, false).map_err(|why| invalid(span.clone(), "rtt_ms", why))?;
            let jitter_ms = l.jitter_ms.unwrap_or(0.0);
            check_ms(jitter_ms, true).map_err(|why| invalid(span.clone(), "jitter_ms", why))?;
            if jitter_ms * 2.0 > l.rtt_ms {
                return Err(invalid(span, "jitter_ms", format!("{jitter_ms} is more than half the round trip")));
            }
            if let Some(mbps) = l.bandwidth_mbps.filter(|mbps| !(mbps.is_finite() && *mbps > 0.0)) {
                return Err(invalid(span, "bandwidth_mbps", format!("{mbps} is not a positive number")));
            }
            if links[a * n + b].is_some() {
                let why = format!("a second link between '{}' and '{}'", regions[a].name, regions[b].name);
                return Err(invalid(span, "between", why));
            }
            links[a * n + b] = Some(Link { rtt_ms: l.rtt_ms, bandwidth_mbps: l.bandwidth_mbps, jitter_ms });
        }
        for a in 0..n {
            if let Some(b) = (a + 1..n).find(|&b| links[a * n + b].is_none()) {
                let (a, b) = (regions[a].name.clone(), regions[b].name.clone());
                return Err(TopologyError::MissingLink { source_name: source.into(), a, b });
            }
        }
        Ok(Topology { source: source.into(), description: file.description, regions, links })
    }

    pub fn regions(&self) -> &[Region] {
        &self.regions
    }

    /// The index of region `name`, if the topology has it.
    pub fn region(&self, name: &str) -> Option<usize> {
        self.regions.iter().position(|r| r.name == name)
    }

    /// What joins regions `a` and `b` (by index), or the network within `a` when they are the same.
    pub fn link(&self, a: usize, b: usize) -> Link {
        let n = self.regions.len();
        assert!(a < n && b < n, "regions {a} and {b} of a topology of {n}");
        match (a.min(b), a.max(b)) {
            (a, b) if a == b => Link { rtt_ms: self.regions[a].rtt_ms, bandwidth_mbps: None, jitter_ms: 0.0 },
            (a, b) => self.links[a * n + b].expect("every two regions have a link"),
        }
    }
}

/// The text of preset `name`.
pub fn preset(name: &str) -> Option<&'static str> {
    PRESETS.iter().find(|(preset, _)| *preset == name).map(|(_, text)| *text)
}

fn preset_names() -> String {
    PRESETS.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ")
}

/// A time in milliseconds must be finite and positive (or zero, where `zero` allows it).
fn check_ms(ms: f64, zero: bool) -> Result<(), String> {
    match ms.is_finite() && (ms > 0.0 || zero && ms == 0.0) {
        true => Ok(()),
        false if zero => Err(format!("{ms} is not a number of milliseconds of 0 or more")),
        false => Err(format!("{ms} is not a positive number of milliseconds")),
    }
}

/// The line (from 1) that byte `offset` of `text` is on.
fn line_of(text: &str, offset: usize) -> usize {
    1 + text.as_bytes()[..offset.min(text.len())].iter().filter(|&&b| b == b'\n').count()
}

/// The topology as `meridian topology show` prints it: its regions and the matrix of round trips in ms, with a
/// link's bandwidth (Mb/s) and jitter (± ms) where it has them.
impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "topology {}: {} region(s)", self.source, self.regions.len())?;
        if !self.description.is_empty() {
            writeln!(f, "{}", self.description)?;
        }
        writeln!(f, "round trips in ms (with Mb/s where a link is limited, ± ms of jitter where it varies):")?;
        let cell = |a: usize, b: usize| {
            let link = self.link(a, b);
            let mut text = format!("{}", link.rtt_ms);
            if let Some(mbps) = link.bandwidth_mbps {
                text += &format!(" {mbps}Mb/s");
            }
            if link.jitter_ms > 0.0 {
                text += &format!(" ±{}", link.jitter_ms);
            }
            text
        };
        let n = self.regions.len();
        let cells: Vec<Vec<String>> = (0..n).map(|a| (0..n).map(|b| cell(a, b)).collect()).collect();
        let chars = |text: &str| text.chars().count();
        let width = cells.iter().flatten().map(|c| chars(c)).chain(self.regions.iter().map(|r| chars(&r.name)));
        let (width, names) = (width.max().unwrap_or(0), self.regions.iter().map(|r| chars(&r.name)).max().unwrap_or(0));
        write!(f, "{:names$}", "")?;
        for r in &self.regions {
            write!(f, "  {:>width$}", r.name)?;
        }
        for (r, row) in self.regions.iter().zip(&cells) {
            write!(f, "\n{:names$}", r.name)?;
            for c in row {
                write!(f, "  {c:>width$}")?;
            }
        }
        writeln!(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_parses_and_canopus_7_is_seed_000_table_4_1() {
        for (name, _) in PRESETS {
            Topology::load(name).unwrap_or_else(|e| panic!("{e}"));
        }
        let t = Topology::load("canopus-7").unwrap();
        let names: Vec<&str> = t.regions().iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["ir", "ca", "va", "tk", "or", "sy", "ff"]);
        let rtt = |a: &str, b: &str| t.link(t.region(a).unwrap(), t.region(b).unwrap()).rtt_ms;
        assert_eq!((rtt("ir", "ca"), rtt("ff", "sy"), rtt("or", "ca"), rtt("tk", "tk")), (133.0, 322.0, 20.0, 0.13));
        assert_eq!(rtt("va", "ir"), rtt("ir", "va"), "links are symmetric");
        let g = Topology::load("globlease-4").unwrap();
        assert_eq!(g.link(g.region("or").unwrap(), g.region("tk").unwrap()).rtt_ms, 100.0);
        let leads = Topology::load("leads-3").unwrap();
        assert_eq!(leads.link(0, 2), Link { rtt_ms: 15.0, bandwidth_mbps: Some(10.0), jitter_ms: 0.0 });
        assert_eq!(Topology::load("lan").unwrap().regions().len(), 1);
    }

    fn refusal(text: &str) -> String {
        Topology::parse(text, "t.toml").unwrap_err().to_string()
    }

    const TWO: &str = "[[region]]\nname = \"eu\"\n[[region]]\nname = \"us\"\n";

    #[test]
    fn a_file_that_breaks_a_rule_is_refused_with_its_line_and_field() {
        let link = |body: &str| format!("{TWO}[[link]]\n{body}");
        assert_eq!(
            refusal(&link("between = [\"eu\", \"asia\"]\nrtt_ms = 5")),
            "t.toml, line 5: between: no [[region]] is named 'asia'"
        );
        assert_eq!(
            refusal(&link("between = [\"eu\", \"us\"]\nrtt_ms = -1")),
            "t.toml, line 5: rtt_ms: -1 is not a positive number of milliseconds"
        );
        assert_eq!(
            refusal(&link("between = [\"eu\", \"eu\"]\nrtt_ms = 5")),
            "t.toml, line 5: between: a link joins two different regions"
        );
        assert_eq!(
            refusal(&link("between = [\"eu\", \"us\"]\nrtt_ms = 5\njitter_ms = 3")),
            "t.toml, line 5: jitter_ms: 3 is more than half the round trip"
        );
        let twice = link("between = [\"eu\", \"us\"]\nrtt_ms = 5\n[[link]]\nbetween = [\"us\", \"eu\"]\nrtt_ms = 6");
        assert_eq!(refusal(&twice), "t.toml, line 8: between: a second link between 'eu' and 'us'");
        assert_eq!(refusal(TWO), "t.toml: no link between regions 'eu' and 'us'; every two regions need one");
        assert_eq!(
            refusal("[[region]]\nname = \"EU\""),
            "t.toml, line 1: name: 'EU' is not a region name: 1 to 32 lower-case letters, digits and dashes, starting \
             with a letter"
        );
        assert!(refusal("[[region]]\nname = \"eu\"\nrtt = 1").contains("unknown field `rtt`"), "a misspelt field");
        assert!(refusal("").contains("no [[region]]"));
        assert!(refusal("[[region]\n").starts_with("t.toml: TOML parse error at line 1"));
    }

    #[test]
    fn an_unknown_name_is_neither_a_preset_nor_a_file() {
        let e = Topology::load("mars-2").unwrap_err().to_string();
        assert!(e.starts_with("unknown topology 'mars-2': not a preset (canopus-7, globlease-4, leads-3, lan)"), "{e}");
    }

    #[test]
    fn show_prints_the_matrix() {
        let text =
            format!("{TWO}[[link]]\nbetween = [\"us\", \"eu\"]\nrtt_ms = 80\nbandwidth_mbps = 100\njitter_ms = 2\n");
        let shown = Topology::parse(&text, "t.toml").unwrap().to_string();
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines[0], "topology t.toml: 2 region(s)");
        assert_eq!(lines[2].split_whitespace().collect::<Vec<_>>(), ["eu", "us"], "{shown}");
        assert_eq!(lines[3], "eu            0.2  80 100Mb/s ±2", "{shown}");
        assert_eq!(lines[4].chars().count(), lines[3].chars().count(), "columns line up: {shown}");
    }
}
