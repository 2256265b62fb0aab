//! What several benchmark programs share (`mod common;` in each; not an example itself).

use parasol::clock::{Clock, SystemClock};
use parasol::domain::Inventory;
use parasol::ledger::{HostRegistration, Ledger};

/// A fresh SQLite ledger in `dir` with `n` hosts of 64 VCPU (ratio 16), 256 GiB and 2 TB.
pub async fn ledger_with_hosts(dir: &std::path::Path, n: usize) -> Ledger {
    let url = format!("sqlite://{}", dir.join("ledger.db").display());
    let ledger = Ledger::connect(&url, 4).await.expect("ledger");
    ledger.migrate().await.expect("migrate");
    for i in 0..n {
        let mut reg = HostRegistration::simple(
            &format!("compute{i}"),
            &format!("00000000-0000-4000-8000-{i:012}"),
            64,
            262_144,
            2_000,
        );
        reg.inventories[0].1 = Inventory::of(64).with(0, 16.0);
        ledger
            .register_host(&reg, SystemClock.now_ms())
            .await
            .expect("register");
    }
    ledger
}

/// The `q` quantile of `v` (sorted in place).
pub fn pct(v: &mut [u64], q: f64) -> u64 {
    v.sort_unstable();
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

/// The service's `Scheduler` on `ledger` with `settings`, a wall clock and its own stats.
pub async fn scheduler_on(
    settings: parasol::configuration::Settings,
    ledger: &Ledger,
) -> (
    parasol::scheduling::Scheduler,
    std::sync::Arc<parasol::stats::Stats>,
) {
    let clock: parasol::clock::SharedClock = std::sync::Arc::new(SystemClock);
    let stats = std::sync::Arc::new(parasol::stats::Stats::new(clock.clone(), 60));
    let scheduler = parasol::scheduling::Scheduler::start(
        std::sync::Arc::new(settings),
        ledger.clone(),
        stats.clone(),
        clock,
    )
    .await
    .expect("scheduler");
    (scheduler, stats)
}
