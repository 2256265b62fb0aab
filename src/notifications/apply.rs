//! Batches of messages in one transaction: each message's id and effect are committed
//! together, each inside its own savepoint so that a rejected message rolls back alone.

use super::effects::{
    apply_postgres, apply_sqlite, flush_postgres, flush_sqlite, needs_flush, Touched,
};
use crate::domain::HostId;
use crate::ledger::messages::{mark_all_postgres, mark_all_sqlite};
use crate::ledger::{HostRegistration, HostTable, Ledger, LedgerError, Pools};
use crate::nova::{HostEvent, HostStatePayload, Notification};
use sqlx::Acquire;

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

/// The outcome of one message of a batch: applied (or skipped), or rejected with a reason.
pub type Outcome = Result<Applied, String>;

fn registration(p: &HostStatePayload) -> Result<HostRegistration, String> {
    let reg = HostRegistration {
        host: p.host.clone(),
        node: p.node.clone(),
        uuid: p.compute_node_uuid.clone(),
        availability_zone: p.availability_zone.clone().unwrap_or_else(|| "nova".into()),
        up: p.up,
        disabled: p.disabled,
        inventories: p.inventory.iter().map(|(c, i)| (c.clone(), *i)).collect(),
        traits: p.traits.clone(),
        aggregates: p.aggregates.clone(),
    };
    reg.validate().map_err(|e| e.to_string())?;
    Ok(reg)
}

/// Checks what can be checked without the ledger, so a bad message never opens a savepoint.
pub(super) fn validate(n: &Notification) -> Result<Option<HostRegistration>, String> {
    match &n.event {
        HostEvent::HostState(p) => registration(p).map(Some),
        HostEvent::Upsert { demand, .. } if !demand.is_non_negative() => {
            Err(format!("negative flavor sizes {demand:?}"))
        }
        _ => Ok(None),
    }
}

/// Tries the batch without savepoints, every message id recorded in one statement and its
/// host-state events coalesced (see `effects::Touched`: a few statements for all of them, written
/// before any other message's effect and before the commit); only when a message is rejected,
/// or the database refuses something for its content (not an outage), does it roll everything
/// back and apply again with a savepoint (and its own id statement and host writes) per message,
/// so that the message at fault rolls back alone with the database's reason and the rest of the
/// batch is applied. Only an outage fails the batch.
macro_rules! apply_all {
    ($db:ty, $pool:expr, $table:expr, $touched:expr, $effect:ident, $flush:ident, $mark_all:ident, $batch:expr, $now_ms:expr) => {{
        let mut outcomes = Vec::with_capacity($batch.len());
        let checked: Vec<_> = $batch.iter().map(|n| validate(n)).collect();
        let mut tx = $pool.begin().await?;
        let clean = 'fast: {
            // Every valid message's key in one statement; the effects below skip their own.
            let valid: Vec<(&str, &str)> = $batch
                .iter()
                .zip(&checked)
                .filter(|(_, c)| c.is_ok())
                .map(|(n, _)| (n.sent_at(), n.message_id.as_str()))
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
            for (n, checked) in $batch.iter().zip(&checked) {
                let reg = match checked {
                    Ok(reg) => reg,
                    Err(reason) => {
                        outcomes.push(Err(format!("{} {}: {reason}", n.event_type, n.message_id)));
                        continue;
                    }
                };
                // Seen in an earlier batch, or earlier in this one.
                if fresh.next() != Some(true) {
                    outcomes.push(Ok(Applied::Duplicate));
                    continue;
                }
                if needs_flush(&n.event) && $touched.unflushed() {
                    if let Err(e) = $flush(&mut tx, $table, $touched).await {
                        let e = LedgerError::from(e);
                        if e.is_outage() {
                            return Err(e);
                        }
                        break 'fast false;
                    }
                }
                match $effect(
                    &mut tx,
                    $table,
                    n,
                    reg.as_ref(),
                    $now_ms,
                    false,
                    true,
                    $touched,
                )
                .await
                {
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
        for (n, checked) in $batch.iter().zip(&checked) {
            let reg = match checked {
                Ok(reg) => reg,
                Err(reason) => {
                    outcomes.push(Err(format!("{} {}: {reason}", n.event_type, n.message_id)));
                    continue;
                }
            };
            // Heartbeats so far are written outside this message's savepoint.
            if needs_flush(&n.event) && $touched.unflushed() {
                $flush(&mut tx, $table, $touched).await?;
            }
            let mut savepoint = (&mut tx).begin().await?;
            let before = $touched.mark();
            let result = $effect(
                &mut savepoint,
                $table,
                n,
                reg.as_ref(),
                $now_ms,
                true,
                false,
                $touched,
            )
            .await;
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
                    outcomes.push(Err(format!("{} {}: {reason}", n.event_type, n.message_id)));
                }
                Err(ApplyError::Ledger(e)) => return Err(e),
            }
        }
        $flush(&mut tx, $table, $touched).await?;
        tx.commit().await?;
        Ok(outcomes)
    }};
}

/// Applies a batch in one transaction, in order, each message exactly once (a message seen
/// before, in an earlier batch or earlier in this one, is a `Duplicate`). A rejected message
/// changes nothing and does not affect the others. `Err` means the ledger failed and nothing
/// of the batch was committed. Once committed, the live table loads the hosts the batch
/// changed, before the caller acknowledges anything.
pub async fn apply_batch(
    ledger: &Ledger,
    batch: &[&Notification],
    now_ms: i64,
) -> Result<Vec<Outcome>, LedgerError> {
    // On SQLite a batch of host-state events goes to the hot writer (`hot_batch`).
    if let Some(outcomes) = super::hot_batch::apply_hot(ledger, batch, now_ms).await {
        return outcomes;
    }
    let (_, outcomes) = apply_taken(ledger, || batch.to_vec(), |n| *n, || now_ms).await;
    outcomes
}

/// [`apply_batch`] of the messages `take` gives once the ledger's writer is held (SQLite's
/// one connection; PostgreSQL takes at once): whatever queued while the previous writer ran
/// joins this batch. `note` reads each taken job's message; `now_ms` is read once taken.
/// Returns the jobs with the outcomes, in their order.
pub(crate) async fn apply_taken<J>(
    ledger: &Ledger,
    take: impl FnOnce() -> Vec<J>,
    note: impl Fn(&J) -> &Notification,
    now_ms: impl Fn() -> i64,
) -> (Vec<J>, Result<Vec<Outcome>, LedgerError>) {
    let mut touched = Touched::default();
    let (jobs, outcomes) = apply_in_tx(ledger, take, note, now_ms, &mut touched).await;
    (jobs, settle_table(ledger, outcomes, touched).await)
}

/// A re-registered host's new profile for the table: (id, profile, up, disabled, last seen).
pub(super) type Patch = (
    HostId,
    std::sync::Arc<crate::domain::HostProfile>,
    bool,
    bool,
    i64,
);

/// The table's side of a committed batch that needs no read: its heartbeats are set; answers
/// the re-registered hosts nothing else of the batch changed, with their new profiles (the
/// last one of each), and the hosts to read back.
pub(super) fn settle_committed(
    table: &HostTable,
    mut touched: Touched,
) -> (Vec<Patch>, Vec<HostId>) {
    let counters = table.host_counters();
    counters.older_events.inc_by(touched.older);
    for (reg, takeover) in &touched.replaced {
        takeover.log(reg);
        counters.node_replaced.inc();
    }
    for (id, up, disabled, seen) in &touched.heartbeats {
        if let Some(h) = table.get(*id) {
            table.set_liveness(*id, *up, *disabled, h.forced_down, *seen);
        }
    }
    touched.reload.sort();
    touched.reload.dedup();
    let mut patches: Vec<Patch> = Vec::new();
    for patch in touched.patched.into_iter().rev() {
        let id = patch.0;
        if touched.reload.binary_search(&id).is_err() && !patches.iter().any(|p| p.0 == id) {
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
    note: impl Fn(&J) -> &Notification,
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
            let batch: Vec<&Notification> = jobs.iter().map(&note).collect();
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
            let batch: Vec<&Notification> = jobs.iter().map(&note).collect();
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

/// Applies `n` to the ledger exactly once.
pub async fn apply(ledger: &Ledger, n: &Notification, now_ms: i64) -> Result<Applied, ApplyError> {
    let mut outcomes = apply_batch(ledger, &[n], now_ms).await?;
    match outcomes.pop() {
        Some(Ok(applied)) => Ok(applied),
        Some(Err(reason)) => Err(ApplyError::Rejected(reason)),
        None => Err(ApplyError::Rejected("empty batch".into())),
    }
}

#[cfg(test)]
mod tests;
