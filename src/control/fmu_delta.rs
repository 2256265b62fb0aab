//! The cost C of a placement after one move, without evaluating the whole cloud again (one
//! resource, as the service and chapter 4 use): a move changes the shares of two hosts only, so
//! U moves by their consumption, and F (Jain's index over the hungry and pseudo-hungry VMs)
//! by their VMs plus the pseudo-hungry threshold, which a sorted list of the satisfied VMs'
//! allocations answers with prefix sums. O(k log k + log M) per move (k VMs on the two hosts,
//! M VMs), against O(M + N) for [`super::fmu_model::evaluate`]; equal to it within rounding
//! (tests below). What makes GBM usable on a thousand hosts (docs/fmu.md §8.5).

use super::fmu_model::{fmu_cost, hungry_level_sorted, share, FmuProblem};

/// The shares of a placement and the sums C is made of, for one resource.
#[derive(Clone, Debug)]
pub struct CostTracker<'a> {
    problem: &'a FmuProblem,
    placement: Vec<usize>,
    on_host: Vec<Vec<usize>>,
    alloc: Vec<f64>,
    hungry: Vec<bool>,
    host_used: Vec<f64>,
    total: f64,
    used: f64,
    /// Hungry VMs: count, Σ a, Σ a².
    hungry_sums: (f64, f64, f64),
    /// The satisfied VMs' allocations, ascending, with prefix sums of a and a².
    satisfied: Vec<f64>,
    prefix: Vec<(f64, f64)>,
    /// Each VM's desire.
    desire: Vec<f64>,
    /// Per host: its VMs' desires ascending (what `hungry_level` sorts), their sum and
    /// whether none of them is hungry.
    sorted: Vec<Vec<f64>>,
    desire_sum: Vec<f64>,
    quiet: Vec<bool>,
}

/// How far below its capacity (and `max_alloc`) a host's summed desires must stay for a move
/// onto it to be judged to leave every VM there satisfied: far above the rounding of the
/// water-filling sums (≈ 1e-16 per VM), so the judgement never errs
/// ([`CostTracker::leaves_cost_unchanged`]).
const QUIET_MARGIN: f64 = 1e-6;

impl<'a> CostTracker<'a> {
    /// The tracker of `placement` (valid for `problem`, as `evaluate` checked it); `None` when
    /// the problem has more than one resource.
    pub fn new(problem: &'a FmuProblem, placement: &[usize]) -> Option<Self> {
        if problem.resources() != 1 {
            return None;
        }
        let hosts = problem.capacities.len();
        let mut on_host = vec![Vec::new(); hosts];
        for (vm, host) in placement.iter().enumerate() {
            on_host[*host].push(vm);
        }
        let vms = placement.len();
        let mut tracker = CostTracker {
            problem,
            placement: placement.to_vec(),
            on_host,
            alloc: vec![0.0; vms],
            hungry: vec![false; vms],
            host_used: vec![0.0; hosts],
            total: problem.capacities.iter().map(|c| c[0]).sum(),
            used: 0.0,
            hungry_sums: (0.0, 0.0, 0.0),
            satisfied: Vec::new(),
            prefix: Vec::new(),
            desire: problem.desires.iter().map(|d| d[0]).collect(),
            sorted: vec![Vec::new(); hosts],
            desire_sum: vec![0.0; hosts],
            quiet: vec![true; hosts],
        };
        for host in 0..hosts {
            tracker.reshare(host);
        }
        tracker.resum();
        Some(tracker)
    }

    fn desires(&self, members: &[usize]) -> Vec<f64> {
        members.iter().map(|vm| self.desire[*vm]).collect()
    }

    fn reshare(&mut self, host: usize) {
        let members = std::mem::take(&mut self.on_host[host]);
        let desires = self.desires(&members);
        let (used, allocs) = share(
            self.problem.capacities[host][0],
            &desires,
            self.problem.max_alloc[0],
        );
        self.host_used[host] = used;
        let mut quiet = true;
        for (vm, (a, h)) in members.iter().zip(allocs) {
            self.alloc[*vm] = a;
            self.hungry[*vm] = h;
            quiet &= !h;
        }
        self.quiet[host] = quiet;
        self.desire_sum[host] = desires.iter().sum();
        let mut sorted = desires;
        sorted.sort_by(f64::total_cmp);
        self.sorted[host] = sorted;
        self.on_host[host] = members;
    }

    fn resum(&mut self) {
        self.used = self.host_used.iter().sum();
        let mut sums = (0.0, 0.0, 0.0);
        let mut satisfied = Vec::with_capacity(self.alloc.len());
        for (a, h) in self.alloc.iter().zip(&self.hungry) {
            if *h {
                sums = (sums.0 + 1.0, sums.1 + a, sums.2 + a * a);
            } else {
                satisfied.push(*a);
            }
        }
        satisfied.sort_by(f64::total_cmp);
        let mut prefix = Vec::with_capacity(satisfied.len() + 1);
        let mut acc = (0.0, 0.0);
        prefix.push(acc);
        for a in &satisfied {
            acc = (acc.0 + a, acc.1 + a * a);
            prefix.push(acc);
        }
        self.hungry_sums = sums;
        self.satisfied = satisfied;
        self.prefix = prefix;
    }

    /// C of the placement now.
    pub fn cost(&self) -> f64 {
        self.cost_with(&[])
    }

    /// Where `vm` is now.
    pub fn host_of(&self, vm: usize) -> usize {
        self.placement[vm]
    }

    /// C if `vm` moved to `to` (nothing changes).
    pub fn cost_if_moved(&self, vm: usize, to: usize) -> f64 {
        if self.placement[vm] == to {
            return self.cost();
        }
        self.cost_if_departed_to(&mut self.departure(vm), to)
    }

    /// `vm`'s current host shared without it: the part of every move of `vm` that does not
    /// depend on the destination, computed once for all of them.
    pub fn departure(&self, vm: usize) -> Departure {
        let from = self.placement[vm];
        let left: Vec<f64> = self.on_host[from]
            .iter()
            .filter(|m| **m != vm)
            .map(|m| self.desire[*m])
            .collect();
        let (used, allocs) = share(
            self.problem.capacities[from][0],
            &left,
            self.problem.max_alloc[0],
        );
        let quiet = self.quiet[from] && allocs.iter().all(|(_, hungry)| !hungry);
        Departure {
            vm,
            quiet,
            change: HostChange {
                host: from,
                used,
                allocs,
            },
            arrival: Vec::new(),
        }
    }

    /// Whether moving the VM of `departure` to `to` provably leaves C as it is (up to
    /// rounding, far below any improvement GBM counts): nobody is hungry on its host before or
    /// after it leaves, and `to` has nobody hungry and keeps its summed desires, the VM's
    /// included, [`QUIET_MARGIN`] below its capacity and each desire below `max_alloc`. Then
    /// every VM keeps its allocation (its desire), so the hungry set, its sums, the
    /// pseudo-hungry threshold and set are unchanged, and so is the consumption. On a cloud
    /// whose hosts mostly have room, most moves are of this kind; GBM skips them.
    pub fn leaves_cost_unchanged(&self, departure: &Departure, to: usize) -> bool {
        if !departure.quiet || !self.quiet[to] {
            return false;
        }
        let d = self.desire[departure.vm];
        let capacity = self.problem.capacities[to][0];
        let fits = self.desire_sum[to] + d <= capacity * (1.0 - QUIET_MARGIN);
        let below_cap = match self.problem.max_alloc[0] {
            Some(m) => {
                let largest = self.sorted[to].last().copied().unwrap_or(0.0).max(d);
                largest <= m * (1.0 - QUIET_MARGIN)
            }
            None => true,
        };
        fits && below_cap
    }

    /// C if the VM of `departure` moved to `to` (another host than its own). The arrival is
    /// shared as [`share`] would share `to`'s desires with the VM's appended, with the same
    /// operations in the same order (so the same bits), from `to`'s sorted desires and without
    /// allocating: `departure` lends its buffer.
    pub fn cost_if_departed_to(&self, departure: &mut Departure, to: usize) -> f64 {
        let d = self.desire[departure.vm];
        let capacity = self.problem.capacities[to][0];
        let sorted = &self.sorted[to];
        let at = sorted.partition_point(|x| x.total_cmp(&d).is_lt());
        let merged = sorted[..at]
            .iter()
            .chain(std::iter::once(&d))
            .chain(&sorted[at..]);
        let hl = hungry_level_sorted(
            capacity,
            merged,
            sorted.len() + 1,
            self.problem.max_alloc[0],
        );
        let mut allocs = std::mem::take(&mut departure.arrival);
        allocs.clear();
        allocs.extend(
            self.on_host[to]
                .iter()
                .map(|vm| self.desire[*vm])
                .chain(std::iter::once(d))
                .map(|x| if x > hl { (hl, true) } else { (x, false) }),
        );
        let arrival = HostChange {
            host: to,
            used: allocs.iter().map(|a| a.0).sum(),
            allocs,
        };
        let cost = self.cost_with(&[&departure.change, &arrival]);
        departure.arrival = arrival.allocs;
        cost
    }

    /// Moves `vm` to `to`.
    pub fn apply(&mut self, vm: usize, to: usize) {
        let from = self.placement[vm];
        self.on_host[from].retain(|m| *m != vm);
        self.on_host[to].push(vm);
        self.placement[vm] = to;
        self.reshare(from);
        self.reshare(to);
        self.resum();
    }

    /// C with the hosts of `changes` shared anew (their old VMs out, the new allocations in).
    fn cost_with(&self, changes: &[&HostChange]) -> f64 {
        let mut used = self.used;
        let (mut n, mut s, mut q) = self.hungry_sums;
        for c in changes {
            used += c.used - self.host_used[c.host];
            for vm in &self.on_host[c.host] {
                if self.hungry[*vm] {
                    let a = self.alloc[*vm];
                    (n, s, q) = (n - 1.0, s - a, q - a * a);
                }
            }
            for (a, h) in &c.allocs {
                if *h {
                    (n, s, q) = (n + 1.0, s + a, q + a * a);
                }
            }
        }
        let utilization = if self.total > 0.0 {
            used / self.total
        } else {
            1.0
        };
        let fairness = if n < 0.5 {
            1.0
        } else {
            let threshold = s / n + 1e-12;
            let at = self.satisfied.partition_point(|a| *a <= threshold);
            let (all_s, all_q) = self.prefix[self.satisfied.len()];
            let (below_s, below_q) = self.prefix[at];
            let (mut pn, mut ps, mut pq) = (
                (self.satisfied.len() - at) as f64,
                all_s - below_s,
                all_q - below_q,
            );
            for c in changes {
                for vm in &self.on_host[c.host] {
                    let a = self.alloc[*vm];
                    if !self.hungry[*vm] && a > threshold {
                        (pn, ps, pq) = (pn - 1.0, ps - a, pq - a * a);
                    }
                }
                for (a, h) in &c.allocs {
                    if !*h && *a > threshold {
                        (pn, ps, pq) = (pn + 1.0, ps + a, pq + a * a);
                    }
                }
            }
            jain(n + pn, s + ps, q + pq)
        };
        fmu_cost(utilization, fairness)
    }
}

/// A VM's current host shared without it ([`CostTracker::departure`]).
#[derive(Clone, Debug)]
pub struct Departure {
    vm: usize,
    /// Nobody on the VM's host is hungry, with it or without it.
    quiet: bool,
    change: HostChange,
    /// A buffer for the arrival's allocations, reused from one destination to the next.
    arrival: Vec<(f64, bool)>,
}

/// One host's new share.
#[derive(Clone, Debug)]
struct HostChange {
    host: usize,
    used: f64,
    allocs: Vec<(f64, bool)>,
}

/// Jain's index from its sums, as [`super::fmu_model::jain_index`] computes it.
fn jain(n: f64, sum: f64, squares: f64) -> f64 {
    if n < 0.5 || squares <= 1e-300 {
        1.0
    } else {
        (sum * sum / (n * squares)).min(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fmu_model::{evaluate, FmuParams};
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn the_cost_after_any_move_is_the_full_evaluation_s() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for case in 0..20 {
            let hosts = rng.gen_range(2..7);
            let vms = rng.gen_range(1..25);
            let problem = FmuProblem {
                capacities: (0..hosts).map(|_| vec![rng.gen_range(1.0..8.0)]).collect(),
                desires: (0..vms).map(|_| vec![rng.gen_range(0.0..3.0)]).collect(),
                max_alloc: vec![if case % 2 == 0 { Some(1.5) } else { None }],
            };
            let mut placement: Vec<usize> = (0..vms).map(|_| rng.gen_range(0..hosts)).collect();
            let params = FmuParams::equal(1);
            let mut tracker = CostTracker::new(&problem, &placement).unwrap();
            for _ in 0..5 {
                let full = evaluate(&problem, &placement, &params).unwrap().cost;
                assert!((tracker.cost() - full).abs() < 1e-9, "case {case}");
                for vm in 0..vms {
                    for to in 0..hosts {
                        let mut moved = placement.clone();
                        moved[vm] = to;
                        let full = evaluate(&problem, &moved, &params).unwrap().cost;
                        let fast = tracker.cost_if_moved(vm, to);
                        assert!((fast - full).abs() < 1e-9, "case {case} vm {vm} → {to}");
                    }
                }
                let (vm, to) = (rng.gen_range(0..vms), rng.gen_range(0..hosts));
                tracker.apply(vm, to);
                placement[vm] = to;
            }
        }
    }

    /// A random cloud of `hosts` hosts where most hosts have room (desires up to `top`).
    fn roomy(rng: &mut ChaCha8Rng, top: f64, cap: Option<f64>) -> (FmuProblem, Vec<usize>) {
        let hosts = rng.gen_range(2..9);
        let vms = rng.gen_range(1..40);
        let problem = FmuProblem {
            capacities: (0..hosts).map(|_| vec![rng.gen_range(4.0..8.0)]).collect(),
            desires: (0..vms)
                .map(|vm| {
                    // A few VMs desire a lot, so some hosts are hungry and some pseudo-hungry.
                    let d = if vm % 7 == 0 {
                        rng.gen_range(1.0..4.0)
                    } else {
                        rng.gen_range(0.0..top)
                    };
                    vec![d]
                })
                .collect(),
            max_alloc: vec![cap],
        };
        let placement = (0..vms).map(|_| rng.gen_range(0..hosts)).collect();
        (problem, placement)
    }

    /// The arrival shared from the host's sorted desires gives the cost `share` over the
    /// appended desires gives, to the bit (GBM's plans depend on exact ties and order).
    #[test]
    fn the_merged_arrival_costs_what_share_over_the_appended_desires_costs_to_the_bit() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for case in 0..30 {
            let cap = if case % 3 == 0 { Some(1.2) } else { None };
            let (problem, placement) = roomy(&mut rng, 1.0, cap);
            let tracker = CostTracker::new(&problem, &placement).unwrap();
            for (vm, from) in placement.iter().enumerate() {
                for to in (0..problem.capacities.len()).filter(|h| h != from) {
                    let mut departure = tracker.departure(vm);
                    let mut joined = tracker.desires(&tracker.on_host[to]);
                    joined.push(tracker.desire[vm]);
                    let (used, allocs) = share(problem.capacities[to][0], &joined, cap);
                    let arrival = HostChange {
                        host: to,
                        used,
                        allocs,
                    };
                    let reference = tracker.cost_with(&[&departure.change, &arrival]);
                    let fast = tracker.cost_if_departed_to(&mut departure, to);
                    assert_eq!(
                        fast.to_bits(),
                        reference.to_bits(),
                        "case {case} vm {vm} → {to}"
                    );
                }
            }
        }
    }

    /// Every move judged to leave C unchanged does (the full evaluation within 1e-12, far
    /// below GBM's ε of 1e-9), the judgement is made on such clouds, and never for a move
    /// from or onto a host with a hungry VM.
    #[test]
    fn a_move_judged_to_leave_the_cost_unchanged_does() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let params = FmuParams::equal(1);
        let (mut judged, mut not) = (0, 0);
        for case in 0..30 {
            let cap = if case % 2 == 0 { Some(1.5) } else { None };
            let (problem, placement) = roomy(&mut rng, 0.6, cap);
            let tracker = CostTracker::new(&problem, &placement).unwrap();
            let base = evaluate(&problem, &placement, &params).unwrap().cost;
            for vm in 0..placement.len() {
                let departure = tracker.departure(vm);
                for to in (0..problem.capacities.len()).filter(|h| *h != placement[vm]) {
                    if !tracker.leaves_cost_unchanged(&departure, to) {
                        not += 1;
                        continue;
                    }
                    judged += 1;
                    let from = placement[vm];
                    let p = &placement;
                    let on = |h: usize| (0..p.len()).filter(move |m| p[*m] == h);
                    assert!(
                        on(from).chain(on(to)).all(|m| !tracker.hungry[m]),
                        "case {case}"
                    );
                    let mut moved = placement.clone();
                    moved[vm] = to;
                    let full = evaluate(&problem, &moved, &params).unwrap().cost;
                    assert!(
                        (full - base).abs() < 1e-12,
                        "case {case} vm {vm} → {to}: {full} vs {base}"
                    );
                }
            }
        }
        assert!(judged > 100 && not > 100, "judged {judged}, not {not}");
    }

    #[test]
    fn more_than_one_resource_has_no_tracker() {
        let problem = FmuProblem {
            capacities: vec![vec![1.0, 1.0]],
            desires: vec![vec![0.5, 0.5]],
            max_alloc: vec![None, None],
        };
        assert!(CostTracker::new(&problem, &[0]).is_none());
    }
}
