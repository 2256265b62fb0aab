//! Claims and releases: the only writes on the scheduling path.
//!
//! A claim is reserved in the live table first (atomically: no two claims of this process
//! take the same room), then queued for the database. Whoever queues into an empty queue
//! starts the one task that serves it: that task takes every claim queued by the time it has
//! a connection and commits them as one group, one transaction (group commit: at low load a
//! group is one claim and waits for nothing; under load a group is whatever queued while the
//! previous one committed). In the database each claim is conditional again — the allocation
//! row goes in only if the host still has room in every class, and the usage is added only
//! if it did — because the database is the authority between processes. The table then
//! keeps a committed claim and gives back one the database refused; only then is the claim
//! answered, so an answered claim is durable.
//!
//! SQLite runs a group on its hot writer thread (`hot`): each claim as statements that give
//! back what they took when it is declined (no savepoint), one commit for the group, as
//! direct calls on the thread's connection; PostgreSQL as one
//! statement per round of at most one claim per host (usually one round), on any pool
//! connection, so groups of several tasks commit side by side.

use super::{read_pool, write_tx, Ledger, LedgerError, Pools};
use crate::domain::{ClassId, HostId, Resources};
use rusqlite::OptionalExtension;
use sqlx::Row;
use std::collections::HashMap;

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

/// Amounts as the ledger stores them: `{"CLASS": amount}` for every non-zero class.
pub(crate) fn resources_json(r: &Resources) -> String {
    serde_json::to_string(&r.to_map()).unwrap_or_else(|_| "{}".into())
}

/// Parses [`resources_json`]'s form.
pub(crate) fn parse_resources(json: &str) -> Result<Resources, LedgerError> {
    let map: HashMap<String, i64> = serde_json::from_str(json)
        .map_err(|e| LedgerError::Invalid(format!("allocation amounts {json:?}: {e}")))?;
    let mut r = Resources::ZERO;
    for (class, amount) in map {
        let id = ClassId::intern(&class).map_err(|e| LedgerError::Invalid(e.to_string()))?;
        r.set(id, amount);
    }
    Ok(r)
}

/// Deletes an instance's allocation and gives its usage back, inside `$tx` of engine `$db`;
/// evaluates to the removed [`Allocation`], if there was one.
macro_rules! release_in_tx {
    ($db:ty, $tx:expr, $uuid:expr) => {{
        let uuid: &str = $uuid;
        let row = sqlx::query(
            "DELETE FROM allocations WHERE instance_uuid = $1 RETURNING host_id, resources, confirmed",
        )
        .bind(uuid)
        .fetch_optional(&mut *$tx)
        .await?;
        match row {
            None => None,
            Some(row) => {
                let json: String = row.try_get(1)?;
                let alloc = $crate::ledger::Allocation {
                    instance_uuid: uuid.to_string(),
                    host_id: $crate::domain::HostId(row.try_get(0)?),
                    demand: $crate::ledger::claims::parse_resources(&json)?,
                    confirmed: row.try_get(2)?,
                };
                sqlx::query(<$db as $crate::ledger::dialect::Dialect>::ADD_USAGE)
                    .bind(alloc.host_id.0)
                    .bind(&json)
                    .bind(-1i64)
                    .execute(&mut *$tx)
                    .await?;
                Some(alloc)
            }
        }
    }};
}
pub(crate) use release_in_tx;

pub(crate) const INSERT_ALLOCATION: &str = "INSERT INTO allocations (instance_uuid, host_id, \
    resources, confirmed, created_ms) VALUES ($1, $2, $3, $4, $5) \
    ON CONFLICT (instance_uuid) DO NOTHING";

/// Records a confirmed allocation and adds its usage, unconditionally (the instance is already
/// there), inside `$tx` of engine `$db`; evaluates to whether it was new.
macro_rules! record_in_tx {
    ($db:ty, $tx:expr, $uuid:expr, $host:expr, $demand:expr, $now_ms:expr) => {{
        let json = $crate::ledger::claims::resources_json($demand);
        let inserted = sqlx::query($crate::ledger::claims::INSERT_ALLOCATION)
            .bind($uuid)
            .bind($host)
            .bind(&json)
            .bind(true)
            .bind($now_ms)
            .execute(&mut *$tx)
            .await?
            .rows_affected()
            == 1;
        if inserted {
            sqlx::query(<$db as $crate::ledger::dialect::Dialect>::ADD_USAGE)
                .bind($host)
                .bind(&json)
                .bind(1i64)
                .execute(&mut *$tx)
                .await?;
        }
        inserted
    }};
}
pub(crate) use record_in_tx;

/// SQLite: takes `?3` of class `?2` on host `?1` if it still fits (one row changed, or none:
/// no room, or no such class or host).
const SQLITE_TAKE: &str = "UPDATE inventories SET used = used + ?3 \
    WHERE host_id = ?1 AND resource_class = ?2 AND used + ?3 <= usable";

/// SQLite: records instance `?2`'s allocation `?3` (amounts JSON) on host `?1` at `?4`, unless
/// the instance holds one (no row changed).
const SQLITE_ALLOCATE: &str = "INSERT INTO allocations (instance_uuid, host_id, resources, \
    confirmed, created_ms) VALUES (?2, ?1, ?3, 0, ?4) ON CONFLICT (instance_uuid) DO NOTHING";

/// SQLite: adds `?3` times the amounts `?2` (JSON) to host `?1`'s usage.
const SQLITE_ADD_USAGE: &str = "UPDATE inventories SET used = max(0, used + ?3 * \
    (SELECT d.value FROM json_each(?2) d WHERE d.key = inventories.resource_class)) \
    WHERE host_id = ?1 AND resource_class IN (SELECT key FROM json_each(?2))";

/// SQLite: removes instance `?1`'s allocation, answering where it was and what it held.
const SQLITE_RELEASE: &str =
    "DELETE FROM allocations WHERE instance_uuid = ?1 RETURNING host_id, resources";

/// A claim as a job of SQLite's hot writer (see `hot`): conditional in the database as in
/// the table, because the database is the authority between processes. It undoes itself
/// (`write_bare`); a reschedule (the instance holds an allocation already) releases the
/// old one in a savepoint of its own, rolled back whole when the claim is not made (the old
/// allocation stays).
struct HotClaim {
    claim: PendingClaim,
    outcome: Result<ClaimOutcome, LedgerError>,
    /// The allocations a reschedule released: (host, amounts).
    released: Vec<(HostId, Resources)>,
}

impl HotClaim {
    /// The claim's statements: every class taken where it still fits, then the allocation
    /// recorded. `Declined` leaves the savepoint to be rolled back.
    fn write(&mut self, db: &rusqlite::Connection) -> Result<ClaimOutcome, LedgerError> {
        let c = &self.claim;
        {
            let mut take = db.prepare_cached(SQLITE_TAKE)?;
            for (class, amount) in c.demand.nonzero() {
                if take.execute(rusqlite::params![c.host.0, class.name(), amount])? != 1 {
                    return Ok(ClaimOutcome::Declined);
                }
            }
        }
        let allocate = |db: &rusqlite::Connection| -> Result<bool, LedgerError> {
            Ok(db
                .prepare_cached(SQLITE_ALLOCATE)?
                .execute(rusqlite::params![
                    c.host.0,
                    c.instance_uuid,
                    c.json,
                    c.now_ms
                ])?
                == 1)
        };
        if allocate(db)? {
            return Ok(ClaimOutcome::Claimed);
        }
        // The instance holds an allocation already. Confirmed, it runs there and this claim
        // is a move (a rebuild claims nothing): the source stays held until the move ends
        // (`moves`). Unconfirmed, it is a reschedule of a build or of a move's destination:
        // the earlier claim goes, in the same savepoint.
        let confirmed: Option<bool> = db
            .prepare_cached(super::moves::SQLITE_CONFIRMED)?
            .query_row([c.instance_uuid.as_str()], |row| row.get(0))
            .optional()?;
        match confirmed {
            None => return Ok(ClaimOutcome::Declined),
            Some(true) => {
                // A move's source held from an earlier move that never ended is stale: the
                // instance runs on its confirmed allocation now.
                let stale: Vec<(HostId, String)> = {
                    let mut drop = db.prepare_cached(super::moves::SQLITE_DROP_HELD)?;
                    let rows = drop.query_map([c.instance_uuid.as_str()], |row| {
                        Ok((HostId(row.get(0)?), row.get(1)?))
                    })?;
                    rows.collect::<Result<_, _>>()?
                };
                for (host, json) in stale {
                    db.prepare_cached(SQLITE_ADD_USAGE)?
                        .execute(rusqlite::params![host.0, json, -1i64])?;
                    self.released.push((host, parse_resources(&json)?));
                }
                db.prepare_cached(super::moves::SQLITE_HOLD_SOURCE)?
                    .execute(rusqlite::params![
                        c.instance_uuid,
                        super::moves::held_key(&c.instance_uuid),
                        c.now_ms
                    ])?;
            }
            Some(false) => {
                let mut release = db.prepare_cached(SQLITE_RELEASE)?;
                let mut rows = release.query([c.instance_uuid.as_str()])?;
                if let Some(row) = rows.next()? {
                    let (host, json): (HostId, String) = (HostId(row.get(0)?), row.get(1)?);
                    drop(rows);
                    db.prepare_cached(SQLITE_ADD_USAGE)?
                        .execute(rusqlite::params![host.0, json, -1i64])?;
                    self.released.push((host, parse_resources(&json)?));
                }
            }
        }
        Ok(if allocate(db)? {
            ClaimOutcome::Claimed
        } else {
            ClaimOutcome::Declined
        })
    }
}

/// What [`HotClaim::write_bare`] came to.
enum Bare {
    /// Made, or declined with nothing written.
    Done(ClaimOutcome),
    /// A statement failed with nothing of the claim written.
    Failed(LedgerError),
    /// Something of the claim is written and could not be taken back.
    Spoiled(LedgerError),
    /// Nothing written: the claim is for the general way (a reschedule, or a claim of no
    /// class).
    General,
}

/// SQLite: gives back `?3` of class `?2` on host `?1` that a claim of this transaction took.
const SQLITE_GIVE_BACK: &str = "UPDATE inventories SET used = used - ?3 \
    WHERE host_id = ?1 AND resource_class = ?2";

impl HotClaim {
    /// The claim without a savepoint: every class taken where it still fits, then the
    /// allocation recorded. A class without room gives back the classes taken before it
    /// (declined, nothing written); an instance that holds an allocation already (a
    /// reschedule) gives back every class and goes the general way. (One `UPDATE` for all the
    /// classes, conditional on a count of the rows that fit, cost more: SQLite runs an
    /// `UPDATE` that reads its own table in two passes, through a temporary b-tree.)
    fn write_bare(&mut self, db: &rusqlite::Connection) -> Bare {
        let c = &self.claim;
        let classes: Vec<(std::sync::Arc<str>, i64)> = c
            .demand
            .nonzero()
            .map(|(class, amount)| (class.name(), amount))
            .collect();
        if classes.is_empty() {
            return Bare::General;
        }
        // Gives back the first `taken` classes, then answers `then`.
        let give_back = |taken: usize, then: Bare| -> Bare {
            if taken == 0 {
                return then;
            }
            if let Some(e) = super::hot::transaction_lost(db, "during a claim") {
                return Bare::Spoiled(e);
            }
            let given = || -> Result<(), LedgerError> {
                let mut statement = db.prepare_cached(SQLITE_GIVE_BACK)?;
                for (class, amount) in &classes[..taken] {
                    if statement.execute(rusqlite::params![c.host.0, class, amount])? != 1 {
                        return Err(LedgerError::Invalid(format!(
                            "a claim's {class} could not be given back"
                        )));
                    }
                }
                Ok(())
            };
            match given() {
                Ok(()) => then,
                Err(e) => Bare::Spoiled(e),
            }
        };
        let mut take = match db.prepare_cached(SQLITE_TAKE) {
            Ok(take) => take,
            Err(e) => return Bare::Failed(e.into()),
        };
        for (i, (class, amount)) in classes.iter().enumerate() {
            match take.execute(rusqlite::params![c.host.0, class, amount]) {
                Ok(1) => {}
                Ok(_) => return give_back(i, Bare::Done(ClaimOutcome::Declined)),
                Err(e) => return give_back(i, Bare::Failed(e.into())),
            }
        }
        let allocated = db.prepare_cached(SQLITE_ALLOCATE).and_then(|mut s| {
            s.execute(rusqlite::params![
                c.host.0,
                c.instance_uuid,
                c.json,
                c.now_ms
            ])
        });
        let all = classes.len();
        match allocated {
            Ok(1) => Bare::Done(ClaimOutcome::Claimed),
            Ok(_) => give_back(all, Bare::General),
            Err(e) => give_back(all, Bare::Failed(e.into())),
        }
    }

    /// The general way ([`HotClaim::write`]) in a savepoint of the claim's own, rolled back
    /// unless the claim was made; the outcome is the claim's. `Err`: the savepoint's own
    /// statements failed.
    fn write_in_savepoint(&mut self, db: &rusqlite::Connection) -> Result<(), LedgerError> {
        db.prepare_cached("SAVEPOINT claim")?.execute([])?;
        self.outcome = self.write(db);
        if !matches!(self.outcome, Ok(ClaimOutcome::Claimed)) {
            db.prepare_cached("ROLLBACK TO claim")?.execute([])?;
        }
        db.prepare_cached("RELEASE claim")?.execute([])?;
        Ok(())
    }
}

impl super::hot::Work for HotClaim {
    fn run(&mut self, db: &rusqlite::Connection, _table: &super::HostTable) -> super::hot::Step {
        use super::hot::Step;
        self.released.clear();
        let general = match self.write_bare(db) {
            Bare::Done(outcome) => {
                self.outcome = Ok(outcome);
                return match outcome {
                    ClaimOutcome::Claimed => Step::Keep,
                    ClaimOutcome::Declined => Step::Undo,
                };
            }
            Bare::Failed(e) => {
                self.outcome = Err(e);
                return Step::Undo;
            }
            Bare::Spoiled(e) => {
                self.outcome = Err(LedgerError::Invalid(format!("claim not made: {e}")));
                return Step::Spoiled(e);
            }
            Bare::General => self.write_in_savepoint(db),
        };
        match general {
            Ok(()) if matches!(self.outcome, Ok(ClaimOutcome::Claimed)) => Step::Keep,
            Ok(()) => {
                self.released.clear();
                Step::Undo
            }
            Err(e) => {
                self.outcome = Err(LedgerError::Invalid(format!("claim not made: {e}")));
                Step::Spoiled(e)
            }
        }
    }

    fn undoes_itself(&self) -> bool {
        true
    }

    fn committed(self: Box<Self>, table: &super::HostTable) {
        let c = &self.claim;
        match &self.outcome {
            Ok(ClaimOutcome::Claimed) => table.finalize(c.host, &c.demand),
            Ok(ClaimOutcome::Declined) | Err(_) => table.undo(c.host, &c.demand),
        }
        for (host, demand) in &self.released {
            table.remove(*host, demand);
        }
        let _ = self.claim.reply.send(self.outcome);
    }

    fn failed(self: Box<Self>, table: &super::HostTable, error: LedgerError) {
        table.undo(self.claim.host, &self.claim.demand);
        let _ = self.claim.reply.send(Err(error));
    }

    fn claims(&self) -> u64 {
        1
    }
}

/// The claims of one [`Ledger::claim_all`]: one job of the hot writer, so one group. Each
/// claim undoes itself when declined (see [`HotClaim`]), so the job does too.
struct HotClaims(Vec<HotClaim>);

impl super::hot::Work for HotClaims {
    fn run(&mut self, db: &rusqlite::Connection, table: &super::HostTable) -> super::hot::Step {
        use super::hot::Step;
        let mut kept = false;
        for claim in &mut self.0 {
            match claim.run(db, table) {
                Step::Keep => kept = true,
                Step::Undo => {}
                Step::Spoiled(e) => return Step::Spoiled(e),
            }
            // The claims after would each commit on their own.
            if let Some(e) = super::hot::transaction_lost(db, "in the middle of a group") {
                return Step::Spoiled(e);
            }
        }
        if kept {
            Step::Keep
        } else {
            Step::Undo
        }
    }

    fn undoes_itself(&self) -> bool {
        true
    }

    fn committed(self: Box<Self>, table: &super::HostTable) {
        for claim in self.0 {
            Box::new(claim).committed(table);
        }
    }

    fn failed(self: Box<Self>, table: &super::HostTable, error: LedgerError) {
        let errors = error.for_group(self.0.len(), "");
        for (claim, e) in self.0.into_iter().zip(errors) {
            Box::new(claim).failed(table, e);
        }
    }

    fn claims(&self) -> u64 {
        self.0.len() as u64
    }

    fn writes(&self) -> u64 {
        self.0.len() as u64
    }
}

/// PostgreSQL: one round of claims, at most one per host, as one statement: lock each host's
/// row and then its inventory rows, in a fixed order (host, class), keep the claims whose
/// every class fits, insert their allocations and add their usage; answers (claim index, true) per claim made
/// and (claim index, false) per instance that already holds an allocation. Each claim is `$1`
/// index, `$2` host, `$3` instance, `$4` amounts as the ledger stores them (JSON text, not
/// parsed here); its amounts come again as rows of `$5` claim index, `$6` class and `$7`
/// amount, so that the database parses no JSON. A host that is gone has no inventory rows
/// (they go with it), so its claim does not fit. The hosts' rows and the instances'
/// allocations are looked up claim by claim through their primary keys (`LATERAL`), whatever
/// the planner's statistics say: on a ledger whose allocations grew since its last `ANALYZE`
/// it hashed sequential scans of every allocation and inventory row into most rounds. The
/// host row is locked first because the allocations' trigger updates it (its instance count,
/// migration 0010) and every other writer of a host locks its row before its inventory rows:
/// locked after them, a claim and a release or registration of the same host could deadlock.
const POSTGRES_ROUND: &str = "WITH c AS (SELECT * FROM unnest($1::int[], $2::bigint[], \
    $3::text[], $4::text[]) AS c(claim, host_id, instance_uuid, resources)), \
    d AS (SELECT d.claim, c.host_id, d.resource_class, d.amount FROM unnest($5::int[], \
    $6::text[], $7::bigint[]) AS d(claim, resource_class, amount) JOIN c ON c.claim = d.claim), \
    locked AS MATERIALIZED (SELECT l.* FROM (SELECT host_id FROM c ORDER BY host_id) h \
    CROSS JOIN LATERAL (SELECT 1 FROM hosts WHERE hosts.id = h.host_id FOR NO KEY UPDATE) hl \
    CROSS JOIN LATERAL (SELECT i.host_id, i.resource_class, i.used, i.usable FROM inventories i \
    WHERE i.host_id = h.host_id ORDER BY i.resource_class FOR UPDATE) l), \
    held AS MATERIALIZED (SELECT c.claim FROM c CROSS JOIN LATERAL (SELECT 1 FROM allocations a \
    WHERE a.instance_uuid = c.instance_uuid LIMIT 1) a), \
    ok AS MATERIALIZED (SELECT c.* FROM c WHERE c.claim NOT IN (SELECT claim FROM held) \
    AND NOT EXISTS (SELECT 1 FROM d LEFT JOIN locked l ON l.host_id = d.host_id \
    AND l.resource_class = d.resource_class WHERE d.claim = c.claim \
    AND (l.host_id IS NULL OR l.used + d.amount > l.usable))), \
    ins AS (INSERT INTO allocations (instance_uuid, host_id, resources, confirmed, created_ms) \
    SELECT instance_uuid, host_id, resources, FALSE, $8 FROM ok), \
    upd AS (UPDATE inventories i SET used = i.used + d.amount FROM d JOIN ok ON ok.claim = d.claim \
    WHERE i.host_id = d.host_id AND i.resource_class = d.resource_class) \
    SELECT claim, TRUE FROM ok UNION ALL SELECT claim, FALSE FROM held";

/// PostgreSQL, a reschedule: takes the amounts (`$2` classes, `$3` amounts) on host `$1` if
/// every class still fits, with the instance's earlier allocation still counted (as SQLite's
/// hot writer checks it); answers whether it did. The caller holds the hosts' rows locked.
const POSTGRES_TAKE: &str = "WITH d AS (SELECT * FROM unnest($2::text[], $3::bigint[]) \
    AS d(resource_class, amount)), \
    fits AS MATERIALIZED (SELECT NOT EXISTS (SELECT 1 FROM d LEFT JOIN inventories i \
    ON i.host_id = $1 AND i.resource_class = d.resource_class \
    WHERE i.host_id IS NULL OR i.used + d.amount > i.usable) AS ok), \
    upd AS (UPDATE inventories i SET used = i.used + d.amount FROM d, fits \
    WHERE fits.ok AND i.host_id = $1 AND i.resource_class = d.resource_class) \
    SELECT ok FROM fits";

/// PostgreSQL: locks the rows and inventory rows of the hosts `$1` in the order a claim round
/// does.
const POSTGRES_LOCK_HOSTS: &str = "SELECT 1 FROM (SELECT id FROM hosts \
    WHERE id = ANY($1::bigint[]) ORDER BY id FOR NO KEY UPDATE) h \
    CROSS JOIN LATERAL (SELECT 1 FROM inventories i WHERE i.host_id = h.id \
    ORDER BY i.resource_class FOR UPDATE) l";

/// Most claims one group takes.
const MAX_GROUP: usize = 64;

/// How many times a claim group PostgreSQL rolled back as a deadlock or a serialization
/// failure is run again before its claims are answered with the error. Two processes'
/// groups on the same hosts can collide (issue 40's soak saw it with no fault injected).
const CONFLICT_RETRIES: usize = 3;

/// Where a queued claim's answer arrives.
type ClaimAnswer = tokio::sync::oneshot::Receiver<Result<ClaimOutcome, LedgerError>>;

/// A claim reserved in the table and waiting for the database.
#[derive(Debug)]
pub(crate) struct PendingClaim {
    host: HostId,
    instance_uuid: String,
    demand: Resources,
    json: String,
    now_ms: i64,
    reply: tokio::sync::oneshot::Sender<Result<ClaimOutcome, LedgerError>>,
    /// Queued by [`Ledger::claim_all`] after the claim before it: commits in its group.
    joined: bool,
}

/// A claim's answer from its group: made, refused, or the instance already holds an
/// allocation (left to [`claim_replacing`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GroupAnswer {
    Claimed,
    Declined,
    Held,
}

/// Runs `claims` in PostgreSQL, in rounds of at most one claim per host, inside `tx`.
async fn postgres_rounds(
    tx: &mut sqlx::PgConnection,
    claims: &[PendingClaim],
) -> Result<Vec<GroupAnswer>, LedgerError> {
    let mut answers = vec![GroupAnswer::Declined; claims.len()];
    let mut round_of: HashMap<HostId, usize> = HashMap::new();
    let mut rounds: Vec<Vec<usize>> = Vec::new();
    for (i, c) in claims.iter().enumerate() {
        let r = round_of.entry(c.host).or_insert(0);
        if rounds.len() <= *r {
            rounds.push(Vec::new());
        }
        rounds[*r].push(i);
        *r += 1;
    }
    for round in rounds {
        let index: Vec<i32> = round.iter().map(|i| *i as i32).collect();
        let hosts: Vec<i64> = round.iter().map(|i| claims[*i].host.0).collect();
        let uuids: Vec<&str> = round
            .iter()
            .map(|i| claims[*i].instance_uuid.as_str())
            .collect();
        let jsons: Vec<&str> = round.iter().map(|i| claims[*i].json.as_str()).collect();
        let (mut of, mut classes, mut amounts) = (Vec::new(), Vec::new(), Vec::new());
        for i in &round {
            for (class, amount) in claims[*i].demand.nonzero() {
                of.push(*i as i32);
                classes.push(class.name().to_string());
                amounts.push(amount);
            }
        }
        let now = claims[round[0]].now_ms;
        let rows = sqlx::query(POSTGRES_ROUND)
            .bind(index)
            .bind(hosts)
            .bind(uuids)
            .bind(jsons)
            .bind(of)
            .bind(classes)
            .bind(amounts)
            .bind(now)
            .fetch_all(&mut *tx)
            .await?;
        for row in rows {
            let i: i32 = row.try_get(0)?;
            let claimed: bool = row.try_get(1)?;
            let slot = answers
                .get_mut(i as usize)
                .ok_or_else(|| LedgerError::Invalid(format!("claim round answered {i}")))?;
            *slot = if claimed {
                GroupAnswer::Claimed
            } else {
                GroupAnswer::Held
            };
        }
    }
    Ok(answers)
}

impl Ledger {
    /// Claims `demand` on `host` for `instance_uuid`: reserved in the live table, then made
    /// durable with the claims queued meanwhile, then answered. An earlier allocation of the
    /// same instance (a reschedule) is released in the same transaction.
    pub async fn claim(
        &self,
        host: HostId,
        instance_uuid: &str,
        demand: &Resources,
        now_ms: i64,
    ) -> Result<ClaimOutcome, LedgerError> {
        let Some((pending, answer)) = self.reserved(host, instance_uuid, demand, now_ms, false)?
        else {
            return Ok(ClaimOutcome::Declined);
        };
        // From here the reservation belongs to the queue: nothing between the reserve and
        // the push awaits, so a caller that gives up cannot leave it behind.
        if let Some(hot) = &self.hot {
            let job = Box::new(HotClaim {
                claim: pending,
                outcome: Ok(ClaimOutcome::Declined),
                released: Vec::new(),
            });
            if let Err(job) = hot.submit(job) {
                job.failed(
                    self.table(),
                    LedgerError::Unavailable("the ledger's writer thread has stopped".into()),
                );
            }
        } else if self.claims.push(pending) {
            let ledger = self.clone();
            tokio::spawn(async move { ledger.run_claims().await });
        }
        answer.await.map_err(|_| {
            LedgerError::Invalid("the claim's writer task ended without an answer".into())
        })?
    }

    /// A claim of `demand` on `host` checked and reserved in the live table, ready to queue
    /// with the receiver of its answer; `None` when the table has no room (declined at once).
    /// `joined`: queued right after the claim before it, to commit in its group.
    fn reserved(
        &self,
        host: HostId,
        instance_uuid: &str,
        demand: &Resources,
        now_ms: i64,
        joined: bool,
    ) -> Result<Option<(PendingClaim, ClaimAnswer)>, LedgerError> {
        if !demand.is_non_negative() || demand.is_zero() {
            return Err(LedgerError::Invalid(format!(
                "a claim needs a positive amount of some class: {}",
                resources_json(demand)
            )));
        }
        if self.table().reserve(host, demand) == crate::table::Reserve::NoRoom {
            return Ok(None);
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        let pending = PendingClaim {
            host,
            instance_uuid: instance_uuid.to_string(),
            demand: *demand,
            json: resources_json(demand),
            now_ms,
            reply,
            joined,
        };
        Ok(Some((pending, answer)))
    }

    /// Claims several instances as one group (a multi-create decided at once, docs/
    /// architecture.md §12.5): each reserved in the live table as [`Ledger::claim`] does, then
    /// all queued at once — on SQLite as one job of the hot writer, on PostgreSQL together
    /// in the queue, never cut by a group's size limit — so that they commit in one
    /// transaction. Each claim stays conditional and gets its own answer, in order; a claim
    /// the table has no room for is declined at once and not queued.
    pub async fn claim_all(
        &self,
        claims: &[(HostId, &str, &Resources)],
        now_ms: i64,
    ) -> Vec<Result<ClaimOutcome, LedgerError>> {
        let mut answers: Vec<Option<Result<ClaimOutcome, LedgerError>>> = Vec::new();
        let mut pending = Vec::with_capacity(claims.len());
        let mut waiting = Vec::with_capacity(claims.len());
        for &(host, instance_uuid, demand) in claims {
            match self.reserved(host, instance_uuid, demand, now_ms, !waiting.is_empty()) {
                Err(invalid) => answers.push(Some(Err(invalid))),
                Ok(None) => answers.push(Some(Ok(ClaimOutcome::Declined))),
                Ok(Some((claim, answer))) => {
                    pending.push(claim);
                    waiting.push((answers.len(), answer));
                    answers.push(None);
                }
            }
        }
        // From the first reservation to the queue nothing awaits (see `claim`).
        if !pending.is_empty() {
            if let Some(hot) = &self.hot {
                let job = Box::new(HotClaims(
                    pending
                        .into_iter()
                        .map(|claim| HotClaim {
                            claim,
                            outcome: Ok(ClaimOutcome::Declined),
                            released: Vec::new(),
                        })
                        .collect(),
                ));
                if let Err(job) = hot.submit(job) {
                    job.failed(
                        self.table(),
                        LedgerError::Unavailable("the ledger's writer thread has stopped".into()),
                    );
                }
            } else if self.claims.push_all(pending) {
                let ledger = self.clone();
                tokio::spawn(async move { ledger.run_claims().await });
            }
        }
        for (at, answer) in waiting {
            answers[at] = Some(answer.await.unwrap_or_else(|_| {
                Err(LedgerError::Invalid(
                    "the claim's writer task ended without an answer".into(),
                ))
            }));
        }
        answers
            .into_iter()
            .map(|a| a.unwrap_or(Ok(ClaimOutcome::Declined)))
            .collect()
    }

    /// Serves the claim queue: takes every claim queued once it has a connection, commits
    /// them in groups, settles each in the table and answers it. The gate is held shared until
    /// the table knows every outcome, so a reload never sees a commit the table has not settled.
    async fn run_claims(&self) {
        let _shared = self.gate.read().await;
        // SQLite's claims go to the hot writer (see `claim`).
        let Pools::Postgres(pool) = &self.pools else {
            return;
        };
        let mut conn = match pool.acquire().await {
            Ok(conn) => conn,
            Err(e) => {
                let message = format!("claim not made: {e}");
                for claim in self.claims.take() {
                    self.table().undo(claim.host, &claim.demand);
                    let _ = claim
                        .reply
                        .send(Err(LedgerError::Unavailable(message.clone())));
                }
                return;
            }
        };
        let mut queued = self.claims.take();
        while !queued.is_empty() {
            // A group ends at MAX_GROUP claims, but never inside one call's `claim_all`.
            let mut cut = queued.len().min(MAX_GROUP);
            while cut < queued.len() && queued[cut].joined {
                cut += 1;
            }
            let rest = queued.split_off(cut);
            let mut answers = postgres_group_retrying(&mut conn, &queued).await;
            if answers
                .as_ref()
                .is_err_and(LedgerError::is_session_terminated)
            {
                // The server ended the session (an operator's `pg_terminate_backend`, a
                // restart) before the group committed: it wrote nothing. Once more on a new
                // connection, rather than answering the callers with an outage.
                if let Ok(fresh) = pool.acquire().await {
                    tracing::info!("claim group's database session was terminated before it committed; running it again on a new connection");
                    conn = fresh;
                    answers = postgres_group_retrying(&mut conn, &queued).await;
                }
            }
            self.settle(&mut conn, queued, answers).await;
            queued = rest;
        }
    }

    /// Settles a group in the table and answers each claim. A failed group is retried claim
    /// by claim so that only the failing claim gets the error.
    async fn settle(
        &self,
        conn: &mut sqlx::PgConnection,
        claims: Vec<PendingClaim>,
        answers: Result<Vec<GroupAnswer>, LedgerError>,
    ) {
        if answers.is_ok() {
            self.commits.commits.inc();
            self.commits.claims.inc_by(claims.len() as u64);
        }
        let answers: Vec<Result<GroupAnswer, LedgerError>> = match answers {
            Ok(answers) => answers.into_iter().map(Ok).collect(),
            Err(e) if claims.len() > 1 && !e.is_outage() => {
                let mut one_by_one = Vec::with_capacity(claims.len());
                for claim in &claims {
                    let answer = postgres_group_retrying(conn, std::slice::from_ref(claim)).await;
                    one_by_one.push(answer.map(|mut a| a.pop().unwrap_or(GroupAnswer::Declined)));
                }
                one_by_one
            }
            Err(e) => e
                .for_group(claims.len(), "claim not made")
                .into_iter()
                .map(Err)
                .collect(),
        };
        for (claim, answer) in claims.into_iter().zip(answers) {
            let outcome = match answer {
                Ok(GroupAnswer::Held) => self.claim_replacing(conn, &claim).await,
                Ok(GroupAnswer::Claimed) => Ok(ClaimOutcome::Claimed),
                Ok(GroupAnswer::Declined) => Ok(ClaimOutcome::Declined),
                Err(e) => Err(e),
            };
            match &outcome {
                Ok(ClaimOutcome::Claimed) => self.table().finalize(claim.host, &claim.demand),
                Ok(ClaimOutcome::Declined) | Err(_) => self.table().undo(claim.host, &claim.demand),
            }
            let _ = claim.reply.send(outcome);
        }
    }

    /// A reschedule: the instance holds an allocation already. In one transaction: the room
    /// on the new host is checked and taken with the earlier allocation still counted, and
    /// only then is the earlier allocation released and the new one recorded; a claim that
    /// does not fit changes nothing (the earlier allocation stays, as on SQLite). The table
    /// gives the old allocation's room back once committed.
    async fn claim_replacing(
        &self,
        conn: &mut sqlx::PgConnection,
        claim: &PendingClaim,
    ) -> Result<ClaimOutcome, LedgerError> {
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        let old: Option<(i64, bool)> = sqlx::query_as(
            "SELECT host_id, confirmed FROM allocations WHERE instance_uuid = $1 FOR UPDATE",
        )
        .bind(&claim.instance_uuid)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((old_host, confirmed)) = old else {
            // Released meanwhile: an ordinary claim.
            let answer = postgres_rounds(&mut tx, std::slice::from_ref(claim))
                .await?
                .pop();
            tx.commit().await?;
            return Ok(match answer {
                Some(GroupAnswer::Claimed) => ClaimOutcome::Claimed,
                _ => ClaimOutcome::Declined,
            });
        };
        // A move (the allocation is confirmed) also drops a source held from an earlier move
        // that never ended: every host it touches, in the order every claim round locks them
        // (no deadlock with one).
        let mut lock: Vec<i64> = vec![old_host, claim.host.0];
        if confirmed {
            let held: Vec<i64> =
                sqlx::query_scalar("SELECT host_id FROM allocations WHERE move_of = $1")
                    .bind(&claim.instance_uuid)
                    .fetch_all(&mut *tx)
                    .await?;
            lock.extend(held);
        }
        lock.sort_unstable();
        lock.dedup();
        sqlx::query(POSTGRES_LOCK_HOSTS)
            .bind(lock)
            .execute(&mut *tx)
            .await?;
        let (classes, amounts): (Vec<String>, Vec<i64>) = claim
            .demand
            .nonzero()
            .map(|(class, amount)| (class.name().to_string(), amount))
            .unzip();
        let fits: bool = sqlx::query_scalar(POSTGRES_TAKE)
            .bind(claim.host.0)
            .bind(classes)
            .bind(amounts)
            .fetch_one(&mut *tx)
            .await?;
        if !fits {
            tx.rollback().await?;
            return Ok(ClaimOutcome::Declined);
        }
        let mut released: Vec<(HostId, Resources)> = Vec::new();
        if confirmed {
            // A move: the source stays on its host, held (see `moves`).
            released.extend(super::moves::release_held_in_tx!(
                sqlx::Postgres,
                tx,
                &claim.instance_uuid
            ));
            sqlx::query(super::moves::HOLD_SOURCE)
                .bind(&claim.instance_uuid)
                .bind(super::moves::held_key(&claim.instance_uuid))
                .bind(claim.now_ms)
                .execute(&mut *tx)
                .await?;
        } else if let Some(old) = release_in_tx!(sqlx::Postgres, tx, &claim.instance_uuid) {
            released.push((old.host_id, old.demand));
        }
        let inserted = sqlx::query(INSERT_ALLOCATION)
            .bind(&claim.instance_uuid)
            .bind(claim.host.0)
            .bind(&claim.json)
            .bind(false)
            .bind(claim.now_ms)
            .execute(&mut *tx)
            .await?
            .rows_affected()
            == 1;
        if !inserted {
            tx.rollback().await?;
            return Ok(ClaimOutcome::Declined);
        }
        tx.commit().await?;
        for (host, demand) in released {
            self.table().remove(host, &demand);
        }
        Ok(ClaimOutcome::Claimed)
    }

    /// Releases an instance's allocation; releasing one that is gone is a no-op.
    /// A moving instance's held source goes with it.
    pub async fn release(&self, instance_uuid: &str) -> Result<Option<Allocation>, LedgerError> {
        let _shared = self.gate.read().await;
        let (released, held) = write_tx!(self, Db, tx => {
            let released = release_in_tx!(Db, tx, instance_uuid);
            let held = super::moves::release_held_in_tx!(Db, tx, instance_uuid);
            (released, held)
        });
        if let Some(a) = &released {
            self.table().remove(a.host_id, &a.demand);
        }
        for (host, demand) in &held {
            self.table().remove(*host, demand);
        }
        let hosts: Vec<HostId> = released
            .iter()
            .map(|a| a.host_id)
            .chain(held.iter().map(|(h, _)| *h))
            .collect();
        self.forget_gone_hosts(&hosts).await?;
        Ok(released)
    }

    /// Drops from the live table those of `hosts` the ledger no longer has: a retired compute
    /// node goes with its last allocation (migration `retired_nodes`), which a release may
    /// have been.
    pub(crate) async fn forget_gone_hosts(&self, hosts: &[HostId]) -> Result<(), LedgerError> {
        if hosts.is_empty() {
            return Ok(());
        }
        let list = super::json_list(hosts.iter().map(|h| h.0));
        let present: Vec<i64> = read_pool!(self, pool => match &self.pools {
            Pools::Sqlite { .. } => sqlx::query_scalar(
                "SELECT id FROM hosts WHERE id IN (SELECT value FROM json_each($1))",
            )
            .bind(&list)
            .fetch_all(pool)
            .await?,
            Pools::Postgres(_) => sqlx::query_scalar(
                "SELECT id FROM hosts WHERE id IN \
                 (SELECT CAST(jsonb_array_elements_text($1::jsonb) AS BIGINT))",
            )
            .bind(&list)
            .fetch_all(pool)
            .await?,
        });
        let gone: Vec<HostId> = hosts
            .iter()
            .filter(|h| !present.contains(&h.0))
            .copied()
            .collect();
        if !gone.is_empty() {
            self.table().forget(&gone);
        }
        Ok(())
    }

    /// The allocation of one instance.
    pub async fn allocation(&self, instance_uuid: &str) -> Result<Option<Allocation>, LedgerError> {
        read_pool!(self, pool => {
            let row = sqlx::query(
                "SELECT host_id, resources, confirmed FROM allocations WHERE instance_uuid = $1",
            )
            .bind(instance_uuid)
            .fetch_optional(pool)
            .await?;
            match row {
                None => Ok(None),
                Some(row) => {
                    let json: String = row.try_get(1)?;
                    Ok(Some(Allocation {
                        instance_uuid: instance_uuid.to_string(),
                        host_id: HostId(row.try_get(0)?),
                        demand: parse_resources(&json)?,
                        confirmed: row.try_get(2)?,
                    }))
                }
            }
        })
    }

    /// The hosts on which the ledger holds allocations of `instance_uuids`: (instance, host)
    /// pairs in instance order; an instance without an allocation is left out. One read,
    /// whatever the number of instances.
    pub async fn hosts_of(
        &self,
        instance_uuids: &[String],
    ) -> Result<Vec<(String, HostId)>, LedgerError> {
        if instance_uuids.is_empty() {
            return Ok(Vec::new());
        }
        let list = super::json_list(instance_uuids.iter().map(String::as_str));
        macro_rules! pairs {
            ($rows:expr) => {{
                let mut out = Vec::with_capacity($rows.len());
                for row in &$rows {
                    out.push((row.try_get::<String, _>(0)?, HostId(row.try_get(1)?)));
                }
                out
            }};
        }
        Ok(match &self.pools {
            Pools::Sqlite { read, .. } => {
                let rows = sqlx::query(
                    "SELECT instance_uuid, host_id FROM allocations \
                     WHERE instance_uuid IN (SELECT value FROM json_each($1)) ORDER BY instance_uuid",
                )
                .bind(&list)
                .fetch_all(read)
                .await?;
                pairs!(rows)
            }
            Pools::Postgres(pool) => {
                let rows = sqlx::query(
                    "SELECT instance_uuid, host_id FROM allocations WHERE instance_uuid IN \
                     (SELECT jsonb_array_elements_text($1::jsonb)) ORDER BY instance_uuid",
                )
                .bind(&list)
                .fetch_all(pool)
                .await?;
                pairs!(rows)
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

/// Runs `claims` as one PostgreSQL transaction: a group of one round (no host twice, the
/// usual case) is one statement, its own transaction, with no `BEGIN` and `COMMIT` round trips.
/// [`postgres_group`], run again (up to [`CONFLICT_RETRIES`] times) while PostgreSQL rolls
/// it back to break a conflict with another session. Each run is its own transaction, so a
/// rolled-back run leaves nothing behind.
async fn postgres_group_retrying(
    conn: &mut sqlx::PgConnection,
    claims: &[PendingClaim],
) -> Result<Vec<GroupAnswer>, LedgerError> {
    let mut retries = 0;
    loop {
        match postgres_group(conn, claims).await {
            Err(e) if e.is_conflict_rollback() && retries < CONFLICT_RETRIES => {
                retries += 1;
                tracing::info!(error = %e, retries, "claim group rolled back by a conflict; running it again");
            }
            answer => return answer,
        }
    }
}

async fn postgres_group(
    conn: &mut sqlx::PgConnection,
    claims: &[PendingClaim],
) -> Result<Vec<GroupAnswer>, LedgerError> {
    let mut hosts: Vec<HostId> = claims.iter().map(|c| c.host).collect();
    hosts.sort_unstable();
    hosts.dedup();
    if hosts.len() == claims.len() {
        return postgres_rounds(conn, claims).await;
    }
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let answers = postgres_rounds(&mut tx, claims).await?;
    tx.commit().await?;
    Ok(answers)
}
