//! Experiment B's grid: every (dataset, policy, interval) with fixed refresh, then, per
//! dataset and ASC policy, fresh / Nova caching (60 s) / ASC / a fixed interval equal to ASC's
//! own mean interval.

use super::cli::{datasets, progress, threads, StalenessArgs};
use super::pool::par_map;
use super::report::{DynamicRow, StaleRow};
use super::staleness::{
    run_dynamic, run_fixed_refresh, CacheModel, DynamicOutcome, DynamicSetup, RefreshMode,
    StaleOutcome,
};
use super::SimPolicy;
use crate::datasets::DatasetKind;
use parasol::control::AscParams;
use parasol::policy::Algorithm;

/// Setup of the fixed-interval part, the ASC paper's §III-B: NFV ×10 (4,370 requests) on 279
/// hosts, Google ×1 on 5,995 and Amazon ×1 (1,100 requests) on 126.
pub fn fixed_setup(kind: DatasetKind) -> (usize, usize) {
    match kind {
        DatasetKind::Nfv => (10, 279),
        DatasetKind::Amazon => (1, 126),
        DatasetKind::Google => (1, 5995),
    }
}

/// One ASC comparison: its setup, policy, and the runs behind its rows (ASC's timeline).
#[derive(Clone, Debug)]
pub struct AscRun {
    pub setup: DynamicSetup,
    pub policy: Algorithm,
    pub asc: DynamicOutcome,
}

fn classic(list: &str) -> anyhow::Result<Vec<Algorithm>> {
    SimPolicy::parse_list(list)
        .map_err(anyhow::Error::msg)?
        .into_iter()
        .map(|p| match p {
            SimPolicy::Classic(a) => Ok(a),
            SimPolicy::Apsr => anyhow::bail!("apsr is not a single-scheduler cache policy"),
        })
        .collect()
}

fn interval(s: &str) -> anyhow::Result<Option<u64>> {
    if s == "never" {
        return Ok(None);
    }
    let v: u64 = s
        .parse()
        .map_err(|_| anyhow::anyhow!("bad interval `{s}`"))?;
    anyhow::ensure!(v >= 1, "intervals start at 1 (always fresh)");
    Ok(Some(v))
}

/// Runs experiment B: the fixed-interval rows, the dynamic rows, and ASC's runs.
#[allow(clippy::too_many_lines)]
pub fn staleness_rows(
    args: &StalenessArgs,
) -> anyhow::Result<(Vec<StaleRow>, Vec<DynamicRow>, Vec<AscRun>)> {
    let kinds = datasets(&args.dataset)?;
    let policies = classic(&args.policies)?;
    anyhow::ensure!(
        args.replicas != Some(0) && args.hosts != Some(0),
        "--replicas and --hosts must be at least 1"
    );
    anyhow::ensure!(
        args.lifetime.is_none() || args.departures,
        "--lifetime needs --departures"
    );
    anyhow::ensure!(
        args.lifetime.is_none_or(|l| l.is_finite() && l > 0.0),
        "--lifetime must be a positive number of seconds"
    );
    let setup = |k: DatasetKind| {
        let (replicas, hosts) = if args.departures {
            let d = DynamicSetup::default_for(k);
            (d.replicas, d.hosts)
        } else {
            fixed_setup(k)
        };
        (
            args.replicas.unwrap_or(replicas),
            args.hosts.unwrap_or(hosts),
        )
    };
    let dynamic_setup = |k: DatasetKind| {
        let (replicas, hosts) = setup(k);
        let d = DynamicSetup::default_for(k);
        DynamicSetup {
            replicas,
            hosts,
            lifetime_s: args.lifetime.unwrap_or(d.lifetime_s),
            rate_swing: args.rate_swing,
            ..d
        }
    };
    let intervals = args
        .intervals
        .iter()
        .map(|s| interval(s))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut cells = Vec::new();
    for k in &kinds {
        for p in &policies {
            cells.extend(intervals.iter().map(|i| (*k, *p, *i)));
        }
    }
    let threads = threads(args.threads);
    let bar = progress(cells.len(), args.quiet, "sim staleness");
    let mut order: Vec<usize> = (0..cells.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(setup(cells[i].0).1));
    let model = CacheModel {
        consume_own: args.consume_own,
        tie_break: args.tie_break,
    };
    let seed = args.seed;
    let outcomes = par_map(
        &cells,
        &order,
        threads,
        &|(k, p, i)| {
            if args.departures {
                let o = run_dynamic(&dynamic_setup(*k), *p, with_departures(*i), model, seed);
                StaleOutcome {
                    requests: o.requests,
                    declines: o.declines,
                    refreshes: o.refreshes,
                    queries: o.queries,
                }
            } else {
                let (replicas, hosts) = setup(*k);
                run_fixed_refresh(*k, replicas, hosts, *p, *i, model, seed)
            }
        },
        &|_| bar.inc(1),
    );
    bar.finish_and_clear();
    let fixed = cells
        .iter()
        .zip(&outcomes)
        .map(|((k, p, i), o)| StaleRow {
            dataset: *k,
            hosts: setup(*k).1,
            policy: SimPolicy::Classic(*p),
            interval: *i,
            decline_ratio: o.decline_ratio(),
            queries: o.queries,
        })
        .collect();
    let asc_policies = classic(&args.asc_policies)?;
    anyhow::ensure!(
        (0.0..1.0).contains(&args.rate_swing),
        "--rate-swing must be in [0, 1)"
    );
    let mut runs = Vec::new();
    for k in &kinds {
        let setup = if args.departures {
            dynamic_setup(*k)
        } else {
            DynamicSetup {
                rate_swing: args.rate_swing,
                ..DynamicSetup::default_for(*k)
            }
        };
        runs.extend(asc_policies.iter().map(|p| (setup, *p)));
    }
    let asc_mode = match args.asc_min_requests {
        0 => RefreshMode::Asc(AscParams::default()),
        min_requests => RefreshMode::AscPooled {
            params: AscParams::default(),
            min_requests,
        },
    };
    let bar = progress(runs.len(), args.quiet, "sim asc");
    let order: Vec<usize> = (0..runs.len()).collect();
    let groups = par_map(
        &runs,
        &order,
        threads,
        &|(s, p)| asc_group(s, *p, asc_mode.clone(), model, seed),
        &|_| bar.inc(1),
    );
    bar.finish_and_clear();
    let mut dynamic = Vec::new();
    let mut asc_runs = Vec::new();
    for ((setup, policy), (rows, asc)) in runs.iter().zip(groups) {
        dynamic.extend(rows);
        asc_runs.push(AscRun {
            setup: *setup,
            policy: *policy,
            asc,
        });
    }
    dynamic.extend(figure_mean_rows(&runs, &asc_runs, model, seed, threads));
    Ok((fixed, dynamic, asc_runs))
}

/// ASC's mean interval over every point of the figure (the mean of each run's mean
/// interval), in seconds; 0 without runs.
pub fn figure_mean_interval_s(asc_runs: &[AscRun]) -> f64 {
    if asc_runs.is_empty() {
        return 0.0;
    }
    asc_runs.iter().map(|r| r.asc.mean_interval_s).sum::<f64>() / asc_runs.len() as f64
}

/// Fig. 5b as printed: every point run with one fixed interval, ASC's mean over the whole
/// figure ("a fixed refresh interval of 24 seconds … the same number of cache refreshes on
/// average"), rows of mode `fixed_figure_mean`.
fn figure_mean_rows(
    runs: &[(DynamicSetup, Algorithm)],
    asc_runs: &[AscRun],
    model: CacheModel,
    seed: u64,
    threads: usize,
) -> Vec<DynamicRow> {
    let mean_s = figure_mean_interval_s(asc_runs);
    if runs.is_empty() {
        return Vec::new();
    }
    let mode = RefreshMode::Fixed(((mean_s * 1000.0).round() as u64).max(1));
    let order: Vec<usize> = (0..runs.len()).collect();
    let outcomes = par_map(
        runs,
        &order,
        threads,
        &|(s, p)| run_dynamic(s, *p, mode.clone(), model, seed),
        &|_| {},
    );
    runs.iter()
        .zip(outcomes)
        .map(|((setup, policy), o)| DynamicRow {
            dataset: setup.dataset,
            hosts: setup.hosts,
            lifetime_s: setup.lifetime_s,
            policy: SimPolicy::Classic(*policy),
            mode: "fixed_figure_mean".to_string(),
            interval_s: o.mean_interval_s,
            decline_ratio: o.decline_ratio(),
            queries_per_request: o.queries as f64 / o.requests.max(1) as f64,
        })
        .collect()
}

/// A fixed interval of `i` seconds (`None`: never) in a run with departures; 1 s, a refresh
/// before each request at one request per second, is fresh state.
pub(super) fn with_departures(i: Option<u64>) -> RefreshMode {
    match i {
        None => RefreshMode::Never,
        Some(1) => RefreshMode::Fresh,
        Some(s) => RefreshMode::Fixed(s * 1000),
    }
}

/// Fresh, Nova caching (60 s), ASC (`asc_mode`), and a fixed interval equal to ASC's mean.
pub(super) fn asc_group(
    setup: &DynamicSetup,
    policy: Algorithm,
    asc_mode: RefreshMode,
    model: CacheModel,
    seed: u64,
) -> (Vec<DynamicRow>, DynamicOutcome) {
    let asc = run_dynamic(setup, policy, asc_mode, model, seed);
    let mean_ms = ((asc.mean_interval_s * 1000.0).round() as u64).max(1);
    let modes = [
        (
            "fresh",
            run_dynamic(setup, policy, RefreshMode::Fresh, model, seed),
        ),
        (
            "caching_60s",
            run_dynamic(setup, policy, RefreshMode::Fixed(60_000), model, seed),
        ),
        ("asc", asc.clone()),
        (
            "fixed_asc_mean",
            run_dynamic(setup, policy, RefreshMode::Fixed(mean_ms), model, seed),
        ),
    ];
    let rows = modes
        .iter()
        .map(|(mode, o)| DynamicRow {
            dataset: setup.dataset,
            hosts: setup.hosts,
            lifetime_s: setup.lifetime_s,
            policy: SimPolicy::Classic(policy),
            mode: mode.to_string(),
            interval_s: o.mean_interval_s,
            decline_ratio: o.decline_ratio(),
            queries_per_request: o.queries as f64 / o.requests.max(1) as f64,
        })
        .collect();
    (rows, asc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::DatasetKind;

    #[test]
    fn the_figure_mean_is_the_mean_of_each_points_mean_interval() {
        let run = |mean_interval_s: f64| AscRun {
            setup: DynamicSetup::default_for(DatasetKind::Nfv),
            policy: Algorithm::Random,
            asc: DynamicOutcome {
                mean_interval_s,
                ..Default::default()
            },
        };
        assert_eq!(figure_mean_interval_s(&[]), 0.0);
        assert_eq!(figure_mean_interval_s(&[run(2.0), run(46.0)]), 24.0);
    }
}
