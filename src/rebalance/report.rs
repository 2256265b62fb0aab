//! A plan as JSON (Parasol's form and Watcher's action list) and as the table
//! `parasol rebalance plan` prints.

use super::planner::{Figures, LeftOut, Plan};
use crate::choice::Choice;
use serde_json::{json, Value};
use std::fmt::Write;

/// The goal and strategy names the Watcher plugin registers (devstack/watcher/).
pub const WATCHER_GOAL: &str = "workload_balancing";
pub const WATCHER_STRATEGY: &str = "parasol_fmu";

fn figures(f: &Figures) -> Value {
    json!({"utilization": f.utilization, "fairness": f.fairness, "cost": f.cost})
}

fn left_out(list: &[LeftOut], key: &str) -> Value {
    Value::Array(
        list.iter()
            .map(|l| json!({key: l.what, "host": l.host, "reason": l.reason}))
            .collect(),
    )
}

/// Parasol's form: the steps of moves with each one's predicted ΔU, ΔF, ΔC, before and after,
/// and what was left out with why.
pub fn plan_json(plan: &Plan) -> Value {
    let steps: Vec<Value> = plan
        .steps
        .iter()
        .map(|step| {
            Value::Array(
                step.iter()
                    .map(|m| {
                        json!({
                            "instance": m.instance,
                            "source": m.source,
                            "destination": m.destination,
                            "desire_vcpus": m.desire,
                            "delta_utilization": m.delta_utilization,
                            "delta_fairness": m.delta_fairness,
                            "delta_cost": m.delta_cost,
                        })
                    })
                    .collect(),
            )
        })
        .collect();
    json!({
        "dry_run": true,
        "solver": plan.solver.as_str(),
        "seed": plan.seed,
        "base_revision": plan.base_revision,
        "replanned": plan.replanned,
        "hosts": plan.hosts,
        "instances": plan.instances,
        "moves": plan.moves(),
        "before": figures(&plan.before),
        "after": figures(&plan.after),
        "load_std_dev": {"before": plan.load_std_dev.0, "after": plan.load_std_dev.1},
        "steps": steps,
        "not_movable": left_out(&plan.not_movable, "instance"),
        "dropped": left_out(&plan.dropped, "instance"),
        "hosts_left_out": left_out(&plan.hosts_left_out, "name"),
    })
}

/// Watcher's form: one `migrate` action per move (`input_parameters` as Watcher's applier
/// validates them: `migration_type`, `resource_id`, `source_node`, `destination_node`), in
/// the plan's order, each with its step; and the plan's revision and figures beside them.
pub fn watcher_json(plan: &Plan) -> Value {
    let actions: Vec<Value> = plan
        .steps
        .iter()
        .enumerate()
        .flat_map(|(step, moves)| {
            moves.iter().map(move |m| {
                json!({
                    "action_type": "migrate",
                    "step": step,
                    "input_parameters": {
                        "migration_type": "live",
                        "resource_id": m.instance,
                        "source_node": m.source,
                        "destination_node": m.destination,
                    },
                })
            })
        })
        .collect();
    json!({
        "goal": WATCHER_GOAL,
        "strategy": WATCHER_STRATEGY,
        "solver": plan.solver.as_str(),
        "base_revision": plan.base_revision,
        "replanned": plan.replanned,
        "instances": plan.instances,
        "before": figures(&plan.before),
        "after": figures(&plan.after),
        "load_std_dev": {"before": plan.load_std_dev.0, "after": plan.load_std_dev.1},
        "actions": actions,
    })
}

fn number(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// The table of a plan in Parasol's JSON form, for a terminal.
pub fn render_text(plan: &Value) -> String {
    let mut out = String::new();
    let f = |key: &str| {
        let v = &plan[key];
        format!(
            "U {:.4}  F {:.4}  C {:.4}",
            number(&v["utilization"]),
            number(&v["fairness"]),
            number(&v["cost"])
        )
    };
    let _ = writeln!(
        out,
        "plan ({}, seed {}) on revision {}: {} moves over {} hosts and {} instances (dry run: nothing moved)",
        plan["solver"].as_str().unwrap_or("?"),
        plan["seed"],
        plan["base_revision"].as_str().unwrap_or("?"),
        plan["moves"],
        plan["hosts"],
        plan["instances"]
    );
    if let Some(why) = plan["replanned"].as_str() {
        let _ = writeln!(out, "replanned: {why}");
    }
    let _ = writeln!(out, "before: {}", f("before"));
    let _ = writeln!(out, "after:  {}", f("after"));
    let _ = writeln!(
        out,
        "\n{:>4}  {:<36}  {:<20}  {:<20}  {:>8}  {:>8}  {:>8}",
        "step", "instance", "source", "destination", "ΔU", "ΔF", "ΔC"
    );
    let steps = plan["steps"].as_array().map_or(&[][..], Vec::as_slice);
    for (i, step) in steps.iter().enumerate() {
        for m in step.as_array().map_or(&[][..], Vec::as_slice) {
            let _ = writeln!(
                out,
                "{:>4}  {:<36}  {:<20}  {:<20}  {:>+8.4}  {:>+8.4}  {:>+8.4}",
                i + 1,
                m["instance"].as_str().unwrap_or("?"),
                m["source"].as_str().unwrap_or("?"),
                m["destination"].as_str().unwrap_or("?"),
                number(&m["delta_utilization"]),
                number(&m["delta_fairness"]),
                number(&m["delta_cost"])
            );
        }
    }
    for (key, title, name) in [
        ("not_movable", "not movable", "instance"),
        ("dropped", "dropped", "instance"),
        ("hosts_left_out", "hosts left out", "name"),
    ] {
        let list = plan[key].as_array().map_or(&[][..], Vec::as_slice);
        if !list.is_empty() {
            let _ = writeln!(out, "\n{title}:");
            for l in list {
                let _ = writeln!(
                    out,
                    "  {} on {}: {}",
                    l[name].as_str().unwrap_or("?"),
                    l["host"].as_str().unwrap_or("?"),
                    l["reason"].as_str().unwrap_or("?")
                );
            }
        }
    }
    out
}
