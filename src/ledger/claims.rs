//! Claims and releases: the only writes on the scheduling path.
//!
//! A claim succeeds only if every class of the host still fits `usable − used`, and writes the
//! usage and the allocation row in one transaction. PostgreSQL evaluates the conditional UPDATE
//! on the latest row version under its row lock; SQLite (one writer at a time, `BEGIN
//! IMMEDIATE`) checks the fit in the allocation's conditional INSERT and adds the usage only if
//! that row went in, as one batch. Either way no host is ever oversubscribed however many
//! workers or processes race.

use super::{read_pool, write_pool, Ledger, LedgerError};
use crate::domain::{HostId, Resources};
use sqlx::Row;
use std::sync::OnceLock;

/// What a claim came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimOutcome {
    Claimed,
    /// The host no longer had room in at least one class (or no longer exists).
    Declined,
}

/// One instance's allocation on a host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    pub instance_uuid: String,
    pub host_id: HostId,
    pub demand: Resources,
    pub confirmed: bool,
}

pub(crate) const CLAIM_UPDATE: &str = "UPDATE hosts SET vcpu_used = vcpu_used + $1, \
    memory_mb_used = memory_mb_used + $2, disk_gb_used = disk_gb_used + $3, \
    num_instances = num_instances + 1, num_io_ops = num_io_ops + 1 \
    WHERE id = $4 AND vcpu_used + $1 <= vcpu_usable AND memory_mb_used + $2 <= memory_mb_usable \
    AND disk_gb_used + $3 <= disk_gb_usable";

/// SQLite's claims in one round trip to sqlx's worker thread and one `BEGIN IMMEDIATE`
/// transaction (SQLite's single writer). For the `i`-th claim of the group (parameters
/// `$6i+1 … $6i+6`: vcpu, memory, disk, host id, instance, time) the allocation row is inserted
/// only if the host still fits the demand and the instance holds no allocation yet, and the usage
/// is added only if that insert happened; the claim answers `2i+1` when it claimed, `2i` when the
/// instance already holds an allocation (a reschedule, left to [`Ledger::claim_in_tx`]) and no
/// row when the host no longer fits. Each claim sees the usage of those before it, exactly as if
/// they had run one after another. Built once per group size.
fn claim_group_sql(n: usize) -> &'static str {
    static BUILT: [OnceLock<String>; MAX_GROUP] = [const { OnceLock::new() }; MAX_GROUP];
    BUILT[n - 1].get_or_init(|| build_claim_group_sql(n))
}

fn build_claim_group_sql(n: usize) -> String {
    let mut sql = String::with_capacity(80 + 760 * n);
    sql.push_str("BEGIN IMMEDIATE;");
    for i in 0..n {
        let p = |k: usize| 6 * i + k;
        let (v, m, d, host, uuid, now) = (p(1), p(2), p(3), p(4), p(5), p(6));
        let fits = format!(
            "vcpu_used + ${v} <= vcpu_usable AND memory_mb_used + ${m} <= memory_mb_usable \
             AND disk_gb_used + ${d} <= disk_gb_usable"
        );
        sql.push_str(&format!(
            " INSERT INTO allocations (instance_uuid, host_id, vcpu, memory_mb, disk_gb, \
             confirmed, created_ms) SELECT ${uuid}, id, ${v}, ${m}, ${d}, 0, ${now} FROM hosts \
             WHERE id = ${host} AND {fits} \
             AND NOT EXISTS (SELECT 1 FROM allocations WHERE instance_uuid = ${uuid}); \
             UPDATE hosts SET vcpu_used = vcpu_used + ${v}, memory_mb_used = memory_mb_used + ${m}, \
             disk_gb_used = disk_gb_used + ${d}, num_instances = num_instances + 1, \
             num_io_ops = num_io_ops + 1 WHERE id = ${host} AND changes() = 1 RETURNING {claimed}; \
             SELECT {held} WHERE changes() = 0 \
             AND EXISTS (SELECT 1 FROM allocations WHERE instance_uuid = ${uuid});",
            claimed = 2 * i + 1,
            held = 2 * i,
        ));
    }
    sql.push_str(" COMMIT;");
    sql
}

/// Most claims one transaction takes (six parameters each).
const MAX_GROUP: usize = 64;

/// A claim waiting for SQLite's writer.
#[derive(Debug)]
pub(crate) struct PendingClaim {
    host: HostId,
    instance_uuid: String,
    demand: Resources,
    now_ms: i64,
    reply: tokio::sync::oneshot::Sender<Result<Option<ClaimOutcome>, LedgerError>>,
}

pub(crate) const ADD_USAGE: &str = "UPDATE hosts SET vcpu_used = vcpu_used + $1, \
    memory_mb_used = memory_mb_used + $2, disk_gb_used = disk_gb_used + $3, \
    num_instances = CASE WHEN num_instances + $5 < 0 THEN 0 ELSE num_instances + $5 END, \
    num_io_ops = CASE WHEN num_io_ops + $5 < 0 THEN 0 ELSE num_io_ops + $5 END WHERE id = $4";

pub(crate) const INSERT_ALLOCATION: &str =
    "INSERT INTO allocations (instance_uuid, host_id, vcpu, \
    memory_mb, disk_gb, confirmed, created_ms) VALUES ($1, $2, $3, $4, $5, $6, $7) \
    ON CONFLICT (instance_uuid) DO NOTHING";

pub(crate) const DELETE_ALLOCATION: &str = "DELETE FROM allocations WHERE instance_uuid = $1 \
    RETURNING host_id, vcpu, memory_mb, disk_gb, confirmed";

/// Inserts an allocation row inside `$tx` (no-op when the instance already has one).
macro_rules! insert_allocation {
    ($tx:expr, $uuid:expr, $host_id:expr, $demand:expr, $confirmed:expr, $now_ms:expr) => {{
        let d: &$crate::domain::Resources = $demand;
        sqlx::query($crate::ledger::claims::INSERT_ALLOCATION)
            .bind($uuid)
            .bind($host_id)
            .bind(d.0[0])
            .bind(d.0[1])
            .bind(d.0[2])
            .bind($confirmed)
            .bind($now_ms)
            .execute(&mut *$tx)
            .await
    }};
}
pub(crate) use insert_allocation;

/// Adds `$demand` (times `$sign`, ±1) to a host's usage unconditionally, inside `$tx`.
macro_rules! add_usage {
    ($tx:expr, $host_id:expr, $demand:expr, $sign:expr) => {{
        let d: $crate::domain::Resources = $demand;
        let sign: i64 = $sign;
        sqlx::query($crate::ledger::claims::ADD_USAGE)
            .bind(sign * d.0[0])
            .bind(sign * d.0[1])
            .bind(sign * d.0[2])
            .bind($host_id)
            .bind(sign)
            .execute(&mut *$tx)
            .await
    }};
}
pub(crate) use add_usage;

/// Deletes an instance's allocation and gives its usage back, inside `$tx`; evaluates to the
/// removed allocation, if there was one.
macro_rules! release_in_tx {
    ($tx:expr, $uuid:expr) => {{
        let uuid: &str = $uuid;
        let row = sqlx::query($crate::ledger::claims::DELETE_ALLOCATION)
            .bind(uuid)
            .fetch_optional(&mut *$tx)
            .await?;
        match row {
            None => None,
            Some(row) => {
                let alloc = $crate::ledger::Allocation {
                    instance_uuid: uuid.to_string(),
                    host_id: $crate::domain::HostId(row.try_get(0)?),
                    demand: $crate::domain::Resources([
                        row.try_get(1)?,
                        row.try_get(2)?,
                        row.try_get(3)?,
                    ]),
                    confirmed: row.try_get(4)?,
                };
                $crate::ledger::claims::add_usage!($tx, alloc.host_id.0, alloc.demand, -1)?;
                Some(alloc)
            }
        }
    }};
}
pub(crate) use release_in_tx;

/// Runs `claims` as one transaction; per claim `None` when the instance already holds an
/// allocation.
async fn claim_group(
    conn: &mut sqlx::SqliteConnection,
    claims: &[PendingClaim],
) -> Result<Vec<Option<ClaimOutcome>>, LedgerError> {
    let mut query = sqlx::query(claim_group_sql(claims.len()));
    for c in claims {
        query = query
            .bind(c.demand.0[0])
            .bind(c.demand.0[1])
            .bind(c.demand.0[2])
            .bind(c.host.0)
            .bind(c.instance_uuid.as_str())
            .bind(c.now_ms);
    }
    let rows = match query.fetch_all(&mut *conn).await {
        Ok(rows) => rows,
        Err(e) => {
            // The batch stopped part-way: undo whatever it began (an error here only means
            // no transaction was open).
            let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
            return Err(e.into());
        }
    };
    let mut outcomes = vec![Some(ClaimOutcome::Declined); claims.len()];
    for row in rows {
        let code: i64 = row.try_get(0)?;
        let slot = usize::try_from(code / 2)
            .ok()
            .and_then(|i| outcomes.get_mut(i))
            .ok_or_else(|| LedgerError::Invalid(format!("claim batch answered {code}")))?;
        *slot = (code % 2 == 1).then_some(ClaimOutcome::Claimed);
    }
    Ok(outcomes)
}

/// True for SQLite's "database is busy / locked" (another process held the write lock past
/// the busy timeout): a failure of the whole ledger, not of one claim.
fn ledger_busy(e: &LedgerError) -> bool {
    let LedgerError::Database(sqlx::Error::Database(db)) = e else {
        return false;
    };
    let code = db.code().and_then(|c| c.parse::<i32>().ok()).unwrap_or(0);
    matches!(code & 0xff, 5 | 6)
}

/// Runs the queued claims on the writer's connection, `MAX_GROUP` to a transaction, and answers
/// each. When a group fails, its claims are retried one by one so that each gets its own
/// outcome or error — unless the ledger was busy, which every retry would wait out again: then
/// each claim of the group gets that error at once.
async fn run_claims(conn: &mut sqlx::SqliteConnection, mut queued: Vec<PendingClaim>) {
    while !queued.is_empty() {
        let rest = queued.split_off(queued.len().min(MAX_GROUP));
        match claim_group(conn, &queued).await {
            Ok(outcomes) => {
                for (claim, outcome) in queued.into_iter().zip(outcomes) {
                    let _ = claim.reply.send(Ok(outcome));
                }
            }
            Err(e) if queued.len() == 1 => {
                let _ = queued.pop().map(|claim| claim.reply.send(Err(e)));
            }
            Err(e) if ledger_busy(&e) => {
                for claim in queued {
                    let busy = LedgerError::Invalid(format!("claim not made: {e}"));
                    let _ = claim.reply.send(Err(busy));
                }
            }
            Err(_) => {
                for claim in queued {
                    let outcome = claim_group(conn, std::slice::from_ref(&claim))
                        .await
                        .map(|mut o| o.pop().flatten());
                    let _ = claim.reply.send(outcome);
                }
            }
        }
        queued = rest;
    }
}

impl Ledger {
    /// Claims `demand` on `host` for `instance_uuid`. An earlier allocation of the same
    /// instance (a reschedule) is released in the same transaction.
    pub async fn claim(
        &self,
        host: HostId,
        instance_uuid: &str,
        demand: &Resources,
        now_ms: i64,
    ) -> Result<ClaimOutcome, LedgerError> {
        if !demand.is_non_negative() {
            return Err(LedgerError::Invalid(format!("negative demand {demand:?}")));
        }
        if let super::Pools::Sqlite { write, .. } = &self.pools {
            // Group commit: claims queued while the writer is busy run in one transaction. The
            // serving task is spawned so that a caller that gives up cannot leave a group
            // half-run on the connection with its transaction open.
            let (reply, answer) = tokio::sync::oneshot::channel();
            let first = write.claims.push(PendingClaim {
                host,
                instance_uuid: instance_uuid.to_string(),
                demand: *demand,
                now_ms,
                reply,
            });
            if first {
                let write = write.clone();
                tokio::spawn(async move {
                    let mut conn = write.lock_owned().await;
                    run_claims(&mut conn, write.claims.take()).await;
                });
            }
            let outcome = answer.await.map_err(|_| {
                LedgerError::Invalid("the claim's writer task ended without an answer".into())
            })??;
            if let Some(outcome) = outcome {
                return Ok(outcome);
            }
        }
        self.claim_in_tx(host, instance_uuid, demand, now_ms).await
    }

    /// The claim as an explicit transaction: PostgreSQL's, and SQLite's for a reschedule.
    async fn claim_in_tx(
        &self,
        host: HostId,
        instance_uuid: &str,
        demand: &Resources,
        now_ms: i64,
    ) -> Result<ClaimOutcome, LedgerError> {
        write_pool!(self, pool => {
            let mut tx = pool.begin().await?;
            let updated = sqlx::query(CLAIM_UPDATE)
                .bind(demand.0[0])
                .bind(demand.0[1])
                .bind(demand.0[2])
                .bind(host.0)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if updated == 0 {
                tx.rollback().await?;
                return Ok(ClaimOutcome::Declined);
            }
            let inserted = insert_allocation!(tx, instance_uuid, host.0, demand, false, now_ms)?;
            if inserted.rows_affected() == 0 {
                release_in_tx!(tx, instance_uuid);
                insert_allocation!(tx, instance_uuid, host.0, demand, false, now_ms)?;
            }
            tx.commit().await?;
            Ok(ClaimOutcome::Claimed)
        })
    }

    /// Releases an instance's allocation; releasing one that is gone is a no-op.
    pub async fn release(&self, instance_uuid: &str) -> Result<Option<Allocation>, LedgerError> {
        write_pool!(self, pool => {
            let mut tx = pool.begin().await?;
            let released = release_in_tx!(tx, instance_uuid);
            tx.commit().await?;
            Ok(released)
        })
    }

    /// The allocation of one instance.
    pub async fn allocation(&self, instance_uuid: &str) -> Result<Option<Allocation>, LedgerError> {
        read_pool!(self, pool => {
            let row = sqlx::query(
                "SELECT host_id, vcpu, memory_mb, disk_gb, confirmed FROM allocations WHERE instance_uuid = $1",
            )
            .bind(instance_uuid)
            .fetch_optional(pool)
            .await?;
            match row {
                None => Ok(None),
                Some(row) => Ok(Some(Allocation {
                    instance_uuid: instance_uuid.to_string(),
                    host_id: HostId(row.try_get(0)?),
                    demand: Resources([row.try_get(1)?, row.try_get(2)?, row.try_get(3)?]),
                    confirmed: row.try_get(4)?,
                })),
            }
        })
    }

    /// Number of allocations in the ledger.
    pub async fn allocation_count(&self) -> Result<i64, LedgerError> {
        read_pool!(self, pool => {
            Ok(sqlx::query_scalar("SELECT COUNT(*) FROM allocations").fetch_one(pool).await?)
        })
    }
}
