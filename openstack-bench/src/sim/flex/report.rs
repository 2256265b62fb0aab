//! `sim flex`'s table: per policy, the mean and spread over seeds of Figs. 6, 7b and 9's
//! quantities, and each policy's admitted requests and usage relative to LeastFit's.

use serde::Serialize;

use super::super::report::{mean_sd, Row};
use super::trace::{CPU, MEM};
use super::{FlexOutcome, FlexPolicy};

/// One policy of one setting over its seeds.
#[derive(Clone, Debug, Serialize)]
pub struct FlexRow {
    pub policy: String,
    pub hosts: usize,
    pub demand_scale: f64,
    pub seeds: usize,
    /// Time-averaged requests admitted / capacity, CPU and memory: (mean, sd).
    pub requested_cpu: (f64, f64),
    pub requested_mem: (f64, f64),
    /// Time-averaged usage / capacity.
    pub usage_cpu: (f64, f64),
    pub usage_mem: (f64, f64),
    /// CPU requests and CPU usage relative to LeastFit's at the same setting.
    pub admitted_vs_leastfit: f64,
    pub usage_vs_leastfit: f64,
    /// Mean 1 − Q(t), %.
    pub violations_pct: (f64, f64),
    /// Share of periods with Q(t) ≥ ρ.
    pub periods_on_target: (f64, f64),
    /// std / mean of memory usage across nodes.
    pub mem_balance: (f64, f64),
}

/// The rows of `outcomes` (one setting), in `policies`' order.
pub fn rows(outcomes: &[FlexOutcome], policies: &[FlexPolicy]) -> Vec<FlexRow> {
    let of = |p: FlexPolicy| outcomes.iter().filter(move |o| o.policy == p);
    let stat =
        |p: FlexPolicy, f: &dyn Fn(&FlexOutcome) -> f64| mean_sd(&of(p).map(f).collect::<Vec<_>>());
    let base_req = stat(FlexPolicy::LeastFit, &|o| o.requested[CPU]).0;
    let base_use = stat(FlexPolicy::LeastFit, &|o| o.usage[CPU]).0;
    let ratio = |x: f64, base: f64| if base > 0.0 { x / base } else { f64::NAN };
    policies
        .iter()
        .filter_map(|&p| {
            let first = of(p).next()?;
            let requested_cpu = stat(p, &|o| o.requested[CPU]);
            let usage_cpu = stat(p, &|o| o.usage[CPU]);
            Some(FlexRow {
                policy: p.name().to_owned(),
                hosts: first.hosts,
                demand_scale: first.demand_scale,
                seeds: of(p).count(),
                requested_cpu,
                requested_mem: stat(p, &|o| o.requested[MEM]),
                usage_cpu,
                usage_mem: stat(p, &|o| o.usage[MEM]),
                admitted_vs_leastfit: ratio(requested_cpu.0, base_req),
                usage_vs_leastfit: ratio(usage_cpu.0, base_use),
                violations_pct: stat(p, &|o| o.violations_pct),
                periods_on_target: stat(p, &|o| o.periods_on_target),
                mem_balance: stat(p, &|o| o.mem_balance),
            })
        })
        .collect()
}

impl Row for FlexRow {
    fn headers() -> &'static [&'static str] {
        &[
            "policy",
            "hosts",
            "demand ×",
            "seeds",
            "requested CPU",
            "requested mem",
            "usage CPU",
            "usage mem",
            "admitted / LeastFit",
            "usage / LeastFit",
            "QoS violations %",
            "periods Q ≥ ρ",
            "mem std/mean",
        ]
    }

    /// Means only; JSON carries the spreads.
    fn cells(&self) -> Vec<String> {
        let pair = |(m, _): (f64, f64)| format!("{m:.4}");
        vec![
            self.policy.clone(),
            self.hosts.to_string(),
            self.demand_scale.to_string(),
            self.seeds.to_string(),
            pair(self.requested_cpu),
            pair(self.requested_mem),
            pair(self.usage_cpu),
            pair(self.usage_mem),
            format!("{:.4}", self.admitted_vs_leastfit),
            format!("{:.4}", self.usage_vs_leastfit),
            pair(self.violations_pct),
            pair(self.periods_on_target),
            pair(self.mem_balance),
        ]
    }

    fn pretty(&self) -> Vec<String> {
        let pct = |(m, s): (f64, f64)| format!("{:.1} % ± {:.1}", 100.0 * m, 100.0 * s);
        vec![
            self.policy.clone(),
            self.hosts.to_string(),
            self.demand_scale.to_string(),
            self.seeds.to_string(),
            pct(self.requested_cpu),
            pct(self.requested_mem),
            pct(self.usage_cpu),
            pct(self.usage_mem),
            format!("{:.2}×", self.admitted_vs_leastfit),
            format!("{:.2}×", self.usage_vs_leastfit),
            format!(
                "{:.2} ± {:.2}",
                self.violations_pct.0, self.violations_pct.1
            ),
            pct(self.periods_on_target),
            format!("{:.3} ± {:.3}", self.mem_balance.0, self.mem_balance.1),
        ]
    }
}
