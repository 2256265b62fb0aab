//! Claims nobody confirmed: an allocation Parasol claimed for a build or a move stays
//! unconfirmed until the instance's end-of-operation notification (or nova-compute's
//! instance info) shows it on its host. One still unconfirmed `[scheduler] claim_ttl_s` after
//! it was made — the build failed without a word, the caller never got the answer, or the
//! process died in the middle of a multi-create — is released, so capacity never leaks. A
//! move's destination claim that expires gives the instance its held source back
//! (`moves`): the move failed, the instance still runs where it was.

use super::claims::{release_in_tx, Allocation};
use super::{write_tx, Ledger, LedgerError};
use crate::clock::SharedClock;
use crate::stats::Stats;
use sqlx::Row;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Most claims one sweep releases in one transaction (the next sweep takes the rest).
const SWEEP_LIMIT: i64 = 1_000;

impl Ledger {
    /// Releases every claim made at or before `before_ms` that nothing confirmed (imported
    /// allocations are Placement's and never expire here); answers the released allocations.
    pub async fn expire_claims(&self, before_ms: i64) -> Result<Vec<Allocation>, LedgerError> {
        let _shared = self.gate.read().await;
        let expired = write_tx!(self, Db, tx => {
            let rows = sqlx::query(
                "SELECT instance_uuid FROM allocations WHERE NOT confirmed AND NOT imported \
                 AND created_ms <= $1 ORDER BY created_ms LIMIT $2",
            )
            .bind(before_ms)
            .bind(SWEEP_LIMIT)
            .fetch_all(&mut *tx)
            .await?;
            let mut expired = Vec::with_capacity(rows.len());
            for row in &rows {
                let uuid: String = row.try_get(0)?;
                if let Some(a) = release_in_tx!(Db, tx, uuid.as_str()) {
                    expired.push(a);
                }
                // A move whose destination never took the instance failed: the instance
                // holds its source again, whose usage never left it (`moves`).
                sqlx::query(super::moves::RESTORE_SOURCE)
                    .bind(uuid.as_str())
                    .execute(&mut *tx)
                    .await?;
            }
            expired
        });
        for a in &expired {
            self.table().remove(a.host_id, &a.demand);
        }
        Ok(expired)
    }
}

/// How often the sweeper looks, for a TTL: a tenth of it, between 0.1 s and 30 s.
pub fn sweep_interval_ms(ttl_ms: u64) -> u64 {
    (ttl_ms / 10).clamp(100, 30_000)
}

/// Releases expired claims until `shutdown`, first at once (what a crash left behind is
/// released at start once its TTL has passed), then every [`sweep_interval_ms`] of `clock`;
/// counts each release in `stats` (`expired_claims`). A TTL of 0 turns expiry off.
pub async fn run_claim_expiry(
    ledger: Ledger,
    clock: SharedClock,
    ttl_s: u64,
    stats: Arc<Stats>,
    shutdown: CancellationToken,
) {
    if ttl_s == 0 {
        tracing::info!("[scheduler] claim_ttl_s = 0: unconfirmed claims never expire");
        return;
    }
    let ttl_ms = ttl_s.saturating_mul(1000);
    loop {
        let before = clock.now_ms() - i64::try_from(ttl_ms).unwrap_or(i64::MAX);
        match ledger.expire_claims(before).await {
            Ok(released) if !released.is_empty() => {
                let n = released.len() as u64;
                stats.add_expired_claims(n);
                for a in &released {
                    tracing::warn!(instance = %a.instance_uuid, host_id = a.host_id.0, ttl_s, "claim expired: nothing confirmed it");
                }
                // More may be waiting beyond one sweep's limit.
                if n as i64 >= SWEEP_LIMIT {
                    continue;
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "expired claims not released this time"),
        }
        tokio::select! {
            _ = clock.sleep_ms(sweep_interval_ms(ttl_ms)) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}
