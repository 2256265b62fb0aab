//! Exactly-once bookkeeping (ids of applied messages) and the dead-letter table.

use super::{read_pool, write_pool, Ledger, LedgerError};
use sqlx::Row;

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

/// Records a batch's message ids (a JSON array) in one statement; answers those that are new.
pub(crate) const MARK_ALL_SQLITE: &str =
    "INSERT INTO processed_messages (message_id, processed_ms) \
    SELECT value, $2 FROM json_each($1) WHERE true ON CONFLICT (message_id) DO NOTHING \
    RETURNING message_id";

/// The same for PostgreSQL (a text array).
pub(crate) const MARK_ALL_POSTGRES: &str =
    "INSERT INTO processed_messages (message_id, processed_ms) \
    SELECT m, $2 FROM unnest($1::text[]) AS m ON CONFLICT (message_id) DO NOTHING \
    RETURNING message_id";

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
