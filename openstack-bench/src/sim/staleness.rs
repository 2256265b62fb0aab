//! Experiment B (docs/architecture.md §10 B, ASC paper): one scheduler deciding on a cached snapshot that is
//! refreshed every τ. First one request per time unit with fixed τ from "always" to "never"
//! and unbounded lifetimes; then Poisson arrivals and departures in virtual time with the
//! library's ASC controller, against fresh state and a fixed τ.
//!
//! The cache is a copy of the hosts refreshed by copying their usage (n queries). docs/architecture.md §10 B's
//! model ([`CacheModel::default`]): the scheduler decides on the snapshot as read, without
//! subtracting its own placements (otherwise one scheduler with unbounded lifetimes would
//! never see stale state), and equal ranking keys are broken at random. `consume_own` turns
//! on Nova's `consume_from_request` behaviour and `tie_break` host order, to isolate what
//! each choice changes.

use super::index::RankIndex;
use super::policy;
use super::random::{exponential, stream, Stream};
use crate::datasets::DatasetKind;
use parasol::control::{AscController, AscParams};
use parasol::domain::{HostState, RequestContext};
use parasol::policy::{Algorithm, FilterEnv, Policy, RankArgs, TieBreak};
use rand::Rng;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How the scheduler uses its cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CacheModel {
    /// Subtract the scheduler's own placements from its cache (Nova's
    /// `consume_from_request`); off in docs/architecture.md §10 B ("the snapshot as read").
    pub consume_own: bool,
    /// How equal ranking keys are ordered; random in docs/architecture.md §10 B.
    pub tie_break: TieBreak,
}

impl Default for CacheModel {
    /// docs/architecture.md §10 B: the snapshot as read, equal keys broken at random.
    fn default() -> Self {
        CacheModel {
            consume_own: false,
            tie_break: TieBreak::Random,
        }
    }
}

/// The scheduler's cached view and the authoritative hosts. A refresh reads every host (n
/// queries) but only copies those whose state changed since the last one (`dirty`): the view
/// it leaves is the same. Decisions read the view through an index kept up to date with it
/// (the same decisions as ranking the whole view, see `index`), unless built `scanning`.
struct Cache {
    truth: Vec<HostState>,
    view: Vec<HostState>,
    index: Option<RankIndex>,
    dirty: Vec<usize>,
    is_dirty: Vec<bool>,
    policy: Policy,
    ranked: Vec<usize>,
    consume_own: bool,
    queries: u64,
    refreshes: u64,
}

impl Cache {
    fn new(
        hosts: Vec<HostState>,
        contexts: &[RequestContext],
        algorithm: Algorithm,
        model: CacheModel,
        scanning: bool,
    ) -> Self {
        let index = (!scanning)
            .then(|| RankIndex::new(policy::build(algorithm, model.tie_break), contexts, &hosts));
        Cache {
            index,
            view: hosts.clone(),
            dirty: Vec::new(),
            is_dirty: vec![false; hosts.len()],
            truth: hosts,
            policy: policy::build(algorithm, model.tie_break),
            ranked: Vec::new(),
            consume_own: model.consume_own,
            queries: 0,
            refreshes: 0,
        }
    }

    fn touch(&mut self, h: usize) {
        if !self.is_dirty[h] {
            self.is_dirty[h] = true;
            self.dirty.push(h);
        }
    }

    fn refresh(&mut self) {
        for h in self.dirty.drain(..) {
            let (v, t) = (&mut self.view[h], &self.truth[h]);
            v.used = t.used;
            v.num_instances = t.num_instances;
            v.num_io_ops = t.num_io_ops;
            self.is_dirty[h] = false;
            if let Some(index) = self.index.as_mut() {
                index.update(h, v);
            }
        }
        self.queries += self.truth.len() as u64;
        self.refreshes += 1;
    }

    /// Decides on the view and claims on the truth: the host placed on, or `None` (declined).
    fn place(&mut self, flavor: usize, req: &RequestContext, rng: &mut impl Rng) -> Option<usize> {
        let h = match self.index.as_mut() {
            Some(index) => index.pick(flavor, rng)?,
            None => {
                let env = FilterEnv::without_heartbeats();
                self.policy
                    .rank(
                        &self.view,
                        RankArgs {
                            req,
                            env: &env,
                            max: 1,
                        },
                        rng,
                        &mut self.ranked,
                    )
                    .ok()?;
                *self.ranked.first()?
            }
        };
        if !self.truth[h].fits(&req.demand) {
            return None;
        }
        self.truth[h].consume(&req.demand);
        self.touch(h);
        if self.consume_own {
            self.view[h].consume(&req.demand);
            if let Some(index) = self.index.as_mut() {
                index.update(h, &self.view[h]);
            }
        }
        Some(h)
    }

    fn release(&mut self, h: usize, req: &RequestContext) {
        let host = &mut self.truth[h];
        host.used = host.used - req.demand;
        host.num_instances -= 1;
        host.num_io_ops -= 1;
        self.touch(h);
    }
}

/// What a fixed-interval run measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct StaleOutcome {
    pub requests: u64,
    pub declines: u64,
    pub refreshes: u64,
    pub queries: u64,
}

impl StaleOutcome {
    pub fn decline_ratio(&self) -> f64 {
        self.declines as f64 / self.requests.max(1) as f64
    }
}

/// One request per time unit, the cache refreshed every `interval` units (`Some(1)` = always
/// fresh, `None` = never), requests never end.
#[allow(clippy::too_many_arguments)]
pub fn run_fixed_refresh(
    dataset: DatasetKind,
    replicas: usize,
    hosts: usize,
    algorithm: Algorithm,
    interval: Option<u64>,
    model: CacheModel,
    seed: u64,
) -> StaleOutcome {
    fixed_refresh(
        dataset, replicas, hosts, algorithm, interval, model, seed, false,
    )
}

/// [`run_fixed_refresh`], ranking the whole view for every decision when `scanning`.
#[allow(clippy::too_many_arguments)]
fn fixed_refresh(
    dataset: DatasetKind,
    replicas: usize,
    hosts: usize,
    algorithm: Algorithm,
    interval: Option<u64>,
    model: CacheModel,
    seed: u64,
    scanning: bool,
) -> StaleOutcome {
    let d = dataset.load();
    let workload = d.workload(replicas, &mut stream(seed, Stream::Workload));
    let contexts = workload.contexts();
    let mut cache = Cache::new(d.hosts(hosts), &contexts, algorithm, model, scanning);
    let mut rng = stream(seed, Stream::Decisions);
    let mut out = StaleOutcome::default();
    for (t, f) in workload.requests.iter().enumerate() {
        if interval.is_some_and(|tau| (t as u64).is_multiple_of(tau.max(1))) {
            cache.refresh();
        }
        out.requests += 1;
        if cache
            .place(*f as usize, &contexts[*f as usize], &mut rng)
            .is_none()
        {
            out.declines += 1;
        }
    }
    out.refreshes = cache.refreshes;
    out.queries = cache.queries;
    out
}

/// A dynamic setup: Poisson arrivals, exponential lifetimes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DynamicSetup {
    pub dataset: DatasetKind,
    pub replicas: usize,
    pub hosts: usize,
    pub arrivals_per_s: f64,
    pub lifetime_s: f64,
    /// 0: arrivals at a constant rate (the ASC paper's setups). s in (0, 1): the rate
    /// alternates between (1 − s) and (1 + s) times `arrivals_per_s`, each phase lasting one
    /// mean lifetime, so the load is not stationary (an isolating run).
    pub rate_swing: f64,
}

impl DynamicSetup {
    /// The default setup per dataset: the ASC paper's NFV ×10 on 28 hosts with L = 437 s;
    /// Amazon ×10 on its 126-host setup and Google on 600 hosts, with L chosen the same way
    /// (the load one replica puts on the fleet), so hosts stay nearly full.
    pub fn default_for(dataset: DatasetKind) -> Self {
        let (replicas, hosts, lifetime_s) = match dataset {
            DatasetKind::Nfv => (10, 28, 437.0),
            DatasetKind::Amazon => (10, 126, 1100.0),
            DatasetKind::Google => (1, 600, 1250.0),
        };
        DynamicSetup {
            dataset,
            replicas,
            hosts,
            arrivals_per_s: 1.0,
            lifetime_s,
            rate_swing: 0.0,
        }
    }
}

/// How the cache is refreshed in a dynamic run.
#[derive(Clone, Debug, PartialEq)]
pub enum RefreshMode {
    /// Before every decision (Nova's FilterScheduler).
    Fresh,
    /// Every fixed interval (Nova's CachingScheduler), in milliseconds.
    Fixed(u64),
    /// Read once at the start (every host empty), never again.
    Never,
    /// ASC's adaptive interval.
    Asc(AscParams),
    /// ASC deciding only once its measurement holds at least `min_requests` requests: an
    /// interval with fewer adds its counts to the next one and keeps τ (an isolating run, not
    /// the ASC paper's loop, §IV).
    AscPooled {
        params: AscParams,
        min_requests: u64,
    },
}

/// ASC's interval and the decline ratio of the interval that just ended, at a refresh.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TimelinePoint {
    pub t_s: f64,
    pub interval_s: f64,
    pub decline_ratio: f64,
    /// Requests the decline ratio was taken over.
    pub requests: u64,
}

/// What a dynamic run measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DynamicOutcome {
    pub requests: u64,
    pub declines: u64,
    pub refreshes: u64,
    pub queries: u64,
    /// Mean interval between refreshes actually used, in seconds.
    pub mean_interval_s: f64,
    pub timeline: Vec<TimelinePoint>,
}

impl DynamicOutcome {
    pub fn decline_ratio(&self) -> f64 {
        self.declines as f64 / self.requests.max(1) as f64
    }
}

/// The next arrival after `now` (ms): Poisson at the setup's rate, or, with a rate swing,
/// drawn at the peak rate and kept with probability rate(t) / peak (thinning, exact for a
/// piecewise-constant rate).
fn next_arrival(setup: &DynamicSetup, mut now: f64, rng: &mut impl Rng) -> f64 {
    let peak = setup.arrivals_per_s * (1.0 + setup.rate_swing);
    loop {
        now += exponential(rng, 1000.0 / peak);
        if setup.rate_swing == 0.0 {
            return now;
        }
        let phase = (now / (setup.lifetime_s * 1000.0)) as u64;
        let factor = if phase.is_multiple_of(2) {
            1.0 - setup.rate_swing
        } else {
            1.0 + setup.rate_swing
        };
        if rng.gen::<f64>() * (1.0 + setup.rate_swing) < factor {
            return now;
        }
    }
}

/// Runs a dynamic setup with `algorithm` and the given refresh mode, in milliseconds of
/// virtual time.
pub fn run_dynamic(
    setup: &DynamicSetup,
    algorithm: Algorithm,
    mode: RefreshMode,
    model: CacheModel,
    seed: u64,
) -> DynamicOutcome {
    dynamic(setup, algorithm, mode, model, seed, false)
}

/// [`run_dynamic`], ranking the whole view for every decision when `scanning`.
#[allow(clippy::too_many_lines)]
fn dynamic(
    setup: &DynamicSetup,
    algorithm: Algorithm,
    mode: RefreshMode,
    model: CacheModel,
    seed: u64,
    scanning: bool,
) -> DynamicOutcome {
    let d = setup.dataset.load();
    let workload = d.workload(setup.replicas, &mut stream(seed, Stream::Workload));
    let contexts = workload.contexts();
    let mut cache = Cache::new(d.hosts(setup.hosts), &contexts, algorithm, model, scanning);
    let mut arrivals = stream(seed, Stream::Arrivals);
    let mut lifetimes = stream(seed, Stream::Lifetimes);
    let mut rng = stream(seed, Stream::Decisions);
    let (mut asc, min_requests) = match &mode {
        RefreshMode::Asc(params) => (
            Some(AscController::new(params.clone()).expect("valid ASC parameters")),
            0,
        ),
        RefreshMode::AscPooled {
            params,
            min_requests,
        } => (
            Some(AscController::new(params.clone()).expect("valid ASC parameters")),
            *min_requests,
        ),
        _ => (None, 0),
    };
    let mut interval_ms = match &mode {
        RefreshMode::Fresh | RefreshMode::Never => 0,
        RefreshMode::Fixed(ms) => (*ms).max(1),
        RefreshMode::Asc(params) | RefreshMode::AscPooled { params, .. } => {
            params.start_interval_ms
        }
    };
    let mut next_refresh = match mode {
        RefreshMode::Never => f64::INFINITY,
        _ => interval_ms as f64,
    };
    let mut departures: BinaryHeap<Reverse<(u64, usize, u16)>> = BinaryHeap::new();
    let (mut placed_w, mut declined_w, mut intervals_sum) = (0u64, 0u64, 0u64);
    let mut out = DynamicOutcome::default();
    cache.refresh();
    let mut now = 0.0f64;
    for f in &workload.requests {
        now = next_arrival(setup, now, &mut arrivals);
        loop {
            let dep = departures.peek().map(|Reverse((t, _, _))| *t as f64);
            let refresh_due = !matches!(mode, RefreshMode::Fresh) && next_refresh <= now;
            match dep {
                Some(t) if t <= now && (!refresh_due || t <= next_refresh) => {
                    let Some(Reverse((_, h, g))) = departures.pop() else {
                        break;
                    };
                    cache.release(h, &contexts[g as usize]);
                }
                _ if refresh_due => {
                    let pooled = placed_w + declined_w < min_requests;
                    if let Some(ctl) = asc.as_mut().filter(|_| !pooled) {
                        let r = declined_w as f64 / (placed_w + declined_w).max(1) as f64;
                        interval_ms = ctl.on_interval(placed_w, declined_w).max(1);
                        out.timeline.push(TimelinePoint {
                            t_s: next_refresh / 1000.0,
                            interval_s: interval_ms as f64 / 1000.0,
                            decline_ratio: r,
                            requests: placed_w + declined_w,
                        });
                    }
                    intervals_sum += interval_ms;
                    if !pooled {
                        placed_w = 0;
                        declined_w = 0;
                    }
                    cache.refresh();
                    next_refresh += interval_ms as f64;
                }
                _ => break,
            }
        }
        if matches!(mode, RefreshMode::Fresh) {
            cache.refresh();
        }
        out.requests += 1;
        let req = &contexts[*f as usize];
        match cache.place(*f as usize, req, &mut rng) {
            Some(h) => {
                placed_w += 1;
                let life_ms = exponential(&mut lifetimes, setup.lifetime_s * 1000.0);
                departures.push(Reverse(((now + life_ms) as u64, h, *f)));
            }
            None => {
                declined_w += 1;
                out.declines += 1;
            }
        }
    }
    out.refreshes = cache.refreshes;
    out.queries = cache.queries;
    let timed_refreshes = if matches!(mode, RefreshMode::Fresh | RefreshMode::Never) {
        0
    } else {
        cache.refreshes - 1
    };
    out.mean_interval_s = if timed_refreshes == 0 {
        0.0
    } else {
        intervals_sum as f64 / timed_refreshes as f64 / 1000.0
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const AS_READ: CacheModel = CacheModel {
        consume_own: false,
        tie_break: TieBreak::Random,
    };
    const HOST_ORDER: CacheModel = CacheModel {
        consume_own: false,
        tie_break: TieBreak::HostOrder,
    };
    const CONSUME_OWN: CacheModel = CacheModel {
        consume_own: true,
        tie_break: TieBreak::HostOrder,
    };

    fn nfv(
        replicas: usize,
        hosts: usize,
        a: Algorithm,
        every: Option<u64>,
        m: CacheModel,
    ) -> StaleOutcome {
        run_fixed_refresh(DatasetKind::Nfv, replicas, hosts, a, every, m, 1)
    }

    #[test]
    fn the_default_model_is_design_6b() {
        assert_eq!(CacheModel::default(), AS_READ);
    }

    #[test]
    fn always_fresh_with_one_scheduler_declines_only_when_nothing_fits() {
        let fresh = nfv(1, 40, Algorithm::FirstFit, Some(1), AS_READ);
        assert_eq!(fresh.declines, 0);
        assert_eq!(fresh.queries, 437 * 40);
    }

    #[test]
    fn a_never_refreshed_cache_declines_more_than_a_fresh_one() {
        for model in [AS_READ, HOST_ORDER] {
            let fresh = nfv(2, 30, Algorithm::FirstFit, Some(1), model);
            let never = nfv(2, 30, Algorithm::FirstFit, None, model);
            assert!(
                never.decline_ratio() > fresh.decline_ratio() + 0.2,
                "{never:?} {fresh:?}"
            );
            assert_eq!(never.queries, 0);
        }
    }

    #[test]
    fn random_ties_spread_a_never_refreshed_cache_over_alike_hosts() {
        // Every host of the NFV fleet looks empty and alike: host order sends everything to
        // the first host, random ties spread requests at random (the ASC paper's observation).
        let ordered = nfv(2, 30, Algorithm::WorstFit, None, HOST_ORDER);
        let random = nfv(2, 30, Algorithm::WorstFit, None, AS_READ);
        assert!(ordered.decline_ratio() > 0.9, "{ordered:?}");
        assert!(random.decline_ratio() < 0.5, "{random:?}");
    }

    #[test]
    fn consuming_own_claims_makes_a_stale_cache_as_good_as_fresh_without_departures() {
        let fresh = run_fixed_refresh(
            DatasetKind::Nfv,
            1,
            30,
            Algorithm::FirstFit,
            Some(1),
            CONSUME_OWN,
            3,
        );
        let never = run_fixed_refresh(
            DatasetKind::Nfv,
            1,
            30,
            Algorithm::FirstFit,
            None,
            CONSUME_OWN,
            3,
        );
        assert_eq!(fresh.declines, never.declines);
    }

    #[test]
    fn the_index_decides_as_ranking_the_whole_view() {
        let models = [AS_READ, HOST_ORDER, CONSUME_OWN];
        for a in [
            Algorithm::Random,
            Algorithm::BestFit,
            Algorithm::Wfr,
            Algorithm::Ffr,
            Algorithm::DistFromDiag,
            Algorithm::Adaptive,
        ] {
            for m in models {
                for every in [Some(1), Some(20), None] {
                    let run =
                        |scanning| fixed_refresh(DatasetKind::Nfv, 2, 30, a, every, m, 4, scanning);
                    assert_eq!(run(false), run(true), "{a:?} {m:?} {every:?}");
                }
            }
        }
        let setup = DynamicSetup::default_for(DatasetKind::Nfv);
        for a in [Algorithm::WorstFit, Algorithm::Random, Algorithm::FirstFit] {
            for mode in [
                RefreshMode::Fresh,
                RefreshMode::Fixed(30_000),
                RefreshMode::Asc(AscParams::default()),
            ] {
                let run = |scanning| dynamic(&setup, a, mode.clone(), AS_READ, 5, scanning);
                assert_eq!(run(false), run(true), "{a:?} {mode:?}");
            }
        }
    }

    #[test]
    fn a_never_refreshed_dynamic_run_reads_the_hosts_once() {
        let setup = DynamicSetup::default_for(DatasetKind::Nfv);
        let never = run_dynamic(&setup, Algorithm::WorstFit, RefreshMode::Never, AS_READ, 1);
        assert_eq!(never.refreshes, 1);
        assert_eq!(never.queries, setup.hosts as u64);
        assert_eq!(never.mean_interval_s, 0.0);
        let fresh = run_dynamic(&setup, Algorithm::WorstFit, RefreshMode::Fresh, AS_READ, 1);
        assert!(never.declines > fresh.declines, "{never:?} {fresh:?}");
    }

    #[test]
    fn pooled_asc_with_a_one_request_minimum_decides_as_asc() {
        let setup = DynamicSetup::default_for(DatasetKind::Nfv);
        let params = AscParams::default();
        let plain = run_dynamic(
            &setup,
            Algorithm::Random,
            RefreshMode::Asc(params.clone()),
            AS_READ,
            3,
        );
        let pooled = RefreshMode::AscPooled {
            params,
            min_requests: 1,
        };
        let pooled = run_dynamic(&setup, Algorithm::Random, pooled, AS_READ, 3);
        assert_eq!(
            (plain.declines, plain.refreshes, plain.mean_interval_s),
            (pooled.declines, pooled.refreshes, pooled.mean_interval_s)
        );
    }

    #[test]
    fn pooled_asc_decides_only_on_intervals_holding_the_minimum() {
        let setup = DynamicSetup::default_for(DatasetKind::Nfv);
        let params = AscParams::default();
        let plain = run_dynamic(
            &setup,
            Algorithm::Random,
            RefreshMode::Asc(params.clone()),
            AS_READ,
            3,
        );
        let pooled = RefreshMode::AscPooled {
            params,
            min_requests: 20,
        };
        let pooled = run_dynamic(&setup, Algorithm::Random, pooled, AS_READ, 3);
        assert!(pooled.timeline.iter().all(|p| p.requests >= 20));
        assert!((pooled.timeline.len() as u64) < pooled.refreshes - 1);
        assert!(plain.timeline.iter().any(|p| p.requests < 20));
        assert_eq!(plain.timeline.len() as u64, plain.refreshes - 1);
    }

    #[test]
    fn dynamic_runs_are_reproducible_and_asc_reports_its_interval() {
        let setup = DynamicSetup::default_for(DatasetKind::Nfv);
        let asc = RefreshMode::Asc(AscParams::default());
        let a = run_dynamic(&setup, Algorithm::WorstFit, asc.clone(), AS_READ, 2);
        let b = run_dynamic(&setup, Algorithm::WorstFit, asc, AS_READ, 2);
        assert_eq!(a, b);
        assert_eq!(a.requests, 4370);
        assert!(a.mean_interval_s > 0.0 && !a.timeline.is_empty());
    }
}
