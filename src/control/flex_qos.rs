//! What each instance on a host gets when demand exceeds capacity, and the QoS Flex steers by
//! (seed 002, §3 "Resource allocation", eq. 14 and §5.1 "Quality of Service").
//!
//! §3 describes three cases for one resource on one node of capacity C: total demand ≤ C →
//! every task gets its demand; total request ≤ C < total demand → every task first gets what
//! it requested (up to its demand), the rest is split by weighted fair share (WFS); both totals
//! above C → WFS by request, then WFS again on the demand left. The paper names no weights:
//! we weigh by request (a task's share grows with what it asked for). With those weights all
//! three cases are one weighted water-filling: find the level λ with Σ min(d_j, λ·r_j) = C
//! and give task j min(d_j, λ·r_j). In case 2, λ ≥ 1 so every task keeps min(d_j, r_j) as
//! §3 guarantees; in case 3, λ < 1. A task that requested nothing has weight 0 and only
//! shares, equally, what is left once every weighted task has its demand.
//!
//! §5.1: a task is served at time t (q_j(t) = 1) when a_j ≥ d_j or a_j ≥ r_j; with several
//! resources we require it in every resource (§4.3: "constraints have to be met for each
//! resource dimension"). Q(t) (eq. 14) is the share of served tasks.

/// One task's request r_j and demand d_j of one resource.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Share {
    /// What the task asked for (the flavor's amount).
    pub request: f64,
    /// What it would use now if it could.
    pub demand: f64,
}

/// Tolerance of the comparisons a_j ≥ d_j, a_j ≥ r_j, relative to the amounts compared.
const EPSILON: f64 = 1e-9;

/// The allocation a_j of every task (same order) on a node of `capacity` of one resource,
/// by §3's rules as read in the module docs. Negative or non-finite inputs count as 0.
pub fn fair_allocation(capacity: f64, tasks: &[Share]) -> Vec<f64> {
    let clean = |x: f64| if x.is_finite() && x > 0.0 { x } else { 0.0 };
    let capacity = clean(capacity);
    let demand: Vec<f64> = tasks.iter().map(|t| clean(t.demand)).collect();
    let weight: Vec<f64> = tasks.iter().map(|t| clean(t.request)).collect();
    if demand.iter().sum::<f64>() <= capacity {
        return demand;
    }
    // Weighted tasks in the order they reach their demand as λ rises.
    let mut order: Vec<usize> = (0..tasks.len()).filter(|&j| weight[j] > 0.0).collect();
    order.sort_by(|&a, &b| (demand[a] / weight[a]).total_cmp(&(demand[b] / weight[b])));
    let mut alloc = vec![0.0; tasks.len()];
    let mut left = capacity;
    let mut weight_left: f64 = order.iter().map(|&j| weight[j]).sum();
    for (k, &j) in order.iter().enumerate() {
        let level = left / weight_left;
        if demand[j] <= level * weight[j] {
            alloc[j] = demand[j];
            left -= demand[j];
            weight_left -= weight[j];
        } else {
            for &rest in &order[k..] {
                alloc[rest] = level * weight[rest];
            }
            return alloc;
        }
    }
    // Every weighted task has its demand; the unweighted share the rest equally.
    let mut hungry: Vec<usize> = (0..tasks.len()).filter(|&j| weight[j] == 0.0).collect();
    hungry.sort_by(|&a, &b| demand[a].total_cmp(&demand[b]));
    let mut count = hungry.len();
    for j in hungry {
        let even = left / count as f64;
        alloc[j] = demand[j].min(even);
        left -= alloc[j];
        count -= 1;
    }
    alloc
}

/// q_j(t) of §5.1 for one resource: served when a ≥ d or a ≥ r.
pub fn served(allocation: f64, share: Share) -> bool {
    let meets = |want: f64| allocation + EPSILON * want.abs().max(1.0) >= want;
    meets(share.demand) || meets(share.request)
}

/// Served tasks and tasks judged on one node with several resources: `capacity[c]` and
/// `tasks[j][c]` per resource class c. A task is served when it is in every class.
pub fn node_qos(capacity: &[f64], tasks: &[Vec<Share>]) -> (usize, usize) {
    let mut ok = vec![true; tasks.len()];
    for (class, &cap) in capacity.iter().enumerate() {
        let shares: Vec<Share> = tasks.iter().map(|t| t[class]).collect();
        for (j, alloc) in fair_allocation(cap, &shares).into_iter().enumerate() {
            ok[j] &= served(alloc, shares[j]);
        }
    }
    (ok.iter().filter(|&&s| s).count(), tasks.len())
}

/// Q(t) of eq. 14 from per-node (served, judged) counts; `None` when no task was judged.
pub fn cluster_qos(nodes: impl IntoIterator<Item = (usize, usize)>) -> Option<f64> {
    let (served, judged) = nodes
        .into_iter()
        .fold((0usize, 0usize), |(s, j), (ns, nj)| (s + ns, j + nj));
    (judged > 0).then(|| served as f64 / judged as f64)
}

/// A QoS an operator has without per-instance demand: the share of measured hosts whose
/// load (measured usage over capacity, the most loaded class) is at most `threshold` — a
/// host above it is taken to starve its instances. `None` when no host is measured.
pub fn unsaturated_share(loads: impl IntoIterator<Item = f64>, threshold: f64) -> Option<f64> {
    let (ok, all) = loads
        .into_iter()
        .filter(|l| l.is_finite())
        .fold((0usize, 0usize), |(ok, all), l| {
            (ok + usize::from(l <= threshold), all + 1)
        });
    (all > 0).then(|| ok as f64 / all as f64)
}

/// Q(t) (eq. 14) from what hosts report of each instance (`[flex] qos_source =
/// "instance_signals"`): an instance is served when every signal reported of it is at most
/// its limit. Each signal is a share of the interval in which the instance was denied what
/// it asked for: its vCPUs runnable but waiting for a host CPU, or it stalled on memory.
/// A KVM guest can use no more CPU than its vCPUs nor more memory than its flavor's, so its
/// demand is at most its request and a wait means a_j < min(d_j, r_j): q_j(t) = 0 (§5.1).
/// Each item is one instance's (value, limit) pairs; `None` with no instance (or no
/// finite value).
pub fn served_share<I, S>(instances: I) -> Option<f64>
where
    I: IntoIterator<Item = S>,
    S: IntoIterator<Item = (f64, f64)>,
{
    let (served, all) = instances
        .into_iter()
        .fold((0usize, 0usize), |(served, all), signals| {
            let mut any = false;
            let mut ok = true;
            for (value, limit) in signals {
                if value.is_finite() {
                    any = true;
                    ok &= value <= limit;
                }
            }
            (served + usize::from(any && ok), all + usize::from(any))
        });
    (all > 0).then(|| served as f64 / all as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_share_counts_instances_whose_every_signal_is_within_its_limit() {
        let limits = |cpu: f64, mem: f64| [(cpu, 0.05), (mem, 0.05)];
        // Served; waited for CPU; stalled on memory; both at the limit exactly (served).
        let q = served_share([
            limits(0.0, 0.0),
            limits(0.2, 0.0),
            limits(0.01, 0.3),
            limits(0.05, 0.05),
        ]);
        assert_eq!(q, Some(0.5));
        // An instance reporting one signal is judged on it alone; one with no finite value
        // is not counted.
        let q = served_share(vec![vec![(0.01, 0.05)], vec![(f64::NAN, 0.05)], vec![]]);
        assert_eq!(q, Some(1.0));
        assert_eq!(served_share(Vec::<Vec<(f64, f64)>>::new()), None);
    }

    #[test]
    fn unsaturated_share_counts_hosts_at_most_the_threshold() {
        assert_eq!(unsaturated_share([0.2, 0.9, 0.95, 1.0], 0.9), Some(0.5));
        assert_eq!(unsaturated_share([0.2, f64::NAN], 0.9), Some(1.0));
        assert_eq!(unsaturated_share([], 0.9), None);
    }

    fn share(request: f64, demand: f64) -> Share {
        Share { request, demand }
    }

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
    }

    #[test]
    fn case_1_demand_fits_everyone_gets_demand() {
        let got = fair_allocation(10.0, &[share(5.0, 2.0), share(5.0, 6.0)]);
        assert!(close(&got, &[2.0, 6.0]), "{got:?}");
    }

    #[test]
    fn case_2_requests_fit_guaranteed_then_weighted_share() {
        // §3's example: requests 5, demands 6 → gets its 5 and a share of what is left.
        // C = 12: requests 5 + 5 = 10 ≤ 12 < demands 6 + 8 = 14. Guaranteed 5 and 5; the 2
        // left go by request weight (equal): 6 and 6 → the first is capped at its demand 6,
        // the second takes 6 as well (λ = 1.2).
        let got = fair_allocation(12.0, &[share(5.0, 6.0), share(5.0, 8.0)]);
        assert!(close(&got, &[6.0, 6.0]), "{got:?}");
        // A small task below its request keeps its demand; the big one takes the rest.
        let got = fair_allocation(10.0, &[share(4.0, 1.0), share(4.0, 12.0)]);
        assert!(close(&got, &[1.0, 9.0]), "{got:?}");
    }

    #[test]
    fn case_3_both_above_capacity_shares_by_request() {
        // Requests 8 + 4 = 12 > C = 6, demands 8 + 4: λ = 0.5 → 4 and 2, neither served.
        let tasks = [share(8.0, 8.0), share(4.0, 4.0)];
        let got = fair_allocation(6.0, &tasks);
        assert!(close(&got, &[4.0, 2.0]), "{got:?}");
        assert!(!served(got[0], tasks[0]) && !served(got[1], tasks[1]));
        // A light task is served even so; its leftover goes to the heavy one.
        let tasks = [share(8.0, 1.0), share(8.0, 9.0)];
        let got = fair_allocation(6.0, &tasks);
        assert!(close(&got, &[1.0, 5.0]), "{got:?}");
        assert!(served(got[0], tasks[0]) && !served(got[1], tasks[1]));
    }

    #[test]
    fn allocations_never_exceed_capacity_or_demand() {
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as f64 / (1u64 << 31) as f64
        };
        for _ in 0..1_000 {
            let cap = next() * 64.0;
            let tasks: Vec<Share> = (0..(next() * 12.0) as usize)
                .map(|_| share((next() * 16.0).floor(), next() * 20.0))
                .collect();
            let got = fair_allocation(cap, &tasks);
            let total: f64 = got.iter().sum();
            let demand: f64 = tasks.iter().map(|t| t.demand).sum();
            assert!(total <= cap.min(demand) + 1e-6, "{cap} {tasks:?} {got:?}");
            assert!(
                total >= cap.min(demand) - 1e-6,
                "work-conserving: {cap} {tasks:?}"
            );
            for (a, t) in got.iter().zip(&tasks) {
                assert!(*a >= 0.0 && *a <= t.demand + 1e-9);
            }
        }
    }

    #[test]
    fn a_task_without_request_shares_only_the_leftover() {
        let got = fair_allocation(10.0, &[share(4.0, 4.0), share(0.0, 9.0), share(0.0, 1.0)]);
        assert!(close(&got, &[4.0, 5.0, 1.0]), "{got:?}");
    }

    #[test]
    fn bad_numbers_count_as_zero() {
        let got = fair_allocation(f64::NAN, &[share(-1.0, f64::INFINITY), share(2.0, 2.0)]);
        assert!(close(&got, &[0.0, 0.0]), "{got:?}");
    }

    #[test]
    fn a_task_must_be_served_in_every_class() {
        // VCPU: C 4, demands 2 + 2 fit. MEMORY: C 4, requests 4 + 4, demands 4 + 4: λ = 0.5.
        let tasks = vec![
            vec![share(2.0, 2.0), share(4.0, 4.0)],
            vec![share(2.0, 2.0), share(4.0, 4.0)],
        ];
        assert_eq!(node_qos(&[4.0, 4.0], &tasks), (0, 2));
        assert_eq!(node_qos(&[4.0, 8.0], &tasks), (2, 2));
    }

    #[test]
    fn cluster_qos_is_the_share_of_served_tasks() {
        assert_eq!(cluster_qos([(9, 10), (90, 90)]), Some(0.99));
        assert_eq!(cluster_qos([(0, 0)]), None);
    }
}
