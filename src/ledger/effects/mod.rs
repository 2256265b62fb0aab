//! Every write a host-state input makes, applied exactly once: the ledger's side of
//! `notifications` (issue 41). The caller decodes and validates a message into a [`Message`]:
//! its key in `processed_messages` and the typed [`Effect`] it asks for; the ledger records the
//! key and writes the effect in one transaction, so a redelivered message changes nothing,
//! and settles the live table before it answers. Some effects read before they write (whether
//! an allocation is the build's own claim, whether a host-state event is a heartbeat of the
//! profile the table holds), so the interface is "apply these messages", not a list of rows.
//!
//! One implementation per engine, each written once:
//! - SQLite's hot writer (`ledger::hot`) takes what comes with every decision, as direct
//!   calls of prepared statements: a heartbeat or a build's confirmation alone
//!   ([`hot_single`]), a consumer batch of host-state events and messages recorded only
//!   ([`hot_batch`]);
//! - everything else goes through sqlx ([`batch`], [`write`]): the same statements for SQLite's
//!   writing connection and PostgreSQL's pool, where the redo of a batch with a savepoint per
//!   message (the message at fault rolls back alone) lives once.
//!
//! Host-state events of a batch are coalesced ([`write::Touched`]): the last one per compute
//! node wins and they are written with a few statements for the whole batch.

mod batch;
mod hot_batch;
mod hot_single;
mod known_rows;
mod write;

pub use hot_single::HotAnswer;
use hot_single::HotNotification;
#[cfg(test)]
pub(crate) use write::heartbeat_of;

use super::{HostRegistration, LedgerError};
use crate::domain::{HostId, HostProfile, Resources};
use crate::nova::MoveStep;
use std::sync::Arc;

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

/// What an instance's placement notification says of its move, beyond placing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placed {
    /// `instance.create.end`: the build's own claim is confirmed as it is (its amounts kept:
    /// a notification's flavor knows neither extra specs nor boot-from-volume).
    Built,
    /// `instance.resize_finish.end`: the destination took the instance (`ledger::moves`).
    ResizeFinished,
    /// `instance.resize_revert.end`: the instance holds its held source again, then is placed.
    ResizeReverted,
    /// `instance.resize_confirm.end`, `instance.live_migration_post_dest.end`: the move's held
    /// source is released.
    MoveEnded,
    /// `instance.rebuild.end`: an evacuation's (a rebuild in place has no held source) ends
    /// the move, but Placement keeps the instance on its failed source until that compute
    /// restarts and cleans up (`_destroy_evacuated_instances`): when the Placement sync follows
    /// such parts (`HostTable::follows_placement`), the held source becomes the instance's part
    /// there (`<instance>@<provider uuid>`, as the sync imports it), which the sync releases
    /// once Placement drops it; otherwise it is released.
    Evacuated,
    /// Any other placement (an unshelve, a rebuild in place).
    Other,
}

/// The typed effect of one message on the ledger.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// A host's state (`compute.host.state`), validated: a heartbeat when the table holds the
    /// host with exactly this profile, else a registration; `sent_ms` its envelope time, for
    /// telling an older event from a newer one (`table::events`).
    HostState {
        registration: HostRegistration,
        sent_ms: Option<i64>,
    },
    /// The instance holds `demand` on `host` (allocate, or confirm the claim it holds there).
    Place {
        instance: String,
        host: String,
        node: Option<String>,
        demand: Resources,
        step: Placed,
    },
    /// A step of a move that places nothing by itself (`ledger::moves`).
    Move { instance: String, step: MoveStep },
    /// The instance holds nothing any more, nor its move's source; `deleted`: Nova deleted it
    /// (`instance.delete.end`), so it is forgotten as a known instance and remembered as gone.
    Release {
        instance: String,
        host: Option<String>,
        deleted: bool,
    },
    /// A nova-compute service was created (no ledger row; the table waits for its node).
    ServiceCreated { host: String },
    /// A nova-compute service was deleted.
    ServiceDeleted { host: String },
    /// A service was enabled or disabled, forced down or up: every node of it.
    ServiceUpdated {
        host: String,
        disabled: bool,
        forced_down: bool,
    },
    /// The instance left `host` (`delete_instance_info`): a move's source held there is
    /// released (never the instance's own allocation: a resize on the same host stays).
    LeftHost { host: String, instance: String },
    /// These instances run on `host` (`update_instance_info`, `sync_instance_info`): their
    /// claims there are confirmed; nothing is released or moved (issue 40, item 1).
    RunOn {
        host: String,
        instances: Vec<String>,
    },
    /// Recorded as processed, nothing else (an event Parasol does not act on, an aggregate
    /// cast: `notifications::Ingest` hands those to the cloud view).
    RecordOnly,
    /// Refused before the ledger, with the reason: nothing is written for it.
    Invalid(String),
}

/// A message as the ledger applies it: its key in `processed_messages` (envelope time as
/// recorded, and id), its kind (for reasons and logs) and its effect.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub sent_at: String,
    pub id: String,
    /// The event type (or RPC method) it came as.
    pub kind: String,
    pub effect: Effect,
}

impl Message {
    /// The reason a rejection of this message gives.
    fn rejection(&self, reason: &str) -> String {
        format!("{} {}: {reason}", self.kind, self.id)
    }

    /// Whether it must see the ledger with every earlier message of its batch written:
    /// everything but a host-state event (staged) and what changes no ledger row.
    fn needs_flush(&self) -> bool {
        !matches!(
            self.effect,
            Effect::HostState { .. }
                | Effect::RecordOnly
                | Effect::Invalid(_)
                | Effect::ServiceCreated { .. }
                | Effect::ServiceDeleted { .. }
        )
    }
}

/// A heartbeat for the live table once committed: the host's liveness as of `seen_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Beat {
    pub id: HostId,
    pub up: bool,
    pub disabled: bool,
    pub seen_ms: i64,
}

/// A re-registered host the table takes as it is, without reading it back (see
/// `HostTable::load_profiles`).
pub(crate) type ProfilePatch = crate::table::ProfilePatch;

/// A new profile for the table's patch, from a registration written at `seen_ms`.
fn patch(
    id: HostId,
    profile: Arc<HostProfile>,
    reg: &HostRegistration,
    seen_ms: i64,
) -> ProfilePatch {
    ProfilePatch {
        id,
        profile,
        up: reg.up,
        disabled: reg.disabled,
        last_seen_ms: seen_ms,
    }
}

impl super::Ledger {
    /// Applies a batch in one transaction, in order, each message exactly once (a message
    /// seen before, in an earlier batch or earlier in this one, is a `Duplicate`). A rejected
    /// message changes nothing and does not affect the others. `Err` means the ledger failed
    /// and nothing of the batch was committed. Once committed, the live table loads the hosts
    /// the batch changed, before the caller acknowledges anything.
    pub async fn apply_messages(
        &self,
        batch: Vec<Message>,
        now_ms: i64,
    ) -> Result<Vec<Outcome>, LedgerError> {
        let batch: Arc<[Message]> = batch.into();
        // On SQLite a batch of host-state events goes to the hot writer (`hot_batch`).
        if let Some(outcomes) = hot_batch::apply_hot(self, &batch, now_ms).await {
            return outcomes;
        }
        let (_, outcomes) = batch::apply_taken(
            self,
            || batch.iter().collect(),
            |m: &&Message| *m,
            || now_ms,
        )
        .await;
        outcomes
    }

    /// [`Self::apply_messages`] of the messages `take` gives once the ledger's writer is held
    /// (SQLite's one connection; PostgreSQL takes at once): whatever queued while the previous
    /// writer ran joins this batch. `note` reads each taken job's message; `now_ms` is read
    /// once taken. Returns the jobs with the outcomes, in their order.
    pub(crate) async fn apply_taken<J>(
        &self,
        take: impl FnOnce() -> Vec<J>,
        note: impl Fn(&J) -> &Message,
        now_ms: impl Fn() -> i64,
    ) -> (Vec<J>, Result<Vec<Outcome>, LedgerError>) {
        batch::apply_taken(self, take, note, now_ms).await
    }

    /// A heartbeat or a build's confirmation alone, by SQLite's hot writer, committed with its
    /// next group; [`HotAnswer::Elsewhere`] hands the message back when it is for the general
    /// path ([`Self::apply_messages`]): PostgreSQL, another kind of message, or one that turned
    /// out to need more. Nothing of it is written then.
    pub async fn apply_hot(&self, message: Message, now_ms: i64) -> HotAnswer {
        let Some(writer) = &self.hot else {
            return HotAnswer::Elsewhere(Box::new(message));
        };
        let (job, answer) = match HotNotification::of(self.table(), message, now_ms) {
            Ok(job) => job,
            Err(message) => return HotAnswer::Elsewhere(message),
        };
        if let Err(job) = writer.submit(Box::new(job)) {
            // The writer's thread has stopped: the job fails with the ledger's error.
            job.failed(
                self.table(),
                LedgerError::Unavailable("the ledger's writer thread has stopped".into()),
            );
        }
        answer.await.unwrap_or_else(|_| {
            HotAnswer::Done(Err(ApplyError::Ledger(LedgerError::Unavailable(
                "the ledger's writer ended without an answer".into(),
            ))))
        })
    }
}

#[cfg(test)]
impl super::Ledger {
    /// Stages `registrations` as a batch's fast pass does and writes them with sqlx's flush
    /// alone, committed; answers how many were heartbeats (tests: a failure of the flush is
    /// otherwise hidden by the savepoint pass).
    pub(crate) async fn flush_alone(
        &self,
        registrations: &[HostRegistration],
        now_ms: i64,
    ) -> usize {
        let mut conn = self.hold_writer().await;
        let mut tx = sqlx::Connection::begin(&mut *conn).await.unwrap();
        let mut touched = write::Touched::default();
        for reg in registrations {
            touched.stage(
                self.table(),
                std::borrow::Cow::Borrowed(reg),
                None,
                None,
                now_ms,
            );
        }
        let beats = touched.heartbeats.len();
        write::flush_sqlite(&mut tx, self.table(), &mut touched)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        beats
    }
}
