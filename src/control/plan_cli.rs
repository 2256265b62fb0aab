//! `parasol apsr plan`: the APSR sizing computation offline, so operators can choose a
//! scheduler count and `host_subset_size` for their cloud (docs/architecture.md §4).

use std::io::Write;

use clap::Args;

use super::apsr_math::maximize_parallelism;
use super::error::ControlError;

/// Flags of `parasol apsr plan`.
#[derive(Args, Clone, Debug, PartialEq)]
pub struct PlanArgs {
    /// n, the number of hosts in the cloud.
    #[arg(long = "hosts", value_name = "N")]
    pub hosts: u64,
    /// k, the hosts that can take any request (may be fractional, as the live estimate is).
    #[arg(long = "available", value_name = "K")]
    pub available: f64,
    /// B, the hosts all schedulers together may read per round [default: n].
    #[arg(long = "budget", value_name = "B")]
    pub budget: Option<u64>,
    /// ε, the SLA bound on the expected decline ratio.
    #[arg(long = "epsilon", value_name = "EPSILON", default_value_t = 0.05)]
    pub epsilon: f64,
    /// An upper bound on s [default: none].
    #[arg(long = "max-schedulers", value_name = "S")]
    pub max_schedulers: Option<u64>,
    /// Print `{"schedulers", "hosts_per_scheduler", "expected_decline_ratio"}` as JSON.
    #[arg(long)]
    pub json: bool,
}

impl PlanArgs {
    /// Checks the flags; the error names the flag at fault.
    pub fn validate(&self) -> Result<(), ControlError> {
        if self.hosts == 0 {
            return Err(ControlError::flag("--hosts", "must be at least 1"));
        }
        if !(self.available >= 0.0 && self.available <= self.hosts as f64) {
            return Err(ControlError::flag(
                "--available",
                format!("must be between 0 and --hosts ({})", self.hosts),
            ));
        }
        if !(self.epsilon > 0.0 && self.epsilon < 1.0) {
            return Err(ControlError::flag("--epsilon", "must be in (0, 1)"));
        }
        if self.budget == Some(0) {
            return Err(ControlError::flag("--budget", "must be at least 1"));
        }
        if self.max_schedulers == Some(0) {
            return Err(ControlError::flag("--max-schedulers", "must be at least 1"));
        }
        Ok(())
    }
}

/// Plans (s, d) for the flags and prints it to `out`, as text or as JSON.
pub fn run_plan(args: &PlanArgs, out: &mut impl Write) -> Result<(), ControlError> {
    args.validate()?;
    let plan = maximize_parallelism(
        args.hosts,
        args.epsilon,
        args.budget.unwrap_or(args.hosts),
        args.available,
        args.max_schedulers.unwrap_or(u64::MAX),
    );
    if args.json {
        let ratio = serde_json::Number::from_f64(plan.expected_decline_ratio)
            .map_or_else(|| "null".to_owned(), |n| n.to_string());
        writeln!(
            out,
            r#"{{"schedulers": {}, "hosts_per_scheduler": {}, "expected_decline_ratio": {ratio}}}"#,
            plan.schedulers, plan.hosts_per_scheduler
        )?;
    } else {
        writeln!(out, "schedulers (s):          {}", plan.schedulers)?;
        writeln!(out, "hosts per scheduler (d): {}", plan.hosts_per_scheduler)?;
        writeln!(
            out,
            "expected decline ratio:  {:.4} ({:.2} %)",
            plan.expected_decline_ratio,
            plan.expected_decline_ratio * 100.0
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        plan: PlanArgs,
    }

    fn run(flags: &[&str]) -> Result<String, ControlError> {
        let cli = Cli::try_parse_from(std::iter::once("plan").chain(flags.iter().copied()))
            .expect("flags parse");
        let mut out = Vec::new();
        run_plan(&cli.plan, &mut out)?;
        Ok(String::from_utf8(out).expect("utf-8"))
    }

    #[test]
    fn json_output_is_exactly_the_three_fields() {
        // n = B = k = 10, ε = 0.1 plans (3, 3) with 1 − 2.71/3 (see apsr_math's tests).
        let out = run(&[
            "--hosts",
            "10",
            "--available",
            "10",
            "--epsilon",
            "0.1",
            "--json",
        ])
        .unwrap();
        let value: serde_json::Value = serde_json::from_str(&out).unwrap();
        let object = value.as_object().unwrap();
        assert_eq!(object.len(), 3);
        assert_eq!(value["schedulers"], 3);
        assert_eq!(value["hosts_per_scheduler"], 3);
        let ratio = value["expected_decline_ratio"].as_f64().unwrap();
        assert!((ratio - (1.0 - 2.71 / 3.0)).abs() < 1e-12);
        assert!(out.starts_with(r#"{"schedulers": 3, "hosts_per_scheduler": 3, "#));
    }

    #[test]
    fn text_output_names_s_d_and_the_ratio() {
        let out = run(&["--hosts", "2", "--available", "2", "--epsilon", "0.5"]).unwrap();
        assert!(out.contains("schedulers (s):          2"), "{out}");
        assert!(out.contains("hosts per scheduler (d): 1"), "{out}");
        assert!(
            out.contains("expected decline ratio:  0.2500 (25.00 %)"),
            "{out}"
        );
    }

    #[test]
    fn budget_and_cap_flags_shape_the_plan() {
        let capped = run(&[
            "--hosts",
            "10",
            "--available",
            "10",
            "--epsilon",
            "0.1",
            "--max-schedulers",
            "2",
            "--json",
        ])
        .unwrap();
        let value: serde_json::Value = serde_json::from_str(&capped).unwrap();
        assert_eq!(
            (
                value["schedulers"].as_u64(),
                value["hosts_per_scheduler"].as_u64()
            ),
            (Some(2), Some(5))
        );
        let budget = run(&[
            "--hosts",
            "100",
            "--available",
            "100",
            "--budget",
            "1",
            "--json",
        ])
        .unwrap();
        let value: serde_json::Value = serde_json::from_str(&budget).unwrap();
        assert_eq!(
            (
                value["schedulers"].as_u64(),
                value["hosts_per_scheduler"].as_u64()
            ),
            (Some(1), Some(1))
        );
    }

    #[test]
    fn invalid_flags_are_named() {
        for (flags, flag) in [
            (&["--hosts", "0", "--available", "0"][..], "--hosts"),
            (&["--hosts", "10", "--available", "11"], "--available"),
            (&["--hosts", "10", "--available=-1"], "--available"),
            (&["--hosts", "10", "--available", "NaN"], "--available"),
            (
                &["--hosts", "10", "--available", "5", "--epsilon", "0"],
                "--epsilon",
            ),
            (
                &["--hosts", "10", "--available", "5", "--epsilon", "1"],
                "--epsilon",
            ),
            (
                &["--hosts", "10", "--available", "5", "--budget", "0"],
                "--budget",
            ),
            (
                &["--hosts", "10", "--available", "5", "--max-schedulers", "0"],
                "--max-schedulers",
            ),
        ] {
            let err = run(flags).unwrap_err();
            assert_eq!(err.subject(), Some(flag), "{flags:?}");
            assert!(err.to_string().contains(flag), "{err}");
        }
    }

    #[test]
    fn a_cloud_with_nothing_free_keeps_one_scheduler() {
        let out = run(&["--hosts", "50", "--available", "0", "--json"]).unwrap();
        let value: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(value["schedulers"], 1);
        assert_eq!(value["expected_decline_ratio"], 1.0);
    }
}
