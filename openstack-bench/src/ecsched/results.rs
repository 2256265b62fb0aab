//! Table 1 (and the comparison with the published cells) as Markdown.

use super::cli::Table1Args;
use super::shapes::exogeni;
use super::table1::{run, Outcome, Scheduler};
use super::trace::{generate, load_task_events, Task, TraceModel};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Table 1 as published (CPU %, memory %), in the order of [`Scheduler::table1`].
pub const PUBLISHED_TABLE1: [(f64, f64); 4] = [
    (76.57, 76.71),
    (75.80, 75.93),
    (70.00, 70.12),
    (69.98, 70.10),
];

/// One run's tasks: a fresh generated sample, or a 10 % sample of the loaded trace.
fn tasks(a: &Table1Args, seed: u64, loaded: &Option<Vec<Task>>) -> Vec<Task> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    match loaded {
        None => generate(&TraceModel::PUBLISHED, &mut rng),
        Some(all) => {
            let n = (all.len() as f64 * TraceModel::PUBLISHED.sampled).round() as usize;
            let _ = a;
            all.choose_multiple(&mut rng, n).copied().collect()
        }
    }
}

/// Runs every scheduler on the same samples and renders the table beside the paper's.
pub fn table1(a: &Table1Args) -> anyhow::Result<String> {
    let loaded = match &a.task_events {
        None => None,
        Some(path) => {
            let file = std::io::BufReader::new(std::fs::File::open(path)?);
            Some(load_task_events(file, TraceModel::PUBLISHED.window_s)?)
        }
    };
    let hosts = exogeni();
    let mut sums = [Outcome::default(); 4];
    for seed in 0..a.seeds {
        let sample = tasks(a, seed, &loaded);
        for (s, sum) in Scheduler::table1().iter().zip(sums.iter_mut()) {
            let (o, _) = run(*s, &hosts, &sample, a.window);
            sum.cpu_utilisation += o.cpu_utilisation / a.seeds as f64;
            sum.mem_utilisation += o.mem_utilisation / a.seeds as f64;
            sum.makespan_s += o.makespan_s / a.seeds as f64;
        }
    }
    let mut out = format!(
        "# ECSched Table 1: average utilisation, 30 VMs of §4.1, every task submitted at 0, mean of {} runs, window {}\n\n\
         | scheduler | CPU % | memory % | published CPU % | published memory % | makespan s |\n|---|---|---|---|---|---|\n",
        a.seeds, a.window
    );
    for ((s, o), (pc, pm)) in Scheduler::table1().iter().zip(&sums).zip(PUBLISHED_TABLE1) {
        out += &format!(
            "| {} | {:.2} | {:.2} | {pc:.2} | {pm:.2} | {:.0} |\n",
            s.name(),
            o.cpu_utilisation * 100.0,
            o.mem_utilisation * 100.0,
            o.makespan_s
        );
    }
    Ok(out)
}
