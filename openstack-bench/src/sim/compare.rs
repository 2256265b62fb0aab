//! The README of `docs/results/`: NFV ×30 against the APSR paper's published cells.

use super::report::{render, DynamicRow, Format, ParallelRow};
use super::SimPolicy;
use std::fmt::Write;

/// Published NFV ×30 decline ratios (%), the APSR paper's Table VI: rows s, columns policies.
pub const PUBLISHED_S: [usize; 5] = [1, 5, 10, 20, 50];
pub const PUBLISHED_POLICIES: [&str; 7] = [
    "random",
    "first_fit",
    "ffr",
    "worst_fit",
    "wfr",
    "dist_from_diag",
    "adaptive",
];
pub const PUBLISHED: [[f64; 7]; 5] = [
    [0.3, 0.0, 0.0, 0.3, 0.3, 0.7, 0.3],
    [0.4, 11.1, 2.5, 4.0, 1.0, 5.3, 2.2],
    [0.5, 23.3, 5.2, 8.2, 2.1, 7.8, 3.1],
    [0.7, 35.7, 10.0, 12.1, 3.3, 11.7, 11.6],
    [0.8, 39.0, 10.8, 16.7, 3.9, 16.4, 16.0],
];
/// Published APSR (ε = 5 %): decline ratio (%) and mean active schedulers.
pub const PUBLISHED_APSR: (f64, f64) = (0.4, 14.0);

/// Whether a measured value (%) is within the larger of 1.0 pp and 35 % of the published one.
pub fn within_tolerance(measured: f64, published: f64) -> bool {
    (measured - published).abs() <= (0.35 * published).max(1.0)
}

fn find<'a>(rows: &'a [ParallelRow], policy: &str, s: usize) -> Option<&'a ParallelRow> {
    rows.iter()
        .find(|r| r.policy.as_str() == policy && r.schedulers == Some(s))
}

fn apsr(rows: &[ParallelRow], eps: f64) -> Option<&ParallelRow> {
    rows.iter()
        .find(|r| r.policy == SimPolicy::Apsr && r.epsilon.is_some_and(|e| (e - eps).abs() < 1e-9))
}

/// The README text.
#[allow(clippy::too_many_arguments, clippy::too_many_lines)]
pub fn readme(
    nfv: &[ParallelRow],
    others: &[ParallelRow],
    dynamic: &[DynamicRow],
    b_section: &str,
    runs: usize,
    parallel_s: f64,
    stale_s: f64,
    notes: &str,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Simulation results\n\nRegenerate with `cargo run --profile perf -p openstack-bench -- sim \
        results --out docs/results` (from the repository's top). Every number below comes from \
        the library's own policy pipeline (`src/policy`) and APSR sizing model (`src/control`), \
        driven in virtual time by `openstack-bench/src/sim`.\n"
    );
    let _ = writeln!(
        s,
        "Files: `parallel.{{md,csv,json}}` (experiment A), `staleness.{{md,csv,json}}` and \
        `asc.{{md,csv,json}}` (experiment B), figures `parallel_<dataset>`, `staleness_<dataset>`, \
        `asc_timeline_<dataset>` (`.png` and `.svg`).\n"
    );
    let _ = writeln!(
        s,
        "![NFV](parallel_nfv.svg)\n\n![ASC over time](asc_timeline_nfv.svg)\n"
    );
    let _ = writeln!(
        s,
        "## Experiment A: NFV ×30 on 837 hosts against the APSR paper (mean of {runs} seeds)\n"
    );
    let _ = writeln!(
        s,
        "Cell: measured % (published %); ✓ within max(1.0 pp, 35 % of published), ✗ outside.\n"
    );
    let _ = writeln!(
        s,
        "| s | {} |\n|---|{}",
        PUBLISHED_POLICIES.join(" | "),
        "---|".repeat(7)
    );
    let (mut ok, mut total) = (0, 0);
    let mut misses = Vec::new();
    for (i, sched) in PUBLISHED_S.iter().enumerate() {
        let mut line = format!("| {sched} |");
        for (j, p) in PUBLISHED_POLICIES.iter().enumerate() {
            let published = PUBLISHED[i][j];
            match find(nfv, p, *sched) {
                Some(r) => {
                    let m = r.decline_ratio * 100.0;
                    let good = within_tolerance(m, published);
                    total += 1;
                    ok += good as usize;
                    if !good {
                        misses.push(format!("{p} at s = {sched}: {m:.1} % vs {published} %"));
                    }
                    let _ = write!(
                        line,
                        " {m:.1} ({published}) {} |",
                        if good { "✓" } else { "✗" }
                    );
                }
                None => {
                    let _ = write!(line, " – ({published}) |");
                }
            }
        }
        let _ = writeln!(s, "{line}");
    }
    let _ = writeln!(
        s,
        "\n**{ok} of {total} published cells reproduced within tolerance.**"
    );
    if !misses.is_empty() {
        let _ = writeln!(s, "Off: {}.\n", misses.join("; "));
    }
    let mut measured: Vec<(&str, f64)> = PUBLISHED_POLICIES
        .iter()
        .filter_map(|p| find(nfv, p, 50).map(|r| (*p, r.decline_ratio)))
        .collect();
    measured.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut published: Vec<(&str, f64)> = PUBLISHED_POLICIES
        .iter()
        .zip(PUBLISHED[4])
        .map(|(p, v)| (*p, v))
        .collect();
    published.sort_by(|a, b| a.1.total_cmp(&b.1));
    let names = |v: &[(&str, f64)]| v.iter().map(|(p, _)| *p).collect::<Vec<_>>().join(" < ");
    let _ = writeln!(s, "\nOrdering at s = 50 (lowest decline first):\n- published: {}\n- measured: {}\n- same order: **{}**\n",
        names(&published), names(&measured), names(&published) == names(&measured));
    let without = |v: &[(&str, f64)]| {
        names(
            &v.iter()
                .copied()
                .filter(|(p, _)| *p != "adaptive")
                .collect::<Vec<_>>(),
        )
    };
    let _ = writeln!(
        s,
        "Without adaptive (see below): same order: **{}**.\n",
        without(&published) == without(&measured)
    );
    if let (Some(a), Some(r)) = (apsr(nfv, 0.05), find(nfv, "random", 1)) {
        let fewer = 1.0 - a.queries / r.queries;
        let _ = writeln!(s, "APSR, ε = 5 %: decline {:.2} % (published {} %, SLA ≤ 5 %: **{}**), mean planned \
            schedulers {:.1} per slot, of which {:.1} had a request (published: 14 active); queries {:.0} vs \
            random's {:.0} (s = 1; random reads n hosts per request at every s): **{:.1} % fewer** \
            (≥ 85 %: **{}**).\n",
            a.decline_ratio * 100.0, PUBLISHED_APSR.0, a.decline_ratio <= 0.05, a.mean_active_schedulers,
            a.mean_busy_schedulers, a.queries, r.queries, fewer * 100.0, fewer >= 0.85);
    }
    let _ = writeln!(s, "### All NFV rows\n\n{}", render(nfv, Format::Markdown));
    let _ = writeln!(
        s,
        "## Experiment A: Amazon ×7 on 876 hosts and Google ×1 on 5989 hosts (one seed)\n\n\
        No published cells are given for these; measured:\n\n![Amazon](parallel_amazon.svg)\n\n\
        ![Google](parallel_google.svg)\n\n{}",
        render(others, Format::Markdown)
    );
    let _ = writeln!(s, "## Experiment B: cache staleness\n\nOne scheduler, one request per second, \
        cache refreshed every τ requests (1 = always fresh, `never`), unbounded lifetimes. As \
        docs/architecture.md §10 B reads the ASC paper, the scheduler decides on the snapshot as read, without subtracting its own \
        placements (with `--consume-own` and no departures a stale cache would be exact), and equal \
        ranking keys are broken at random (`tie_break = \"random\"`). Setups: \
        NFV ×10 on 279 hosts, Amazon ×1 on 126, Google ×1 on 5989. Table: `staleness.md`.\n\n\
        ![NFV](staleness_nfv.svg)\n\n![Amazon](staleness_amazon.svg)\n\n![Google](staleness_google.svg)\n");
    let _ = writeln!(s, "### ASC with Poisson arrivals and departures\n\nλ_a = 1 request/s, exponential \
        lifetimes with mean L; NFV ×10 on 28 hosts with L = 437 s (the ASC paper's OpenStack setup), \
        Amazon ×10 on 126 hosts with L = 1100 s, Google ×1 on 600 hosts with L = 1250 s (scaled \
        so one run stays short; L chosen so the hosts stay nearly full). Modes: `fresh` (refresh \
        before every decision), `caching_60s` (Nova's CachingScheduler), `asc` (start 60 s, \
        th_low 3 %, th_decline 5 %, steps 0.5 / 1.1, min 1 s), `fixed_asc_mean` (a fixed interval \
        equal to ASC's own mean).\n\n{}", render(dynamic, Format::Markdown));
    let _ = writeln!(s, "{b_section}");
    let _ = writeln!(s, "## Run time of this regeneration\n\nExperiment A ({runs} NFV seeds, one Amazon and \
        one Google seed, ε ∈ {{3, 5, 10}} %): {parallel_s:.0} s; experiment B: {stale_s:.0} s (wall clock, \
        `perf` profile build, all cores).\n");
    s + notes
}
