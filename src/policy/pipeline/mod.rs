//! The policy pipeline: filter, rank (weighers or an algorithm's key), pick among the top ℓ.

use super::algorithms::{self, random::shuffle_prefix, Ranking};
use super::config::{Algorithm, PolicyConfig, TieBreak};
use super::error::{PolicyError, Rejection};
use super::filters::{Filter, FilterEnv, ScanCheck};
use super::registry::{builtin_filters, builtin_weighers, Registry};
use super::weighers::{add_normalised, HostValue, Weigher};
use crate::domain::{HostScan, HostState, QueryTest, RequestContext, SCAN_CLASSES};
use rand::Rng;
use std::cell::RefCell;
use std::cmp::Ordering;
use std::fmt;

mod sorted;
pub use sorted::{SortKey, SortedIndex, SortedScratch};

/// A built policy: filters, weighers and the ranking algorithm. Shared by every worker.
pub struct Policy {
    algorithm: Algorithm,
    host_subset_size: usize,
    tie_break: TieBreak,
    filters: Vec<Box<dyn Filter>>,
    weighers: Vec<Box<dyn Weigher>>,
}

/// What one ranking is asked: the request, what its filters read besides the hosts, and how
/// many candidates to answer (the pick, then alternates). Built once per ranking by the caller
/// and passed by value (three words).
#[derive(Clone, Copy, Debug)]
pub struct RankArgs<'a> {
    pub req: &'a RequestContext,
    pub env: &'a FilterEnv,
    /// At most this many candidates.
    pub max: usize,
}

/// Hosts with their scan rows, `rows[i]` being `HostScan::of(&hosts[i])`: the live table's or a
/// snapshot's, as the rankings that read rows take them.
#[derive(Clone, Copy)]
pub struct ScanView<'a> {
    hosts: &'a [HostState],
    rows: &'a [HostScan],
}

impl<'a> ScanView<'a> {
    /// `hosts` and their rows, one row per host.
    pub fn new(hosts: &'a [HostState], rows: &'a [HostScan]) -> Self {
        debug_assert_eq!(hosts.len(), rows.len());
        ScanView { hosts, rows }
    }
}

/// A request's filter tests of scan rows (see [`Policy::scan_steps`]), with what they read:
/// built once per scan.
struct RowTest<'a> {
    policy: &'a Policy,
    /// The request's demand, hoisted for the capacity step.
    demand: Demand,
    hosts: &'a [HostState],
    req: &'a RequestContext,
    env: &'a FilterEnv,
}

impl RowTest<'_> {
    /// Filter `k`'s test of host `i` (its scan row `row`), made as `step` says.
    /// Inlined into the scans: as a call it was a third of `filter`'s instructions per host.
    #[inline(always)]
    fn passes(&self, k: usize, step: Step, row: &HostScan, i: usize) -> bool {
        match step {
            Step::Compute => service_up(row, self.env),
            Step::Capacity { query } => {
                (self.demand.fits(row)
                    || (self.req.call_claims.is_some()
                        && self.req.fitted_before_the_call(&self.hosts[i])))
                    && (row.flags & HostScan::UNIT_RULES == 0
                        || self.hosts[i].profile.admits(&self.req.demand))
                    && query.passes(row.traits, || self.req.query.accepts(&self.hosts[i]))
            }
            Step::Passes => self.policy.filters[k].passes(&self.hosts[i], self.req, self.env),
        }
    }
}

/// Reusable buffers for [`Policy::rank_with`]: after the first calls have grown them, ranking
/// allocates nothing per host (or at all, on the success path).
#[derive(Debug, Default)]
pub struct RankScratch {
    scored: Vec<Scored>,
    /// Raw weigher values, one column of `scored.len()` per weigher in use.
    raw: Vec<f64>,
    weights: Vec<f64>,
    removed: Vec<usize>,
    /// Indices of the filters and weighers that matter for the request at hand.
    active: Vec<usize>,
    /// A scan's tests, one per filter that matters, in the filters' order.
    steps: Vec<Step>,
    /// The best hosts so far of a one-pass top-k.
    best: Vec<Scored>,
}

/// One filter's test in a scan over [`HostScan`] rows, decided once per request.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// ComputeFilter's test on the row.
    Compute,
    /// CapacityFilter's test on the row: room in the demanded classes (all below
    /// [`SCAN_CLASSES`]); then unit rules when the row says the host has some, and
    /// Placement's query when the request has one, on the host.
    Capacity { query: QueryTest },
    /// The filter's own `passes`, on the host.
    Passes,
}

/// Demanded classes of a request, hoisted out of the scan: `(class index, amount)`.
#[derive(Clone, Copy, Debug, Default)]
struct Demand {
    classes: [(usize, i64); SCAN_CLASSES],
    len: usize,
}

impl Demand {
    /// The non-zero classes of `req`'s demand, or `None` when one is beyond the scan row.
    fn of(req: &RequestContext) -> Option<Demand> {
        let mut d = Demand::default();
        for (class, amount) in req.demand.nonzero() {
            let i = class.index();
            if i >= SCAN_CLASSES {
                return None;
            }
            d.classes[d.len] = (i, amount);
            d.len += 1;
        }
        Some(d)
    }

    #[inline(always)]
    fn fits(&self, row: &HostScan) -> bool {
        self.classes[..self.len]
            .iter()
            .all(|&(i, amount)| row.has_room(i, amount))
    }
}

/// ComputeFilter's test on a row (see `filters::compute`).
#[inline(always)]
fn service_up(row: &HostScan, env: &FilterEnv) -> bool {
    row.flags & HostScan::SERVICE_OK != 0
        && (env.host_timeout_ms == 0
            || (row.last_seen_ms != 0
                && env.now_ms.abs_diff(row.last_seen_ms) <= env.host_timeout_ms.unsigned_abs()))
}

/// Most weighers a fused scan weighs (Nova has seven).
const SCAN_WEIGHERS: usize = 8;

/// Appends one host's weigher values (`read` of each column's value) to `raw` and widens each
/// column's range `lo[c]..=hi[c]` to hold them: the inner loop of the fused scan. The columns
/// and bounds walked together (no bounds checks), the values pushed one by one (a
/// `raw.extend` of them was not inlined: a call of `Map::fold` per host, 133 instructions per
/// host in callgrind), and comparisons rather than `f64::min`/`max`, whose NaN handling costs
/// several instructions here: the values are never NaN (`HostValue::of_row`).
#[inline(always)]
fn weigh_columns(
    columns: &[(HostValue, f64)],
    read: impl Fn(HostValue) -> f64,
    lo: &mut [f64; SCAN_WEIGHERS],
    hi: &mut [f64; SCAN_WEIGHERS],
    raw: &mut Vec<f64>,
) {
    for (&(value, _), (lo, hi)) in columns.iter().zip(lo.iter_mut().zip(hi.iter_mut())) {
        let v = read(value);
        if v < *lo {
            *lo = v;
        }
        if v > *hi {
            *hi = v;
        }
        raw.push(v);
    }
}

#[cfg(test)]
impl RankScratch {
    /// The capacity of every buffer, to check that a call grew none.
    pub(crate) fn capacities(&self) -> [usize; 7] {
        [
            self.scored.capacity(),
            self.raw.capacity(),
            self.weights.capacity(),
            self.removed.capacity(),
            self.active.capacity(),
            self.steps.capacity(),
            self.best.capacity(),
        ]
    }
}

/// A host's score and its index in the ranked slice (public so the simulator's index draws
/// its random ties through [`top_with_random_ties`] exactly as the pipeline does).
#[derive(Clone, Copy, Debug)]
pub struct Scored {
    pub score: f64,
    pub idx: usize,
}

/// Higher score first, then host order: a total order, so unstable sorts are reproducible.
fn by_rank(a: &Scored, b: &Scored) -> Ordering {
    b.score.total_cmp(&a.score).then(a.idx.cmp(&b.idx))
}

/// Higher score first; equal scores compare equal (for random tie-breaking).
fn by_score(a: &Scored, b: &Scored) -> Ordering {
    b.score.total_cmp(&a.score)
}

/// Moves the items for which `keep` holds to the front of `items`; returns how many.
fn partition(items: &mut [Scored], keep: impl Fn(&Scored) -> bool) -> usize {
    let mut k = 0;
    for i in 0..items.len() {
        if keep(&items[i]) {
            items.swap(i, k);
            k += 1;
        }
    }
    k
}

/// Puts the best `top` of `scored` in front, in descending score, hosts with equal scores in
/// uniformly random order (and, where the cut falls inside a group of equal scores, a
/// uniformly random part of that group in front). Draws from `rng` only for ties.
pub fn top_with_random_ties(scored: &mut [Scored], top: usize, rng: &mut impl Rng) {
    let n = scored.len();
    if top == 0 || n == 0 {
        return;
    }
    if top < n {
        scored.select_nth_unstable_by(top - 1, by_score);
        let cut = scored[top - 1].score;
        let tied = |s: &Scored| s.score.total_cmp(&cut) == Ordering::Equal;
        // [strictly better | tied] before the cut, [tied | worse] after it.
        let better = partition(&mut scored[..top], |s| !tied(s));
        let tied_after = partition(&mut scored[top..], tied);
        if tied_after > 0 {
            shuffle_prefix(&mut scored[better..top + tied_after], top - better, rng);
        }
    }
    let head = &mut scored[..top];
    if head.len() > 1 {
        // A uniform order, then a stable sort by score: equal scores stay in random order.
        shuffle_prefix(head, top, rng);
        head.sort_by(by_score);
    }
}

/// Makes a score safe for `total_cmp`: −0 as 0, NaN last.
fn canonical(score: f64) -> f64 {
    if score.is_nan() {
        f64::NEG_INFINITY
    } else {
        score + 0.0
    }
}

/// Puts the best `top` of `scored` by [`by_rank`] in front, in that order (what a partial
/// select and a sort of the front give; the rest of `scored` is left unspecified). A small
/// `top` takes one pass with one comparison per host against the current k-th.
fn top_by_rank(scored: &mut [Scored], top: usize, best: &mut Vec<Scored>) {
    let n = scored.len();
    if top == 0 {
        return;
    }
    if top > 32 || top >= n {
        if top < n {
            scored.select_nth_unstable_by(top - 1, by_rank);
        }
        scored[..top].sort_unstable_by(by_rank);
        return;
    }
    best.clear();
    for s in scored.iter() {
        if best.len() == top {
            if by_rank(s, &best[top - 1]) != Ordering::Less {
                continue;
            }
            best.pop();
        }
        let at = best.partition_point(|b| by_rank(b, s) == Ordering::Less);
        best.insert(at, *s);
    }
    scored[..top].copy_from_slice(best);
}

/// Fills `out` from the ranked `top` (best first): the pick, uniform among the first `subset`
/// (`1 ≤ subset ≤ top.len()`), then the others in order, `max` (> 0) in all.
fn emit(top: &[Scored], subset: usize, max: usize, rng: &mut impl Rng, out: &mut Vec<usize>) {
    let pick = if subset > 1 {
        rng.gen_range(0..subset)
    } else {
        0
    };
    out.push(top[pick].idx);
    let alternates = top.iter().enumerate().filter(|(j, _)| *j != pick);
    out.extend(alternates.map(|(_, s)| s.idx).take(max - 1));
}

thread_local! {
    static SCRATCH: RefCell<RankScratch> = RefCell::new(RankScratch::default());
}

/// Runs `f` with this thread's scratch buffers, or fresh ones when they are in use (a rank
/// called from inside a rank).
fn with_scratch<R>(f: impl FnOnce(&mut RankScratch) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => f(&mut scratch),
        Err(_) => f(&mut RankScratch::default()),
    })
}

/// How many slots ahead [`Policy::rank_uniform_at`] starts loading a scan row.
const PREFETCH_AHEAD: usize = 8;

/// Asks the CPU to start loading the cache lines of `value` (a hint: nothing is read, and
/// nothing happens on a CPU without the instruction).
#[inline(always)]
fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let first = (value as *const T).cast::<i8>();
        let last = first.wrapping_add(std::mem::size_of::<T>().saturating_sub(1));
        // SAFETY: a prefetch reads nothing and cannot fault; both addresses are within
        // `value`, a live reference.
        #[allow(unused_unsafe)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(first);
            _mm_prefetch::<_MM_HINT_T0>(last);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

impl Policy {
    /// Builds the policy from its configuration with the built-in filters and weighers.
    pub fn from_config(config: &PolicyConfig) -> Result<Policy, PolicyError> {
        Self::build(config, &builtin_filters(), &builtin_weighers())
    }

    /// Builds the policy with the given registries (for plugins beyond the built-in ones).
    pub fn build(
        config: &PolicyConfig,
        filters: &Registry<dyn Filter>,
        weighers: &Registry<dyn Weigher>,
    ) -> Result<Policy, PolicyError> {
        if config.host_subset_size == 0 {
            return Err(PolicyError::Invalid {
                key: "host_subset_size",
                message: "must be at least 1".into(),
            });
        }
        config.check_ranges()?;
        let weighers = weighers.build(&config.weight_classes, config)?;
        if let Some(w) = weighers.iter().find(|w| !w.multiplier().is_finite()) {
            return Err(PolicyError::Invalid {
                key: "weight_classes",
                message: format!("{} has a non-finite multiplier", w.name()),
            });
        }
        let mut filters = filters.build(&config.enabled_filters, config)?;
        metrics_need_their_filter(config, &filters, &weighers)?;
        // Placement's candidate test comes before every filter, as in Nova.
        let capacity = super::filters::CapacityFilter::NAME;
        match filters.iter().position(|f| f.name() == capacity) {
            Some(0) => {}
            Some(i) => {
                let f = filters.remove(i);
                filters.insert(0, f);
            }
            None => filters.insert(0, Box::new(super::filters::CapacityFilter)),
        }
        // A request with a NUMA topology or PCI requests is never placed ignoring them
        // (docs/numa-pci.md): their filters run last when `enabled_filters` does not name them.
        // They restrict only such requests, so others never call them.
        if !filters
            .iter()
            .any(|f| f.name() == super::filters::NumaTopologyFilter::NAME)
        {
            filters.push(Box::new(super::filters::NumaTopologyFilter::new(config)));
        }
        if !filters
            .iter()
            .any(|f| f.name() == super::filters::PciPassthroughFilter::NAME)
        {
            filters.push(Box::new(super::filters::PciPassthroughFilter::new(config)));
        }
        Ok(Policy {
            algorithm: config.algorithm,
            host_subset_size: config.host_subset_size,
            tie_break: config.tie_break,
            filters,
            weighers,
        })
    }

    /// The same filters and weighers, ranked by another algorithm (APSR uses `random`).
    pub fn with_algorithm(self, algorithm: Algorithm) -> Policy {
        Policy { algorithm, ..self }
    }

    /// The ranking algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// How hosts with equal keys are ordered.
    pub fn tie_break(&self) -> TieBreak {
        self.tie_break
    }

    /// The configured `host_subset_size` (an algorithm may widen it, see `ffr`).
    pub fn host_subset_size(&self) -> usize {
        self.host_subset_size
    }

    /// Names of the enabled filters, in the order they run.
    pub fn filter_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.filters.iter().map(|f| f.name())
    }

    /// True when every enabled filter passes `host` for `req` (APSR's "keeps those that fit").
    pub fn fits_any(&self, host: &HostState, req: &RequestContext, env: &FilterEnv) -> bool {
        self.filters
            .iter()
            .all(|f| !super::filters::applies(f.as_ref(), req) || f.passes(host, req, env))
    }

    /// Ranks `hosts` for `args` with this thread's scratch buffers; see [`Policy::rank_with`].
    pub fn rank(
        &self,
        hosts: &[HostState],
        args: RankArgs,
        rng: &mut impl Rng,
        out: &mut Vec<usize>,
    ) -> Result<(), Rejection> {
        with_scratch(|scratch| self.rank_with(scratch, hosts, args, rng, out))
    }

    /// [`Policy::rank`] over the live table's hosts and their scan rows: the same answer, but
    /// the built-in capacity and compute filters and the resource weighers read each host's
    /// dense row instead of its state, and filtering and weighing are one pass. Every host is
    /// still read.
    pub fn rank_scan(
        &self,
        view: ScanView,
        args: RankArgs,
        rng: &mut impl Rng,
        out: &mut Vec<usize>,
    ) -> Result<(), Rejection> {
        with_scratch(|scratch| {
            self.rank_inner(scratch, view.hosts, Some(view.rows), args, rng, out)
        })
    }

    /// Fills `out` with at most `args.max` indices into `hosts`: first the pick (uniform among
    /// the top ℓ by weight — ℓ = `host_subset_size`, or the algorithm's own; for `random`
    /// uniform among all that pass), then the alternates in descending weight (for `random`,
    /// further uniform draws). Ties keep host order (`tie_break = "host_order"`) or are
    /// ordered uniformly at random (`"random"`); either way a seeded `rng` reproduces the
    /// result.
    ///
    /// Per-request work (algorithm resolution, `adaptive`'s least-loaded host, which filters
    /// and weighers can tell hosts apart for this request) is done once; per host there is one
    /// pass of those filters, then one pass computing its key or every weigher's raw value, and
    /// a partial sort of the top `max(ℓ, max)`; nothing is boxed or allocated on the success
    /// path. Errs with the per-filter removals when no host passes (even when
    /// `max` is 0).
    pub fn rank_with(
        &self,
        scratch: &mut RankScratch,
        hosts: &[HostState],
        args: RankArgs,
        rng: &mut impl Rng,
        out: &mut Vec<usize>,
    ) -> Result<(), Rejection> {
        self.rank_inner(scratch, hosts, None, args, rng, out)
    }

    /// [`Algorithm::Random`]'s ranking (`apsr`'s) of the hosts at `slots` of the view, each
    /// read in place through its scan row as [`Policy::rank_scan`] reads it: at most
    /// `args.max` of those every filter passes, in a uniform random order, into `out` as
    /// indices of the view's hosts — what [`Policy::rank`] answers over a copy of those hosts
    /// in slot order, with the same random draws. Answers how many passed.
    pub fn rank_uniform_at(
        &self,
        view: ScanView,
        slots: &[usize],
        args: RankArgs,
        rng: &mut impl Rng,
        out: &mut Vec<usize>,
    ) -> Result<usize, Rejection> {
        debug_assert!(matches!(self.algorithm, Algorithm::Random));
        let ScanView { hosts, rows } = view;
        let max = args.max;
        out.clear();
        with_scratch(|scratch| {
            let test = self.row_test(self.begin_scan(scratch, args.req), hosts, args);
            let RankScratch {
                scored,
                removed,
                active,
                steps,
                ..
            } = scratch;
            // The slots are scattered over the table: each row's load is started a few
            // slots ahead, so that the misses overlap instead of following one another.
            for &i in slots.iter().take(PREFETCH_AHEAD) {
                prefetch(&rows[i]);
            }
            'slots: for (n, &i) in slots.iter().enumerate() {
                if let Some(&ahead) = slots.get(n + PREFETCH_AHEAD) {
                    prefetch(&rows[ahead]);
                }
                for (&step, &k) in steps.iter().zip(active.iter()) {
                    if !test.passes(k, step, &rows[i], i) {
                        removed[k] += 1;
                        continue 'slots;
                    }
                }
                scored.push(Scored { score: 0.0, idx: i });
            }
            if scored.is_empty() {
                return Err(self.rejection(slots.len(), removed));
            }
            if max > 0 {
                shuffle_prefix(scored, max, rng);
                out.extend(scored.iter().take(max).map(|s| s.idx));
            }
            Ok(scored.len())
        })
    }

    /// [`Policy::rank_with`], reading the scan rows when given.
    fn rank_inner(
        &self,
        scratch: &mut RankScratch,
        hosts: &[HostState],
        rows: Option<&[HostScan]>,
        args: RankArgs,
        rng: &mut impl Rng,
        out: &mut Vec<usize>,
    ) -> Result<(), Rejection> {
        let RankArgs { req, max, .. } = args;
        out.clear();
        let weighed = match rows {
            Some(rows) => self.scan_into(scratch, ScanView { hosts, rows }, args)?,
            None => {
                self.filter_into(scratch, hosts, req, args.env)?;
                false
            }
        };
        let scored = &mut scratch.scored;
        let n = scored.len();
        if max == 0 {
            return Ok(());
        }
        let (ranking, subset) = algorithms::resolve(self.algorithm, hosts, self.host_subset_size);
        match ranking {
            Ranking::Weighers if weighed => {}
            Ranking::Uniform => {
                shuffle_prefix(scored, max, rng);
                out.extend(scored.iter().take(max).map(|s| s.idx));
                return Ok(());
            }
            Ranking::Key(key) => {
                for s in scored.iter_mut() {
                    s.score = canonical(key(&hosts[s.idx], &req.demand));
                }
            }
            Ranking::Weighers => self.weigh(scratch, hosts, req),
        }
        let scored = &mut scratch.scored;
        let subset = subset.clamp(1, n);
        let top = max.max(subset).min(n);
        match self.tie_break {
            TieBreak::HostOrder => top_by_rank(scored, top, &mut scratch.best),
            TieBreak::Random => top_with_random_ties(scored, top, rng),
        }
        emit(&scored[..top], subset, max, rng, out);
        Ok(())
    }

    /// Starts a scan over rows: no host kept or removed yet, and the request's tests per
    /// filter (see [`Policy::scan_steps`]); returns the demand hoisted for the row test.
    fn begin_scan(&self, scratch: &mut RankScratch, req: &RequestContext) -> Demand {
        scratch.scored.clear();
        scratch.removed.clear();
        scratch.removed.resize(self.filters.len(), 0);
        self.scan_steps(req, &mut scratch.active, &mut scratch.steps)
    }

    /// No host passed: how many of `hosts` each filter removed first.
    fn rejection(&self, hosts: usize, removed: &[usize]) -> Rejection {
        Rejection {
            hosts,
            removed: self
                .filters
                .iter()
                .zip(removed)
                .map(|(f, n)| (f.name(), *n))
                .collect(),
        }
    }

    /// Per request: which filters can fail a host (`active`, their indices) and how each one
    /// tests a scan row (`steps`); returns the request's demand hoisted for the row test.
    fn scan_steps(
        &self,
        req: &RequestContext,
        active: &mut Vec<usize>,
        steps: &mut Vec<Step>,
    ) -> Demand {
        let demand = Demand::of(req);
        let query = req.query.scan_test();
        active.clear();
        steps.clear();
        for (k, f) in self.filters.iter().enumerate() {
            if !super::filters::applies(f.as_ref(), req) {
                continue;
            }
            active.push(k);
            steps.push(match (f.scan_check(), &demand) {
                (Some(ScanCheck::Compute), _) => Step::Compute,
                (Some(ScanCheck::Capacity), Some(_)) => Step::Capacity { query },
                _ => Step::Passes,
            });
        }
        demand.unwrap_or_default()
    }

    /// The request's row tests over `hosts`, with the demand [`Policy::begin_scan`] hoisted.
    fn row_test<'a>(
        &'a self,
        demand: Demand,
        hosts: &'a [HostState],
        args: RankArgs<'a>,
    ) -> RowTest<'a> {
        RowTest {
            policy: self,
            demand,
            hosts,
            req: args.req,
            env: args.env,
        }
    }

    /// The weighers that matter for `req` as `(value, multiplier)` columns read from scan rows,
    /// in the configured order, with their number; `None` when the policy does not rank by
    /// weighers, `max` is 0, or a weigher that matters cannot be read from a row.
    fn scan_columns(
        &self,
        req: &RequestContext,
        max: usize,
    ) -> Option<([(HostValue, f64); SCAN_WEIGHERS], usize)> {
        if max == 0 || !matches!(self.algorithm, Algorithm::Nova) {
            return None;
        }
        let mut columns = [(HostValue::Instances, 0.0); SCAN_WEIGHERS];
        let mut width = 0;
        for w in &self.weighers {
            if w.multiplier() == 0.0 || !w.varies(req) {
                continue;
            }
            match w.scan_value() {
                Some(value) if width < SCAN_WEIGHERS => {
                    columns[width] = (value, w.multiplier());
                    width += 1;
                }
                _ => return None,
            }
        }
        Some((columns, width))
    }

    /// The scan of [`Policy::rank_scan`]: keeps the passing hosts in `scratch.scored`
    /// (counting removals per filter, as [`Policy::filter_into`]) and, when the request is
    /// ranked by weighers that all read the row, weighs them in the same pass (then returns
    /// true, the scores set as [`Policy::weigh`] sets them).
    fn scan_into(
        &self,
        scratch: &mut RankScratch,
        view: ScanView,
        args: RankArgs,
    ) -> Result<bool, Rejection> {
        let ScanView { hosts, rows } = view;
        let test = self.row_test(self.begin_scan(scratch, args.req), hosts, args);
        let RankScratch {
            scored,
            raw,
            removed,
            active,
            steps,
            ..
        } = scratch;
        // The weighers, when every one that matters reads the row and the policy ranks by
        // them: (value, multiplier) per column, in the configured order.
        let (columns, width, fused) = match self.scan_columns(args.req, args.max) {
            Some((columns, width)) => (columns, width, true),
            None => ([(HostValue::Instances, 0.0); SCAN_WEIGHERS], 0, false),
        };
        let columns = &columns[..width];
        let mut lo = [f64::INFINITY; SCAN_WEIGHERS];
        let mut hi = [f64::NEG_INFINITY; SCAN_WEIGHERS];
        raw.clear();
        raw.reserve(rows.len() * width);
        scored.reserve(rows.len());
        // The hot loop of `filter` (every host, every request): the tests and the row's
        // weigher values inline, the values of a host kept in one slice.
        'rows: for (i, row) in rows.iter().enumerate() {
            for (&step, &k) in steps.iter().zip(active.iter()) {
                if !test.passes(k, step, row, i) {
                    removed[k] += 1;
                    continue 'rows;
                }
            }
            scored.push(Scored { score: 0.0, idx: i });
            if fused {
                // From the row, or from the host where the row cannot say it (allocation
                // ratios or reserved amounts that part Nova's free amounts from the capacity,
                // `HostScan::WEIGH_FROM_ROW`): the row's flag tested once per host, not once
                // per column as `HostValue::of_row` tests it.
                // The row's values before the raise to `minval`, raised below.
                if row.flags & HostScan::WEIGH_FROM_ROW != 0 {
                    let read = |value: HostValue| value.of_scan_unraised(row);
                    weigh_columns(columns, read, &mut lo, &mut hi, raw);
                } else {
                    let host = &hosts[i];
                    weigh_columns(columns, |v| v.of_row(row, host), &mut lo, &mut hi, raw);
                }
            }
        }
        if scored.is_empty() {
            return Err(self.rejection(hosts.len(), removed));
        }
        if !fused {
            return Ok(false);
        }
        // The rows' values were read before the raise to Nova's `minval`: a column whose least
        // value is below it (a host over its capacity, rare) is raised here, value by value as
        // `HostValue::of` raises, and its greatest value with it. The loop above saves the raise
        // per value (12 of the filter backend's instructions per host, callgrind).
        for (c, &(value, _)) in columns.iter().enumerate() {
            if value.minval().is_some_and(|min| lo[c] < min) {
                for v in raw[c..].iter_mut().step_by(width) {
                    *v = value.raise(*v);
                }
                hi[c] = value.raise(hi[c]);
            }
        }
        // Nova's handler, as `add_normalised` computes it.
        // The columns that add anything (a range of 0 adds 0, as Nova's handler skips it):
        // (column, min, range, multiplier).
        let mut used = [(0, 0.0, 1.0, 0.0); SCAN_WEIGHERS];
        let mut n_used = 0;
        for (c, &(value, multiplier)) in columns.iter().enumerate() {
            // Nova's `minval` when the weigher has one, else the least value.
            let min = value.minval().unwrap_or(lo[c]);
            let range = hi[c] - min;
            if range.is_nan() || range <= 0.0 || range.is_infinite() {
                continue;
            }
            used[n_used] = (c, min, range, multiplier);
            n_used += 1;
        }
        let used = &used[..n_used];
        // Host after host, each host's sum in the columns' order: the same additions in the
        // same order as column after column.
        for (j, s) in scored.iter_mut().enumerate() {
            let values = &raw[j * width..(j + 1) * width];
            let mut w = 0.0;
            for &(c, min, range, multiplier) in used {
                w += multiplier * ((values[c] - min) / range);
            }
            s.score = canonical(w);
        }
        Ok(true)
    }

    /// Keeps the passing hosts in `scratch.scored`, counting removals per filter.
    fn filter_into(
        &self,
        scratch: &mut RankScratch,
        hosts: &[HostState],
        req: &RequestContext,
        env: &FilterEnv,
    ) -> Result<(), Rejection> {
        scratch.scored.clear();
        scratch.removed.clear();
        scratch.removed.resize(self.filters.len(), 0);
        // A filter that passes every host for this request cannot be the first to fail one.
        scratch.active.clear();
        let restricting = (0..self.filters.len())
            .filter(|&k| super::filters::applies(self.filters[k].as_ref(), req));
        scratch.active.extend(restricting);
        for (idx, host) in hosts.iter().enumerate() {
            let mut active = scratch.active.iter().copied();
            match active.find(|&k| !self.filters[k].passes(host, req, env)) {
                Some(k) => scratch.removed[k] += 1,
                None => scratch.scored.push(Scored { score: 0.0, idx }),
            }
        }
        if !scratch.scored.is_empty() {
            return Ok(());
        }
        Err(self.rejection(hosts.len(), &scratch.removed))
    }

    /// Nova's weight handler over the passing hosts: normalise, multiply, sum. Weighers with
    /// a zero multiplier or the same value for every host (they would add 0) are skipped; the
    /// others read each host once, in one pass, and are summed in their configured order.
    fn weigh(&self, scratch: &mut RankScratch, hosts: &[HostState], req: &RequestContext) {
        let RankScratch {
            scored,
            raw,
            weights,
            active,
            ..
        } = scratch;
        let n = scored.len();
        weights.clear();
        weights.resize(n, 0.0);
        active.clear();
        let used = (0..self.weighers.len())
            .filter(|&k| self.weighers[k].multiplier() != 0.0 && self.weighers[k].varies(req));
        active.extend(used);
        raw.clear();
        raw.resize(n * active.len(), 0.0);
        for (j, s) in scored.iter().enumerate() {
            let host = &hosts[s.idx];
            for (column, &k) in active.iter().enumerate() {
                raw[column * n + j] = self.weighers[k].weigh(host, req);
            }
        }
        for (column, &k) in active.iter().enumerate() {
            let values = &raw[column * n..(column + 1) * n];
            add_normalised(
                values,
                self.weighers[k].multiplier(),
                self.weighers[k].minval(),
                weights,
            );
        }
        for (s, w) in scored.iter_mut().zip(weights.iter()) {
            s.score = canonical(*w);
        }
    }
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("algorithm", &self.algorithm)
            .field("host_subset_size", &self.host_subset_size)
            .field("tie_break", &self.tie_break)
            .field(
                "filters",
                &self.filters.iter().map(|x| x.name()).collect::<Vec<_>>(),
            )
            .field(
                "weighers",
                &self.weighers.iter().map(|x| x.name()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Nova's `[metrics] required` fails a whole request on a host that lacks a metric of
/// `weight_setting` when `MetricsWeigher` weighs it (`ComputeHostMetricNotFound`), and asks
/// for `MetricsFilter` to remove such hosts first: Parasol refuses `required` with a setting
/// and the weigher unless that filter runs, rather than fail requests.
fn metrics_need_their_filter(
    config: &PolicyConfig,
    filters: &[Box<dyn Filter>],
    weighers: &[Box<dyn Weigher>],
) -> Result<(), PolicyError> {
    let weighs = weighers
        .iter()
        .any(|w| w.name() == super::weighers::MetricsWeigher::NAME);
    let filtered = filters
        .iter()
        .any(|f| f.name() == super::filters::MetricsFilter::NAME);
    if config.metrics_required && weighs && !filtered && !config.metrics_weight_setting.is_empty() {
        return Err(PolicyError::Invalid {
            key: "metrics_required",
            message: "with metrics_weight_setting and MetricsWeigher, true needs MetricsFilter in \
                      enabled_filters: Nova fails the whole request (ComputeHostMetricNotFound) \
                      when the weigher meets a host lacking a metric; enable MetricsFilter, or set \
                      metrics_required = false to weigh such hosts metrics_weight_of_unavailable"
                .into(),
        });
    }
    Ok(())
}
