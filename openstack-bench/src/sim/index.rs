//! An index over host states for the simulator's full-snapshot decisions, so a placement does
//! not read every host: per flavor, the hosts that fit and, for the ranking algorithms, the
//! fitting hosts grouped by key, kept up to date host by host as claims, releases and cache
//! refreshes change them.
//!
//! [`RankIndex::pick`] gives exactly what [`Policy::rank`] gives for the simulator's policies
//! (the capacity filter only, `max` = 1) — the same host and the same draws from the same
//! generator — so every table is unchanged: `random` takes the j-th fitting host in host order
//! for the same j; host-order ties take the first of the best key group; random ties take the
//! j-th host of the tied group, which is the order the pipeline's partial selection leaves them
//! in for a single pick. The one case whose answer depends on the order the standard library's
//! selection leaves equal keys in (random ties among several top hosts: `wfr` with random ties
//! where keys tie near the top) runs the pipeline's selection itself over the passing hosts in
//! host order, their keys read from the index. The tests at the bottom compare pick for pick
//! with [`Policy::rank`].

use parasol::domain::{HostState, RequestContext};
use parasol::policy::algorithms::{self, adaptive, KeyFn, Ranking};
use parasol::policy::{top_with_random_ties, Algorithm, FilterEnv, Policy, Scored, TieBreak};
use rand::Rng;
use std::collections::BTreeMap;

/// `score` as the pipeline compares it (−0 as 0, NaN last), mapped to an integer that sorts
/// as `f64::total_cmp` does.
fn ordered(score: f64) -> u64 {
    let s = if score.is_nan() {
        f64::NEG_INFINITY
    } else {
        score + 0.0
    };
    let bits = s.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// The fitting hosts of one flavor grouped by key, best key first, each group in host order.
#[derive(Default)]
struct Groups {
    /// Per host, the map key of its group (`!ordered(score)`: ascending = best first), or
    /// `None` when the host does not fit.
    at: Vec<Option<u64>>,
    groups: BTreeMap<u64, Vec<u32>>,
}

impl Groups {
    fn set(&mut self, h: usize, key: Option<u64>) {
        if self.at[h] == key {
            return;
        }
        if let Some(old) = self.at[h] {
            if let Some(g) = self.groups.get_mut(&old) {
                if let Ok(p) = g.binary_search(&(h as u32)) {
                    g.remove(p);
                }
                if g.is_empty() {
                    self.groups.remove(&old);
                }
            }
        }
        if let Some(new) = key {
            let g = self.groups.entry(new).or_default();
            if let Err(p) = g.binary_search(&(h as u32)) {
                g.insert(p, h as u32);
            }
        }
        self.at[h] = key;
    }
}

/// One flavor's view: which hosts fit (a bit set, for `random`) and the key groups of each
/// key the algorithm ranks by.
struct Flavor {
    fit: Vec<u64>,
    fitting: usize,
    /// One per key of [`RankIndex::keys`].
    ranked: Vec<Groups>,
}

impl Flavor {
    /// The `j`-th fitting host in host order.
    fn nth_fitting(&self, mut j: usize) -> Option<usize> {
        for (w, word) in self.fit.iter().enumerate() {
            let c = word.count_ones() as usize;
            if j < c {
                let mut bits = *word;
                for _ in 0..j {
                    bits &= bits - 1;
                }
                return Some(w * 64 + bits.trailing_zeros() as usize);
            }
            j -= c;
        }
        None
    }
}

/// The index of one policy over one host table (see the module documentation).
pub struct RankIndex {
    policy: Policy,
    algorithm: Algorithm,
    tie_break: TieBreak,
    contexts: Vec<RequestContext>,
    /// The keys the algorithm may rank by (two for `adaptive`), with their pick-set sizes.
    keys: Vec<(Algorithm, KeyFn, usize)>,
    flavors: Vec<Flavor>,
    /// `adaptive` only: per host its load as [`ordered`] (`None`: no capacity), and how many
    /// hosts have each load, for the least-loaded host's load.
    loads: Vec<Option<u64>>,
    load_counts: BTreeMap<u64, usize>,
    /// The passing hosts and their keys, when a decision needs them all.
    scored: Vec<Scored>,
}

impl RankIndex {
    /// Indexes `hosts` for `policy` (which must be the simulator's: capacity filter only) and
    /// the requests of `contexts` (flavor index = position).
    pub fn new(policy: Policy, contexts: &[RequestContext], hosts: &[HostState]) -> Self {
        let algorithm = policy.algorithm();
        let subset = policy.host_subset_size();
        let inner = match algorithm {
            Algorithm::Adaptive => vec![Algorithm::WorstFit, Algorithm::FirstFit],
            Algorithm::Random => vec![],
            a => vec![a],
        };
        let keys = inner
            .into_iter()
            .filter_map(|a| match algorithms::resolve(a, &[], subset) {
                (Ranking::Key(f), s) => Some((a, f, s)),
                _ => None,
            })
            .collect::<Vec<_>>();
        let words = hosts.len().div_ceil(64);
        let flavors = contexts
            .iter()
            .map(|_| Flavor {
                fit: vec![0; words],
                fitting: 0,
                ranked: keys
                    .iter()
                    .map(|_| Groups {
                        at: vec![None; hosts.len()],
                        groups: BTreeMap::new(),
                    })
                    .collect(),
            })
            .collect();
        let mut index = RankIndex {
            tie_break: policy.tie_break(),
            policy,
            algorithm,
            contexts: contexts.to_vec(),
            keys,
            flavors,
            loads: vec![None; hosts.len()],
            load_counts: BTreeMap::new(),
            scored: Vec::new(),
        };
        for (h, host) in hosts.iter().enumerate() {
            index.update(h, host);
        }
        index
    }

    /// Host `h` is now `host`.
    pub fn update(&mut self, h: usize, host: &HostState) {
        let env = FilterEnv::without_heartbeats();
        for (f, flavor) in self.flavors.iter_mut().enumerate() {
            let req = &self.contexts[f];
            let fits = self.policy.fits_any(host, req, &env);
            let (w, bit) = (h / 64, 1u64 << (h % 64));
            if fits != (flavor.fit[w] & bit != 0) {
                flavor.fit[w] ^= bit;
                if fits {
                    flavor.fitting += 1;
                } else {
                    flavor.fitting -= 1;
                }
            }
            for ((_, key, _), groups) in self.keys.iter().zip(flavor.ranked.iter_mut()) {
                let k = fits.then(|| !ordered(key(host, &req.demand)));
                groups.set(h, k);
            }
        }
        if self.algorithm == Algorithm::Adaptive {
            let load = adaptive::host_load(host).map(ordered);
            if load != self.loads[h] {
                if let Some(old) = self.loads[h] {
                    if let Some(c) = self.load_counts.get_mut(&old) {
                        *c -= 1;
                        if *c == 0 {
                            self.load_counts.remove(&old);
                        }
                    }
                }
                if let Some(new) = load {
                    *self.load_counts.entry(new).or_default() += 1;
                }
                self.loads[h] = load;
            }
        }
    }

    /// The pick of `Policy::rank` over `hosts` for `contexts[flavor]` and `max` 1, drawing from
    /// `rng` as it does, where `hosts` is the table the index is up to date with (the index
    /// reads none of it).
    pub fn pick(&mut self, flavor: usize, rng: &mut impl Rng) -> Option<usize> {
        let fl = &self.flavors[flavor];
        let n = fl.fitting;
        if n == 0 {
            return None;
        }
        let k = match self.algorithm {
            Algorithm::Random => {
                let j = if n > 1 { rng.gen_range(0..n) } else { 0 };
                return fl.nth_fitting(j);
            }
            Algorithm::Adaptive => {
                let least = self
                    .load_counts
                    .keys()
                    .next()
                    .map_or(0.0, |o| unordered(*o));
                match adaptive::choose(least) {
                    Algorithm::WorstFit => 0,
                    _ => 1,
                }
            }
            _ => 0,
        };
        let (_, _, subset) = self.keys[k];
        let groups = &fl.ranked[k].groups;
        let subset = subset.clamp(1, n);
        let top = subset;
        match self.tie_break {
            TieBreak::HostOrder => {
                let pick = if subset > 1 {
                    rng.gen_range(0..subset)
                } else {
                    0
                };
                groups
                    .values()
                    .flat_map(|g| g.iter())
                    .nth(pick)
                    .map(|h| *h as usize)
            }
            TieBreak::Random if top == 1 => {
                let g = groups.values().next()?;
                let j = if n > 1 && g.len() > 1 {
                    rng.gen_range(0..g.len())
                } else {
                    0
                };
                Some(g[j] as usize)
            }
            TieBreak::Random => {
                // Keys all distinct down to the cut (and the cut's key held by one host
                // only): the pipeline's selection leaves nothing to chance but its draws.
                let distinct = groups.values().take(top).all(|g| g.len() == 1);
                if !distinct {
                    // The pipeline's own selection over the passing hosts in host order,
                    // their keys read from the index rather than computed.
                    let at = &fl.ranked[k].at;
                    self.scored.clear();
                    for (w, word) in fl.fit.iter().enumerate() {
                        let mut bits = *word;
                        while bits != 0 {
                            let idx = w * 64 + bits.trailing_zeros() as usize;
                            bits &= bits - 1;
                            let score = at[idx].map_or(f64::NEG_INFINITY, |o| unordered(!o));
                            self.scored.push(Scored { score, idx });
                        }
                    }
                    top_with_random_ties(&mut self.scored, top, rng);
                    let pick = if subset > 1 {
                        rng.gen_range(0..subset)
                    } else {
                        0
                    };
                    return Some(self.scored[pick].idx);
                }
                if top > 1 {
                    for i in 0..top - 1 {
                        let _: usize = rng.gen_range(i..top);
                    }
                }
                let pick = if subset > 1 {
                    rng.gen_range(0..subset)
                } else {
                    0
                };
                groups.values().nth(pick).map(|g| g[0] as usize)
            }
        }
    }
}

/// The inverse of [`ordered`].
fn unordered(o: u64) -> f64 {
    let bits = if o >> 63 == 1 { o & !(1 << 63) } else { !o };
    f64::from_bits(bits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::DatasetKind;
    use crate::sim::policy;
    use crate::sim::random::{stream, Stream};
    use parasol::policy::RankArgs;

    #[test]
    fn ordered_sorts_as_total_cmp_and_round_trips() {
        let values = [-1.5, -0.25, 0.0, 1e-300, 0.5, 2.0, f64::INFINITY];
        for w in values.windows(2) {
            assert!(ordered(w[0]) < ordered(w[1]), "{w:?}");
        }
        for v in values {
            assert_eq!(unordered(ordered(v)), v);
        }
        assert_eq!(ordered(-0.0), ordered(0.0));
        assert_eq!(ordered(f64::NAN), ordered(f64::NEG_INFINITY));
    }

    /// Fills a dataset's fleet request by request (with some releases), deciding each
    /// request both with the index and with `Policy::rank` on generators of the same seed:
    /// the same host every time, and the generators left in the same state.
    fn same_picks_as_the_pipeline(kind: DatasetKind, hosts: usize, replicas: usize) {
        let d = kind.load();
        let workload = d.workload(replicas, &mut stream(1, Stream::Workload));
        let contexts = workload.contexts();
        for algorithm in Algorithm::ALL {
            if algorithm == Algorithm::Nova {
                continue;
            }
            for tie_break in [TieBreak::HostOrder, TieBreak::Random] {
                let mut table = d.hosts(hosts);
                let scan = policy::build(algorithm, tie_break);
                let mut index =
                    RankIndex::new(policy::build(algorithm, tie_break), &contexts, &table);
                let (mut a, mut b) = (stream(9, Stream::Decisions), stream(9, Stream::Decisions));
                let mut placed: Vec<(usize, u16)> = Vec::new();
                let mut out = Vec::new();
                let env = FilterEnv::without_heartbeats();
                for (t, f) in workload.requests.iter().enumerate() {
                    let req = &contexts[*f as usize];
                    let want = match scan.rank(
                        &table,
                        RankArgs {
                            req,
                            env: &env,
                            max: 1,
                        },
                        &mut a,
                        &mut out,
                    ) {
                        Ok(()) => out.first().copied(),
                        Err(_) => None,
                    };
                    let got = index.pick(*f as usize, &mut b);
                    assert_eq!(got, want, "{kind} {algorithm:?} {tie_break:?} request {t}");
                    if let Some(h) = got {
                        table[h].consume(&req.demand);
                        index.update(h, &table[h]);
                        placed.push((h, *f));
                    }
                    if t % 7 == 3 {
                        // A release now and then, as in the dynamic runs.
                        if let Some((h, g)) = placed.pop() {
                            let demand = contexts[g as usize].demand;
                            let host = &mut table[h];
                            host.used = host.used - demand;
                            host.num_instances -= 1;
                            host.num_io_ops -= 1;
                            index.update(h, &table[h]);
                        }
                    }
                }
                assert_eq!(
                    a.gen::<u64>(),
                    b.gen::<u64>(),
                    "{algorithm:?} {tie_break:?}"
                );
            }
        }
    }

    #[test]
    fn picks_equal_the_pipelines_on_nfv() {
        same_picks_as_the_pipeline(DatasetKind::Nfv, 30, 1);
    }

    #[test]
    fn picks_equal_the_pipelines_on_amazon_and_google() {
        same_picks_as_the_pipeline(DatasetKind::Amazon, 40, 1);
        same_picks_as_the_pipeline(DatasetKind::Google, 120, 1);
    }
}
