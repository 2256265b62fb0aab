//! The effect of one message inside an open transaction (a savepoint of the batch): record
//! its id, then change the ledger, noting which hosts changed so that the live table can load
//! them once the batch has committed. Written once, compiled for each of sqlx's engines; and
//! the coalesced writes of a batch's host-state events ([`Touched`]), for sqlx and for
//! SQLite's hot writer.

use super::known_rows::{InventoryValues, KnownRows};
use super::{patch, Applied, ApplyError, Beat, Effect, Message, Placed, ProfilePatch};
use crate::domain::HostId;
use crate::domain::{Aggregates, ClassId, HostProfile, Resources, Traits};
use crate::ledger::claims::{parse_resources, record_in_tx, release_in_tx};
use crate::ledger::hosts::{may_take_over, takeover, takeover_rusqlite, upsert_host, Takeover};
use crate::ledger::messages::MARK_PROCESSED;
use crate::ledger::moves::{
    release_held_in_tx, restore_source_in_tx, CONFIRM_MOVING, MOVE_STARTED, START_MOVE,
    START_RESIZE, START_RESIZE_LISTED,
};
use crate::ledger::{HostRegistration, HostTable};
use crate::nova::MoveStep;
use crate::table::EventOrder;
use rusqlite::OptionalExtension;
use sqlx::Row;
use std::sync::Arc;

const HOST_ID_BY_NAME: &str = "SELECT id FROM hosts WHERE host = $1 \
    AND (CAST($2 AS TEXT) IS NULL OR node = $2) ORDER BY id LIMIT 1";

/// Every node of a service host, when the live table does not know it yet.
const HOST_IDS_OF_SERVICE: &str = "SELECT id FROM hosts WHERE host = $1 ORDER BY id";

/// Confirms an allocation an instance message names, which also makes it known as an
/// instance (an imported consumer is counted once named).
const CONFIRM_CLAIM: &str = "UPDATE allocations SET confirmed = TRUE, instance = TRUE \
    WHERE instance_uuid = $1 AND host_id = $2";

/// Confirms the allocation of `instance.create.end`'s instance when it is on the notified
/// host and already counted as an instance (Parasol's claim for the build): what the general
/// path does for it, without reading the allocation first.
pub(super) const CONFIRM_OWN_CLAIM: &str = "UPDATE allocations SET confirmed = TRUE \
    WHERE instance_uuid = $1 AND host_id = $2 AND instance";

/// Whether Nova deleted the instance (`instance.delete.end`, migration 0012).
const IS_GONE: &str = "SELECT 1 FROM gone_instances WHERE instance_uuid = $1";

/// Remembers that Nova deleted the instance, at `$2`.
const REMEMBER_GONE: &str = "INSERT INTO gone_instances (instance_uuid, gone_ms) VALUES ($1, $2) \
    ON CONFLICT (instance_uuid) DO NOTHING";

/// Whether an instance's end-of-operation notification only confirms the allocation it holds
/// on `host` — Parasol's own claim for the build or move. The claimed amounts stay (a
/// notification's flavor knows neither extra specs nor boot-from-volume); only a notification
/// for another host, or with another size than held (a resize reverted on the same host),
/// replaces the allocation. The size is compared as far as the notification can tell it: its
/// `vcpus` are the claim's VCPU and PCPU together (`hw:cpu_policy=dedicated` claims PCPU), and
/// a claim without local disk (boot from volume) matches any `root_gb`. Replacing such a claim
/// with the notification's VCPU and disk used to drop a dedicated instance's PCPU (Nova's
/// `test_resize_vcpu_to_pcpu`: Placement PCPU 2, the ledger VCPU 2).
/// An evacuation of instance `$1` ended (`Placed::Evacuated`): each held source becomes the
/// instance's part on its host's provider, `<instance>@<provider uuid>`, imported (Placement's,
/// released by the sync once Placement drops it) and no instance; evaluates to the hosts.
/// A part the sync imported already (its amounts unlike the held source's) stays, and the
/// held source then goes with the release that follows.
const EVACUATED_TO_PART: &str = "UPDATE allocations SET instance_uuid = move_of || '@' || \
    (SELECT h.uuid FROM hosts h WHERE h.id = allocations.host_id), move_of = NULL, \
    move_started = FALSE, imported = TRUE, instance = FALSE, confirmed = TRUE \
    WHERE move_of = $1 AND NOT EXISTS (SELECT 1 FROM allocations p WHERE p.instance_uuid = \
    allocations.move_of || '@' || (SELECT h.uuid FROM hosts h WHERE h.id = allocations.host_id) \
    AND p.move_of IS NULL) RETURNING host_id";

fn only_confirms(step: Placed, held: &Resources, notified: &Resources) -> bool {
    let cpus = |r: &Resources| r.get(ClassId::VCPU) + r.get(ClassId::PCPU);
    let disk = held.get(ClassId::DISK_GB);
    step == Placed::Built
        || (cpus(held) == cpus(notified)
            && held.get(ClassId::MEMORY_MB) == notified.get(ClassId::MEMORY_MB)
            && (disk == 0 || disk == notified.get(ClassId::DISK_GB)))
}

/// What a batch changed, for the table once it has committed, and what it has still to write.
///
/// Host-state events are coalesced: in the batch's fast pass a registration is only staged
/// (the last one per compute node wins, which is what applying each in turn leaves: every
/// field and reported class is overwritten, and a class the last one does not report is
/// zeroed and dropped when unused either way), heartbeats are collected, and both are written
/// with a handful of statements for the whole batch by [`flush_sqlite`]/[`flush_postgres`]:
/// before the batch commits, and before any other message's effect, so that instance and
/// service messages still see every host event that came before them, in order.
#[derive(Debug, Default)]
pub(super) struct Touched {
    /// Hosts whose usage, inventory or names changed: reloaded from the ledger.
    pub reload: Vec<HostId>,
    /// Heartbeats of hosts whose profile did not change, for the table once committed.
    pub heartbeats: Vec<Beat>,
    /// Hosts the table knows that were re-registered (and written): the table takes their
    /// new profile and liveness as they are, without reading them back, unless something
    /// else of the batch changed them too (the profile as the ledger would load it).
    pub patched: Vec<ProfilePatch>,
    /// Heartbeats not yet written to the ledger.
    unwritten: Vec<Beat>,
    /// Registrations not yet written, by first appearance (so new hosts are numbered in the
    /// order their first event came), each the last one of its compute node; seen at `.1`.
    staged: Vec<(HostRegistration, i64, Option<Prepared>)>,
    /// `staged` index by compute node uuid.
    staged_at: crate::table::FastMap<String, usize>,
    /// Nodes a registration of the batch replaced (`ledger::hosts::Takeover`): logged and
    /// counted once committed.
    pub replaced: Vec<(HostRegistration, Takeover)>,
    /// Host-state events older than their host's newest (heartbeats only): counted once
    /// committed.
    pub older: u64,
    /// `service.update`s applied, for the table's note over Nova's records once committed
    /// ([`HostTable::note_service`]).
    pub services: Vec<ServiceState>,
}

/// A nova-compute service's state as a `service.update` set it, at `at_ms`.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ServiceState {
    pub host: String,
    pub disabled: bool,
    pub forced_down: bool,
    pub at_ms: i64,
}

/// A host's traits (the ledger's JSON list of names) with nova-compute's
/// `COMPUTE_STATUS_DISABLED` set when `disabled`, removed otherwise; `None` when they already
/// say so or are not a list of names.
fn with_status_trait(traits: &str, disabled: bool) -> Option<String> {
    let mut names: Vec<String> = serde_json::from_str(traits).ok()?;
    let status = crate::domain::COMPUTE_STATUS_DISABLED;
    let has = names.iter().any(|n| n == status);
    if has == disabled {
        return None;
    }
    if disabled {
        names.push(status.to_string());
    } else {
        names.retain(|n| n != status);
    }
    Some(HostRegistration::names_json(&names))
}

/// What [`Touched`] held before a message, to undo that message's part when it is rejected.
pub(super) struct TouchedMark {
    reload: usize,
    replaced: usize,
    services: usize,
    older: u64,
    heartbeats: Vec<Beat>,
    unwritten: Vec<Beat>,
}

impl Touched {
    pub fn mark(&self) -> TouchedMark {
        debug_assert!(self.staged.is_empty(), "marks are for the savepoint pass");
        TouchedMark {
            reload: self.reload.len(),
            replaced: self.replaced.len(),
            services: self.services.len(),
            older: self.older,
            heartbeats: self.heartbeats.clone(),
            unwritten: self.unwritten.clone(),
        }
    }

    pub fn rollback_to(&mut self, mark: TouchedMark) {
        self.reload.truncate(mark.reload);
        self.replaced.truncate(mark.replaced);
        self.services.truncate(mark.services);
        self.older = mark.older;
        self.heartbeats = mark.heartbeats;
        self.unwritten = mark.unwritten;
    }

    /// Whether anything waits to be written before the next effect or the commit.
    pub fn unflushed(&self) -> bool {
        !self.staged.is_empty() || !self.unwritten.is_empty()
    }

    /// Notes a heartbeat (the last one per host wins).
    fn beat(&mut self, id: HostId, reg: &HostRegistration, now_ms: i64) {
        self.forget_beats(id);
        let beat = Beat {
            id,
            up: reg.up,
            disabled: reg.disabled,
            seen_ms: now_ms,
        };
        self.heartbeats.push(beat);
        self.unwritten.push(beat);
    }

    /// An event older than its host's newest (`EventOrder::Older`) of host `known`: a
    /// heartbeat that keeps the host's state as it is (liveness by receive time), or, when the
    /// batch stages a registration of it already, that one's time.
    fn older_beat(&mut self, known: &crate::domain::HostState, uuid: &str, now_ms: i64) {
        self.older += 1;
        if let Some(&at) = self.staged_at.get(uuid) {
            self.staged[at].1 = now_ms;
            return;
        }
        let (up, disabled) = match self.heartbeats.iter().find(|b| b.id == known.id) {
            Some(b) => (b.up, b.disabled),
            None => (known.up, known.disabled),
        };
        self.forget_beats(known.id);
        let beat = Beat {
            id: known.id,
            up,
            disabled,
            seen_ms: now_ms,
        };
        self.heartbeats.push(beat);
        self.unwritten.push(beat);
    }

    /// Notes a node replaced by a registration written in this batch: its row is read back
    /// (renamed and unschedulable, or the new node's), and its heartbeats are not written.
    fn replaced(&mut self, reg: &HostRegistration, takeover: Takeover) {
        if let Takeover::Replaced { old, .. } = &takeover {
            self.forget_beats(*old);
            self.reload.push(*old);
            self.replaced.push((reg.clone(), takeover));
        }
    }

    /// A registration replaces the host's heartbeats of this batch: it writes the same
    /// fields, later.
    fn forget_beats(&mut self, id: HostId) {
        self.heartbeats.retain(|b| b.id != id);
        self.unwritten.retain(|b| b.id != id);
    }

    /// Stages `reg` (fast pass): a heartbeat when the table knows the host with exactly this
    /// profile and nothing of this batch changed it, else a registration to write.
    /// `reg` is copied only when it is staged (the hot writer's batch hands its own, with
    /// what its write needs made already when it is surely a re-registration).
    pub(super) fn stage(
        &mut self,
        table: &HostTable,
        reg: std::borrow::Cow<'_, HostRegistration>,
        prepared: Option<Prepared>,
        sent_ms: Option<i64>,
        now_ms: i64,
    ) {
        if table.event_order(&reg.uuid, sent_ms, now_ms) == EventOrder::Older {
            if let Some(known) = table.by_uuid(&reg.uuid) {
                self.older_beat(&known, &reg.uuid, now_ms);
                return;
            }
            if self.staged_at.contains_key(&reg.uuid) {
                self.older += 1;
                return;
            }
        }
        if let Some(&at) = self.staged_at.get(&reg.uuid) {
            self.staged[at] = (reg.into_owned(), now_ms, prepared);
            return;
        }
        if let Some(id) = heartbeat_of(table, &reg)
            .filter(|id| !self.reload.contains(id) && !self.patched.iter().any(|p| p.id == *id))
        {
            self.beat(id, &reg, now_ms);
            return;
        }
        if let Some(known) = table.by_uuid(&reg.uuid) {
            self.forget_beats(known.id);
        }
        self.staged_at.insert(reg.uuid.clone(), self.staged.len());
        self.staged.push((reg.into_owned(), now_ms, prepared));
    }
}

/// The profile the ledger's row of `reg` loads as (`ledger::hosts::join`): classes with
/// neither capacity nor a usable amount left out, a class reported twice as its last report.
fn as_loaded(reg: &HostRegistration) -> Option<Arc<HostProfile>> {
    let mut inventories: Vec<(ClassId, crate::domain::Inventory)> = Vec::new();
    for (class, inv) in reg.inventories.iter().rev() {
        let id = ClassId::intern(class).ok()?;
        if inventories.iter().any(|(c, _)| *c == id) {
            continue;
        }
        if inv.total > 0 || inv.usable() > 0 {
            inventories.push((id, *inv));
        }
    }
    let mut profile = HostProfile::new(
        &reg.host,
        &reg.node,
        &reg.uuid,
        &reg.availability_zone,
        inventories,
    );
    profile.traits = Traits::from_names(reg.traits.iter().map(String::as_str));
    profile.aggregates = Aggregates::from_names(reg.aggregates.iter().map(String::as_str));
    Some(Arc::new(profile))
}

fn rejected(reason: String) -> ApplyError {
    ApplyError::Rejected(reason)
}

/// Whether `reg` reports a class otherwise than `known` holds it (each class as a profile
/// keeps it: its first report): then it is no heartbeat of `known`.
fn inventory_differs(known: &HostProfile, reg: &HostRegistration) -> bool {
    reg.inventories.iter().enumerate().any(|(i, (class, inv))| {
        let first = !reg.inventories[..i].iter().any(|(c, _)| c == class);
        first && ClassId::lookup(class).and_then(|id| known.inventory(id)) != Some(inv)
    })
}

/// What writing a registration takes that depends on it alone (its traits' and aggregates'
/// text, its profile as the ledger would load it): made by the hot writer's batch before the
/// writer takes it, off the writer's thread, for an event that is surely a re-registration.
#[derive(Debug)]
pub(super) struct Prepared {
    traits: String,
    aggregates: String,
    profile: Option<Arc<HostProfile>>,
}

impl Prepared {
    fn of(reg: &HostRegistration) -> Self {
        Prepared {
            traits: reg.traits_json(),
            aggregates: reg.aggregates_json(),
            profile: as_loaded(reg),
        }
    }

    /// For `reg` when the table holds its host with another inventory, or not at all.
    pub(super) fn surely_needed(table: &HostTable, reg: &HostRegistration) -> Option<Self> {
        match table.by_uuid(&reg.uuid) {
            Some(known) if !inventory_differs(&known.profile, reg) => None,
            _ => Some(Self::of(reg)),
        }
    }
}

/// A heartbeat: a host-state event whose host the table knows with exactly this profile.
pub(crate) fn heartbeat_of(table: &HostTable, reg: &HostRegistration) -> Option<HostId> {
    let known = table.by_uuid(&reg.uuid)?;
    if known.profile.renamed {
        // The table shows the records' name, the ledger's row another: the event writes its
        // name into the row (and then, the same as the records', the host is not renamed).
        return None;
    }
    // Most events that are not heartbeats change some inventory: told apart before a whole
    // profile is built to compare.
    if inventory_differs(&known.profile, reg) {
        return None;
    }
    let mut profile = reg.profile().ok()?;
    // Nova's compute-node facts come from its records (`[nova_db]`), laid over the table's
    // profiles, never from an event: an event cannot change them, so they are not compared
    // (compared, every event of a host with records was written as a re-registration).
    profile.facts.clone_from(&known.profile.facts);
    (*known.profile == profile).then_some(known.id)
}

/// How a message's effect is applied in its batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pass {
    /// The fast pass: the batch recorded every message's id in one statement, and a
    /// host-state event is only staged in [`Touched`] (the caller flushes what is staged
    /// before any message that `Message::needs_flush` and before committing).
    Coalesced,
    /// The savepoint pass: the message records its own id and writes its own host-state
    /// event, so that it rolls back alone.
    Alone,
}

macro_rules! define_effect {
    ($module:ident, $db:ty) => {
        /// Messages' effects on engine `$db`.
        pub(super) mod $module {
            use super::*;

            /// Applies `m` in `tx` (see [`Pass`]); `Err(Rejected)` leaves the caller to roll
            /// the savepoint back.
            pub(in super::super) async fn apply(
                tx: &mut sqlx::Transaction<'_, $db>,
                table: &HostTable,
                m: &Message,
                now_ms: i64,
                pass: Pass,
                touched: &mut Touched,
            ) -> Result<Applied, ApplyError> {
                if pass == Pass::Alone {
                    let fresh = sqlx::query(MARK_PROCESSED)
                        .bind(&m.sent_at)
                        .bind(&m.id)
                        .bind(now_ms)
                        .execute(&mut **tx)
                        .await?;
                    if fresh.rows_affected() == 0 {
                        return Ok(Applied::Duplicate);
                    }
                }
                let cx = Ctx {
                    table,
                    m,
                    now_ms,
                    touched,
                };
                match &m.effect {
                    Effect::HostState { registration, sent_ms } => {
                        host_state(tx, cx, registration, sent_ms, pass).await
                    }
                    Effect::Place { instance, host, node, demand, step } => {
                        place(tx, cx, instance, host, node, demand, step).await
                    }
                    Effect::Move { instance, step } => moved(tx, cx, instance, step).await,
                    Effect::Release { instance, host, deleted } => {
                        release(tx, cx, instance, host, deleted).await
                    }
                    Effect::ServiceCreated { host } => {
                        // No ledger row: its node comes from Placement and Nova's records,
                        // which the next call waits for (as Nova's scheduler would read them).
                        table.announce_service(host, now_ms);
                        table.want_records();
                        Ok(Applied::Applied)
                    }
                    Effect::ServiceDeleted { host } => {
                        // Its node goes with it (Nova's records say so at their next read).
                        table.forget_service(host);
                        table.want_records();
                        Ok(Applied::Applied)
                    }
                    Effect::ServiceUpdated { host, disabled, forced_down } => {
                        service_updated(tx, cx, host, disabled, forced_down).await
                    }
                    Effect::LeftHost { host, instance } => left_host(tx, cx, host, instance).await,
                    Effect::RunOn { host, instances } => run_on(tx, cx, host, instances).await,
                    // Aggregates are no ledger state: `Ingest` hands them to the cloud view.
                    Effect::RecordOnly => Ok(Applied::Unknown),
                    Effect::Invalid(reason) => Err(rejected(reason.clone())),
                }
            }

            /// The id of `$host`'s node `$node` (any node when `None`), from the live table or
            /// else the ledger.
            macro_rules! host_id {
                ($tx:ident, $table:ident, $host:expr, $node:expr) => {{
                    match $table.by_name($host, $node).map(|h| h.id) {
                        Some(id) => Some(id.0),
                        None => sqlx::query_scalar::<_, i64>(HOST_ID_BY_NAME)
                            .bind($host)
                            .bind($node)
                            .fetch_optional(&mut **$tx)
                            .await?,
                    }
                }};
            }

            /// Every node of a service host (an Ironic-style service has several).
            macro_rules! service_ids {
                ($tx:ident, $table:ident, $host:expr) => {{
                    let ids = $table.ids_of_service($host);
                    if ids.is_empty() {
                        sqlx::query_scalar::<_, i64>(HOST_IDS_OF_SERVICE)
                            .bind($host)
                            .fetch_all(&mut **$tx)
                            .await?
                    } else {
                        ids.into_iter().map(|h| h.0).collect::<Vec<i64>>()
                    }
                }};
            }

        /// A host's state: staged in the fast pass; alone, a heartbeat when the table holds the host
        /// as it is, else a registration (after any takeover of its names).
        async fn host_state(
            tx: &mut sqlx::Transaction<'_, $db>,
            cx: Ctx<'_>,
            reg: &HostRegistration,
            sent_ms: &Option<i64>,
            pass: Pass,
        ) -> Result<Applied, ApplyError> {
            let Ctx { table, now_ms, touched, .. } = cx;
            if pass == Pass::Coalesced {
                touched.stage(table, std::borrow::Cow::Borrowed(reg), None, *sent_ms, now_ms);
                return Ok(Applied::Applied);
            }
            if table.event_order(&reg.uuid, *sent_ms, now_ms) == EventOrder::Older {
                if let Some(known) = table.by_uuid(&reg.uuid) {
                    touched.older_beat(&known, &reg.uuid, now_ms);
                    return Ok(Applied::Applied);
                }
            }
            if let Some(id) = heartbeat_of(table, reg).filter(|id| !touched.reload.contains(id)) {
                touched.beat(id, reg, now_ms);
                return Ok(Applied::Applied);
            }
            match takeover!(*tx, reg) {
                Takeover::OwnRetired => {
                    tracing::debug!(host = %reg.host, compute_node = %reg.uuid, "event of a retired compute node: nothing to apply");
                    return Ok(Applied::Applied);
                }
                Takeover::Free => {}
                replaced => touched.replaced(reg, replaced),
            }
            let id = upsert_host!($db, *tx, reg, now_ms);
            touched.forget_beats(id);
            touched.reload.push(id);
            Ok(Applied::Applied)
        }

        /// The instance holds `demand` on `host`: its own claim confirmed, a move's step taken, or
        /// its allocation recorded there (what it held elsewhere released).
        async fn place(
            tx: &mut sqlx::Transaction<'_, $db>,
            cx: Ctx<'_>,
            instance_uuid: &str,
            host: &str,
            node: &Option<String>,
            demand: &Resources,
            step: &Placed,
        ) -> Result<Applied, ApplyError> {
            let Ctx { table, m, now_ms, touched } = cx;
            let Some(id) = host_id!(tx, table, host, node.as_deref()) else {
                return Err(rejected(format!("unknown host {host:?} for instance {instance_uuid}")));
            };
            if *step == Placed::Built {
                // The build's own claim, on this host and counted as an instance
                // already: confirmed in one statement, and nothing the table holds
                // changes (no read back). Anything else takes the path below.
                let confirmed = sqlx::query(CONFIRM_OWN_CLAIM)
                    .bind(instance_uuid)
                    .bind(id)
                    .execute(&mut **tx)
                    .await?;
                if confirmed.rows_affected() == 1 {
                    return Ok(Applied::Applied);
                }
            }
            // A move's steps (`ledger::moves`): a revert gives the instance its held
            // source back before it is placed there; a finished resize starts the move;
            // a confirmation, a live migration's end on its destination or an
            // evacuation's rebuild ends it.
            match step {
                Placed::ResizeReverted => {
                    touched.reload.extend(restore_source_in_tx!($db, *tx, instance_uuid));
                }
                Placed::ResizeFinished => {
                    // The held source stops counting as an instance: the table reads
                    // its host back.
                    let sources: Vec<i64> = sqlx::query_scalar(START_RESIZE)
                        .bind(instance_uuid)
                        .fetch_all(&mut **tx)
                        .await?;
                    touched.reload.extend(sources.into_iter().map(HostId));
                }
                Placed::Evacuated if table.follows_placement() => {
                    // The source's amounts stay where Placement keeps them, as the part the
                    // sync would import; no longer an instance there (Nova's `instance.host` is
                    // the destination).
                    let parts: Vec<i64> = sqlx::query_scalar(EVACUATED_TO_PART)
                        .bind(instance_uuid)
                        .fetch_all(&mut **tx)
                        .await?;
                    touched.reload.extend(parts.into_iter().map(HostId));
                    let held = release_held_in_tx!($db, *tx, instance_uuid);
                    touched.reload.extend(held.into_iter().map(|(h, _)| h));
                }
                // Without a sync to release a part, an evacuation's source goes too.
                Placed::MoveEnded | Placed::Evacuated => {
                    let held = release_held_in_tx!($db, *tx, instance_uuid);
                    touched.reload.extend(held.into_iter().map(|(h, _)| h));
                }
                Placed::Built | Placed::Other => {}
            }
            let held = sqlx::query("SELECT host_id, resources, instance FROM allocations WHERE instance_uuid = $1")
                .bind(instance_uuid)
                .fetch_optional(&mut **tx)
                .await?;
            if let Some(row) = held {
                let (on, json): (i64, String) = (row.try_get(0)?, row.try_get(1)?);
                if on == id && only_confirms(*step, &parse_resources(&json)?, demand) {
                    sqlx::query(CONFIRM_CLAIM).bind(instance_uuid).bind(id).execute(&mut **tx).await?;
                    // The table counts an allocation known as an instance; `confirmed`
                    // it does not hold. A claim (an instance already) confirmed changes
                    // nothing the table holds: no read back, the common case of every
                    // build's instance.create.end.
                    let instance: bool = row.try_get(2)?;
                    if !instance {
                        touched.reload.push(HostId(id));
                    }
                    return Ok(Applied::Applied);
                }
            }
            // Deleted already: this notification was overtaken by the deletion's
            // (a quorum queue's redelivery, another process' consumer) and must not
            // bring the allocation back.
            let gone = sqlx::query(IS_GONE)
                .bind(instance_uuid)
                .fetch_optional(&mut **tx)
                .await?
                .is_some();
            if gone {
                tracing::debug!(instance = %instance_uuid, event = %m.kind, "instance deleted already: nothing to apply");
                return Ok(Applied::Applied);
            }
            if let Some(old) = release_in_tx!($db, *tx, instance_uuid) {
                touched.reload.push(old.host_id);
            }
            record_in_tx!($db, *tx, instance_uuid, id, demand, now_ms);
            touched.reload.push(HostId(id));
            Ok(Applied::Applied)
        }

        /// A step of a move that places nothing by itself.
        async fn moved(
            tx: &mut sqlx::Transaction<'_, $db>,
            cx: Ctx<'_>,
            instance_uuid: &str,
            step: &MoveStep,
        ) -> Result<Applied, ApplyError> {
            let Ctx { touched, .. } = cx;
            match step {
                MoveStep::Started => {
                    // The destination took the instance: neither its claim there nor the
                    // source held for it expires any more.
                    sqlx::query(START_MOVE).bind(instance_uuid).execute(&mut **tx).await?;
                    sqlx::query(CONFIRM_MOVING)
                        .bind(instance_uuid)
                        .execute(&mut **tx)
                        .await?;
                }
                MoveStep::Ended => {
                    let held = release_held_in_tx!($db, *tx, instance_uuid);
                    touched.reload.extend(held.into_iter().map(|(h, _)| h));
                }
                MoveStep::RolledBack => {
                    touched.reload.extend(restore_source_in_tx!($db, *tx, instance_uuid));
                }
                MoveStep::Aborted => {
                    // Undone only while queued: the destination never took the instance
                    // (no `instance.live_migration_pre.end`), and nova-compute has given the
                    // source back and dropped the destination's allocation. A started move
                    // is left to its rollback or its end.
                    let started: Option<bool> = sqlx::query_scalar(MOVE_STARTED)
                        .bind(instance_uuid)
                        .fetch_optional(&mut **tx)
                        .await?;
                    if started == Some(false) {
                        touched.reload.extend(restore_source_in_tx!($db, *tx, instance_uuid));
                    }
                }
            }
            Ok(Applied::Applied)
        }

        /// The instance holds nothing any more, nor its move's source; when `deleted`, forgotten as a
        /// known instance and remembered as gone.
        async fn release(
            tx: &mut sqlx::Transaction<'_, $db>,
            cx: Ctx<'_>,
            instance_uuid: &str,
            host: &Option<String>,
            deleted: &bool,
        ) -> Result<Applied, ApplyError> {
            let Ctx { table, now_ms, touched, .. } = cx;
            let held = release_held_in_tx!($db, *tx, instance_uuid);
            touched.reload.extend(held.into_iter().map(|(h, _)| h));
            match release_in_tx!($db, *tx, instance_uuid) {
                Some(old) => touched.reload.push(old.host_id),
                None => {
                    if let Some(host) = host {
                        if host_id!(tx, table, host, None::<&str>).is_none() {
                            return Err(rejected(format!(
                                "unknown host {host:?} for the release of instance {instance_uuid}"
                            )));
                        }
                    }
                }
            }
            if *deleted {
                // Gone for good: an allocation under its uuid imported later is
                // not this instance's (the release above remembered it).
                sqlx::query("DELETE FROM known_instances WHERE instance_uuid = $1")
                    .bind(instance_uuid)
                    .execute(&mut **tx)
                    .await?;
                // And remembered as gone, for a notification that comes after this one.
                sqlx::query(REMEMBER_GONE)
                    .bind(instance_uuid)
                    .bind(now_ms)
                    .execute(&mut **tx)
                    .await?;
            }
            Ok(Applied::Applied)
        }

        /// Every node of a service enabled or disabled, forced down or up.
        async fn service_updated(
            tx: &mut sqlx::Transaction<'_, $db>,
            cx: Ctx<'_>,
            host: &str,
            disabled: &bool,
            forced_down: &bool,
        ) -> Result<Applied, ApplyError> {
            let Ctx { table, now_ms, touched, .. } = cx;
            // Nova's records (when read) say the same sooner than the next refresh, and so
            // does Placement (an evacuated source's cleanup, a status trait).
            table.want_records();
            table.want_placement_sync();
            let noted = ServiceState {
                host: host.to_string(),
                disabled: *disabled,
                forced_down: *forced_down,
                at_ms: now_ms,
            };
            let ids = service_ids!(tx, table, host);
            if ids.is_empty() {
                if table.records().is_some() {
                    // Not in Placement yet (a service disabled right after its start): its
                    // state comes from Nova's records, this update laid over them.
                    touched.services.push(noted);
                    return Ok(Applied::Applied);
                }
                return Err(rejected(format!("service.update for unknown host {host:?}")));
            }
            for id in &ids {
                // nova-compute keeps `COMPUTE_STATUS_DISABLED` on its providers equal to its
                // service's state (set before the API answers the operator, or at its next
                // start when it is down, when ComputeFilter turns it away anyway): the trait
                // the last sync read would otherwise refuse a re-enabled host until the next.
                let traits: String = sqlx::query_scalar("SELECT traits FROM hosts WHERE id = $1")
                    .bind(id)
                    .fetch_one(&mut **tx)
                    .await?;
                let traits = with_status_trait(&traits, *disabled).unwrap_or(traits);
                // A retired node (re-created under a new uuid) stays unschedulable.
                sqlx::query("UPDATE hosts SET disabled = $1, forced_down = $2, traits = $3 WHERE id = $4 AND NOT retired")
                    .bind(*disabled)
                    .bind(*forced_down)
                    .bind(traits)
                    .bind(id)
                    .execute(&mut **tx)
                    .await?;
            }
            touched.services.push(noted);
            touched.reload.extend(ids.into_iter().map(HostId));
            Ok(Applied::Applied)
        }

        /// nova-compute says the instance left `host` (`delete_instance_info`): a move's
        /// source held there is released. The instance's own allocation is not: the cast is
        /// Nova's scheduler's instance tracking, not usage, and `_confirm_resize` sends it
        /// from `self.host` even when the instance was resized on that same host and stays
        /// there (releasing it counted the host empty). Deletes and shelve offloads release
        /// with their own notifications (`instance.delete.end`, `.shelve_offload.end`), a
        /// move to an unclaimed host with the notification that places it there, and what
        /// Placement freed otherwise with the repair.
        async fn left_host(
            tx: &mut sqlx::Transaction<'_, $db>,
            cx: Ctx<'_>,
            host: &str,
            instance_uuid: &str,
        ) -> Result<Applied, ApplyError> {
            let Ctx { table, touched, .. } = cx;
            let ids = service_ids!(tx, table, host);
            if ids.is_empty() {
                return Err(rejected(format!("unknown host {host:?}")));
            }
            // A move's source held here: nova-compute's `confirm_resize` sends this cast from
            // the source once it dropped the source's allocation, so the move ended (as
            // `instance.resize_confirm.end` says); the instance keeps its destination.
            for id in &ids {
                let held = release_held_in_tx!($db, *tx, instance_uuid, on *id);
                touched.reload.extend(held.into_iter().map(|(h, _)| h));
            }
            Ok(Applied::Applied)
        }

        /// These instances run on `host`: their claims there are confirmed.
        async fn run_on(
            tx: &mut sqlx::Transaction<'_, $db>,
            cx: Ctx<'_>,
            host: &str,
            instance_uuids: &[String],
        ) -> Result<Applied, ApplyError> {
            let Ctx { table, m, touched, .. } = cx;
            let ids = service_ids!(tx, table, host);
            if ids.is_empty() {
                return Err(rejected(format!("unknown host {host:?}")));
            }
            touched.reload.extend(ids.iter().copied().map(HostId));
            // Neither cast releases or moves an allocation (issue 40, item 1): nova-compute
            // lists its instances by `instance.host`, which a build in flight and a move
            // until `finish_resize` do not name yet, so a claim missing from the list may
            // still be on its way, and an instance listed here while the ledger holds it
            // elsewhere may be the source of a move whose destination is already claimed.
            // Nova's own scheduler frees nothing on a mismatch either (usage lives in
            // Placement); deletes come with `instance.delete.end`, and Placement's repair
            // drops what vanished. What a listed instance on this host does tell: it runs
            // here, so its claim is confirmed and an imported consumer is an instance.
            for uuid in instance_uuids {
                let row = sqlx::query("SELECT host_id, confirmed, instance FROM allocations WHERE instance_uuid = $1")
                    .bind(uuid)
                    .fetch_optional(&mut **tx)
                    .await?;
                let Some(row) = row else {
                    tracing::debug!(instance = %uuid, host = %host, "instance unknown to the ledger; its size arrives with instance.create.end");
                    continue;
                };
                let current: i64 = row.try_get(0)?;
                let confirmed: bool = row.try_get(1)?;
                let instance: bool = row.try_get(2)?;
                if !ids.contains(&current) {
                    tracing::debug!(instance = %uuid, host = %host, event = %m.kind, "instance info names an instance the ledger holds elsewhere; left as it is");
                    continue;
                }
                if !confirmed || !instance {
                    sqlx::query(CONFIRM_CLAIM).bind(uuid).bind(current).execute(&mut **tx).await?;
                    // A move's destination listing the instance: it finished there (the
                    // listing is by `instance.host`), as `instance.resize_finish.end` says.
                    let sources: Vec<i64> = sqlx::query_scalar(START_RESIZE_LISTED)
                        .bind(uuid)
                        .bind(current)
                        .fetch_all(&mut **tx)
                        .await?;
                    touched.reload.extend(sources.into_iter().map(HostId));
                }
            }
            Ok(Applied::Applied)
        }
        }
    };
}

/// What the write of one message's effect reads and notes besides its transaction.
struct Ctx<'a> {
    table: &'a HostTable,
    m: &'a Message,
    now_ms: i64,
    touched: &'a mut Touched,
}

define_effect!(sqlite_effects, sqlx::Sqlite);
define_effect!(postgres_effects, sqlx::Postgres);
pub(super) use postgres_effects::apply as apply_postgres;
pub(super) use sqlite_effects::apply as apply_sqlite;

/// Registers the hosts of the JSON array `hosts` (see `Dialect::UPSERT_HOSTS`); answers
/// `(id, uuid)` of each.
async fn upsert_hosts_sqlite(
    conn: &mut sqlx::SqliteConnection,
    hosts: &str,
    now_ms: i64,
) -> Result<Vec<(i64, String)>, sqlx::Error> {
    use crate::ledger::dialect::{Dialect, HOST_IDS_SQLITE};
    sqlx::query(<sqlx::Sqlite as Dialect>::UPSERT_HOSTS)
        .bind(hosts)
        .bind(now_ms)
        .execute(&mut *conn)
        .await?;
    let ids: String = sqlx::query_scalar(HOST_IDS_SQLITE)
        .bind(hosts)
        .fetch_one(&mut *conn)
        .await?;
    serde_json::from_str(&ids).map_err(|e| sqlx::Error::Protocol(format!("host ids: {e}")))
}

/// [`upsert_hosts_sqlite`] for PostgreSQL, whose upsert returns the ids itself.
async fn upsert_hosts_postgres(
    conn: &mut sqlx::PgConnection,
    hosts: &str,
    now_ms: i64,
) -> Result<Vec<(i64, String)>, sqlx::Error> {
    use crate::ledger::dialect::Dialect;
    sqlx::query_as(<sqlx::Postgres as Dialect>::UPSERT_HOSTS)
        .bind(hosts)
        .bind(now_ms)
        .fetch_all(&mut *conn)
        .await
}

/// The JSON text of a batch parameter (rows as arrays).
fn to_json<T: serde::Serialize>(rows: &T) -> Result<String, sqlx::Error> {
    serde_json::to_string(rows).map_err(|e| sqlx::Error::Protocol(format!("batch rows: {e}")))
}

macro_rules! define_flush {
    ($name:ident, $db:ty, $upsert_hosts:ident, $lock_order:literal) => {
        /// Writes what `touched` staged, inside the batch's transaction: the registrations
        /// with four statements (hosts, inventories, unreported classes zeroed, unused empty
        /// rows dropped: what `upsert_host!` does per host), the heartbeats with one.
        pub(super) async fn $name(
            tx: &mut sqlx::Transaction<'_, $db>,
            table: &HostTable,
            touched: &mut Touched,
        ) -> Result<(), sqlx::Error> {
            type D = $db;
            let mut staged = std::mem::take(&mut touched.staged);
            touched.staged_at.clear();
            if $lock_order {
                // Rows locked in the order claim rounds lock them, by host id (hosts not in
                // the ledger yet last, in the order they came): a batch and another process'
                // claims or batch that take two of the same hosts in opposite orders
                // deadlock, and one of them is rolled back and tried again. (SQLite has one
                // writer; there the order numbers new hosts, as the hot writer does.)
                staged.sort_by_cached_key(|(r, ..)| {
                    table.by_uuid(&r.uuid).map_or(i64::MAX, |h| h.id.0)
                });
            }
            // A registration of (host, node) another node holds replaces it or retires it
            // first; one of a retired node writes nothing.
            if staged.iter().any(|(r, ..)| may_take_over(table, r)) {
                let mut free = Vec::with_capacity(staged.len());
                for s in staged {
                    if may_take_over(table, &s.0) {
                        match takeover!(&mut **tx, &s.0) {
                            Takeover::OwnRetired => continue,
                            Takeover::Free => {}
                            replaced => touched.replaced(&s.0, replaced),
                        }
                    }
                    free.push(s);
                }
                staged = free;
            }
            if let Some((_, now_ms, _)) = staged.last() {
                let now_ms = *now_ms;
                // Tuples serialize as JSON arrays, written straight into the text (no
                // `Value` tree, no copy of the names).
                let hosts: Vec<_> = staged
                    .iter()
                    .map(|(r, ..)| {
                        (
                            &r.host,
                            &r.node,
                            &r.uuid,
                            &r.availability_zone,
                            r.up,
                            r.disabled,
                            r.traits_json(),
                            r.aggregates_json(),
                        )
                    })
                    .collect();
                let rows = $upsert_hosts(&mut **tx, &to_json(&hosts)?, now_ms).await?;
                let ids: std::collections::HashMap<String, i64> =
                    rows.into_iter().map(|(id, uuid)| (uuid, id)).collect();
                let mut inventories = Vec::new();
                let mut written = Vec::with_capacity(staged.len());
                let mut reload = Vec::new();
                for (reg, ..) in &staged {
                    let Some(&id) = ids.get(&reg.uuid) else {
                        return Err(sqlx::Error::Protocol(format!(
                            "no host id returned for compute node {}",
                            reg.uuid
                        )));
                    };
                    written.push(id);
                    let known = table.by_uuid(&reg.uuid).is_some_and(|h| h.id.0 == id);
                    match as_loaded(reg).filter(|_| known) {
                        Some(profile) => {
                            touched
                                .patched
                                .push(patch(HostId(id), profile, reg, now_ms))
                        }
                        None => reload.push(HostId(id)),
                    }
                    for (class, inv) in reg.last_reports() {
                        inventories.push(inventory_columns(id, class, inv));
                    }
                }
                let inventories = to_json(&inventories)?;
                let written_json = crate::ledger::json_list(written.iter().copied());
                sqlx::query(<D as crate::ledger::dialect::Dialect>::UPSERT_INVENTORIES)
                    .bind(&inventories)
                    .execute(&mut **tx)
                    .await?;
                sqlx::query(<D as crate::ledger::dialect::Dialect>::ZERO_UNREPORTED_CLASSES)
                    .bind(&written_json)
                    .bind(&inventories)
                    .execute(&mut **tx)
                    .await?;
                sqlx::query(<D as crate::ledger::dialect::Dialect>::DROP_UNUSED_EMPTY_OF)
                    .bind(&written_json)
                    .execute(&mut **tx)
                    .await?;
                touched.reload.extend(reload);
            }
            let mut beats = std::mem::take(&mut touched.unwritten);
            if !beats.is_empty() {
                if $lock_order {
                    beats.sort_unstable_by_key(|b| b.id);
                }
                let rows: Vec<_> = beats
                    .iter()
                    .map(|b| (b.id.0, i64::from(b.up), i64::from(b.disabled), b.seen_ms))
                    .collect();
                sqlx::query(<D as crate::ledger::dialect::Dialect>::HEARTBEATS)
                    .bind(to_json(&rows)?)
                    .execute(&mut **tx)
                    .await?;
            }
            Ok(())
        }
    };
}

define_flush!(flush_sqlite, sqlx::Sqlite, upsert_hosts_sqlite, false);
define_flush!(flush_postgres, sqlx::Postgres, upsert_hosts_postgres, true);

/// An inventory row's columns in the order the inventory upserts take them (the batch's JSON
/// rows and the hot writer's bound parameters): host id, class, total, reserved, min_unit,
/// max_unit, step_size, allocation_ratio, usable.
fn inventory_columns<'a>(
    id: i64,
    class: &'a str,
    inv: &crate::domain::Inventory,
) -> (i64, &'a str, i64, i64, i64, i64, i64, f64, i64) {
    let (total, reserved, min_unit, max_unit, step, ratio, usable) = inventory_values(inv);
    (
        id, class, total, reserved, min_unit, max_unit, step, ratio, usable,
    )
}

/// The columns of an inventory row that a registration writes, after its key.
fn inventory_values(inv: &crate::domain::Inventory) -> InventoryValues {
    (
        inv.total,
        inv.reserved,
        inv.min_unit,
        inv.max_unit,
        inv.step_size,
        inv.allocation_ratio,
        inv.usable(),
    )
}

/// SQLite's statements of [`flush_rusqlite`], one row each, bound parameters (prepared once
/// per connection and reused: no JSON text to build, print back and parse again).
///
/// No `RETURNING`: SQLite runs it as a trigger, which makes the upsert open a statement
/// journal, and inside the hot writer's savepoint closing one walks the whole in-memory
/// sub-journal of the batch (a third of the writer's time in a profile, growing with the
/// batch); the id is looked up by its unique uuid instead.
const UPSERT_HOST_ROW: &str = "INSERT INTO hosts (host, node, uuid, availability_zone, up, \
    disabled, last_seen_ms, traits, aggregates) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) \
    ON CONFLICT (uuid) DO UPDATE SET host = excluded.host, node = excluded.node, \
    availability_zone = excluded.availability_zone, up = excluded.up, \
    disabled = excluded.disabled, last_seen_ms = excluded.last_seen_ms, \
    traits = excluded.traits, aggregates = excluded.aggregates";

const HOST_ID_OF_UUID: &str = "SELECT id FROM hosts WHERE uuid = ?1";

/// What [`UPSERT_HOST_ROW`] writes into the row of a host the ledger holds, by the id its uuid
/// was found with (`?10`; the uuid `?3` is the row's), with the same parameters: an update
/// costs less than an insert that conflicts (the uuid's index probed twice, the
/// `AUTOINCREMENT` counter read and written).
const UPDATE_HOST_ROW: &str = "UPDATE hosts SET host = ?1, node = ?2, availability_zone = ?4, \
    up = ?5, disabled = ?6, last_seen_ms = ?7, traits = ?8, aggregates = ?9 \
    WHERE id = ?10 AND uuid = ?3";

/// [`UPDATE_HOST_ROW`] for a row that keeps its names (the usual re-registration): the
/// `UNIQUE (host, node)` index is left alone, where setting them, even to the same values,
/// makes SQLite delete and insert the row's entry in it. No row when they changed.
const UPDATE_HOST_ROW_SAME_NAMES: &str = "UPDATE hosts SET availability_zone = ?4, up = ?5, \
    disabled = ?6, last_seen_ms = ?7, traits = ?8, aggregates = ?9 \
    WHERE id = ?10 AND uuid = ?3 AND host = ?1 AND node = ?2";

/// The host's inventory rows as they are before its registration is written.
const INVENTORY_ROWS_OF: &str = "SELECT resource_class, total, reserved, min_unit, max_unit, \
    step_size, allocation_ratio, usable, used FROM inventories WHERE host_id = ?1";

/// As `Dialect::UPSERT_INVENTORIES` for one row: a row the registration repeats stays unwritten.
const UPSERT_INVENTORY_ROW: &str = concat!(
    "INSERT INTO inventories (host_id, resource_class, total, reserved, min_unit, max_unit, \
     step_size, allocation_ratio, usable) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ",
    crate::ledger::dialect::sqlite_inventory_upsert!()
);

/// [`UPSERT_INVENTORY_ROW`]'s update alone, with its parameters, for a row known to be there.
const UPDATE_INVENTORY_ROW: &str = "UPDATE inventories SET total = ?3, reserved = ?4, \
    min_unit = ?5, max_unit = ?6, step_size = ?7, allocation_ratio = ?8, usable = ?9 \
    WHERE host_id = ?1 AND resource_class = ?2";

const ZERO_CLASS: &str = "UPDATE inventories SET total = 0, reserved = 0, usable = 0 \
    WHERE host_id = ?1 AND resource_class = ?2";

const DROP_CLASS: &str = "DELETE FROM inventories WHERE host_id = ?1 AND resource_class = ?2";

const HEARTBEAT_ROW: &str =
    "UPDATE hosts SET up = ?2, disabled = ?3, last_seen_ms = ?4 WHERE id = ?1";

/// A host row's parameters as [`UPSERT_HOST_ROW`] (the first nine) and [`UPDATE_HOST_ROW`]
/// (`id` as the tenth) number them.
// `&String`, not `&str`: a `&dyn ToSql` is made of a sized value.
#[allow(clippy::ptr_arg)]
fn host_row<'a>(
    reg: &'a HostRegistration,
    now_ms: &'a i64,
    traits: &'a String,
    aggregates: &'a String,
    id: &'a Option<i64>,
) -> [&'a dyn rusqlite::ToSql; 10] {
    [
        &reg.host,
        &reg.node,
        &reg.uuid,
        &reg.availability_zone,
        &reg.up,
        &reg.disabled,
        now_ms,
        traits,
        aggregates,
        id,
    ]
}

/// [`flush_sqlite`] on a connection of SQLite's hot writer (`ledger::hot`), as direct calls of
/// prepared statements with bound parameters: per registration an update of its host row by
/// the id the table knows (else by the id its uuid is looked up with; an upsert for a host
/// new to the ledger), its inventory rows as they were,
/// an upsert per reported class whose row it changes, and only when a class is no longer
/// reported or left empty, the update or delete `flush_sqlite`'s statements make of it; per
/// heartbeat one update. Leaves the ledger and `touched` exactly as
/// [`flush_sqlite`] does.
pub(super) fn flush_rusqlite(
    db: &rusqlite::Connection,
    table: &HostTable,
    touched: &mut Touched,
) -> rusqlite::Result<()> {
    let staged = std::mem::take(&mut touched.staged);
    touched.staged_at.clear();
    if let Some((_, now_ms, _)) = staged.last() {
        let now_ms = *now_ms;
        KnownRows::with(db, |known| {
            write_registrations(db, table, touched, known, staged, now_ms)
        })?;
    }
    let beats = std::mem::take(&mut touched.unwritten);
    if !beats.is_empty() {
        let mut beat = db.prepare_cached(HEARTBEAT_ROW)?;
        for b in &beats {
            beat.execute(rusqlite::params![b.id.0, b.up, b.disabled, b.seen_ms])?;
        }
    }
    Ok(())
}

/// The registrations of [`flush_rusqlite`], `known` the writer's memory of inventory rows.
fn write_registrations(
    db: &rusqlite::Connection,
    table: &HostTable,
    touched: &mut Touched,
    known: &mut KnownRows,
    staged: Vec<(HostRegistration, i64, Option<Prepared>)>,
    now_ms: i64,
) -> rusqlite::Result<()> {
    let mut statements = RegistrationStatements::prepare(db)?;
    // (class, values, used) of the host's rows before the registration, when read.
    let mut before: Vec<(String, InventoryValues, i64)> = Vec::new();
    for (reg, _, prepared) in staged {
        if may_take_over(table, &reg) {
            match takeover_rusqlite(db, &reg)? {
                Takeover::OwnRetired => continue,
                Takeover::Free => {}
                replaced => touched.replaced(&reg, replaced),
            }
        }
        let Prepared {
            traits,
            aggregates,
            profile,
        } = prepared.unwrap_or_else(|| Prepared::of(&reg));
        let reg = &reg;
        let in_table = table.by_uuid(&reg.uuid).map(|h| h.id.0);
        let id = statements.write_host(reg, now_ms, &traits, &aggregates, in_table)?;
        let settled = in_table == Some(id);
        match profile.filter(|_| settled) {
            Some(profile) => touched
                .patched
                .push(patch(HostId(id), profile, reg, now_ms)),
            None => touched.reload.push(HostId(id)),
        }
        let classes = reg.last_reports();
        // Every class of the rows the writer knows is reported again, none of them left
        // empty: nothing to zero or drop, and the rows need not be read.
        let repeated = known.get(id).filter(|rows| {
            classes.iter().all(|(_, inv)| inv.total > 0)
                && rows
                    .iter()
                    .all(|(c, _)| classes.iter().any(|(k, _)| k == c))
        });
        if let Some(rows) = repeated {
            for (class, inv) in &classes {
                let prior = rows.iter().find(|(c, _)| c == class).map(|(_, v)| v);
                statements.write_class(id, class, inv, prior)?;
            }
            known.set(
                id,
                classes
                    .iter()
                    .map(|(c, inv)| (c.as_str(), inventory_values(inv))),
            );
            continue;
        }
        statements.read_rows(id, &mut before)?;
        for (class, inv) in &classes {
            let prior = before.iter().find(|(c, ..)| c == class).map(|(_, v, _)| v);
            statements.write_class(id, class, inv, prior)?;
        }
        let after = settle_unreported(db, id, &classes, &before)?;
        known.set(id, after);
    }
    Ok(())
}

/// The statements [`write_registrations`] runs, prepared once per group of registrations.
struct RegistrationStatements<'c> {
    upsert_host: rusqlite::CachedStatement<'c>,
    host_id: rusqlite::CachedStatement<'c>,
    rows_of: rusqlite::CachedStatement<'c>,
    upsert_inventory: rusqlite::CachedStatement<'c>,
    update_inventory: rusqlite::CachedStatement<'c>,
    update_host: rusqlite::CachedStatement<'c>,
    update_same_names: rusqlite::CachedStatement<'c>,
}

impl<'c> RegistrationStatements<'c> {
    fn prepare(db: &'c rusqlite::Connection) -> rusqlite::Result<Self> {
        Ok(RegistrationStatements {
            upsert_host: db.prepare_cached(UPSERT_HOST_ROW)?,
            host_id: db.prepare_cached(HOST_ID_OF_UUID)?,
            rows_of: db.prepare_cached(INVENTORY_ROWS_OF)?,
            upsert_inventory: db.prepare_cached(UPSERT_INVENTORY_ROW)?,
            update_inventory: db.prepare_cached(UPDATE_INVENTORY_ROW)?,
            update_host: db.prepare_cached(UPDATE_HOST_ROW)?,
            update_same_names: db.prepare_cached(UPDATE_HOST_ROW_SAME_NAMES)?,
        })
    }

    /// Writes `reg`'s host row and answers its id: the id the table knows the host by
    /// (`in_table`), updated without looking it up (its names left alone when they are the
    /// row's); a row the update misses (the table not yet settled on it) is looked up by its
    /// uuid, and a host new to the ledger inserted and its id read back.
    // `&String`: what [`host_row`] binds.
    #[allow(clippy::ptr_arg)]
    fn write_host(
        &mut self,
        reg: &HostRegistration,
        now_ms: i64,
        traits: &String,
        aggregates: &String,
        in_table: Option<i64>,
    ) -> rusqlite::Result<i64> {
        let row = |id| host_row(reg, &now_ms, traits, aggregates, id);
        if let Some(id) = in_table {
            if self.update_same_names.execute(&row(&in_table)[..])? == 1 {
                return Ok(id);
            }
            if self.update_host.execute(&row(&in_table)[..])? == 1 {
                return Ok(id);
            }
        }
        let existing: Option<i64> = self
            .host_id
            .query_row([&reg.uuid], |row| row.get(0))
            .optional()?;
        match existing {
            Some(id) => {
                self.update_host.execute(&row(&existing)[..])?;
                Ok(id)
            }
            None => {
                self.upsert_host.execute(&row(&existing)[..9])?;
                self.host_id.query_row([&reg.uuid], |row| row.get(0))
            }
        }
    }

    /// Writes a reported class whose row was `prior` (`None`: no row).
    fn write_class(
        &mut self,
        id: i64,
        class: &str,
        inv: &crate::domain::Inventory,
        prior: Option<&InventoryValues>,
    ) -> rusqlite::Result<()> {
        let row = inventory_columns(id, class, inv);
        match prior {
            // A row the registration repeats is left as it is, as the upsert's own `WHERE`
            // would leave it, without running the statement (a re-registration usually
            // changes one class of several).
            Some(v) if *v == inventory_values(inv) => {}
            // A row that is there is updated (an upsert first tries to insert it).
            Some(_) if self.update_inventory.execute(row)? == 1 => {}
            _ => {
                self.upsert_inventory.execute(row)?;
            }
        }
        Ok(())
    }

    /// Host `id`'s inventory rows as (class, values, used), into `before`.
    fn read_rows(
        &mut self,
        id: i64,
        before: &mut Vec<(String, InventoryValues, i64)>,
    ) -> rusqlite::Result<()> {
        before.clear();
        let mut rows = self.rows_of.query([id])?;
        while let Some(row) = rows.next()? {
            let values = (
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
                row.get(5)?,
                row.get(6)?,
                row.get(7)?,
            );
            before.push((row.get(0)?, values, row.get(8)?));
        }
        Ok(())
    }
}

/// What `ZERO_UNREPORTED_CLASSES` and `DROP_UNUSED_EMPTY_OF` leave of host `id`'s rows
/// `before` once `classes` are written: a class no longer reported gets no capacity, and any
/// row without capacity nor use goes. Answers the rows as they are then, for the writer's
/// memory.
fn settle_unreported<'a>(
    db: &rusqlite::Connection,
    id: i64,
    classes: &[&'a (String, crate::domain::Inventory)],
    before: &'a [(String, InventoryValues, i64)],
) -> rusqlite::Result<Vec<(&'a str, InventoryValues)>> {
    let mut after: Vec<(&str, InventoryValues)> = Vec::with_capacity(classes.len());
    for (class, values, used) in before {
        let (total, reserved, min_unit, max_unit, step, ratio, usable) = *values;
        let nonzero = total != 0 || reserved != 0 || usable != 0;
        let reported = classes.iter().find(|(c, _)| c == class);
        let empty = reported.is_none_or(|(_, inv)| inv.total == 0);
        if empty && *used == 0 {
            db.prepare_cached(DROP_CLASS)?
                .execute(rusqlite::params![id, class])?;
            continue;
        }
        match reported {
            Some((_, inv)) => after.push((class, inventory_values(inv))),
            None => {
                if nonzero {
                    db.prepare_cached(ZERO_CLASS)?
                        .execute(rusqlite::params![id, class])?;
                }
                after.push((class, (0, 0, min_unit, max_unit, step, ratio, 0)));
            }
        }
    }
    for &entry in classes {
        let (class, inv) = entry;
        let new = !before.iter().any(|(c, ..)| c == class);
        if new && inv.total == 0 {
            db.prepare_cached(DROP_CLASS)?
                .execute(rusqlite::params![id, class])?;
        } else if new {
            after.push((class, inventory_values(inv)));
        }
    }
    Ok(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amounts(pairs: &[(ClassId, i64)]) -> Resources {
        Resources::from_pairs(pairs.iter().copied())
    }

    #[test]
    fn a_notification_confirms_a_claim_of_its_size_dedicated_cpus_and_volumes_included() {
        use ClassId as C;
        let flavor = amounts(&[(C::VCPU, 2), (C::MEMORY_MB, 2048), (C::DISK_GB, 20)]);
        let dedicated = amounts(&[(C::PCPU, 2), (C::MEMORY_MB, 2048), (C::DISK_GB, 20)]);
        let from_volume = amounts(&[(C::VCPU, 2), (C::MEMORY_MB, 2048)]);
        let step = Placed::ResizeFinished;
        assert!(only_confirms(step, &flavor, &flavor));
        assert!(
            only_confirms(step, &dedicated, &flavor),
            "PCPU is the flavor's vcpus"
        );
        assert!(
            only_confirms(step, &from_volume, &flavor),
            "no local disk claimed"
        );
        let smaller = amounts(&[(C::VCPU, 1), (C::MEMORY_MB, 2048), (C::DISK_GB, 20)]);
        assert!(
            !only_confirms(step, &smaller, &flavor),
            "another size replaces"
        );
        let less_memory = amounts(&[(C::VCPU, 2), (C::MEMORY_MB, 1024), (C::DISK_GB, 20)]);
        assert!(!only_confirms(step, &less_memory, &flavor));
        let other_disk = amounts(&[(C::VCPU, 2), (C::MEMORY_MB, 2048), (C::DISK_GB, 10)]);
        assert!(!only_confirms(step, &other_disk, &flavor));
        assert!(
            only_confirms(Placed::Built, &smaller, &flavor),
            "a build only confirms"
        );
    }
}
