//! The ledger's own facts: its id, and the write probe `/readyz` runs.

use super::{read_pool, write_tx, Ledger, LedgerError};
use std::time::Duration;

impl Ledger {
    /// This ledger's id, made when it was created (`ledger_meta`).
    pub async fn ledger_id(&self) -> Result<String, LedgerError> {
        read_pool!(self, pool => {
            Ok(sqlx::query_scalar("SELECT value FROM ledger_meta WHERE key = 'ledger_id'")
                .fetch_one(pool)
                .await?)
        })
    }

    /// Writes and commits one row within `timeout`: the ledger takes writes now (not read-only,
    /// not full, its write lock not held by someone else past the timeout).
    /// The write runs in a task of its own, so a probe that times out still ends its
    /// transaction instead of leaving it half-done on the writer's connection.
    pub async fn probe_write(&self, now_ms: i64, timeout: Duration) -> Result<(), LedgerError> {
        let ledger = self.clone();
        let probe = tokio::spawn(async move {
            write_tx!(ledger, Db, tx => {
                sqlx::query("UPDATE ledger_meta SET value = $1 WHERE key = 'probe'")
                    .bind(now_ms.to_string())
                    .execute(&mut *tx)
                    .await?;
            });
            Ok::<(), LedgerError>(())
        });
        match tokio::time::timeout(timeout, probe).await {
            Ok(Ok(result)) => {
                if let Err(e) = &result {
                    self.write_failed(e);
                }
                result
            }
            Ok(Err(join)) => Err(LedgerError::Invalid(format!(
                "the write probe failed: {join}"
            ))),
            Err(_) => Err(LedgerError::Invalid(format!(
                "a write did not commit within {} s (is the write lock held?)",
                timeout.as_secs_f64()
            ))),
        }
    }
}
