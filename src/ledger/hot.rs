//! SQLite's hot writer: one thread, its own connection, and whole groups of writes run as
//! direct calls.
//!
//! sqlx runs every statement on a worker thread of its connection: each statement is a round
//! trip over a channel (two thread wake-ups), and each row of an answer another. On the
//! scheduling path that was most of the service's CPU (BENCHMARKS.md, "Service CPU per
//! decision"). The writes that come with every decision — its claim, the heartbeats and the
//! build's `instance.create.end` — go to this thread instead: it takes every job queued by the
//! time it is free, runs them in one transaction (each in its own savepoint, so a job that
//! fails rolls back alone), commits once, settles the live table and only then answers each
//! job. Everything else still writes through sqlx.
//!
//! A second thread checkpoints the WAL beside it, so that no group waits for a checkpoint.
//!
//! The two writing connections never write at once: the thread holds the [`Writer`]'s lock
//! (the one sqlx's writes take) for each group, and the reload gate shared, as the claim groups
//! always did, so a reload never sees a commit the table has not settled.

mod prewrite;

pub(crate) use prewrite::{PrewriteLog, Size as PrewriteSize};

use super::{LedgerError, Writer};
use crate::table::HostTable;
use sqlx::SqliteConnection;
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

/// Most jobs one transaction takes.
const MAX_GROUP: usize = 256;

/// Writes (claims, messages: [`Work::writes`]) committed between two checkpoints (see
/// `checkpoints`). Counted in writes, not groups: a notification batch is one job of up to
/// 500 messages, and a backlog drain of a hundred such groups would otherwise never ask for one.
/// Fewer checkpoints copy less (a page rewritten in between is copied once: at 4,096 the
/// checkpoint thread took 5 % of the service's CPU at 10,000 hosts, at 512 8 %), but each
/// copies and syncs more at once, and answers waited for that: at 2,000 decisions/s the
/// 99th percentile was 7–13 ms at 4,096 against 4–7 ms at 512 (BENCHMARKS.md).
const WRITES_PER_CHECKPOINT: u64 = 512;

/// Frames of the write-ahead log (256 MiB of 4 KiB pages) past which a checkpoint that could
/// not copy the whole log finishes with the writers held, so that the log starts over (see
/// `checkpoint`); also the size its file is cut back to when it does (`journal_size_limit`).
/// Each start-over holds the writers for two syncs: at 2,000 decisions/s it comes every ~5 s
/// (every ~2.5 s at 128 MiB, with a slightly longer tail of answers).
pub(crate) const WAL_LIMIT_FRAMES: i64 = 65_536;

/// A pass that copied at most this many frames leaves an end short enough to copy with the
/// writers held; at most [`TAIL_PASSES`] passes that hold nobody come before.
const TAIL_FRAMES: i64 = 256;
const TAIL_PASSES: usize = 4;

/// What a job's statements came to: keep them, or roll the job's savepoint back; a job that
/// undoes itself (see [`Work::undoes_itself`]) and could not answers `Spoiled`, and its whole
/// group is rolled back and fails with that error.
#[derive(Debug)]
pub(crate) enum Step {
    Keep,
    Undo,
    Spoiled(LedgerError),
}

/// One job of a group. The job keeps its own outcome: `run` records it, `committed` settles
/// the table and answers it once the group is durable, `failed` answers when the group's
/// transaction could not begin or commit (nothing of it was written).
pub(crate) trait Work: Send {
    /// Runs the job's statements inside the group's transaction and its own savepoint (a job
    /// alone in its group: the transaction, rolled back on [`Step::Undo`]; a job that
    /// [`undoes_itself`](Work::undoes_itself): no savepoint).
    fn run(&mut self, db: &rusqlite::Connection, table: &HostTable) -> Step;
    /// True when the job needs no savepoint: whenever it answers [`Step::Undo`] it has left
    /// nothing written (it wrote nothing, or took back what it wrote), and it answers
    /// [`Step::Spoiled`] when it could not. A savepoint costs two statements and a copy, into
    /// a journal in memory, of each page the job changes that its group changed before.
    fn undoes_itself(&self) -> bool {
        false
    }
    /// The group committed.
    fn committed(self: Box<Self>, table: &HostTable);
    /// The group did not commit.
    fn failed(self: Box<Self>, table: &HostTable, error: LedgerError);
    /// Claims this job carries (for the commit counters).
    fn claims(&self) -> u64 {
        0
    }
    /// Writes this job carries (a claim, a message; a batch counts each of its messages):
    /// they pace the checkpoints.
    fn writes(&self) -> u64 {
        1
    }
}

/// A handle on the hot writer thread; cheap to clone. The thread ends when the last handle
/// is dropped.
#[derive(Clone)]
pub(crate) struct HotWriter {
    jobs: mpsc::Sender<Box<dyn Work>>,
    /// The checkpoint thread's [`WAL_LIMIT_FRAMES`] (lowered by tests).
    #[cfg_attr(not(test), allow(dead_code))]
    wal_limit: Arc<AtomicI64>,
    /// Jobs queued so far (tests wait on it to know a job is in the queue).
    #[cfg(test)]
    submitted: Arc<std::sync::atomic::AtomicU64>,
    /// Consumer batches this writer applied whole (tests tell them from those it handed to
    /// the general path).
    #[cfg(test)]
    batches_applied: Arc<std::sync::atomic::AtomicU64>,
}

impl std::fmt::Debug for HotWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HotWriter")
    }
}

/// What the thread needs of the ledger.
pub(crate) struct Shared {
    pub writer: Writer,
    pub table: Arc<HostTable>,
    pub gate: Arc<tokio::sync::RwLock<()>>,
    pub commits: super::CommitCounters,
}

impl HotWriter {
    /// Opens the thread's connection on the writer's file and starts the thread.
    pub(crate) fn start(shared: Shared) -> Result<HotWriter, LedgerError> {
        let db = open(&shared.writer.file)?;
        let checkpointer = open(&shared.writer.file)?;
        let (jobs, queue) = mpsc::channel::<Box<dyn Work>>();
        // One checkpoint asked for at most: asking while one is pending changes nothing.
        let (ask, asked) = mpsc::sync_channel::<()>(1);
        let thread = |name: &str| std::thread::Builder::new().name(name.into());
        let failed = |e: std::io::Error| {
            LedgerError::Invalid(format!("cannot start the ledger's writer threads: {e}"))
        };
        let wal_limit = Arc::new(AtomicI64::new(WAL_LIMIT_FRAMES));
        let checkpointing = Checkpointing {
            file: shared.writer.file.clone(),
            writers: shared.writer.conn.clone(),
            done: shared.commits.checkpoints.clone(),
            wal_limit: wal_limit.clone(),
        };
        thread("ledger-checkpoint")
            .spawn(move || checkpoints(checkpointing, checkpointer, asked))
            .map_err(failed)?;
        thread("ledger-writer")
            .spawn(move || serve(db, shared, queue, ask))
            .map_err(failed)?;
        Ok(HotWriter {
            jobs,
            wal_limit,
            #[cfg(test)]
            submitted: Arc::default(),
            #[cfg(test)]
            batches_applied: Arc::default(),
        })
    }

    /// Lowers the log's limit (frames) from [`WAL_LIMIT_FRAMES`], for tests.
    #[cfg(test)]
    pub(crate) fn set_wal_limit(&self, frames: i64) {
        self.wal_limit.store(frames, Ordering::Relaxed);
    }

    /// Queues `job`; it is answered through itself (`committed` or `failed`).
    pub(crate) fn submit(&self, job: Box<dyn Work>) -> Result<(), Box<dyn Work>> {
        self.jobs.send(job).map_err(|e| e.0)?;
        #[cfg(test)]
        self.submitted.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Jobs queued so far.
    #[cfg(test)]
    pub(crate) fn submitted(&self) -> u64 {
        self.submitted.load(Ordering::SeqCst)
    }

    /// Notes a consumer batch this writer applied whole.
    #[cfg(test)]
    pub(crate) fn batch_applied(&self) {
        self.batches_applied.fetch_add(1, Ordering::SeqCst);
    }

    /// Consumer batches this writer applied whole so far.
    #[cfg(test)]
    pub(crate) fn batches_applied(&self) -> u64 {
        self.batches_applied.load(Ordering::SeqCst)
    }
}

/// A connection as sqlx's writer opens it (`Ledger::connect`): the pragmas that are per
/// connection (journal mode is the file's), statement journals in memory. It never checkpoints
/// on its own: a checkpoint at commit (copying the WAL's pages back and syncing) held every
/// claim of the next group for tens of milliseconds, the tail of the decisions' latency.
/// The checkpoint thread does it instead (`checkpoints`), beside the writer.
fn open(file: &std::path::Path) -> Result<rusqlite::Connection, LedgerError> {
    let db = rusqlite::Connection::open(file).map_err(|e| {
        LedgerError::Invalid(format!(
            "cannot open the SQLite ledger {} for its writer: {e}",
            file.display()
        ))
    })?;
    db.busy_timeout(Duration::from_secs(10))?;
    db.execute_batch(
        "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; \
         PRAGMA cache_size = -32768; PRAGMA temp_store = MEMORY; \
         PRAGMA wal_autocheckpoint = 0;",
    )?;
    db.pragma_update(None, "mmap_size", super::MMAP_BYTES)?;
    db.pragma_update(None, "journal_size_limit", WAL_LIMIT_FRAMES * 4096)?;
    db.set_prepared_statement_cache_capacity(64);
    Ok(db)
}

/// What the checkpoint thread needs.
struct Checkpointing {
    file: std::path::PathBuf,
    /// The writers' lock (the hot writer takes it for each group, sqlx's writes for theirs).
    writers: Arc<tokio::sync::Mutex<SqliteConnection>>,
    /// Checkpoints that copied the whole log.
    done: prometheus_client::metrics::counter::Counter,
    wal_limit: Arc<AtomicI64>,
}

/// The checkpoint thread: a checkpoint whenever the writer asks (every
/// [`WRITES_PER_CHECKPOINT`] writes), counted in `done` once it copied the whole log. In WAL
/// mode it copies committed pages back to the database file while the writer goes on
/// appending; the pages many groups rewrote are copied and synced once.
fn checkpoints(c: Checkpointing, mut db: rusqlite::Connection, asked: mpsc::Receiver<()>) {
    while asked.recv().is_ok() {
        // Opened while the file could not be written: open it again (as the writer does).
        if db.is_readonly(rusqlite::DatabaseName::Main).unwrap_or(true) {
            match open(&c.file) {
                Ok(fresh) => db = fresh,
                Err(e) => {
                    tracing::warn!(error = %e, "the ledger's checkpoint thread cannot reopen the file");
                    continue;
                }
            }
        }
        let limit = c.wal_limit.load(Ordering::Relaxed);
        match checkpoint(&db, &c.writers, limit) {
            Ok((log, copied)) if copied >= log => {
                c.done.inc();
            }
            // A reader still on older pages: the next checkpoint copies the rest.
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "the ledger's checkpoint failed; the next one tries again")
            }
        }
    }
}

/// One checkpoint: (frames in the log, frames copied), as of the checkpoint's start. A passive
/// checkpoint holds nobody, but SQLite starts the log over only at a write that finds every
/// frame copied, and under steady writes none does: frames are appended while a checkpoint
/// copies. The log grew by every frame ever written (800 MB in a 20 s benchmark), each
/// frame written past the end of its file, which costs the writer twice an overwrite. Past
/// `limit` frames, more passes copy what was appended during the one before until one is
/// short, then a last one copies the rest with the writers held (a few milliseconds: two
/// syncs), so that the next group starts the log over.
fn checkpoint(
    db: &rusqlite::Connection,
    writers: &tokio::sync::Mutex<SqliteConnection>,
    limit: i64,
) -> rusqlite::Result<(i64, i64)> {
    let passive = || {
        db.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            Ok((row.get::<_, i64>(1)?, row.get::<_, i64>(2)?))
        })
    };
    let mut ran = passive()?;
    if ran.0 < limit {
        return Ok(ran);
    }
    for _ in 0..TAIL_PASSES {
        let copied_before = ran.1;
        ran = passive()?;
        if ran.1 - copied_before <= TAIL_FRAMES {
            break;
        }
    }
    let _writing = writers.blocking_lock();
    passive()
}

thread_local! {
    /// Connections the writer's thread opened again since its first (`serve`).
    static REOPENED: Cell<u64> = const { Cell::new(0) };
}

/// Which of its connections the calling writer thread runs its jobs on: 0 for the first, one
/// more each time it opened the file again. A job that remembers something of its connection
/// (`PRAGMA data_version` is counted per connection) tells connections apart by it.
pub(crate) fn connection_serial() -> u64 {
    REOPENED.with(Cell::get)
}

/// The thread: waits for a job, takes every job queued by then, runs them as one group.
fn serve(
    mut db: rusqlite::Connection,
    shared: Shared,
    queue: mpsc::Receiver<Box<dyn Work>>,
    checkpoint: mpsc::SyncSender<()>,
) {
    let mut reconnect = false;
    let mut since_checkpoint = 0u64;
    while let Ok(first) = queue.recv() {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        let _shared = shared.gate.blocking_read();
        let _writing = shared.writer.conn.blocking_lock();
        let ready = shared.writer.check_file().and_then(|()| {
            // SQLite opens a file it cannot write read-only without a word: such a connection
            // is opened again once the file may have become writable.
            let read_only = db.is_readonly(rusqlite::DatabaseName::Main).unwrap_or(true);
            if reconnect || read_only {
                db = open(&shared.writer.file)?;
                REOPENED.with(|n| n.set(n.get() + 1));
                reconnect = false;
                if !db.is_readonly(rusqlite::DatabaseName::Main).unwrap_or(true) {
                    tracing::info!(file = %shared.writer.file.display(), "the ledger's writer thread reconnected");
                }
            }
            Ok(())
        });
        if let Err(e) = ready {
            fail(group, &shared.table, e);
            continue;
        }
        // A job that panics (a bug) must not take the thread with it, nor leave its group's
        // reservations held in the table: the group is rolled back and answered with an error.
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_group(&db, &shared.table, &mut group)
        }))
        .unwrap_or_else(|_| {
            Err(LedgerError::Invalid(
                "the ledger's writer failed on this group (a job panicked); nothing of it was \
                 written"
                    .into(),
            ))
        });
        match ran {
            Ok(()) => {
                since_checkpoint += group.iter().map(|j| j.writes()).sum::<u64>();
                if since_checkpoint >= WRITES_PER_CHECKPOINT {
                    since_checkpoint = 0;
                    let _ = checkpoint.try_send(());
                }
                let claims: u64 = group.iter().map(|j| j.claims()).sum();
                if claims > 0 {
                    shared.commits.commits.inc();
                    shared.commits.claims.inc_by(claims);
                }
                for job in group {
                    job.committed(&shared.table);
                }
            }
            Err(e) => {
                // Whatever the transaction began is undone; an error of the rollback only
                // means none was open.
                let _ = db.execute_batch("ROLLBACK");
                reconnect |= e.is_outage();
                fail(group, &shared.table, e);
            }
        }
    }
}

/// Answers every job of a group that was not written: the first with the error itself, the
/// others with its message.
fn fail(group: Vec<Box<dyn Work>>, table: &HostTable, e: LedgerError) {
    let errors = e.for_group(group.len(), "");
    for (job, e) in group.into_iter().zip(errors) {
        job.failed(table, e);
    }
}

/// One transaction: each job in its own savepoint, except a job that undoes itself and a job
/// alone in its group, which has the transaction to itself (kept: committed; undone or
/// spoiled: rolled back).
///
/// A savepoint makes SQLite copy every page the job first changes into an in-memory
/// sub-journal, in case the job is rolled back alone. A consumer batch of heartbeats changes a
/// page of the message-id index per message (the ids are random): in a backlog drain, where
/// each group is one batch, those copies were 6 % of the process' CPU, for a rollback that the
/// transaction's own does as well. Claims and the builds' notifications undo themselves: their
/// groups take no savepoint at all (BENCHMARKS.md, "Orders moved within blocks; claims and
/// confirmations without savepoints").
fn run_group(
    db: &rusqlite::Connection,
    table: &HostTable,
    group: &mut [Box<dyn Work>],
) -> Result<(), LedgerError> {
    db.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    if let [job] = group {
        let end = match job.run(db, table) {
            Step::Keep => "COMMIT",
            Step::Undo | Step::Spoiled(_) => "ROLLBACK",
        };
        db.prepare_cached(end)?.execute([])?;
        return Ok(());
    }
    for job in group.iter_mut() {
        if job.undoes_itself() {
            if let Step::Spoiled(e) = job.run(db, table) {
                return Err(e);
            }
        } else {
            db.prepare_cached("SAVEPOINT job")?.execute([])?;
            if !matches!(job.run(db, table), Step::Keep) {
                db.prepare_cached("ROLLBACK TO job")?.execute([])?;
            }
            db.prepare_cached("RELEASE job")?.execute([])?;
        }
        // The jobs after would each commit on their own.
        if let Some(e) = transaction_lost(db, "in the middle of a group") {
            return Err(e);
        }
    }
    db.prepare_cached("COMMIT")?.execute([])?;
    Ok(())
}

/// SQLite rolls a transaction back by itself on some errors (a full disk, an I/O error); a
/// statement run after that commits on its own. The error that says so (the group fails and
/// nothing of it was written), when the group's transaction is gone.
pub(crate) fn transaction_lost(db: &rusqlite::Connection, during: &str) -> Option<LedgerError> {
    db.is_autocommit().then(|| {
        LedgerError::Invalid(format!(
            "the ledger's transaction was rolled back by SQLite {during}; nothing of its group \
             was written"
        ))
    })
}

/// The writer's tests; their jobs that hold the writer or panic serve other modules' tests too.
#[cfg(test)]
pub(crate) mod tests;
