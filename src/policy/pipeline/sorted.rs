//! The exact top k of a snapshot without reading every host: each weigher's column of the
//! snapshot is kept sorted ([`SortedIndex`]), and a decision walks those orders from their best
//! end, scoring each host it meets, until the threshold of Fagin's TA proves that no host it
//! has not met can enter the top k (every unmet host is at or below each order's cursor, so
//! the score of the cursors' values bounds its score).
//!
//! The answer is the one [`Policy::rank_scan`] gives, bit for bit: scores are computed with the
//! scan's own arithmetic (Nova's normalisation over the hosts that pass (`minval` or the least value to the greatest), column after
//! column), the bound with the same arithmetic (each step is monotone in the value, so the
//! bound is exact, not approximate), ties are broken by host order as the scan breaks them,
//! and the pick draws from the RNG exactly as the scan draws. When the proof does not close
//! within a budget, when no host passes (the rejection counts removals per filter), or when
//! the request is ranked otherwise (another algorithm, random tie-break, a weigher the rows do
//! not hold), the decision is the scan.

use super::{
    by_rank, canonical, emit, Policy, RankArgs, RowTest, ScanView, Scored, Step, SCAN_WEIGHERS,
};
use crate::domain::{ClassId, HostScan, RequestContext};
use crate::policy::config::TieBreak;
use crate::policy::error::Rejection;
use crate::policy::weighers::HostValue;
use rand::Rng;
use std::cmp::Ordering;

/// A snapshot's hosts in order of each weigher value the policy ranks by, best first for the
/// weigher's sign (descending for a positive multiplier, ascending for a negative one) and
/// equal values in host order, as indices into the snapshot. Built once per snapshot; a worker
/// moves a host to its new place when its own claim changes the host's row.
#[derive(Debug, Default)]
pub struct SortedIndex {
    hosts: usize,
    columns: Vec<(SortKey, Order)>,
}

/// Entries an [`Order`]'s block starts with; a block holds up to twice as many before it is
/// split. A claim moves its host past every host whose value lies between its old and new
/// one: in a cloud of equal hosts, past nearly all of them. In one flat vector that moved
/// 40 KB per order at 10,000 hosts (the largest cost of a caching decision in the service,
/// BENCHMARKS.md); in blocks, at most one block's entries and the blocks' starts.
const BLOCK: usize = 256;

/// One order of host indices, kept in blocks so that a host moves in a few kilobytes.
#[derive(Clone, Debug, Default)]
struct Order {
    /// Non-empty blocks, in order.
    blocks: Vec<Vec<u32>>,
    /// Position of each block's first entry.
    starts: Vec<usize>,
    len: usize,
}

impl PartialEq for Order {
    /// The same hosts in the same order, however they are blocked.
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.range(0, self.len).eq(other.range(0, other.len))
    }
}

impl Order {
    /// The whole order.
    fn view(&self) -> View<'_> {
        View {
            order: self,
            lo: 0,
            hi: self.len,
        }
    }

    fn from_vec(all: Vec<u32>) -> Order {
        let blocks: Vec<Vec<u32>> = all.chunks(BLOCK).map(<[u32]>::to_vec).collect();
        let starts = (0..blocks.len()).map(|b| b * BLOCK).collect();
        Order {
            blocks,
            starts,
            len: all.len(),
        }
    }

    /// The block holding position `pos` (the last block for `pos == len`).
    #[inline]
    fn block_of(&self, pos: usize) -> usize {
        // Blocks start at multiples of BLOCK until moves shift them by a few places, so the
        // block `pos / BLOCK` usually holds it: a walk reads every column at each position,
        // and skipping the search per read took 7.5 % off the walk's time in the service.
        let guess = pos / BLOCK;
        if let Some(&start) = self.starts.get(guess) {
            if start <= pos && self.starts.get(guess + 1).is_none_or(|&next| pos < next) {
                return guess;
            }
        }
        self.starts.partition_point(|&s| s <= pos).saturating_sub(1)
    }

    #[inline]
    fn at(&self, pos: usize) -> u32 {
        let b = self.block_of(pos);
        self.blocks[b][pos - self.starts[b]]
    }

    /// The entries at positions `lo..hi`, in order (either end first).
    fn range(&self, lo: usize, hi: usize) -> impl DoubleEndedIterator<Item = u32> + '_ {
        let (first, last) = if lo < hi {
            (self.block_of(lo), self.block_of(hi - 1) + 1)
        } else {
            (0, 0)
        };
        self.blocks[first..last]
            .iter()
            .zip(&self.starts[first..last])
            .flat_map(move |(block, &start)| {
                let from = lo.saturating_sub(start).min(block.len());
                let to = hi.saturating_sub(start).min(block.len());
                block[from..to].iter().copied()
            })
    }

    /// The first position in `lo..hi` whose entry does not satisfy `pred`, which must hold
    /// for a prefix of that range (as [`slice::partition_point`]): a binary search over the
    /// blocks' first entries, then one inside a block.
    fn partition_point(&self, lo: usize, hi: usize, mut pred: impl FnMut(u32) -> bool) -> usize {
        if lo >= hi {
            return lo;
        }
        let (first, last) = (self.block_of(lo), self.block_of(hi - 1));
        // The blocks after the first whose first entry holds are a prefix of them: the
        // answer is in the last block whose first entry (in the range) holds.
        let b = first + self.blocks[first + 1..=last].partition_point(|block| pred(block[0]));
        let (start, block) = (self.starts[b], &self.blocks[b]);
        let from = lo.max(start);
        let to = (hi - start).min(block.len());
        from + block[from - start..to].partition_point(|&j| pred(j))
    }

    fn remove(&mut self, pos: usize) {
        let b = self.block_of(pos);
        self.blocks[b].remove(pos - self.starts[b]);
        // The blocks after it start one earlier; an emptied block goes.
        let after = if self.blocks[b].is_empty() {
            self.blocks.remove(b);
            self.starts.remove(b);
            b
        } else {
            b + 1
        };
        for s in &mut self.starts[after..] {
            *s -= 1;
        }
        self.len -= 1;
    }

    fn insert(&mut self, pos: usize, id: u32) {
        if self.blocks.is_empty() {
            self.blocks.push(vec![id]);
            self.starts.push(0);
            self.len = 1;
            return;
        }
        let b = self.block_of(pos);
        self.blocks[b].insert(pos - self.starts[b], id);
        for s in &mut self.starts[b + 1..] {
            *s += 1;
        }
        self.len += 1;
        if self.blocks[b].len() > 2 * BLOCK {
            let tail = self.blocks[b].split_off(BLOCK);
            self.blocks.insert(b + 1, tail);
            self.starts.insert(b + 1, self.starts[b] + BLOCK);
        }
    }
}

/// No order (the placeholder of a walk's unused columns).
static EMPTY: Order = Order {
    blocks: Vec::new(),
    starts: Vec::new(),
    len: 0,
};

/// A column's order, or the part of it between two positions.
#[derive(Clone, Copy)]
struct View<'a> {
    order: &'a Order,
    lo: usize,
    hi: usize,
}

impl<'a> View<'a> {
    #[inline]
    fn len(&self) -> usize {
        self.hi - self.lo
    }

    /// The entry `pos` places from the view's start.
    #[inline]
    fn at(&self, pos: usize) -> u32 {
        self.order.at(self.lo + pos)
    }

    fn iter(&self) -> impl DoubleEndedIterator<Item = u32> + 'a {
        self.order.range(self.lo, self.hi)
    }

    /// As [`slice::partition_point`] over the view's entries from `from` on, counted from
    /// `from`.
    fn partition_point_from(&self, from: usize, pred: impl FnMut(u32) -> bool) -> usize {
        self.order.partition_point(self.lo + from, self.hi, pred) - (self.lo + from)
    }

    /// The view's first `n` entries.
    fn head(&self, n: usize) -> View<'a> {
        View {
            hi: self.lo + n,
            ..*self
        }
    }

    /// The view without its first `n` entries.
    fn tail(&self, n: usize) -> View<'a> {
        View {
            lo: self.lo + n,
            ..*self
        }
    }
}

impl Clone for SortedIndex {
    fn clone(&self) -> Self {
        SortedIndex {
            hosts: self.hosts,
            columns: self.columns.clone(),
        }
    }

    fn clone_from(&mut self, source: &Self) {
        self.hosts = source.hosts;
        self.columns.clone_from(&source.columns);
    }
}

/// What an order of a [`SortedIndex`] sorts by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SortKey {
    pub value: HostValue,
    /// Highest value first (a positive multiplier); lowest first otherwise.
    pub descending: bool,
}

impl SortKey {
    /// True when host `a` (value `va`) comes before host `b` (value `vb`): the better value,
    /// then the lower index.
    #[inline]
    fn before(self, va: f64, a: u32, vb: f64, b: u32) -> bool {
        let by_value = if self.descending {
            vb.total_cmp(&va)
        } else {
            va.total_cmp(&vb)
        };
        match by_value {
            Ordering::Less => true,
            Ordering::Equal => a < b,
            Ordering::Greater => false,
        }
    }
}

impl SortedIndex {
    /// Sorts the hosts of `rows` by each of `keys` (duplicates are sorted once).
    pub fn build(rows: &[HostScan], keys: &[SortKey]) -> SortedIndex {
        let mut columns: Vec<(SortKey, Order)> = Vec::with_capacity(keys.len());
        for &key in keys {
            if columns.iter().any(|(k, _)| *k == key) {
                continue;
            }
            // An order only of values every row holds: where some host's free amount for the
            // weighers is not its row's capacity less usage (`HostScan::WEIGH_FROM_ROW`), the
            // walk finds no order to walk and the decision is the scan's.
            if !rows.iter().all(|r| key.value.in_row(r)) {
                continue;
            }
            let mut keyed: Vec<(f64, u32)> = (0..rows.len() as u32)
                .map(|i| (key.value.of_scan(&rows[i as usize]), i))
                .collect();
            keyed.sort_unstable_by(|a, b| {
                let by_value = if key.descending {
                    b.0.total_cmp(&a.0)
                } else {
                    a.0.total_cmp(&b.0)
                };
                by_value.then(a.1.cmp(&b.1))
            });
            columns.push((
                key,
                Order::from_vec(keyed.into_iter().map(|(_, i)| i).collect()),
            ));
        }
        SortedIndex {
            hosts: rows.len(),
            columns,
        }
    }

    /// Number of hosts indexed.
    pub fn len(&self) -> usize {
        self.hosts
    }

    pub fn is_empty(&self) -> bool {
        self.hosts == 0
    }

    fn column(&self, key: SortKey) -> Option<View<'_>> {
        self.columns
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, order)| order.view())
    }

    /// Host `idx`'s row was `old` and is now `rows[idx]` (a claim of this worker): moves it to
    /// its place in every order whose value changed.
    pub fn moved(&mut self, rows: &[HostScan], idx: usize, old: &HostScan) {
        let id = idx as u32;
        for (key, order) in &mut self.columns {
            let (key, value) = (*key, key.value);
            let (was, now) = (value.of_scan(old), value.of_scan(&rows[idx]));
            if was.total_cmp(&now) == Ordering::Equal {
                continue;
            }
            let of = |j: u32| {
                if j == id {
                    was
                } else {
                    value.of_scan(&rows[j as usize])
                }
            };
            let mut from = order.partition_point(0, order.len, |j| key.before(of(j), j, was, id));
            if from >= order.len || order.at(from) != id {
                // Not where the old row puts it (should not happen): find it.
                match order.range(0, order.len).position(|j| j == id) {
                    Some(p) => from = p,
                    None => continue,
                }
            }
            order.remove(from);
            let to = order.partition_point(0, order.len, |j| {
                key.before(value.of_scan(&rows[j as usize]), j, now, id)
            });
            order.insert(to, id);
        }
    }
}

/// A worker's buffers for [`Policy::rank_sorted`], sized to the snapshot.
#[derive(Debug, Default)]
pub struct SortedScratch {
    /// Per host, for the current request: `stamp << 2 | MET | PASSES`.
    marks: Vec<u32>,
    stamp: u32,
    best: Vec<Scored>,
    active: Vec<usize>,
    steps: Vec<Step>,
    /// Hosts whose filters the current request evaluated.
    evaluated: usize,
    /// Decisions answered by the walk and by the scan (for tests and diagnosis).
    pub walked: u64,
    pub scanned: u64,
    /// Of `scanned`, those that did not try the walk: after a walk that gave up having spent
    /// its budget, the next `skip` rankings go straight to the scan (see [`WalkGate`]).
    pub skipped: u64,
    gate: WalkGate,
}

/// When to try the walk. A walk that spends its budget (a quarter of the hosts' filters) and
/// gives up costs a quarter of a scan for nothing, and in a snapshot where one does (the
/// columns disagree, or few hosts pass) the next mostly does too (callgrind of `openstack-bench
/// compare --backends caching --hosts 10000` with most hosts down: each of 3,000 rankings
/// walked 2,561 hosts, then scanned; the walks a fifth of the decision's instructions). After
/// such a walk the next `skip` rankings are scanned without walking, `skip` doubling from 1 up
/// to [`WalkGate::MAX_SKIP`] while walks keep giving up, and back to 0 at the first walk that
/// answers. Only the cost moves: the walk answers exactly as the scan would, or not at all.
#[derive(Debug, Default)]
struct WalkGate {
    /// Rankings left to scan without walking.
    skip: u32,
    /// The skip set by the last walk that gave up: doubled by the next, up to `MAX_SKIP`.
    next: u32,
    /// Every ranking walks (the tests that compare each walk with the scan).
    off: bool,
}

impl WalkGate {
    /// At most one walk in `MAX_SKIP + 1` rankings is tried while walks keep giving up: what
    /// they still cost, and how many rankings a snapshot that became walkable waits.
    const MAX_SKIP: u32 = 32;
    /// A walk that gave up after evaluating at most this many hosts cost little: no backing off.
    const CHEAP: usize = 64;

    /// Whether this ranking skips the walk (counting it down).
    fn skips(&mut self) -> bool {
        if self.skip == 0 || self.off {
            return false;
        }
        self.skip -= 1;
        true
    }

    /// The walk of this ranking answered (`found`) or gave up after evaluating `evaluated`
    /// hosts' filters.
    fn walked(&mut self, found: bool, evaluated: usize) {
        if self.off {
            return;
        }
        if found {
            self.next = 0;
        } else if evaluated > Self::CHEAP {
            self.next = (self.next * 2).clamp(1, Self::MAX_SKIP);
            self.skip = self.next;
        }
    }
}

/// The host's filters were evaluated in this request.
const EVALUATED: u32 = 1;
/// ... and passed.
const PASSES: u32 = 2;
/// The host was scored for the top k in this request (a separate bit: hosts evaluated to find
/// the normalisation bounds are scored only when the walk meets them).
const MET: u32 = 4;
const FLAG_BITS: u32 = 3;

impl SortedScratch {
    /// A scratch whose every ranking tries the walk, even after walks that gave up.
    #[cfg(test)]
    fn always_walking() -> Self {
        let mut scratch = SortedScratch::default();
        scratch.gate.off = true;
        scratch
    }

    /// Starts a request over `n` hosts: every mark of the previous request becomes stale.
    fn begin(&mut self, n: usize) {
        if self.marks.len() != n || self.stamp >= (u32::MAX >> FLAG_BITS) - 1 {
            self.marks.clear();
            self.marks.resize(n, 0);
            self.stamp = 0;
        }
        self.stamp += 1;
        self.best.clear();
    }

    #[inline]
    fn flags(&self, i: usize) -> u32 {
        let m = self.marks[i];
        if m >> FLAG_BITS == self.stamp {
            m & ((1 << FLAG_BITS) - 1)
        } else {
            0
        }
    }

    #[inline]
    fn set(&mut self, i: usize, flags: u32) {
        self.marks[i] = self.stamp << FLAG_BITS | flags;
    }
}

/// One weigher column of a walk: its order, read from the best end, and Nova's normalisation.
#[derive(Clone, Copy)]
struct Column<'a> {
    value: HostValue,
    multiplier: f64,
    min: f64,
    range: f64,
    order: View<'a>,
}

impl Column<'_> {
    /// The host at `pos` from this column's best end.
    #[inline]
    fn at(&self, pos: usize) -> u32 {
        self.order.at(pos)
    }
}

/// The score of `row` as the scan computes it: the normalised columns summed in order.
#[inline]
fn score(columns: &[Column], row: &HostScan) -> f64 {
    let mut w = 0.0;
    for c in columns {
        w += c.multiplier * ((c.value.of_scan(row) - c.min) / c.range);
    }
    canonical(w)
}

/// Inserts `s` into `best` (kept in rank order, at most `k`) when it ranks among the first k.
#[inline]
fn offer(best: &mut Vec<Scored>, k: usize, s: Scored) {
    if best.len() == k {
        if by_rank(&s, &best[k - 1]) != Ordering::Less {
            return;
        }
        best.pop();
    }
    let at = best.partition_point(|b| by_rank(b, &s) == Ordering::Less);
    best.insert(at, s);
}

/// With the k-th best scoring exactly the cursors' bound: true when no unmet host can rank
/// before it. An unmet host holding the cursor's value in every column sits after every cursor
/// host (equal values are in host order), so after the k-th when some cursor host is not before
/// it; an unmet host worse in some column is bounded by that column's next worse value (the
/// others at their cursors), which must score below the k-th.
///
/// `run_ends[w]` is the end of the run of equal values last searched in column `w`: a walk's
/// cursor only moves forward, so while it stays inside that run the run still ends there
/// (identical hosts make runs of thousands, and this is asked at every position of them).
fn tie_closed(
    columns: &[Column],
    rows: &[HostScan],
    pos: usize,
    last: Scored,
    run_ends: &mut [usize],
) -> bool {
    let cursors = columns.iter().map(|c| c.at(pos) as usize);
    if cursors.max().is_none_or(|i| i < last.idx) {
        return false;
    }
    let value = |c: &Column, at: usize| c.value.of_scan(&rows[c.order.at(at) as usize]);
    for (w, worse) in columns.iter().enumerate() {
        let run_end = if run_ends[w] > pos {
            run_ends[w]
        } else {
            let here = value(worse, pos);
            let ties = worse.order.partition_point_from(pos, |j| {
                worse
                    .value
                    .of_scan(&rows[j as usize])
                    .total_cmp(&here)
                    .is_eq()
            });
            run_ends[w] = pos + ties;
            pos + ties
        };
        if run_end == worse.order.len() {
            continue; // no host is worse in this column
        }
        let mut bound = 0.0;
        for (c, col) in columns.iter().enumerate() {
            let v = if c == w {
                value(col, run_end)
            } else {
                value(col, pos)
            };
            bound += col.multiplier * ((v - col.min) / col.range);
        }
        if canonical(bound).total_cmp(&last.score) != Ordering::Less {
            return false;
        }
    }
    true
}

impl Policy {
    /// The room a host must have in the class `value` reads the free amount of, for the
    /// capacity test the scan makes of the request (`None`: no such bound).
    fn room_needed(&self, value: HostValue, req: &RequestContext, steps: &[Step]) -> Option<i64> {
        let class = match value {
            HostValue::FreeVcpu => ClassId::VCPU,
            HostValue::FreeMemoryMb => ClassId::MEMORY_MB,
            HostValue::FreeDiskGb => ClassId::DISK_GB,
            HostValue::IoOps | HostValue::Instances => return None,
        };
        let amount = req.demand.get(class);
        let tested = steps.iter().any(|s| matches!(s, Step::Capacity { .. }));
        (tested && amount > 0).then_some(amount)
    }

    /// The orders a snapshot should be sorted in for [`Policy::rank_sorted`]: one per weigher
    /// with a multiplier that reads scan rows, best first for the multiplier's sign.
    pub fn sorted_keys(&self) -> Vec<SortKey> {
        let mut keys = Vec::new();
        for w in &self.weighers {
            if let Some(value) = w.scan_value() {
                let key = SortKey {
                    value,
                    descending: w.multiplier() > 0.0,
                };
                if w.multiplier() != 0.0 && !keys.contains(&key) {
                    keys.push(key);
                }
            }
        }
        keys
    }

    /// [`Policy::rank_scan`]'s answer over a snapshot's hosts and rows, found by walking
    /// `index` (which must index exactly the view's rows) when that proves the top k before
    /// reading every host, by the scan otherwise.
    pub fn rank_sorted(
        &self,
        view: ScanView,
        index: &SortedIndex,
        scratch: &mut SortedScratch,
        args: RankArgs,
        rng: &mut impl Rng,
        out: &mut Vec<usize>,
    ) -> Result<(), Rejection> {
        out.clear();
        if scratch.gate.skips() {
            scratch.skipped += 1;
        } else {
            let found = self.walk(view, index, scratch, args);
            scratch.gate.walked(found, scratch.evaluated);
            if found {
                let n = scratch.best.len();
                let subset = self.host_subset_size.clamp(1, n);
                emit(&scratch.best, subset, args.max, rng, out);
                scratch.walked += 1;
                return Ok(());
            }
        }
        scratch.scanned += 1;
        self.rank_scan(view, args, rng, out)
    }

    /// Leaves in `scratch.best` the top `max(max, host_subset_size)` hosts by rank (all that
    /// pass, when fewer), exactly as the scan ranks them, and returns true; false when the
    /// walk cannot answer (then `scratch.best` means nothing).
    fn walk(
        &self,
        view: ScanView,
        index: &SortedIndex,
        scratch: &mut SortedScratch,
        args: RankArgs,
    ) -> bool {
        let ScanView { hosts, rows } = view;
        let n = rows.len();
        // Zero before any early return: the gate reads it after every walk.
        scratch.evaluated = 0;
        if n == 0 || hosts.len() != n || index.len() != n || self.tie_break != TieBreak::HostOrder {
            return false;
        }
        let Some((wanted, width)) = self.scan_columns(args.req, args.max) else {
            return false;
        };
        scratch.begin(n);
        let mut active = std::mem::take(&mut scratch.active);
        let mut steps = std::mem::take(&mut scratch.steps);
        let demand = self.scan_steps(args.req, &mut active, &mut steps);
        let walk = Walk {
            test: self.row_test(demand, hosts, args),
            rows,
            active: &active,
            steps: &steps,
            k: args.max.max(self.host_subset_size),
            // Hosts whose filters may be evaluated before the scan is the cheaper way.
            budget: n / 4 + 64,
        };
        let found = walk.run(index, scratch, &wanted[..width]);
        scratch.active = active;
        scratch.steps = steps;
        found
    }
}

/// One walk's fixed inputs: the request's row tests (those that matter, `steps` of the filters
/// at `active`) over the snapshot's rows, how many hosts it must rank, and how many hosts' filters
/// it may evaluate before it gives up for the scan.
struct Walk<'a> {
    test: RowTest<'a>,
    rows: &'a [HostScan],
    active: &'a [usize],
    steps: &'a [Step],
    k: usize,
    budget: usize,
}

impl<'a> Walk<'a> {
    /// The walk over `index`'s orders of the `wanted` weigher columns; see [`Policy::walk`].
    fn run(
        &self,
        index: &'a SortedIndex,
        scratch: &mut SortedScratch,
        wanted: &[(HostValue, f64)],
    ) -> bool {
        let Some((columns, width)) = self.columns(index, scratch, wanted) else {
            return false;
        };
        let columns = &columns[..width];
        if columns.is_empty() {
            self.first_passing(scratch)
        } else {
            self.threshold(scratch, columns)
        }
    }

    /// Whether host `i` passes the request's filters, evaluated once per request.
    fn passes(&self, scratch: &mut SortedScratch, i: usize) -> bool {
        let f = scratch.flags(i);
        if f & EVALUATED != 0 {
            return f & PASSES != 0;
        }
        scratch.evaluated += 1;
        let row = &self.rows[i];
        let ok = self
            .steps
            .iter()
            .zip(self.active)
            .all(|(&step, &k)| self.test.passes(k, step, row, i));
        scratch.set(i, f | EVALUATED | if ok { PASSES } else { 0 });
        ok
    }

    /// The columns that add to a score, with Nova's normalisation bounds (the highest value
    /// among the hosts that pass, and the weigher's `minval` or else the lowest), and their
    /// number; `None` when the walk gives
    /// up (an order the index does not hold, no host passes, or the budget is spent).
    fn columns(
        &self,
        index: &'a SortedIndex,
        scratch: &mut SortedScratch,
        wanted: &[(HostValue, f64)],
    ) -> Option<([Column<'a>; SCAN_WEIGHERS], usize)> {
        let mut columns = [Column {
            value: HostValue::Instances,
            multiplier: 0.0,
            min: 0.0,
            range: 0.0,
            order: EMPTY.view(),
        }; SCAN_WEIGHERS];
        let mut width = 0;
        for &(value, multiplier) in wanted {
            let key = SortKey {
                value,
                descending: multiplier > 0.0,
            };
            let order = self.with_room(index.column(key)?, key);
            // The first passing host from each end of the column's order. When no host passes,
            // the scan says which filter removed how many.
            let best = self.first_value(scratch, order.iter(), value)?;
            // A host passed from the best end: this end meets it at the latest.
            let worst = self.first_value(scratch, order.iter().rev(), value)?;
            let (lo, hi) = if key.descending {
                (worst, best)
            } else {
                (best, worst)
            };
            // Nova's `minval` when the weigher has one, else the least value.
            let lo = value.minval().unwrap_or(lo);
            let range = hi - lo;
            // The scan skips such a column: it adds nothing to any score.
            if range.is_nan() || range <= 0.0 || range.is_infinite() {
                continue;
            }
            columns[width] = Column {
                value,
                multiplier,
                min: lo,
                range,
                order,
            };
            width += 1;
        }
        Some((columns, width))
    }

    /// The part of a column's `order` that may pass: hosts with less room in a demanded class
    /// than the demand fail the capacity test; they are one end of the order, and need not be
    /// met. (An order is built only when every row holds its value, and a row holds a free
    /// amount only when it is the room left: `SortedIndex::build`.)
    fn with_room(&self, order: View<'a>, key: SortKey) -> View<'a> {
        let (value, rows) = (key.value, self.rows);
        let test = &self.test;
        let Some(amount) = test.policy.room_needed(value, test.req, self.steps) else {
            return order;
        };
        let amount = amount as f64;
        let room = |j: u32| value.of_scan(&rows[j as usize]) >= amount;
        if key.descending {
            order.head(order.partition_point_from(0, room))
        } else {
            order.tail(order.partition_point_from(0, |j| !room(j)))
        }
    }

    /// The `value` of the first of `hosts` that passes; `None` when none does or the budget is
    /// spent first.
    fn first_value(
        &self,
        scratch: &mut SortedScratch,
        hosts: impl Iterator<Item = u32>,
        value: HostValue,
    ) -> Option<f64> {
        for j in hosts {
            if self.passes(scratch, j as usize) {
                return Some(value.of_scan(&self.rows[j as usize]));
            }
            if scratch.evaluated > self.budget {
                return None;
            }
        }
        None
    }

    /// Scores host `i` for the top k the first time the walk meets it, when it passes.
    fn meet(&self, scratch: &mut SortedScratch, columns: &[Column], i: usize) {
        let f = scratch.flags(i);
        if f & MET != 0 {
            return;
        }
        let ok = self.passes(scratch, i);
        let f = scratch.flags(i);
        scratch.set(i, f | MET);
        if ok {
            let s = Scored {
                score: score(columns, &self.rows[i]),
                idx: i,
            };
            offer(&mut scratch.best, self.k, s);
        }
    }

    /// No column adds to a score, so every passing host scores 0: the top k are the first k
    /// that pass, in host order.
    fn first_passing(&self, scratch: &mut SortedScratch) -> bool {
        for i in 0..self.rows.len() {
            self.meet(scratch, &[], i);
            if scratch.best.len() == self.k {
                break;
            }
        }
        !scratch.best.is_empty()
    }

    /// Fagin's threshold algorithm: meets the hosts of every column's order position by
    /// position until no host left unmet can enter the top k; false when the budget is spent
    /// first.
    fn threshold(&self, scratch: &mut SortedScratch, columns: &[Column]) -> bool {
        let (rows, k) = (self.rows, self.k);
        // Every host that may pass is in every column's order.
        let end = columns.iter().map(|c| c.order.len()).min().unwrap_or(0);
        let mut pos = 0;
        let mut run_ends = [0; SCAN_WEIGHERS];
        loop {
            if pos == end {
                // Every host that may pass was met.
                return !scratch.best.is_empty();
            }
            for c in columns {
                self.meet(scratch, columns, c.at(pos) as usize);
            }
            pos += 1;
            if scratch.best.len() == k && pos < end {
                // No host left unmet scores above the cursors' values.
                let bound = cursor_bound(columns, rows, pos);
                let last = scratch.best[k - 1];
                match last.score.total_cmp(&bound) {
                    Ordering::Greater => return true,
                    Ordering::Equal if tie_closed(columns, rows, pos, last, &mut run_ends) => {
                        return true
                    }
                    Ordering::Equal if last.idx <= 256 => {
                        // Only an unmet host scoring exactly the bound with a lower index
                        // could still enter: meet every host before the k-th.
                        for i in 0..last.idx {
                            self.meet(scratch, columns, i);
                        }
                        return true;
                    }
                    Ordering::Equal => {}
                    Ordering::Less => {}
                }
            }
            if scratch.evaluated > self.budget {
                return false;
            }
        }
    }
}

/// The score of a host holding every column's value at position `pos` of its order: no host
/// past the cursors scores above it.
fn cursor_bound(columns: &[Column], rows: &[HostScan], pos: usize) -> f64 {
    let mut bound = 0.0;
    for c in columns {
        let v = c.value.of_scan(&rows[c.at(pos) as usize]);
        bound += c.multiplier * ((v - c.min) / c.range);
    }
    canonical(bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{HostState, Inventory, Resources};
    use crate::policy::filters::FilterEnv;
    use crate::policy::{Algorithm, PolicyConfig};
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    /// `n` hosts from a few capacity pools (so many values tie), with random usage, some down,
    /// disabled, heard from long ago, with unit rules or in another zone.
    fn hosts(g: &mut ChaCha8Rng, n: usize) -> Vec<HostState> {
        let pools = [
            Resources::new(64, 262_144, 2_000),
            Resources::new(32, 131_072, 1_000),
            Resources::new(16, 65_536, 500),
        ];
        let pristine = g.gen_bool(0.5);
        // Some clouds have hosts with allocation ratios and reserved amounts that part the
        // weighers' free amounts from the room left (no order is built of them: the scan).
        let overcommitted = g.gen_bool(0.15);
        (1..=n as i64)
            .map(|id| {
                let cap = pools[g.gen_range(0..pools.len())];
                let used = if pristine && g.gen_bool(0.8) {
                    Resources::ZERO
                } else {
                    Resources::new(
                        g.gen_range(0..=cap.vcpu()),
                        g.gen_range(0..=cap.memory_mb() / 512) * 512,
                        g.gen_range(0..=cap.disk_gb()),
                    )
                };
                let mut h = HostState::synthetic(id, cap, used);
                h.up = g.gen_bool(0.95);
                h.disabled = g.gen_bool(0.03);
                h.last_seen_ms = if g.gen_bool(0.03) { 1 } else { 1_000_000 };
                h.num_io_ops = if pristine { 0 } else { g.gen_range(0..4) };
                h.num_instances = g.gen_range(0..3);
                if g.gen_bool(0.05) {
                    let mut inv = h.profile.inventories.clone();
                    inv[0].1 = Inventory::of(cap.vcpu()).with(0, 1.0);
                    inv[0].1.step_size = 2;
                    *h.profile_mut() = crate::domain::HostProfile::new("x", "x", "u", "nova", inv);
                    h.profile_mut().host = format!("host{id}").into();
                }
                if overcommitted && g.gen_bool(0.3) {
                    let name = format!("host{id}");
                    let inv = vec![
                        (ClassId::VCPU, Inventory::of(cap.vcpu()).with(2, 4.0)),
                        (
                            ClassId::MEMORY_MB,
                            Inventory::of(cap.memory_mb()).with(512, 1.5),
                        ),
                        (ClassId::DISK_GB, Inventory::of(cap.disk_gb()).with(10, 1.0)),
                    ];
                    *h.profile_mut() =
                        crate::domain::HostProfile::new(&name, &name, "u", "nova", inv);
                }
                if g.gen_bool(0.1) {
                    h.profile_mut().availability_zone = "az2".into();
                }
                h
            })
            .collect()
    }

    fn policy(g: &mut ChaCha8Rng) -> Policy {
        let multipliers = [-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.0, 1.0, 3.0];
        let mut m = || multipliers[g.gen_range(0..multipliers.len())];
        let mut cfg = PolicyConfig {
            ram_weight_multiplier: m(),
            cpu_weight_multiplier: m(),
            disk_weight_multiplier: m(),
            io_ops_weight_multiplier: m(),
            num_instances_weight_multiplier: m(),
            host_subset_size: g.gen_range(1..=3),
            ..PolicyConfig::default()
        };
        if g.gen_bool(0.15) {
            cfg = PolicyConfig::default();
        }
        if g.gen_bool(0.1) {
            cfg.tie_break = TieBreak::Random;
        }
        if g.gen_bool(0.1) {
            cfg.algorithm = Algorithm::WorstFit;
        }
        Policy::from_config(&cfg).unwrap()
    }

    fn request(g: &mut ChaCha8Rng, i: usize) -> RequestContext {
        let demand = match g.gen_range(0..6) {
            0 => Resources::new(1, 512, 1),
            1 => Resources::new(4, 8192, 40),
            2 => Resources::new(16, 65_536, 100),
            3 => Resources::new(2, 0, 0),
            4 => Resources::new(128, 1, 1),
            _ => Resources::new(g.gen_range(1..9), g.gen_range(1..64) * 512, 10),
        };
        let mut r = RequestContext::with_demand(format!("inst-{i}"), "f", demand);
        if g.gen_bool(0.1) {
            r.availability_zone = Some("az2".into());
        }
        if g.gen_bool(0.05) {
            r.ignore_hosts = vec!["host1".into(), "host2".into()];
        }
        r
    }

    /// Random hosts, policies and requests (seeded), each decision followed by the claim
    /// being consumed from the copy as a caching worker does: the sorted walk answers what
    /// the scan over the rows answers and what the generic pipeline answers, every time,
    /// rejections included; and the orders moved claim by claim equal orders built afresh.
    #[test]
    fn the_sorted_walk_answers_as_the_scan_and_the_pipeline() {
        let mut g = ChaCha8Rng::seed_from_u64(15);
        let env = FilterEnv {
            now_ms: 1_000_000,
            host_timeout_ms: 60_000,
        };
        let (mut walked, mut decisions) = (0, 0);
        for case in 0..60 {
            let n = [1, 2, 7, 50, 300, 1_000][case % 6];
            let mut hosts = hosts(&mut g, n);
            let policy = policy(&mut g);
            let mut rows: Vec<HostScan> = hosts.iter().map(HostScan::of).collect();
            let mut index = SortedIndex::build(&rows, &policy.sorted_keys());
            let mut scratch = SortedScratch::always_walking();
            for i in 0..40 {
                let r = request(&mut g, i);
                let max = g.gen_range(0..5);
                let seed = g.gen();
                let mut sorted = Vec::new();
                let got = policy
                    .rank_sorted(
                        ScanView::new(&hosts, &rows),
                        &index,
                        &mut scratch,
                        RankArgs {
                            req: &r,
                            env: &env,
                            max,
                        },
                        &mut ChaCha8Rng::seed_from_u64(seed),
                        &mut sorted,
                    )
                    .map(|()| sorted.clone());
                let mut scan = Vec::new();
                let want = policy
                    .rank_scan(
                        ScanView::new(&hosts, &rows),
                        RankArgs {
                            req: &r,
                            env: &env,
                            max,
                        },
                        &mut ChaCha8Rng::seed_from_u64(seed),
                        &mut scan,
                    )
                    .map(|()| scan.clone());
                let mut generic = Vec::new();
                let old = policy
                    .rank(
                        &hosts,
                        RankArgs {
                            req: &r,
                            env: &env,
                            max,
                        },
                        &mut ChaCha8Rng::seed_from_u64(seed),
                        &mut generic,
                    )
                    .map(|()| generic.clone());
                assert_eq!(got, want, "case {case} request {i}: walk against scan");
                assert_eq!(want, old, "case {case} request {i}: scan against pipeline");
                let walkable = policy.algorithm() == Algorithm::Nova
                    && policy.tie_break() == TieBreak::HostOrder
                    && max > 0
                    && want.is_ok();
                decisions += u64::from(walkable);
                if let Some(&pick) = sorted.first() {
                    hosts[pick].consume(&r.demand);
                    let before = std::mem::replace(&mut rows[pick], HostScan::of(&hosts[pick]));
                    index.moved(&rows, pick, &before);
                }
            }
            let fresh = SortedIndex::build(&rows, &policy.sorted_keys());
            assert_eq!(index.columns, fresh.columns, "case {case}: moved orders");
            walked += scratch.walked;
        }
        // The walk, not only its fallback, was checked (random usage leaves the columns
        // uncorrelated, where the proof often needs more hosts than the budget allows).
        eprintln!("{walked} of {decisions} walkable decisions walked");
        assert!(walked * 2 > decisions, "{walked} of {decisions} walked");
    }

    /// An order moved entry by entry (the front emptied block by block into the back, which
    /// splits, then random moves) reads as the same moves made on one vector: at every
    /// position, over every range from either end, and by binary search.
    #[test]
    fn a_blocked_order_reads_as_the_vector_it_stands_for() {
        let mut g = ChaCha8Rng::seed_from_u64(7);
        let n = 3 * BLOCK + 17;
        let mut flat: Vec<u32> = (0..n as u32).collect();
        let mut order = Order::from_vec(flat.clone());
        for step in 0..3 * n {
            let (from, to) = if step < 2 * BLOCK {
                (0, n - 1)
            } else {
                (g.gen_range(0..n), g.gen_range(0..n))
            };
            let id = flat.remove(from);
            flat.insert(to, id);
            order.remove(from);
            order.insert(to, id);
            assert_eq!(order.len, n);
            if step == 2 * BLOCK - 1 {
                // The two front blocks emptied and went; the back one grew past twice a
                // block and was split.
                let sizes: Vec<usize> = order.blocks.iter().map(Vec::len).collect();
                assert_eq!(sizes, [BLOCK, BLOCK, BLOCK + 17]);
            }
            if step % 97 == 0 || step == 2 * BLOCK - 1 {
                for (pos, &want) in flat.iter().enumerate() {
                    assert_eq!(order.at(pos), want, "step {step} position {pos}");
                }
                let (lo, hi) = (g.gen_range(0..n), g.gen_range(0..=n));
                let (lo, hi) = (lo.min(hi), lo.max(hi));
                let got: Vec<u32> = order.range(lo, hi).rev().collect();
                let want: Vec<u32> = flat[lo..hi].iter().rev().copied().collect();
                assert_eq!(got, want, "step {step} range {lo}..{hi}");
                let cut = g.gen_range(0..n);
                let rank = |j: u32| flat.iter().position(|&x| x == j).unwrap() < cut;
                assert_eq!(order.partition_point(lo, hi, rank), lo.max(cut.min(hi)));
            }
        }
        assert!(order
            .blocks
            .iter()
            .all(|b| !b.is_empty() && b.len() <= 2 * BLOCK));
        assert_eq!(order, Order::from_vec(flat));
    }

    /// The benchmark's cloud: 10,000 identical hosts, spread by the default weighers, each
    /// pick consumed. After the first decisions every host but the few used ties at the top:
    /// the walk proves the top k after meeting a handful of hosts, and still answers as the
    /// scan.
    #[test]
    fn ten_thousand_equal_hosts_are_decided_by_the_walk() {
        let cap = Resources::new(64, 262_144, 2_000);
        let mut hosts: Vec<HostState> = (1..=10_000)
            .map(|id| HostState::synthetic(id, cap, Resources::ZERO))
            .collect();
        let policy = Policy::from_config(&PolicyConfig::default()).unwrap();
        let env = FilterEnv::without_heartbeats();
        let mut rows: Vec<HostScan> = hosts.iter().map(HostScan::of).collect();
        let mut index = SortedIndex::build(&rows, &policy.sorted_keys());
        let mut scratch = SortedScratch::default();
        for i in 0..200 {
            let r = RequestContext::with_demand(format!("i{i}"), "t", Resources::new(1, 512, 1));
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let mut rng = ChaCha8Rng::seed_from_u64(i);
            policy
                .rank_sorted(
                    ScanView::new(&hosts, &rows),
                    &index,
                    &mut scratch,
                    RankArgs {
                        req: &r,
                        env: &env,
                        max: 3,
                    },
                    &mut rng,
                    &mut a,
                )
                .unwrap();
            let met = scratch.evaluated;
            let mut rng = ChaCha8Rng::seed_from_u64(i);
            policy
                .rank_scan(
                    ScanView::new(&hosts, &rows),
                    RankArgs {
                        req: &r,
                        env: &env,
                        max: 3,
                    },
                    &mut rng,
                    &mut b,
                )
                .unwrap();
            assert_eq!(a, b, "decision {i}");
            assert!(met < 100, "decision {i} evaluated {met} hosts");
            let pick = a[0];
            hosts[pick].consume(&r.demand);
            let before = std::mem::replace(&mut rows[pick], HostScan::of(&hosts[pick]));
            index.moved(&rows, pick, &before);
        }
        assert_eq!(scratch.walked, 200);
    }

    /// One host whose weighers' free amounts are not its room left (an allocation ratio of
    /// 1.5 for memory): no order of free amounts is built, the free amounts are weighed by
    /// the scan (from that host's state), and the decision is the pipeline's.
    #[test]
    fn a_host_whose_row_cannot_say_its_free_amounts_leaves_the_decision_to_the_scan() {
        let cap = Resources::new(64, 262_144, 2_000);
        let mut hosts: Vec<HostState> = (1..=50)
            .map(|id| HostState::synthetic(id, cap, Resources::new(id, id * 1024, id)))
            .collect();
        // Nova weighs 131,072 MB free on host 50 (ratio aside); its room left is 262,144 MB,
        // the most of all, which the row would have said.
        let inv = vec![
            (ClassId::VCPU, Inventory::of(64)),
            (ClassId::MEMORY_MB, Inventory::of(262_144).with(0, 1.5)),
            (ClassId::DISK_GB, Inventory::of(2_000)),
        ];
        *hosts[49].profile_mut() = crate::domain::HostProfile::new("h", "h", "u", "nova", inv);
        hosts[49].used = Resources::new(0, 131_072, 0);
        let cfg = PolicyConfig {
            cpu_weight_multiplier: 0.0,
            disk_weight_multiplier: 0.0,
            io_ops_weight_multiplier: 0.0,
            ..PolicyConfig::default()
        };
        let policy = Policy::from_config(&cfg).unwrap();
        let rows: Vec<HostScan> = hosts.iter().map(HostScan::of).collect();
        let index = SortedIndex::build(&rows, &policy.sorted_keys());
        assert!(index.columns.is_empty(), "{:?}", index.columns);
        let env = FilterEnv::without_heartbeats();
        let r = RequestContext::with_demand("i", "t", Resources::new(1, 512, 1));
        let args = RankArgs {
            req: &r,
            env: &env,
            max: 3,
        };
        let (mut sorted, mut generic) = (Vec::new(), Vec::new());
        let mut scratch = SortedScratch::default();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let view = ScanView::new(&hosts, &rows);
        policy
            .rank_sorted(view, &index, &mut scratch, args, &mut rng, &mut sorted)
            .unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        policy.rank(&hosts, args, &mut rng, &mut generic).unwrap();
        assert_eq!((scratch.walked, scratch.scanned), (0, 1));
        // Host 1 (index 0) has the most free memory by Nova's reading: 261,120 MB.
        assert_eq!(sorted, [0, 1, 2]);
        assert_eq!(sorted, generic);
    }

    /// The gate's course: a walk that gave up after evaluating many hosts sends the next 1,
    /// 2, 4, … 32 rankings to the scan, one that gave up cheaply sends none, and a walk that
    /// answers starts it again from 1.
    #[test]
    fn walks_that_give_up_are_tried_less_often_until_one_answers() {
        let mut gate = WalkGate::default();
        // Rankings, in order, that try the walk while every walk gives up.
        let mut tried = Vec::new();
        for ranking in 1..=120 {
            if !gate.skips() {
                tried.push(ranking);
                gate.walked(false, 1_000);
            }
        }
        assert_eq!(tried, [1, 3, 6, 11, 20, 37, 70, 103]);
        gate = WalkGate::default();
        gate.walked(false, WalkGate::CHEAP);
        assert!(!gate.skips(), "a cheap walk that gave up backs off");
        for _ in 0..4 {
            gate.walked(false, 1_000);
            while gate.skips() {}
        }
        gate.walked(true, 1_000);
        gate.walked(false, 1_000);
        assert!(gate.skips());
        assert!(
            !gate.skips(),
            "after a walk that answered, the skip starts again at 1"
        );
    }

    /// 1,000 hosts whose free VCPU and free memory run in opposite orders: no walk can prove
    /// the top 3 within its budget. The rankings the gate sends straight to the scan answer as
    /// the scan does, and are counted.
    #[test]
    fn rankings_after_a_walk_that_gave_up_are_scanned_without_walking_and_answer_the_same() {
        let n = 1_000;
        let cap = Resources::new(n, 1024 * n, 2_000);
        let hosts: Vec<HostState> = (0..n)
            .map(|i| {
                // Free: i + 1 VCPU, about (n - i) GB of memory, a little noise in it.
                let free_ram = (n - i) * 1024 - (i * 7_919) % 1_000;
                let used = Resources::new(n - i - 1, 1024 * n - free_ram, 0);
                HostState::synthetic(i + 1, cap, used)
            })
            .collect();
        let policy = Policy::from_config(&PolicyConfig::default()).unwrap();
        let rows: Vec<HostScan> = hosts.iter().map(HostScan::of).collect();
        let index = SortedIndex::build(&rows, &policy.sorted_keys());
        let env = FilterEnv::without_heartbeats();
        let r = RequestContext::with_demand("i", "t", Resources::new(1, 512, 1));
        let args = RankArgs {
            req: &r,
            env: &env,
            max: 3,
        };
        let view = ScanView::new(&hosts, &rows);
        let mut scratch = SortedScratch::default();
        for ranking in 1..=11 {
            let (mut got, mut want) = (Vec::new(), Vec::new());
            let before = scratch.skipped;
            let mut rng = ChaCha8Rng::seed_from_u64(ranking);
            policy
                .rank_sorted(view, &index, &mut scratch, args, &mut rng, &mut got)
                .unwrap();
            let mut rng = ChaCha8Rng::seed_from_u64(ranking);
            policy.rank_scan(view, args, &mut rng, &mut want).unwrap();
            assert_eq!(got, want, "ranking {ranking}");
            let skipped = scratch.skipped > before;
            assert_eq!(
                skipped,
                ![1, 3, 6, 11].contains(&ranking),
                "ranking {ranking}: skipped {skipped}"
            );
        }
        assert_eq!(
            (scratch.walked, scratch.scanned, scratch.skipped),
            (0, 11, 7)
        );
        // The same rankings, every one walking first: each walk gives up.
        let mut scratch = SortedScratch::always_walking();
        let mut out = Vec::new();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        policy
            .rank_sorted(view, &index, &mut scratch, args, &mut rng, &mut out)
            .unwrap();
        assert!(
            scratch.evaluated as i64 > n / 4,
            "evaluated {}",
            scratch.evaluated
        );
        assert_eq!(
            (scratch.walked, scratch.scanned, scratch.skipped),
            (0, 1, 0)
        );
    }
}
