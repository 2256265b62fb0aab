//! The notifications that come with every decision, applied by SQLite's hot writer
//! (`ledger::hot`): a heartbeat (a host-state event whose host the table knows with exactly
//! this profile, or one sent before the host's newest, which only says the host is alive:
//! `table::events`) and a build's `instance.create.end` that confirms Parasol's own claim. Each is
//! committed exactly once with its message id, in the writer's next group, as the general path
//! (`batch`) would commit it. Any other message, or one of these that turns out to need more
//! (an `instance.create.end` whose allocation is not the build's claim on that host), is
//! handed back untouched and takes the general path.

use super::write::{heartbeat_of, CONFIRM_OWN_CLAIM};
use super::{Applied, ApplyError, Effect, Message, Placed};
use crate::domain::HostId;
use crate::ledger::hot::{transaction_lost, Step, Work};
use crate::ledger::messages::mark_processed_rusqlite;
use crate::ledger::{HostTable, LedgerError};
use crate::table::EventOrder;

const HEARTBEAT: &str = "UPDATE hosts SET up = ?2, disabled = ?3, last_seen_ms = ?4 WHERE id = ?1";

/// What the hot writer made of a message alone (`Ledger::apply_hot`).
#[derive(Debug)]
pub enum HotAnswer {
    Done(Result<Applied, ApplyError>),
    /// Not one the hot writer applies (PostgreSQL, another kind of message, one that needs
    /// more than the hot writer does): nothing was written, and the message is handed back
    /// for the general path (boxed: a message is large, the answer small).
    Elsewhere(Box<Message>),
}

/// What a message asks of the hot writer.
#[derive(Clone, Copy)]
enum Kind {
    /// A heartbeat of host `id`, whose profile the table held when it came, with the liveness
    /// it writes; `older`: one older than the host's newest (`EventOrder::Older`), whose
    /// liveness alone counts (its state is the table's, whatever its profile).
    Heartbeat {
        id: HostId,
        up: bool,
        disabled: bool,
        older: bool,
    },
    /// Confirm the instance's claim on host `.0`.
    Confirm(HostId),
}

/// What `m` asks of the hot writer, if it is of a kind it applies, as the table is now.
fn kind(table: &HostTable, m: &Message, now_ms: i64) -> Option<Kind> {
    match &m.effect {
        Effect::HostState {
            registration: reg,
            sent_ms,
        } => {
            if table.event_order(&reg.uuid, *sent_ms, now_ms) == EventOrder::Older {
                let known = table.by_uuid(&reg.uuid)?;
                return Some(Kind::Heartbeat {
                    id: known.id,
                    up: known.up,
                    disabled: known.disabled,
                    older: true,
                });
            }
            let id = heartbeat_of(table, reg)?;
            Some(Kind::Heartbeat {
                id,
                up: reg.up,
                disabled: reg.disabled,
                older: false,
            })
        }
        Effect::Place {
            host,
            node,
            step: Placed::Built,
            ..
        } => Some(Kind::Confirm(table.by_name(host, node.as_deref())?.id)),
        _ => None,
    }
}

/// A message as a job of the hot writer.
pub(super) struct HotNotification {
    message: Message,
    kind: Kind,
    now_ms: i64,
    outcome: Result<Option<Applied>, LedgerError>,
    /// The heartbeat to give the table once committed: (host, up, disabled).
    beat: Option<(HostId, bool, bool)>,
    /// The message's id was recorded in this run (taken back if it is undone).
    marked: bool,
    reply: tokio::sync::oneshot::Sender<HotAnswer>,
}

impl HotNotification {
    /// The job for `message` and where its answer comes, when it is of a kind the hot writer
    /// applies (as the table is now; the writer checks a heartbeat's profile again, since the
    /// table may change before the job runs); else the message back.
    pub(super) fn of(
        table: &HostTable,
        message: Message,
        now_ms: i64,
    ) -> Result<(Self, tokio::sync::oneshot::Receiver<HotAnswer>), Box<Message>> {
        let Some(kind) = kind(table, &message, now_ms) else {
            return Err(Box::new(message));
        };
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job = HotNotification {
            message,
            kind,
            now_ms,
            outcome: Ok(None),
            beat: None,
            marked: false,
            reply,
        };
        Ok((job, answer))
    }

    /// `Ok(None)`: not one for the hot writer (the savepoint is rolled back).
    fn write(
        &mut self,
        db: &rusqlite::Connection,
        table: &HostTable,
    ) -> Result<Option<Applied>, LedgerError> {
        match (self.kind, &self.message.effect) {
            (
                Kind::Heartbeat {
                    id, older: true, ..
                },
                Effect::HostState { registration, .. },
            ) => {
                if table.by_uuid(&registration.uuid).map(|h| h.id) != Some(id) {
                    return Ok(None);
                }
            }
            (Kind::Heartbeat { id, .. }, Effect::HostState { registration, .. }) => {
                if heartbeat_of(table, registration) != Some(id) {
                    return Ok(None);
                }
            }
            (Kind::Confirm(_), Effect::Place { .. }) => {}
            _ => return Ok(None),
        }
        let key = (self.message.sent_at.as_str(), self.message.id.as_str());
        if !mark_processed_rusqlite(db, key, self.now_ms)? {
            return Ok(Some(Applied::Duplicate));
        }
        self.marked = true;
        match (self.kind, &self.message.effect) {
            (
                Kind::Heartbeat {
                    id, up, disabled, ..
                },
                _,
            ) => {
                db.prepare_cached(HEARTBEAT)?.execute(rusqlite::params![
                    id.0,
                    up,
                    disabled,
                    self.now_ms
                ])?;
                self.beat = Some((id, up, disabled));
            }
            (Kind::Confirm(id), Effect::Place { instance, .. }) => {
                let confirmed = db
                    .prepare_cached(CONFIRM_OWN_CLAIM)?
                    .execute(rusqlite::params![instance, id.0])?;
                if confirmed != 1 {
                    return Ok(None);
                }
            }
            (Kind::Confirm(_), _) => return Ok(None),
        }
        Ok(Some(Applied::Applied))
    }
}

/// Takes back the record of message (`?1` sent at, `?2` id) that [`HotNotification`] made.
const UNMARK: &str = "DELETE FROM processed_messages WHERE sent_at = ?1 AND message_id = ?2";

impl Work for HotNotification {
    fn run(&mut self, db: &rusqlite::Connection, table: &HostTable) -> Step {
        self.beat = None;
        self.marked = false;
        self.outcome = self.write(db, table);
        match self.outcome {
            Ok(Some(_)) => Step::Keep,
            Ok(None) | Err(_) => {
                self.beat = None;
                if !self.marked {
                    return Step::Undo;
                }
                if let Some(e) = transaction_lost(db, "during a notification") {
                    return Step::Spoiled(e);
                }
                let unmarked = db.prepare_cached(UNMARK).and_then(|mut s| {
                    s.execute(rusqlite::params![self.message.sent_at, self.message.id])
                });
                match unmarked {
                    Ok(1) => Step::Undo,
                    Ok(n) => Step::Spoiled(LedgerError::Invalid(format!(
                        "taking back a message's record removed {n} rows"
                    ))),
                    Err(e) => Step::Spoiled(e.into()),
                }
            }
        }
    }

    fn undoes_itself(&self) -> bool {
        true
    }

    fn committed(self: Box<Self>, table: &HostTable) {
        if let (Some(_), Kind::Heartbeat { older: true, .. }) = (self.beat, self.kind) {
            table.host_counters().older_events.inc();
        }
        if let Some((id, up, disabled)) = self.beat {
            if let Some(forced_down) = table.get(id).map(|h| h.forced_down) {
                table.set_liveness(id, up, disabled, forced_down, self.now_ms);
            }
        }
        let answer = match self.outcome {
            Ok(Some(applied)) => HotAnswer::Done(Ok(applied)),
            // A value the database refused: the general path says why (and rejects alone).
            Ok(None) => HotAnswer::Elsewhere(Box::new(self.message)),
            Err(e) if !e.is_outage() => HotAnswer::Elsewhere(Box::new(self.message)),
            Err(e) => HotAnswer::Done(Err(ApplyError::Ledger(e))),
        };
        let _ = self.reply.send(answer);
    }

    fn failed(self: Box<Self>, _table: &HostTable, error: LedgerError) {
        let _ = self
            .reply
            .send(HotAnswer::Done(Err(ApplyError::Ledger(error))));
    }
}
