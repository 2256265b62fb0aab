//! Exactly-once bookkeeping (ids of applied messages) and the dead-letter table.

use super::{read_pool, write_pool, Ledger, LedgerError};
use crate::clock::SharedClock;
use sqlx::Row;
use std::collections::HashSet;
use tokio_util::sync::CancellationToken;

/// Most message ids one statement forgets (the sweep goes on with the next ones), so that
/// the writer is never held for long.
const FORGET_LIMIT: i64 = 2_000;

/// A message that could not be decoded or applied, kept with the reason.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DeadLetter {
    pub id: i64,
    pub source: String,
    pub reason: String,
    pub body: String,
    pub received_ms: i64,
}

pub(crate) const MARK_PROCESSED: &str =
    "INSERT INTO processed_messages (message_id, processed_ms) VALUES ($1, $2) ON CONFLICT (message_id) DO NOTHING";

/// Which of a batch's message ids (a JSON array) were recorded before: one row, a JSON array.
const SEEN_SQLITE: &str = "SELECT json_group_array(message_id) FROM processed_messages \
    WHERE message_id IN (SELECT value FROM json_each($1))";

/// Records a batch's message ids (a JSON array) in one statement.
const MARK_ALL_SQLITE: &str = "INSERT INTO processed_messages (message_id, processed_ms) \
    SELECT value, $2 FROM json_each($1) WHERE true ON CONFLICT (message_id) DO NOTHING";

/// The same for PostgreSQL (a text array), answering the ids that are new.
const MARK_ALL_POSTGRES: &str = "INSERT INTO processed_messages (message_id, processed_ms) \
    SELECT m, $2 FROM unnest($1::text[]) AS m ON CONFLICT (message_id) DO NOTHING \
    RETURNING message_id";

/// Records `ids` as processed at `now_ms`; answers those not recorded before. SQLite asks
/// which were seen (one row) and then inserts (no row): a `RETURNING` row per message would
/// each cross sqlx's channel from the connection's worker thread.
pub(crate) async fn mark_all_sqlite(
    conn: &mut sqlx::SqliteConnection,
    ids: &[&str],
    now_ms: i64,
) -> Result<HashSet<String>, sqlx::Error> {
    let list = super::json_list(ids.iter().copied());
    let seen: String = sqlx::query_scalar(SEEN_SQLITE)
        .bind(&list)
        .fetch_one(&mut *conn)
        .await?;
    let seen: HashSet<String> = serde_json::from_str(&seen)
        .map_err(|e| sqlx::Error::Protocol(format!("processed message ids: {e}")))?;
    sqlx::query(MARK_ALL_SQLITE)
        .bind(&list)
        .bind(now_ms)
        .execute(&mut *conn)
        .await?;
    Ok(ids
        .iter()
        .filter(|id| !seen.contains(**id))
        .map(|id| id.to_string())
        .collect())
}

/// [`mark_all_sqlite`] for PostgreSQL: one statement, answering the new ids.
pub(crate) async fn mark_all_postgres(
    conn: &mut sqlx::PgConnection,
    ids: &[&str],
    now_ms: i64,
) -> Result<HashSet<String>, sqlx::Error> {
    let ids: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
    let fresh: Vec<String> = sqlx::query_scalar(MARK_ALL_POSTGRES)
        .bind(ids)
        .bind(now_ms)
        .fetch_all(&mut *conn)
        .await?;
    Ok(fresh.into_iter().collect())
}

impl Ledger {
    /// Records a message that could not be decoded or applied.
    pub async fn dead_letter(
        &self,
        source: &str,
        reason: &str,
        body: &str,
        now_ms: i64,
    ) -> Result<(), LedgerError> {
        write_pool!(self, pool => {
            sqlx::query("INSERT INTO dead_letters (source, reason, body, received_ms) VALUES ($1, $2, $3, $4)")
                .bind(source)
                .bind(reason)
                .bind(body)
                .bind(now_ms)
                .execute(pool)
                .await?;
            Ok(())
        })
    }

    /// The most recent dead letters, newest first.
    pub async fn dead_letters(&self, limit: i64) -> Result<Vec<DeadLetter>, LedgerError> {
        read_pool!(self, pool => {
            let rows = sqlx::query("SELECT id, source, reason, body, received_ms FROM dead_letters ORDER BY id DESC LIMIT $1")
                .bind(limit)
                .fetch_all(pool)
                .await?;
            let mut out = Vec::with_capacity(rows.len());
            for r in &rows {
                out.push(DeadLetter {
                    id: r.try_get(0)?,
                    source: r.try_get(1)?,
                    reason: r.try_get(2)?,
                    body: r.try_get(3)?,
                    received_ms: r.try_get(4)?,
                });
            }
            Ok(out)
        })
    }

    /// Forgets the ids of messages applied at or before `before_ms`, oldest first, at most
    /// [`FORGET_LIMIT`] of them; answers how many. A message redelivered after its id is
    /// forgotten would be applied again.
    pub async fn forget_messages(&self, before_ms: i64) -> Result<u64, LedgerError> {
        write_pool!(self, pool => {
            let done = sqlx::query(
                "DELETE FROM processed_messages WHERE message_id IN (SELECT message_id \
                 FROM processed_messages WHERE processed_ms <= $1 ORDER BY processed_ms LIMIT $2)",
            )
            .bind(before_ms)
            .bind(FORGET_LIMIT)
            .execute(pool)
            .await?;
            Ok(done.rows_affected())
        })
    }

    /// True when a message with this id was already applied.
    pub async fn is_processed(&self, message_id: &str) -> Result<bool, LedgerError> {
        read_pool!(self, pool => {
            let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM processed_messages WHERE message_id = $1")
                .bind(message_id)
                .fetch_one(pool)
                .await?;
            Ok(n > 0)
        })
    }
}

/// How often the ids are swept, for a retention: a tenth of it, between 1 s and 10 min.
pub fn retention_sweep_ms(retention_ms: u64) -> u64 {
    (retention_ms / 10).clamp(1_000, 600_000)
}

/// Forgets the ids of messages applied more than `retention_s` ago until `shutdown`: at once,
/// then every [`retention_sweep_ms`] of `clock`. A retention of 0 keeps them forever.
pub async fn run_message_retention(
    ledger: Ledger,
    clock: SharedClock,
    retention_s: u64,
    shutdown: CancellationToken,
) {
    if retention_s == 0 {
        tracing::info!(
            "[ledger] message_retention_s = 0: the ids of applied messages are kept forever"
        );
        return;
    }
    let retention_ms = retention_s.saturating_mul(1000);
    loop {
        let before = clock
            .now_ms()
            .saturating_sub(i64::try_from(retention_ms).unwrap_or(i64::MAX));
        match ledger.forget_messages(before).await {
            // More may be waiting beyond one statement's limit.
            Ok(n) if n as i64 >= FORGET_LIMIT => {
                tokio::task::yield_now().await;
                continue;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "the ids of old messages were not forgotten this time")
            }
        }
        tokio::select! {
            _ = clock.sleep_ms(retention_sweep_ms(retention_ms)) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}
