//! The effect of one decoded message inside an open transaction (a savepoint of the batch):
//! record its id, then change the ledger. Written once, compiled per engine.

use super::apply::{Applied, ApplyError};
use crate::domain::Resources;
use crate::ledger::claims::{add_usage, insert_allocation, release_in_tx};
use crate::ledger::hosts::upsert_host;
use crate::ledger::messages::MARK_PROCESSED;
use crate::ledger::HostRegistration;
use crate::nova::{HostEvent, Notification};
use sqlx::Row;

const HOST_ID_BY_NAME: &str = "SELECT id FROM hosts WHERE host = $1 \
    AND (CAST($2 AS TEXT) IS NULL OR node = $2) ORDER BY id LIMIT 1";

/// `instance.create.end` for the claim the boot came from (same instance, host, node and size):
/// only the confirmation is news. One statement instead of releasing and re-inserting.
const CONFIRM_CLAIM: &str = "UPDATE allocations SET confirmed = TRUE WHERE instance_uuid = $1 \
    AND vcpu = $4 AND memory_mb = $5 AND disk_gb = $6 AND host_id = (SELECT id FROM hosts \
    WHERE host = $2 AND (CAST($3 AS TEXT) IS NULL OR node = $3) ORDER BY id LIMIT 1)";

fn rejected(reason: String) -> ApplyError {
    ApplyError::Rejected(reason)
}

macro_rules! define_effect {
    ($name:ident, $db:ty) => {
        /// Applies `n` in `tx`, recording its id first when `mark` (else the caller has);
        /// `Err(Rejected)` leaves the caller to roll the savepoint back.
        pub(super) async fn $name(
            tx: &mut sqlx::Transaction<'_, $db>,
            n: &Notification,
            reg: Option<&HostRegistration>,
            now_ms: i64,
            mark: bool,
        ) -> Result<Applied, ApplyError> {
            if mark {
                let fresh = sqlx::query(MARK_PROCESSED)
                    .bind(&n.message_id)
                    .bind(now_ms)
                    .execute(&mut **tx)
                    .await?;
                if fresh.rows_affected() == 0 {
                    return Ok(Applied::Duplicate);
                }
            }
            macro_rules! host_id {
                ($host:expr, $node:expr) => {
                    sqlx::query_scalar::<_, i64>(HOST_ID_BY_NAME)
                        .bind($host)
                        .bind($node)
                        .fetch_optional(&mut **tx)
                        .await?
                };
            }
            match &n.event {
                HostEvent::HostState(p) => {
                    let reg = reg.ok_or_else(|| rejected(format!("host {}: not validated", p.host)))?;
                    upsert_host!(&mut **tx, reg, now_ms)
                        .map_err(|e| rejected(format!("host {}: {e}", reg.host)))?;
                }
                HostEvent::Upsert { instance_uuid, host, node, demand, .. } => {
                    let confirmed = sqlx::query(CONFIRM_CLAIM)
                        .bind(instance_uuid)
                        .bind(host)
                        .bind(node.as_deref())
                        .bind(demand.0[0])
                        .bind(demand.0[1])
                        .bind(demand.0[2])
                        .execute(&mut **tx)
                        .await?;
                    if confirmed.rows_affected() == 1 {
                        return Ok(Applied::Applied);
                    }
                    let Some(id) = host_id!(host, node.as_deref()) else {
                        return Err(rejected(format!("unknown host {host:?} for instance {instance_uuid}")));
                    };
                    release_in_tx!(*tx, instance_uuid);
                    insert_allocation!(*tx, instance_uuid.as_str(), id, demand, true, now_ms)?;
                    add_usage!(*tx, id, *demand, 1)?;
                }
                HostEvent::Release { instance_uuid, host } => {
                    if release_in_tx!(*tx, instance_uuid).is_none() {
                        if let Some(host) = host {
                            if host_id!(host, None::<&str>).is_none() {
                                return Err(rejected(format!(
                                    "unknown host {host:?} for the release of instance {instance_uuid}"
                                )));
                            }
                        }
                    }
                }
                HostEvent::ServiceUpdate { host, disabled, forced_down } => {
                    let updated = sqlx::query("UPDATE hosts SET disabled = $1, forced_down = $2 WHERE host = $3")
                        .bind(*disabled)
                        .bind(*forced_down)
                        .bind(host)
                        .execute(&mut **tx)
                        .await?;
                    if updated.rows_affected() == 0 {
                        return Err(rejected(format!("service.update for unknown host {host:?}")));
                    }
                }
                HostEvent::DeleteInstanceInfo { host, instance_uuid } => {
                    let Some(id) = host_id!(host, None::<&str>) else {
                        return Err(rejected(format!("unknown host {host:?}")));
                    };
                    let on_host: Option<i64> = sqlx::query_scalar("SELECT host_id FROM allocations WHERE instance_uuid = $1")
                        .bind(instance_uuid)
                        .fetch_optional(&mut **tx)
                        .await?;
                    if on_host == Some(id) {
                        release_in_tx!(*tx, instance_uuid);
                    }
                }
                HostEvent::UpdateInstanceInfo { host, instance_uuids }
                | HostEvent::SyncInstanceInfo { host, instance_uuids } => {
                    let Some(id) = host_id!(host, None::<&str>) else {
                        return Err(rejected(format!("unknown host {host:?}")));
                    };
                    if matches!(n.event, HostEvent::SyncInstanceInfo { .. }) {
                        let rows = sqlx::query("SELECT instance_uuid FROM allocations WHERE host_id = $1")
                            .bind(id)
                            .fetch_all(&mut **tx)
                            .await?;
                        let mut gone = Vec::new();
                        for row in &rows {
                            let uuid: String = row.try_get(0)?;
                            if !instance_uuids.contains(&uuid) {
                                gone.push(uuid);
                            }
                        }
                        for uuid in &gone {
                            release_in_tx!(*tx, uuid.as_str());
                        }
                    }
                    for uuid in instance_uuids {
                        let row = sqlx::query("SELECT host_id, vcpu, memory_mb, disk_gb FROM allocations WHERE instance_uuid = $1")
                            .bind(uuid)
                            .fetch_optional(&mut **tx)
                            .await?;
                        let Some(row) = row else {
                            tracing::debug!(instance = %uuid, host = %host, "instance unknown to the ledger; its size arrives with instance.create.end");
                            continue;
                        };
                        let current: i64 = row.try_get(0)?;
                        if current != id {
                            let demand = Resources([row.try_get(1)?, row.try_get(2)?, row.try_get(3)?]);
                            release_in_tx!(*tx, uuid.as_str());
                            insert_allocation!(*tx, uuid.as_str(), id, &demand, true, now_ms)?;
                            add_usage!(*tx, id, demand, 1)?;
                        }
                    }
                }
                HostEvent::Unknown { .. } => return Ok(Applied::Unknown),
            }
            Ok(Applied::Applied)
        }
    };
}

define_effect!(apply_sqlite, sqlx::Sqlite);
define_effect!(apply_postgres, sqlx::Postgres);
