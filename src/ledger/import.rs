//! Recording allocations that exist outside Parasol (Placement's, for instances created
//! before Parasol): no capacity check, since the instance is already running there. They are
//! marked `imported`, so that a later sync can release those Placement no longer has.

use super::claims::{record_in_tx, release_in_tx};
use super::{read_pool, write_tx, Allocation, Ledger, LedgerError};
use crate::domain::{HostId, Resources};
use sqlx::Row;

impl Ledger {
    /// Records `instance_uuid`'s existing allocation on `host` and adds it to the host's usage,
    /// unconditionally, counted as an instance only if the ledger held it as one before (see
    /// `known_instances`, migration 0008); returns false (and changes nothing) when the ledger already has an
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
            // A move's source held on this host under its instance (`moves`) is this
            // consumer, when the amounts are the same: Nova's conductor moved the source's
            // allocation to the migration's consumer. It takes the consumer's key (and is
            // Placement's from now on), and is not counted twice.
            let held = sqlx::query(
                "SELECT instance_uuid, resources FROM allocations WHERE host_id = $1 \
                 AND move_of IS NOT NULL AND instance_uuid LIKE '%#source' ORDER BY created_ms",
            )
            .bind(host.0)
            .fetch_all(&mut *tx)
            .await?;
            let mut rekeyed = false;
            for row in &held {
                let json: String = row.try_get(1)?;
                if super::claims::parse_resources(&json)? == *demand {
                    let key: String = row.try_get(0)?;
                    sqlx::query(
                        "UPDATE allocations SET instance_uuid = $1, imported = TRUE \
                         WHERE instance_uuid = $2",
                    )
                    .bind(instance_uuid)
                    .bind(&key)
                    .execute(&mut *tx)
                    .await?;
                    rekeyed = true;
                    break;
                }
            }
            let new = !rekeyed && record_in_tx!(Db, tx, instance_uuid, host.0, demand, now_ms);
            if new {
                // Not counted as an instance until an instance message names it (the
                // consumer may be a migration record holding a move's source), unless the
                // ledger held it as an instance before: a failed move gives the instance its
                // allocation back after the sync released it.
                sqlx::query(
                    "UPDATE allocations SET imported = TRUE, instance = EXISTS \
                     (SELECT 1 FROM known_instances WHERE instance_uuid = $1) \
                     WHERE instance_uuid = $1",
                )
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

    /// A consumer new to the ledger on `host` with `demand` may be the migration record Nova's
    /// conductor moved an instance's allocation to before it asked for the move's destination
    /// (`replace_allocation_with_migration`), read by a sync that came before the move's claim:
    /// the instance's confirmed allocation is on `host` with exactly these amounts and
    /// Placement no longer lists the instance there (`present`: the consumers Placement has on
    /// `host`). That allocation is then the move's source, held under the migration's key
    /// (`move_of` the instance, imported: Placement's), as it is when the claim comes first
    /// and the sync renames the held source ([`Ledger::record_existing_allocation`]); not a
    /// second allocation of the same amounts. Returns the instance when it was so.
    pub async fn adopt_swapped_source(
        &self,
        host: HostId,
        consumer: &str,
        demand: &Resources,
        present: &[&str],
    ) -> Result<Option<String>, LedgerError> {
        let json = super::claims::resources_json(demand);
        let adopted = write_tx!(self, Db, tx => {
            let rows: Vec<String> = sqlx::query_scalar(
                "SELECT instance_uuid FROM allocations WHERE host_id = $1 AND resources = $2 \
                 AND confirmed AND instance AND NOT imported AND move_of IS NULL \
                 ORDER BY created_ms",
            )
            .bind(host.0)
            .bind(&json)
            .fetch_all(&mut *tx)
            .await?;
            let swapped = rows
                .into_iter()
                .find(|uuid| !uuid.contains('@') && !present.contains(&uuid.as_str()));
            if let Some(instance) = &swapped {
                sqlx::query(
                    "UPDATE allocations SET instance_uuid = $1, move_of = $2, \
                     move_started = FALSE, imported = TRUE WHERE instance_uuid = $2",
                )
                .bind(consumer)
                .bind(instance)
                .execute(&mut *tx)
                .await?;
            }
            swapped
        });
        Ok(adopted)
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

/// A [`StoredAllocation`] from a row of `SELECT instance_uuid, host_id, resources, created_ms,
/// imported, instance` (either database's row type).
macro_rules! stored_row {
    ($row:expr) => {{
        let row = $row;
        let json: String = row.try_get(2)?;
        StoredAllocation {
            instance_uuid: row.try_get(0)?,
            host_id: HostId(row.try_get(1)?),
            demand: super::claims::parse_resources(&json)?,
            resources_json: json,
            created_ms: row.try_get(3)?,
            imported: row.try_get(4)?,
            instance: row.try_get(5)?,
        }
    }};
}

/// One allocation as the ledger stores it, for the consistency check against Placement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredAllocation {
    pub instance_uuid: String,
    pub host_id: HostId,
    pub demand: Resources,
    /// The stored amounts, verbatim: a repair applies only if they are still these.
    pub resources_json: String,
    pub created_ms: i64,
    pub imported: bool,
    /// Known to be an instance (counted in the host's `num_instances`).
    pub instance: bool,
}

impl Ledger {
    /// The keys of the allocations held for a part of a consumer on another provider
    /// (`<consumer>@<provider>`, see the Placement sync), one read.
    pub async fn part_keys(&self) -> Result<Vec<String>, LedgerError> {
        read_pool!(self, pool => {
            Ok(sqlx::query_scalar(
                "SELECT instance_uuid FROM allocations WHERE instance_uuid LIKE '%@%'",
            )
            .fetch_all(pool)
            .await?)
        })
    }

    /// Every allocation, in instance order, but a move's source still held under its
    /// instance's key (`moves`): Placement has no consumer of that name, and its sync renames it
    /// once it sees the migration's.
    pub async fn stored_allocations(&self) -> Result<Vec<StoredAllocation>, LedgerError> {
        read_pool!(self, pool => {
            let rows = sqlx::query(
                "SELECT instance_uuid, host_id, resources, created_ms, imported, instance \
                 FROM allocations WHERE NOT (move_of IS NOT NULL AND instance_uuid LIKE '%#source') \
                 ORDER BY instance_uuid",
            )
            .fetch_all(pool)
            .await?;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                out.push(stored_row!(row));
            }
            Ok(out)
        })
    }

    /// [`Self::stored_allocations`] on `hosts` only, one read per host (a consistency check
    /// of the few hosts a sync found changed).
    pub async fn stored_allocations_on(
        &self,
        hosts: &[HostId],
    ) -> Result<Vec<StoredAllocation>, LedgerError> {
        let mut out = Vec::new();
        for host in hosts {
            read_pool!(self, pool => {
                let rows = sqlx::query(
                    "SELECT instance_uuid, host_id, resources, created_ms, imported, instance \
                     FROM allocations WHERE host_id = $1 AND \
                     NOT (move_of IS NOT NULL AND instance_uuid LIKE '%#source')",
                )
                .bind(host.0)
                .fetch_all(pool)
                .await?;
                for row in rows {
                    out.push(stored_row!(row));
                }
                Ok::<(), LedgerError>(())
            })?;
        }
        out.sort_by(|a, b| a.instance_uuid.cmp(&b.instance_uuid));
        Ok(out)
    }

    /// Repairs `stored` from Placement's view, in one transaction, only if the ledger still
    /// holds it exactly (same host and amounts): released when `to` is `None`, otherwise
    /// recorded on `to`'s host with `to`'s amounts (no capacity check: Placement holds it
    /// there). Returns whether it applied.
    pub async fn repair_allocation(
        &self,
        stored: &StoredAllocation,
        to: Option<(HostId, &Resources)>,
        now_ms: i64,
    ) -> Result<bool, LedgerError> {
        if let Some((_, demand)) = to {
            if !demand.is_non_negative() {
                return Err(LedgerError::Invalid(format!(
                    "negative amounts in {}",
                    super::claims::resources_json(demand)
                )));
            }
        }
        let applied = write_tx!(self, Db, tx => {
            let deleted = sqlx::query(
                "DELETE FROM allocations WHERE instance_uuid = $1 AND host_id = $2 \
                 AND resources = $3",
            )
            .bind(&stored.instance_uuid)
            .bind(stored.host_id.0)
            .bind(&stored.resources_json)
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1;
            if deleted {
                sqlx::query(<Db as super::dialect::Dialect>::ADD_USAGE)
                    .bind(stored.host_id.0)
                    .bind(&stored.resources_json)
                    .bind(-1i64)
                    .execute(&mut *tx)
                    .await?;
                if let Some((host, demand)) = to {
                    record_in_tx!(Db, tx, &stored.instance_uuid, host.0, demand, now_ms);
                    sqlx::query(
                        "UPDATE allocations SET imported = $2, instance = $3 \
                         WHERE instance_uuid = $1",
                    )
                        .bind(&stored.instance_uuid)
                        .bind(stored.imported)
                        .bind(stored.instance)
                        .execute(&mut *tx)
                        .await?;
                    // Placement holds the instance where its move's source is held, with the
                    // source's amounts: Nova undid the move (a failed `prep_resize` or
                    // `resize_instance`, whose `_revert_allocation` moves the source's
                    // allocation back to the instance, and which no notification of ours
                    // reports). The held source is that same allocation: it goes, or the
                    // host would hold the instance twice (`moves`).
                    let key = super::moves::held_key(&stored.instance_uuid);
                    // One row at most: the key is the instance's own.
                    let held: Option<String> = sqlx::query_scalar(
                        "SELECT resources FROM allocations WHERE instance_uuid = $1 \
                         AND host_id = $2",
                    )
                    .bind(&key)
                    .bind(host.0)
                    .fetch_optional(&mut *tx)
                    .await?;
                    if let Some(json) = held {
                        if super::claims::parse_resources(&json)? == *demand {
                            sqlx::query("DELETE FROM allocations WHERE instance_uuid = $1")
                                .bind(&key)
                                .execute(&mut *tx)
                                .await?;
                            sqlx::query(<Db as super::dialect::Dialect>::ADD_USAGE)
                                .bind(host.0)
                                .bind(&json)
                                .bind(-1i64)
                                .execute(&mut *tx)
                                .await?;
                            sqlx::query(
                                "UPDATE allocations SET instance = TRUE, confirmed = TRUE \
                                 WHERE instance_uuid = $1",
                            )
                            .bind(&stored.instance_uuid)
                            .execute(&mut *tx)
                            .await?;
                        }
                    }
                }
            }
            deleted
        });
        if applied {
            let mut hosts = vec![stored.host_id];
            if let Some((host, _)) = to {
                if host != stored.host_id {
                    hosts.push(host);
                }
            }
            self.reload(&hosts).await?;
        }
        Ok(applied)
    }
}
