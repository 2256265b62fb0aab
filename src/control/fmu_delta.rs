//! The cost C of a placement after one move, without evaluating the whole cloud again (one
//! resource, as the service and chapter 4 use): a move changes the shares of two hosts only, so
//! U moves by their consumption, and F (Jain's index over the hungry and pseudo-hungry VMs)
//! by their VMs plus the pseudo-hungry threshold, which a sorted list of the satisfied VMs'
//! allocations answers with prefix sums. O(k log k + log M) per move (k VMs on the two hosts,
//! M VMs), against O(M + N) for [`super::fmu_model::evaluate`]; equal to it within rounding
//! (tests below). What makes GBM usable on a thousand hosts (docs/fmu.md §8.5).

use super::fmu_model::{fmu_cost, share, FmuProblem};

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
}

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
        };
        for host in 0..hosts {
            tracker.reshare(host);
        }
        tracker.resum();
        Some(tracker)
    }

    fn desires(&self, members: &[usize]) -> Vec<f64> {
        members
            .iter()
            .map(|vm| self.problem.desires[*vm][0])
            .collect()
    }

    fn reshare(&mut self, host: usize) {
        let members = self.on_host[host].clone();
        let (used, allocs) = share(
            self.problem.capacities[host][0],
            &self.desires(&members),
            self.problem.max_alloc[0],
        );
        self.host_used[host] = used;
        for (vm, (a, h)) in members.iter().zip(allocs) {
            self.alloc[*vm] = a;
            self.hungry[*vm] = h;
        }
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
        self.cost_if_departed_to(&self.departure(vm), to)
    }

    /// `vm`'s current host shared without it: the part of every move of `vm` that does not
    /// depend on the destination, computed once for all of them.
    pub fn departure(&self, vm: usize) -> Departure {
        let from = self.placement[vm];
        let left: Vec<f64> = self.on_host[from]
            .iter()
            .filter(|m| **m != vm)
            .map(|m| self.problem.desires[*m][0])
            .collect();
        let (used, allocs) = share(
            self.problem.capacities[from][0],
            &left,
            self.problem.max_alloc[0],
        );
        Departure {
            vm,
            change: HostChange {
                host: from,
                used,
                allocs,
            },
        }
    }

    /// C if the VM of `departure` moved to `to` (another host than its own).
    pub fn cost_if_departed_to(&self, departure: &Departure, to: usize) -> f64 {
        let mut joined = self.desires(&self.on_host[to]);
        joined.push(self.problem.desires[departure.vm][0]);
        let (used, allocs) = share(
            self.problem.capacities[to][0],
            &joined,
            self.problem.max_alloc[0],
        );
        let arrival = HostChange {
            host: to,
            used,
            allocs,
        };
        self.cost_with(&[&departure.change, &arrival])
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
    change: HostChange,
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
