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
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
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
        let hosts: Vec<_> = expired.iter().map(|a| a.host_id).collect();
        self.forget_gone_hosts(&hosts).await?;
        Ok(expired)
    }
}

impl Ledger {
    /// One sweep at `now_ms`: releases the claims unconfirmed for `ttl_ms`, counted up to where
    /// every process consuming the notification queue has caught up (what is queued is applied
    /// first, see [`IngestMark`]; with several processes on one ledger, the least of their marks,
    /// see [`Ledger::shared_mark`]).
    pub async fn sweep_expired_claims(
        &self,
        now_ms: i64,
        ttl_ms: u64,
    ) -> Result<Vec<Allocation>, LedgerError> {
        let own = self.ingest_mark().caught_up_to(now_ms);
        let word = i64::try_from(MARK_HOLDS_SWEEPS * sweep_interval_ms(ttl_ms)).unwrap_or(i64::MAX);
        let upto = self
            .shared_mark(own, now_ms, now_ms.saturating_add(word))
            .await?;
        let before = upto.saturating_sub(i64::try_from(ttl_ms).unwrap_or(i64::MAX));
        self.expire_claims(before).await
    }

    /// Publishes this process' mark `own` (valid until `holds_until_ms`) in the ledger, drops the
    /// marks whose word has lapsed at `now_ms` (processes killed or cut off), and answers the least
    /// mark of all: a claim's confirmation may wait in another process's prefetch or backlog, and
    /// a FIFO queue whose every consumer has applied what it took up to `m` has applied every
    /// message sent before `m`.
    pub async fn shared_mark(
        &self,
        own: i64,
        now_ms: i64,
        holds_until_ms: i64,
    ) -> Result<i64, LedgerError> {
        let least: Option<i64> = write_tx!(self, Db, tx => {
            sqlx::query(
                "INSERT INTO ingest_marks (process, caught_up_ms, holds_until_ms) \
                 VALUES ($1, $2, $3) ON CONFLICT (process) DO UPDATE \
                 SET caught_up_ms = excluded.caught_up_ms, holds_until_ms = excluded.holds_until_ms",
            )
            .bind(&*self.process)
            .bind(own)
            .bind(holds_until_ms)
            .execute(&mut *tx)
            .await?;
            sqlx::query("DELETE FROM ingest_marks WHERE holds_until_ms <= $1")
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
            sqlx::query_scalar("SELECT MIN(caught_up_ms) FROM ingest_marks")
                .fetch_one(&mut *tx)
                .await?
        });
        let least = least.map_or(own, |m| m.min(own));
        if least < own {
            tracing::debug!(
                own,
                least,
                "claim expiry waits for another process to catch up"
            );
        }
        Ok(least)
    }

    /// Withdraws this process' mark (a clean stop): the others no longer wait for it.
    pub async fn withdraw_mark(&self) -> Result<(), LedgerError> {
        write_tx!(self, Db, tx => {
            sqlx::query("DELETE FROM ingest_marks WHERE process = $1")
                .bind(&*self.process)
                .execute(&mut *tx)
                .await?;
        });
        Ok(())
    }
}

/// For how many of its sweep intervals a process's published mark holds: past that, a process
/// that stopped sweeping (killed, cut off from the ledger) no longer holds the others' expiry
/// back (its unapplied messages went back to the queue when its connection closed).
const MARK_HOLDS_SWEEPS: u64 = 3;

/// How far the notification consumer has caught up, so that the sweep never expires a claim
/// whose confirmation is already waiting in the broker's queue (issue 40, item 6: after a
/// stall longer than the TTL — the process paused, the broker unreachable, a restart after a
/// long stop — the backlog holds the confirmations of claims older than the TTL).
///
/// Without a consumer the mark is "now". With one ([`IngestMark::watch`]), it is the latest of:
/// the envelope time of the newest message applied (a consumer working through a backlog applies
/// old messages: the mark stays as old as they are; the newest of all senders' clocks counts, so
/// one compute's clock behind the others holds nothing back), and the time at which the
/// consumer last found nothing to take with everything it was given applied. Nothing is swept
/// before the consumer has caught up once. A claim made at `c` expires only once the mark has
/// passed `c + TTL`: every confirmation sent by then has been applied.
#[derive(Debug, Default)]
pub struct IngestMark {
    watched: AtomicBool,
    /// Milliseconds since the epoch; `i64::MIN` until caught up once.
    caught_up_ms: AtomicI64,
    /// Messages taken from the broker and not yet applied.
    in_flight: AtomicI64,
}

impl IngestMark {
    /// A consumer feeds the ledger from now on: the sweep waits for it to catch up.
    pub fn watch(&self) {
        if !self.watched.swap(true, Ordering::SeqCst) {
            self.caught_up_ms.store(i64::MIN, Ordering::SeqCst);
        }
    }

    /// A new connection: what the last one took and did not apply is redelivered.
    pub fn new_session(&self) {
        self.in_flight.store(0, Ordering::SeqCst);
    }

    /// The consumer took `n` messages.
    pub fn taken(&self, n: usize) {
        self.in_flight.fetch_add(n as i64, Ordering::SeqCst);
    }

    /// The consumer applied (or dead-lettered) `n` taken messages, the newest sent at
    /// `sent_ms` when known.
    pub fn applied(&self, n: usize, sent_ms: Option<i64>) {
        self.in_flight.fetch_sub(n as i64, Ordering::SeqCst);
        if let Some(at) = sent_ms {
            self.caught_up_ms.fetch_max(at, Ordering::SeqCst);
        }
    }

    /// The consumer found nothing to take since `since_ms`: if everything it took is applied,
    /// every message queued before then has been.
    pub fn idle_since(&self, since_ms: i64) {
        if self.in_flight.load(Ordering::SeqCst) == 0 {
            self.caught_up_ms.fetch_max(since_ms, Ordering::SeqCst);
        }
    }

    /// Up to when every queued confirmation has been applied, at `now_ms`.
    pub fn caught_up_to(&self, now_ms: i64) -> i64 {
        if !self.watched.load(Ordering::SeqCst) {
            return now_ms;
        }
        self.caught_up_ms.load(Ordering::SeqCst).min(now_ms)
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
        match ledger.sweep_expired_claims(clock.now_ms(), ttl_ms).await {
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
            _ = shutdown.cancelled() => {
                if let Err(e) = ledger.withdraw_mark().await {
                    tracing::warn!(error = %e, "this process' ingest mark stays in the ledger until its word lapses");
                }
                return;
            }
        }
    }
}
