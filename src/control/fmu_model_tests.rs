use super::*;

const EPS: f64 = 1e-12;

/// Table 3.1: (CPU units, network TX units) per VM, on two PMs of 10 units each.
fn fig_3_2() -> FmuProblem {
    FmuProblem {
        capacities: vec![vec![10.0, 10.0]; 2],
        desires: vec![
            vec![12.0, 10.0],
            vec![11.0, 15.0],
            vec![5.0, 1.0],
            vec![6.0, 2.0],
        ],
        max_alloc: vec![None, None],
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn hungry_level_follows_the_printed_water_filling() {
    // Fig. 3.2 a, network TX on PM1: VM3 takes 1, VM1 and VM2 share the other 9.
    assert!(close(hungry_level(10.0, &[10.0, 15.0, 1.0], None), 4.5));
    // Desire equal to hl stops the loop: the VM is satisfied at its desire.
    assert!(close(hungry_level(10.0, &[12.0, 5.0], None), 5.0));
    // max_alloc caps the share (one core of a four-core host).
    assert!(close(hungry_level(40.0, &[30.0], Some(10.0)), 10.0));
    assert!(close(hungry_level(10.0, &[], None), 10.0));
}

#[test]
fn pseudo_hungry_example_of_section_3_4() {
    // Two PMs of 100, three VMs of 75: two share the first, the third is pseudo-hungry.
    let problem = FmuProblem {
        capacities: vec![vec![100.0]; 2],
        desires: vec![vec![75.0]; 3],
        max_alloc: vec![None],
    };
    let eval = evaluate(&problem, &[0, 0, 1], &FmuParams::equal(1)).unwrap();
    assert_eq!(eval.states[0][0], VmState::Hungry);
    assert_eq!(eval.states[1][0], VmState::Hungry);
    assert_eq!(eval.states[2][0], VmState::PseudoHungry);
    assert!(close(eval.allocations[0][0], 50.0));
    assert!(close(eval.utilization, 175.0 / 200.0));
    assert!(close(
        eval.fairness,
        175.0f64.powi(2) / (3.0 * (2500.0 * 2.0 + 5625.0))
    ));
}

/// Fig. 3.2's four placements with the thesis' verdicts (docs/fmu.md §3 derives each value).
#[test]
fn fig_3_2_placements_give_the_thesis_u_and_f() {
    let problem = fig_3_2();
    let weighted = FmuParams::equal(2);
    // a: VM1, VM2, VM3 on PM1, VM4 on PM2: neither full nor fair (VM4 pseudo-hungry on CPU).
    let a = evaluate(&problem, &[0, 0, 0, 1], &weighted).unwrap();
    assert!(close(a.utilization_per_resource[0], 0.8));
    assert!(close(a.utilization_per_resource[1], 0.6));
    assert_eq!(a.states[3][0], VmState::PseudoHungry);
    assert!(close(a.fairness_per_resource[0], 12.0 / 13.0));
    assert!(close(a.fairness_per_resource[1], 1.0));
    assert!(close(a.utilization, 0.7));
    assert!(close(a.fairness, 25.0 / 26.0));
    // b: VM1+VM2 | VM3+VM4: CPU full, TX not; perfectly fair.
    let b = evaluate(&problem, &[0, 0, 1, 1], &weighted).unwrap();
    assert!(close(b.utilization_per_resource[0], 1.0));
    assert!(close(b.utilization_per_resource[1], 0.65));
    assert!(close(b.fairness, 1.0));
    assert_eq!(b.states[2][0], VmState::Satisfied);
    assert_eq!(b.states[3][0], VmState::Hungry);
    // c: VM1+VM3+VM4 | VM2: full, unfair (VM2 gets 10 CPU vs 10/3; 10 TX vs VM1's 7).
    let c = evaluate(&problem, &[0, 1, 0, 0], &weighted).unwrap();
    assert!(close(c.utilization, 1.0));
    assert!(close(c.allocations[0][1], 7.0));
    assert!(close(c.fairness_per_resource[0], 0.75));
    assert!(close(c.fairness_per_resource[1], 289.0 / 298.0));
    // d: VM1+VM3 | VM2+VM4: full, only slightly unfair (TX 9 vs 8): the best of the four.
    let d = evaluate(&problem, &[0, 1, 0, 1], &weighted).unwrap();
    assert!(close(d.utilization, 1.0));
    assert!(close(d.allocations[0][1], 9.0));
    assert!(close(d.allocations[1][1], 8.0));
    assert!(close(d.fairness_per_resource[0], 1.0));
    assert!(close(d.fairness, (1.0 + 289.0 / 290.0) / 2.0));
    let costs = [a.cost, b.cost, c.cost, d.cost];
    assert!(costs.iter().all(|cost| d.cost <= *cost));
    assert!(d.cost > 0.0 && d.cost < 1e-2);
}

#[test]
fn literal_reading_caps_u_and_f_at_one_over_r() {
    let problem = fig_3_2();
    let literal = FmuParams {
        weights: vec![0.5, 0.5],
        normalization: Normalization::Literal,
    };
    let d = evaluate(&problem, &[0, 1, 0, 1], &literal).unwrap();
    assert!(close(d.utilization, 0.5));
    let b = evaluate(&problem, &[0, 0, 1, 1], &literal).unwrap();
    assert!(close(b.fairness, 0.5));
    // With one resource the two readings agree (chapter 4 is CPU only).
    let single = FmuProblem {
        capacities: vec![vec![100.0]; 2],
        desires: vec![vec![75.0]; 3],
        max_alloc: vec![None],
    };
    let lit = FmuParams {
        weights: vec![1.0],
        normalization: Normalization::Literal,
    };
    let x = evaluate(&single, &[0, 0, 1], &lit).unwrap();
    let y = evaluate(&single, &[0, 0, 1], &FmuParams::equal(1)).unwrap();
    assert_eq!(x.cost, y.cost);
}

/// Theorem 3.4.1's reduction: 3M integers summing to MB plus M hungry VMs of MB + 2 on M PMs
/// of MB + 1. Every assignment is tried: cost 0 exactly when it realises a partition.
fn three_partition(set: &[f64], m: usize, b: f64) -> (bool, bool) {
    let big = m as f64 * b;
    let mut desires: Vec<Vec<f64>> = set.iter().map(|x| vec![*x]).collect();
    desires.extend((0..m).map(|_| vec![big + 2.0]));
    let problem = FmuProblem {
        capacities: vec![vec![big + 1.0]; m],
        desires,
        max_alloc: vec![None],
    };
    let vms = problem.desires.len();
    let mut any_zero = false;
    let mut iff_holds = true;
    for code in 0..m.pow(vms as u32) {
        let assignment: Vec<usize> = (0..vms).map(|i| code / m.pow(i as u32) % m).collect();
        let cost = evaluate(&problem, &assignment, &FmuParams::equal(1))
            .unwrap()
            .cost;
        let is_partition = (0..m).all(|host| {
            let hungry = (set.len()..vms)
                .filter(|vm| assignment[*vm] == host)
                .count();
            let sum: f64 = (0..set.len())
                .filter(|i| assignment[*i] == host)
                .map(|i| set[i])
                .sum();
            hungry == 1 && (sum - b).abs() < EPS
        });
        any_zero |= cost < EPS;
        iff_holds &= (cost < EPS) == is_partition;
    }
    (any_zero, iff_holds)
}

#[test]
fn three_partition_instance_has_cost_zero_exactly_when_a_partition_exists() {
    // B = 20, every element in (5, 10): {6, 7, 7} and {6, 6, 8}.
    let (zero, iff) = three_partition(&[6.0, 7.0, 6.0, 7.0, 6.0, 8.0], 2, 20.0);
    assert!(zero && iff);
    // {6, 6, 6, 6, 7, 9} sums to 40 but no three of them make 20.
    let (zero, iff) = three_partition(&[6.0, 6.0, 6.0, 6.0, 7.0, 9.0], 2, 20.0);
    assert!(!zero && iff);
}

#[test]
fn detect_hungry_marks_the_top_consumers_of_a_full_host() {
    let usage = [384.0, 384.0, 380.0, 384.0, 384.0, 213.0];
    assert_eq!(
        detect_hungry(2133.0, &usage, 0.95),
        vec![true, true, true, true, true, false]
    );
    // A host below 0.95 Q has no hungry VM.
    assert!(detect_hungry(2133.0, &[213.0; 6], 0.95).iter().all(|h| !h));
}

#[test]
fn bad_input_is_named() {
    let problem = fig_3_2();
    let err = evaluate(&problem, &[0, 0, 9, 1], &FmuParams::equal(2)).unwrap_err();
    assert!(err.to_string().contains("assignment[2]"), "{err}");
    let weights = FmuParams {
        weights: vec![0.7, 0.7],
        normalization: Normalization::Weighted,
    };
    let err = evaluate(&problem, &[0, 0, 1, 1], &weights).unwrap_err();
    assert!(err.to_string().contains("weights"), "{err}");
    let mut nan = fig_3_2();
    nan.desires[1][0] = f64::NAN;
    let err = evaluate(&nan, &[0, 0, 1, 1], &FmuParams::equal(2)).unwrap_err();
    assert!(err.to_string().contains("desires[1]"), "{err}");
}
