//! Fair Maximum Utilization (McNett's thesis, seed 003, chapter 3; docs/fmu.md): the
//! water-filling hungry level (§3.8.6 `get_hungry_level`), hungry / satisfied / pseudo-hungry
//! VMs per resource (§3.4), utilization U (eq. 3.1), fairness F (eq. 3.2, Jain's index over the
//! augmented hungry set) and the scalar cost C = C_U + (1 − C_U)² C_F (eq. 3.8), plus the
//! black-box hungry detection of §3.6.

use serde::Serialize;
use thiserror::Error;

/// Everything that makes an FMU problem or a rebalance request unusable, naming the culprit.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum FmuError {
    /// A weight, capacity, desire or parameter is not a finite non-negative number, or a
    /// vector has the wrong length.
    #[error("invalid {what}: {reason}")]
    Invalid { what: String, reason: String },
}

pub(crate) fn invalid(what: impl Into<String>, reason: impl Into<String>) -> FmuError {
    FmuError::Invalid {
        what: what.into(),
        reason: reason.into(),
    }
}

/// How eqs. 3.1 and 3.2 are scaled (docs/fmu.md §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Normalization {
    /// As printed: the 1/R factor *and* weights summing to 1, so U, F ≤ 1/R. Identical to
    /// [`Normalization::Weighted`] when R = 1 (the thesis' chapter 4 is CPU only).
    Literal,
    /// Σ_r w_r U_r and Σ_r w_r F_r with Σ w_r = 1: both reach 1, so C = 0 ⇔ U = F = 1 holds
    /// as §3.5 states. The reading the service uses.
    Weighted,
}

/// The resource weights and the scaling of U and F.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FmuParams {
    /// w_r, one per resource, non-negative, summing to 1.
    pub weights: Vec<f64>,
    /// The reading of eqs. 3.1 and 3.2.
    pub normalization: Normalization,
}

impl FmuParams {
    /// Equal weights over `resources` resources, the service's reading.
    pub fn equal(resources: usize) -> Self {
        FmuParams {
            weights: vec![1.0 / resources.max(1) as f64; resources.max(1)],
            normalization: Normalization::Weighted,
        }
    }

    fn validate(&self, resources: usize) -> Result<(), FmuError> {
        if self.weights.len() != resources {
            return Err(invalid(
                "weights",
                format!("{} given for {resources} resources", self.weights.len()),
            ));
        }
        if self.weights.iter().any(|w| !w.is_finite() || *w < 0.0) {
            return Err(invalid("weights", "each must be finite and ≥ 0"));
        }
        let sum: f64 = self.weights.iter().sum();
        if (sum - 1.0).abs() > 1e-9 {
            return Err(invalid("weights", format!("they sum to {sum}, not 1")));
        }
        Ok(())
    }
}

/// An FMU instance: what each host shares and what each VM desires, per resource.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FmuProblem {
    /// Capacity p_i of each host, one value per resource.
    pub capacities: Vec<Vec<f64>>,
    /// Desire v_j of each VM, one value per resource.
    pub desires: Vec<Vec<f64>>,
    /// The most one VM can consume of each resource (`max_alloc`: one core for a one-vCPU
    /// VM); `None` means the host's whole capacity.
    pub max_alloc: Vec<Option<f64>>,
}

impl FmuProblem {
    /// Number of resources R.
    pub fn resources(&self) -> usize {
        self.max_alloc.len()
    }

    /// Checks shapes and values, naming the first bad entry.
    pub fn validate(&self) -> Result<(), FmuError> {
        let r = self.resources();
        if r == 0 {
            return Err(invalid("max_alloc", "no resources"));
        }
        let check = |what: &str, rows: &[Vec<f64>]| -> Result<(), FmuError> {
            for (i, row) in rows.iter().enumerate() {
                if row.len() != r {
                    return Err(invalid(format!("{what}[{i}]"), format!("needs {r} values")));
                }
                if row.iter().any(|v| !v.is_finite() || *v < 0.0) {
                    return Err(invalid(
                        format!("{what}[{i}]"),
                        "values must be finite and ≥ 0",
                    ));
                }
            }
            Ok(())
        };
        check("capacities", &self.capacities)?;
        check("desires", &self.desires)?;
        if self.capacities.is_empty() {
            return Err(invalid("capacities", "no hosts"));
        }
        if self
            .max_alloc
            .iter()
            .flatten()
            .any(|m| !m.is_finite() || *m <= 0.0)
        {
            return Err(invalid("max_alloc", "must be finite and > 0"));
        }
        Ok(())
    }
}

/// §3.8.6 `get_hungry_level`: the share hl such that VMs desiring less than hl get their desire
/// and every other VM gets hl (fair, work-conserving sharing), capped at `max_alloc`.
///
/// The printed pseudocode stops at the first desire ≥ hl ("while desire and desire < hl"), so
/// a VM desiring exactly hl is satisfied; when every desire fits, hl is what the last one
/// could have had (≥ its desire).
pub fn hungry_level(capacity: f64, desires: &[f64], max_alloc: Option<f64>) -> f64 {
    let mut sorted = desires.to_vec();
    sorted.sort_by(f64::total_cmp);
    hungry_level_sorted(capacity, sorted.iter(), sorted.len(), max_alloc)
}

/// [`hungry_level`] over `n` desires already in ascending order: the loop itself, shared
/// with `CostTracker`, which merges one VM into a host's sorted desires (the same result
/// to the bit: equal desires in either order make the same sums).
pub(crate) fn hungry_level_sorted<'d>(
    capacity: f64,
    sorted: impl Iterator<Item = &'d f64>,
    n: usize,
    max_alloc: Option<f64>,
) -> f64 {
    let max_alloc = max_alloc.unwrap_or(capacity);
    let mut remaining = capacity;
    let mut left = n;
    if left == 0 {
        return max_alloc.min(capacity);
    }
    let mut hl = (remaining / left as f64).min(max_alloc);
    for desire in sorted {
        if *desire >= hl {
            break;
        }
        remaining -= desire;
        left -= 1;
        if left == 0 {
            break;
        }
        hl = (remaining / left as f64).min(max_alloc);
    }
    hl
}

/// Where a VM stands for one resource (§3.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum VmState {
    /// Desires more than it receives.
    Hungry,
    /// Receives its desire, no more than the hungry VMs' average.
    Satisfied,
    /// Satisfied, yet receiving more than the hungry VMs' average: a sign of imbalance.
    PseudoHungry,
}

/// One host's share of one resource: consumption and the allocation of each of its VMs.
pub(crate) fn share(
    capacity: f64,
    desires: &[f64],
    max_alloc: Option<f64>,
) -> (f64, Vec<(f64, bool)>) {
    let hl = hungry_level(capacity, desires, max_alloc);
    let allocs: Vec<(f64, bool)> = desires
        .iter()
        .map(|d| if *d > hl { (hl, true) } else { (*d, false) })
        .collect();
    (allocs.iter().map(|a| a.0).sum(), allocs)
}

/// U, F, C of one placement and each VM's allocation and state.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FmuEvaluation {
    /// Utilization (eq. 3.1 under the chosen normalization).
    pub utilization: f64,
    /// Fairness to hungry VMs (eq. 3.2).
    pub fairness: f64,
    /// C = C_U + (1 − C_U)² C_F (eq. 3.8), with C_U = 1 − U and C_F = 1 − F.
    pub cost: f64,
    /// U_r = Σ_j u_rj / c_r per resource.
    pub utilization_per_resource: Vec<f64>,
    /// Jain's index over Ĥ_r per resource (1 when Ĥ_r is empty: nobody is treated unfairly).
    pub fairness_per_resource: Vec<f64>,
    /// allocations[vm][resource].
    pub allocations: Vec<Vec<f64>>,
    /// states[vm][resource].
    pub states: Vec<Vec<VmState>>,
}

/// Eq. 3.8.
pub fn fmu_cost(utilization: f64, fairness: f64) -> f64 {
    let cu = 1.0 - utilization;
    cu + (1.0 - cu).powi(2) * (1.0 - fairness)
}

/// Jain's fairness index (Σa)² / (n Σa²); 1 for an empty or all-zero set.
pub fn jain_index(values: impl IntoIterator<Item = f64>) -> f64 {
    let (mut n, mut sum, mut squares) = (0usize, 0.0, 0.0);
    for a in values {
        n += 1;
        sum += a;
        squares += a * a;
    }
    if n == 0 || squares <= 0.0 {
        1.0
    } else {
        (sum * sum / (n as f64 * squares)).min(1.0)
    }
}

/// Evaluates `assignment` (host index per VM) against `problem`.
pub fn evaluate(
    problem: &FmuProblem,
    assignment: &[usize],
    params: &FmuParams,
) -> Result<FmuEvaluation, FmuError> {
    problem.validate()?;
    let r_count = problem.resources();
    params.validate(r_count)?;
    if assignment.len() != problem.desires.len() {
        return Err(invalid(
            "assignment",
            format!(
                "{} hosts given for {} VMs",
                assignment.len(),
                problem.desires.len()
            ),
        ));
    }
    let hosts = problem.capacities.len();
    if let Some((vm, host)) = assignment.iter().enumerate().find(|(_, h)| **h >= hosts) {
        return Err(invalid(
            format!("assignment[{vm}]"),
            format!("no host {host}"),
        ));
    }
    let mut on_host: Vec<Vec<usize>> = vec![Vec::new(); hosts];
    for (vm, host) in assignment.iter().enumerate() {
        on_host[*host].push(vm);
    }
    let vms = assignment.len();
    let mut allocations = vec![vec![0.0; r_count]; vms];
    let mut states = vec![vec![VmState::Satisfied; r_count]; vms];
    let mut u_r = Vec::with_capacity(r_count);
    let mut f_r = Vec::with_capacity(r_count);
    for r in 0..r_count {
        let mut consumed = 0.0;
        let mut total = 0.0;
        for (host, members) in on_host.iter().enumerate() {
            let capacity = problem.capacities[host][r];
            total += capacity;
            let desires: Vec<f64> = members.iter().map(|vm| problem.desires[*vm][r]).collect();
            let (used, allocs) = share(capacity, &desires, problem.max_alloc[r]);
            consumed += used;
            for (vm, (alloc, hungry)) in members.iter().zip(allocs) {
                allocations[*vm][r] = alloc;
                states[*vm][r] = if hungry {
                    VmState::Hungry
                } else {
                    VmState::Satisfied
                };
            }
        }
        u_r.push(if total > 0.0 { consumed / total } else { 1.0 });
        let (n, sum) = (0..vms)
            .filter(|vm| states[*vm][r] == VmState::Hungry)
            .fold((0usize, 0.0), |(n, s), vm| (n + 1, s + allocations[vm][r]));
        if n > 0 {
            let average = sum / n as f64;
            for vm in 0..vms {
                if states[vm][r] == VmState::Satisfied && allocations[vm][r] > average + 1e-12 {
                    states[vm][r] = VmState::PseudoHungry;
                }
            }
        }
        f_r.push(jain_index(
            (0..vms)
                .filter(|vm| states[*vm][r] != VmState::Satisfied)
                .map(|vm| allocations[vm][r]),
        ));
    }
    let scale = match params.normalization {
        Normalization::Literal => 1.0 / r_count as f64,
        Normalization::Weighted => 1.0,
    };
    let weighted = |per: &[f64]| {
        scale
            * per
                .iter()
                .zip(&params.weights)
                .map(|(x, w)| x * w)
                .sum::<f64>()
    };
    let utilization = weighted(&u_r);
    let fairness = weighted(&f_r);
    Ok(FmuEvaluation {
        utilization,
        fairness,
        cost: fmu_cost(utilization, fairness),
        utilization_per_resource: u_r,
        fairness_per_resource: f_r,
        allocations,
        states,
    })
}

/// §3.6's black-box hungry detection for one host and one resource: when the host's load
/// reaches `tolerance`·Q, the VMs receiving at least `tolerance`·V_MAX are hungry. The thesis
/// suggests 0.95 for the Xen credit scheduler's inexactness.
pub fn detect_hungry(capacity: f64, usage: &[f64], tolerance: f64) -> Vec<bool> {
    let load: f64 = usage.iter().sum();
    let max = usage.iter().copied().fold(0.0, f64::max);
    if load < tolerance * capacity || max <= 0.0 {
        return vec![false; usage.len()];
    }
    usage.iter().map(|u| *u >= tolerance * max).collect()
}

#[cfg(test)]
#[path = "fmu_model_tests.rs"]
mod tests;
