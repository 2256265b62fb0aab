//! The general path: a batch of messages in one transaction through sqlx (SQLite's writing
//! connection, PostgreSQL's pool), each message's id and effect committed together; when a
//! message is rejected or the database refuses one, the batch is applied again with a
//! savepoint per message, so that the message at fault rolls back alone.

use super::write::{apply_postgres, apply_sqlite, flush_postgres, flush_sqlite, Pass, Touched};
use super::{Applied, ApplyError, Effect, Message, Outcome, ProfilePatch};
use crate::domain::HostId;
use crate::ledger::messages::{mark_all_postgres, mark_all_sqlite};
use crate::ledger::{HostTable, Ledger, LedgerError, Pools};
use sqlx::Acquire;

/// Tries the batch without savepoints, every message id recorded in one statement and its
/// host-state events coalesced (see `write::Touched`: a few statements for all of them, written
/// before any other message's effect and before the commit); only when a message is rejected,
/// or the database refuses something for its content (not an outage), does it roll everything
/// back and apply again with a savepoint (and its own id statement and host writes) per message,
/// so that the message at fault rolls back alone with the database's reason and the rest of the
/// batch is applied. Only an outage fails the batch.
macro_rules! apply_all {
    ($db:ty, $pool:expr, $table:expr, $touched:expr, $effect:ident, $flush:ident, $mark_all:ident, $batch:expr, $now_ms:expr) => {{
        let mut outcomes = Vec::with_capacity($batch.len());
        let mut tx = $pool.begin().await?;
        let clean = 'fast: {
            // Every valid message's key in one statement; the effects below skip their own.
            let valid: Vec<(&str, &str)> = $batch
                .iter()
                .filter(|m| !matches!(m.effect, Effect::Invalid(_)))
                .map(|m| (m.sent_at.as_str(), m.id.as_str()))
                .collect();
            // Whether each valid message is new, in order.
            let mut fresh = match $mark_all(&mut *tx, &valid, $now_ms).await {
                Ok(fresh) => fresh.into_iter(),
                // An outage fails the batch; any other error sends it to the savepoint pass.
                Err(e) => {
                    let e = LedgerError::from(e);
                    if e.is_outage() {
                        return Err(e);
                    }
                    break 'fast false;
                }
            };
            for m in $batch.iter() {
                if let Effect::Invalid(reason) = &m.effect {
                    outcomes.push(Err(m.rejection(reason)));
                    continue;
                }
                // Seen in an earlier batch, or earlier in this one.
                if fresh.next() != Some(true) {
                    outcomes.push(Ok(Applied::Duplicate));
                    continue;
                }
                if m.needs_flush() && $touched.unflushed() {
                    if let Err(e) = $flush(&mut tx, $table, $touched).await {
                        let e = LedgerError::from(e);
                        if e.is_outage() {
                            return Err(e);
                        }
                        break 'fast false;
                    }
                }
                match $effect(&mut tx, $table, m, $now_ms, Pass::Coalesced, $touched).await {
                    Ok(applied) => outcomes.push(Ok(applied)),
                    Err(ApplyError::Rejected(_)) => break 'fast false,
                    Err(ApplyError::Ledger(e)) if e.is_outage() => return Err(e),
                    Err(ApplyError::Ledger(_)) => break 'fast false,
                }
            }
            match $flush(&mut tx, $table, $touched)
                .await
                .map_err(LedgerError::from)
            {
                Ok(()) => true,
                Err(e) if e.is_outage() => return Err(e),
                Err(_) => false,
            }
        };
        if clean {
            tx.commit().await?;
            return Ok(outcomes);
        }
        // After a database error PostgreSQL refuses everything until the rollback; an error
        // of the rollback itself is the connection's, an outage.
        tx.rollback().await?;
        outcomes.clear();
        *$touched = Touched::default();
        let mut tx = $pool.begin().await?;
        for m in $batch.iter() {
            if let Effect::Invalid(reason) = &m.effect {
                outcomes.push(Err(m.rejection(reason)));
                continue;
            }
            // Heartbeats so far are written outside this message's savepoint.
            if m.needs_flush() && $touched.unflushed() {
                $flush(&mut tx, $table, $touched).await?;
            }
            let mut savepoint = (&mut tx).begin().await?;
            let before = $touched.mark();
            let result = $effect(&mut savepoint, $table, m, $now_ms, Pass::Alone, $touched).await;
            let result = match result {
                Err(ApplyError::Ledger(e)) if !e.is_outage() => {
                    Err(ApplyError::Rejected(format!("the ledger refused it: {e}")))
                }
                other => other,
            };
            match result {
                Ok(Applied::Duplicate) => {
                    savepoint.rollback().await?;
                    outcomes.push(Ok(Applied::Duplicate));
                }
                Ok(applied) => {
                    savepoint.commit().await?;
                    outcomes.push(Ok(applied));
                }
                Err(ApplyError::Rejected(reason)) => {
                    savepoint.rollback().await?;
                    $touched.rollback_to(before);
                    outcomes.push(Err(m.rejection(&reason)));
                }
                Err(ApplyError::Ledger(e)) => return Err(e),
            }
        }
        $flush(&mut tx, $table, $touched).await?;
        tx.commit().await?;
        Ok(outcomes)
    }};
}

/// [`Ledger::apply_messages`] of the messages `take` gives once the ledger's writer is held (SQLite's
/// one connection; PostgreSQL takes at once): whatever queued while the previous writer ran
/// joins this batch. `note` reads each taken job's message; `now_ms` is read once taken.
/// Returns the jobs with the outcomes, in their order.
pub(crate) async fn apply_taken<J>(
    ledger: &Ledger,
    take: impl FnOnce() -> Vec<J>,
    note: impl Fn(&J) -> &Message,
    now_ms: impl Fn() -> i64,
) -> (Vec<J>, Result<Vec<Outcome>, LedgerError>) {
    let mut touched = Touched::default();
    let (jobs, outcomes) = apply_in_tx(ledger, take, note, now_ms, &mut touched).await;
    (jobs, settle_table(ledger, outcomes, touched).await)
}

/// The table's side of a committed batch that needs no read: its heartbeats are set; answers
/// the re-registered hosts nothing else of the batch changed, with their new profiles (the
/// last one of each), and the hosts to read back.
pub(super) fn settle_committed(
    table: &HostTable,
    mut touched: Touched,
) -> (Vec<ProfilePatch>, Vec<HostId>) {
    let counters = table.host_counters();
    counters.older_events.inc_by(touched.older);
    for (reg, takeover) in &touched.replaced {
        takeover.log(reg);
        counters.node_replaced.inc();
    }
    for service in &touched.services {
        table.note_service(
            &service.host,
            service.disabled,
            service.forced_down,
            service.at_ms,
        );
    }
    for beat in &touched.heartbeats {
        if let Some(h) = table.get(beat.id) {
            table.set_liveness(beat.id, beat.up, beat.disabled, h.forced_down, beat.seen_ms);
        }
    }
    touched.reload.sort();
    touched.reload.dedup();
    let mut patches: Vec<ProfilePatch> = Vec::new();
    for patch in touched.patched.into_iter().rev() {
        let id = patch.id;
        if touched.reload.binary_search(&id).is_err() && !patches.iter().any(|p| p.id == id) {
            patches.push(patch);
        }
    }
    (patches, touched.reload)
}

/// After a batch committed: the live table takes its heartbeats and reloads the hosts it
/// changed, before anyone is answered.
async fn settle_table(
    ledger: &Ledger,
    outcomes: Result<Vec<Outcome>, LedgerError>,
    touched: Touched,
) -> Result<Vec<Outcome>, LedgerError> {
    let outcomes = outcomes?;
    let table = ledger.table();
    // Re-registered hosts nothing else of the batch changed take their new profile as it is
    // (the last one of each); the others are read back.
    let (patches, mut reload) = settle_committed(table, touched);
    if !patches.is_empty() {
        // Exclusive like a reload: a reload of another process' change that read the rows
        // before this commit must not land after these profiles.
        let _exclusive = ledger.gate.write().await;
        reload.extend(table.load_profiles(patches));
    }
    ledger.reload(&reload).await?;
    Ok(outcomes)
}

async fn apply_in_tx<J>(
    ledger: &Ledger,
    take: impl FnOnce() -> Vec<J>,
    note: impl Fn(&J) -> &Message,
    now_ms: impl Fn() -> i64,
    touched: &mut Touched,
) -> (Vec<J>, Result<Vec<Outcome>, LedgerError>) {
    let table = ledger.table();
    match &ledger.pools {
        Pools::Sqlite { write, .. } => {
            let mut conn = match write.lock().await {
                Ok(conn) => conn,
                Err(e) => return (take(), Err(e)),
            };
            let jobs = take();
            let batch: Vec<&Message> = jobs.iter().map(&note).collect();
            let batch = batch.as_slice();
            let now_ms = now_ms();
            let applied: Result<Vec<Outcome>, LedgerError> = async {
                apply_all!(
                    sqlx::Sqlite,
                    conn,
                    table,
                    touched,
                    apply_sqlite,
                    flush_sqlite,
                    mark_all_sqlite,
                    batch,
                    now_ms
                )
            }
            .await;
            if let Err(e) = &applied {
                write.failed(e);
            }
            drop(conn);
            (jobs, applied)
        }
        Pools::Postgres(pool) => {
            let jobs = take();
            let batch: Vec<&Message> = jobs.iter().map(&note).collect();
            let batch = batch.as_slice();
            let now_ms = now_ms();
            let applied: Result<Vec<Outcome>, LedgerError> = async {
                apply_all!(
                    sqlx::Postgres,
                    pool,
                    table,
                    touched,
                    apply_postgres,
                    flush_postgres,
                    mark_all_postgres,
                    batch,
                    now_ms
                )
            }
            .await;
            (jobs, applied)
        }
    }
}
