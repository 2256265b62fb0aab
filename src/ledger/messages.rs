//! Exactly-once bookkeeping (ids of applied messages) and the dead-letter table.

use super::{read_pool, write_pool, Ledger, LedgerError};
use crate::clock::SharedClock;
use sqlx::Row;
use std::collections::HashSet;
use tokio_util::sync::CancellationToken;

/// Most message ids one statement forgets (the sweep goes on with the next ones), so that
/// the writer is never held for long.
const FORGET_LIMIT: i64 = 2_000;

/// A message that could not be decoded or applied, kept with the reason.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DeadLetter {
    pub id: i64,
    pub source: String,
    pub reason: String,
    pub body: String,
    pub received_ms: i64,
}

/// Records one message under its key (`Notification::sent_at`, its id) at `$3`; no row when
/// it was recorded before, under this key or under "". Ids recorded before migration 0011 are
/// keyed ("", id), and a notification's redelivery carries its envelope's timestamp: every
/// statement here that asks whether a key was recorded also asks for ("", its id), so that
/// the upgrade forgets no id (one more lookup, at the left edge of the key, where only casts
/// and those old ids are). SQLite's hot writer runs it as [`mark_processed_rusqlite`].
pub(crate) const MARK_PROCESSED: &str =
    "INSERT INTO processed_messages (sent_at, message_id, processed_ms) \
    SELECT CAST($1 AS TEXT), CAST($2 AS TEXT), CAST($3 AS BIGINT) WHERE NOT EXISTS \
    (SELECT 1 FROM processed_messages WHERE sent_at = '' AND message_id = $2) \
    ON CONFLICT (sent_at, message_id) DO NOTHING";

/// Whether an id (`$1`) was recorded under "" (see [`MARK_PROCESSED`]); a primary-key lookup.
const UNTIMED_SEEN: &str = "SELECT EXISTS (SELECT 1 FROM processed_messages \
    WHERE sent_at = '' AND message_id = $1)";

/// Records one key; no row when it was recorded before under this key.
const RECORD: &str = "INSERT INTO processed_messages (sent_at, message_id, processed_ms) \
    VALUES ($1, $2, $3) ON CONFLICT (sent_at, message_id) DO NOTHING";

/// [`MARK_PROCESSED`] on SQLite's hot writer, as two prepared statements: whether the id was
/// recorded under "" (not asked for a key that is "" itself, nor once the ledger holds no id
/// recorded before migration 0011), then the insert. SQLite runs an
/// `INSERT … SELECT` that reads its own table through a temporary b-tree and a statement
/// journal, built and torn down at every execution: without them, `sqlite3_step` fell from 25 %
/// to 18 % of the process' samples in a heartbeat backlog drain (BENCHMARKS.md). Answers
/// whether the key is new.
pub(crate) fn mark_processed_rusqlite(
    db: &rusqlite::Connection,
    key: MessageKey<'_>,
    now_ms: i64,
) -> rusqlite::Result<bool> {
    Marks::prepare(db)?.mark(key, now_ms)
}

thread_local! {
    /// The ledger file (of SQLite's hot writer, whose thread this is) found to hold no id
    /// recorded before migration 0011 (see [`MAY_HOLD_UNTIMED_NOTIFICATIONS`]). Such ids are
    /// never recorded again (a cast's id recorded under "" is never a notification's) and
    /// retention only forgets them: once none is left, none comes back, and the question
    /// need not be asked again for each message (a build's `instance.create.end` came with a
    /// lookup of its id under "" that could find nothing: 1 % of the service's CPU).
    static NO_UNTIMED_NOTIFICATIONS_IN: std::cell::RefCell<Option<String>> =
        const { std::cell::RefCell::new(None) };
}

/// Whether `db`'s ledger may hold ids recorded before migration 0011: asked of the ledger
/// until it answers no, then remembered (see [`NO_UNTIMED_NOTIFICATIONS_IN`]).
fn may_hold_untimed_notifications(db: &rusqlite::Connection) -> rusqlite::Result<bool> {
    let file = db.path().filter(|p| !p.is_empty());
    let known_none = |known: &Option<String>| file.is_some() && known.as_deref() == file;
    if NO_UNTIMED_NOTIFICATIONS_IN.with_borrow(known_none) {
        return Ok(false);
    }
    let may: bool = db
        .prepare_cached(MAY_HOLD_UNTIMED_NOTIFICATIONS)?
        .query_row([], |row| row.get(0))?;
    if !may {
        if let Some(file) = file {
            NO_UNTIMED_NOTIFICATIONS_IN.set(Some(file.to_string()));
        }
    }
    Ok(may)
}

/// Whether the ledger may still hold ids recorded before migration 0011 (keyed ("", id)):
/// an id without a timestamp applied no later than a second after that migration ran (as
/// `_sqlx_migrations` recorded it; every id when it did not). A timestamped message's id can
/// be recorded under "" only that way: a cast's id is never a notification's, and a message
/// recorded under "" (no timestamp of oslo's shape) is redelivered with the same envelope.
/// Once retention forgot those ids, asking for ("", id) finds nothing; a clock set back at
/// the upgrade only keeps the question asked.
const MAY_HOLD_UNTIMED_NOTIFICATIONS: &str = "SELECT EXISTS (SELECT 1 FROM processed_messages \
    INDEXED BY processed_messages_untimed_age WHERE sent_at = '' AND processed_ms <= COALESCE(\
    (SELECT (unixepoch(installed_on) + 1) * 1000 FROM _sqlx_migrations WHERE version = 11), \
    9223372036854775807))";

/// [`mark_processed_rusqlite`]'s two statements, taken from the connection's cache once for a
/// whole batch: each time a cached statement is taken and given back, its SQL is hashed and
/// the statement reset (3,000 instructions a message, in a backlog drain's profile).
pub(crate) struct Marks<'c> {
    untimed: rusqlite::CachedStatement<'c>,
    record: rusqlite::CachedStatement<'c>,
    /// Whether a timestamped id is also looked up under "" (see
    /// [`MAY_HOLD_UNTIMED_NOTIFICATIONS`]).
    ask_untimed: bool,
}

impl<'c> Marks<'c> {
    /// The statements, inside a transaction (a batch's, or a message's alone): a timestamped
    /// id is looked up under "" only while the ledger may hold ids recorded before migration
    /// 0011 (one question for the batch, and none once the ledger answered that it holds
    /// none, instead of one lookup per message).
    pub(crate) fn prepare(db: &'c rusqlite::Connection) -> rusqlite::Result<Self> {
        Ok(Marks {
            untimed: db.prepare_cached(UNTIMED_SEEN)?,
            record: db.prepare_cached(RECORD)?,
            ask_untimed: may_hold_untimed_notifications(db)?,
        })
    }

    /// Records one message (see [`mark_processed_rusqlite`]); answers whether its key is new.
    pub(crate) fn mark(
        &mut self,
        (sent_at, message_id): MessageKey<'_>,
        now_ms: i64,
    ) -> rusqlite::Result<bool> {
        if self.ask_untimed && !sent_at.is_empty() {
            let untimed: bool = self.untimed.query_row([message_id], |row| row.get(0))?;
            if untimed {
                return Ok(false);
            }
        }
        let recorded = self
            .record
            .execute(rusqlite::params![sent_at, message_id, now_ms])?;
        Ok(recorded == 1)
    }
}

/// Which of a batch's keys (a JSON array of [sent_at, message_id]) were recorded before,
/// under the key or under "" (see [`MARK_PROCESSED`]): one row, a JSON array of the same.
const SEEN_SQLITE: &str = "SELECT json_group_array(json_array(j.value ->> 0, j.value ->> 1)) \
    FROM json_each($1) AS j WHERE EXISTS (SELECT 1 FROM processed_messages AS p \
    WHERE p.message_id = j.value ->> 1 AND p.sent_at IN (j.value ->> 0, ''))";

/// Records a batch's keys (a JSON array of [sent_at, message_id]) in one statement, but for
/// those recorded under "" (see [`MARK_PROCESSED`]).
const MARK_ALL_SQLITE: &str = "INSERT INTO processed_messages (sent_at, message_id, processed_ms) \
    SELECT j.value ->> 0, j.value ->> 1, $2 FROM json_each($1) AS j WHERE NOT EXISTS \
    (SELECT 1 FROM processed_messages AS p WHERE p.sent_at = '' AND p.message_id = j.value ->> 1) \
    ON CONFLICT (sent_at, message_id) DO NOTHING";

/// The same for PostgreSQL (two text arrays), answering the keys that are new.
const MARK_ALL_POSTGRES: &str =
    "INSERT INTO processed_messages (sent_at, message_id, processed_ms) \
    SELECT s, m, $3 FROM unnest($1::text[], $2::text[]) AS k(s, m) WHERE NOT EXISTS \
    (SELECT 1 FROM processed_messages AS p WHERE p.sent_at = '' AND p.message_id = k.m) \
    ON CONFLICT (sent_at, message_id) DO NOTHING RETURNING sent_at, message_id";

/// Forgets timestamped ids from the left edge of the key: sent at or before `$1` (an oslo
/// timestamp) and applied at or before `$2`, at most `$3`. An id applied later than its
/// timestamp says (a message that waited in the queue, a publisher's clock behind) waits for
/// its own retention; the walk steps over it.
const FORGET_SENT: &str = "DELETE FROM processed_messages WHERE (sent_at, message_id) IN \
    (SELECT sent_at, message_id FROM processed_messages \
     WHERE sent_at > '' AND sent_at <= $1 AND processed_ms <= $2 \
     ORDER BY sent_at, message_id LIMIT $3)";

/// Forgets ids without a timestamp (fanout casts, ids recorded before migration 0011) applied
/// at or before `$1`, oldest first (the partial index on `processed_ms`), at most `$2`.
/// SQLite is told the index: without statistics it takes the key's "" range and sorts it.
const FORGET_UNTIMED_SQLITE: &str =
    "DELETE FROM processed_messages WHERE sent_at = '' AND message_id IN \
    (SELECT message_id FROM processed_messages INDEXED BY processed_messages_untimed_age \
     WHERE sent_at = '' AND processed_ms <= $1 ORDER BY processed_ms LIMIT $2)";

/// [`FORGET_UNTIMED_SQLITE`] for PostgreSQL.
const FORGET_UNTIMED_POSTGRES: &str =
    "DELETE FROM processed_messages WHERE sent_at = '' AND message_id IN \
    (SELECT message_id FROM processed_messages \
     WHERE sent_at = '' AND processed_ms <= $1 ORDER BY processed_ms LIMIT $2)";

/// Forgets the instances deleted at or before `$1`, oldest first, at most `$2`.
const FORGET_GONE: &str = "DELETE FROM gone_instances WHERE instance_uuid IN \
    (SELECT instance_uuid FROM gone_instances WHERE gone_ms <= $1 ORDER BY gone_ms LIMIT $2)";

/// A message's key in `processed_messages`: its `sent_at` and its id.
pub(crate) type MessageKey<'a> = (&'a str, &'a str);

/// Records `keys` as processed at `now_ms`; answers, for each in order, whether it is new (not
/// recorded before, nor earlier in `keys`). SQLite asks which were seen (one row) and then
/// inserts (no row): a `RETURNING` row per message would each cross sqlx's channel from the
/// connection's worker thread.
pub(crate) async fn mark_all_sqlite(
    conn: &mut sqlx::SqliteConnection,
    keys: &[MessageKey<'_>],
    now_ms: i64,
) -> Result<Vec<bool>, sqlx::Error> {
    let list = serde_json::to_string(keys)
        .map_err(|e| sqlx::Error::Protocol(format!("processed message keys: {e}")))?;
    let seen: String = sqlx::query_scalar(SEEN_SQLITE)
        .bind(&list)
        .fetch_one(&mut *conn)
        .await?;
    let seen: Vec<(String, String)> = serde_json::from_str(&seen)
        .map_err(|e| sqlx::Error::Protocol(format!("processed message keys: {e}")))?;
    sqlx::query(MARK_ALL_SQLITE)
        .bind(&list)
        .bind(now_ms)
        .execute(&mut *conn)
        .await?;
    let mut taken: HashSet<MessageKey<'_>> =
        seen.iter().map(|(s, m)| (s.as_str(), m.as_str())).collect();
    Ok(keys.iter().map(|key| taken.insert(*key)).collect())
}

/// [`mark_all_sqlite`] for PostgreSQL: one statement, answering the new keys.
pub(crate) async fn mark_all_postgres(
    conn: &mut sqlx::PgConnection,
    keys: &[MessageKey<'_>],
    now_ms: i64,
) -> Result<Vec<bool>, sqlx::Error> {
    let (sent, ids): (Vec<&str>, Vec<&str>) = keys.iter().copied().unzip();
    let fresh: Vec<(String, String)> = sqlx::query_as(MARK_ALL_POSTGRES)
        .bind(sent)
        .bind(ids)
        .bind(now_ms)
        .fetch_all(&mut *conn)
        .await?;
    let mut fresh: HashSet<MessageKey<'_>> = fresh
        .iter()
        .map(|(s, m)| (s.as_str(), m.as_str()))
        .collect();
    Ok(keys.iter().map(|key| fresh.remove(key)).collect())
}

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

    /// Forgets the ids of messages applied at or before `before_ms` (and, for those with a
    /// timestamp, sent at or before it: [`FORGET_SENT`]), oldest first, at most
    /// [`FORGET_LIMIT`] of them; answers how many. A message redelivered after its id is
    /// forgotten would be applied again.
    pub async fn forget_messages(&self, before_ms: i64) -> Result<u64, LedgerError> {
        // The deleted instances remembered as long (migration 0012), oldest first.
        let gone = write_pool!(self, pool => {
            sqlx::query(FORGET_GONE)
                .bind(before_ms)
                .bind(FORGET_LIMIT)
                .execute(pool)
                .await?
                .rows_affected()
        });
        if i64::try_from(gone).unwrap_or(i64::MAX) >= FORGET_LIMIT {
            return Ok(gone);
        }
        let sent_before = crate::nova::oslo_timestamp(before_ms.saturating_mul(1_000));
        let sent = write_pool!(self, pool => {
            sqlx::query(FORGET_SENT)
                .bind(&sent_before)
                .bind(before_ms)
                .bind(FORGET_LIMIT)
                .execute(pool)
                .await?
                .rows_affected()
        });
        let left = FORGET_LIMIT.saturating_sub(i64::try_from(sent).unwrap_or(i64::MAX));
        if left <= 0 {
            return Ok(gone + sent);
        }
        let forget_untimed = match self.engine() {
            super::Engine::Sqlite => FORGET_UNTIMED_SQLITE,
            super::Engine::Postgres => FORGET_UNTIMED_POSTGRES,
        };
        let untimed = write_pool!(self, pool => {
            sqlx::query(forget_untimed)
                .bind(before_ms)
                .bind(left)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(gone + sent + untimed)
    }

    /// True when a message with this id was already applied, whatever its timestamp. Scans the
    /// table (the id is the key's second column): for tests and tools.
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

/// How often the ids are swept, for a retention: a tenth of it, between 1 s and 10 min.
pub fn retention_sweep_ms(retention_ms: u64) -> u64 {
    (retention_ms / 10).clamp(1_000, 600_000)
}

/// Forgets the ids of messages applied more than `retention_s` ago until `shutdown`: at once,
/// then every [`retention_sweep_ms`] of `clock`. A retention of 0 keeps them forever.
pub async fn run_message_retention(
    ledger: Ledger,
    clock: SharedClock,
    retention_s: u64,
    shutdown: CancellationToken,
) {
    if retention_s == 0 {
        tracing::info!(
            "[ledger] message_retention_s = 0: the ids of applied messages are kept forever"
        );
        return;
    }
    let retention_ms = retention_s.saturating_mul(1000);
    loop {
        let before = clock
            .now_ms()
            .saturating_sub(i64::try_from(retention_ms).unwrap_or(i64::MAX));
        match ledger.forget_messages(before).await {
            // More may be waiting beyond one statement's limit.
            Ok(n) if n as i64 >= FORGET_LIMIT => {
                tokio::task::yield_now().await;
                continue;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "the ids of old messages were not forgotten this time")
            }
        }
        tokio::select! {
            _ = clock.sleep_ms(retention_sweep_ms(retention_ms)) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch looks a timestamped id up under "" only while the ledger may hold an id
    /// recorded before migration 0011: one applied no later than that migration ran. Once the
    /// ledger answered that it holds none, the thread remembers it for that file.
    #[tokio::test]
    async fn a_batch_asks_for_untimed_ids_only_while_the_ledger_may_hold_old_ones() {
        let (_dir, file, ledger) = crate::ledger::hot::tests::sqlite_ledger().await;
        let db = rusqlite::Connection::open(&file).unwrap();
        let asks = || Marks::prepare(&db).unwrap().ask_untimed;
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        // A cast applied since (not a notification's id), and an id as migration 0011 keyed
        // the ones it found.
        db.execute(
            "INSERT INTO processed_messages (sent_at, message_id, processed_ms) \
             VALUES ('', 'cast-1', ?1), ('', 'old-1', 1000)",
            [now_ms + 5_000],
        )
        .unwrap();
        assert!(asks());
        assert!(asks(), "asked again while the old id is there");
        let mut marks = Marks::prepare(&db).unwrap();
        assert!(!marks
            .mark(("2026-11-28 10:00:00.000000", "old-1"), 2_000)
            .unwrap());
        assert!(marks
            .mark(("2026-11-28 10:00:00.000000", "new-1"), 2_000)
            .unwrap());
        drop(marks);
        // Forgotten by retention: no longer asked, and remembered: an old id the service
        // never records again would not be looked for.
        db.execute(
            "DELETE FROM processed_messages WHERE message_id = 'old-1'",
            [],
        )
        .unwrap();
        assert!(!asks());
        db.execute(
            "INSERT INTO processed_messages (sent_at, message_id, processed_ms) \
             VALUES ('', 'old-2', 1000)",
            [],
        )
        .unwrap();
        assert!(!asks(), "remembered for this file");
        drop(ledger);

        // Another ledger file is asked on its own; without the migration's record (not
        // expected), a cast's id may be an old one: asked.
        let (_dir, file, ledger) = crate::ledger::hot::tests::sqlite_ledger().await;
        let db = rusqlite::Connection::open(&file).unwrap();
        db.execute_batch(
            "DELETE FROM _sqlx_migrations WHERE version = 11; \
             INSERT INTO processed_messages (sent_at, message_id, processed_ms) \
             VALUES ('', 'cast-1', 1000);",
        )
        .unwrap();
        assert!(Marks::prepare(&db).unwrap().ask_untimed);
        drop(ledger);
    }
}
