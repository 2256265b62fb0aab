//! End-to-end tests of the pipeline: filters, ranking, pick, alternates and rejection.

use super::*;
use crate::domain::{HostScan, HostState, RequestContext, Resources};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Hosts of capacity 100 in every class, with the given VCPU usage (other classes at 0).
fn hosts_with_vcpu_used(used: &[i64]) -> Vec<HostState> {
    let cap = Resources::new(100, 100, 100);
    let ids = 1..;
    ids.zip(used)
        .map(|(id, &u)| HostState::synthetic(id, cap, Resources::new(u, 0, 0)))
        .collect()
}

fn req(vcpu: i64) -> RequestContext {
    RequestContext::with_demand("inst-1", "f", Resources::new(vcpu, 1, 1))
}

fn policy(algorithm: Algorithm, host_subset_size: usize) -> Policy {
    let cfg = PolicyConfig {
        algorithm,
        host_subset_size,
        ..PolicyConfig::default()
    };
    Policy::from_config(&cfg).unwrap()
}

/// The ranking of `r` in `env` for at most `max` candidates.
fn args<'a>(r: &'a RequestContext, env: &'a FilterEnv, max: usize) -> RankArgs<'a> {
    RankArgs { req: r, env, max }
}

fn rank(
    p: &Policy,
    hosts: &[HostState],
    r: &RequestContext,
    seed: u64,
    max: usize,
) -> Result<Vec<usize>, Rejection> {
    let env = FilterEnv::without_heartbeats();
    let mut out = Vec::new();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let got = p
        .rank(hosts, args(r, &env, max), &mut rng, &mut out)
        .map(|()| out);
    // The scan over the table's dense rows answers the same, every time.
    assert_eq!(scan(p, hosts, r, &env, seed, max), got, "rank_scan");
    got
}

/// [`Policy::rank_scan`] over the rows of `hosts`.
fn scan(
    p: &Policy,
    hosts: &[HostState],
    r: &RequestContext,
    env: &FilterEnv,
    seed: u64,
    max: usize,
) -> Result<Vec<usize>, Rejection> {
    let rows: Vec<HostScan> = hosts.iter().map(HostScan::of).collect();
    let mut out = Vec::new();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    p.rank_scan(
        ScanView::new(hosts, &rows),
        args(r, env, max),
        &mut rng,
        &mut out,
    )
    .map(|()| out)
}

/// The scan over dense rows and the generic pipeline agree on varied hosts (down, disabled,
/// forced down, stale, full, unit rules, traits, another zone) for every algorithm, tie
/// break, request kind and answer size, rejections included.
/// 300 varied hosts (down, disabled, forced down, stale, full, unit rules, traits, another
/// zone), heard from around `now`.
fn varied_hosts(now: i64) -> Vec<HostState> {
    use crate::domain::{ClassId, Inventory, Mark, TraitId};
    use rand::Rng;
    let mut g = ChaCha8Rng::seed_from_u64(42);
    let vgpu = ClassId::intern("VGPU").unwrap();
    let gold = TraitId::intern("CUSTOM_SCAN_TEST_GOLD");
    (1..=300)
        .map(|id| {
            let cap = Resources::new(16, 4096, 100);
            let used = Resources::new(
                g.gen_range(0..=16),
                g.gen_range(0..=4096),
                g.gen_range(0..=100),
            );
            let mut h = HostState::synthetic(id, cap, used);
            h.up = g.gen_bool(0.95);
            h.disabled = g.gen_bool(0.05);
            h.forced_down = g.gen_bool(0.02);
            h.last_seen_ms = if g.gen_bool(0.05) {
                0
            } else {
                now - g.gen_range(0..70_000)
            };
            h.num_io_ops = g.gen_range(0..5);
            h.num_instances = g.gen_range(0..9);
            if g.gen_bool(0.1) {
                let mut inv = h.profile.inventories.clone();
                inv[0].1.step_size = 2;
                inv.push((vgpu, Inventory::of(g.gen_range(0..3))));
                *h.profile_mut() = crate::domain::HostProfile::new("x", "x", "u", "nova", inv);
                h.profile_mut().host = format!("host{id}").into();
            }
            if g.gen_bool(0.15) {
                // Allocation ratios and reserved amounts: the weighers' free amounts (Nova's)
                // are not the room left, and the scan reads them from the host.
                let name = format!("host{id}");
                let inv = vec![
                    (
                        ClassId::VCPU,
                        Inventory::of(16).with(g.gen_range(0..3), 1.5),
                    ),
                    (ClassId::MEMORY_MB, Inventory::of(4096).with(512, 1.25)),
                    (ClassId::DISK_GB, Inventory::of(100).with(4, 1.0)),
                ];
                let profile = crate::domain::HostProfile::new(&name, &name, "u", "nova", inv);
                assert!(!profile.weigh_base.row_exact);
                *h.profile_mut() = profile;
            }
            if g.gen_bool(0.3) {
                h.profile_mut().traits = crate::domain::Traits::new([gold]);
            }
            if g.gen_bool(0.2) {
                h.profile_mut().availability_zone = "az2".into();
            }
            h
        })
        .collect()
}

#[test]
fn the_scan_over_rows_answers_as_the_pipeline_does() {
    use crate::domain::{ClassId, Mark, TraitId};
    let now = 1_000_000;
    let hosts = varied_hosts(now);
    let edits: [(&str, RequestEdit); 7] = [
        ("plain", |_| {}),
        ("two vcpu", |r| r.demand = Resources::new(2, 512, 10)),
        ("vgpu beyond the row", |r| {
            r.demand.set(ClassId::intern("VGPU").unwrap(), 1)
        }),
        ("required trait", |r| {
            r.query.required_traits = vec![TraitId::intern("CUSTOM_SCAN_TEST_GOLD")]
        }),
        ("zone", |r| r.availability_zone = Some("az2".into())),
        ("ignored host", |r| r.ignore_hosts = vec!["host3".into()]),
        ("too big", |r| r.demand = Resources::new(64, 1, 1)),
    ];
    let envs = [
        FilterEnv::without_heartbeats(),
        FilterEnv {
            now_ms: now,
            host_timeout_ms: 60_000,
        },
    ];
    let mut checked = 0;
    for algorithm in [
        Algorithm::Nova,
        Algorithm::WorstFit,
        Algorithm::FirstFit,
        Algorithm::Random,
        Algorithm::Adaptive,
        Algorithm::Ffr,
    ] {
        for tie_break in [TieBreak::HostOrder, TieBreak::Random] {
            for subset in [1, 3] {
                let cfg = PolicyConfig {
                    algorithm,
                    host_subset_size: subset,
                    tie_break,
                    num_instances_weight_multiplier: -0.5,
                    ..PolicyConfig::default()
                };
                let p = Policy::from_config(&cfg).unwrap();
                for (name, edit) in &edits {
                    let mut r = req(1);
                    edit(&mut r);
                    for env in &envs {
                        for (seed, max) in [(0, 0), (1, 1), (2, 3), (3, 50), (4, 400)] {
                            let mut out = Vec::new();
                            let mut rng = ChaCha8Rng::seed_from_u64(seed);
                            let want = p
                                .rank(&hosts, args(&r, env, max), &mut rng, &mut out)
                                .map(|()| out);
                            let got = scan(&p, &hosts, &r, env, seed, max);
                            assert_eq!(
                                got, want,
                                "{algorithm:?} {tie_break:?} ℓ={subset} {name} {env:?} max {max}"
                            );
                            checked += usize::from(want.is_ok());
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 500, "most cases place: {checked}");
}

#[test]
fn nova_default_spreads_and_lists_alternates_in_weight_order() {
    let hosts = hosts_with_vcpu_used(&[50, 10, 90, 30]);
    let out = rank(&policy(Algorithm::Nova, 1), &hosts, &req(1), 0, 3).unwrap();
    assert_eq!(out, [1, 3, 0]);
}

#[test]
fn max_bounds_the_answer_and_filtered_hosts_never_appear() {
    // Host at index 2 cannot fit 20 VCPU.
    let hosts = hosts_with_vcpu_used(&[50, 10, 90, 30]);
    let p = policy(Algorithm::Nova, 1);
    let cases: [(usize, &[usize]); 4] = [(0, &[]), (1, &[1]), (2, &[1, 3]), (10, &[1, 3, 0])];
    for (max, want) in cases {
        assert_eq!(
            rank(&p, &hosts, &req(20), 0, max).unwrap(),
            want,
            "max={max}"
        );
    }
}

#[test]
fn equal_weights_keep_host_order() {
    let hosts = hosts_with_vcpu_used(&[5, 5, 5, 5]);
    assert_eq!(
        rank(&policy(Algorithm::Nova, 1), &hosts, &req(1), 0, 4).unwrap(),
        [0, 1, 2, 3]
    );
}

/// A host over its capacity in a class the request does not ask for passes, and weighs there
/// as Nova's `minval` says: its negative free amount counts as 0, tied with a full host (the
/// scan reads rows before that raise and raises the column afterwards; `rank` checks that the
/// scan answers as the pipeline does).
#[test]
fn free_amounts_below_minval_weigh_as_minval() {
    let p = policy(Algorithm::Nova, 1);
    let vcpu_only = RequestContext::with_demand("inst-1", "f", Resources::new(1, 0, 0));
    let hosts_with_memory_used = |used: &[i64]| -> Vec<HostState> {
        let cap = Resources::new(100, 100, 100);
        let ids = 1..;
        ids.zip(used)
            .map(|(id, &u)| HostState::synthetic(id, cap, Resources::new(0, u, 0)))
            .collect()
    };
    // Free memory −30, 0, 100, −60: 0, 0, 100, 0 to RAMWeigher, ties in host order.
    let hosts = hosts_with_memory_used(&[130, 100, 0, 160]);
    assert!(hosts[0].profile.weigh_base.row_exact);
    assert_eq!(rank(&p, &hosts, &vcpu_only, 0, 4).unwrap(), [2, 0, 1, 3]);
    // Every host over its memory: all 0, the column adds nothing.
    let hosts = hosts_with_memory_used(&[130, 160, 110]);
    assert_eq!(rank(&p, &hosts, &vcpu_only, 0, 3).unwrap(), [0, 1, 2]);
}

#[test]
fn negative_multiplier_inverts_a_weigher() {
    let mut hosts = hosts_with_vcpu_used(&[0, 0, 0]);
    for (h, io) in hosts.iter_mut().zip([5, 0, 9]) {
        h.num_io_ops = io;
    }
    let cfg = PolicyConfig {
        weight_classes: vec!["IoOpsWeigher".into()],
        ..PolicyConfig::default()
    };
    let idle_first = Policy::from_config(&cfg).unwrap();
    assert_eq!(rank(&idle_first, &hosts, &req(1), 0, 3).unwrap(), [1, 0, 2]);
    let busy_first = Policy::from_config(&PolicyConfig {
        io_ops_weight_multiplier: 1.0,
        ..cfg
    })
    .unwrap();
    assert_eq!(rank(&busy_first, &hosts, &req(1), 0, 3).unwrap(), [2, 0, 1]);
}

#[test]
fn pick_is_uniform_among_the_top_host_subset_size() {
    // Weight order: 4, 3, 2, 1, 0 (emptiest first).
    let hosts = hosts_with_vcpu_used(&[40, 30, 20, 10, 0]);
    let p = policy(Algorithm::Nova, 3);
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let mut counts = [0u32; 5];
    let mut out = Vec::new();
    for _ in 0..3000 {
        let env = FilterEnv::without_heartbeats();
        p.rank(&hosts, args(&req(1), &env, 3), &mut rng, &mut out)
            .unwrap();
        counts[out[0]] += 1;
        let mut rest = [4, 3, 2, 1, 0].into_iter().filter(|i| *i != out[0]);
        assert_eq!(
            out[1..],
            [rest.next().unwrap(), rest.next().unwrap()],
            "alternates in weight order"
        );
    }
    assert_eq!(counts[0] + counts[1], 0, "{counts:?}");
    for c in &counts[2..] {
        assert!((900..1100).contains(c), "{counts:?}");
    }
}

#[test]
fn a_seed_reproduces_the_ranking() {
    let hosts = hosts_with_vcpu_used(&[40, 30, 20, 10, 0, 7, 7, 7]);
    for algorithm in [Algorithm::Nova, Algorithm::Random, Algorithm::Wfr] {
        let p = policy(algorithm, 4);
        let a = rank(&p, &hosts, &req(1), 9, 5).unwrap();
        assert_eq!(a, rank(&p, &hosts, &req(1), 9, 5).unwrap(), "{algorithm:?}");
    }
}

#[test]
fn random_is_uniform_among_hosts_that_pass() {
    let hosts = hosts_with_vcpu_used(&[0, 95, 50, 10]);
    let p = policy(Algorithm::Nova, 1).with_algorithm(Algorithm::Random);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut counts = [0u32; 4];
    let mut out = Vec::new();
    for _ in 0..3000 {
        let env = FilterEnv::without_heartbeats();
        p.rank(&hosts, args(&req(10), &env, 3), &mut rng, &mut out)
            .unwrap();
        counts[out[0]] += 1;
        let mut sorted = out.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [0, 2, 3], "every passing host once");
    }
    assert_eq!(counts[1], 0);
    for i in [0, 2, 3] {
        assert!((900..1100).contains(&counts[i]), "{counts:?}");
    }
}

#[test]
fn named_algorithms_pick_by_their_rule() {
    // vcpu used per host (capacity 100); ids 1..=4 in this order.
    let hosts = hosts_with_vcpu_used(&[60, 20, 80, 40]);
    let cases = [
        (Algorithm::WorstFit, 1),
        (Algorithm::BestFit, 2),
        (Algorithm::FirstFit, 0),
        (Algorithm::Adaptive, 1),
    ];
    for (algorithm, want) in cases {
        let out = rank(&policy(algorithm, 1), &hosts, &req(10), 0, 1).unwrap();
        assert_eq!(out, [want], "{algorithm:?}");
    }
}

#[test]
fn adaptive_switches_to_first_fit_at_sixty_percent() {
    // The least-loaded host's load (max over classes, before placement) decides.
    let cases: [(&[i64], usize); 4] = [
        (&[70, 40, 60], 1),  // least-loaded 0.4: worst fit
        (&[90, 90, 40], 2),  // cloud at 0.73 but one host at 0.4: still worst fit
        (&[70, 60, 70], 0),  // least-loaded 0.6: first fit
        (&[96, 60, 100], 1), // first fit skips the hosts that cannot fit
    ];
    for (used, want) in cases {
        let out = rank(
            &policy(Algorithm::Adaptive, 1),
            &hosts_with_vcpu_used(used),
            &req(5),
            0,
            1,
        )
        .unwrap();
        assert_eq!(out, [want], "{used:?}");
    }
}

#[test]
fn dist_from_diag_picks_the_host_closest_to_the_diagonal_after_placement() {
    let cap = Resources::new(100, 100, 100);
    let hosts = [
        HostState::synthetic(1, cap, Resources::new(10, 10, 10)),
        HostState::synthetic(2, cap, Resources::new(0, 40, 40)),
        HostState::synthetic(3, cap, Resources::new(40, 0, 0)),
    ];
    let r = RequestContext::with_demand("i", "f", Resources::new(40, 0, 0));
    let out = rank(&policy(Algorithm::DistFromDiag, 1), &hosts, &r, 0, 3).unwrap();
    assert_eq!(out, [1, 0, 2]);
}

#[test]
fn ffr_and_wfr_pick_among_the_top_five() {
    let hosts = hosts_with_vcpu_used(&[90, 80, 70, 60, 50, 40, 30, 20, 10, 0]);
    let cases = [(Algorithm::Ffr, 0..5), (Algorithm::Wfr, 5..10)];
    for (algorithm, top) in cases {
        let p = policy(algorithm, 1);
        let mut seen = [false; 10];
        for seed in 0..200 {
            seen[rank(&p, &hosts, &req(1), seed, 1).unwrap()[0]] = true;
        }
        let picked: Vec<usize> = (0..10).filter(|i| seen[*i]).collect();
        assert_eq!(picked, top.collect::<Vec<_>>(), "{algorithm:?}");
    }
}

#[test]
fn rejection_names_the_filter_that_returned_no_host() {
    let mut hosts = hosts_with_vcpu_used(&[99, 95, 0]);
    hosts[2].disabled = true;
    let err = rank(&policy(Algorithm::Nova, 1), &hosts, &req(10), 0, 3).unwrap_err();
    // Placement's candidate test (CapacityFilter) runs first, as in Nova: it keeps the empty
    // host, which ComputeFilter then removes.
    assert_eq!(err.filter(), Some("ComputeFilter"));
    assert_eq!(err.hosts, 3);
    assert!(err.removed.contains(&("CapacityFilter", 2)), "{err:?}");
    assert!(err.removed.contains(&("ComputeFilter", 1)), "{err:?}");
    assert!(
        err.reason()
            .contains("Filter ComputeFilter returned 0 hosts"),
        "{}",
        err.reason()
    );
    let none = rank(&policy(Algorithm::Nova, 1), &[], &req(1), 0, 3).unwrap_err();
    assert_eq!(none.filter(), None);
}

#[test]
fn fits_any_requires_every_filter() {
    let p = policy(Algorithm::Random, 1);
    let env = FilterEnv::without_heartbeats();
    let mut host = hosts_with_vcpu_used(&[50]).remove(0);
    assert!(p.fits_any(&host, &req(50), &env));
    assert!(!p.fits_any(&host, &req(51), &env));
    host.forced_down = true;
    assert!(!p.fits_any(&host, &req(1), &env));
}

#[test]
fn from_config_refuses_bad_settings() {
    let cases = [
        (
            PolicyConfig {
                host_subset_size: 0,
                ..PolicyConfig::default()
            },
            "host_subset_size",
        ),
        (
            PolicyConfig {
                ram_weight_multiplier: f64::NAN,
                ..PolicyConfig::default()
            },
            "RAMWeigher",
        ),
        (
            PolicyConfig {
                enabled_filters: vec!["RetryFilter".into()],
                ..PolicyConfig::default()
            },
            "RetryFilter",
        ),
        (
            PolicyConfig {
                weight_classes: vec!["RAMWeigher".into(), "RAMWeigher".into()],
                ..PolicyConfig::default()
            },
            "RAMWeigher",
        ),
    ];
    for (cfg, offender) in cases {
        let err = Policy::from_config(&cfg).unwrap_err();
        assert!(err.to_string().contains(offender), "{err}");
    }
}

/// Nova's `[metrics] required` fails a request when `MetricsWeigher` meets a host lacking a
/// metric (its `test_metric_not_found_required` raises): refused unless `MetricsFilter`
/// removes such hosts first, or `required` is false.
#[test]
fn metrics_required_needs_the_metrics_filter() {
    let cfg =
        |filters: &[&str], weighers: &[&str], required: bool, setting: &[&str]| PolicyConfig {
            enabled_filters: filters.iter().map(|s| s.to_string()).collect(),
            weight_classes: weighers.iter().map(|s| s.to_string()).collect(),
            metrics_required: required,
            metrics_weight_setting: setting.iter().map(|s| s.to_string()).collect(),
            ..PolicyConfig::default()
        };
    let err = Policy::from_config(&cfg(
        &["ComputeFilter"],
        &["all_weighers"],
        true,
        &["cpu.percent=-1"],
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains("metrics_required"), "{err}");
    assert!(err.contains("MetricsFilter"), "{err}");
    assert!(err.contains("ComputeHostMetricNotFound"), "{err}");
    for ok in [
        cfg(
            &["MetricsFilter"],
            &["MetricsWeigher"],
            true,
            &["cpu.percent=-1"],
        ),
        cfg(
            &["ComputeFilter"],
            &["MetricsWeigher"],
            false,
            &["cpu.percent=-1"],
        ),
        cfg(&["ComputeFilter"], &["MetricsWeigher"], true, &[]),
        cfg(
            &["ComputeFilter"],
            &["RAMWeigher"],
            true,
            &["cpu.percent=-1"],
        ),
    ] {
        Policy::from_config(&ok).unwrap();
    }
}

/// `rank` over 1,000 hosts allocates nothing per host: after a first call has sized the
/// scratch buffers, a second call grows none of them (timing belongs to benchmarks).
#[test]
fn ranking_a_thousand_hosts_reuses_its_buffers() {
    let used: Vec<i64> = (0..1000).map(|i| (i * 37) % 100).collect();
    let hosts = hosts_with_vcpu_used(&used);
    let p = policy(Algorithm::Nova, 2);
    let mut scratch = RankScratch::default();
    let mut out = Vec::with_capacity(3);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let env = FilterEnv::without_heartbeats();
    p.rank_with(
        &mut scratch,
        &hosts,
        args(&req(1), &env, 3),
        &mut rng,
        &mut out,
    )
    .unwrap();
    let capacities = scratch.capacities();
    p.rank_with(
        &mut scratch,
        &hosts,
        args(&req(2), &env, 3),
        &mut rng,
        &mut out,
    )
    .unwrap();
    assert_eq!(scratch.capacities(), capacities);
    assert_eq!(out.capacity(), 3);
}

#[test]
fn soft_group_weighers_steer_members_under_the_default_weighers() {
    use crate::domain::{GroupPolicy, ServerGroup};
    let hosts = hosts_with_vcpu_used(&[0, 0, 0]);
    let group = |group_policy| {
        ServerGroup::from_member_hosts(group_policy, &["host1", "host1", "host3"], 1)
    };
    let cases = [
        (GroupPolicy::SoftAntiAffinity, [1, 2, 0]),
        (GroupPolicy::SoftAffinity, [0, 2, 1]),
    ];
    for (group_policy, want) in cases {
        let mut r = req(1);
        r.group = Some(group(group_policy));
        assert_eq!(
            rank(&policy(Algorithm::Nova, 1), &hosts, &r, 0, 3).unwrap(),
            want,
            "{group_policy:?}"
        );
    }
}

/// A change to a request.
type RequestEdit = fn(&mut RequestContext);

/// Edits of a request, each adding one constraint a filter or weigher may read, by name.
fn constrained_requests() -> Vec<(&'static str, RequestEdit)> {
    use crate::domain::{Destination, GroupPolicy, ServerGroup};
    fn group(policy: GroupPolicy) -> Option<ServerGroup> {
        Some(ServerGroup::from_member_hosts(
            policy,
            &["host2", "host2", "host4"],
            1,
        ))
    }
    fn empty_group(policy: GroupPolicy) -> Option<ServerGroup> {
        Some(ServerGroup::new(policy, vec![], 1))
    }
    fn hints(
        edit: impl FnOnce(&mut crate::domain::SchedulerHints),
    ) -> Option<std::sync::Arc<crate::domain::SchedulerHints>> {
        let mut h = crate::domain::SchedulerHints::default();
        edit(&mut h);
        Some(std::sync::Arc::new(h))
    }
    let edits: Vec<(&'static str, RequestEdit)> = vec![
        ("plain", |_| {}),
        ("forced host", |r| r.force_hosts = vec!["HOST2".into()]),
        ("forced node", |r| r.force_nodes = vec!["host3".into()]),
        ("ignored host", |r| r.ignore_hosts = vec!["host1".into()]),
        ("zone", |r| r.availability_zone = Some("az2".into())),
        ("destination host", |r| {
            r.requested_destination = Some(Destination {
                host: Some("host1".into()),
                node: None,
                cell: None,
            })
        }),
        ("destination node", |r| {
            r.requested_destination = Some(Destination {
                host: None,
                node: Some("host2".into()),
                cell: None,
            })
        }),
        ("empty destination", |r| {
            r.requested_destination = Some(Destination {
                host: None,
                node: None,
                cell: None,
            })
        }),
        ("affinity", |r| r.group = group(GroupPolicy::Affinity)),
        ("first affinity member", |r| {
            r.group = empty_group(GroupPolicy::Affinity)
        }),
        ("anti-affinity", |r| {
            r.group = group(GroupPolicy::AntiAffinity)
        }),
        ("soft affinity", |r| {
            r.group = group(GroupPolicy::SoftAffinity)
        }),
        ("soft anti-affinity", |r| {
            r.group = group(GroupPolicy::SoftAntiAffinity)
        }),
        ("different host", |r| {
            r.hints = hints(|h| h.different_host = Some(["host2".to_string()].into()))
        }),
        ("same host", |r| {
            r.hints = hints(|h| h.same_host = Some(["host1".to_string()].into()))
        }),
        ("query", |r| {
            r.hints = hints(|h| h.query = Some(Ok(serde_json::json!(["=", "$host", "host1"]))))
        }),
    ];
    edits
}

/// A filter that says it does not restrict a request must pass every host for it, and a
/// weigher that says it does not vary must give every host the same value: otherwise skipping
/// them would change Nova's answer.
#[test]
fn filters_and_weighers_skipped_for_a_request_cannot_change_its_answer() {
    use crate::policy::registry::{builtin_filters, builtin_weighers};
    let mut hosts = hosts_with_vcpu_used(&[0, 40, 80, 100]);
    hosts[1].profile_mut().availability_zone = "az2".into();
    hosts[2].up = false;
    hosts[3].disabled = true;
    let edits = constrained_requests();
    let cfg = PolicyConfig::default();
    let filters = builtin_filters()
        .build(&["all_filters".into()], &cfg)
        .unwrap();
    let weighers = builtin_weighers()
        .build(&["all_weighers".into()], &cfg)
        .unwrap();
    let env = FilterEnv::without_heartbeats();
    let (mut restricted, mut varied) = (0, 0);
    for (name, edit) in &edits {
        let mut r = req(1);
        edit(&mut r);
        for f in &filters {
            if f.restricts(&r) {
                restricted += 1;
            } else {
                let all = hosts.iter().all(|h| f.passes(h, &r, &env));
                assert!(all, "{} skipped for {name} but removes a host", f.name());
            }
        }
        for w in &weighers {
            if w.varies(&r) {
                varied += 1;
            } else {
                let first = w.weigh(&hosts[0], &r);
                let same = hosts.iter().all(|h| w.weigh(h, &r) == first);
                assert!(
                    same,
                    "{} skipped for {name} but tells hosts apart",
                    w.name()
                );
            }
        }
    }
    // Each request with a constraint makes its filter (or weigher) run; capacity, compute
    // and the four I/O and instance limits run for every request.
    assert_eq!(restricted, 6 * edits.len() + 11, "restricting filters");
    // The five resource and three node-record weighers vary for every request.
    assert_eq!(varied, 8 * edits.len() + 2, "varying weighers");
}

fn random_ties(algorithm: Algorithm) -> Policy {
    Policy::from_config(&PolicyConfig {
        algorithm,
        tie_break: TieBreak::Random,
        ..PolicyConfig::default()
    })
    .unwrap()
}

/// How often each host index appears in `out[range]` over `draws` rankings.
fn appearances(
    p: &Policy,
    hosts: &[HostState],
    max: usize,
    range: std::ops::Range<usize>,
    draws: usize,
    check: impl Fn(&[usize]),
) -> Vec<u32> {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut counts = vec![0u32; hosts.len()];
    let mut out = Vec::new();
    let env = FilterEnv::without_heartbeats();
    for _ in 0..draws {
        p.rank(hosts, args(&req(1), &env, max), &mut rng, &mut out)
            .unwrap();
        check(&out);
        for &i in &out[range.clone()] {
            counts[i] += 1;
        }
    }
    counts
}

#[test]
fn random_tie_break_picks_uniformly_among_equal_best_hosts() {
    // worst_fit: hosts 0, 1, 2 tie for best, host 3 is fuller.
    let hosts = hosts_with_vcpu_used(&[5, 5, 5, 9]);
    assert_eq!(
        rank(&policy(Algorithm::WorstFit, 1), &hosts, &req(1), 0, 1).unwrap(),
        [0],
        "host order by default"
    );
    let counts = appearances(
        &random_ties(Algorithm::WorstFit),
        &hosts,
        1,
        0..1,
        3000,
        |_| {},
    );
    assert_eq!(counts[3], 0, "{counts:?}");
    for c in &counts[..3] {
        assert!((900..1100).contains(c), "{counts:?}");
    }
}

#[test]
fn random_tie_break_keeps_the_order_between_unequal_keys() {
    // worst_fit order: {1, 2} (tied), 4, 0, 3.
    let hosts = hosts_with_vcpu_used(&[50, 10, 10, 90, 30]);
    let counts = appearances(
        &random_ties(Algorithm::WorstFit),
        &hosts,
        5,
        0..1,
        2000,
        |out| assert_eq!(out[2..], [4, 0, 3], "{out:?}"),
    );
    assert_eq!(counts[0] + counts[3] + counts[4], 0, "{counts:?}");
    assert!((900..1100).contains(&counts[1]), "{counts:?}");
}

#[test]
fn random_tie_break_samples_uniformly_where_the_cut_splits_a_tie() {
    // worst_fit: host 0 first, then four tied hosts of which two make the top 3.
    let hosts = hosts_with_vcpu_used(&[0, 5, 5, 5, 5]);
    let counts = appearances(
        &random_ties(Algorithm::WorstFit),
        &hosts,
        3,
        1..3,
        4000,
        |out| {
            assert_eq!(out[0], 0, "{out:?}");
            assert_ne!(out[1], out[2], "{out:?}");
        },
    );
    assert_eq!(counts[0], 0, "{counts:?}");
    for c in &counts[1..] {
        assert!((1850..2150).contains(c), "{counts:?}");
    }
}

#[test]
fn random_tie_break_changes_nothing_without_ties() {
    let hosts = hosts_with_vcpu_used(&[40, 30, 20, 10, 0]);
    for algorithm in [Algorithm::WorstFit, Algorithm::FirstFit, Algorithm::Nova] {
        for seed in 0..5 {
            assert_eq!(
                rank(&random_ties(algorithm), &hosts, &req(1), seed, 5).unwrap(),
                rank(&policy(algorithm, 1), &hosts, &req(1), seed, 5).unwrap(),
                "{algorithm:?}"
            );
        }
    }
}

/// `apsr` ranks its sample in place: over the sampled slots of the whole table, the same
/// hosts in the same order as ranking a copy of the sampled hosts with the same seed, the same
/// count of passing hosts, and the same rejection when none passes.
#[test]
fn ranking_a_sample_in_place_answers_as_ranking_its_copy() {
    let used: Vec<i64> = (0..200).map(|i| (i * 37) % 101).collect();
    let table = hosts_with_vcpu_used(&used);
    let rows: Vec<HostScan> = table.iter().map(HostScan::of).collect();
    let p = policy(Algorithm::Nova, 1).with_algorithm(Algorithm::Random);
    let env = FilterEnv::without_heartbeats();
    for seed in 0..20u64 {
        let mut draw = ChaCha8Rng::seed_from_u64(seed);
        let slots: Vec<usize> = rand::seq::index::sample(&mut draw, table.len(), 40).into_vec();
        let copy: Vec<HostState> = slots.iter().map(|&s| table[s].clone()).collect();
        for (vcpu, max) in [(10, 3), (60, 4), (99, 2), (101, 3)] {
            let r = req(vcpu);
            let mut copied = Vec::new();
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let want = p
                .rank(&copy, args(&r, &env, max), &mut rng, &mut copied)
                .map(|()| copied.iter().map(|&i| slots[i]).collect::<Vec<_>>());
            let mut in_place = Vec::new();
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let got = p.rank_uniform_at(
                ScanView::new(&table, &rows),
                &slots,
                args(&r, &env, max),
                &mut rng,
                &mut in_place,
            );
            let passing = copy.iter().filter(|h| p.fits_any(h, &r, &env)).count();
            match (want, got) {
                (Ok(want), Ok(passed)) => {
                    assert_eq!(in_place, want, "seed {seed} vcpu {vcpu}");
                    assert_eq!(passed, passing);
                }
                (Err(want), Err(got)) => assert_eq!(got, want),
                (want, got) => panic!("seed {seed} vcpu {vcpu}: {want:?} against {got:?}"),
            }
        }
    }
}
