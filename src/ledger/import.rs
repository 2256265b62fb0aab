//! Recording allocations that exist outside Parasol (Placement's, for instances created
//! before Parasol): no capacity check, since the instance is already running there.

use super::claims::{add_usage, insert_allocation};
use super::{write_pool, Ledger, LedgerError};
use crate::domain::{HostId, Resources};

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
            return Err(LedgerError::Invalid(format!("negative demand {demand:?}")));
        }
        write_pool!(self, pool => {
            let mut tx = pool.begin().await?;
            let inserted = insert_allocation!(tx, instance_uuid, host.0, demand, true, now_ms)?;
            if inserted.rows_affected() == 0 {
                tx.rollback().await?;
                return Ok(false);
            }
            add_usage!(tx, host.0, *demand, 1)?;
            tx.commit().await?;
            Ok(true)
        })
    }
}
