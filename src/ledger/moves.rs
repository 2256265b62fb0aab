//! A move's two allocations (issue 40, item 2; migration `held_moves`). While an instance
//! moves (a cold migration, a resize, a live migration, an evacuation) it holds two
//! allocations, as Placement has it: its own row is the destination's claim, and the source's
//! amounts stay on the source host as a *held move*, keyed `<instance>#source` (or, with
//! Placement claims, by the migration's consumer once the sync imports it) with `move_of`
//! naming the instance. So a new instance never lands in room a moving instance still uses.
//!
//! - A claim for an instance that holds a *confirmed* allocation is a move (a rebuild claims
//!   nothing; an unconfirmed allocation is a build or a move's destination, and a new claim
//!   replaces it: a reschedule). The source is held in the claim's own transaction.
//! - `instance.resize_finish.end` and `instance.live_migration_pre.end` start the move: the
//!   destination took the instance, and no TTL frees the source from then on (Nova's
//!   `resize_confirm_window` defaults to 0: a resize may wait days for its confirmation).
//!   A finished resize also stops counting the source as an instance, as Nova counts
//!   instances by `instance.host` (which `finish_resize` sets to the destination); a live
//!   migration's source counts until the migration ends, as Nova's does.
//! - `instance.resize_confirm.end`, `instance.live_migration_post.end` (and `_post_dest.end`)
//!   and an evacuation's `instance.rebuild.end` end it: the source is released.
//! - `instance.resize_revert.end` and `instance.live_migration_rollback.end` undo it: the
//!   destination is released and the instance holds its source again; so does
//!   `instance.live_migration_abort.end` of a live migration that had not started (still
//!   queued on its source, which nova-compute drops without a rollback notification).
//! - A move whose destination claim expires (`[scheduler] claim_ttl_s`) before it started
//!   failed: the destination is released and the source kept (`expiry`).
//! - A deletion (or any release of the instance) releases both.

use super::claims::parse_resources;
use super::{read_pool, Ledger, LedgerError};
use crate::domain::{HostId, Resources};
use sqlx::Row;

/// The key a move's source is held under until Placement's sync names its consumer.
pub(crate) fn held_key(instance_uuid: &str) -> String {
    format!("{instance_uuid}#source")
}

/// SQLite: whether instance `?1`'s allocation is confirmed (no row: it holds none).
pub(crate) const SQLITE_CONFIRMED: &str =
    "SELECT confirmed FROM allocations WHERE instance_uuid = ?1";

/// SQLite: removes the held sources of instance `?1`, answering where each was and what it held.
pub(crate) const SQLITE_DROP_HELD: &str =
    "DELETE FROM allocations WHERE move_of = ?1 RETURNING host_id, resources";

/// Holds instance `$1`'s allocation as its move's source under `$2`, from `$3`: the row stays
/// on its host with its amounts (no usage changes) and still counts as an instance there (Nova
/// counts a moving instance on its source until the move ends), no longer the instance's own.
pub(crate) const HOLD_SOURCE: &str = "UPDATE allocations SET instance_uuid = $2, move_of = $1, \
    move_started = FALSE, created_ms = $3 WHERE instance_uuid = $1";

/// [`HOLD_SOURCE`] in SQLite's numbered parameters.
pub(crate) const SQLITE_HOLD_SOURCE: &str = "UPDATE allocations SET instance_uuid = ?2, \
    move_of = ?1, move_started = 0, created_ms = ?3 WHERE instance_uuid = ?1";

/// Whether instance `$1`'s move has started (its most recent held source, as
/// [`RESTORE_SOURCE`] takes it; no row: no move).
pub(crate) const MOVE_STARTED: &str = "SELECT move_started FROM allocations WHERE move_of = $1 \
    ORDER BY created_ms DESC LIMIT 1";

/// The destination took instance `$1`: its move's source is no longer freed by a TTL.
pub(crate) const START_MOVE: &str =
    "UPDATE allocations SET move_started = TRUE WHERE move_of = $1 AND NOT move_started";

/// [`START_RESIZE`] for the held sources of instance `$1` on hosts other than `$2`, where its
/// own allocation is and whose nova-compute lists it (`update_instance_info` after
/// `finish_resize`, `sync_instance_info`): `instance.host` names the destination, so the
/// move started, whether or not its notification arrives. (A source on the same host proves
/// nothing: `instance.host` named it all along.)
pub(crate) const START_RESIZE_LISTED: &str = "UPDATE allocations SET move_started = TRUE, \
    instance = FALSE WHERE move_of = $1 AND host_id <> $2 AND (NOT move_started OR instance) \
    RETURNING host_id";

/// A resize or cold migration of instance `$1` finished on its destination: its source is no
/// longer freed by a TTL, and no longer counts as an instance on its host (Nova's
/// `finish_resize` sets `instance.host` to the destination, and the source's resource tracker
/// stops counting it in `num_instances` while it still holds the source's amounts until the
/// confirmation); evaluates to the hosts it changed. A live migration keeps counting on its
/// source ([`START_MOVE`]): its `instance.host` changes only at its end.
pub(crate) const START_RESIZE: &str = "UPDATE allocations SET move_started = TRUE, \
    instance = FALSE WHERE move_of = $1 AND (NOT move_started OR instance) RETURNING host_id";

/// Gives instance `$1` its held source back as its own, confirmed allocation (the most recent
/// one, should there be several).
pub(crate) const RESTORE_SOURCE: &str = "UPDATE allocations SET instance_uuid = $1, \
    move_of = NULL, move_started = FALSE, instance = TRUE, confirmed = TRUE, imported = FALSE \
    WHERE instance_uuid = (SELECT instance_uuid FROM allocations WHERE move_of = $1 \
    ORDER BY created_ms DESC LIMIT 1)";

/// Confirms a moving instance's claim on its destination, which took it.
pub(crate) const CONFIRM_MOVING: &str = "UPDATE allocations SET confirmed = TRUE \
    WHERE instance_uuid = $1 AND NOT confirmed \
    AND EXISTS (SELECT 1 FROM allocations h WHERE h.move_of = $1)";

/// Removes the held sources of instance `$1` and gives their usage back inside `$tx` of engine
/// `$db`; evaluates to where each was and what it held, for the live table.
/// With `on $host`, only those held on that host (a confirmation's `delete_instance_info`).
macro_rules! release_held_in_tx {
    ($db:ty, $tx:expr, $uuid:expr) => {{
        let uuid: &str = $uuid;
        let rows =
            sqlx::query("DELETE FROM allocations WHERE move_of = $1 RETURNING host_id, resources")
                .bind(uuid)
                .fetch_all(&mut *$tx)
                .await?;
        $crate::ledger::moves::release_held_in_tx!(@give_back $db, $tx, rows)
    }};
    ($db:ty, $tx:expr, $uuid:expr, on $host:expr) => {{
        let (uuid, host): (&str, i64) = ($uuid, $host);
        let rows = sqlx::query(
            "DELETE FROM allocations WHERE move_of = $1 AND host_id = $2 \
             RETURNING host_id, resources",
        )
        .bind(uuid)
        .bind(host)
        .fetch_all(&mut *$tx)
        .await?;
        $crate::ledger::moves::release_held_in_tx!(@give_back $db, $tx, rows)
    }};
    (@give_back $db:ty, $tx:expr, $rows:expr) => {{
        let rows = $rows;
        let mut held: Vec<($crate::domain::HostId, $crate::domain::Resources)> =
            Vec::with_capacity(rows.len());
        for row in &rows {
            let host: i64 = row.try_get(0)?;
            let json: String = row.try_get(1)?;
            sqlx::query(<$db as $crate::ledger::dialect::Dialect>::ADD_USAGE)
                .bind(host)
                .bind(&json)
                .bind(-1i64)
                .execute(&mut *$tx)
                .await?;
            held.push((
                $crate::domain::HostId(host),
                $crate::ledger::claims::parse_resources(&json)?,
            ));
        }
        held
    }};
}
pub(crate) use release_held_in_tx;

/// Undoes instance `$uuid`'s move inside `$tx` of engine `$db`, if it has a held source: its
/// own allocation (the destination) is released and the source becomes its allocation again;
/// evaluates to the hosts that changed (none without a held source).
macro_rules! restore_source_in_tx {
    ($db:ty, $tx:expr, $uuid:expr) => {{
        let uuid: &str = $uuid;
        let mut hosts: Vec<$crate::domain::HostId> = Vec::new();
        // The host of its held source (the most recent, as `RESTORE_SOURCE` takes it).
        let held_on: Option<i64> = sqlx::query_scalar(
            "SELECT host_id FROM allocations WHERE move_of = $1 ORDER BY created_ms DESC LIMIT 1",
        )
        .bind(uuid)
        .fetch_optional(&mut *$tx)
        .await?;
        if let Some(source) = held_on {
            if let Some(old) = $crate::ledger::claims::release_in_tx!($db, $tx, uuid) {
                hosts.push(old.host_id);
            }
            sqlx::query($crate::ledger::moves::RESTORE_SOURCE)
                .bind(uuid)
                .execute(&mut *$tx)
                .await?;
            hosts.push($crate::domain::HostId(source));
        }
        hosts
    }};
}
pub(crate) use restore_source_in_tx;

/// What [`Ledger::settle_failed`] did with a failed operation's claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Settled {
    /// A move that never started: its destination claim released, the instance holds its
    /// source again.
    MoveUndone { destination: HostId, source: HostId },
    /// A build's claim released: Placement holds nothing of the instance.
    Released { host: HostId },
    /// A move that failed before its claim: its source, held under the migration's key, is
    /// the instance's allocation again.
    SourceRestored { source: HostId },
}

impl Ledger {
    /// After Nova reported that an operation on `instance_uuid` failed (a conductor's
    /// `compute_task.*.error`, a compute's `instance.resize.error` or `instance.rebuild.error`)
    /// and Placement was then read to hold the instance as `placed` (host, amounts): the
    /// instance's claim, if it is one this process' Placement claim could not still be on its
    /// way for, follows Placement.
    ///
    /// Acts only on the instance's own allocation when it is an unconfirmed claim (not
    /// imported, made at or before `before_ms`, the failure's time):
    /// - a move not yet started, when Placement holds the instance on its source's host
    ///   alone (or nowhere) and not as the claim: back to its held source, as the rollback
    ///   did in Placement. On the source's own host (a resize there) Placement must hold the
    ///   source's amounts there, not the claim's;
    /// - a build's claim, when Placement holds nothing of the instance: released.
    ///
    /// Anything else (a confirmed allocation, a started move, Placement holding the instance
    /// on another host: a reschedule's alternate, which the conductor claims itself) is left
    /// to the notifications, the TTL and the sync's repair.
    pub async fn settle_failed(
        &self,
        instance_uuid: &str,
        placed: &[(HostId, Resources)],
        before_ms: i64,
    ) -> Result<Option<Settled>, LedgerError> {
        let _shared = self.gate.read().await;
        let settled = super::write_tx!(self, Db, tx => {
            let own: Option<(i64, String, bool, bool, i64)> = sqlx::query_as(
                "SELECT host_id, resources, confirmed, imported, created_ms FROM allocations \
                 WHERE instance_uuid = $1",
            )
            .bind(instance_uuid)
            .fetch_optional(&mut *tx)
            .await?;
            // Its move's source, the most recent (as `RESTORE_SOURCE` takes it).
            let held: Option<(i64, String, bool, i64)> = sqlx::query_as(
                "SELECT host_id, resources, move_started, created_ms FROM allocations \
                 WHERE move_of = $1 ORDER BY created_ms DESC LIMIT 1",
            )
            .bind(instance_uuid)
            .fetch_optional(&mut *tx)
            .await?;
            let source = match &held {
                Some((host, json, false, created)) if *created <= before_ms => {
                    Some((HostId(*host), parse_resources(json)?))
                }
                _ => None,
            };
            match own {
                Some((host, json, false, false, created)) if created <= before_ms => {
                    let claim = (HostId(host), parse_resources(&json)?);
                    match source {
                        Some(source) if move_undone(&claim, &source, placed) => {
                            restore_source_in_tx!(Db, tx, instance_uuid);
                            Some(Settled::MoveUndone {
                                destination: claim.0,
                                source: source.0,
                            })
                        }
                        None if held.is_none() && placed.is_empty() => {
                            super::claims::release_in_tx!(Db, tx, instance_uuid);
                            Some(Settled::Released { host: claim.0 })
                        }
                        _ => None,
                    }
                }
                // No claim yet (the move failed before Parasol was asked, or was refused),
                // its source held under the migration's key since a sync read the conductor's
                // swap (`Ledger::adopt_swapped_source`): Placement holding the instance on
                // that host with those amounts again gives the instance its allocation back.
                None => match source {
                    Some(source) if placed == [source] => {
                        sqlx::query(RESTORE_SOURCE)
                            .bind(instance_uuid)
                            .execute(&mut *tx)
                            .await?;
                        Some(Settled::SourceRestored { source: source.0 })
                    }
                    _ => None,
                },
                _ => None,
            }
        });
        drop(_shared);
        let hosts: Vec<HostId> = match &settled {
            Some(Settled::MoveUndone {
                destination,
                source,
            }) => vec![*destination, *source],
            Some(Settled::Released { host }) | Some(Settled::SourceRestored { source: host }) => {
                vec![*host]
            }
            None => Vec::new(),
        };
        self.reload(&hosts).await?;
        Ok(settled)
    }
}

/// Whether Placement's `placed` (host, amounts) of a moving instance says its move was undone:
/// nothing of it on any host but its held `source`'s, and, on the claim's host, not the
/// claim. When the claim is on the source's own host (a resize there), Placement must hold
/// the source's amounts there, and they must differ from the claim's (else it cannot tell).
fn move_undone(
    claim: &(HostId, Resources),
    source: &(HostId, Resources),
    placed: &[(HostId, Resources)],
) -> bool {
    if placed.iter().any(|(host, _)| *host != source.0) {
        return false;
    }
    if claim.0 != source.0 {
        return true;
    }
    claim.1 != source.1 && placed.iter().any(|(_, amounts)| *amounts == source.1)
}

/// A move's source held on a host, as `/v1/hosts` and `/metrics` show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldMove {
    /// The moving instance.
    pub instance_uuid: String,
    /// The key the source is held under (`<instance>#source`, or the migration's consumer).
    pub key: String,
    pub host_id: HostId,
    pub demand: Resources,
    /// Whether the destination took the instance (no TTL frees the source any more).
    pub started: bool,
    pub since_ms: i64,
}

impl Ledger {
    /// Every move's held source, by host then instance.
    pub async fn held_moves(&self) -> Result<Vec<HeldMove>, LedgerError> {
        read_pool!(self, pool => {
            // `+host_id`: SQLite would otherwise walk every allocation in host order to spare
            // itself the sort (150 ms at 547,000 allocations, on every `GET /v1/hosts`) rather
            // than read the few held moves by the partial index `allocations_move_of`.
            let rows = sqlx::query(
                "SELECT move_of, instance_uuid, host_id, resources, move_started, created_ms \
                 FROM allocations WHERE move_of IS NOT NULL ORDER BY +host_id, move_of",
            )
            .fetch_all(pool)
            .await?;
            let mut out = Vec::with_capacity(rows.len());
            for row in &rows {
                let json: String = row.try_get(3)?;
                out.push(HeldMove {
                    instance_uuid: row.try_get(0)?,
                    key: row.try_get(1)?,
                    host_id: HostId(row.try_get(2)?),
                    demand: parse_resources(&json)?,
                    started: row.try_get(4)?,
                    since_ms: row.try_get(5)?,
                });
            }
            Ok(out)
        })
    }
}
