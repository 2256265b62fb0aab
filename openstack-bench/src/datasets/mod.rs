//! The papers' workloads (NFV, Google, Amazon) as project data: flavor tables and host shapes
//! read from `datasets/*.json`, mapped exactly to integer resource classes, and seeded
//! generators of request streams and host fleets for the simulator.

mod definition;
pub mod scale;

pub use definition::{Dataset, Flavor, HostShape, Setup};

use parasol::domain::{HostState, RequestContext, Resources};
use rand::seq::SliceRandom;
use rand::Rng;
use std::fmt;
use std::str::FromStr;

/// The three datasets of the papers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DatasetKind {
    Nfv,
    Google,
    Amazon,
}

impl DatasetKind {
    pub const ALL: [DatasetKind; 3] = [DatasetKind::Nfv, DatasetKind::Amazon, DatasetKind::Google];

    pub fn as_str(self) -> &'static str {
        match self {
            DatasetKind::Nfv => "nfv",
            DatasetKind::Google => "google",
            DatasetKind::Amazon => "amazon",
        }
    }

    fn json(self) -> &'static str {
        match self {
            DatasetKind::Nfv => include_str!("../../datasets/nfv.json"),
            DatasetKind::Google => include_str!("../../datasets/google.json"),
            DatasetKind::Amazon => include_str!("../../datasets/amazon.json"),
        }
    }

    /// The parsed and exactly mapped definition. The JSON ships with the crate, so a failure
    /// here is a packaging bug, caught by this module's tests.
    pub fn load(self) -> Dataset {
        Dataset::parse(self.json()).unwrap_or_else(|e| panic!("datasets/{self}.json: {e}"))
    }

    /// The setup experiment A uses (APSR paper, Tables VI and VII): replicas and hosts.
    pub fn parallel_setup(self) -> (usize, usize) {
        match self {
            DatasetKind::Nfv => (30, 837),
            DatasetKind::Amazon => (7, 876),
            DatasetKind::Google => (1, 5989),
        }
    }
}

impl fmt::Display for DatasetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DatasetKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        DatasetKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| format!("unknown dataset `{s}` (expected nfv, google or amazon)"))
    }
}

/// A generated workload: requests as flavor indices in arrival order.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub flavors: Vec<Flavor>,
    pub requests: Vec<u16>,
}

impl Workload {
    /// One reusable scheduling context per flavor (index = flavor index), so the hot loop
    /// builds no per-request strings.
    pub fn contexts(&self) -> Vec<RequestContext> {
        self.flavors
            .iter()
            .map(|f| RequestContext::with_demand(f.name.clone(), f.name.clone(), f.demand))
            .collect()
    }
}

impl Dataset {
    /// `replicas` copies of the dataset's request list, shuffled together with `rng`.
    pub fn workload(&self, replicas: usize, rng: &mut impl Rng) -> Workload {
        let mut requests = Vec::with_capacity(replicas * self.requests_per_replica());
        for _ in 0..replicas {
            self.push_replica(&mut requests, rng);
        }
        requests.shuffle(rng);
        Workload {
            flavors: self.flavors.clone(),
            requests,
        }
    }

    fn push_replica(&self, out: &mut Vec<u16>, rng: &mut impl Rng) {
        for (i, f) in self.flavors.iter().enumerate() {
            out.extend(std::iter::repeat_n(i as u16, f.count));
        }
        for draw in &self.draws {
            for _ in 0..draw.count {
                let pick = rng.gen_range(draw.flavors.clone());
                out.push(pick as u16);
            }
        }
    }

    /// `n` empty hosts, shapes interleaved in proportion to their shares (the shape with
    /// the largest deficit next), so every prefix of the fleet has the published mix.
    pub fn hosts(&self, n: usize) -> Vec<HostState> {
        let mut given = vec![0usize; self.host_shapes.len()];
        (0..n)
            .map(|i| {
                let target = |s: usize| self.host_shapes[s].share * (i + 1) as f64;
                let shape = (0..self.host_shapes.len())
                    .max_by(|&a, &b| {
                        let da = target(a) - given[a] as f64;
                        let db = target(b) - given[b] as f64;
                        da.total_cmp(&db).then(b.cmp(&a))
                    })
                    .unwrap_or(0);
                given[shape] += 1;
                HostState::synthetic(i as i64, self.host_shapes[shape].capacity, Resources::ZERO)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
