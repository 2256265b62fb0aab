//! Parsing a dataset definition (`datasets/*.json`) into exact integer flavors and shapes.

use super::scale::{class_of, to_units, InexactSize};
use parasol::domain::{ClassId, Resources};
use serde::Deserialize;
use std::ops::Range;
use thiserror::Error;

/// One request size of a dataset.
#[derive(Clone, Debug, PartialEq)]
pub struct Flavor {
    /// `<dataset>.<index>`, the key of APSR's per-flavor counters.
    pub name: String,
    pub demand: Resources,
    /// Requests of this flavor in one replica (0 for flavors that are drawn at random).
    pub count: usize,
}

/// A kind of host and the fraction of the fleet it makes up.
#[derive(Clone, Debug, PartialEq)]
pub struct HostShape {
    pub capacity: Resources,
    pub share: f64,
}

/// Random draws per replica: `count` flavors uniformly from `flavors` (Amazon's generator).
#[derive(Clone, Debug, PartialEq)]
pub struct Draw {
    pub flavors: Range<usize>,
    pub count: usize,
}

/// A setup a paper published results for.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Setup {
    pub replicas: usize,
    pub requests: usize,
    #[serde(deserialize_with = "one_or_many")]
    pub hosts: Vec<usize>,
    pub used_in: String,
}

/// A dataset definition, mapped to Parasol's resource classes.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    pub name: String,
    pub classes: Vec<ClassId>,
    pub flavors: Vec<Flavor>,
    pub draws: Vec<Draw>,
    pub host_shapes: Vec<HostShape>,
    pub total_requests: usize,
    pub published_setups: Vec<Setup>,
}

/// Why a definition cannot be used.
#[derive(Debug, Error)]
pub enum DefinitionError {
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("unknown resource `{0}`")]
    UnknownResource(String),
    #[error("a size has {got} values, the dataset names {want} resources")]
    Arity { got: usize, want: usize },
    #[error(transparent)]
    Inexact(#[from] InexactSize),
    #[error("one replica holds {got} requests, the definition says {want}")]
    Total { got: usize, want: usize },
}

#[derive(Deserialize)]
struct Raw {
    name: String,
    resources: Vec<String>,
    host_shapes: Vec<RawShape>,
    #[serde(default)]
    flavors: Vec<RawFlavor>,
    #[serde(default)]
    small_flavors: Vec<Vec<f64>>,
    #[serde(default)]
    large_flavors: Vec<Vec<f64>>,
    #[serde(default)]
    small_count: usize,
    #[serde(default)]
    large_count: usize,
    total_requests: usize,
    published_setups: Vec<Setup>,
}

#[derive(Deserialize)]
struct RawShape {
    capacity: Vec<f64>,
    share: f64,
}

#[derive(Deserialize)]
struct RawFlavor {
    demand: Vec<f64>,
    count: usize,
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<usize>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(usize),
        Many(Vec<usize>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(n) => vec![n],
        OneOrMany::Many(v) => v,
    })
}

impl Dataset {
    /// Parses a definition and maps every size exactly; refuses any inexact size.
    pub fn parse(json: &str) -> Result<Dataset, DefinitionError> {
        let raw: Raw = serde_json::from_str(json)?;
        let classes = raw
            .resources
            .iter()
            .map(|r| class_of(r).ok_or_else(|| DefinitionError::UnknownResource(r.clone())))
            .collect::<Result<Vec<_>, _>>()?;
        let map = |values: &[f64]| -> Result<Resources, DefinitionError> {
            if values.len() != classes.len() {
                return Err(DefinitionError::Arity {
                    got: values.len(),
                    want: classes.len(),
                });
            }
            let mut r = Resources::ZERO;
            for (v, c) in values.iter().zip(&classes) {
                r.0[c.index()] = to_units(*v, *c)?;
            }
            Ok(r)
        };
        let mut flavors = Vec::new();
        let mut push = |demand: &[f64], count: usize| -> Result<(), DefinitionError> {
            let name = format!("{}.{}", raw.name, flavors.len());
            flavors.push(Flavor {
                name,
                demand: map(demand)?,
                count,
            });
            Ok(())
        };
        for f in &raw.flavors {
            push(&f.demand, f.count)?;
        }
        let mut draws = Vec::new();
        for (group, count) in [
            (&raw.small_flavors, raw.small_count),
            (&raw.large_flavors, raw.large_count),
        ] {
            let start =
                raw.flavors.len() + draws.iter().map(|d: &Draw| d.flavors.len()).sum::<usize>();
            for demand in group {
                push(demand, 0)?;
            }
            if !group.is_empty() {
                draws.push(Draw {
                    flavors: start..start + group.len(),
                    count,
                });
            }
        }
        let host_shapes = raw
            .host_shapes
            .iter()
            .map(|s| {
                Ok(HostShape {
                    capacity: map(&s.capacity)?,
                    share: s.share,
                })
            })
            .collect::<Result<Vec<_>, DefinitionError>>()?;
        let dataset = Dataset {
            name: raw.name,
            classes,
            flavors,
            draws,
            host_shapes,
            total_requests: raw.total_requests,
            published_setups: raw.published_setups,
        };
        let got = dataset.requests_per_replica();
        if got != dataset.total_requests {
            return Err(DefinitionError::Total {
                got,
                want: dataset.total_requests,
            });
        }
        Ok(dataset)
    }

    /// Requests one replica generates.
    pub fn requests_per_replica(&self) -> usize {
        self.flavors.iter().map(|f| f.count).sum::<usize>()
            + self.draws.iter().map(|d| d.count).sum::<usize>()
    }
}
