//! The ledger: the durable record of hosts, inventories, allocations and applied message ids,
//! in SQLite (default, a file) or PostgreSQL (several Parasol processes sharing the work), and
//! the live host table ([`HostTable`]) that it keeps equal to what it has committed plus the
//! claims in flight.
//!
//! A claim is reserved in the table first (so no two claims of this process take the same
//! room), then committed in the database as a conditional update, grouped with the claims that
//! queued meanwhile (one transaction per group), and only then answered. The database checks
//! the room again: it is the authority between processes. A claim it refuses is given back in
//! the table.
//!
//! # Layout
//! - `dialect`: the SQL that differs between SQLite and PostgreSQL.
//! - `hosts`: registering hosts; loading them into the table (at start and on reloads).
//! - `claims`: the grouped conditional claim, the release, and what an allocation holds.
//! - `hot`: SQLite's hot writer, a thread that commits claims, heartbeats and builds'
//!   confirmations in groups as direct calls on its own connection.
//! - `effects`: every write of a host-state input (`notifications` hands typed effects):
//!   exactly once, coalesced per batch, one implementation per engine.
//! - `messages`: exactly-once bookkeeping and the dead-letter table.
//! - `expiry`: releasing claims that nothing confirmed within `[scheduler] claim_ttl_s`.
//! - `import`: recording allocations made outside Parasol (Placement's).
//! - `meta`: the ledger's id and the write probe of `/readyz`.
//! - `follow`: PostgreSQL: loading the hosts other processes changed into this one's table.

mod claims;
mod dialect;
mod effects;
mod expiry;
mod follow;
mod hosts;
mod hot;
mod import;
mod lock;
mod messages;
mod meta;
mod moves;
#[cfg(test)]
pub(crate) mod testing;

pub use crate::table::HostTable;
pub use claims::{Allocation, ClaimOutcome};
#[cfg(test)]
pub(crate) use effects::heartbeat_of;
pub use effects::{Applied, ApplyError, Effect, HotAnswer, Message, Outcome, Placed};
pub use expiry::{run_claim_expiry, sweep_interval_ms, IngestMark};
pub use hosts::{HostRegistration, RemovedHost};
pub use import::StoredAllocation;
pub use lock::{lock_for_process, ProcessLock};
pub use messages::{retention_sweep_ms, run_message_retention, DeadLetter};
pub use moves::{HeldMove, Settled};

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Connection, PgPool, SqliteConnection, SqlitePool};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// Errors of the ledger layer.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("ledger url {url:?} is not supported: use sqlite://PATH or postgres://…")]
    UnsupportedUrl { url: String },
    #[error("unknown host {0:?}")]
    UnknownHost(String),
    #[error("{0}")]
    Invalid(String),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// An error of SQLite's hot writer (see `hot`).
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("migration error: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The ledger refuses writes until an operator acts (its SQLite file was removed or
    /// replaced under the running process).
    #[error("ledger unavailable: {0}")]
    Unavailable(String),
}

/// A migration error as the operator should read it. A ledger a later Parasol migrated (a
/// rollback of an upgrade, an older binary started beside a newer one) holds migrations this
/// binary does not know: it neither reads nor writes such a ledger, and says what to do
/// instead of sqlx's "previously applied but is missing in the resolved migrations".
fn migration_error(e: sqlx::migrate::MigrateError, known: &sqlx::migrate::Migrator) -> LedgerError {
    match e {
        sqlx::migrate::MigrateError::VersionMissing(version) => {
            let last = known.iter().map(|m| m.version).max().unwrap_or(0);
            LedgerError::Invalid(format!(
                "the ledger holds migration {version}, which this binary does not have (its \
                 last is {last}): a later version of Parasol migrated it. Run that version or \
                 a later one on this ledger, or restore the ledger's backup from before the \
                 upgrade"
            ))
        }
        e => LedgerError::Migrate(e),
    }
}

impl LedgerError {
    /// Whether this is the ledger's own failure (unreachable, closed, busy or locked, full,
    /// read-only, out of resources, shut down, a lost connection, a serialization conflict),
    /// after which the same write may succeed later. Otherwise the error comes from what was
    /// written (a value out of range, an invalid byte sequence, a violated constraint): the
    /// same message fails the same way every time.
    pub fn is_outage(&self) -> bool {
        match self {
            LedgerError::Database(e) => sqlx_outage(e),
            LedgerError::Sqlite(e) => sqlite_code(e).is_some_and(sqlite_outage),
            LedgerError::Migrate(_) | LedgerError::Unavailable(_) => true,
            LedgerError::UnsupportedUrl { .. }
            | LedgerError::UnknownHost(_)
            | LedgerError::Invalid(_) => false,
        }
    }
}

impl LedgerError {
    /// One error for each of `n` members of a group that failed together (nothing of the
    /// group was committed): the original for the first, and for the others its message,
    /// prefixed with `context` when given, still an outage when the original was one.
    pub fn for_group(self, n: usize, context: &str) -> Vec<LedgerError> {
        let message = if context.is_empty() {
            self.to_string()
        } else {
            format!("{context}: {self}")
        };
        let outage = self.is_outage();
        let mut first = Some(self);
        (0..n)
            .map(|_| match first.take() {
                Some(e) => e,
                None if outage => LedgerError::Unavailable(message.clone()),
                None => LedgerError::Invalid(message.clone()),
            })
            .collect()
    }

    /// Whether PostgreSQL rolled the transaction back to break a conflict with another
    /// session (SQLSTATE `40P01` deadlock_detected, `40001` serialization_failure): the same
    /// transaction run again may well commit, so it is retried rather than answered as an
    /// outage.
    pub fn is_conflict_rollback(&self) -> bool {
        match self {
            LedgerError::Database(sqlx::Error::Database(db)) => {
                matches!(db.code().as_deref(), Some("40P01" | "40001"))
            }
            _ => false,
        }
    }

    /// Whether PostgreSQL ended the session while the statement ran or before it did (57P01
    /// `admin_shutdown`: `pg_terminate_backend` or a fast shutdown; 57P02 `crash_shutdown`):
    /// the transaction was aborted, nothing of it committed, and a new connection may run it
    /// again. A bare I/O error says nothing of whether a commit happened, and is not one.
    pub fn is_session_terminated(&self) -> bool {
        match self {
            LedgerError::Database(sqlx::Error::Database(db)) => {
                matches!(db.code().as_deref(), Some("57P01" | "57P02"))
            }
            _ => false,
        }
    }

    /// Whether the database is out of space (SQLite `SQLITE_FULL`, PostgreSQL `53100
    /// disk_full`): an outage that says nothing about what was written, and that a write
    /// smaller than the one refused (the write probe) may not see.
    pub fn is_out_of_space(&self) -> bool {
        if let LedgerError::Sqlite(e) = self {
            return sqlite_code(e) == Some(13);
        }
        let LedgerError::Database(sqlx::Error::Database(db)) = self else {
            return false;
        };
        let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
        if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
            return code.parse::<i32>().unwrap_or(0) & 0xff == 13;
        }
        code == "53100"
    }
}

/// See [`LedgerError::is_outage`]. PostgreSQL by SQLSTATE class, SQLite by primary result code.
fn sqlx_outage(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => {
            let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
            if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                // SQLite: BUSY, LOCKED, NOMEM, READONLY, INTERRUPT, IOERR, CORRUPT, FULL,
                // CANTOPEN, PROTOCOL, NOTADB.
                return sqlite_outage(code.parse::<i32>().unwrap_or(0) & 0xff);
            }
            // PostgreSQL: connection (08), invalid transaction state (25: a read-only
            // standby), transaction rollback (40: serialization, deadlock), access or schema
            // (42), insufficient resources (53), object state (55: lock not available),
            // operator intervention (57: shutdown, cancel), system (58), internal (XX).
            matches!(
                code.get(..2).unwrap_or(""),
                "08" | "25" | "40" | "42" | "53" | "55" | "57" | "58" | "XX"
            )
        }
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Configuration(_) => true,
        _ => false,
    }
}

/// SQLite's primary result codes that are outages: BUSY, LOCKED, NOMEM, READONLY, INTERRUPT,
/// IOERR, CORRUPT, FULL, CANTOPEN, PROTOCOL, NOTADB.
fn sqlite_outage(primary: i32) -> bool {
    matches!(primary, 5 | 6 | 7 | 8 | 9 | 10 | 11 | 13 | 14 | 15 | 26)
}

/// The primary result code of an error SQLite returned to the hot writer.
pub(crate) fn sqlite_code(e: &rusqlite::Error) -> Option<i32> {
    match e {
        rusqlite::Error::SqliteFailure(f, _) => Some(f.extended_code & 0xff),
        _ => None,
    }
}

/// Which database engine the ledger runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

#[derive(Clone, Debug)]
pub(crate) enum Pools {
    /// SQLite allows one writer at a time: writes go through a single connection so that
    /// in-process writers queue instead of spinning on SQLITE_BUSY; reads use a pool (WAL).
    Sqlite {
        read: SqlitePool,
        write: Writer,
    },
    Postgres(PgPool),
}

/// Values as the JSON array SQLite's `json_each` reads (one statement text for any list).
pub(crate) fn json_list<T: Into<serde_json::Value>>(values: impl IntoIterator<Item = T>) -> String {
    serde_json::Value::Array(values.into_iter().map(Into::into).collect()).to_string()
}

/// SQLite's one writing connection, behind a fair lock. Not a pool of one: sqlx's pool pings a
/// connection every time it is released, a round trip to the connection's worker thread that
/// the next writer would wait for.
///
/// Before every write it checks that the file at the ledger's path is still the one it opened
/// (same device and inode): a ledger file removed or replaced under the running process would
/// otherwise take claims into a deleted file (lost at restart) or mix two ledgers' rows. Then
/// it refuses every write, and `/readyz` says why, until an operator restarts it. After an
/// outage (busy, I/O, read-only, full) the next write opens a fresh connection.
#[derive(Clone, Debug)]
pub(crate) struct Writer {
    conn: Arc<tokio::sync::Mutex<SqliteConnection>>,
    opts: Arc<SqliteConnectOptions>,
    file: std::path::PathBuf,
    /// (device, inode) of the file when opened; `None` for an in-memory database.
    identity: Option<(u64, u64)>,
    /// Set after an outage: the next `lock` reconnects.
    reconnect: Arc<std::sync::atomic::AtomicBool>,
}

/// (device, inode) of `file`.
fn file_identity(file: &std::path::Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(file)?;
    Ok((m.dev(), m.ino()))
}

/// Jobs waiting for the writer, served in groups. Whoever puts a job into an empty queue
/// starts the one task that will serve it: that task waits for the connection, then takes
/// every job queued by then. Jobs that arrive after the take find the queue empty again and
/// start the next group, so every job is taken by exactly one task.
#[derive(Debug)]
pub(crate) struct JobQueue<J>(Arc<parking_lot::Mutex<Vec<J>>>);

impl<J> Clone for JobQueue<J> {
    fn clone(&self) -> Self {
        JobQueue(self.0.clone())
    }
}

impl<J> Default for JobQueue<J> {
    fn default() -> Self {
        JobQueue(Arc::default())
    }
}

impl<J> JobQueue<J> {
    /// Queues `job`; true when the caller must start the task that serves the queue.
    pub(crate) fn push(&self, job: J) -> bool {
        let mut queue = self.0.lock();
        queue.push(job);
        queue.len() == 1
    }

    /// Queues `jobs` at once (nothing else between them); true when the caller must start
    /// the task that serves the queue.
    pub(crate) fn push_all(&self, jobs: Vec<J>) -> bool {
        let mut queue = self.0.lock();
        let was_empty = queue.is_empty();
        queue.extend(jobs);
        was_empty && !queue.is_empty()
    }

    /// Every job queued so far (call holding the connection).
    pub(crate) fn take(&self) -> Vec<J> {
        std::mem::take(&mut *self.0.lock())
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.lock().len()
    }
}

impl Writer {
    fn new(conn: SqliteConnection, opts: SqliteConnectOptions) -> Writer {
        let file = opts.get_filename().to_path_buf();
        // An in-memory database (`sqlite::memory:` is `file:sqlx-in-memory-N`) has no file;
        // a file ledger's was just opened (created if missing), so it is there.
        let identity = file_identity(&file).ok();
        Writer {
            conn: Arc::new(tokio::sync::Mutex::new(conn)),
            opts: Arc::new(opts),
            file,
            identity,
            reconnect: Arc::default(),
        }
    }

    /// Whether the file at the ledger's path is still the one this process opened.
    fn check_file(&self) -> Result<(), LedgerError> {
        let Some(opened) = self.identity else {
            return Ok(());
        };
        let refuse = |what: &str| {
            Err(LedgerError::Unavailable(format!(
                "the SQLite ledger file {} was {what} while in use; writes are refused \
                 (restart Parasol on the ledger file you mean)",
                self.file.display()
            )))
        };
        match file_identity(&self.file) {
            Ok(now) if now == opened => Ok(()),
            Ok(_) => refuse("replaced by another file"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => refuse("removed"),
            Err(e) => refuse(&format!("made unreadable ({e})")),
        }
    }

    /// Waits for the connection (writers get it in the order they asked), after checking the
    /// file is still the ledger's and reconnecting after an outage.
    pub(crate) async fn lock(
        &self,
    ) -> Result<tokio::sync::MutexGuard<'_, SqliteConnection>, LedgerError> {
        let mut conn = self.conn.lock().await;
        self.check_file()?;
        if self.reconnect.load(std::sync::atomic::Ordering::Relaxed) {
            let fresh = SqliteConnection::connect_with(&self.opts).await?;
            // The file may have changed while connecting.
            self.check_file()?;
            let old = std::mem::replace(&mut *conn, fresh);
            drop(old);
            self.reconnect
                .store(false, std::sync::atomic::Ordering::Relaxed);
            tracing::info!(file = %self.file.display(), "the SQLite writer reconnected");
        }
        Ok(conn)
    }

    /// Notes a write's error: after an outage the next write reconnects.
    pub(crate) fn failed(&self, e: &LedgerError) {
        if e.is_outage() {
            self.reconnect
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// A handle on the ledger; cheap to clone.
#[derive(Clone, Debug)]
pub struct Ledger {
    pub(crate) pools: Pools,
    /// This process' name in the ledger's change notifications.
    process: Arc<str>,
    /// The live table this ledger keeps.
    table: Arc<HostTable>,
    /// Claims waiting for a group commit (see `claims::run_claims`).
    pub(crate) claims: JobQueue<claims::PendingClaim>,
    /// Group commits of claims and the claims they carried (`/metrics`).
    pub(crate) commits: CommitCounters,
    /// Claim groups hold it shared from their SQL until the table knows their outcome; a
    /// reload holds it exclusively, so that `used = committed + pending` is exact.
    pub(crate) gate: Arc<tokio::sync::RwLock<()>>,
    /// SQLite's hot writer (claims, heartbeats, build confirmations); `None` on PostgreSQL.
    pub(crate) hot: Option<hot::HotWriter>,
    /// How far the notification consumer has caught up: the claim sweep waits for it.
    ingest_mark: Arc<IngestMark>,
}

/// How much of the SQLite ledger's file each connection maps into memory (`PRAGMA
/// mmap_size`). Each connection maps it apart and a page mapped by two counts twice in the
/// process' resident memory: at 256 MiB, with 100,000 hosts and 1,000,000 instances (a 203 MB
/// file), the maps held 492 MB of the service's 1,290 MB. 64 MiB maps the whole ledger of
/// 10,000 hosts and their instances; a larger one is read past the map through each
/// connection's page cache (`cache_size`) and the kernel's, which the kernel can give back.
pub(crate) const MMAP_BYTES: u64 = 64 << 20;

/// Runs `$body` with `$pool` bound to the read pool of the engine in use.
macro_rules! read_pool {
    ($ledger:expr, $pool:ident => $body:expr) => {
        match &$ledger.pools {
            $crate::ledger::Pools::Sqlite { read: $pool, .. } => $body,
            $crate::ledger::Pools::Postgres($pool) => $body,
        }
    };
}

/// Runs `$body` with `$pool` bound to the write pool of the engine in use.
macro_rules! write_pool {
    ($ledger:expr, $pool:ident => $body:expr) => {
        match &$ledger.pools {
            $crate::ledger::Pools::Sqlite { write, .. } => {
                #[allow(unused_imports)]
                use sqlx::Connection as _;
                let mut conn = write.lock().await?;
                let $pool = &mut *conn;
                $body
            }
            $crate::ledger::Pools::Postgres($pool) => $body,
        }
    };
}
/// Runs `$body` in a write transaction `$tx` of the engine in use (SQLite's on the writer's
/// connection) with the type `$db` naming the engine (for [`dialect::Dialect`]), and commits;
/// an error in `$body` returns early and rolls back.
macro_rules! write_tx {
    ($ledger:expr, $db:ident, $tx:ident => $body:expr) => {
        match &$ledger.pools {
            $crate::ledger::Pools::Sqlite { write, .. } => {
                #[allow(dead_code)]
                type $db = sqlx::Sqlite;
                let mut conn = write.lock().await?;
                let mut $tx = sqlx::Connection::begin(&mut *conn).await?;
                let out = $body;
                $tx.commit().await?;
                out
            }
            $crate::ledger::Pools::Postgres(pool) => {
                #[allow(dead_code)]
                type $db = sqlx::Postgres;
                let mut $tx = pool.begin().await?;
                let out = $body;
                $tx.commit().await?;
                out
            }
        }
    };
}
pub(crate) use read_pool;
pub(crate) use write_pool;
pub(crate) use write_tx;

/// MiB of SQLite's write-ahead log past which the log starts over (`hot::WAL_LIMIT_FRAMES`
/// pages of 4 KiB): the size its file works at.
pub const WAL_WORKING_MIB: u64 = (hot::WAL_LIMIT_FRAMES as u64 * 4096) >> 20;

/// Counters of the claims' group commits, shown in `/metrics` as
/// `parasol_ledger_commits_total` and `parasol_ledger_committed_claims_total`.
#[derive(Clone, Debug, Default)]
pub struct CommitCounters {
    /// Groups committed.
    pub commits: prometheus_client::metrics::counter::Counter,
    /// Claims in those groups (granted or declined by their condition).
    pub claims: prometheus_client::metrics::counter::Counter,
    /// Checkpoints of SQLite's write-ahead log that copied all of it to the database file.
    pub checkpoints: prometheus_client::metrics::counter::Counter,
}

impl Ledger {
    /// The counters of this ledger's group commits (shared: clones count together).
    pub fn commit_counters(&self) -> CommitCounters {
        self.commits.clone()
    }

    /// Connects to `url` (`sqlite://path` — the file is created — or `postgres://…`).
    pub async fn connect(url: &str, max_connections: u32) -> Result<Ledger, LedgerError> {
        let process = uuid::Uuid::new_v4().simple().to_string();
        let pools = if url.starts_with("sqlite:") {
            if url.contains(":memory:") || url.contains("mode=memory") {
                return Err(LedgerError::Invalid(format!(
                    "ledger url {url:?}: an in-memory SQLite ledger is not supported (its writes \
                     must outlive the process): use sqlite://PATH"
                )));
            }
            let opts = SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(10))
                .foreign_keys(true)
                // Read pages through a memory map instead of a read() call and a copy each;
                // at most the first `MMAP_BYTES` of the file (see there).
                .pragma("mmap_size", MMAP_BYTES.to_string())
                // 32 MiB of page cache a connection instead of 2: the writer keeps every page of
                // a 10,000-host ledger, so a claim or a sample never waits for a page.
                .pragma("cache_size", "-32768")
                // Statement journals (every multi-row upsert of a notification batch or claim
                // group opens one) in memory, not in a temporary file written page by page.
                .pragma("temp_store", "memory")
                // Checkpoint every ~40 MB of WAL instead of 4 MB: a page rewritten by many
                // commits in between (message-id index, host and inventory rows) is copied
                // back to the database file once.
                .pragma("wal_autocheckpoint", "10000")
                // When the log starts over, its file is cut back to this size (the hot
                // writer's checkpoint thread starts it over past `hot::WAL_LIMIT_FRAMES`).
                .pragma(
                    "journal_size_limit",
                    (hot::WAL_LIMIT_FRAMES * 4096).to_string(),
                );
            // The file is created on first use, and so is its folder.
            let file = opts.get_filename().to_path_buf();
            if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| {
                    LedgerError::Invalid(format!(
                        "cannot create the folder {} of the SQLite ledger: {e}",
                        dir.display()
                    ))
                })?;
            }
            // A local file does not go stale: skip sqlx's ping before every acquire, which
            // would cost a round trip per claim.
            let write = Writer::new(
                SqliteConnection::connect_with(&opts).await.map_err(|e| {
                    LedgerError::Invalid(format!(
                        "cannot open the SQLite ledger {}: {e}",
                        file.display()
                    ))
                })?,
                opts.clone(),
            );
            let read = SqlitePoolOptions::new()
                .max_connections(max_connections.max(1))
                .test_before_acquire(false)
                .connect_with(opts.read_only(false))
                .await?;
            Pools::Sqlite { read, write }
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            let opts = PgConnectOptions::from_str(url)?;
            // Every connection names this process, so that the change notifications of its
            // own writes (see `follow`) can be told apart from other processes'.
            let id = process.clone();
            let pool = PgPoolOptions::new()
                .max_connections(max_connections.max(1))
                .acquire_timeout(Duration::from_secs(30))
                .after_connect(move |conn, _| {
                    let set = format!("SET parasol.process = '{id}'");
                    Box::pin(async move {
                        sqlx::Executor::execute(conn, set.as_str()).await?;
                        Ok(())
                    })
                })
                .connect_with(opts)
                .await?;
            Pools::Postgres(pool)
        } else {
            return Err(LedgerError::UnsupportedUrl {
                url: crate::auth::redact_url(url),
            });
        };
        let table = Arc::new(HostTable::new());
        let commits = CommitCounters::default();
        let gate: Arc<tokio::sync::RwLock<()>> = Arc::default();
        let hot = match &pools {
            Pools::Sqlite { write, .. } => Some(hot::HotWriter::start(hot::Shared {
                writer: write.clone(),
                table: table.clone(),
                gate: gate.clone(),
                commits: commits.clone(),
            })?),
            Pools::Postgres(_) => None,
        };
        Ok(Ledger {
            pools,
            process: Arc::from(process),
            table,
            claims: JobQueue::default(),
            commits,
            gate,
            hot,
            ingest_mark: Arc::default(),
        })
    }

    /// How far the notification consumer has caught up (see [`IngestMark`]).
    pub fn ingest_mark(&self) -> &IngestMark {
        &self.ingest_mark
    }

    /// Writes SQLite's write-ahead log out to `mib` MiB (at most [`WAL_WORKING_MIB`]), so that
    /// commits overwrite its file from the first one on instead of growing it
    /// (`hot::prewrite`); the service does it once at start (`[ledger] wal_prewrite_mib`).
    /// Answers the bytes added: 0 when there is nothing to do (PostgreSQL; a log that long
    /// already).
    pub async fn prewrite_log(&self, mib: u64) -> Result<u64, LedgerError> {
        self.prewrite(hot::PrewriteSize::Exactly(mib.min(WAL_WORKING_MIB) << 20))
            .await
    }

    /// Writes SQLite's write-ahead log out to what this ledger needs, at most `ceiling_mib`
    /// MiB (`[ledger] wal_prewrite_mib`): 64 times the database file, at least 1 MiB
    /// (`hot::prewrite`). What the service does at start; answers the bytes added.
    pub async fn prewrite_log_for_ledger(&self, ceiling_mib: u64) -> Result<u64, LedgerError> {
        let ceiling = ceiling_mib.min(WAL_WORKING_MIB) << 20;
        self.prewrite(hot::PrewriteSize::ForLedger { ceiling })
            .await
    }

    async fn prewrite(&self, size: hot::PrewriteSize) -> Result<u64, LedgerError> {
        let Some(hot) = &self.hot else {
            return Ok(0);
        };
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job = Box::new(hot::PrewriteLog {
            size,
            outcome: Ok(0),
            reply,
        });
        if let Err(job) = hot.submit(job) {
            job.failed(
                self.table(),
                LedgerError::Unavailable("the ledger's writer thread has stopped".into()),
            );
        }
        answer.await.map_err(|_| {
            LedgerError::Invalid("the ledger's writer ended without writing the log out".into())
        })?
    }

    /// Connects, applies the migrations and loads every host into the live table.
    pub async fn open(url: &str, max_connections: u32) -> Result<Ledger, LedgerError> {
        let ledger = Self::connect(url, max_connections).await?;
        ledger.migrate().await?;
        Ok(ledger)
    }

    /// Notes a write's error: on SQLite, after an outage the next write reconnects.
    pub(crate) fn write_failed(&self, e: &LedgerError) {
        if let Pools::Sqlite { write, .. } = &self.pools {
            write.failed(e);
        }
    }

    /// The live host table every decision reads.
    pub fn table(&self) -> &Arc<HostTable> {
        &self.table
    }

    pub fn engine(&self) -> Engine {
        match self.pools {
            Pools::Sqlite { .. } => Engine::Sqlite,
            Pools::Postgres(_) => Engine::Postgres,
        }
    }

    /// Applies the migrations in `migrations/<engine>/` that have not run yet, then loads
    /// every host into the live table.
    pub async fn migrate(&self) -> Result<(), LedgerError> {
        let migrator = match &self.pools {
            Pools::Sqlite { .. } => sqlx::migrate!("./migrations/sqlite"),
            Pools::Postgres(_) => sqlx::migrate!("./migrations/postgres"),
        };
        let ran = match &self.pools {
            Pools::Sqlite { write, .. } => {
                let mut conn = write.lock().await?;
                migrator.run(&mut *conn).await
            }
            Pools::Postgres(pool) => migrator.run(pool).await,
        };
        ran.map_err(|e| migration_error(e, &migrator))?;
        self.reload_all().await
    }

    /// Closes every connection.
    pub async fn close(&self) {
        match &self.pools {
            // The writer closes when the last handle on the ledger is dropped.
            Pools::Sqlite { read, .. } => read.close().await,
            Pools::Postgres(pool) => pool.close().await,
        }
    }
}

#[cfg(test)]
mod group_error_tests {
    use super::LedgerError;

    #[test]
    fn a_group_error_keeps_the_original_first_and_its_kind_for_the_rest() {
        let errors = LedgerError::Unavailable("disk gone".into()).for_group(3, "claim not made");
        assert_eq!(errors.len(), 3);
        assert_eq!(errors[0].to_string(), "ledger unavailable: disk gone");
        for e in &errors[1..] {
            assert!(e.is_outage(), "{e}");
            assert_eq!(
                e.to_string(),
                "ledger unavailable: claim not made: ledger unavailable: disk gone"
            );
        }
        let errors = LedgerError::Invalid("bad value".into()).for_group(2, "");
        assert!(errors
            .iter()
            .all(|e| !e.is_outage() && e.to_string() == "bad value"));
        assert!(LedgerError::Invalid("x".into()).for_group(0, "").is_empty());
    }
}
