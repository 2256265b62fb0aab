//! `results.json` and `report.md` of a comparison: the scenario header, one row per run,
//! the invariants, and scenario notes (e.g. published values and why ours differ).

use crate::run::RunResult;
use serde_json::json;
use std::fmt::Write;
use std::path::Path;

/// Where and when a comparison ran.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Machine {
    pub nproc: usize,
    pub memory_gib: f64,
    pub date_utc: String,
}

impl Machine {
    pub fn detect() -> Machine {
        let nproc = std::thread::available_parallelism().map_or(1, |n| n.get());
        let memory_gib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                let line = m.lines().find(|l| l.starts_with("MemTotal:"))?.to_string();
                line.split_whitespace().nth(1)?.parse::<f64>().ok()
            })
            .map_or(0.0, |kb| kb / 1024.0 / 1024.0);
        let date_utc = std::process::Command::new("date")
            .args(["-u", "+%Y-%m-%d %H:%M UTC"])
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map_or_else(|| "unknown".into(), |s| s.trim().to_string());
        Machine {
            nproc,
            memory_gib,
            date_utc,
        }
    }
}

/// Did every run keep the invariants?
pub fn invariants_hold(runs: &[RunResult]) -> bool {
    runs.iter().all(|r| r.violations == 0 && r.accounted)
}

pub fn write(
    dir: &Path,
    header: &[(String, String)],
    command: &str,
    machine: &Machine,
    runs: &[RunResult],
    notes: &str,
    plots: &[String],
) -> anyhow::Result<()> {
    let results = json!({
        "scenario": header
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect::<serde_json::Map<_, _>>(),
        "command": command,
        "machine": machine,
        "invariants_hold": invariants_hold(runs),
        "runs": runs,
    });
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(&results)?,
    )?;
    let mut md = String::new();
    writeln!(md, "# Parasol service benchmark\n")?;
    writeln!(md, "`{command}`\n")?;
    writeln!(
        md,
        "Machine: {} cores, {:.1} GiB, {}; driver, emulated hosts, RabbitMQ and service on the same machine.\n",
        machine.nproc, machine.memory_gib, machine.date_utc
    )?;
    for (k, v) in header {
        writeln!(md, "- **{k}**: {v}")?;
    }
    writeln!(md)?;
    md.push_str(&table(runs));
    writeln!(
        md,
        "\nInvariants: {} (oversubscription violations = 0 and placed + no_valid_host = requests, by the driver and by `/v1/stats`, in every run).\n",
        if invariants_hold(runs) { "hold" } else { "**VIOLATED**" }
    )?;
    if !notes.is_empty() {
        writeln!(md, "{notes}\n")?;
    }
    for p in plots {
        writeln!(md, "![{p}]({p}.svg)")?;
    }
    std::fs::write(dir.join("report.md"), md)?;
    Ok(())
}

/// Under a demand model (`--demand-model`), what each run admitted and the QoS its hosts
/// gave: Q is the share of instance-heartbeats served (§5.1 of seed 002), violations the rest.
fn demand_table(runs: &[RunResult]) -> String {
    if runs.iter().all(|r| r.allocation_ratio.is_none()) {
        return String::new();
    }
    let mut md = String::from(
        "\n| run | allocation ratio | Flex | admitted VCPU | instances booted | instance-heartbeats judged | QoS violations | Q |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in runs {
        let Some(ratio) = r.allocation_ratio else {
            continue;
        };
        let q = r
            .qos()
            .map_or_else(|| "–".to_string(), |q| format!("{q:.4}"));
        let _ = writeln!(
            md,
            "| {} | {ratio} | {} | {} | {} | {} | {} | {q} |",
            r.label,
            r.config
                .flex_update_period_s
                .map_or_else(|| "off".to_string(), |p| format!("on ({p} s)")),
            r.booted_vcpu,
            r.booted,
            r.qos_judged,
            r.qos_judged - r.qos_served,
        );
    }
    md
}

/// The Markdown table of runs.
pub fn table(runs: &[RunResult]) -> String {
    let mut md = String::from(
        "| run | hosts | requests | decisions/s | p50 ms | p90 ms | p99 ms | service CPU µs/decision | of it, decisions alone (a lower bound) | ingestion µs/event (an upper bound) | service p99 ms: call / decide / claim | decline ratio | host reads/request | placed | no valid host | violations | ledger = books |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in runs {
        let d = &r.driver;
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.0} | {:.0} | {:.1} | {} | {:.2} % | {:.1} | {} | {} | {} | {} |",
            r.label,
            r.hosts,
            d.issued,
            d.decisions_per_s,
            d.latency_ms.p50,
            d.latency_ms.p90,
            d.latency_ms.p99,
            r.service_cpu_us_per_decision,
            r.decision_cpu_us_per_decision,
            r.ingestion.cpu_us_per_event,
            service_p99(r),
            100.0 * r.stat("decline_ratio"),
            r.stat("queries_per_request"),
            d.placed,
            d.no_valid_host,
            r.violations,
            if r.ledger_mismatch_hosts == 0 {
                "yes".to_string()
            } else {
                format!("{} hosts differ", r.ledger_mismatch_hosts)
            },
        );
    }
    md.push_str(&demand_table(runs));
    // After a blank line, so that Markdown ends the table before it: one item per run.
    md.push('\n');
    for r in runs {
        let i = &r.ingestion;
        let _ = write!(
            md,
            "- {}: ingestion measured alone before the requests, once the service had settled after \
             its start ({:.0} s): {} heartbeats applied in {:.1} s, \
             {:.4} s of service CPU (all the service did in that window, its backend's rounds, \
             refreshes and sweeps included: an upper bound of ingestion's cost); decisions alone = the run's service CPU less its {} \
             heartbeats at that cost (each decision's claim and build confirmation stay in it); \
             the driver and its emulated hosts used {:.0} µs of CPU per decision; of the \
             service's CPU over the run {:.0} % was in the kernel, and its threads switched {:.2} \
             times per decision; its resident memory was {:.0} MiB after the run ({:.0} MiB at \
             most)",
            r.label,
            i.settle_s,
            i.events,
            i.window_s,
            i.cpu_s,
            r.heartbeats_during_run,
            r.driver_cpu_us_per_decision,
            100.0 * r.service_system_cpu_s / r.service_cpu_s.max(f64::MIN_POSITIVE),
            r.service_context_switches_per_decision,
            r.service_rss_kb as f64 / 1024.0,
            r.service_peak_rss_kb as f64 / 1024.0
        );
        if let Some(late) = &r.driver.release_late_ms {
            let _ = write!(
                md,
                "; it released requests {:.2} ms (p99) and {:.2} ms (max) after their arrival",
                late.p99, late.max
            );
        }
        md.push_str(".\n");
    }
    md
}

/// The service's own p99 of the whole call, of deciding and of one ledger claim.
fn service_p99(r: &RunResult) -> String {
    let p = |k: &str| {
        r.service[k]["p99"]
            .as_f64()
            .map_or("–".to_string(), |v| format!("{v:.2}"))
    };
    format!(
        "{} / {} / {}",
        p("latency_ms"),
        p("decide_latency_ms"),
        p("claim_latency_ms")
    )
}
