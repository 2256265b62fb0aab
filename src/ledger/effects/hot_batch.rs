//! A consumer batch applied by SQLite's hot writer (`ledger::hot`): when every message of the
//! batch is a host-state event, a build's `instance.create.end` on a host the table knows, or
//! one Parasol records and does not act on (the bulk of the traffic: heartbeats and
//! re-registrations of the emulated or real hosts, and the confirmation of every decision's
//! claim), the whole batch is one job of the writer's next group, in one savepoint, as direct calls of prepared
//! statements with bound parameters — each message id recorded with its own insert, the
//! host-state events coalesced as the general path coalesces them (`write::Touched`) and
//! written row by row (`write::flush_rusqlite`), each build's own claim confirmed with one
//! statement (`write::CONFIRM_OWN_CLAIM`, as the general path and `hot_single` confirm it) —
//! instead of sqlx's statements with JSON
//! parameters (which SQLite prints back to text and parses again, each statement a round trip
//! to sqlx's worker thread).
//!
//! Exactly-once as on the general path: the ids and the effects commit together, and the
//! caller acknowledges only after the commit and the live table's update. A batch with any
//! other message, one with an `instance.create.end` whose allocation is not the build's claim
//! on that host (a reschedule's, an imported one, none), or one the database refuses
//! something of (the job's savepoint rolls back: nothing of it is written), takes the general
//! path (`batch`), which applies what those need, says which message is at fault and applies
//! the rest; an outage fails the batch as it does there.
//!
//! A confirmation changes only its allocation's `confirmed`, which no host-state event reads
//! or writes and the live table does not hold: writing it where it comes, before the batch's
//! host-state events staged ahead of it are flushed, leaves what the general path leaves
//! (which flushes them first).

use super::batch::settle_committed;
use super::known_rows::KnownRows;
use super::write::{flush_rusqlite, Prepared, Touched, CONFIRM_OWN_CLAIM};
use super::{Applied, Effect, Message, Outcome, Placed};
use crate::domain::HostId;
use crate::ledger::hot::{Step, Work};
use crate::ledger::messages::Marks;
use crate::ledger::{HostTable, Ledger, LedgerError};
use std::sync::Arc;

/// What the writer made of the batch.
enum Answer {
    /// Committed: the outcomes, and the hosts the table must still read back.
    Done(Vec<Outcome>, Vec<HostId>),
    /// Not written: the general path applies the batch.
    Elsewhere,
    /// The ledger failed: nothing of the batch was committed.
    Failed(LedgerError),
}

struct HotBatch {
    /// The messages, each a host-state event, a build's confirmation, one recorded only, or
    /// one rejected before the ledger (shared with the caller, which applies them by the general path if this job
    /// does not).
    batch: Arc<[Message]>,
    /// Per message, when it is a host-state event surely re-registering its host, what writing
    /// it takes (made before the writer takes the job, off its thread).
    prepared: Vec<Option<Prepared>>,
    now_ms: i64,
    touched: Touched,
    /// `Ok(None)`: the batch needs the general path (a confirmation that confirmed nothing).
    outcome: Result<Option<Vec<Outcome>>, LedgerError>,
    reply: tokio::sync::oneshot::Sender<Answer>,
}

/// The batch as a job, when every message of it is one this job applies.
fn job_of(
    table: &HostTable,
    batch: &Arc<[Message]>,
    now_ms: i64,
) -> Option<(HotBatch, tokio::sync::oneshot::Receiver<Answer>)> {
    if batch.is_empty() {
        return None;
    }
    let mut prepared = Vec::with_capacity(batch.len());
    for m in batch.iter() {
        prepared.push(match &m.effect {
            Effect::HostState { registration, .. } => Prepared::surely_needed(table, registration),
            Effect::Invalid(_) | Effect::RecordOnly => None,
            Effect::Place {
                host,
                node,
                step: Placed::Built,
                ..
            } if table.by_name(host, node.as_deref()).is_some() => None,
            _ => return None,
        });
    }
    let (reply, answer) = tokio::sync::oneshot::channel();
    let job = HotBatch {
        batch: batch.clone(),
        prepared,
        now_ms,
        touched: Touched::default(),
        outcome: Ok(None),
        reply,
    };
    Some((job, answer))
}

impl HotBatch {
    /// `Ok(None)`: a confirmation confirmed nothing; the general path applies the batch.
    fn write(
        &mut self,
        db: &rusqlite::Connection,
        table: &HostTable,
    ) -> Result<Option<Vec<Outcome>>, LedgerError> {
        let HotBatch {
            batch,
            prepared,
            now_ms,
            touched,
            ..
        } = self;
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut marks = Marks::prepare(db)?;
        for (m, prepared) in batch.iter().zip(prepared.iter_mut()) {
            let outcome = match &m.effect {
                Effect::Invalid(reason) => Err(m.rejection(reason)),
                // Seen in an earlier batch, or earlier in this one.
                _ if !marks.mark((m.sent_at.as_str(), m.id.as_str()), *now_ms)? => {
                    Ok(Applied::Duplicate)
                }
                Effect::HostState {
                    registration,
                    sent_ms,
                } => {
                    touched.stage(
                        table,
                        std::borrow::Cow::Borrowed(registration),
                        prepared.take(),
                        *sent_ms,
                        *now_ms,
                    );
                    Ok(Applied::Applied)
                }
                Effect::Place {
                    instance,
                    host,
                    node,
                    step: Placed::Built,
                    ..
                } => {
                    if !confirm_own_claim(db, table, instance, host, node.as_deref())? {
                        return Ok(None);
                    }
                    Ok(Applied::Applied)
                }
                Effect::RecordOnly => Ok(Applied::Unknown),
                // `job_of` takes no other kind.
                _ => return Ok(None),
            };
            outcomes.push(outcome);
        }
        flush_rusqlite(db, table, touched)?;
        Ok(Some(outcomes))
    }
}

/// Confirms `instance`'s allocation on the node the table knows by these names when it is the
/// build's own claim (one row changed); false when it is not, or the table no longer knows
/// the node (the general path then reads what it needs).
fn confirm_own_claim(
    db: &rusqlite::Connection,
    table: &HostTable,
    instance: &str,
    host: &str,
    node: Option<&str>,
) -> Result<bool, LedgerError> {
    let Some(known) = table.by_name(host, node) else {
        return Ok(false);
    };
    let confirmed = db
        .prepare_cached(CONFIRM_OWN_CLAIM)?
        .execute(rusqlite::params![instance, known.id.0])?;
    Ok(confirmed == 1)
}

impl Work for HotBatch {
    fn run(&mut self, db: &rusqlite::Connection, table: &HostTable) -> Step {
        self.outcome = self.write(db, table);
        match self.outcome {
            Ok(Some(_)) => Step::Keep,
            Ok(None) | Err(_) => {
                // What it wrote is rolled back: so is what the writer remembered of it.
                KnownRows::forget();
                Step::Undo
            }
        }
    }

    /// Runs on the writer's thread, which holds the reload gate shared from before the
    /// group's statements until every job of it is settled: no reload can read rows before
    /// this commit and land after what the table takes here.
    fn committed(self: Box<Self>, table: &HostTable) {
        let answer = match self.outcome {
            Ok(Some(outcomes)) => {
                let (patches, mut reload) = settle_committed(table, self.touched);
                if !patches.is_empty() {
                    reload.extend(table.load_profiles(patches));
                }
                Answer::Done(outcomes, reload)
            }
            Err(e) if e.is_outage() => Answer::Failed(e),
            // A confirmation that needs more, or something of the batch the database
            // refused: the general path applies it, or says which.
            Ok(None) | Err(_) => Answer::Elsewhere,
        };
        let _ = self.reply.send(answer);
    }

    fn failed(self: Box<Self>, _table: &HostTable, error: LedgerError) {
        // The group was not committed: nor are the rows the writer remembered of it.
        KnownRows::forget();
        let _ = self.reply.send(Answer::Failed(error));
    }

    fn writes(&self) -> u64 {
        self.batch.len() as u64
    }
}

/// Applies `batch` by SQLite's hot writer when it can (see the module's description): `None`
/// when the general path must (PostgreSQL, a message of another kind, a confirmation of
/// something else than the build's claim, a value the database refused), with nothing
/// written.
pub(super) async fn apply_hot(
    ledger: &Ledger,
    batch: &Arc<[Message]>,
    now_ms: i64,
) -> Option<Result<Vec<Outcome>, LedgerError>> {
    let writer = ledger.hot.as_ref()?;
    let (job, answer) = job_of(ledger.table(), batch, now_ms)?;
    writer.submit(Box::new(job)).ok()?;
    match answer.await {
        Ok(Answer::Done(outcomes, reload)) => {
            #[cfg(test)]
            writer.batch_applied();
            Some(ledger.reload(&reload).await.map(|()| outcomes))
        }
        Ok(Answer::Failed(e)) => Some(Err(e)),
        Ok(Answer::Elsewhere) | Err(_) => None,
    }
}
