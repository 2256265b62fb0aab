//! One transaction per message: record its id, apply its effect, commit.

use crate::domain::{Inventory, Resources, CLASSES};
use crate::ledger::claims::{add_usage, insert_allocation, release_in_tx};
use crate::ledger::hosts::upsert_host;
use crate::ledger::messages::MARK_PROCESSED;
use crate::ledger::{write_pool, HostRegistration, Ledger, LedgerError};
use crate::nova::{HostEvent, HostStatePayload, Notification};
use sqlx::Row;

/// What applying a message came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The effect is committed.
    Applied,
    /// The id was seen before: nothing changed.
    Duplicate,
    /// An event type Parasol does not act on: recorded as processed, nothing else changed.
    Unknown,
}

impl Applied {
    pub fn as_str(self) -> &'static str {
        match self {
            Applied::Applied => "applied",
            Applied::Duplicate => "duplicate",
            Applied::Unknown => "unknown_event",
        }
    }
}

/// Why a message was not applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The message can never be applied (dead-letter it); nothing changed.
    #[error("{0}")]
    Rejected(String),
    /// The ledger failed; the message may be retried.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

impl From<sqlx::Error> for ApplyError {
    fn from(e: sqlx::Error) -> Self {
        ApplyError::Ledger(LedgerError::Database(e))
    }
}

fn registration(p: &HostStatePayload) -> Result<HostRegistration, ApplyError> {
    let mut inventory = [Inventory {
        total: 0,
        reserved: 0,
        allocation_ratio: 1.0,
    }; 3];
    for class in CLASSES {
        if let Some(inv) = p.inventory.get(&class) {
            inventory[class.index()] = *inv;
        }
    }
    let reg = HostRegistration {
        host: p.host.clone(),
        node: p.node.clone(),
        uuid: p.compute_node_uuid.clone(),
        availability_zone: p.availability_zone.clone().unwrap_or_else(|| "nova".into()),
        up: p.up,
        disabled: p.disabled,
        inventory,
    };
    reg.validate()
        .map_err(|e| ApplyError::Rejected(e.to_string()))?;
    Ok(reg)
}

/// Applies `n` to the ledger exactly once.
pub async fn apply(ledger: &Ledger, n: &Notification, now_ms: i64) -> Result<Applied, ApplyError> {
    // Validate before touching the ledger so a rejected message changes nothing.
    let reg = match &n.event {
        HostEvent::HostState(p) => Some(registration(p)?),
        HostEvent::Upsert { demand, .. } if !demand.is_non_negative() => {
            return Err(ApplyError::Rejected(format!(
                "negative flavor sizes {demand:?}"
            )))
        }
        _ => None,
    };
    write_pool!(ledger, pool => {
        let mut tx = pool.begin().await?;
        let fresh = sqlx::query(MARK_PROCESSED).bind(&n.message_id).bind(now_ms).execute(&mut *tx).await?;
        if fresh.rows_affected() == 0 {
            tx.rollback().await?;
            return Ok(Applied::Duplicate);
        }
        let host_id = |host: &str, node: Option<&str>| {
            sqlx::query_scalar::<_, i64>(
                "SELECT id FROM hosts WHERE host = $1 AND (CAST($2 AS TEXT) IS NULL OR node = $2) ORDER BY id LIMIT 1",
            )
            .bind(host.to_string())
            .bind(node.map(str::to_string))
        };
        let outcome = match &n.event {
            HostEvent::HostState(_) => {
                let reg = reg.as_ref().expect("validated above");
                if let Err(e) = upsert_host!(&mut *tx, reg, now_ms) {
                    tx.rollback().await?;
                    return Err(ApplyError::Rejected(format!("host {}: {e}", reg.host)));
                }
                Applied::Applied
            }
            HostEvent::Upsert { instance_uuid, host, node, demand, .. } => {
                let Some(id) = host_id(host, node.as_deref()).fetch_optional(&mut *tx).await? else {
                    tx.rollback().await?;
                    return Err(ApplyError::Rejected(format!("unknown host {host:?} for instance {instance_uuid}")));
                };
                release_in_tx!(tx, instance_uuid);
                insert_allocation!(tx, instance_uuid.as_str(), id, demand, true, now_ms)?;
                add_usage!(tx, id, *demand, 1)?;
                Applied::Applied
            }
            HostEvent::Release { instance_uuid, host } => {
                if release_in_tx!(tx, instance_uuid).is_none() {
                    if let Some(host) = host {
                        if host_id(host, None).fetch_optional(&mut *tx).await?.is_none() {
                            tx.rollback().await?;
                            return Err(ApplyError::Rejected(format!(
                                "unknown host {host:?} for the release of instance {instance_uuid}"
                            )));
                        }
                    }
                }
                Applied::Applied
            }
            HostEvent::ServiceUpdate { host, disabled, forced_down } => {
                let updated = sqlx::query("UPDATE hosts SET disabled = $1, forced_down = $2 WHERE host = $3")
                    .bind(*disabled)
                    .bind(*forced_down)
                    .bind(host)
                    .execute(&mut *tx)
                    .await?;
                if updated.rows_affected() == 0 {
                    tx.rollback().await?;
                    return Err(ApplyError::Rejected(format!("service.update for unknown host {host:?}")));
                }
                Applied::Applied
            }
            HostEvent::DeleteInstanceInfo { host, instance_uuid } => {
                let Some(id) = host_id(host, None).fetch_optional(&mut *tx).await? else {
                    tx.rollback().await?;
                    return Err(ApplyError::Rejected(format!("unknown host {host:?}")));
                };
                let on_host: Option<i64> = sqlx::query_scalar("SELECT host_id FROM allocations WHERE instance_uuid = $1")
                    .bind(instance_uuid)
                    .fetch_optional(&mut *tx)
                    .await?;
                if on_host == Some(id) {
                    release_in_tx!(tx, instance_uuid);
                }
                Applied::Applied
            }
            HostEvent::UpdateInstanceInfo { host, instance_uuids } | HostEvent::SyncInstanceInfo { host, instance_uuids } => {
                let Some(id) = host_id(host, None).fetch_optional(&mut *tx).await? else {
                    tx.rollback().await?;
                    return Err(ApplyError::Rejected(format!("unknown host {host:?}")));
                };
                if matches!(n.event, HostEvent::SyncInstanceInfo { .. }) {
                    let rows = sqlx::query("SELECT instance_uuid FROM allocations WHERE host_id = $1")
                        .bind(id)
                        .fetch_all(&mut *tx)
                        .await?;
                    let mut gone = Vec::new();
                    for row in &rows {
                        let uuid: String = row.try_get(0)?;
                        if !instance_uuids.contains(&uuid) {
                            gone.push(uuid);
                        }
                    }
                    for uuid in &gone {
                        release_in_tx!(tx, uuid.as_str());
                    }
                }
                for uuid in instance_uuids {
                    let row = sqlx::query("SELECT host_id, vcpu, memory_mb, disk_gb FROM allocations WHERE instance_uuid = $1")
                        .bind(uuid)
                        .fetch_optional(&mut *tx)
                        .await?;
                    if let Some(row) = row {
                        let current: i64 = row.try_get(0)?;
                        if current != id {
                            let demand = Resources([row.try_get(1)?, row.try_get(2)?, row.try_get(3)?]);
                            release_in_tx!(tx, uuid.as_str());
                            insert_allocation!(tx, uuid.as_str(), id, &demand, true, now_ms)?;
                            add_usage!(tx, id, demand, 1)?;
                        }
                    } else {
                        tracing::debug!(instance = %uuid, host = %host, "instance unknown to the ledger; its size arrives with instance.create.end");
                    }
                }
                Applied::Applied
            }
            HostEvent::Unknown { .. } => Applied::Unknown,
        };
        tx.commit().await?;
        Ok(outcome)
    })
}
