//! Recording allocations that exist outside Parasol (Placement's, for instances created
//! before Parasol): no capacity check, since the instance is already running there. They are
//! marked `imported`, so that a later sync can release those Placement no longer has.

use super::claims::{record_in_tx, release_in_tx};
use super::{write_tx, Allocation, Ledger, LedgerError};
use crate::domain::{HostId, Resources};
use sqlx::Row;

impl Ledger {
    /// Records `instance_uuid`'s existing allocation on `host` and adds it to the host's usage,
    /// unconditionally; returns false (and changes nothing) when the ledger already has an
    /// allocation for that instance.
    pub async fn record_existing_allocation(
        &self,
        host: HostId,
        instance_uuid: &str,
        demand: &Resources,
        now_ms: i64,
    ) -> Result<bool, LedgerError> {
        if !demand.is_non_negative() {
            return Err(LedgerError::Invalid(format!(
                "negative amounts in {}",
                super::claims::resources_json(demand)
            )));
        }
        let recorded = write_tx!(self, Db, tx => {
            let new = record_in_tx!(Db, tx, instance_uuid, host.0, demand, true, now_ms);
            if new {
                sqlx::query("UPDATE allocations SET imported = TRUE WHERE instance_uuid = $1")
                    .bind(instance_uuid)
                    .execute(&mut *tx)
                    .await?;
            }
            new
        });
        if recorded {
            self.reload(&[host]).await?;
        }
        Ok(recorded)
    }

    /// Releases the imported allocations on `host` whose instance is not in `present` (the
    /// consumers Placement now has on that host), giving their usage back, in one
    /// transaction; returns what it released. Allocations Parasol made itself are never
    /// touched: Nova's notifications release those.
    pub async fn release_vanished_imports(
        &self,
        host: HostId,
        present: &[&str],
    ) -> Result<Vec<Allocation>, LedgerError> {
        let released = write_tx!(self, Db, tx => {
            let rows = sqlx::query(
                "SELECT instance_uuid FROM allocations WHERE host_id = $1 AND imported \
                 ORDER BY instance_uuid",
            )
            .bind(host.0)
            .fetch_all(&mut *tx)
            .await?;
            let mut released = Vec::new();
            for row in rows {
                let uuid: String = row.try_get(0)?;
                if present.contains(&uuid.as_str()) {
                    continue;
                }
                if let Some(alloc) = release_in_tx!(Db, tx, &uuid) {
                    released.push(alloc);
                }
            }
            released
        });
        if !released.is_empty() {
            self.reload(&[host]).await?;
        }
        Ok(released)
    }
}
