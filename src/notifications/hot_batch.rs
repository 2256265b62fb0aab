//! A consumer batch applied by SQLite's hot writer (`ledger::hot`): when every message of the
//! batch is a host-state event or one Parasol records and does not act on (the bulk of the
//! traffic: heartbeats and re-registrations of the emulated or real hosts), the whole batch is
//! one job of the writer's next group, in one savepoint, as direct calls of prepared
//! statements with bound parameters — each message id recorded with its own insert, the
//! host-state events coalesced as the general path coalesces them (`effects::Touched`) and
//! written row by row (`effects::flush_rusqlite`) — instead of sqlx's statements with JSON
//! parameters (which SQLite prints back to text and parses again, each statement a round trip
//! to sqlx's worker thread).
//!
//! Exactly-once as on the general path: the ids and the effects commit together, and the
//! caller acknowledges only after the commit and the live table's update. A batch with any
//! other message, or one the database refuses something of (the job's savepoint rolls back:
//! nothing of it is written), takes the general path (`apply`), which says which message is
//! at fault and applies the rest; an outage fails the batch as it does there.

use super::apply::{settle_committed, validate, Applied, Outcome};
use super::effects::{flush_rusqlite, Prepared, Touched};
use super::known_rows::KnownRows;
use crate::domain::HostId;
use crate::ledger::hot::{Step, Work};
use crate::ledger::messages::Marks;
use crate::ledger::{HostRegistration, HostTable, Ledger, LedgerError};
use crate::nova::{HostEvent, Notification};

/// A message's key in `processed_messages`: its `Notification::sent_at` and its id.
type Key = (String, String);

fn key_of(n: &Notification) -> Key {
    (n.sent_at().to_string(), n.message_id.clone())
}

/// A message of the batch, as the writer needs it. Most are host-state events: the other
/// variants' unused room is no waste worth a box per event.
#[allow(clippy::large_enum_variant)]
enum Item {
    /// Rejected before the ledger (its outcome's reason); nothing is written for it.
    Invalid(String),
    /// A host-state event: its key, validated registration and, when it is surely a
    /// re-registration, what writing it takes.
    HostState(Key, HostRegistration, Option<Prepared>, Option<i64>),
    /// Recorded as processed and nothing else (an event Parasol does not act on, an
    /// aggregate cast: `Ingest` hands those to the cloud view).
    Recorded(Key),
}

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
    /// Taken by `write` (the job runs once).
    items: Vec<Item>,
    /// Messages of the batch.
    messages: u64,
    now_ms: i64,
    touched: Touched,
    outcome: Result<Vec<Outcome>, LedgerError>,
    reply: tokio::sync::oneshot::Sender<Answer>,
}

/// The batch as a job, when every message of it is one this job applies.
fn job_of(
    table: &HostTable,
    batch: &[&Notification],
    now_ms: i64,
) -> Option<(HotBatch, tokio::sync::oneshot::Receiver<Answer>)> {
    if batch.is_empty() {
        return None;
    }
    let mut items = Vec::with_capacity(batch.len());
    for n in batch {
        let item = match &n.event {
            HostEvent::HostState(_) => match validate(n) {
                Ok(Some(reg)) => {
                    let prepared = Prepared::surely_needed(table, &reg);
                    Item::HostState(key_of(n), reg, prepared, n.sent_ms())
                }
                Ok(None) => return None,
                Err(reason) => {
                    Item::Invalid(format!("{} {}: {reason}", n.event_type, n.message_id))
                }
            },
            HostEvent::Unknown { .. } | HostEvent::Aggregates(_) => Item::Recorded(key_of(n)),
            _ => return None,
        };
        items.push(item);
    }
    let (reply, answer) = tokio::sync::oneshot::channel();
    let job = HotBatch {
        messages: items.len() as u64,
        items,
        now_ms,
        touched: Touched::default(),
        outcome: Ok(Vec::new()),
        reply,
    };
    Some((job, answer))
}

impl HotBatch {
    fn write(
        &mut self,
        db: &rusqlite::Connection,
        table: &HostTable,
    ) -> Result<Vec<Outcome>, LedgerError> {
        let HotBatch {
            items,
            now_ms,
            touched,
            ..
        } = self;
        let mut outcomes = Vec::with_capacity(items.len());
        let mut marks = Marks::prepare(db)?;
        for item in std::mem::take(items) {
            let outcome = match item {
                Item::Invalid(reason) => Err(reason),
                // Seen in an earlier batch, or earlier in this one.
                Item::HostState((ref sent_at, ref id), ..)
                | Item::Recorded((ref sent_at, ref id))
                    if !marks.mark((sent_at, id), *now_ms)? =>
                {
                    Ok(Applied::Duplicate)
                }
                Item::HostState(_, reg, prepared, sent_ms) => {
                    touched.stage(
                        table,
                        std::borrow::Cow::Owned(reg),
                        prepared,
                        sent_ms,
                        *now_ms,
                    );
                    Ok(Applied::Applied)
                }
                Item::Recorded(_) => Ok(Applied::Unknown),
            };
            outcomes.push(outcome);
        }
        flush_rusqlite(db, table, touched)?;
        Ok(outcomes)
    }
}

impl Work for HotBatch {
    fn run(&mut self, db: &rusqlite::Connection, table: &HostTable) -> Step {
        self.outcome = self.write(db, table);
        match self.outcome {
            Ok(_) => Step::Keep,
            Err(_) => {
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
            Ok(outcomes) => {
                let (patches, mut reload) = settle_committed(table, self.touched);
                if !patches.is_empty() {
                    reload.extend(table.load_profiles(patches));
                }
                Answer::Done(outcomes, reload)
            }
            Err(e) if e.is_outage() => Answer::Failed(e),
            // Something of the batch the database refused: the general path says which.
            Err(_) => Answer::Elsewhere,
        };
        let _ = self.reply.send(answer);
    }

    fn failed(self: Box<Self>, _table: &HostTable, error: LedgerError) {
        // The group was not committed: nor are the rows the writer remembered of it.
        KnownRows::forget();
        let _ = self.reply.send(Answer::Failed(error));
    }

    fn writes(&self) -> u64 {
        self.messages
    }
}

/// Applies `batch` by SQLite's hot writer when it can (see the module's description): `None`
/// when the general path must (PostgreSQL, a message of another kind, a value the database
/// refused), with nothing written.
pub(super) async fn apply_hot(
    ledger: &Ledger,
    batch: &[&Notification],
    now_ms: i64,
) -> Option<Result<Vec<Outcome>, LedgerError>> {
    let writer = ledger.hot.as_ref()?;
    let (job, answer) = job_of(ledger.table(), batch, now_ms)?;
    writer.submit(Box::new(job)).ok()?;
    match answer.await {
        Ok(Answer::Done(outcomes, reload)) => Some(ledger.reload(&reload).await.map(|()| outcomes)),
        Ok(Answer::Failed(e)) => Some(Err(e)),
        Ok(Answer::Elsewhere) | Err(_) => None,
    }
}
